"""Query latency on many small splits vs the same table after MERGE SPLITS, measured in one run.

    .venv/bin/python bench/merge_bench.py [--splits 200] [--rows-per-split 1000] [--runs 5]
                                          [--dir /tmp/it-merge-bench] [--spark]

Builds a table of `--splits` small splits (one write job of that many tasks, 4 region partitions),
times queries, runs MERGE SPLITS (in process), times the same queries again and checks that every
query returns the same result. Without Spark the queries go through the Spark-free core (what a
Spark task does per split: open the extracted split, search, read the rows); `--spark` also times
`spark.read.format("indextables")` counts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import pyarrow.compute as pc  # noqa: E402

import indextables_spark as it  # noqa: E402
from bench_common import fetch_rows  # noqa: E402
from datagen import documents  # noqa: E402

QUERIES = {
    "rare term (count)": ("body:quasar", None),
    "common term (count)": ("body:spark", None),
    "phrase (count)": ('body:"data lake"', None),
    "rare term, one partition (count)": ("body:quasar", "region = 'eu-central'"),
}
FETCH_QUERY = "body:quasar OR body:nebula"


def build(path: str, splits: int, rows_per_split: int) -> None:
    """One write job of `splits` tasks, each writing one split of one region."""
    from pyspark.sql.types import StructType

    from indextables_spark.config.options import Options
    from indextables_spark.spark.writer import commit_write, plan_write, write_splits
    from indextables_spark.core.schema.arrow_types import spark_schema_json

    data = documents(splits * rows_per_split).drop_columns(["tags"])
    opts = Options.of({"indexing.typemap.body": "text", "indexing.typemap.title": "text", "partitionBy": "region"})
    plan, read_version, _ = plan_write(path, opts, StructType.fromJson(spark_schema_json(data.schema)), False)
    regions = sorted(set(data.column("region").to_pylist()))
    per_region = splits // len(regions)
    adds = []
    for region in regions:
        part = data.filter(pc.equal(data.column("region"), region))
        step = -(-part.num_rows // per_region)
        for i in range(per_region):
            chunk = part.slice(i * step, step)
            if chunk.num_rows:
                msg = write_splits(path, opts, plan, iter(chunk.to_batches()))
                adds.extend(it.AddFile.from_json(d) for d in msg.adds)
    commit_write(path, opts, plan, read_version, False, adds)


def timed(fn, runs: int) -> tuple[float, object]:
    out = fn()  # warm-up: extraction into the local split cache, opening handles
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def measure(table: it.IndexTable, runs: int, spark=None) -> dict[str, tuple[float, object]]:
    res = {}
    for name, (q, pf) in QUERIES.items():
        res[name] = timed(lambda q=q, pf=pf: table.count(query=q, partition_filter=pf), runs)
    res["rare terms (fetch rows)"] = timed(lambda: fetch_rows(table, FETCH_QUERY), runs)
    if spark is not None:
        path = table.storage.uri
        res["spark: rare term count()"] = timed(
            lambda: spark.read.format("indextables").option("query", "body:quasar").load(path).count(), runs
        )
        res["spark: full scan count()"] = timed(
            lambda: spark.read.format("indextables").load(path).where("views >= 0").count(), runs
        )
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--rows-per-split", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/it-merge-bench")
    ap.add_argument("--spark", action="store_true")
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    path = os.path.join(args.dir, "table")
    opts = {"cache.disk.path": os.path.join(args.dir, "cache")}
    spark = None
    if args.spark:
        from pyspark.sql import SparkSession

        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        it.register(spark)
        spark.conf.set("spark.indextables.cache.disk.path", opts["cache.disk.path"])

    t0 = time.perf_counter()
    build(path, args.splits, args.rows_per_split)
    build_s = time.perf_counter() - t0
    table = it.IndexTable(path, opts)
    n_before = table.snapshot().num_files
    print(
        f"table: {args.splits * args.rows_per_split:,} rows in {n_before} splits "
        f"({table.snapshot().total_bytes / 1e6:.1f} MB), written in {build_s:.1f} s"
    )
    before = measure(table, args.runs, spark)

    t0 = time.perf_counter()
    res = table.maintenance.merge_splits()
    merge_s = time.perf_counter() - t0
    table = it.IndexTable(path, opts)
    n_after = table.snapshot().num_files
    print(
        f"MERGE SPLITS: {res['sourceSplitsMerged']} splits → {n_after} in {merge_s:.1f} s "
        f"({res['bytesMerged'] / 1e6:.1f} MB → {res['bytesCreated'] / 1e6:.1f} MB)"
    )
    after = measure(table, args.runs, spark)

    print(f"\n{'query':36} {'before (ms)':>12} {'after (ms)':>11} {'speed-up':>9}  result")
    for name in before:
        (tb, rb), (ta, ra) = before[name], after[name]
        if rb != ra:
            raise SystemExit(f"{name}: {rb} before the merge but {ra} after it")
        print(f"{name:36} {tb * 1000:12.1f} {ta * 1000:11.1f} {tb / ta:8.1f}x  {rb}")
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
