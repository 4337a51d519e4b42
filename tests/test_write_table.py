"""Spark-free write (issue 14, criterion 2): `it.write_table` and `IndexTable.create` produce tables
the Spark reader reads back, with the same log actions as the Spark writer."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import indextables_spark as it
from cmd_helpers import REGIONS, TEXT_OPTIONS, rows

DDL = "id long, body string, views long, region string, day string"


def spark_rows(spark, path: str, query: str | None = None) -> list[tuple]:
    r = spark.read.format("indextables")
    if query is not None:
        r = r.option("query", query)
    df = r.load(path).select("id", "body", "views", "region", "day")
    return sorted(tuple(x) for x in df.collect())


def tuples(data: pa.Table) -> list[tuple]:
    return sorted((r["id"], r["body"], r["views"], r["region"], r["day"]) for r in data.to_pylist())


def spark_write(spark, path: str, data: pa.Table, mode: str = "append", partition_by=("day",), tasks: int = 1):
    df = spark.createDataFrame(tuples(data), DDL).coalesce(tasks)
    w = df.write.format("indextables").mode(mode).options(**TEXT_OPTIONS)
    if partition_by:
        w = w.option("partitionBy", ",".join(partition_by))
    w.save(path)


def test_write_table_reads_back_through_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    data = rows(300)
    v = it.write_table(path, data, partition_by=["day"], options=TEXT_OPTIONS)
    assert v.version == 0 and v.rows_written == 300 and v.operation == "CREATE TABLE"
    assert spark_rows(spark, path) == tuples(data)
    # the body column is tokenized text: a term query matches the rows holding the word
    expected = [t for t in tuples(data) if "alpha" in t[1].split()]
    assert expected and spark_rows(spark, path, "body:alpha") == expected
    snap = it.IndexTable(path).snapshot()
    assert snap.partition_columns == ["day"]
    assert sorted({f.partition_values["day"] for f in snap.files}) == sorted(set(data.column("day").to_pylist()))


def test_parallel_chunks_one_commit(spark, tmp_path):
    path = str(tmp_path / "t")
    data = rows(900)
    v = it.write_table(
        path, data, partition_by=["day"], options={**TEXT_OPTIONS, "write.parallelism": "2", "write.chunkRows": "300"}
    )
    assert v.version == 0 and it.IndexTable(path).version() == 0 and v.rows_written == 900 and v.splits_added == 9
    files = it.IndexTable(path).snapshot().files
    assert len(files) == 3 * 3  # one split per partition value per chunk
    assert sum(f.num_records for f in files) == 900
    assert spark_rows(spark, path) == tuples(data)


def test_spark_then_write_table_append(spark, tmp_path):
    path = str(tmp_path / "t")
    first, second = rows(120), rows(80, start=120)
    spark_write(spark, path, first)
    it.write_table(path, second, mode="append")
    assert spark_rows(spark, path) == sorted(tuples(first) + tuples(second))
    assert it.IndexTable(path).version() == 1


def _split_fields(path: str) -> list[tuple]:
    snap = it.IndexTable(path).snapshot()
    return sorted(
        (
            json.dumps(f.partition_values, sort_keys=True),
            f.num_records,
            json.dumps(f.min_values, sort_keys=True),
            json.dumps(f.max_values, sort_keys=True),
            f.doc_mapping_ref,
        )
        for f in snap.files
    )


def test_log_actions_match_the_spark_writer(spark, tmp_path):
    data = rows(200)
    a, b = str(tmp_path / "spark"), str(tmp_path / "arrow")
    spark_write(spark, a, data)
    it.write_table(b, data, partition_by=["day"], options=TEXT_OPTIONS)
    assert _split_fields(a) == _split_fields(b)
    sa, sb = it.IndexTable(a).snapshot(), it.IndexTable(b).snapshot()
    assert sa.schema_json == sb.schema_json
    assert sa.metadata_action.configuration == sb.metadata_action.configuration
    assert sa.metadata_action.partition_columns == sb.metadata_action.partition_columns
    assert sa.protocol_action == sb.protocol_action


def test_schema_mismatch_refused_like_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    it.write_table(path, rows(10), partition_by=["day"], options=TEXT_OPTIONS)
    bad = rows(5).drop_columns(["views"]).append_column("views", pa.array(["x"] * 5))
    with pytest.raises(it.SchemaMismatchError) as arrow_err:
        it.write_table(path, bad)
    df = spark.createDataFrame(
        [(r["id"], r["body"], r["region"], r["day"], r["views"]) for r in bad.to_pylist()],
        "id long, body string, region string, day string, views string",
    )
    with pytest.raises(Exception) as spark_err:
        df.write.format("indextables").mode("append").save(path)
    assert str(arrow_err.value) in str(spark_err.value)
    assert it.IndexTable(path).version() == 0


def test_mode_error_and_overwrite(spark, tmp_path):
    path = str(tmp_path / "t")
    it.write_table(path, rows(30), mode="error", partition_by=["day"], options=TEXT_OPTIONS)
    with pytest.raises(it.TableExistsError):
        it.write_table(path, rows(5), mode="error")
    assert it.IndexTable(path).version() == 0
    new = rows(12, start=500)
    it.write_table(path, new, mode="overwrite")
    assert spark_rows(spark, path) == tuples(new)
    # overwriteSchema redefines the columns, as with the Spark writer
    other = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["a", "b", "c"])})
    with pytest.raises(it.SchemaMismatchError):
        it.write_table(path, other, mode="overwrite")
    it.write_table(path, other, mode="overwrite", partition_by=[], options={"overwriteSchema": "true"})
    back = spark.read.format("indextables").load(path).select("k", "s").collect()
    assert sorted(tuple(r) for r in back) == [(1, "a"), (2, "b"), (3, "c")]


def test_merge_schema_append(spark, tmp_path):
    path = str(tmp_path / "t")
    it.write_table(path, rows(10), partition_by=["day"], options=TEXT_OPTIONS)
    more = rows(4, start=10).append_column("extra", pa.array([1, 2, 3, 4], pa.int64()))
    it.write_table(path, more, options={"mergeSchema": "true"})
    got = spark.read.format("indextables").load(path).select("id", "extra").collect()
    assert sorted((r["id"], r["extra"]) for r in got) == [(i, None) for i in range(10)] + [
        (10 + i, i + 1) for i in range(4)
    ]


def test_create_then_append_both_ways(spark, tmp_path):
    path = str(tmp_path / "t")
    data = rows(40)
    t = it.IndexTable.create(path, data.schema, partition_by=["day"], options=TEXT_OPTIONS)
    assert isinstance(t, it.IndexTable) and t.version() == 0
    snap = t.snapshot()
    assert snap.files == [] and snap.partition_columns == ["day"]
    with pytest.raises(it.TableExistsError):
        it.IndexTable.create(path, data.schema)
    # compare with what Spark commits for an empty DataFrame
    empty = str(tmp_path / "empty")
    spark.createDataFrame([], DDL).write.format("indextables").mode("append").options(**TEXT_OPTIONS).option(
        "partitionBy", "day"
    ).save(empty)
    se = it.IndexTable(empty).snapshot()
    assert se.version == 0 and se.files == []
    assert se.schema_json == snap.schema_json and se.metadata_action.configuration == snap.metadata_action.configuration
    it.write_table(path, data.slice(0, 20))
    spark_write(spark, path, data.slice(20))
    assert spark_rows(spark, path) == tuples(data)
    assert spark_rows(spark, path, "body:bravo") == [r for r in tuples(data) if "bravo" in r[1].split()]


def test_pandas_input(spark, tmp_path):
    pytest.importorskip("pandas")
    path = str(tmp_path / "t")
    data = rows(50)
    it.write_table(path, data.to_pandas(), partition_by=["region"], options=TEXT_OPTIONS)
    assert spark_rows(spark, path) == tuples(data)
    assert sorted({f.partition_values["region"] for f in it.IndexTable(path).snapshot().files}) == sorted(REGIONS)


def test_record_batch_reader_input(spark, tmp_path):
    path = str(tmp_path / "t")
    data = rows(250)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=40))
    it.write_table(path, reader, partition_by=["day"], options={**TEXT_OPTIONS, "write.chunkRows": "100"})
    assert spark_rows(spark, path) == tuples(data)
    assert len(it.IndexTable(path).snapshot().files) == 3 * 3  # 3 chunks of ≤100 rows × 3 days


def test_failed_write_commits_nothing_and_leaves_no_splits(tmp_path):
    path = tmp_path / "t"
    data = rows(300)

    def batches():
        yield from data.to_batches(max_chunksize=100)
        raise RuntimeError("source failed")

    reader = pa.RecordBatchReader.from_batches(data.schema, batches())
    with pytest.raises(Exception, match="source failed"):
        it.write_table(
            str(path),
            reader,
            partition_by=["day"],
            options={**TEXT_OPTIONS, "write.chunkRows": "100", "write.parallelism": "2"},
        )
    assert it.IndexTable(str(path)).version() == -1
    assert path.exists()  # splits were uploaded before the failure...
    leftovers = [p for p in path.rglob("*") if p.is_file()]  # ...and deleted
    assert leftovers == []


def test_bad_mode_and_data_type(tmp_path):
    with pytest.raises(it.IndexTablesError, match="mode"):
        it.write_table(str(tmp_path / "t"), rows(3), mode="ignore")
    with pytest.raises(TypeError, match="pyarrow.Table"):
        it.write_table(str(tmp_path / "t"), [{"id": 1}])


def test_store_only_columns(tmp_path):
    """indexing.storeonly: rows kept, no index: filters exact, field queries and aggregations refused
    naming the option; the setting is kept for appends (same doc mapping)."""
    import indextables_spark as it
    from indextables_spark.errors import InvalidOptionError, QueryParseError
    from indextables_spark.core.split.aggregate.agg_request import AggregationError

    n = 2000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "body": [f"w{i % 7} common" for i in range(n)],
            "title": [None if i % 11 == 0 else f"T{i % 13}" for i in range(n)],
            "views": pa.array([None if i % 17 == 0 else i % 100 for i in range(n)], pa.int64()),
            "tags": [[f"x{i % 3}"] for i in range(n)],
            "region": [("eu", "us")[i % 2] for i in range(n)],
        }
    )
    path = str(tmp_path / "t")
    opts = {"indexing.typemap.body": "text", "indexing.storeonly": "title,views,tags"}
    it.write_table(path, data, partition_by=["region"], options=opts)
    t = it.IndexTable(path)
    got = t.search("body:w3", where="views >= 50 AND title = 'T4'", columns=["id"]).column("id").to_pylist()
    assert sorted(got) == [i for i in range(n) if i % 7 == 3 and i % 17 and i % 100 >= 50 and i % 11 and i % 13 == 4]
    assert t.to_arrow(where="views IS NULL", columns=["id"]).num_rows == len(range(0, n, 17))
    with pytest.raises(QueryParseError, match="not indexed: tags, title, views"):
        t.search("title:T4")
    with pytest.raises(AggregationError, match="stored only"):
        it.IndexTable(path).aggregate({"a": {"terms": {"field": "title"}}})
    it.write_table(path, data)  # the table's setting applies to appends
    assert t.count() == 2 * n and len({f.doc_mapping_ref for f in t.files()}) == 1
    for bad, msg in [
        ({"indexing.storeonly": "nope"}, "nope"),
        ({"indexing.storeonly": "region"}, "partition"),
        ({"indexing.storeonly": "views", "indexing.fastfields": "views"}, "fastfields"),
        ({"indexing.storeonly": "body", "indexing.typemap.body": "text"}, "typemap"),
    ]:
        with pytest.raises(InvalidOptionError, match=msg):
            it.write_table(str(tmp_path / "bad"), data, partition_by=["region"], options=bad)
