"""Helpers for the maintenance-command tests: real tables written without Spark through the same
functions the Spark writer runs (plan_write on the driver, write_splits in tasks, commit_write),
and a way to read every row of a table version back."""

from __future__ import annotations

import os
import time

import pyarrow as pa

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.expr.search_query import SearchQuery

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
REGIONS = ("eu", "us", "ap")
TEXT_OPTIONS = {"spark.indextables.indexing.typemap.body": "text"}


def rows(n: int, start: int = 0, days: int = 3) -> pa.Table:
    """Deterministic documents: id, body (tokenized text), views, region and day (partitions)."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": pa.array(
                [" ".join(WORDS[(i * k + k) % len(WORDS)] for k in range(1, 6)) for i in ids], pa.string()
            ),
            "views": pa.array([(i * 37) % 1000 for i in ids], pa.int64()),
            "region": pa.array([REGIONS[i % len(REGIONS)] for i in ids], pa.string()),
            "day": pa.array([f"2024-01-0{1 + i % days}" for i in ids], pa.string()),
        }
    )


def append(
    path: str, data: pa.Table, partition_by=("day",), options: dict | None = None, overwrite: bool = False
) -> int:
    """One write job (one task) → one new version; returns it."""
    from pyspark.sql.types import StructType

    from indextables_spark.core.schema.arrow_types import spark_schema_json

    from indextables_spark.ops.write.write import commit_write
    from indextables_spark.spark.writer import plan_write, write_splits

    opts = Options.of(TEXT_OPTIONS, options, {"partitionBy": ",".join(partition_by)} if partition_by else None)
    plan, read_version, _ = plan_write(path, opts, StructType.fromJson(spark_schema_json(data.schema)), overwrite)
    msg = write_splits(path, opts, plan, iter(data.to_batches()))
    adds = [it.AddFile.from_json(d) for d in msg.adds]
    return commit_write(it.IndexTable(path, opts).log, plan, read_version, overwrite, adds, stats_files=msg.stats)


def small_splits_table(
    path: str, n_writes: int, rows_per_write: int = 20, options: dict | None = None, partition_by=("day",)
) -> None:
    """n_writes appends, each adding one small split per day partition (3 partitions; 1 unpartitioned)."""
    for w in range(n_writes):
        append(path, rows(rows_per_write, start=w * rows_per_write), partition_by=partition_by, options=options)


def split_rows(table: it.IndexTable, add) -> list[tuple]:
    """The rows of one split, as read_all gives them."""
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    reader = SplitReader(get_cache(table.options).local_dir(table.storage, add))
    return [
        (r["id"], r["body"], r["views"], r["region"], add.partition_values.get("day"))
        for b in reader.read()
        for r in b.to_pylist()
    ]


def read_all(table: it.IndexTable, version: int | None = None, exclude=()) -> list[tuple]:
    """Every row of a table version (partition columns included) but those of `exclude`d splits, sorted."""
    return sorted(r for f in table.snapshot(version).files if f.path not in set(exclude) for r in split_rows(table, f))


def as_tuples(data: pa.Table) -> list[tuple]:
    return [(r["id"], r["body"], r["views"], r["region"], r["day"]) for r in data.to_pylist()]


def query_ids(table: it.IndexTable, query: str, version: int | None = None) -> list[int]:
    """Ids of the rows matching a full-text query, over every split of a version."""
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    snap = table.snapshot(version)
    ids = []
    for f in snap.files:
        reader = SplitReader(get_cache(table.options).local_dir(table.storage, f))
        for b in reader.read(query=SearchQuery.of(query), columns=["id"]):
            ids.extend(b.column(0).to_pylist())
    return sorted(ids)


def age(path: str, hours: float) -> None:
    """Set a local file's modification time `hours` into the past."""
    t = time.time() - hours * 3600
    os.utime(path, (t, t))


def age_tree(root: str, hours: float, suffix: str = "") -> None:
    for d, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(suffix):
                age(os.path.join(d, f), hours)


def live_rows(table: it.IndexTable, version: int | None = None) -> list[tuple]:
    """Like read_all, with the snapshot's row-level deletes applied."""
    from indextables_spark.core.log.deletes.delete_logs import load_split_deletes
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    snap = table.snapshot(version)
    out = []
    for f in snap.files:
        reader = SplitReader(get_cache(table.options).local_dir(table.storage, f))
        deletes = load_split_deletes(table.storage, snap.deletes_for(f), reader.num_rows, f.path)
        out.extend(
            (r["id"], r["body"], r["views"], r["region"], f.partition_values.get("day"))
            for b in reader.read(deletes=deletes)
            for r in b.to_pylist()
        )
    return sorted(out)
