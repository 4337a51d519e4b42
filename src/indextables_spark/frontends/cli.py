"""`indextables`: the maintenance commands from the command line (no Spark needed). A generic reader
of ops/registry.py: each operation with a `Cli` is a subcommand, its arguments fill its command.

    indextables describe-state PATH            indextables checkpoint PATH / compact PATH
    indextables describe-log PATH [--all]      indextables history PATH / files PATH [--where …]
    indextables merge-splits PATH [--where P] [--target-size 100M] [--max-dest-splits N]
                                  [--max-source-splits-per-merge N]
    indextables purge PATH [--older-than 7d] [--tx-log-retention 30d] [--dry-run]
    indextables truncate-time-travel PATH [--dry-run]
    indextables drop-partitions PATH --where P
    indextables repair SOURCE/_transaction_log TARGET
    indextables convert PATH [--dry-run]       (rewrite the reference implementation's splits as ours)
    indextables sql "MERGE SPLITS '/path' TARGET SIZE 100M"   (any command text of it.sql)
    indextables search PATH QUERY [--where P] [--columns c1,c2] [--limit N] [--snippets f]
                                  [--version V] [--json | --csv]

`search` prints the matching rows (IndexTable.search; QUERY `*` = every row): a table on a
terminal (at most --max-rows rows shown), `--json` one JSON object per row (JSON Lines), `--csv` CSV
with a header (nested values as JSON). With --limit: the top N by relevance, with a `_score` column.

Every subcommand takes `--json` (the operation's result as JSON on stdout, for machines),
`-o KEY=VALUE` (repeatable: any `spark.indextables.*` option, with or without the prefix, e.g.
credentials or `purge.retentionCheckEnabled=false`) and `--no-progress`. Long operations (merge,
purge, repair, convert) show a progress bar on stderr when it is a terminal.

Exit codes: 0 success; 1 the operation failed; 2 usage or syntax error, invalid option or
predicate; 3 no table at the path (or the version is gone); 4 a concurrent commit conflicted
(retry).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import pyarrow as pa
import pyarrow.csv as pcsv

from indextables_spark.api.table import IndexTable
from indextables_spark.config.option_checks import warn_unknown_options
from indextables_spark.config.options import Options
from indextables_spark.errors import (
    ConcurrentModificationError,
    IndexTablesError,
    InvalidOptionError,
    QueryParseError,
    SchemaMismatchError,
    TableNotFoundError,
    VersionNotFoundError,
)
from indextables_spark.expr.partition_filter import PartitionFilterError
from indextables_spark.frontends import sql_parser
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import CommandSyntaxError
from indextables_spark.ops import registry
from indextables_spark.ops.registry import Arg, Operation
from indextables_spark.results.record import python_rows

if TYPE_CHECKING:
    from rich.console import Console

    from indextables_spark.config.options import Options
    from indextables_spark.frontends.execute import CommandResult

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4


def parse_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _unit(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type of config/units.py's sizes or durations."""

    def convert(text: str) -> Any:
        from indextables_spark.config.units import UnitError  # lazy: `--help` imports no package code

        try:
            return parse(text)
        except UnitError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def _column_list(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


def _add(parser: argparse.ArgumentParser, arg: Arg) -> None:
    """One registry argument (ops/registry.py Arg) on a subcommand."""
    from indextables_spark.config import units  # lazy: the parsers of sizes and durations

    kwargs: dict[str, Any] = {"help": arg.help}
    if arg.name.startswith("-"):
        kwargs.update(dest=arg.dest, required=arg.required)
    if arg.type == "flag":
        kwargs["action"] = "store_true"
    elif arg.type == "pairs":
        kwargs.update(action="append", type=parse_option, default=[], metavar="COLUMN=MODE")
    elif arg.type == "columns":
        kwargs.update(type=_column_list, default=(), metavar="A,B")
    else:
        types: dict[str, Callable[[str], Any]] = {
            "int": int,
            "positive": _positive,
            "seconds": _seconds,
            "size": _unit(units.parse_size),
            "hours": _unit(units.parse_hours),
        }
        if arg.type in types:
            kwargs["type"] = types[arg.type]
        if arg.choices:
            kwargs["choices"] = list(arg.choices)
        if arg.default is not None:
            kwargs["default"] = arg.default
    parser.add_argument(arg.name, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print the result as JSON (for machines)")
    common.add_argument(
        "-o",
        "--option",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="a spark.indextables.* option (prefix optional); repeatable",
    )
    common.add_argument("--no-progress", action="store_true", help="never show progress bars")

    top = argparse.ArgumentParser(
        prog="indextables", description="Maintenance of indextables tables.", parents=[common]
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cmd(name: str, help_: str, aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, parents=[common], aliases=list(aliases))

    for op in registry.OPERATIONS:
        if op.cli is not None:
            p = cmd(op.cli.name, op.cli.help, op.cli.aliases)
            for arg in op.cli.args:
                _add(p, arg)
    p = cmd("sql", "run a command text, e.g. \"PURGE INDEXTABLE '/t' DRY RUN\"")
    p.add_argument("text")
    p = cmd("search", "print the rows matching a full-text query (`*`: every row)")
    p.add_argument("path")
    p.add_argument("query", help="Tantivy query syntax, e.g. 'body:kestrel AND title:\"data lake\"'; * for all rows")
    p.add_argument("--where", help="SQL-like predicate over any columns, e.g. \"region = 'eu' AND views > 10\"")
    p.add_argument("--columns", type=_names, help="comma-separated columns to print (default: all)")
    p.add_argument("--limit", type=_positive, help="the N best matches by relevance (adds _score)")
    p.add_argument("--snippets", type=_names, help="comma-separated text columns to highlight (adds _snippet)")
    p.add_argument("--version", type=int, default=None, help="read this table version (time travel)")
    p.add_argument("--csv", action="store_true", help="print CSV (header + one line per row)")
    p.add_argument("--max-rows", type=_positive, default=100, help="rows shown in the terminal table (default 100)")
    return top


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


_N = TypeVar("_N", int, float)


def _positive_number(convert: Callable[[str], _N], what: str) -> Callable[[str], _N]:
    """An argument type: the text converted, refused unless a positive number (`what` names it)."""

    def parse(text: str) -> _N:
        try:
            n: _N | None = convert(text)
        except ValueError:
            n = None
        if n is None or not n > 0:  # (NaN too)
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return n

    return parse


_seconds = _positive_number(float, "a positive number of seconds")
_positive = _positive_number(int, "a positive integer")


# ---- running -----------------------------------------------------------------------------------


def _operation(name: str) -> Operation:
    return next(op for op in registry.OPERATIONS if op.cli and name in (op.cli.name, *op.cli.aliases))


def _command(args: argparse.Namespace) -> Any:
    """argparse namespace → the operation's command (the same objects the SQL text parses into)."""

    if args.command == "sql":
        cmd = sql_parser.parse_command(args.text)
        if cmd is None:
            heads = "/".join(
                dict.fromkeys(op.sql.head.split()[0].split("|")[0] for op in registry.OPERATIONS if op.sql)
            )
            raise InvalidOptionError(
                f"not an indextables command: {args.text[:80]!r} (the command line runs {heads} texts)"
            )
        return cmd
    op = _operation(args.command)
    fields = {arg.dest: getattr(args, arg.dest) for arg in op.cli.args} if op.cli else {}
    if "indexing" in fields:
        fields["indexing"] = tuple(fields["indexing"])
    return op.load()(**fields)


def _search(args: argparse.Namespace, options: Options) -> pa.Table:
    t = IndexTable(args.path, options)
    if args.query.strip() == "*":
        if args.limit is not None or args.snippets:
            raise InvalidOptionError("--limit and --snippets need a query (not *): they rank and highlight matches")
        return t.to_arrow(where=args.where, columns=args.columns, version=args.version)
    return t.search(
        args.query,
        where=args.where,
        columns=args.columns,
        limit=args.limit,
        snippets=args.snippets,
        version=args.version,
    )


def _flat_for_csv(table: pa.Table) -> pa.Table:
    """Nested columns (lists, structs, maps) as JSON text: CSV has no nesting."""
    cols = []
    for name, col in zip(table.column_names, table.columns):
        t = col.type
        if pa.types.is_nested(t):
            col = pa.array(
                [None if v is None else json.dumps(_plain(v), default=_json_default) for v in col.to_pylist()],
                pa.string(),
            )
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            col = pa.array([None if v is None else v.hex() for v in col.to_pylist()], pa.string())
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def _plain(v: Any) -> Any:
    """Arrow's map values (lists of pairs) as JSON objects."""
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {str(k): _plain(x) for k, x in v}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _print_rows(out: Console, args: argparse.Namespace, table: pa.Table) -> None:
    if args.csv:
        sys.stdout.flush()
        buf = pa.BufferOutputStream()
        pcsv.write_csv(_flat_for_csv(table), buf)
        sys.stdout.write(buf.getvalue().to_pybytes().decode("utf-8"))
        return
    if args.json:
        for row in table.to_pylist():
            sys.stdout.write(json.dumps({k: _plain(v) for k, v in row.items()}, default=_json_default) + "\n")
        return
    from rich.table import Table  # lazy: keeps `import indextables_spark.frontends.cli` free of rich

    shown = table.slice(0, args.max_rows).to_pylist()
    more = table.num_rows - len(shown)
    title = f"{table.num_rows:,} rows" + (
        f" (first {len(shown)} shown; --max-rows, --json or --csv for all)" if more else ""
    )
    grid = Table(title=title)
    for name in table.column_names:
        grid.add_column(name, overflow="fold", max_width=60)
    for row in shown:
        grid.add_row(*(_search_cell(row[c]) for c in table.column_names))
    out.print(grid)


def _search_cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, (list, dict)):
        return json.dumps(_plain(v), default=_json_default)
    return _cell(v)


def _json_default(o: Any) -> Any:
    from indextables_spark.results.record import Record  # lazy: `--help` imports no package code

    if isinstance(o, Record):  # rows that are not OperationResults (dicts already): their JSON form
        return o.to_dict()
    if isinstance(o, (dt.datetime, dt.date)):
        return o.isoformat()
    if isinstance(o, bytes):
        return o.hex()
    return str(o)


def _print_json(raw: Any) -> None:
    if isinstance(raw, pa.Table):
        raw = python_rows(raw)
    print(json.dumps(raw, default=_json_default, indent=2, sort_keys=False))


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, list):
        if v and isinstance(v[0], dict):
            return f"{len(v)} entries"
        shown = ", ".join(str(x) for x in v[:5])
        return shown + (f", … ({len(v)} in all)" if len(v) > 5 else "")
    if isinstance(v, (dict, tuple)):
        items = v.items() if isinstance(v, dict) else v
        return ", ".join(f"{k}={x}" for k, x in items)
    return str(v)


def _render(console: Console, res: CommandResult) -> None:
    """Many-row results (their row gives the columns to show; --json has all): one table; else one
    property/value table per result, nested lists of records as tables under it."""
    from rich.table import Table  # lazy: keeps `import indextables_spark.frontends.cli` free of rich

    rows = python_rows(res.table)
    wide = res.operation.cli.columns if res.operation.cli else ()
    if wide:
        out = Table(title=f"{res.name} ({len(rows)} rows)", show_lines=False)
        for c in wide:
            out.add_column(c, overflow="fold")
        for r in rows:
            out.add_row(*(_cell(r[c]) for c in wide))
        console.print(out)
        return
    for r in rows:
        out = Table(title=res.name, show_header=False)
        out.add_column("property", style="bold")
        out.add_column("value", overflow="fold")
        nested = []
        for c in res.result.column_names():
            v = r[c]
            if isinstance(v, list) and v and isinstance(v[0], dict):
                nested.append((c, v))
            out.add_row(c, _cell(v))
        console.print(out)
        for name, items in nested:
            sub = Table(title=name)
            keys = list(items[0])
            for k in keys:
                sub.add_column(k, overflow="fold")
            for item in items:
                sub.add_row(*(_cell(item[k]) for k in keys))
            console.print(sub)


class _Bars:
    """Progress callback (stage, done, total) → rich progress bars on stderr."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (  # lazy: keeps `import indextables_spark.frontends.cli` free of rich
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _Bars:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self.progress.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=max(total, 1))
        self.progress.update(self.tasks[stage], completed=done, total=max(total, 1))


def _exit_code(e: Exception) -> int:
    if isinstance(
        e, (CommandSyntaxError, InvalidOptionError, PartitionFilterError, QueryParseError, SchemaMismatchError)
    ):
        return EXIT_USAGE
    if isinstance(e, (TableNotFoundError, VersionNotFoundError)):
        return EXIT_NOT_FOUND
    if isinstance(e, ConcurrentModificationError):
        return EXIT_CONFLICT
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console  # lazy: keeps `import indextables_spark.frontends.cli` free of rich

    args = build_parser().parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    warn_unknown_options(dict(args.option))  # (Options.of checks the prefixed keys only)
    options = Options.of(dict(args.option))
    if args.command == "search" and args.json and args.csv:
        err.print("indextables search: give --json or --csv, not both")
        return EXIT_USAGE
    try:
        if args.command == "search":
            rows = _search(args, options)
            _print_rows(out, args, rows)
            return EXIT_OK
        cmd = _command(args)
        if not args.no_progress and err.is_terminal:
            with _Bars(err) as bars:
                res = execute(cmd, options, progress=bars)
        else:
            res = execute(cmd, options)
    except IndexTablesError as e:
        from rich.markup import escape  # lazy: keeps `import indextables_spark.frontends.cli` free of rich

        err.print(f"[bold red]indextables {args.command}:[/] {type(e).__name__}: {escape(str(e))}", highlight=False)
        return _exit_code(e)
    if args.json:
        _print_json(res.raw)
    else:
        _render(out, res)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - `python -m indextables_spark.frontends.cli`
    sys.exit(main())
