"""Every Spark type a reference split can hold, read back from its document store: values as the
reference stores them come back as the table schema's types, and filters and queries on them are
exact. Splits built with tests/reference_bundles.py (the reference's field conventions, tantivy-py,
Quickwit framing); the 17 real tables are covered by test_reference_tables.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import SplitFormatError
from reference_bundles import add_reference_split

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("f", pa.float32()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("flag", pa.bool_()),
        ("b", pa.binary()),
        ("s", pa.struct([("a", pa.int32()), ("c", pa.string())])),
        ("arr", pa.list_(pa.int64())),
        ("m", pa.map_(pa.int32(), pa.string())),
        ("txt", pa.string()),
        ("tag", pa.string()),
    ]
)
FIELDS = [
    {"name": "id", "type": "i64"},
    {"name": "n", "type": "i64"},
    {"name": "f", "type": "f64"},
    {"name": "d", "type": "datetime"},
    {"name": "ts", "type": "datetime"},
    {"name": "flag", "type": "bool"},
    {"name": "b", "type": "bytes"},
    {"name": "s", "type": "object"},
    {"name": "arr", "type": "object"},
    {"name": "m", "type": "object"},
    {"name": "txt", "type": "text", "tokenizer": "default"},
    {"name": "tag", "type": "text", "tokenizer": "raw"},
]


def _row(i: int) -> dict:
    return {
        "id": i,
        "n": i * 10,
        "f": i / 4,  # exact in float32
        "d": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "ts": dt.datetime(2024, 3, 1, 12, 0, i, 250_000, tzinfo=UTC),
        "flag": i % 2 == 0,
        "b": bytes([i, 255 - i]),
        "s": {"a": i, "c": f"c{i}"},
        "arr": [i, i + 1],
        "m": [(i, f"v{i}")],
        "txt": f"Quick brown fox number{i}",
        "tag": f"Tag {i % 3}",
    }


def _stored(r: dict) -> dict:
    """A row as the reference stores it in Tantivy's document store (nulls omitted)."""
    if r["d"] is None:
        return {"id": r["id"]}
    return {
        **r,
        "d": dt.datetime.combine(r["d"], dt.time(), tzinfo=UTC),
        "arr": {"arr": r["arr"]},
        "m": {str(k): v for k, v in r["m"]},
    }


ROWS = [_row(i) for i in range(1, 9)] + [{"id": 9, **{k: None for k in SCHEMA.names if k != "id"}}]


@pytest.fixture
def table(tmp_path: Path) -> it.IndexTable:
    t = it.IndexTable.create(str(tmp_path / "t"), SCHEMA)
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    add_reference_split(t, FIELDS, [_stored(r) for r in ROWS], str(tmp_path), "part-00000000-aaaa.split")
    return t


def _norm(rows: list[dict]) -> list[dict]:
    return sorted(
        ({k: (sorted(v) if k == "m" and v is not None else v) for k, v in r.items()} for r in rows),
        key=lambda r: r["id"],
    )


def test_every_type_comes_back_as_the_table_schema_says(table: it.IndexTable) -> None:
    got = table.to_arrow()
    assert got.schema.equals(SCHEMA, check_metadata=False)
    assert _norm(got.to_pylist()) == _norm(ROWS)


def test_filters_and_queries_on_converted_columns(table: it.IndexTable) -> None:
    ids = lambda t: sorted(t.column("id").to_pylist())  # noqa: E731
    assert ids(table.to_arrow(where="d >= '2024-01-05'")) == [4, 5, 6, 7, 8]
    assert ids(table.to_arrow(where="ts < '2024-03-01T12:00:03Z'")) == [1, 2]
    assert ids(table.to_arrow(where="n = 30")) == [3]
    assert ids(table.to_arrow(where="flag = true")) == [2, 4, 6, 8]
    assert ids(table.to_arrow(where="tag = 'Tag 1'")) == [1, 4, 7]
    assert ids(table.search("txt:number5")) == [5]
    assert ids(table.search("txt:quick")) == list(range(1, 9))  # tokenized, lowercased
    assert ids(table.search('tag:"Tag 2"')) == [2, 5, 8]  # raw: the whole value
    assert ids(table.to_arrow(where="txt IS NULL")) == [9]


