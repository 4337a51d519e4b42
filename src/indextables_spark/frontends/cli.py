"""`indextables`: the maintenance commands from the command line (no Spark needed).

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
import re
import sys
from typing import Any, Sequence

import pyarrow as pa

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(d|day|days|h|hour|hours)?\s*$", re.IGNORECASE)


def parse_duration_hours(text: str) -> float:
    """`7d`, `36h`, `2 days`, `168` (hours) → hours."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a duration like 7d or 36h, got {text!r}")
    unit = (m.group(2) or "h").lower()
    return float(m.group(1)) * (24.0 if unit.startswith("d") else 1.0)


def parse_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _size(text: str) -> int:
    from indextables_spark.errors import InvalidOptionError
    from indextables_spark.config.options import parse_size

    try:
        return parse_size(text, "--target-size")
    except InvalidOptionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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

    for name, help_ in (
        ("describe-state", "state format, counts, tombstones, needs_compaction, skipped splits"),
        ("checkpoint", "write the V4 Avro state at the latest version"),
        ("compact", "rewrite the state cleanly (no tombstones, partition-sorted)"),
    ):
        cmd(name, help_).add_argument("path")
    p = cmd("describe-log", "one row per transaction log action", aliases=["describe-transaction-log"])
    p.add_argument("path")
    p.add_argument("--all", action="store_true", help="every retained version file (INCLUDE ALL)")
    p = cmd("history", "one row per retained version, newest first")
    p.add_argument("path")
    p.add_argument("--limit", type=int, default=None)
    p = cmd("files", "the live splits")
    p.add_argument("path")
    p.add_argument("--where", help="partition predicate, e.g. \"day = '2024-01-01'\"")
    p.add_argument("--version", type=int, default=None)
    p = cmd("merge-splits", "merge small splits per partition")
    p.add_argument("path")
    p.add_argument("--where", help="partition predicate")
    p.add_argument("--target-size", type=_size, help="e.g. 100M, 2G (default 5G)")
    p.add_argument("--max-dest-splits", type=int)
    p.add_argument("--max-source-splits-per-merge", type=int)
    p = cmd("purge", "delete orphaned splits, old version files, old states, orphan manifests")
    p.add_argument("path")
    p.add_argument("--older-than", type=parse_duration_hours, help="split retention, e.g. 7d (default 168h)")
    p.add_argument("--tx-log-retention", type=parse_duration_hours, help="version file retention (default 30d)")
    p.add_argument("--dry-run", action="store_true")
    p = cmd("truncate-time-travel", "keep only the latest version (irreversible; try --dry-run)")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true")
    p = cmd("drop-partitions", "logically remove the partitions matching a predicate")
    p.add_argument("path")
    p.add_argument("--where", required=True, help="partition predicate (mandatory)")
    p = cmd("repair", "write a clean log of the existing splits to a new location")
    p.add_argument("source", help="the table's _transaction_log directory")
    p.add_argument("target", help="an empty location for the repaired log")
    p = cmd("convert", "rewrite the splits IndexTables4Spark wrote as ours (one commit; time travel kept)")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true", help="only report the reference splits to convert")
    p = cmd("build-companion", "build or sync a search index over a Delta, Iceberg or Parquet table's files")
    p.add_argument("source", help="the source table's path (Iceberg: or its identifier, with --catalog)")
    p.add_argument("location", help="where the companion index lives")
    p.add_argument("--format", choices=["delta", "iceberg", "parquet"], default="delta")
    p.add_argument(
        "--indexing",
        action="append",
        type=parse_option,
        default=[],
        metavar="COLUMN=MODE",
        help="indexing mode of a column (text, string, ...); repeatable",
    )
    p.add_argument("--where", help="partition predicate: index only these partitions")
    p.add_argument("--from-version", type=int, help="Delta: index this version")
    p.add_argument("--from-snapshot", type=int, help="Iceberg: index this snapshot id")
    p.add_argument("--catalog", help="Iceberg: catalog name (properties from -o iceberg.catalog.<name>.<key>=...)")
    p.add_argument("--catalog-type", help="Iceberg: catalog type (sql, rest, glue, ...)")
    p.add_argument("--target-input-size", type=_size, help="source bytes per companion split, e.g. 1G")
    p.add_argument("--dry-run", action="store_true")
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


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


# ---- running -----------------------------------------------------------------------------------


def _command(args) -> Any:
    """argparse namespace → a parser.Command (the same objects the SQL text parses into)."""
    from indextables_spark.frontends import sql_parser as p

    c = args.command
    if c == "describe-state":
        return p.DescribeState(args.path)
    if c == "checkpoint":
        return p.Checkpoint(args.path)
    if c == "compact":
        return p.Compact(args.path)
    if c in ("describe-log", "describe-transaction-log"):
        return p.DescribeTransactionLog(args.path, args.all)
    if c == "merge-splits":
        return p.MergeSplits(
            args.path, args.where, args.target_size, args.max_dest_splits, args.max_source_splits_per_merge
        )
    if c == "purge":
        return p.Purge(args.path, args.older_than, args.tx_log_retention, args.dry_run)
    if c == "truncate-time-travel":
        return p.TruncateTimeTravel(args.path, args.dry_run)
    if c == "drop-partitions":
        return p.DropPartitions(args.path, args.where)
    if c == "repair":
        return p.RepairTransactionLog(args.source, args.target)
    if c == "convert":
        return p.Convert(args.path, args.dry_run)
    if c == "build-companion":
        return p.BuildCompanion(
            args.format,
            args.source,
            args.location,
            args.catalog,
            args.catalog_type,
            tuple(args.indexing),
            args.where,
            args.from_version,
            args.from_snapshot,
            args.target_input_size,
            args.dry_run,
        )
    if c == "sql":
        cmd = p.parse_command(args.text)
        if cmd is None:
            from indextables_spark.errors import InvalidOptionError

            raise InvalidOptionError(
                f"not an indextables command: {args.text[:80]!r} (the command line runs "
                f"CHECKPOINT/COMPACT/DESCRIBE/MERGE SPLITS/PURGE/TRUNCATE/DROP/REPAIR/CONVERT texts)"
            )
        return cmd
    return None


