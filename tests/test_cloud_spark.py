"""Spark round trip on S3 (moto) and Azure (Azurite), with the secrets check.

One broad test per backend: a partitioned table with several types is written to an s3:// / az://
URI, appended to, read back with filters and a full-text query, time travelled, overwritten,
checkpointed and described; options reach the executors through the Spark conf (endpoint, and
later the credentials) and through writer/reader options (the credentials of the first write).
Failing calls (a missing table; on Azure a write with a read-only SAS, failing in the executors;
on S3 a missing bucket) give errors without secrets. Finally every object under the table, the
Python log records of the driver (DEBUG), Spark's driver log (INFO, through a log4j appender),
the plans, command outputs and error texts are searched for the secrets.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import secrets as _random
from urllib.parse import unquote

import pytest
from cloud_helpers import session_conf
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from test_cloud_secrets import exception_text, leaks, s3_secrets

import indextables_spark as it

pytestmark = [pytest.mark.spark, pytest.mark.cloud]

SCHEMA = (
    "id long, body string, views int, score double, flag boolean, day date, ts timestamp, "
    "tags array<string>, region string"
)
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()
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
            dt.datetime(2024, 1, 1, 12, i % 60, tzinfo=UTC),
            [WORDS[i % 10], "t"],
            ("eu", "us", "ap")[i % 3],
        )
        for i in range(start, start + n)
    ]


def norm(rows) -> list[tuple]:
    out = []
    for r in rows:
        r = tuple(r)
        ts = r[6].astimezone(UTC) if r[6].tzinfo else r[6].replace(tzinfo=UTC)
        out.append(r[:6] + (ts,) + (list(r[7]),) + r[8:])
    return sorted(out)


@contextlib.contextmanager
def spark_driver_log(spark, path: str):
    """Spark's (log4j) driver log at INFO into `path` while the block runs."""
    jvm = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    ctx = log4j.LogManager.getContext(False)
    config = ctx.getConfiguration()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%d %p %c: %m%n").build()
    name = f"indextables-secrets-{_random.token_hex(4)}"
    appender = log4j.core.appender.FileAppender.newBuilder().withFileName(path).setName(name).setLayout(layout).build()
    appender.start()
    config.addAppender(appender)
    root = config.getRootLogger()
    level = root.getLevel()
    root.addAppender(appender, log4j.Level.INFO, None)
    root.setLevel(log4j.Level.INFO)
    ctx.updateLoggers()
    try:
        yield
    finally:
        root.removeAppender(name)
        root.setLevel(level)
        ctx.updateLoggers()
        appender.stop()


def backend_setup(target, request) -> tuple[dict, dict, dict, list[str]]:
    """(session conf, write-1 options, credentials conf, secrets) for the backend."""
    if target.kind == "s3":
        creds = s3_secrets()
        conf = {k: v for k, v in target.options.items() if "aws.accessKey" not in k and "aws.secretKey" not in k}
        return conf, creds, creds, list(creds.values())
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    cs = target.options["spark.indextables.azure.connectionString"]
    key = next(p.split("=", 1)[1] for p in cs.split(";") if p.startswith("AccountKey="))
    container = target.uri.split("://", 1)[1].split("/", 1)[0]
    expiry = dt.datetime.now(UTC) + dt.timedelta(hours=2)
    sas = generate_container_sas(
        "devstoreaccount1",
        container,
        account_key=key,
        expiry=expiry,
        permission=ContainerSasPermissions(read=True, add=True, create=True, write=True, delete=True, list=True),
    )
    read_only = generate_container_sas(
        "devstoreaccount1",
        container,
        account_key=key,
        expiry=expiry,
        permission=ContainerSasPermissions(read=True, list=True),
    )
    conf = {
        "spark.indextables.azure.endpoint": request.getfixturevalue("azure_endpoint"),
        "spark.indextables.storage.retry.baseDelayMs": "20",
    }
    creds = {"spark.indextables.azure.sasToken": sas}
    sigs = [unquote(p.split("=", 1)[1]) for s in (sas, read_only) for p in s.split("&") if p.startswith("sig=")]
    return conf, creds, {**creds, "read_only": read_only}, [sas, read_only, key, *sigs]


