"""PREWARM INDEXTABLES CACHE, DESCRIBE / FLUSH INDEXTABLES DISK CACHE: in-process, as a Spark job,
through it.sql / spark.sql, the command line and Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.frontends.sql_parser import CommandSyntaxError, parse_command


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "t")
    it.write_table(
        path,
        pa.table(
            {
                "id": pa.array(range(600), pa.int64()),
                "body": [f"w{i % 7}" for i in range(600)],
                "region": [f"r{i % 3}" for i in range(600)],
            }
        ),
        partition_by=["region"],
        options={"indexing.typemap.body": "text", "write.chunkRows": "200"},
    )
    return path


def test_in_process(table, tmp_path):
    opts = {"cache.disk.path": str(tmp_path / "cache")}
    t = it.IndexTable(table, opts)
    (row,) = t.maintenance.prewarm_cache(where="region = 'r1'")
    r1 = [f for f in t.files() if f.partition_values["region"] == "r1"]
    assert (row["splits"], row["fetched"], row["alreadyCached"]) == (len(r1), len(r1), 0)
    (again,) = t.maintenance.prewarm_cache()
    assert again["splits"] == len(t.files()) and again["alreadyCached"] == len(r1)
    (d,) = it.describe_disk_cache(options=opts)
    assert d["entries"] == len(t.files()) and d["bytes"] > 0 and d["limit"] == 10 << 30
    assert d["misses"] >= len(t.files()) and d["cachePath"] == str(tmp_path / "cache")
    t.search("body:w1")  # hits
    assert it.describe_disk_cache(options=opts)[0]["hits"] >= len(t.files())
    (f,) = it.flush_disk_cache(options=opts)
    assert f["entriesRemoved"] == len(t.files()) and f["bytesRemoved"] == d["bytes"]
    assert it.describe_disk_cache(options=opts)[0]["entries"] == 0
    assert sorted(t.search("body:w1", columns=["id"]).column("id").to_pylist()) == list(range(1, 600, 7))


def test_texts_and_errors():
    assert parse_command("prewarm indextables cache '/t' where region = 'eu';").where == "region = 'eu'"
    assert type(parse_command("DESCRIBE INDEXTABLES DISK CACHE")).__name__ == "DescribeDiskCache"
    assert type(parse_command("FLUSH INDEXTABLE DISK CACHE")).__name__ == "FlushDiskCache"
    for bad, msg in [
        ("PREWARM INDEXTABLES CACHE /t", "quoted"),
        ("FLUSH INDEXTABLES CACHE", "DISK"),
        ("DESCRIBE INDEXTABLES DISK", "CACHE"),
    ]:
        with pytest.raises(CommandSyntaxError, match=msg):
            parse_command(bad)


@pytest.mark.spark
def test_as_a_spark_job(spark, table, tmp_path):
    opts = {"cache.disk.path": str(tmp_path / "sc")}
    rows = it.IndexTable(table, opts).maintenance.prewarm_cache(spark=spark)
    assert len(rows) == 1 and rows[0]["splits"] == len(it.IndexTable(table).files()) and rows[0]["tasks"] >= 2
    spark.conf.set("spark.indextables.cache.disk.path", str(tmp_path / "sc"))
    try:
        got = spark.sql("DESCRIBE INDEXTABLES DISK CACHE").collect()
        assert len(got) == 1 and got[0].entries == rows[0]["splits"] and got[0].processes >= 1
        flushed = it.sql(spark, "FLUSH INDEXTABLES DISK CACHE").collect()
        assert flushed[0].entries_removed == rows[0]["splits"]
        pre = it.sql(spark, f"PREWARM INDEXTABLES CACHE '{table}' WHERE region = 'r2'").collect()
        assert pre[0].fetched == len([f for f in it.IndexTable(table).files() if f.partition_values["region"] == "r2"])
    finally:
        spark.conf.unset("spark.indextables.cache.disk.path")


def test_command_line(table, tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "indextables")
    cache = f"cache.disk.path={tmp_path / 'cli'}"
    out = subprocess.run(
        [exe, "sql", f"PREWARM INDEXTABLES CACHE '{table}'", "-o", cache, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["fetched"] == len(it.IndexTable(table).files())
    out = subprocess.run(
        [exe, "sql", "DESCRIBE INDEXTABLES DISK CACHE", "-o", cache], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "DESCRIBE DISK CACHE" in out.stdout and "entries" in out.stdout
