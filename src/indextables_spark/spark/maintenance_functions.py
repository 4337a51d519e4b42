"""The maintenance commands as SQL table functions (Python UDTFs), registered by `it.register`:

    SELECT * FROM indextables_describe_state('/path')
    SELECT * FROM indextables_describe_transaction_log('/path', true)          -- INCLUDE ALL
    SELECT * FROM indextables_checkpoint('/path')  /  indextables_compact('/path')
    SELECT * FROM indextables_merge_splits('/path', "day = '2024-01-01'", '100M', 10, 100)
    SELECT * FROM indextables_purge('/path', 168, 720, true)                   -- hours, hours, dry run
    SELECT * FROM indextables_truncate_time_travel('/path', true)
    SELECT * FROM indextables_drop_partitions('/path', "day < '2024-01-01'")
    SELECT * FROM indextables_repair_transaction_log('/t/_transaction_log', '/t/_transaction_log_repaired')
    SELECT * FROM indextables_convert('/path', true)                            -- dry run

Arguments may also be named (`indextables_purge(path => '/p', dry_run => true)`); the columns are
those of the SQL commands (api/results.py). The function runs in a Python worker, which has no
session: the `spark.indextables.*` conf (credentials, endpoints, options) is taken when
`it.register(spark)` runs — register again after changing it. MERGE SPLITS merges in that worker
(no Spark job). Like any table function, the command runs each time the query is executed.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from indextables_spark.frontends import sql_parser as p

FUNCTIONS = (
    "indextables_checkpoint",
    "indextables_compact",
    "indextables_describe_state",
    "indextables_describe_transaction_log",
    "indextables_merge_splits",
    "indextables_purge",
    "indextables_truncate_time_travel",
    "indextables_drop_partitions",
    "indextables_repair_transaction_log",
    "indextables_convert",
)


def _spark_value(v: Any, t: pa.DataType) -> Any:
    """Arrow's Python value → what a UDTF may yield (structs as tuples)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(_spark_value(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t):
        return [_spark_value(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: x for k, x in v}
    return v


def rows(cmd: p.Command, options: dict) -> Iterator[tuple]:
    from indextables_spark.frontends.execute import execute

    res = execute(cmd, options)
    fields = list(res.table.schema)
    for r in res.table.to_pylist():
        yield tuple(_spark_value(r[f.name], f.type) for f in fields)


def _size(v) -> int | None:
    from indextables_spark.config.options import parse_size

    return None if v is None else (int(v) if isinstance(v, (int, float)) else parse_size(str(v), "target_size"))


def _classes(options: dict) -> dict[str, type]:
    """UDTF classes closing over the options captured at registration."""

    class Checkpoint:
        def eval(self, path: str):
            yield from rows(p.Checkpoint(path), options)

    class Compact:
        def eval(self, path: str):
            yield from rows(p.Compact(path), options)

    class DescribeState:
        def eval(self, path: str):
            yield from rows(p.DescribeState(path), options)

    class DescribeTransactionLog:
        def eval(self, path: str, include_all: bool = False):
            yield from rows(p.DescribeTransactionLog(path, bool(include_all)), options)

    class MergeSplits:
        def eval(
            self,
            path: str,
            where: str | None = None,
            target_size=None,
            max_dest_splits: int | None = None,
            max_source_splits_per_merge: int | None = None,
        ):
            yield from rows(
                p.MergeSplits(path, where, _size(target_size), max_dest_splits, max_source_splits_per_merge), options
            )

    class Purge:
        def eval(
            self,
            path: str,
            older_than_hours: float | None = None,
            tx_log_retention_hours: float | None = None,
            dry_run: bool = False,
        ):
            yield from rows(p.Purge(path, older_than_hours, tx_log_retention_hours, bool(dry_run)), options)

    class TruncateTimeTravel:
        def eval(self, path: str, dry_run: bool = False):
            yield from rows(p.TruncateTimeTravel(path, bool(dry_run)), options)

    class DropPartitions:
        def eval(self, path: str, where: str):
            yield from rows(p.DropPartitions(path, where), options)

    class RepairTransactionLog:
        def eval(self, source: str, target: str):
            yield from rows(p.RepairTransactionLog(source, target), options)

    class Convert:
        def eval(self, path: str, dry_run: bool = False):
            yield from rows(p.Convert(path, bool(dry_run)), options)

    return dict(
        zip(
            FUNCTIONS,
            (
                Checkpoint,
                Compact,
                DescribeState,
                DescribeTransactionLog,
                MergeSplits,
                Purge,
                TruncateTimeTravel,
                DropPartitions,
                RepairTransactionLog,
                Convert,
            ),
        )
    )


def register_command_functions(spark, conf: dict[str, str]) -> None:
    """Register every maintenance table function on the session (called by `it.register`); they
    run with `conf` (the session's spark.indextables.* entries: workers have no session)."""
    from indextables_spark.util.sessions import functions
    from indextables_spark.ops import columns as results

    udtf = functions(spark).udtf

    specs = dict(
        zip(
            FUNCTIONS,
            (
                results.CHECKPOINT,
                results.COMPACT,
                results.DESCRIBE_STATE,
                results.TRANSACTION_LOG,
                results.MERGE_SPLITS,
                results.PURGE,
                results.TRUNCATE_TIME_TRAVEL,
                results.DROP_PARTITIONS,
                results.REPAIR,
                results.CONVERT,
            ),
        )
    )
    for name, cls in _classes(dict(conf)).items():
        # Plain (not Arrow) UDTFs: one row per command, and Arrow UDTFs would need pandas.
        spark.udtf.register(name, udtf(cls, returnType=specs[name].spark_schema(), useArrow=False))