def test_a_value_that_does_not_fit_the_table_type_names_the_column(tmp_path: Path) -> None:
    t = it.IndexTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("x", pa.int64())]))
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "c")})
    add_reference_split(
        t,
        [{"name": "id", "type": "i64"}, {"name": "x", "type": "text"}],
        [{"id": 1, "x": "abc"}],
        str(tmp_path),
        "p.split",
    )
    with pytest.raises(SplitFormatError, match=r"p\.split.*column 'x'"):
        t.to_arrow()


@pytest.mark.spark
def test_spark_reads_and_filters_converted_types_exactly(spark, table: it.IndexTable) -> None:
    """The same filters through Spark (pushed into the index) against Spark over the same rows."""
    df = spark.read.format("indextables").load(table.path)
    mem = spark.createDataFrame(pa.Table.from_pylist(ROWS, schema=SCHEMA))
    for cond in (
        "d >= DATE'2024-01-05'",
        "ts < TIMESTAMP'2024-03-01 12:00:03Z'",
        "n IN (20, 70)",
        "f > 1.0",
        "s.a = 3",
        "tag = 'Tag 1' OR flag",
        "txt IS NULL",
        "array_contains(arr, 5)",
    ):
        got = sorted(r["id"] for r in df.filter(cond).select("id").collect())
        want = sorted(r["id"] for r in mem.filter(cond).select("id").collect())
        assert got == want, cond
    assert df.count() == len(ROWS)
    # SQL aggregates planned for the index: dates and timestamps from the rows, numbers from its fast fields
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW ref_types USING indextables OPTIONS (path '{table.path}')")
    mem.createOrReplaceTempView("ref_types_mem")
    aggs = "min(d) AS a, max(ts) AS b, sum(n) AS c, count(f) AS e, max(tag) AS g"
    assert (
        spark.sql(f"SELECT {aggs} FROM ref_types").collect() == spark.sql(f"SELECT {aggs} FROM ref_types_mem").collect()
    )


def test_a_reference_split_without_documents_reads_as_empty(tmp_path: Path) -> None:
    t = it.IndexTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("x", pa.string())]))
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "c")})
    fields = [{"name": "id", "type": "i64"}, {"name": "x", "type": "text", "tokenizer": "raw"}]
    add_reference_split(t, fields, [], str(tmp_path), "empty.split")
    add_reference_split(t, fields, [{"id": 1, "x": "a"}], str(tmp_path), "one.split")
    assert t.to_arrow().to_pylist() == [{"id": 1, "x": "a"}]
    assert t.count("x:a") == 1 and t.search("x:b").num_rows == 0


def test_index_only_fields_of_a_reference_split_read_null_and_answer_filters(tmp_path: Path) -> None:
    """The reference's indexing.indexonlyfields: the field is not in the document store (it reads
    NULL, as in the reference), but its index is the reference's own, opened in place: filters and
    queries on it are answered by the index (before #37 they were refused: the re-indexing lost the
    field). A filter the index answers only approximately still fails naming the column."""
    from indextables_spark.expr.values import UnsupportedFilterError

    t = it.IndexTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("secret", pa.string())]))
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "c")})
    fields = [{"name": "id", "type": "i64"}, {"name": "secret", "type": "text", "tokenizer": "raw", "stored": False}]
    add_reference_split(t, fields, [{"id": 1, "secret": "a"}, {"id": 2, "secret": "b"}], str(tmp_path), "io.split")
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "secret": None},
        {"id": 2, "secret": None},
    ]
    assert t.to_arrow(where="id = 2").column("id").to_pylist() == [2]
    assert t.to_arrow(where="secret = 'a'").to_pylist() == [{"id": 1, "secret": None}]
    assert sorted(t.to_arrow(where="secret IN ('a', 'b', 'c')").column("id").to_pylist()) == [1, 2]
    assert t.count("secret:b") == 1
    assert t.search("secret:b").column("id").to_pylist() == [2]
    # the reference's raw fields leave values of 255 bytes or more out of the index: IS NULL cannot
    # be told from it, and the rows do not hold the column
    with pytest.raises(UnsupportedFilterError, match=r"index-only column 'secret'.*only = and IN of shorter strings"):
        t.to_arrow(where="secret IS NULL")


