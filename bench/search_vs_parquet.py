"""Search vs Parquet through Spark on the same generated documents, measured in one run.

    .venv/bin/python bench/search_vs_parquet.py [--rows 1000000] [--runs 5] [--dir /tmp/it-bench]

Prints, per query kind, the median time of count() and collect() for indextables and for Parquet
(Parquet answers text queries with `like '%term%'`), their ratio, and write throughput of both.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

from pyspark.sql import SparkSession  # noqa: E402

import indextables_spark as it  # noqa: E402
from datagen import spark_dataframe  # noqa: E402

# kind -> (indextables: (query option or None, filter or None), parquet filter)
QUERIES = {
    "rare term": (("body:quasar", None), "body like '%quasar%'"),
    "common term": (("body:spark", None), "body like '%spark%'"),
    "phrase": (('body:"data lake"', None), "body like '%data lake%'"),
    "rare phrase": (('body:"quasar data"', None), "body like '%quasar data%'"),
    "numeric range (1%)": ((None, "views >= 1000 AND views < 2000"), "views >= 1000 AND views < 2000"),
    "partition filter": ((None, "region = 'eu-central'"), "region = 'eu-central'"),
}


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/indextables-bench")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    it.register(spark)
    shutil.rmtree(args.dir, ignore_errors=True)
    it_path, pq_path = os.path.join(args.dir, "it"), os.path.join(args.dir, "pq")
    src = spark_dataframe(spark, args.rows, partitions=4)

    t0 = time.perf_counter()
    src.write.partitionBy("region").parquet(pq_path)
    pq_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    (src.write.format("indextables").mode("overwrite").partitionBy("region")
        .option("spark.indextables.indexing.typemap.body", "text").save(it_path))
    it_write = time.perf_counter() - t0

    print(f"rows: {args.rows:,}   runs per measurement: {args.runs} (median)")
    print(f"write throughput: indextables {args.rows / it_write:,.0f} rows/s, parquet {args.rows / pq_write:,.0f} rows/s, "
          f"ratio {pq_write / it_write:.2f} (target >= 0.125)")
    print(f"{'query':<20} {'rows':>9} {'it count':>9} {'pq count':>9} {'speedup':>8} {'it collect':>11} {'pq collect':>11} {'speedup':>8}")
    pq = spark.read.parquet(pq_path)
    for kind, ((query, flt), pq_filter) in QUERIES.items():
        r = spark.read.format("indextables")
        if query:
            r = r.option("query", query)
        ours = r.load(it_path)
        if flt:
            ours = ours.filter(flt)
        theirs = pq.filter(pq_filter)
        n = ours.count()
        n_pq = theirs.count()
        it_c = median_time(ours.count, args.runs)
        pq_c = median_time(theirs.count, args.runs)
        it_r = median_time(ours.collect, args.runs)
        pq_r = median_time(theirs.collect, args.runs)
        note = "" if n == n_pq else f"  (parquet substring matches {n_pq:,})"
        print(f"{kind:<20} {n:>9,} {it_c:>8.3f}s {pq_c:>8.3f}s {pq_c / it_c:>7.1f}x {it_r:>10.3f}s {pq_r:>10.3f}s "
              f"{pq_r / it_r:>7.1f}x{note}")
    spark.stop()


if __name__ == "__main__":
    main()
