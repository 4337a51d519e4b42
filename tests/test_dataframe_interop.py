"""The Polars/DuckDB lines of docs/guide/spark-free-api.md: they read IndexTable.search / to_batches
results directly (tests/test_docs_examples.py runs the page's lines; this checks their results)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import indextables_spark as it

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")


@pytest.fixture
def table(tmp_path):
    n = 3000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "body": [("data lake " if i % 3 == 0 else "search ") + ("spark" if i % 2 else "") for i in range(n)],
            "region": [("eu", "us", "ap")[i % 3 if i % 5 else 1] for i in range(n)],
            "views": pa.array([(i * 37) % 5000 for i in range(n)], pa.int64()),
            "day": pa.array([dt.date(2024, 1, 1 + i % 28) for i in range(n)], pa.date32()),
        }
    )
    path = str(tmp_path / "docs")
    it.write_table(path, data, partition_by=["region"], options={"indexing.typemap.body": "text"})
    return it.IndexTable(path), data


def test_polars_and_duckdb_read_search_results(table):
    t, data = table
    hits = t.search("body:lake", columns=["id", "region", "views"], limit=1000)
    got = pl.from_arrow(hits).group_by("region").agg(pl.len(), pl.col("views").max()).sort("region")
    expected = (
        pl.from_arrow(data)
        .filter(pl.col("body").str.contains("lake"))
        .group_by("region")
        .agg(pl.len(), pl.col("views").max())
        .sort("region")
    )
    assert hits.num_rows == 1000 and got.equals(expected)
    assert sorted(duckdb.sql("SELECT region, count(*), max(views) FROM hits GROUP BY region").fetchall()) == sorted(
        expected.rows()
    )
    rows = t.to_batches(where="views < 1000", columns=["id", "day"])
    assert isinstance(rows, pa.RecordBatchReader)
    by_day = dict(duckdb.sql("SELECT day, count(*) FROM rows GROUP BY day").fetchall())
    want = pl.from_arrow(data).filter(pl.col("views") < 1000).group_by("day").agg(pl.len())
    assert by_day == dict(want.rows()) and sum(by_day.values()) > 0