def _mixed(tmp_path: Path) -> it.IndexTable:
    """Our split (ids 1-4) and a reference split (ids 5-8) in one table, as after MERGE SPLITS."""
    path = str(tmp_path / "mixed")
    ours = [{"id": i, "tag": f"Tag {i % 3}", "txt": f"quick fox number{i}"} for i in range(1, 5)]
    schema = pa.schema([("id", pa.int64()), ("tag", pa.string()), ("txt", pa.string())])
    it.write_table(path, pa.Table.from_pylist(ours, schema=schema), options={"indexing.typemap.txt": "text"})
    t = it.IndexTable(path, options={"spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    fields = [
        {"name": "id", "type": "i64"},
        {"name": "tag", "type": "text", "tokenizer": "raw"},
        {"name": "txt", "type": "text", "tokenizer": "default"},
    ]
    theirs = [{"id": i, "tag": f"Tag {i % 3}", "txt": f"quick fox number{i}"} for i in range(5, 9)]
    add_reference_split(t, fields, theirs, str(tmp_path), "part-mixed.split")
    return t


def test_a_table_holding_both_kinds_of_split(tmp_path: Path) -> None:
    t = _mixed(tmp_path)
    ids = lambda tb: sorted(tb.column("id").to_pylist())  # noqa: E731
    assert ids(t.to_arrow()) == list(range(1, 9))
    assert ids(t.search("txt:fox")) == list(range(1, 9))
    assert ids(t.search('tag:"Tag 1"', where="id > 2")) == [4, 7]
    assert t.count("txt:number6") == 1
    assert t.aggregate({"s": {"stats": {"field": "id"}}})["s"]["sum"] == 36
    top = t.search("txt:number2 OR txt:number7", limit=2)
    assert sorted(top.column("id").to_pylist()) == [2, 7]


@pytest.mark.spark
def test_spark_reads_a_table_holding_both_kinds_of_split(spark, tmp_path: Path) -> None:
    t = _mixed(tmp_path)
    df = spark.read.format("indextables").load(t.path)
    assert sorted(r["id"] for r in df.collect()) == list(range(1, 9))
    assert sorted(r["id"] for r in df.filter("tag = 'Tag 2' AND id < 8").collect()) == [2, 5]
    q = spark.read.format("indextables").option("query", "txt:number3 OR txt:number8").load(t.path)
    assert sorted(r["id"] for r in q.collect()) == [3, 8]


def test_aggregations_use_the_reference_fast_fields(table: it.IndexTable) -> None:
    """Terms, stats and histograms run on the reference's own fast fields (strings `raw`, numbers);
    cardinality and percentiles on its rows; a date column's Tantivy aggregation is refused naming
    the column and the split (its date fast fields are not read here); queries on json fields run
    on the reference's json index."""
    from indextables_spark.core.split.aggregate.agg_request import AggregationError

    buckets = table.aggregate({"k": {"terms": {"field": "tag"}}})["k"]["buckets"]
    assert {b["key"]: b["doc_count"] for b in buckets} == {"Tag 0": 2, "Tag 1": 3, "Tag 2": 3}
    got = table.aggregate({"s": {"stats": {"field": "f"}}, "h": {"histogram": {"field": "n", "interval": 20}}})
    assert (got["s"]["count"], got["s"]["sum"], got["s"]["min"], got["s"]["max"]) == (8, 9.0, 0.25, 2.0)
    assert {b["key"]: b["doc_count"] for b in got["h"]["buckets"]} == {0: 1, 20: 2, 40: 2, 60: 2, 80: 1}
    assert table.aggregate({"c": {"cardinality": {"field": "d"}}})["c"]["value"] == 8
    with pytest.raises(AggregationError, match=r"column 'ts' has no fast field in split"):
        table.aggregate({"s": {"stats": {"field": "ts"}}})
    assert table.search("s.c:c3").column("id").to_pylist() == [3]
    assert sorted(table.search("flag:true").column("id").to_pylist()) == [2, 4, 6, 8]
