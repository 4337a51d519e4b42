"""DESCRIBE INDEXTABLES STORAGE STATS / ENVIRONMENT / COMPONENT SIZES: Spark-free, through the
command line (`--json`), `t.inspect`, spark.sql and the table functions after `register`, on S3
(component sizes read by ranges, counted by STORAGE STATS) and over Spark Connect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.storage.fetch_stats import fetch_stats
from indextables_spark.errors import IndexTablesError, TableNotFoundError
from indextables_spark.frontends.sql_parser import CommandSyntaxError, parse_command
from indextables_spark.ops.cluster.environment import REDACTED

REFERENCE = Path(__file__).parent / "data" / "reference_v0.5.4"
COLUMNS = ["split_path", "partition_values", "component_key", "size_bytes", "component_type", "field_name"]


def _data(n: int = 600) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "body": [f"alpha w{i % 37} beta {i} gamma" for i in range(n)],
            "tag": [f"t{i % 5}" for i in range(n)],
            "score": [i * 0.5 for i in range(n)],
            "region": [f"r{i % 2}" for i in range(n)],
        }
    )


def _write(path: str, n: int = 600, options: dict[str, str] | None = None) -> str:
    opts = {"indexing.typemap.body": "text_and_string", **(options or {})}
    it.write_table(path, _data(n), partition_by=["region"], options=opts)
    return path


@pytest.fixture
def table(tmp_path) -> str:
    return _write(str(tmp_path / "t"))


def test_component_sizes_add_up_per_split_and_name_columns(table):
    t = it.IndexTable(table)
    rows = t.inspect.component_sizes().to_pylist()
    assert list(rows[0])[:6] == COLUMNS and "column_name" in rows[0]
    files = {f.path: f for f in t.files()}
    assert {r["split_path"] for r in rows} == set(files)
    for path, f in files.items():  # every byte of a split is in exactly one row
        assert sum(r["size_bytes"] for r in rows if r["split_path"] == path) == f.size
        assert all(
            r["partition_values"] == json.dumps(f.partition_values, separators=(",", ":"))
            for r in rows
            if r["split_path"] == path
        )
    one = [r for r in rows if r["split_path"] == sorted(files)[0]]
    keys = {r["component_key"]: r for r in one}
    for kind in ("term", "postings", "positions", "fieldnorm"):  # a tokenized text column
        assert keys[f"body.{kind}"]["size_bytes"] > 0 and keys[f"body.{kind}"]["column_name"] == "body"
    exact = keys["body__exact.term"]  # the raw field of text_and_string maps back to its column
    assert (exact["field_name"], exact["column_name"], exact["component_type"]) == ("body__exact", "body", "term")
    assert keys["score.fastfield"]["component_type"] == "fastfield" and keys["score.fastfield"]["size_bytes"] > 0
    assert keys["_store"]["size_bytes"] > 0 and keys["_store"]["field_name"] is None
    assert all(r["field_name"] is None for r in one if r["component_key"].startswith("_"))
    assert {r["component_type"] for r in one} >= {"term", "postings", "positions", "fieldnorm", "fastfield", "store"}
    assert "region" not in {r["column_name"] for r in rows}  # partition columns are not in the splits


def test_component_sizes_where_and_errors(table, tmp_path):
    t = it.IndexTable(table)
    r1 = t.inspect.component_sizes("region = 'r1'").to_pylist()
    assert r1 and all(r["partition_values"] == '{"region":"r1"}' for r in r1)
    assert t.inspect.component_sizes("region = 'r9'").num_rows == 0
    with pytest.raises(IndexTablesError, match="body"):
        t.inspect.component_sizes("body = 'x'")  # not a partition column
    with pytest.raises(TableNotFoundError, match="nothing"):
        it.IndexTable(str(tmp_path / "nothing")).inspect.component_sizes()
    unpartitioned = str(tmp_path / "u")
    it.write_table(unpartitioned, _data().drop_columns(["region"]))
    assert {r["partition_values"] for r in it.IndexTable(unpartitioned).inspect.component_sizes().to_pylist()} == {None}


def test_component_sizes_of_a_reference_split():
    t = it.IndexTable(str(REFERENCE / "04_partitioned"))
    rows = t.inspect.component_sizes().to_pylist()
    for f in t.files():
        assert sum(r["size_bytes"] for r in rows if r["split_path"] == f.path) == f.size
    keys = {r["component_key"] for r in rows}
    assert {"text.term", "id.fastfield", "_store", "_hotcache"} <= keys


def test_texts():
    cmd = parse_command("describe indextables component sizes '/t' where region = 'eu';")
    assert type(cmd).__name__ == "DescribeComponentSizes" and (cmd.path, cmd.where) == ("/t", "region = 'eu'")
    assert str(parse_command("DESC TANTIVY4SPARK COMPONENT SIZES db.t").path) == "db.t"
    assert type(parse_command("DESCRIBE TANTIVY4SPARK STORAGE STATS")).__name__ == "DescribeStorageStats"
    assert type(parse_command("describe indextable environment")).__name__ == "DescribeEnvironment"
    for bad, msg in [
        ("DESCRIBE INDEXTABLES COMPONENT '/t'", "SIZES"),
        ("DESCRIBE INDEXTABLES STORAGE", "STATS"),
        ("DESCRIBE INDEXTABLES ENVIRONMENT '/t'", "end"),
    ]:
        with pytest.raises(CommandSyntaxError, match=msg):
            parse_command(bad)


def test_environment_and_storage_stats_in_process():
    rows = it.describe_environment(options={"aws.secretKey": "s3cr3t-value", "indexing.typemap.body": "text"})
    by = {(r.property_type, r.property_name): r.property_value for r in rows}
    assert by[("indextables", "spark.indextables.aws.secretKey")] == REDACTED
    assert by[("indextables", "spark.indextables.indexing.typemap.body")] == "text"
    assert by[("package", "indextables_spark")] == it.__version__ and by[("package", "pyarrow")] == pa.__version__
    assert by[("python", "python.executable")] == sys.executable
    assert {r.role for r in rows} == {"driver"} and "s3cr3t-value" not in json.dumps([r.to_dict() for r in rows])
    (stats,) = it.describe_storage_stats()
    assert stats.executor_id == "driver" and stats.bytes_fetched >= 0 and stats.processes == 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "indextables")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def test_command_line(table):
    out = _cli("describe-component-sizes", table, "--where", "region = 'r0'", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and {r["partition_values"] for r in rows} == {'{"region":"r0"}'} and "column_name" in rows[0]
    out = _cli("sql", f"DESCRIBE INDEXTABLES COMPONENT SIZES '{table}'")
    assert out.returncode == 0 and "body.term" in out.stdout
    out = _cli("describe-environment", "-o", "aws.secretKey=s3cr3t-value", "--json")
    assert out.returncode == 0, out.stderr
    env = {(r["propertyType"], r["propertyName"]): r["propertyValue"] for r in json.loads(out.stdout)}
    assert "s3cr3t-value" not in out.stdout and env[("indextables", "spark.indextables.aws.secretKey")] == REDACTED
    assert env[("package", "indextables_spark")] == it.__version__
    out = _cli("sql", "DESCRIBE INDEXTABLES STORAGE STATS", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["executorId"] == "driver"


@pytest.mark.cloud
def test_s3_component_sizes_read_ranges_not_splits(s3_uri, s3_options):
    """Splits larger than the first read: only their footers and small tails are fetched, and
    STORAGE STATS counts exactly what was fetched."""
    _write(s3_uri, 20_000, {**s3_options, "write.chunkRows": "10000"})
    t = it.IndexTable(s3_uri, s3_options)
    files = t.files()
    assert all(f.size > 256 << 10 for f in files)
    t.inspect.component_sizes()  # the log is read once before counting
    before = fetch_stats()
    rows = t.inspect.component_sizes().to_pylist()
    after = fetch_stats()
    fetched = after.bytes_fetched - before.bytes_fetched
    assert 0 < fetched < sum(f.size for f in files) // 8, (fetched, [f.size for f in files])
    assert after.requests - before.requests <= 4 * len(files)  # the footer, two or three small tails
    for f in files:
        assert sum(r["size_bytes"] for r in rows if r["split_path"] == f.path) == f.size
    (driver,) = it.describe_storage_stats()
    assert driver.bytes_fetched >= after.bytes_fetched and driver.requests >= after.requests


@pytest.mark.spark
def test_spark_sql_and_table_functions(spark, table):
    it.register(spark)
    df = spark.sql(f"DESCRIBE INDEXTABLES COMPONENT SIZES '{table}' WHERE region = 'r1'")
    assert df.columns[:6] == COLUMNS and dict(df.dtypes)["size_bytes"] == "bigint"
    df.createOrReplaceTempView("components")
    totals = dict(spark.sql("SELECT component_type, SUM(size_bytes) FROM components GROUP BY component_type").collect())
    r1 = [f for f in it.IndexTable(table).files() if f.partition_values["region"] == "r1"]
    assert sum(totals.values()) == sum(f.size for f in r1) and totals["term"] > 0
    fn = spark.sql(f"SELECT * FROM indextables_describe_component_sizes('{table}', \"region = 'r1'\")").collect()
    assert sorted(r.component_key for r in fn) == sorted(r.component_key for r in df.collect())
    stats = it.sql(spark, "DESCRIBE TANTIVY4SPARK STORAGE STATS").collect()
    assert stats[0].executor_id == "driver" and any(r.executor_id.startswith("executor-") for r in stats)
    assert all(r.bytes_fetched >= 0 and r.requests >= 0 for r in stats)
    (worker,) = spark.sql("SELECT * FROM indextables_describe_storage_stats()").collect()
    assert worker.executor_id == "executor-0"  # a table function runs in a Python worker
    spark.conf.set("spark.test.secretKey", "should_be_redacted")
    try:
        env = spark.sql("DESCRIBE INDEXTABLES ENVIRONMENT").collect()
    finally:
        spark.conf.unset("spark.test.secretKey")
    by = {(r.role, r.property_type, r.property_name): r.property_value for r in env}
    assert by[("driver", "spark", "spark.test.secretKey")] == REDACTED
    assert by[("worker", "package", "indextables_spark")] == it.__version__
    assert {r.role for r in spark.sql("SELECT * FROM indextables_describe_environment()").collect()} == {"worker"}


def test_over_spark_connect(connect_spark, tmp_path):
    path = _write(str(tmp_path / "t"))
    it.register(connect_spark)
    rows = connect_spark.sql(f"DESCRIBE INDEXTABLES COMPONENT SIZES '{path}'").collect()
    for f in it.IndexTable(path).files():
        assert sum(r.size_bytes for r in rows if r.split_path == f.path) == f.size
    stats = it.sql(connect_spark, "DESCRIBE INDEXTABLES STORAGE STATS").collect()
    assert stats[0].executor_id == "driver" and len(stats) >= 2
    env = connect_spark.sql("DESCRIBE INDEXTABLES ENVIRONMENT").collect()
    assert {r.role for r in env} == {"driver", "worker"}
