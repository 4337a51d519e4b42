"""Run a parsed command (parser.py) with the operations of this package: the one dispatcher behind
`it.sql`, the SQL table functions and the command line. (`IndexTable` methods call the same
operations directly.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.api.results import Progress, Record
from indextables_spark.frontends import sql_parser as p
from indextables_spark.ops import columns as results


@dataclass
class CommandResult:
    spec: results.ResultSpec
    table: pa.Table  # the typed rows (SQL / CLI tables)
    raw: Any  # what the operation returned (a result, a list of them, or the same Arrow table)


def _log(path: str, options: Options):
    from indextables_spark.api.table import IndexTable

    return IndexTable(path, options).log


def execute(
    cmd: p.Command, options: Options | dict | None = None, spark=None, progress: Progress | None = None
) -> CommandResult:
    """spark: when given, MERGE SPLITS runs its merge groups as a Spark job; else in this process."""
    from indextables_spark.core.log import maintenance
    from indextables_spark.ops import describe, merge_splits as merge, drop_partitions as partitions, purge, repair

    name = p.table_name_of(cmd)
    if name is not None:
        from indextables_spark.errors import InvalidOptionError

        raise InvalidOptionError(
            f"table name {name}: only it.sql / spark.sql resolve table names (through the Spark catalog); "
            f"give the table's path in quotes here"
        )
    opts = options if isinstance(options, Options) else Options.of(options)
    if isinstance(cmd, p.Checkpoint):
        return _one(results.CHECKPOINT, maintenance.checkpoint(_log(cmd.path, opts)))
    if isinstance(cmd, p.Compact):
        return _one(results.COMPACT, maintenance.compact(_log(cmd.path, opts)))
    if isinstance(cmd, p.DescribeState):
        return _one(results.DESCRIBE_STATE, describe.describe_state(_log(cmd.path, opts)))
    if isinstance(cmd, p.DescribeTransactionLog):
        table = describe.describe_transaction_log(_log(cmd.path, opts), cmd.include_all)
        return CommandResult(results.TRANSACTION_LOG, table, table)
    if isinstance(cmd, p.MergeSplits):
        runner = merge.SparkRunner(spark) if spark is not None else None
        res = merge.merge_splits(
            _log(cmd.path, opts),
            cmd.where,
            cmd.target_size,
            cmd.max_dest_splits,
            cmd.max_source_splits_per_merge,
            runner=runner,
            progress=progress,
        )
        return _one(results.MERGE_SPLITS, res)
    if isinstance(cmd, p.Purge):
        res = purge.purge(
            _log(cmd.path, opts), cmd.older_than_hours, cmd.tx_log_retention_hours, cmd.dry_run, progress=progress
        )
        return _one(results.PURGE, res)
    if isinstance(cmd, p.TruncateTimeTravel):
        return _one(
            results.TRUNCATE_TIME_TRAVEL, maintenance.truncate_time_travel(_log(cmd.path, opts), dry_run=cmd.dry_run)
        )
    if isinstance(cmd, p.DropPartitions):
        return _one(results.DROP_PARTITIONS, partitions.drop_partitions(_log(cmd.path, opts), cmd.where))
    if isinstance(cmd, p.Delete):
        from indextables_spark.ops import delete

        return _one(results.DELETE, delete.delete(_log(cmd.path, opts), cmd.where))
    if isinstance(cmd, (p.PrewarmCache, p.DescribeDiskCache, p.FlushDiskCache)):
        from indextables_spark.ops import cache

        op, spec = {
            p.PrewarmCache: ("prewarm", results.PREWARM_CACHE),
            p.DescribeDiskCache: ("describe", results.DESCRIBE_DISK_CACHE),
            p.FlushDiskCache: ("flush", results.FLUSH_DISK_CACHE),
        }[type(cmd)]
        rows = cache.run(op, opts, spark, getattr(cmd, "path", None), getattr(cmd, "where", None))
        return CommandResult(spec, spec.table(rows), rows)
    if isinstance(cmd, p.BuildCompanion):
        from indextables_spark.ops.companion import build_companion

        res = build_companion(
            cmd.source,
            cmd.location,
            cmd.format,
            dict(cmd.indexing) or None,
            cmd.where,
            spark,
            opts,
            from_version=cmd.from_version,
            from_snapshot=cmd.from_snapshot,
            catalog=cmd.catalog,
            catalog_type=cmd.catalog_type,
            target_input_size=cmd.target_input_size,
            dry_run=cmd.dry_run,
        )
        return _one(results.BUILD_COMPANION, res)
    if isinstance(cmd, p.Convert):
        from indextables_spark.ops.convert import convert_table

        return _one(results.CONVERT, convert_table(_log(cmd.path, opts), dry_run=cmd.dry_run, progress=progress))
    if isinstance(cmd, p.RepairTransactionLog):
        return _one(results.REPAIR, repair.repair_transaction_log(cmd.source, cmd.target, opts, progress))
    raise TypeError(f"not an indextables command: {cmd!r}")


def _one(spec: results.ResultSpec, res: Record) -> CommandResult:
    return CommandResult(spec, spec.row(res), res)
