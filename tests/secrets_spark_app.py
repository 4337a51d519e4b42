"""A Spark program run by tests/test_secrets_spark_ui.py, started with the planted environment of
tests/secret_plants.py (its Java options and `--conf` list reach the session conf): it puts the
other fakes in the session conf and in read/write and `IndexTable` options, runs what a user runs
(writes, reads, SQL, every DESCRIBE, explain, MERGE SPLITS, failing reads), and writes every text
it was shown to a JSON file {output: text}: results, errors, log records at DEBUG, and what the
Spark UI's REST API serves (SQL tab, jobs, stages with their details). The test searches them,
the program's own stdout and stderr (Spark's log) and, over Connect, the server's log.

    python secrets_spark_app.py OUT.json TABLE_DIR [--connect sc://… --ui http://…]
                                [--s3-uri s3://bucket/prefix --s3-endpoint http://…]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import time
import traceback
import urllib.request
from typing import Any, Callable

from secret_plants import (
    read_options,
    sas_failure_options,
    session_conf,
    table_options,
    url_with_credentials,
    write_options,
)

AZURE_PATH = "wasbs://c@acct.blob.core.windows.net/t"


def classic_session() -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("indextables-secrets")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "0")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .getOrCreate()
    )


def rest(base: str, app_id: str) -> dict[str, str]:
    """The UI's REST API: every SQL execution with its plan (and the session conf it lists),
    every job (its description), every stage with its details (the call site; over Connect the
    request's text)."""
    out = {}
    for endpoint in ("sql?details=true&planDescription=true", "jobs", "stages?details=true"):
        with urllib.request.urlopen(f"{base}/api/v1/applications/{app_id}/{endpoint}", timeout=60) as r:
            out[f"Spark UI {endpoint.split('?')[0]}"] = r.read().decode()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("table_dir")
    p.add_argument("--connect")
    p.add_argument("--ui")
    p.add_argument("--s3-uri")
    p.add_argument("--s3-endpoint")
    args = p.parse_args()

    log_text = io.StringIO()
    handler = logging.StreamHandler(log_text)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    # py4j's DEBUG log echoes every command sent to the JVM, `.option(k, v)` included: not ours
    # to clean (docs/guide/object-stores-and-credentials.md says to keep it at INFO)
    logging.getLogger("py4j").setLevel(logging.INFO)

    if args.connect:
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        spark = RemoteSparkSession.builder.remote(args.connect).getOrCreate()
    else:
        spark = classic_session()
    import indextables_spark as it

    outputs: dict[str, str] = {}
    facts: dict[str, Any] = {}

    def shown(name: str, fn: Callable[[], Any]) -> None:
        outputs[name] = "\n".join(map(str, fn()))

    def failure(name: str, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as e:
            outputs[f"error: {name}"] = f"{e}\n{e!r}\n" + "".join(traceback.format_exception(e))
        else:
            raise AssertionError(f"{name}: no error")

    for k, v in session_conf().items():
        spark.conf.set(k, v)
    it.register(spark)
    path = f"{args.table_dir}/t"
    df = spark.createDataFrame([(i, "a b" if i % 2 else "c d") for i in range(20)], "id long, body string")
    for mode in ("overwrite", "append"):
        df.write.format("indextables").options(**write_options()).mode(mode).save(path)
    read = spark.read.format("indextables").options(**read_options()).load(path)
    facts["count"] = read.count()
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW v USING indextables OPTIONS (path '{path}', "
        f"'spark.indextables.azure.bearerToken' '{read_options()['spark.indextables.azure.bearerToken']}')"
    )
    shown("SQL over a view", lambda: spark.sql("SELECT count(*) FROM v WHERE _indexall = 'body:\"a b\"'").collect())
    for text in (
        "DESCRIBE INDEXTABLES ENVIRONMENT",
        f"DESCRIBE INDEXTABLES TABLE '{path}'",
        f"DESCRIBE INDEXTABLES STATE '{path}'",
        f"DESCRIBE INDEXTABLES TRANSACTION LOG '{path}' INCLUDE ALL",
        f"DESCRIBE INDEXTABLES COMPONENT SIZES '{path}'",
        "DESCRIBE INDEXTABLES STORAGE STATS",
        "DESCRIBE INDEXTABLES DISK CACHE",
        f"MERGE SPLITS '{path}'",
    ):
        shown(f"spark.sql {text}", lambda text=text: spark.sql(text).collect())
    shown(
        "it.sql DESCRIBE INDEXTABLES ENVIRONMENT", lambda: it.sql(spark, "DESCRIBE INDEXTABLES ENVIRONMENT").collect()
    )
    shown("table function", lambda: spark.sql("SELECT * FROM indextables_describe_environment()").collect())
    env = spark.sql("DESCRIBE INDEXTABLES ENVIRONMENT").collect()
    facts["worker rows"] = [r.asDict() for r in env if r.role == "worker" and r.property_type == "env"]
    facts["driver rows"] = [r.asDict() for r in env if r.role == "driver" and r.property_type in ("env", "spark")]
    shown("it.describe_environment", lambda: it.describe_environment(spark, options=table_options()))

    filtered = read.filter("id > 3")
    outputs["it.explain"] = json.dumps(it.explain(filtered), default=str)
    shown(
        "EXPLAIN",
        lambda: spark.sql("EXPLAIN EXTENDED SELECT count(*) FROM v WHERE _indexall = 'body:\"a b\"'").collect(),
    )
    outputs["DataFrame explain"] = (
        filtered._explain_string(mode="extended") if args.connect else (filtered._jdf.queryExecution().toString())
    )
    t = it.IndexTable(path, table_options(), spark=spark)
    outputs["IndexTable(spark)"] = (
        repr(t) + repr(t.options) + json.dumps(t.explain('body:"a b"').to_dict(), default=str)
    )
    aggregate = {"ids": {"stats": {"field": "id"}}}  # as a Spark job (its description names the table)
    outputs["IndexTable(spark) aggregate"] = repr(t.aggregate(aggregate, spark=spark, execution="spark"))

    failure(
        "Spark read of a URL with credentials",
        lambda: spark.read.format("indextables").load(url_with_credentials()).count(),
    )
    failure("IndexTable of a URL with credentials", lambda: it.IndexTable(url_with_credentials(), spark=spark).count())
    failure(
        "Spark read of a SAS-signed table that fails",
        lambda: spark.read.format("indextables").options(**sas_failure_options()).load(AZURE_PATH).count(),
    )

    if args.s3_uri:  # a credential provider's answer used in the driver and in the Python workers
        s3 = {
            "spark.indextables.aws.credentialsProvider": "credential_providers:planted",
            "spark.indextables.s3.endpoint": args.s3_endpoint,
            "spark.indextables.s3.pathStyleAccess": "true",
            "spark.indextables.aws.region": "us-east-1",
        }
        df.write.format("indextables").options(**s3).mode("overwrite").save(args.s3_uri)
        facts["s3 count"] = spark.read.format("indextables").options(**s3).load(args.s3_uri).count()
        failure(
            "Spark read of a bucket that does not exist",
            lambda: spark.read.format("indextables")
            .options(**s3)
            .load(f"s3://no-such-bucket-{time.time_ns()}/t")
            .count(),
        )
        for k, v in s3.items():  # the SQL commands take the session's conf
            spark.conf.set(k, v)
        shown("DESCRIBE S3 table", lambda: spark.sql(f"DESCRIBE INDEXTABLES TABLE '{args.s3_uri}'").collect())

    time.sleep(2)  # the UI's listeners catch up with the last events
    if args.connect:
        with urllib.request.urlopen(f"{args.ui}/api/v1/applications", timeout=60) as r:
            app_id = json.loads(r.read())[0]["id"]
        outputs.update(rest(args.ui, app_id))
    else:
        outputs.update(rest(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId))
    outputs["log records (DEBUG)"] = log_text.getvalue()
    spark.stop()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"outputs": outputs, "facts": facts}, f)


if __name__ == "__main__":
    main()
