"""The driver program of tests/test_packed_env.py: indextables on a cluster whose workers' Python
does not have the package, the package shipped as a packed environment (venv-pack archive).

    spark-submit --archives env.tar.gz#environment \
        --conf spark.sql.execution.pyspark.python=./environment/bin/python \
        tests/packed_env_job.py submit OUT_JSON LOCAL_ROOT S3_ROOT CONF_JSON
    python tests/packed_env_job.py connect URL OUT_JSON LOCAL_ROOT S3_ROOT CONF_JSON ARCHIVE

`submit` (client mode: the driver's Python, PYSPARK_DRIVER_PYTHON, has the package, and a Python
data source is planned on the driver with the Python it was registered with; the executors run
./environment/bin/python, from the archive Spark unpacked: PYSPARK_PYTHON for RDD-level Python,
spark.sql.execution.pyspark.python for SQL's Python runners, data source tasks included):
  1. `executors`: what Python the executors run for a Python UDF (sys.executable, where
     indextables_spark and pyarrow come from), one probe per task.
  2. `auto`: the data source as Spark found it (auto-registration of `pyspark_indextables`, no
     `it.register`): a small write and read back. Then the same read without
     spark.sql.execution.pyspark.python, which should fail (`auto_unset_error`): the tasks then run
     the driver's Python path.
  3. `it.register(spark)` (which registers with the driver's Python: sc.pythonExec is relative), and on local disk and S3: `workload` (write, full-text search, filters,
     SQL operators, aggregates, read back).
`connect` (a client of a Connect server on the cluster, whose driver's Python has the package):
`server_archive` (a UDF probe with the server's own spark.archives), then the client's
`addArtifacts(ARCHIVE#environment, archive=True)`, `executors` again, and `workload` on both.
Each step's result or error goes to OUT_JSON; the test checks them.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cluster_jobs import COLUMNS, SCHEMA, make_rows, to_json_row  # noqa: E402

N_ROWS = 300


def probe(_) -> list[dict]:
    """Runs in a Python worker: which Python, and where the package comes from."""
    import os
    import sys

    out = {"executable": sys.executable, "prefix": sys.prefix, "cwd": os.getcwd()}
    for module in ("indextables_spark", "pyarrow", "tantivy"):
        try:
            out[module] = __import__(module).__file__
        except ImportError as e:
            out[module] = f"ImportError: {e}"
    try:
        from pyspark.core.files import SparkFiles

        out["spark_files"] = SparkFiles.getRootDirectory()
    except Exception as e:  # noqa: BLE001
        out["spark_files"] = f"{type(e).__name__}: {e}"
    return [out]


def error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:4000]


def workload(spark, it, uri: str, view: str, options: dict | None = None) -> dict:
    """Write N_ROWS partitioned by region; read them back; search (full text, a filter, SQL
    operators); aggregate (SQL over the index, and a Spark groupBy of a search). `options` go to
    every read and write (over Connect: the credentials, which a Connect session conf does not
    hand back to the client)."""
    options = options or {}

    def read():
        return spark.read.format("indextables").options(**options)

    (
        spark.createDataFrame(make_rows(0, N_ROWS), SCHEMA)
        .repartition(2)
        .write.format("indextables")
        .options(**options)
        .mode("append")
        .option("partitionBy", "region")
        .option("spark.indextables.indexing.typemap.body", "text")
        .save(uri)
    )
    out: dict = {}
    df = read().load(uri)
    out["rows"] = [to_json_row(r) for r in df.select(*COLUMNS).collect()]
    hits = read().option("query", "body:alpha").load(uri).filter("views > 300")
    out["hits"] = sorted(r.id for r in hits.select("id").collect())
    out["columns"] = sorted(r.id for r in df.filter(it.textsearch("body", "charlie")).filter("region = 'eu'").collect())
    view_options = "".join(f", '{k}' '{v}'" for k, v in options.items())
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {view} USING indextables OPTIONS (path '{uri}'{view_options})")
    out["sql_hits"] = sorted(
        r.id for r in spark.sql(f"SELECT id FROM {view} WHERE body TEXTSEARCH 'alpha' AND views > 300").collect()
    )
    out["sql_agg"] = {
        r.region: [r.n, r.v]
        for r in spark.sql(
            f"SELECT region, count(*) AS n, sum(views) AS v FROM {view} WHERE body TEXTSEARCH 'bravo' GROUP BY region"
        ).collect()
    }
    grouped = (
        read()
        .option("query", "body:delta")
        .load(uri)
        .filter("views < 700")
        .groupBy("region")
        .agg({"views": "sum", "id": "count"})
        .collect()
    )
    out["df_agg"] = {r.region: [r["count(id)"], r["sum(views)"]] for r in grouped}
    return out


def step(result: dict, name: str, fn) -> None:
    try:
        result[name] = fn()
    except Exception as e:  # noqa: BLE001 - the test reads the error
        result[name + "_error"] = error(e)
        result[name + "_traceback"] = traceback.format_exc()[-6000:]


def submit(out_path: str, local_root: str, s3_root: str, conf_path: str) -> None:
    from pyspark.sql import SparkSession

    import indextables_spark as it

    spark = SparkSession.builder.appName("indextables-packed-env").getOrCreate()
    executors_python = spark.conf.get("spark.sql.execution.pyspark.python")
    result: dict = {
        "driver_executable": sys.executable,
        "driver_pyspark_python": os.environ.get("PYSPARK_PYTHON"),
        "driver_spark_files": __import__("pyspark").SparkFiles.getRootDirectory(),
    }
    step(result, "executors", lambda: [dict(r.p) for r in _probe_df(spark).collect()])

    def auto() -> int:
        rows = make_rows(0, 20)
        spark.createDataFrame(rows, SCHEMA).write.format("indextables").mode("append").option(
            "spark.indextables.indexing.typemap.body", "text"
        ).save(local_root + "/auto")
        return spark.read.format("indextables").load(local_root + "/auto").count()

    step(result, "auto", auto)
    spark.conf.unset("spark.sql.execution.pyspark.python")
    step(result, "auto_unset", lambda: spark.read.format("indextables").load(local_root + "/auto").count())
    spark.conf.set("spark.sql.execution.pyspark.python", executors_python)

    with open(conf_path, encoding="utf-8") as f:
        for k, v in json.load(f).items():  # S3 credentials and endpoint: session conf only
            spark.conf.set(k, v)
    # A data source registered from Python plans with sc.pythonExec (PYSPARK_PYTHON, here
    # ./environment/bin/python), which does not resolve on the driver: register() uses the driver's
    # Python while it registers (spark/source_registration.py planning_python) and restores sc.pythonExec.
    sc = spark.sparkContext
    recorded = sc.pythonExec
    it.register(spark)
    result["python_exec_restored"] = sc.pythonExec == recorded
    step(result, "local", lambda: workload(spark, it, local_root + "/table", "docs_local"))
    step(result, "s3", lambda: workload(spark, it, s3_root, "docs_s3"))
    spark.stop()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)


def connect(url: str, out_path: str, local_root: str, s3_root: str, conf_path: str, archive: str) -> None:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    import indextables_spark as it

    spark = RemoteSparkSession.builder.remote(url).getOrCreate()
    result: dict = {}
    with open(conf_path, encoding="utf-8") as f:
        conf = json.load(f)
    for k, v in conf.items():
        spark.conf.set(k, v)
    # a Connect server does not hand secrets back to its clients: the credentials go as options
    secrets = {k: v for k, v in conf.items() if k.rsplit(".", 1)[-1] in ("accessKey", "secretKey")}
    it.register(spark)
    step(result, "server_archive", lambda: [dict(r.p) for r in _probe_df(spark).collect()])
    # the client's own archive: unpacked in this session's directory, where the server's Python
    # workers for this session start
    step(result, "add_artifacts", lambda: spark.addArtifacts(archive + "#environment", archive=True))
    step(result, "executors", lambda: [dict(r.p) for r in _probe_df(spark).collect()])
    step(result, "local", lambda: workload(spark, it, local_root + "/connect-table", "cdocs_local"))
    step(result, "s3", lambda: workload(spark, it, s3_root + "/connect", "cdocs_s3", secrets))
    spark.stop()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)


def _probe_df(spark):
    """`probe` as a Python UDF over two rows (Connect has no RDDs)."""
    from pyspark.sql.functions import col, udf
    from pyspark.sql.types import MapType, StringType

    @udf(MapType(StringType(), StringType()))
    def where(_):
        return probe(None)[0]

    return spark.range(2).repartition(2).select(where(col("id")).alias("p"))


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "submit":
        submit(*args)
    elif mode == "connect":
        connect(*args)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
