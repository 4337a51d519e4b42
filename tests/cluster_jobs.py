"""The driver programs of the standalone-cluster tests, one module. Each job runs as its own process
(a pytest process may already hold a local SparkContext, and a process has only one), started by
tests/cluster_launch.py:

    python tests/cluster_jobs.py JOB MASTER_URL TABLE_URI CONF_JSON OUT_JSON [ARG]

Every job starts a SparkSession on MASTER_URL (`session`: CLUSTER_CONF, both executors up before
the first job) and sets the `spark.indextables.*` entries of CONF_JSON as session conf (the only
place the S3 credentials are given), registers indextables, runs, and writes what it found to
OUT_JSON. The jobs (JOBS):

- `write` (tests/test_spark_cluster.py): writes `make_rows(0, N_ROWS)` partitioned by region,
  reads the table back (all rows, and a full-text query with a filter) as JSON-safe rows
  (`to_json_row`).
- `companion` (tests/test_spark_cluster.py): TABLE_URI is a Delta table: builds its companion
  index as a cluster job (the workers index the source files) and searches it.
- `reference` ARG=QUERY (tests/test_reference_cloud.py): reads the table IndexTables4Spark wrote
  (every row, the rows matching QUERY, a filtered count).
- `vector` (tests/test_vector_search.py): writes a table with a vector column through Spark (the
  executors build the splits and their vector indexes), then runs a vector read, a hybrid read and
  a search join on the cluster, for the test to check against IndexTable.search.
- `vector_build` (tests/test_vector_cluster_build.py): writes vectors generated in the executors
  (tests/cluster_tasks.py) to TABLE_URI/indexed with a vector column and to TABLE_URI/stored with
  the column stored only, each as its own job group, and returns the sizes of the partitions and
  what each group ran (jobs, stages, tasks) as the driver's status API lists it (its UI on).

The rows (`SCHEMA`, `make_rows`, `to_json_row`) are also tests/packed_env_job.py's.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import Any, Callable

from spark_servers import TEST_JVM_OPTIONS

SCHEMA = (
    "id long, body string, views int, score double, flag boolean, day date, ts timestamp, "
    "tags array<string>, region string"
)
COLUMNS = [c.split()[0] for c in SCHEMA.split(", ")]
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()
N_ROWS = 300
QUERY, FILTER = "body:alpha", "views > 300"
UTC = dt.timezone.utc
DIMS = 16  # the `vector` job's vectors

# The Spark conf of a driver on the test cluster (two 1-core workers): a job's session and
# spark-submit's --conf (tests/cluster_launch.py) alike
CLUSTER_CONF = {
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",  # both executors up before the first job
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
    "spark.executor.extraJavaOptions": TEST_JVM_OPTIONS,
}


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


def vectors(n: int) -> list[list[float]]:
    import numpy as np

    rng = np.random.default_rng(3)
    centres = rng.standard_normal((20, DIMS)) * 3
    x = centres[rng.integers(0, 20, n)] + rng.standard_normal((n, DIMS))
    return [[float(v) for v in row] for row in x.astype("float32")]


def session(master: str, conf_path: str, app: str, extra: dict[str, str] | None = None):
    """A session on the cluster with CLUSTER_CONF (then `extra`), this Python on both sides, and
    the `spark.indextables.*` entries of CONF_JSON set as session conf (checked: nothing else)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(f"indextables-cluster-{app}")
    for k, v in {
        **CLUSTER_CONF,
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **(extra or {}),
    }.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    with open(conf_path, encoding="utf-8") as f:
        conf = json.load(f)
    assert all(k.startswith("spark.indextables.") for k in conf), sorted(conf)
    for k, v in conf.items():
        spark.conf.set(k, v)
    return spark


# ---- the jobs: each returns what it writes to OUT_JSON ------------------------------------------


def write(spark, uri: str) -> dict[str, Any]:
    (
        spark.createDataFrame(make_rows(0, N_ROWS), SCHEMA)
        .repartition(4)
        .write.format("indextables")
        .mode("append")
        .option("partitionBy", "region")
        .option("spark.indextables.indexing.typemap.body", "text")
        .save(uri)
    )
    return {"master": spark.conf.get("spark.master"), **read_back(spark, uri)}