def _table_listing(args, options):
    """history / files: not commands of the SQL grammar, read-only views of the table."""
    from indextables_spark.ops import columns as results
    from indextables_spark.api.table import IndexTable

    t = IndexTable(args.path, options)
    if args.command == "history":
        if not t.exists():
            from indextables_spark.errors import TableNotFoundError

            raise TableNotFoundError(f"no indextables table at {t.storage.uri}")
        rows = t.inspect.history(limit=args.limit)
        return results.HISTORY, results.HISTORY.table(rows), rows
    from indextables_spark.api.inspect import file_row

    files = t.files(args.where, version=args.version) if args.where else t.snapshot(args.version).files
    raw = [f.to_json() for f in files]  # --json: the log's own form of each split
    return results.FILES, results.FILES.table([file_row(f) for f in files]), raw


def _search(args, options) -> pa.Table:
    from indextables_spark.api.table import IndexTable

    t = IndexTable(args.path, options)
    if args.query.strip() == "*":
        if args.limit is not None or args.snippets:
            from indextables_spark.errors import InvalidOptionError

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


def _print_rows(out, args, table: pa.Table) -> None:
    if args.csv:
        import pyarrow.csv as pcsv

        sys.stdout.flush()
        buf = pa.BufferOutputStream()
        pcsv.write_csv(_flat_for_csv(table), buf)
        sys.stdout.write(buf.getvalue().to_pybytes().decode("utf-8"))
        return
    if args.json:
        for row in table.to_pylist():
            sys.stdout.write(json.dumps({k: _plain(v) for k, v in row.items()}, default=_json_default) + "\n")
        return
    from rich.table import Table

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
    if isinstance(o, (dt.datetime, dt.date)):
        return o.isoformat()
    if isinstance(o, bytes):
        return o.hex()
    return str(o)


def _print_json(raw: Any) -> None:
    if isinstance(raw, pa.Table):
        from indextables_spark.ops.columns import python_rows

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


# Columns shown for many-row results (all columns are in --json).
_WIDE = {
    "DESCRIBE TRANSACTION LOG": [
        "version",
        "is_checkpoint",
        "action_type",
        "path",
        "size",
        "num_records",
        "data_change",
        "commit_operation",
        "skip_reason",
    ],
    "HISTORY": [
        "version",
        "timestamp",
        "operation",
        "num_added_files",
        "num_removed_files",
        "num_added_records",
        "added_bytes",
    ],
    "FILES": ["path", "size", "num_records", "num_merge_ops", "added_at_version"],
}


def _render(console, spec, table: pa.Table) -> None:
    from rich.table import Table

    from indextables_spark.ops.columns import python_rows

    rows = python_rows(table)
    if spec.command in _WIDE:
        cols = _WIDE[spec.command]
        out = Table(title=f"{spec.command} ({len(rows)} rows)", show_lines=False)
        for c in cols:
            out.add_column(c, overflow="fold")
        for r in rows:
            out.add_row(*(_cell(r[c]) for c in cols))
        console.print(out)
        return
    for r in rows:
        out = Table(title=spec.command, show_header=False)
        out.add_column("property", style="bold")
        out.add_column("value", overflow="fold")
        nested = []
        for c in spec.columns:
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

    def __init__(self, console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=max(total, 1))
        self.progress.update(self.tasks[stage], completed=done, total=max(total, 1))


def _exit_code(e: Exception) -> int:
    from indextables_spark.frontends.sql_parser import CommandSyntaxError
    from indextables_spark.errors import (
        ConcurrentModificationError,
        InvalidOptionError,
        QueryParseError,
        SchemaMismatchError,
        TableNotFoundError,
        VersionNotFoundError,
    )
    from indextables_spark.expr.partition_filter import PartitionFilterError

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
    from rich.console import Console

    from indextables_spark.frontends.execute import execute
    from indextables_spark.errors import IndexTablesError
    from indextables_spark.config.options import Options

    args = build_parser().parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    options = Options.of(dict(args.option))
    if args.command == "search" and args.json and args.csv:
        err.print("indextables search: give --json or --csv, not both")
        return EXIT_USAGE
    try:
        if args.command == "search":
            rows = _search(args, options)
            _print_rows(out, args, rows)
            return EXIT_OK
        if args.command in ("history", "files"):
            spec, table, raw = _table_listing(args, options)
        else:
            cmd = _command(args)
            if not args.no_progress and err.is_terminal:
                with _Bars(err) as bars:
                    res = execute(cmd, options, progress=bars)
            else:
                res = execute(cmd, options)
            spec, table, raw = res.spec, res.table, res.raw
    except IndexTablesError as e:
        from rich.markup import escape

        err.print(f"[bold red]indextables {args.command}:[/] {type(e).__name__}: {escape(str(e))}", highlight=False)
        return _exit_code(e)
    if args.json:
        _print_json(raw)
    else:
        _render(out, spec, table)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - `python -m indextables_spark.frontends.cli`
    sys.exit(main())
