"""Bloom filters: splits read and latency of a selective EqualTo on a high-cardinality column, with
and without the per-split Bloom filters, on one table in one run.

    .venv/bin/python bench/bloom_bench.py [--splits 200] [--rows-per-split 1000] [--queries 30] [--spark]

The table holds random UUIDs (`uid`, Bloom-filtered), so min/max statistics cannot skip a split.
Each query is planned the way the Spark reader plans it (min/max data skipping, then the Bloom
hook `skip_by_blooms`, switched off with spark.indextables.read.bloomfilter.enabled=false) and
its splits are read with the exact filter (split cache warm: every split is extracted once
before timing). `--spark` also times `spark.read...filter(uid = v).collect()` both ways.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid

import pyarrow as pa

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.expr.model import EqualTo
from indextables_spark.core.split.read.skipping import skip_split
from indextables_spark.core.split.format.bloom import STATS_KEY, skip_by_blooms
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.read.reader import SplitReader

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()


def build(path: str, splits: int, rows_per_split: int, seed: int = 11) -> tuple[list[str], float]:
    """One write job whose splits roll every `rows_per_split` rows; returns (uids, seconds)."""
    from pyspark.sql.types import StructType

    from indextables_spark.spark.writer import commit_write, plan_write, write_splits
    from indextables_spark.core.schema.arrow_types import spark_schema_json

    rnd = random.Random(seed)
    n = splits * rows_per_split
    uids = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(n)]
    data = pa.table(
        {
            "uid": uids,
            "n": pa.array(range(n), pa.int64()),
            "body": [" ".join(rnd.choice(WORDS) for _ in range(12)) for _ in range(n)],
        }
    )
    opts = Options.of({"indexing.bloomfilter.columns": "uid", "indexing.typemap.body": "text"})
    plan, read_version, _ = plan_write(path, opts, StructType.fromJson(spark_schema_json(data.schema)), False)
    plan = dataclasses.replace(plan, target_split_bytes=max(1, data.nbytes // splits))
    t0 = time.perf_counter()
    msg = write_splits(path, opts, plan, iter(data.to_batches(max_chunksize=rows_per_split)))
    commit_write(
        path, opts, plan, read_version, False, [it.AddFile.from_json(d) for d in msg.adds], stats_files=msg.stats
    )
    return uids, time.perf_counter() - t0


def query(t: it.IndexTable, value: str, bloom: bool) -> tuple[int, int, float, float]:
    """(splits read, rows found, planning seconds, total seconds) of `uid = value`."""
    filters = [EqualTo("uid", value)]
    t0 = time.perf_counter()
    snap = t.snapshot()
    files = [f for f in snap.files if not skip_split(f, filters, [])]
    files = skip_by_blooms(
        t.storage.uri, Options.of({"read.bloomfilter.enabled": str(bloom).lower()}), snap, files, filters
    )
    planned = time.perf_counter() - t0
    cache = get_cache(t.options)
    rows = sum(b.num_rows for f in files for b in SplitReader(cache.local_dir(t.storage, f)).read(filters=filters))
    return len(files), rows, planned, time.perf_counter() - t0


def spark_times(path: str, values: list[str]) -> dict[bool, float]:
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    it.register(spark)
    out = {}
    for bloom in (False, True):
        df = spark.read.format("indextables").option("read.bloomfilter.enabled", str(bloom).lower()).load(path)
        df.filter(col("uid") == values[0]).collect()  # warm-up (worker start)
        times = []
        for v in values:
            t0 = time.perf_counter()
            assert len(df.filter(col("uid") == v).collect()) == 1
            times.append(time.perf_counter() - t0)
        out[bloom] = statistics.median(times)
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--rows-per-split", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--spark", action="store_true", help="also time the reads through Spark")
    ap.add_argument("--dir", default=None, help="table directory (default: a temporary one, removed)")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="indextables-bloom-bench-")
    path = os.path.join(root, "t")
    shutil.rmtree(path, ignore_errors=True)
    try:
        uids, write_s = build(path, args.splits, args.rows_per_split)
        t = it.IndexTable(path)
        snap = t.snapshot()
        blooms = snap.stats_files.get(STATS_KEY, [])
        bloom_bytes = sum(t.storage.stat(k).size for k in blooms)
        split_bytes = sum(f.size for f in snap.files)
        print(
            f"table: {len(snap.files)} splits, {len(uids):,} rows, written in {write_s:.1f} s; "
            f"{len(blooms)} Bloom files, {bloom_bytes / 1024:.0f} KiB ({bloom_bytes / split_bytes:.1%} of the splits)"
        )
        cache = get_cache(t.options)
        for f in snap.files:  # warm the split cache: both runs read extracted splits
            cache.local_dir(t.storage, f)
        rnd = random.Random(5)
        values = [rnd.choice(uids) for _ in range(args.queries)]
        print(f"{'Bloom filters':<14} {'splits read':>12} {'of':>5} {'plan ms':>9} {'median ms':>10} {'p90 ms':>8}")
        for bloom in (False, True):
            query(t, values[0], bloom)  # first-use costs (bloom file cache) out of the timing
            runs = [query(t, v, bloom) for v in values]
            assert all(r[1] == 1 for r in runs), "every uid is in the table exactly once"
            read = statistics.mean(r[0] for r in runs)
            plan_ms = statistics.median(r[2] for r in runs) * 1000
            total = sorted(r[3] * 1000 for r in runs)
            p90 = total[min(len(total) - 1, int(0.9 * len(total)))]
            print(
                f"{'on' if bloom else 'off':<14} {read:>12.1f} {len(snap.files):>5} {plan_ms:>9.1f} "
                f"{statistics.median(total):>10.1f} {p90:>8.1f}"
            )
        if args.spark:
            times = spark_times(path, values[:10])
            print(
                f"Spark collect(), median: without Bloom filters {times[False] * 1000:.0f} ms, "
                f"with {times[True] * 1000:.0f} ms"
            )
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
