"""Quickstart: write 100,000 generated documents as an indextables table and search it.

Run with `make demo` (or `.venv/bin/python examples/quickstart.py [table-path]`).
"""

from __future__ import annotations

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyspark.sql import SparkSession  # noqa: E402

import indextables_spark as it  # noqa: E402
from datagen import spark_dataframe  # noqa: E402

N_DOCS = 100_000


def timed(label, fn):
    t0 = time.perf_counter()
    result = fn()
    print(f"  [{label}: {time.perf_counter() - t0:.2f} s]")
    return result


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.abspath("demo-table")
    shutil.rmtree(path, ignore_errors=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("indextables-quickstart")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    it.register(spark)

    print(f"Writing {N_DOCS:,} documents to {path} (partitioned by region, body full-text indexed)")
    df = spark_dataframe(spark, N_DOCS)
    timed(
        "write",
        lambda: (
            df.write.format("indextables")
            .mode("overwrite")
            .partitionBy("region")
            .option("spark.indextables.indexing.typemap.body", "text")
            .option("spark.indextables.indexing.typemap.title", "text")
            .save(path)
        ),
    )
    table = it.IndexTable(path)
    snap = table.snapshot()
    print(
        f"Table version {snap.version}: {snap.num_files} splits, {snap.total_bytes / 1e6:.1f} MB, "
        f"{table.count():,} rows"
    )

    docs = spark.read.format("indextables").load(path)

    print('\n1) Full-text query: body:quasar AND body:"data lake"')
    q = spark.read.format("indextables").option("query", 'body:quasar AND body:"data lake"').load(path)
    rows = timed("query", lambda: q.select("id", "region", "title").orderBy("id").limit(5).collect())
    for r in rows:
        print(f"   {r.id:>7}  {r.region:<10}  {r.title}")
    print(f"   total matches: {q.count():,}")

    print("\n2) Filtered query: views > 99900 AND day >= 2024-12-01 (pushed into the index)")
    f = docs.filter("views > 99900 AND day >= date'2024-12-01'")
    rows = timed("filter", lambda: f.select("id", "views", "day").orderBy("views", ascending=False).limit(5).collect())
    for r in rows:
        print(f"   {r.id:>7}  views={r.views:<6}  day={r.day}")

    print("\n3) Partition-pruned query: region = 'eu-central' AND tags contain 'wiki', counted")
    p = docs.filter("region = 'eu-central'").filter("array_contains(tags, 'wiki')")
    n = timed("partition", lambda: p.count())
    print(f"   {n:,} rows (only the eu-central splits were read)")

    print("\nHistory:")
    for h in table.inspect.history():
        print(f"   v{h['version']}  {h['operation']:<13} +{h['numAddedFiles']} files, {h['numAddedRecords']:,} rows")
    spark.stop()


if __name__ == "__main__":
    main()
