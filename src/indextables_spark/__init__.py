"""indextables_spark: full-text-searchable data-lake tables for Apache Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence, cast

from indextables_spark.errors import (
    CommitRetriesExhaustedError,
    ConcurrentModificationError,
    CorruptStateError,
    IndexTablesError,
    ProtocolVersionError,
    QueryParseError,
    ReferenceTableError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)

# Imported on first use (PEP 562): `import indextables_spark` stays cheap (~5 ms instead of the
# ~110 ms pyarrow and numpy take), so a command line, a Spark worker or a service that needs only
# part of the package pays only for that part.
_LAZY = {
    "AddFile": "indextables_spark.core.log.model.actions",
    "RemoveFile": "indextables_spark.core.log.model.actions",
    "ChangeSet": "indextables_spark.core.log.read.changes",
    "PartitionFilterError": "indextables_spark.expr.partition_filter",
    "BucketArgumentError": "indextables_spark.core.split.aggregate.buckets",
    "ScanStats": "indextables_spark.core.log.read.table_log",
    "Snapshot": "indextables_spark.core.log.read.snapshot",
    "Transaction": "indextables_spark.core.log.commit.transaction",
    "IndexTable": "indextables_spark.api.table",
    "Fusion": "indextables_spark.core.split.read.vector.fusion_spec",
    "SearchOperatorError": "indextables_spark.expr.operators",
    "SearchQuery": "indextables_spark.expr.search_query",
    "build_companion": "indextables_spark.api.companion",
    "Progress": "indextables_spark.results.record",
    "start_companion_sync": "indextables_spark.ops.companion.build",
    "CompanionSync": "indextables_spark.ops.companion.stream",
}

if TYPE_CHECKING:
    from indextables_spark.api.table import IndexTable
    from indextables_spark.core.log.model.actions import AddFile, RemoveFile
    from indextables_spark.core.split.aggregate.buckets import BucketArgumentError
    from indextables_spark.core.log.read.base_state import ScanStats
    from indextables_spark.core.log.read.changes import ChangeSet
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.log.commit.transaction import Transaction
    from indextables_spark.expr.partition_filter import PartitionFilterError
    from indextables_spark.core.split.read.vector.fusion_spec import Fusion
    from indextables_spark.expr.search_query import SearchQuery
    from indextables_spark.api.companion import build_companion
    from indextables_spark.ops.companion.build import start_companion_sync
    from indextables_spark.ops.companion.stream import CompanionSync
    from indextables_spark.results import (
        DiskCacheInfo,
        EnvironmentRow,
        FlushDiskCacheResult,
        PostWriteResult,
        Progress,
        ProgressArg,
        StorageStatsRow,
        WriteResult,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # lazy: only on a first lazy attribute

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.2.0"

__all__ = [
    "AddFile",
    "BucketArgumentError",
    "ChangeSet",
    "CompanionSync",
    "PartitionFilterError",
    "Progress",
    "QueryParseError",
    "ReferenceTableError",
    "RemoveFile",
    "ScanStats",
    "SchemaMismatchError",
    "VersionNotFoundError",
    "CommitRetriesExhaustedError",
    "ConcurrentModificationError",
    "CorruptStateError",
    "Fusion",
    "IndexTable",
    "IndexTablesError",
    "ProtocolVersionError",
    "Snapshot",
    "TableExistsError",
    "SearchOperatorError",
    "SearchQuery",
    "TableNotFoundError",
    "Transaction",
    "build_companion",
    "describe_disk_cache",
    "describe_environment",
    "describe_storage_stats",
    "explain",
    "fieldmatch",
    "flush_disk_cache",
    "indexquery",
    "indexqueryall",
    "register",
    "search_join",
    "sql",
    "start_companion_sync",
    "textsearch",
    "unregister",
    "wait_for_maintenance",
    "write_table",
]


def register(spark: Any) -> None:
    """Register the "indextables" data source and SQL table functions on a SparkSession (classic or
    Spark Connect) and install the indextables-only reader/writer wrappers (see spark/register.py)."""
    from indextables_spark.spark.register import register as _register  # lazy: pyspark, only when asked for

    _register(spark)


def unregister(spark: Any = None) -> None:
    """Remove the pyspark wrappers `register` installed (docs/guide/reading-and-querying.md, "What `register` changes")."""
    from indextables_spark.spark.register import unregister as _unregister  # lazy: pyspark, only when asked for

    _unregister(spark)


def sql(spark: Any, text: str) -> Any:
    """Run an indextables command (CHECKPOINT INDEXTABLES ...); other text goes to spark.sql. A table
    name in a command (`MERGE SPLITS db.t`) is resolved through the Spark catalog."""
    from indextables_spark.frontends.sql import run_sql  # lazy: keeps the package import cheap
    from indextables_spark.spark.table_names import resolve_table  # lazy: pyspark, only when asked for

    return run_sql(spark, text, resolve_table)


def wait_for_maintenance(timeout: float | None = None) -> dict[str, PostWriteResult]:
    """Wait for the merge-/purge-on-write running in the background of this process (see
    ops/maintenance/post_write.py); returns the latest result per table path."""
    from indextables_spark.ops.maintenance.post_write import wait_for_background  # lazy: keeps the package import cheap

    return wait_for_background(timeout)


def describe_disk_cache(spark: Any = None, options: Mapping[str, Any] | None = None) -> list[DiskCacheInfo]:
    """DESCRIBE INDEXTABLES DISK CACHE: per host and cache directory, the cached splits (entries,
    bytes), the limit, and the hits, misses and evictions of the processes asked (every executor,
    as a Spark job, when a SparkSession is given; else this process)."""
    from indextables_spark.config.sessions import with_session_options  # lazy: keeps the package import cheap
    from indextables_spark.ops.cluster.cache import run  # lazy: keeps the package import cheap

    return cast("list[DiskCacheInfo]", run("describe", with_session_options(spark, options), spark))


def flush_disk_cache(spark: Any = None, options: Mapping[str, Any] | None = None) -> list[FlushDiskCacheResult]:
    """FLUSH INDEXTABLES DISK CACHE: remove the cached splits no reader is reading right now."""
    from indextables_spark.config.sessions import with_session_options  # lazy: keeps the package import cheap
    from indextables_spark.ops.cluster.cache import run  # lazy: keeps the package import cheap

    return cast("list[FlushDiskCacheResult]", run("flush", with_session_options(spark, options), spark))


def describe_storage_stats(spark: Any = None) -> list[StorageStatsRow]:
    """DESCRIBE INDEXTABLES STORAGE STATS: bytes and GET requests fetched from object storage since
    the processes started, by this process (`driver`) and, when a SparkSession is given, by the
    Python workers of each executor host (as a Spark job; ops/cluster/storage_stats.py)."""
    from indextables_spark.ops.cluster.storage_stats import storage_stats  # lazy: keeps the package import cheap

    return storage_stats(spark)


def describe_environment(spark: Any = None, options: Mapping[str, Any] | None = None) -> list[EnvironmentRow]:
    """DESCRIBE INDEXTABLES ENVIRONMENT: the Spark conf and options of this process (`driver`), its
    Python, package versions and environment variables, and those of each executor host when a
    SparkSession is given (as a Spark job); secrets redacted (ops/cluster/environment.py)."""
    from indextables_spark.config.sessions import with_session_options  # lazy: keeps the package import cheap
    from indextables_spark.ops.cluster.environment import environment  # lazy: keeps the package import cheap

    return environment(with_session_options(spark, options), spark)


def explain(df: Any) -> list[dict[str, Any]]:
    """What the indextables reads of a DataFrame do: per read, the filters the index answers or
    narrows, the Tantivy query, and the splits partition pruning, min/max statistics and Bloom
    filters kept out of how many (see spark/explain.py; IndexTable.explain without Spark). For a
    DataFrame `spark.sql` returned after `register`, the first entry is the statement's route
    (`route`: "scan" or "index aggregate", the columns each table reference reads, its searches)."""
    from indextables_spark.spark.explain import explain as _explain  # lazy: pyspark, only when asked for
    from indextables_spark.spark.sql_routes import route_of  # lazy: pyspark, only when asked for

    route = route_of(df)
    if route is not None and route.name == "index aggregate":
        return [route.to_dict()]  # answered from the index: no read to plan
    return ([route.to_dict()] if route is not None else []) + _explain(df)


def search_join(queries: Any, path: str, **kwargs: Any) -> Any:
    """Each row of the `queries` DataFrame joined to its top-k rows of the table at `path`
    (text_col=, vector_col=, vector_column=, k=10, fusion=None (rrf with text and vectors; "none":
    the text only selects), where=, prefix="match_", options=; `column=` is vector_column's
    deprecated old name), searched where the queries are, without shuffling the table
    (spark/search_join.py)."""
    from indextables_spark.spark.search_join import search_join as _join  # lazy: pyspark, only when asked for

    return _join(queries, path, **kwargs)


def textsearch(column: str, query: str) -> Any:
    """`df.filter(it.textsearch("body", "spark"))`: SQL's `body TEXTSEARCH 'spark'` as a Column
    (a tokenized text column; combine with &, |, ~; see spark/search_columns.py)."""
    from indextables_spark.spark.search_columns import textsearch as _f  # lazy: pyspark, only when asked for

    return _f(column, query)


def fieldmatch(column: str, query: str) -> Any:
    """`df.filter(it.fieldmatch("status", "active"))`: SQL's `status FIELDMATCH 'active'` as a Column
    (a column indexed whole: raw strings, numbers, dates)."""
    from indextables_spark.spark.search_columns import fieldmatch as _f  # lazy: pyspark, only when asked for

    return _f(column, query)


def indexquery(column: str, query: str) -> Any:
    """`df.filter(it.indexquery("body", "a OR b"))`: SQL's `body indexquery 'a OR b'` as a Column."""
    from indextables_spark.spark.search_columns import indexquery as _f  # lazy: pyspark, only when asked for

    return _f(column, query)