def test_spark_round_trip_and_no_secrets(spark, cloud_backend, request, caplog, tmp_path):
    uri = cloud_backend.uri
    conf, write_options, creds, secret_values = backend_setup(cloud_backend, request)
    read_only = creds.pop("read_only", None)
    rows1, rows2, rows3 = make_rows(0, 40), make_rows(40, 20), make_rows(100, 10)
    texts: dict[str, str] = {}
    driver_log = str(tmp_path / "spark-driver.log")

    caplog.set_level(logging.DEBUG)
    # py4j's DEBUG log echoes every command sent to the JVM, the values of the program's own
    # .option(...) calls included, before this package sees them: out of scope here.
    logging.getLogger("py4j").setLevel(logging.INFO)
    read = lambda **o: spark.read.format("indextables").options(**o).load(uri)  # noqa: E731
    ids = lambda df: sorted(r.id for r in df.select("id").collect())  # noqa: E731
    with session_conf(spark, conf), spark_driver_log(spark, driver_log):
        # write 1: credentials as writer options (the endpoint comes from the session conf)
        (
            spark.createDataFrame(rows1, SCHEMA)
            .write.format("indextables")
            .mode("append")
            .partitionBy("region")
            .option("spark.indextables.indexing.typemap.body", "text")
            .options(**write_options)
            .save(uri)
        )
        with session_conf(spark, creds):  # from here on the credentials come from the Spark conf too
            spark.createDataFrame(rows2, SCHEMA).write.format("indextables").mode("append").save(uri)
            df = read()
            assert [f.name for f in df.schema.fields] == SCHEMA.replace(",", "").split()[0::2]
            assert norm(df.collect()) == norm(rows1 + rows2)
            assert ids(df.filter("views > 500 AND region = 'eu'")) == sorted(
                r[0] for r in rows1 + rows2 if r[2] > 500 and r[8] == "eu"
            )
            assert ids(read(query="body:alpha AND views:[0 TO 600]").filter("region = 'us'")) == sorted(
                r[0] for r in rows1 + rows2 if "alpha" in r[1].split() and r[2] <= 600 and r[8] == "us"
            )
            assert ids(read(versionAsOf="0")) == [r[0] for r in rows1]
            spark.createDataFrame(rows3, SCHEMA).write.format("indextables").mode("overwrite").save(uri)
            assert ids(read()) == [r[0] for r in rows3]
            assert ids(read(versionAsOf="1")) == sorted(r[0] for r in rows1 + rows2)
            texts["checkpoint"] = repr(it.sql(spark, f"CHECKPOINT INDEXTABLES '{uri}'").collect())
            describe = it.sql(spark, f"DESCRIBE INDEXTABLES STATE '{uri}'").collect()
            assert (describe[0].table_version, describe[0].format, describe[0].version) == (2, "avro-state", 2)
            texts["describe"] = repr(describe)
            texts["plan"] = read(query="body:alpha")._jdf.queryExecution().toString()

            # failing calls
            with pytest.raises(Exception, match="missing-table") as missing:
                spark.read.format("indextables").load(uri + "/missing-table").collect()
            texts["missing table"] = exception_text(missing.value)
            assert "TableNotFoundError" in texts["missing table"]
            if cloud_backend.kind == "azure":
                with pytest.raises(Exception, match="403") as denied:  # the executors' uploads are refused
                    spark.createDataFrame(rows3, SCHEMA).write.format("indextables").mode("append").option(
                        "spark.indextables.azure.sasToken", read_only
                    ).save(uri)
                texts["read-only SAS"] = exception_text(denied.value)
                assert "StorageError" in texts["read-only SAS"] and uri in texts["read-only SAS"]
            else:
                bucket = f"no-such-bucket-{_random.token_hex(4)}"
                with pytest.raises(Exception, match=bucket) as no_bucket:
                    it.sql(spark, f"DESCRIBE INDEXTABLES STATE 's3://{bucket}/t'").collect()
                texts["missing bucket"] = exception_text(no_bucket.value)
                assert isinstance(no_bucket.value, it.IndexTablesError)

    options = {**cloud_backend.options, **conf, **creds}
    t = it.IndexTable(uri, options)
    # the failed write committed nothing
    assert [h["operation"] for h in t.inspect.history()] == ["OVERWRITE", "WRITE", "CREATE TABLE"]
    config = t.snapshot().metadata["configuration"]
    assert all(k.startswith(("spark.indextables.indexing.", "docMappingSchema.")) for k in config), sorted(config)

    texts["driver log"] = open(driver_log, encoding="utf-8", errors="replace").read()
    # the appender did capture the driver's INFO log of our jobs (scheduler, scan pushdown into indextables)
    assert "DAGScheduler" in texts["driver log"] and "indextables" in texts["driver log"], texts["driver log"][:500]
    texts["log records"] = caplog.text
    assert leaks(t.storage, secret_values, texts) == []
