"""Helpers shared by the bench scripts (run as `python bench/<script>.py`: this folder is on sys.path)."""

from __future__ import annotations

import argparse
import statistics
import time


def bench_arguments(default_dir: str, runs: int = 5) -> argparse.ArgumentParser:
    """The arguments every table-building bench takes: --rows, --runs, --dir, --reuse."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--dir", default=default_dir)
    ap.add_argument("--reuse", action="store_true", help="keep the tables of an earlier run with the same --dir")
    return ap


def median_time(fn, runs: int) -> float:
    """Median seconds of `runs` calls of fn, after one warm-up call (worker start, cache fill, codegen)."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fetch_rows(table, query: str) -> int:
    """Rows matching a query, read like a Spark task reads them (every split, rows materialised).
    `table` is an indextables_spark.IndexTable."""
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    n = 0
    cache = get_cache(table.options)
    for f in table.snapshot().files:
        for b in SplitReader(cache.local_dir(table.storage, f)).read(query=query):
            n += b.num_rows
    return n


def local_spark():
    """The benches' SparkSession: local[2], quiet, UTC, 4g driver, indextables registered."""
    import os
    import sys

    from pyspark.sql import SparkSession

    import indextables_spark as it

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    it.register(spark)
    return spark
