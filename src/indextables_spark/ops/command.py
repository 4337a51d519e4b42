"""What a command class is (ops/registry.py's rows name one per operation): a frozen dataclass of
the operation's arguments whose `parse` reads its SQL text with a `CommandParser` and whose `run`
runs it with a `Context`, returning its `result` class's rows; the table it names (a path, or a
`TableName` the SQL front ends resolve); and how a table function's or a maintenance method's
values become its fields (`coerced`, `signature`).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Protocol, Sequence

from indextables_spark.config.options import Options, parse_size
from indextables_spark.core.log.maintenance.shared_logs import shared_log

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.core.log.read.table_log import TransactionLog
    from indextables_spark.results.record import ProgressCallback, Record

_PLAIN_IDENT = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class TableName:
    """A table identifier where a command takes a table (`t`, `db.t`, `catalog.db.t`), as in the
    reference's grammar; `it.sql` / `spark.sql` resolve it to the table's path through the Spark
    catalog (spark/table_names.py) before the command runs."""

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join(p if _PLAIN_IDENT.fullmatch(p) else "`" + p.replace("`", "``") + "`" for p in self.parts)


Target = str | TableName
"""Where a command takes a table: a quoted path, or a table name still to be resolved."""


# ---- what a command's parse() reads with (frontends/sql_parser.py implements it) ------------------


class Token(Protocol):
    @property
    def kind(self) -> str: ...  # word, str, bq, num, op, punct, other, end
    @property
    def text(self) -> str: ...  # raw text (quotes included)
    @property
    def pos(self) -> int: ...
    @property
    def value(self) -> str: ...  # unquoted string / upper-cased word / number text
    def is_word(self, *words: str) -> bool: ...
    def describe(self) -> str: ...


class CommandParser(Protocol):
    """The parser primitives a command's `parse` uses; errors name the token's position."""

    def peek(self, k: int = 0) -> Token: ...
    def next(self) -> Token: ...
    def error(self, message: str, tok: Token | None = None) -> Exception: ...
    def expect(self, *words: str, what: str | None = None) -> Token: ...
    def accept(self, *words: str) -> bool: ...
    def path(self, what: str = "a quoted table path") -> str: ...
    def target(self) -> Target: ...
    def positive_int(self, what: str) -> int: ...
    def whole_number(self, what: str) -> int: ...
    def size(self, clause: str) -> int: ...
    def hours(self, clause: str) -> float: ...
    def predicate(self, stops: tuple[tuple[str, ...], ...] = ()) -> str: ...
    def once(self, seen: set[str], clause: str, tok: Token) -> None: ...
    def dry_run(self) -> bool: ...


# ---- what a command runs with and returns ---------------------------------------------------------


def log_at(path: str, options: Options) -> TransactionLog:
    """The process's shared log of a table, with this package's post-commit maintenance (Context's
    default opener: IndexTable's logs are the same ones)."""
    return shared_log(path, options)


@dataclass(frozen=True)
class Context:
    """What an operation runs with besides its command's fields."""

    options: Options
    spark: Any = None  # a SparkSession: operations that can run as a Spark job do (MERGE SPLITS, the caches)
    progress: ProgressCallback | None = None
    table: TransactionLog | None = None  # the table's log when the caller has it open (IndexTable.maintenance)
    open_log: Callable[[str, Options], TransactionLog] = log_at  # the executor gives IndexTable's shared logs

    def path(self, target: Target) -> str:
        """A command's table as a path: table names are resolved before (it.sql, spark.sql)."""
        if isinstance(target, TableName):
            from indextables_spark.errors import InvalidOptionError  # lazy: errors only on this path

            raise InvalidOptionError(
                f"table name {target}: only it.sql / spark.sql resolve table names (through the Spark catalog); "
                f"give the table's path in quotes here"
            )
        return target

    def log(self, target: Target) -> TransactionLog:
        """The transaction log of the command's table (the open one when given)."""
        path = self.path(target)
        return self.table if self.table is not None else self.open_log(path, self.options)


@dataclass(frozen=True)
class Listing:
    """A many-row output whose JSON form (`--json`) is not its rows (`files`: the log's own form)."""

    rows: Sequence[Record]
    raw: Any


Output = typing.Union["Record", "Sequence[Record]", "pa.Table", Listing]
"""What `run` returns: one result, several (one per host, …), an Arrow table of `result` rows, or a Listing."""


class Command(Protocol):
    """The class a row names: a frozen dataclass of the operation's arguments."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # a dataclass: dataclasses.replace takes it
    result: ClassVar[type[Record]]

    def run(self, ctx: Context) -> Output: ...


class SqlCommand(Command, Protocol):
    """The command of a row with `sql`: `parse` reads its text after the row's words."""

    @classmethod
    def parse(cls, p: CommandParser) -> Command: ...


def size(default: int | None = None) -> Any:
    """A command field holding bytes: a text (`"100M"`) given to a table function or a
    maintenance method is parsed with config/units.py."""
    return dataclasses.field(default=default, metadata={"unit": "size"})


# ---- a command's table and fields, as the front ends give them ------------------------------------


def table_name_of(cmd: object) -> TableName | None:
    """The table name a command was given instead of a path (None for a path, or no table)."""
    path = getattr(cmd, "path", None)
    return path if isinstance(path, TableName) else None


def with_table_path(cmd: Command, path: str) -> Command:
    """The command with its table name replaced by the table's path."""
    return dataclasses.replace(cmd, path=path)


def coerced(command: type[object], values: Mapping[str, Any]) -> dict[str, Any]:
    """Values given to a table function or a maintenance method, as the command's fields take them:
    texts of size fields parsed (`"100M"`), bools of bool fields (SQL may give 0/1)."""

    hints = typing.get_type_hints(command)
    out = dict(values)
    for f in dataclasses.fields(command):  # type: ignore[arg-type]  # command classes are dataclasses
        v = out.get(f.name)
        if v is None:
            continue
        if f.metadata.get("unit") == "size" and not isinstance(v, int):
            out[f.name] = int(v) if isinstance(v, float) else parse_size(str(v), f.name)
        elif hints[f.name] is bool:
            out[f.name] = bool(v)
    return out


def signature(command: type[Command]) -> inspect.Signature:
    """The command's fields as positional-or-keyword parameters (a table function's arguments)."""
    return inspect.Signature(
        [
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            )
            for f in dataclasses.fields(command)
        ]
    )
