"""One row per operation: the SQL parser, the executor, the command line, the SQL table functions
and `IndexTable.maintenance` all read OPERATIONS to offer it (docs/architecture.md, "Adding an operation").

A row names the operation's command class (`"maintenance.merge_splits:MergeSplits"`: class
MergeSplits of ops/maintenance/merge_splits.py), which holds the rest: its fields are the
operation's arguments, `result` its typed result class (whose fields are the output columns),
`parse` reads its SQL text after the words the row gives, and `run` runs it. The rows are plain
data, so that `is_command` (asked of every `spark.sql` text once `it.register` ran) and the command
line's `--help` import no operation; the command class of a row is imported when a text or a call
needs it (`Operation.load`).

What a command class is, and what its `parse` and `run` are given: ops/command.py.
"""

from __future__ import annotations

import functools
import importlib
import re
import typing
from dataclasses import dataclass
from typing import Any, Literal

from indextables_spark.ops.command import Command

# ---- the rows -------------------------------------------------------------------------------------

KW = "INDEXTABLES|INDEXTABLE|TANTIVY4SPARK"
"""The keyword of most commands; the reference's grammar (indexTablesKeyword) also takes TANTIVY4SPARK."""
TABLE_WORDS = "INDEXTABLE|INDEXTABLES"
"""Where the reference's grammar fixes the keyword (PURGE INDEXTABLE)."""
DESCRIBE = f"DESCRIBE|DESC {KW}"
"""The words that start the DESCRIBE commands."""


@dataclass(frozen=True)
class Sql:
    """The words that start an operation's SQL text (space-separated; `A|B`: either, the first named
    in errors). `head` makes a text ours: from there on every mistake is a syntax error, not text
    for `spark.sql`. `then` tells this operation from the others of the same head."""

    head: str
    then: str = ""


ArgType = Literal["text", "int", "positive", "seconds", "size", "hours", "flag", "pairs", "columns"]


@dataclass(frozen=True)
class Arg:
    """One command-line argument: a positional name or a `--flag`, and the command field it fills."""

    name: str
    type: ArgType = "text"
    help: str | None = None
    field: str | None = None  # default: the name without dashes, `-` as `_`
    required: bool = False
    choices: tuple[str, ...] = ()
    default: Any = None

    @property
    def dest(self) -> str:
        return self.field or self.name.lstrip("-").replace("-", "_")


PATH = Arg("path")


@dataclass(frozen=True)
class Cli:
    """The operation's command-line subcommand."""

    name: str
    help: str
    args: tuple[Arg, ...] = (PATH,)
    aliases: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()  # many-row results: the columns of the terminal table (--json has all)


