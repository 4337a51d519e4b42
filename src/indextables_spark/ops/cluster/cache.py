"""The split cache commands: PREWARM INDEXTABLES CACHE, DESCRIBE INDEXTABLES DISK CACHE, FLUSH
INDEXTABLES DISK CACHE. With a SparkSession each runs as a Spark job of one task per core (twice
over), so that every executor's cache is reached (`mapInArrow` over `spark.range`: classic and
Spark Connect); results are per host and cache directory. Without a session, in this process."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Self, cast

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.config.sessions import default_parallelism
from indextables_spark.errors import TableNotFoundError
from indextables_spark.results.cluster import DiskCacheInfo, FlushDiskCacheResult, PrewarmCacheResult
from indextables_spark.results.record import camel
from indextables_spark.ops.command import CommandParser, Context, log_at
from indextables_spark.ops.table_commands import PartitionsCommand

_TASK_SCHEMA = pa.schema([("payload", pa.string())])


def local_part(op: str, options: Options, path: str | None, where: str | None) -> dict[str, Any]:
    """One process's part: prewarm the table's splits, or describe / flush its cache."""
    from indextables_spark.core.split.cache.cache import (
        get_cache,  # lazy: keeps `import indextables_spark.ops.cluster.cache` free of numpy
    )

    cache = get_cache(options)
    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    if op == "describe":
        return {**out, **cache.describe()}
    if op == "flush":
        return {**out, **cache.flush()}
    t0 = time.perf_counter()
    assert path is not None, "prewarm needs a table"
    log = log_at(path, options)
    files = log.pruned_snapshot(where).files
    already = sum(1 for f in files if cache.is_cached(log.storage, f))
    for f in files:
        cache.local_dir(log.storage, f)
    return {
        **out,
        "tablePath": log.storage.uri,
        "cachePath": cache.root,
        "splits": len(files),
        "alreadyCached": already,
        "fetched": len(files) - already,
        "bytes": sum(f.size or 0 for f in files),
        "durationMs": (time.perf_counter() - t0) * 1000.0,
    }


CacheResult = PrewarmCacheResult | DiskCacheInfo | FlushDiskCacheResult


def run(
    op: str, options: Options, spark: Any = None, path: str | None = None, where: str | None = None
) -> list[CacheResult]:
    """Results of the operation: one per host and cache directory (one in all without Spark)."""
    if op == "prewarm":  # refuse a bad path or predicate on the driver first
        assert path is not None, "prewarm needs a table"
        log = log_at(path, options)
        if where:
            log.scan(where)
        elif not log.exists():
            raise TableNotFoundError(f"no indextables table at {log.storage.uri}")
    if spark is None:
        rows = [{**local_part(op, options, path, where), "processes": 1, "tasks": 1}]
    else:
        rows = _merge(op, _on_executors(spark, op, options, path, where))
    return [_result(op, r) for r in rows]


_RESULTS: dict[str, type[CacheResult]] = {
    "prewarm": PrewarmCacheResult,
    "describe": DiskCacheInfo,
    "flush": FlushDiskCacheResult,
}


def _result(op: str, row: dict[str, Any]) -> CacheResult:
    """A merged per-host row (the tasks' JSON payloads: the result's fields in camelCase) → the
    operation's typed result."""
    cls = _RESULTS[op]
    return cls(**{f.name: row[camel(f.name)] for f in dataclasses.fields(cls)})


def _on_executors(spark: Any, op: str, options: Options, path: str | None, where: str | None) -> list[dict[str, Any]]:
    opts = dict(options.items())
    tasks = max(2, 2 * default_parallelism(spark))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        row = local_part(op, Options.of(opts), path, where)
        yield pa.RecordBatch.from_pylist([{"payload": json.dumps(row)}], schema=_TASK_SCHEMA)

    rows = spark.range(0, tasks, numPartitions=tasks).mapInArrow(task, "payload string").collect()
    return [json.loads(r.payload) for r in rows]


def _merge(op: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (host, cache directory): on-disk figures from any task, per-process counters
    summed over the distinct processes, prewarm counts from the task that fetched most."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["host"], r.get("cachePath", "")), []).append(r)
    out = []
    for (_host, _root), group in sorted(by.items()):
        per_pid = {r["pid"]: r for r in group}
        if op == "describe":
            last = group[-1]
            out.append(
                {
                    **last,
                    "processes": len(per_pid),
                    **{k: sum(r[k] for r in per_pid.values()) for k in ("hits", "misses", "evictions")},
                }
            )
        elif op == "flush":
            out.append(
                {
                    **group[0],
                    "processes": len(per_pid),
                    **{k: sum(r[k] for r in group) for k in ("entriesRemoved", "bytesRemoved")},
                    "inUseKept": max(r["inUseKept"] for r in group),
                }
            )
        else:
            best = max(group, key=lambda r: r["fetched"])
            out.append({**best, "alreadyCached": min(r["alreadyCached"] for r in group), "tasks": len(group)})
    return out


# ---- the commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrewarmCache(PartitionsCommand):
    """PREWARM INDEXTABLES CACHE <table> [WHERE <partition predicate>]: fetch the splits (of the
    partitions matching `where`) into the split cache — of every executor, as a Spark job, when a
    SparkSession is given; else of this process's machine. One result per host and cache directory."""

    result: ClassVar[type[PrewarmCacheResult]] = PrewarmCacheResult

    def run(self, ctx: Context) -> list[PrewarmCacheResult]:
        return cast("list[PrewarmCacheResult]", run("prewarm", ctx.options, ctx.spark, ctx.path(self.path), self.where))


@dataclass(frozen=True)
class _HostCachesCommand:
    """A command of no arguments on every host's split cache (`run(op)`)."""

    op: ClassVar[str]

    @classmethod
    def parse(cls, p: CommandParser) -> Self:
        return cls()

    def run(self, ctx: Context) -> list[CacheResult]:
        return run(self.op, ctx.options, ctx.spark)


@dataclass(frozen=True)
class DescribeDiskCache(_HostCachesCommand):
    """DESCRIBE INDEXTABLES DISK CACHE: entries, bytes, hits of each host's split cache."""

    result: ClassVar[type[DiskCacheInfo]] = DiskCacheInfo
    op = "describe"


@dataclass(frozen=True)
class FlushDiskCache(_HostCachesCommand):
    """FLUSH INDEXTABLES DISK CACHE: empty each host's split cache (splits in use are kept)."""

    result: ClassVar[type[FlushDiskCacheResult]] = FlushDiskCacheResult
    op = "flush"