def companion(spark, source: str) -> dict[str, Any]:
    """BUILD INDEXTABLES COMPANION over the Delta table at `source` as a cluster job (the workers
    index the source files), then search it through the cluster."""
    import indextables_spark as it

    index = source + "-index"
    sql = f"BUILD INDEXTABLES COMPANION FOR DELTA '{source}' INDEXING MODES ('body':'text') AT LOCATION '{index}'"
    build = it.sql(spark, sql).collect()[0].asDict()
    return {"build": build, **read_back(spark, index)}


def read_back(spark, uri: str) -> dict[str, Any]:
    """Every row, and the rows matching QUERY and FILTER, as JSON-safe rows."""
    everything = spark.read.format("indextables").load(uri).select(*COLUMNS).collect()
    hits = spark.read.format("indextables").option("query", QUERY).load(uri).filter(FILTER).select(*COLUMNS).collect()
    return {"rows": [to_json_row(r) for r in everything], "hits": [to_json_row(r) for r in hits]}


def reference(spark, uri: str, query: str) -> dict[str, Any]:
    df = spark.read.format("indextables").load(uri)
    rows = [r.asDict() for r in df.collect()]
    hits = [r["id"] for r in spark.read.format("indextables").option("query", query).load(uri).collect()]
    return {"rows": rows, "hits": hits, "over": df.filter("id >= 3").count()}


def vector(spark, uri: str) -> dict[str, Any]:
    import indextables_spark as it

    x = vectors(1200)
    rows = [(i, f"doc {i} {'quick' if i % 4 == 0 else 'slow'}", i % 100, x[i]) for i in range(len(x))]
    df = spark.createDataFrame(rows, "id long, body string, sel long, emb array<float>").repartition(2)
    (
        df.write.format("indextables")
        .option("spark.indextables.indexing.vector.emb", f"{DIMS},cosine")
        .option("spark.indextables.indexing.typemap.body", "text")
        .mode("overwrite")
        .save(uri)
    )
    q = ",".join(str(v) for v in x[11])
    near = spark.read.format("indextables").option("vector", q).option("limit", 5).option("where", "sel < 50")
    hybrid = spark.read.format("indextables").options(vector=q, query="body:quick", fusion="rrf", limit="5")
    queries = spark.createDataFrame([(i, x[i * 13]) for i in range(6)], "qid int, vec array<float>")
    joined = it.search_join(queries, uri, vector_col="vec", k=3).select("qid", "_rank", "match_id")
    return {
        "query": x[11],
        "join_queries": [x[i * 13] for i in range(6)],
        "near": [r["id"] for r in near.load(uri).collect()],
        "hybrid": [r["id"] for r in hybrid.load(uri).collect()],
        "join": sorted([r["qid"], r["_rank"], r["match_id"]] for r in joined.collect()),
    }


VECTOR_BUILD_SIZES = (2_600, 1_800)  # rows of the `vector_build` job's two partitions (distinct)


def vector_build(spark, uri: str) -> dict[str, Any]:
    from cluster_tasks import generated_vectors, run_group

    df = generated_vectors(spark, VECTOR_BUILD_SIZES, DIMS)

    def write(path: str, option: str, value: str) -> None:
        df.write.format("indextables").option(option, value).mode("overwrite").save(path)

    indexed_s, indexed = run_group(
        spark, "indexed", lambda: write(uri + "/indexed", "spark.indextables.indexing.vector.emb", f"{DIMS},l2")
    )
    stored_s, stored = run_group(
        spark, "stored", lambda: write(uri + "/stored", "spark.indextables.indexing.storeonly", "emb")
    )
    return {
        "sizes": list(VECTOR_BUILD_SIZES),
        "indexed": {"seconds": indexed_s, **indexed.to_json()},
        "stored": {"seconds": stored_s, **stored.to_json()},
    }


JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    "write": write,
    "companion": companion,
    "reference": reference,
    "vector": vector,
    "vector_build": vector_build,
}


def job_conf(job: str) -> dict[str, str]:
    """Spark conf a job needs beyond CLUSTER_CONF: `vector_build` reads the driver's status API."""
    if job == "vector_build":
        from cluster_tasks import ui_conf

        return ui_conf()
    return {}


def main(job: str, master: str, uri: str, conf_path: str, out_path: str, *args: str) -> None:
    import indextables_spark as it

    run = JOBS[job]
    spark = session(master, conf_path, job, job_conf(job))
    try:
        it.register(spark)
        result = run(spark, uri, *args)
    finally:
        spark.stop()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main(*sys.argv[1:])
