"""What every result is: `Record`, a dataclass whose fields are its Arrow columns (`arrow_schema()`,
`to_row()`: the SQL front ends' typed columns) and whose `to_dict()` is its camelCase JSON form (the
CLI's `--json`); `OperationResult`, a Record that is also a read-only dict of that JSON form; the
field helpers the result classes declare their columns with; and how long-running operations
report progress (indextables_spark.results' docstring: why a result is also a dict).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import types
import typing
from typing import Any, ClassVar, Union

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms", tz="UTC")


@dataclasses.dataclass(frozen=True)
class Progress:
    """One report of a long operation's progress, what a `progress=` callback receives: `done` of
    `total` `unit`s of `operation` (`Progress("writing", 200000, 1000000, "rows")`); `total` is None
    when not known in advance (the rows of a RecordBatchReader). Each report of an operation has a
    `done` at least the last one's; the first says 0 and, when the operation succeeds, the last
    says `total` (when known)."""

    operation: str  # "writing", "indexing", "merging", "converting", "checking splits", "deleting files", …
    done: int
    total: int | None
    unit: str  # "rows", "files", "splits", "steps"


ProgressCallback = typing.Callable[[Progress], None]
"""How long-running operations report progress: a callable taking a Progress."""

ProgressArg = typing.Union[ProgressCallback, typing.Literal[False], None]
"""What a public `progress=` argument takes: a ProgressCallback; None (the default), a progress bar
on stderr when stderr is a terminal and nothing otherwise; False, nothing (api/progress.py)."""


def report(callback: ProgressCallback | None, operation: str, done: int, total: int | None, unit: str) -> None:
    """Hand `callback` (when there is one) a Progress: what the operations call."""
    if callback is not None:
        callback(Progress(operation, done, total, unit))


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() value), to 0.1 ms: results' duration_ms."""

    return round((time.perf_counter() - started) * 1000, 1)


def camel(snake: str) -> str:
    """`num_skipped_files` → `numSkippedFiles` (the dict / JSON key of a field)."""
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def timestamp(default: Any = None) -> Any:
    """A field holding epoch milliseconds, shown as a UTC timestamp column."""
    return dataclasses.field(default=default, metadata={"arrow": TIMESTAMP})


def int32(default: Any = None) -> Any:
    return dataclasses.field(default=default, metadata={"arrow": pa.int32()})


def json_text(default: Any = None) -> Any:
    """A field holding a JSON-like value (dict/list), shown as a JSON string column."""
    return dataclasses.field(default=default, metadata={"arrow": pa.string(), "json": True})


def empty_list() -> Any:
    return dataclasses.field(default_factory=list)


def _arrow_type(hint: Any, owner: str, name: str) -> pa.DataType:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _arrow_type(inner[0], owner, name)
    elif origin in (list, tuple):
        return pa.list_(_arrow_type(args[0], owner, name))
    elif origin is dict and args in ((str, str), (str, str | None)):  # map values may be null
        return pa.map_(pa.string(), pa.string())
    elif hint is bool:
        return pa.bool_()
    elif hint is int:
        return pa.int64()
    elif hint is float:
        return pa.float64()
    elif hint is str:
        return pa.string()
    elif isinstance(hint, type) and issubclass(hint, Record):
        return pa.struct(list(hint.arrow_schema()))
    raise TypeError(f"{owner}.{name}: no column type for {hint!r} (give it metadata 'arrow')")


