"""`indextables`: the maintenance commands from the command line (no Spark needed). A generic reader
of ops/registry.py: each operation with a `Cli` is a subcommand, its arguments fill its command.

    indextables describe PATH                  (rows, splits, bytes, partitions, columns, versions)
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
purge, repair, convert, build-companion) show a progress bar on stderr when it is a terminal
(api/progress.py, the Python API's default too). Without --json, results
print as tables (frontends/cli_output.py: plain columns when piped, numbers never wrapped).

Exit codes: 0 success; 1 the operation failed; 2 usage or syntax error, invalid option or
predicate; 3 no table at the path (or the version is gone); 4 a concurrent commit conflicted
(retry).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence, TypeVar

import pyarrow as pa

from indextables_spark.api.progress import progress_to
from indextables_spark.api.table import IndexTable
from indextables_spark.config.option_checks import warn_unknown_options
from indextables_spark.config.options import Options
from indextables_spark.config.redaction import redact_text
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
from indextables_spark.frontends.cli_output import print_json, print_rows, render
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import CommandSyntaxError
from indextables_spark.ops import registry
from indextables_spark.ops.registry import Arg, Operation

if TYPE_CHECKING:
    from indextables_spark.config.options import Options

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4


def parse_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():  # the text is not echoed: it may be a secret without its key
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {'no KEY before =' if sep else 'no ='}")
    return key.strip(), value


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose error messages (which quote the arguments given) are redacted."""

    def error(self, message: str) -> NoReturn:
        super().error(redact_text(message))


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
    common = _Parser(add_help=False)
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

    top = _Parser(prog="indextables", description="Maintenance of indextables tables.", parents=[common])
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
            print_rows(out, args, rows)
            return EXIT_OK
        cmd = _command(args)
        with progress_to(False if args.no_progress else None) as bars:  # bars when stderr is a terminal
            res = execute(cmd, options, progress=bars)
    except IndexTablesError as e:
        from rich.markup import escape  # lazy: keeps `import indextables_spark.frontends.cli` free of rich

        err.print(f"[bold red]indextables {args.command}:[/] {type(e).__name__}: {escape(str(e))}", highlight=False)
        return _exit_code(e)
    if args.json:
        print_json(res.raw)
    else:
        render(out, res)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - `python -m indextables_spark.frontends.cli`
    sys.exit(main())
