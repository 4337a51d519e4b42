"""A driver program for tests/test_spark_cluster.py, run as its own process (a pytest process may
already hold a local SparkContext, and a process has only one):

    python tests/spark_cluster_job.py MASTER_URL TABLE_URI CONF_JSON OUT_JSON [companion]

Starts a SparkSession on MASTER_URL, sets the `spark.indextables.*` entries of CONF_JSON as
session conf (the only place the S3 credentials are given), registers indextables, writes
`make_rows(0, N_ROWS)` partitioned by region, reads the table back (all rows, and a full-text query
with a filter) and writes what it read to OUT_JSON as JSON-safe rows (`to_json_row`). With
`companion`, TABLE_URI is a Delta table: builds its companion index as a cluster job and searches it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

SCHEMA = (
    "id long, body string, views int, score double, flag boolean, day date, ts timestamp, "
    "tags array<string>, region string"
)
COLUMNS = [c.split()[0] for c in SCHEMA.split(", ")]
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()
N_ROWS = 300
QUERY, FILTER = "body:alpha", "views > 300"
UTC = dt.timezone.utc


def make_rows(start: int, n: int) -> list[tuple]:
    return [
        (
            i,
            " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)),
            (i * 37) % 1000,
            i / 4,
            i % 3 == 0,
            dt.date(2024, 1, 1 + i % 5),
            dt.datetime(2024, 1, 1, 12, i % 60, i % 7, tzinfo=UTC),
            [WORDS[i % 10], "t"],
            ("eu", "us", "ap")[i % 3],
        )
        for i in range(start, start + n)
    ]


def to_json_row(r) -> list:
    out = []
    for v in tuple(r):
        if isinstance(v, dt.datetime):
            v = (v if v.tzinfo else v.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
        elif isinstance(v, dt.date):
            v = v.isoformat()
        elif isinstance(v, tuple):
            v = list(v)
        out.append(v)
    return out


def main(master: str, uri: str, conf_path: str, out_path: str, mode: str = "write") -> None:
    from pyspark.sql import SparkSession

    import indextables_spark as it

    python = sys.executable
    spark = (
        SparkSession.builder.master(master)
        .appName("indextables-cluster-driver-test")
        .config("spark.cores.max", "2")
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "1g")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", python)
        .getOrCreate()
    )
    with open(conf_path, encoding="utf-8") as f:
        conf = json.load(f)
    assert all(k.startswith("spark.indextables.") for k in conf), sorted(conf)
    for k, v in conf.items():
        spark.conf.set(k, v)
    it.register(spark)
    if mode == "companion":
        companion(spark, uri, out_path)
        return

    rows = make_rows(0, N_ROWS)
    (
        spark.createDataFrame(rows, SCHEMA)
        .repartition(4)
        .write.format("indextables")
        .mode("append")
        .option("partitionBy", "region")
        .option("spark.indextables.indexing.typemap.body", "text")
        .save(uri)
    )
    df = spark.read.format("indextables").load(uri)
    everything = df.select(*COLUMNS).collect()
    hits = spark.read.format("indextables").option("query", QUERY).load(uri).filter(FILTER).select(*COLUMNS).collect()
    result = {
        "master": spark.conf.get("spark.master"),
        "rows": [to_json_row(r) for r in everything],
        "hits": [to_json_row(r) for r in hits],
    }
    spark.stop()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)


def companion(spark, source: str, out_path: str) -> None:
    """BUILD INDEXTABLES COMPANION over the Delta table at `source` as a cluster job (the workers
    index the source files), then search it through the cluster."""
    import indextables_spark as it

    index = source + "-index"
    build = (
        it.sql(
            spark,
            f"BUILD INDEXTABLES COMPANION FOR DELTA '{source}' INDEXING MODES ('body':'text') AT LOCATION '{index}'",
        )
        .collect()[0]
        .asDict()
    )
    hits = spark.read.format("indextables").option("query", QUERY).load(index).filter(FILTER).select(*COLUMNS).collect()
    everything = spark.read.format("indextables").load(index).select(*COLUMNS).collect()
    result = {"build": build, "rows": [to_json_row(r) for r in everything], "hits": [to_json_row(r) for r in hits]}
    spark.stop()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main(*sys.argv[1:6])