def indexqueryall(query: str) -> Any:
    """`df.filter(it.indexqueryall("error"))`: SQL's `indexqueryall('error')` as a Column."""
    from indextables_spark.spark.search_columns import indexqueryall as _f  # lazy: pyspark, only when asked for

    return _f(query)


def write_table(
    path: str,
    data: Any,
    *,
    mode: str = "append",
    partition_by: str | Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
    progress: ProgressArg = None,
) -> WriteResult:
    """Write a pyarrow.Table, pyarrow.RecordBatchReader or pandas DataFrame to the table at `path`
    without Spark (same splits, statistics, Bloom files and log as the Spark writer; splits built in
    parallel; one commit): `IndexTable(path, options).write(data, mode=…, partition_by=…, progress=…)`.
    mode: "append" | "overwrite" | "error". progress: a callback receiving `it.Progress("writing",
    done, total, "rows")` as chunks of rows become splits (`total` None for a RecordBatchReader);
    None (default): a progress bar on stderr when stderr is a terminal, nothing otherwise; False:
    nothing. Returns a WriteResult (`.version` the committed version, `.rows_written`,
    `.splits_added`, `.bytes_written`, …)."""
    from indextables_spark.api.table import IndexTable  # lazy: keeps the package import cheap

    return IndexTable(path, options).write(data, mode=mode, partition_by=partition_by, progress=progress)
