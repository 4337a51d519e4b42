"""Tables IndexTables4Spark wrote, read the ways users run it: copied to S3 (moto) and read without
Spark, from a Spark Connect client, and on a standalone cluster whose executors open the
reference splits in their own split caches (transcoding the dictionaries their reads need)."""

from __future__ import annotations

from pathlib import Path

import pytest

import indextables_spark as it
from indextables_spark.core.split.reference.native import REFERENCE_FILE
from indextables_spark.core.storage import open_storage

ROOT = Path(__file__).parent / "data" / "reference_v0.5.4"
TABLE = "04_partitioned"
QUERY = "text:doc3 OR text:doc5"


def _rows(table: it.IndexTable) -> list[dict]:
    return sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])


def _upload(name: str, uri: str, options: dict) -> None:
    """Every file of the fixture table (the `.crc` side files too), as the reference left them."""
    storage = open_storage(uri, options)
    src = ROOT / name
    for p in sorted(src.rglob("*")):
        if p.is_file():
            storage.put(p.relative_to(src).as_posix(), p.read_bytes())


@pytest.fixture
def expected() -> list[dict]:
    return _rows(it.IndexTable(str(ROOT / TABLE)))


@pytest.mark.cloud
def test_reference_table_on_s3_without_spark(s3_uri, s3_options, tmp_path, expected) -> None:
    _upload(TABLE, s3_uri, s3_options)
    t = it.IndexTable(s3_uri, {**s3_options, "spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    assert t.snapshot().version == 1
    assert _rows(t) == expected
    assert sorted(t.search(QUERY).column("id").to_pylist()) == [3, 5]
    assert t.count(partition_filter="date = '2024-01-02'") == 2
    assert t.aggregate({"s": {"stats": {"field": "score"}}})["s"]["sum"] == sum(r["score"] for r in expected)


@pytest.mark.cloud
def test_convert_on_s3(s3_uri, s3_options, tmp_path, expected) -> None:
    """CONVERT of a table on S3 (each reference split downloaded, rewritten keeping its index,
    uploaded); a cold cache then reads the converted splits by ranges, and DELETE works."""
    _upload(TABLE, s3_uri, s3_options)
    t = it.IndexTable(s3_uri, {**s3_options, "spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    res = t.maintenance.convert()
    assert res["status"] == "SUCCESS" and res["recordsConverted"] == len(expected)
    cold = it.IndexTable(s3_uri, {**s3_options, "spark.indextables.cache.disk.path": str(tmp_path / "cold")})
    assert _rows(cold) == expected
    assert sorted(cold.search(QUERY).column("id").to_pylist()) == [3, 5]
    assert cold.count(partition_filter="date = '2024-01-02'") == 2
    cold.delete(where="id = 3")
    assert sorted(cold.search(QUERY).column("id").to_pylist()) == [5]
    assert _rows(it.IndexTable(s3_uri, s3_options)) == [r for r in expected if r["id"] != 3]
    assert sorted(r["id"] for r in cold.to_arrow(version=res["version"] - 1).to_pylist()) == [r["id"] for r in expected]


@pytest.mark.spark
def test_reference_table_over_spark_connect(connect_spark, expected) -> None:
    spark = connect_spark
    it.register(spark)
    path = str(ROOT / TABLE)
    df = spark.read.format("indextables").load(path)
    assert sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"]) == expected
    hits = spark.read.format("indextables").option("query", QUERY).load(path).collect()
    assert sorted(r["id"] for r in hits) == [3, 5]
    assert df.filter("id >= 3 AND date = '2024-01-02'").count() == 2


def cached(cluster) -> set[Path]:
    """Every file in the executors' split caches (one per worker)."""
    return {p for w in cluster.worker_list for p in Path(w.cache_dir).rglob("*") if p.is_file()}


@pytest.mark.spark
@pytest.mark.cloud
@pytest.mark.slow
def test_reference_table_on_the_cluster_from_s3(standalone_cluster, s3_uri, s3_options, tmp_path, expected) -> None:
    from cluster_launch import run_job

    _upload(TABLE, s3_uri, s3_options)
    # the cluster is the session's: other tests' jobs may have cached splits of theirs already
    before = cached(standalone_cluster)
    result = run_job("reference", standalone_cluster.master_url, s3_uri, s3_options, tmp_path, QUERY)
    assert sorted(result["rows"], key=lambda r: r["id"]) == expected
    assert sorted(result["hits"]) == [3, 5]
    assert result["over"] == 3
    # the executors opened the splits in place in their own caches (one per worker): no split of ours
    new = cached(standalone_cluster) - before
    opened = [p for p in new if p.name == REFERENCE_FILE]
    ours = [p for p in new if p.name == "footer.json"]
    assert opened and not ours