def _plain(value: Any) -> Any:
    """JSON form of a field value: nested records as camelCase dicts, tuples as lists."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _row_value(value: Any, field: dataclasses.Field[Any]) -> Any:
    if value is None:
        return None
    if field.metadata.get("json"):
        return json.dumps(_plain(value), sort_keys=True, default=str)
    if isinstance(value, Record):
        return value.to_row()
    if isinstance(value, (list, tuple)):
        return [v.to_row() if isinstance(v, Record) else v for v in value]
    return value


class Record:
    """Mixin of the result dataclasses: their columns and their JSON form."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    @functools.cache
    def arrow_schema(cls) -> pa.Schema:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            t = f.metadata.get("arrow") or _arrow_type(hints[f.name], cls.__name__, f.name)
            out.append(pa.field(f.name, t))
        return pa.schema(out)

    @classmethod
    def column_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def to_row(self) -> dict[str, Any]:
        """The SQL row: field name → value as its Arrow column takes it."""
        return {f.name: _row_value(getattr(self, f.name), f) for f in dataclasses.fields(self)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: camelCase keys, nested records as dicts."""
        return {camel(f.name): _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def table(cls, records: typing.Sequence[Record]) -> pa.Table:
        """Records of this class → an Arrow table of its columns."""
        bad = [r for r in records if not isinstance(r, cls)]
        if bad:
            raise TypeError(f"expected {cls.__name__} rows, got {type(bad[0]).__name__}")
        return pa.Table.from_pylist([r.to_row() for r in records], schema=cls.arrow_schema())


def python_value(v: Any, t: pa.DataType) -> Any:
    """Arrow's Python value with maps as dicts (Arrow gives lists of pairs)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: python_value(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t):
        return [python_value(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: x for k, x in v}
    return v


def python_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows of a result table as JSON-ready dicts (maps as dicts)."""
    fields = list(table.schema)
    return [{f.name: python_value(row[f.name], f.type) for f in fields} for row in table.to_pylist()]


def _read_only(self: OperationResult, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(f"{type(self).__name__} is read-only (use dataclasses.replace for a changed copy)")


def _rebuild(cls: type[OperationResult], values: dict[str, Any]) -> OperationResult:
    return cls(**values)


_REPR_LONG = 60  # a list or dict field whose repr is longer shows as its size in a result's repr
_REPR_TEXT = 100  # a text field longer than this is cut in a result's repr


def _repr_value(value: Any) -> str:
    """A field value in a result's repr: lists of records, and long lists and dicts, by their size;
    long texts cut."""
    if isinstance(value, (list, tuple)) and value and (isinstance(value[0], Record) or len(repr(value)) > _REPR_LONG):
        return f"<{len(value):,} item{'s' if len(value) != 1 else ''}>"
    if isinstance(value, dict) and not isinstance(value, Record) and len(repr(value)) > _REPR_LONG:
        return f"<{len(value):,} entr{'ies' if len(value) != 1 else 'y'}>"
    if isinstance(value, str) and len(value) > _REPR_TEXT:
        return repr(value[: _REPR_TEXT - 1] + "…")
    return repr(value)


def _is_default(field: dataclasses.Field[Any], value: Any) -> bool:
    if field.default is not dataclasses.MISSING:
        return bool(value == field.default)
    if field.default_factory is not dataclasses.MISSING:
        return bool(value == field.default_factory())
    return False  # a required field is always shown


def summary_repr(record: Record, names: typing.Sequence[str] = ()) -> str:
    """`Name(field=value, …)` of the fields (those `names`, when given) that are set — required, or
    not at their default — on one line, whatever the result holds (a purge's thousands of paths
    show as their count)."""
    shown = (
        f"{f.name}={_repr_value(v)}"
        for f in dataclasses.fields(record)
        if (not names or f.name in names) and not _is_default(f, v := getattr(record, f.name))
    )
    return f"{type(record).__name__}({', '.join(shown)})"


class OperationResult(Record, dict[str, Any]):
    """Base of the operation results: a frozen dataclass that is also a read-only dict of its
    JSON form (see the package's docstring). Subclasses use `@result`, i.e. `@dataclass(frozen=True,
    eq=False, repr=False)` (dict equality: a result equals the dict of its JSON form; its repr is
    `summary_repr`: one line of the fields that are set)."""

    repr_fields: ClassVar[tuple[str, ...]] = ()  # the fields its repr shows (all: empty)

    def __post_init__(self) -> None:
        dict.update(self, self.to_dict())

    def __repr__(self) -> str:
        return summary_repr(self, self.repr_fields)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickling (Spark tasks return results) rebuilds from the fields, not through __setitem__
        return (_rebuild, (type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}))

    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only
    clear = _read_only
    pop = _read_only
    popitem = _read_only
    setdefault = _read_only
    update = _read_only


result = dataclasses.dataclass(frozen=True, eq=False, repr=False)
"""The decorator of OperationResult subclasses (frozen; dict equality and a one-line repr, see
OperationResult)."""