@dataclass(frozen=True)
class Operation:
    name: str  # "MERGE SPLITS": the title of its results
    command: str  # "<module under ops/, dotted>:<class>": the command class (fields, result, parse, run)
    sql: Sql | None = None
    cli: Cli | None = None
    function: str | None = None  # its SQL table function; the arguments are the command's fields
    method: str | None = None  # its IndexTable.maintenance method; the table fills the first field

    def load(self) -> type[Command]:
        module, _, cls = self.command.partition(":")
        return typing.cast("type[Command]", getattr(importlib.import_module(f"indextables_spark.ops.{module}"), cls))


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "CHECKPOINT",
        "maintenance.checkpoint:Checkpoint",
        Sql("CHECKPOINT", KW),
        Cli("checkpoint", "write the V4 Avro state at the latest version"),
        function="indextables_checkpoint",
        method="checkpoint",
    ),
    Operation(
        "COMPACT",
        "maintenance.checkpoint:Compact",
        Sql("COMPACT", KW),
        Cli("compact", "rewrite the state cleanly (no tombstones, partition-sorted)"),
        function="indextables_compact",
        method="compact",
    ),
    Operation(
        "DESCRIBE TABLE",
        "inspect.describe_table:DescribeTable",
        Sql(DESCRIBE, "TABLE"),
        Cli("describe", "schema, rows, splits, bytes, partitions, indexing settings and versions of a table"),
        function="indextables_describe_table",
    ),
    Operation(
        "DESCRIBE STATE",
        "inspect.describe:DescribeState",
        Sql(DESCRIBE, "STATE"),
        Cli("describe-state", "state format, counts, tombstones, needs_compaction, skipped splits"),
        function="indextables_describe_state",
    ),
    Operation(
        "DESCRIBE TRANSACTION LOG",
        "inspect.describe:DescribeTransactionLog",
        Sql(DESCRIBE, "TRANSACTION LOG"),
        Cli(
            "describe-log",
            "one row per transaction log action",
            (PATH, Arg("--all", "flag", "every retained version file (INCLUDE ALL)", field="include_all")),
            aliases=("describe-transaction-log",),
            columns=(
                "version",
                "is_checkpoint",
                "action_type",
                "path",
                "size",
                "num_records",
                "data_change",
                "commit_operation",
                "skip_reason",
            ),
        ),
        function="indextables_describe_transaction_log",
    ),
    Operation(
        "HISTORY",
        "inspect.history:History",
        cli=Cli(
            "history",
            "one row per retained version, newest first",
            (PATH, Arg("--limit", "int")),
            columns=(
                "version",
                "timestamp",
                "operation",
                "num_added_files",
                "num_removed_files",
                "num_added_records",
                "added_bytes",
            ),
        ),
    ),
    Operation(
        "FILES",
        "inspect.files:Files",
        cli=Cli(
            "files",
            "the live splits",
            (PATH, Arg("--where", help="partition predicate, e.g. \"day = '2024-01-01'\""), Arg("--version", "int")),
            columns=("path", "size", "num_records", "num_merge_ops", "added_at_version"),
        ),
    ),
    Operation(
        "MERGE SPLITS",
        "maintenance.merge_splits:MergeSplits",
        Sql("MERGE SPLITS"),
        Cli(
            "merge-splits",
            "merge small splits per partition",
            (
                PATH,
                Arg("--where", help="partition predicate"),
                Arg("--target-size", "size", "e.g. 100M, 2G (default 5G)"),
                Arg("--max-dest-splits", "int"),
                Arg("--max-source-splits-per-merge", "int"),
            ),
        ),
        function="indextables_merge_splits",
        method="merge_splits",
    ),
    Operation(
        "PURGE",
        "maintenance.purge:Purge",
        Sql("PURGE", TABLE_WORDS),
        Cli(
            "purge",
            "delete orphaned splits, old version files, old states, orphan manifests",
            (
                PATH,
                Arg("--older-than", "hours", "split retention, e.g. 7d (default 168h)", field="older_than_hours"),
                Arg("--tx-log-retention", "hours", "version file retention (default 30d)", "tx_log_retention_hours"),
                Arg("--dry-run", "flag"),
            ),
        ),
        function="indextables_purge",
        method="purge",
    ),
    Operation(
        "TRUNCATE TIME TRAVEL",
        "maintenance.truncate_time_travel:TruncateTimeTravel",
        Sql(f"TRUNCATE {KW}", "TIME TRAVEL"),
        Cli(
            "truncate-time-travel",
            "keep only the latest version (irreversible; try --dry-run)",
            (PATH, Arg("--dry-run", "flag")),
        ),
        function="indextables_truncate_time_travel",
        method="truncate_time_travel",
    ),
    Operation(
        "DROP PARTITIONS",
        "maintenance.drop_partitions:DropPartitions",
        Sql(f"DROP {KW}", "PARTITIONS FROM"),
        Cli(
            "drop-partitions",
            "logically remove the partitions matching a predicate",
            (PATH, Arg("--where", required=True, help="partition predicate (mandatory)")),
        ),
        function="indextables_drop_partitions",
        method="drop_partitions",
    ),
    Operation("DELETE", "write.delete:Delete", Sql(f"DELETE FROM {KW}")),
    Operation(
        "REPAIR TRANSACTION LOG",
        "maintenance.repair:RepairTransactionLog",
        Sql("REPAIR INDEXFILES|INDEXTABLES|INDEXTABLE", "TRANSACTION LOG"),
        Cli(
            "repair",
            "write a clean log of the existing splits to a new location",
            (
                Arg("source", help="the table's _transaction_log directory"),
                Arg("target", help="an empty location for the repaired log"),
            ),
        ),
        function="indextables_repair_transaction_log",
        method="repair_transaction_log",
    ),
    Operation(
        "CONVERT",
        "maintenance.convert:Convert",
        Sql(f"CONVERT {KW}", "TABLE"),
        Cli(
            "convert",
            "rewrite the splits IndexTables4Spark wrote as ours (one commit; time travel kept)",
            (PATH, Arg("--dry-run", "flag", "only report the reference splits to convert")),
        ),
        function="indextables_convert",
        method="convert",
    ),
    Operation(
        "PREWARM CACHE",
        "cluster.cache:PrewarmCache",
        Sql(f"PREWARM {KW}", "CACHE"),
        method="prewarm_cache",
    ),
    Operation("DESCRIBE DISK CACHE", "cluster.cache:DescribeDiskCache", Sql(DESCRIBE, "DISK CACHE")),
    Operation("FLUSH DISK CACHE", "cluster.cache:FlushDiskCache", Sql(f"FLUSH {KW}", "DISK CACHE")),
    Operation(
        "DESCRIBE STORAGE STATS",
        "cluster.storage_stats:DescribeStorageStats",
        Sql(DESCRIBE, "STORAGE STATS"),
        Cli(
            "describe-storage-stats",
            "bytes and requests fetched from object storage (driver; executors with Spark)",
            args=(),
            columns=("executor_id", "host", "bytes_fetched", "requests", "processes"),
        ),
        function="indextables_describe_storage_stats",
    ),
    Operation(
        "DESCRIBE ENVIRONMENT",
        "cluster.environment:DescribeEnvironment",
        Sql(DESCRIBE, "ENVIRONMENT"),
        Cli(
            "describe-environment",
            "Python, package versions, options and environment (secrets redacted)",
            args=(),
            columns=("host", "role", "property_type", "property_name", "property_value"),
        ),
        function="indextables_describe_environment",
    ),
    Operation(
        "DESCRIBE COMPONENT SIZES",
        "inspect.component_sizes:DescribeComponentSizes",
        Sql(DESCRIBE, "COMPONENT SIZES"),
        Cli(
            "describe-component-sizes",
            "bytes of each index component of each split, per field",
            (PATH, Arg("--where", help="partition predicate, e.g. \"day = '2024-01-01'\"")),
            columns=("split_path", "component_key", "size_bytes", "component_type", "field_name", "column_name"),
        ),
        function="indextables_describe_component_sizes",
    ),
    Operation(
        "BUILD COMPANION",
        "companion.build:BuildCompanion",
        Sql(f"BUILD {KW}", "COMPANION"),
        Cli(
            "build-companion",
            "build or sync a search index over a Delta, Iceberg or Parquet table's files",
            (
                Arg("source", help="the source table's path (Iceberg: or its identifier, with --catalog)"),
                Arg("location", help="where the companion index lives"),
                Arg("--format", choices=("delta", "iceberg", "parquet"), default="delta"),
                Arg("--indexing", "pairs", "indexing mode of a column (text, string, ...); repeatable"),
                Arg("--include-columns", "columns", "INCLUDE COLUMNS: index only these (comma list)"),
                Arg("--exclude-columns", "columns", "EXCLUDE COLUMNS: index all but these (comma list)"),
                Arg("--hashed-fastfields-include", "columns", "HASHED FASTFIELDS INCLUDE (comma list)"),
                Arg("--hashed-fastfields-exclude", "columns", "HASHED FASTFIELDS EXCLUDE (comma list)"),
                Arg("--where", help="partition predicate: index only these partitions"),
                Arg("--from-version", "int", "Delta: index this version"),
                Arg("--from-snapshot", "int", "Iceberg: index this snapshot id"),
                Arg("--catalog", help="Iceberg: catalog name (properties from -o iceberg.catalog.<name>.<key>=...)"),
                Arg("--catalog-type", help="Iceberg: catalog type (sql, rest, glue, ...)"),
                Arg("--target-input-size", "size", "source bytes per companion split, e.g. 1G"),
                Arg("--dry-run", "flag"),
                Arg(
                    "--streaming-poll-interval",
                    "seconds",
                    "WITH STREAMING POLL INTERVAL: keep syncing, polling every this many seconds (Ctrl+C stops)",
                ),
                Arg("--max-iterations", "positive", "MAX ITERATIONS: stop a streaming sync after this many polls"),
            ),
        ),
    ),
)


# ---- reading the rows -----------------------------------------------------------------------------


def claim_pattern() -> re.Pattern[str]:
    """A regex of every row's `Sql.head`: does a text start like one of our commands?"""
    return _claim_pattern(OPERATIONS)


@functools.cache  # per tuple of rows: asked of every spark.sql text once it.register ran
def _claim_pattern(operations: tuple[Operation, ...]) -> re.Pattern[str]:
    heads = dict.fromkeys(op.sql.head for op in operations if op.sql)
    alternatives = ["\\s+".join("(?:" + w + ")" for w in head.split()) for head in heads]
    return re.compile(r"^\s*(?:" + "|".join(alternatives) + r")(?![A-Za-z0-9_])", re.IGNORECASE)


def operation_of(command: type) -> Operation:
    """The row of a command class."""
    for op in OPERATIONS:
        module, _, cls = op.command.partition(":")
        if command.__module__ == f"indextables_spark.ops.{module}" and command.__qualname__ == cls:
            return op
    raise TypeError(f"not an indextables command: {command.__name__}")


def by(attribute: Literal["function", "method"], name: str) -> Operation | None:
    """The row whose table function / maintenance method is `name`."""
    return next((op for op in OPERATIONS if getattr(op, attribute) == name), None)
