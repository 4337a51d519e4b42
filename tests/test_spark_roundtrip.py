"""End to end through a real local SparkSession: writes, reads, types, partitions, modes."""

from __future__ import annotations

import datetime as dt
import decimal
import os

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import indextables_spark as it

pytestmark = pytest.mark.spark

ALL_TYPES = StructType(
    [
        StructField("id", LongType()),
        StructField("b", ByteType()),
        StructField("s", ShortType()),
        StructField("i", IntegerType()),
        StructField("f", FloatType()),
        StructField("d", DoubleType()),
        StructField("dec", DecimalType(38, 18)),
        StructField("dec2", DecimalType(10, 2)),
        StructField("flag", BooleanType()),
        StructField("str", StringType()),
        StructField("bin", BinaryType()),
        StructField("day", DateType()),
        StructField("ts", TimestampType()),
        StructField("tags", ArrayType(StringType())),
        StructField("attrs", MapType(StringType(), LongType())),
        StructField("nested", StructType([StructField("x", LongType()), StructField("y", StringType())])),
    ]
)

UTC = dt.timezone.utc


def all_types_rows():
    return [
        (
            1,
            1,
            300,
            70000,
            1.5,
            2.25,
            decimal.Decimal("12345678901234567890.123456789012345678"),
            decimal.Decimal("12.34"),
            True,
            "hello world",
            b"\x00\x01\xff",
            dt.date(2024, 1, 31),
            dt.datetime(2024, 1, 31, 12, 30, 45, 123456, tzinfo=UTC),
            ["a", "b"],
            {"k": 1},
            (1, "one"),
        ),
        (
            2,
            -128,
            -32768,
            -2147483648,
            float("nan"),
            float("-inf"),
            decimal.Decimal("-0.000000000000000001"),
            decimal.Decimal("-99999999.99"),
            False,
            "héllo wörld 🚀 emoji ✨",
            b"",
            dt.date(1969, 12, 31),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            [],
            {},
            (None, None),
        ),
        (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
        (
            4,
            127,
            32767,
            2147483647,
            float("inf"),
            1e308,
            decimal.Decimal("0"),
            decimal.Decimal("0.01"),
            True,
            "",
            b"bytes",
            dt.date(9999, 12, 31),
            dt.datetime(2262, 4, 11, 0, 0, 0, 1, tzinfo=UTC),
            ["x", None],
            {"a": None},
            (9223372036854775807, "max"),
        ),
    ]


def _norm(rows):
    """Rows as comparable tuples (NaN made comparable)."""

    def fix(v):
        if isinstance(v, float) and v != v:
            return "NaN"
        if isinstance(v, Row):
            return tuple(fix(x) for x in v)
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, bytearray):
            return bytes(v)
        return v

    return sorted((tuple(fix(v) for v in r) for r in rows), key=repr)


def test_every_type_round_trips(spark, tmp_path):
    path = str(tmp_path / "types")
    df = spark.createDataFrame(all_types_rows(), ALL_TYPES)
    df.write.format("indextables").mode("append").save(path)
    back = spark.read.format("indextables").load(path)
    assert [f.name for f in back.schema.fields] == [f.name for f in ALL_TYPES.fields]
    assert [f.dataType for f in back.schema.fields] == [f.dataType for f in ALL_TYPES.fields]
    assert _norm(back.collect()) == _norm(df.collect())
    t = it.IndexTable(path)
    assert t.version() == 0
    assert t.count() == 4
    files = t.files()
    assert files and all(f.footer_start_offset is not None and f.footer_end_offset == f.size for f in files)
    assert all(f.path.startswith("splits/split-") and f.path.endswith(".split") for f in files)
    assert all(f.doc_mapping_ref for f in files)
    meta = t.snapshot().metadata
    assert any(k == "docMappingSchema." + files[0].doc_mapping_ref for k in meta["configuration"])


def test_partitioned_writes_appends_and_overwrite(spark, tmp_path):
    path = str(tmp_path / "parts")
    rows = [
        (
            i,
            f"doc {i} about spark" if i % 2 else f"doc {i} about search",
            ["a", "b", "c"][i % 3],
            dt.date(2024, 1, 1 + i % 3),
        )
        for i in range(60)
    ]
    schema = "id long, body string, region string, day date"
    df = spark.createDataFrame(rows, schema)
    df.write.format("indextables").mode("append").option("partitionBy", "region,day").save(path)
    t = it.IndexTable(path)
    snap = t.snapshot()
    assert snap.partition_columns == ["region", "day"]
    assert all(
        f.path.startswith(f"region={f.partition_values['region']}/day={f.partition_values['day']}/splits/")
        for f in snap.files
    )
    # append without a partition option goes to the same partitioning
    df.write.format("indextables").mode("append").save(path)
    back = spark.read.format("indextables").load(path)
    assert back.count() == 120
    assert back.schema.fieldNames() == ["id", "body", "region", "day"]
    pruned = back.filter((sf.col("region") == "b") & (sf.col("day") == dt.date(2024, 1, 2)))
    assert sorted(r.id for r in pruned.collect()) == sorted([i for i in range(60) if i % 3 == 1] * 2)
    assert back.filter(sf.col("region").isin("a", "c")).count() == 80
    # overwrite replaces everything
    df.limit(5).write.format("indextables").mode("overwrite").save(path)
    assert spark.read.format("indextables").load(path).count() == 5
    assert it.IndexTable(path).version() == 2
    # time travel still sees the old versions
    assert spark.read.format("indextables").option("versionAsOf", 1).load(path).count() == 120
    assert spark.read.format("indextables").option("versionAsOf", 0).load(path).count() == 60


def test_native_partition_by_is_bridged(spark, tmp_path):
    path = str(tmp_path / "native")
    df = spark.createDataFrame([(1, "x", "p1"), (2, "y", "p2"), (3, None, None)], "id long, v string, p string")
    df.write.partitionBy("p").format("indextables").mode("overwrite").save(path)
    snap = it.IndexTable(path).snapshot()
    assert snap.partition_columns == ["p"]
    assert {f.path.split("/")[0] for f in snap.files} == {"p=p1", "p=p2", "p=__HIVE_DEFAULT_PARTITION__"}
    back = spark.read.format("indextables").load(path)
    assert sorted(back.collect(), key=lambda r: r.id) == [
        Row(id=1, v="x", p="p1"),
        Row(id=2, v="y", p="p2"),
        Row(id=3, v=None, p=None),
    ]
    assert back.filter("p is null").count() == 1
    # parquet through the same wrapper is untouched
    pq = str(tmp_path / "pq")
    df.write.partitionBy("p").format("parquet").save(pq)
    assert any(n.startswith("p=") for n in os.listdir(pq))


def test_empty_dataframe_creates_readable_empty_table(spark, tmp_path):
    path = str(tmp_path / "empty")
    df = spark.createDataFrame([], "id long, body string")
    df.write.format("indextables").mode("append").save(path)
    t = it.IndexTable(path)
    assert t.version() == 0 and t.snapshot().num_files == 0
    back = spark.read.format("indextables").load(path)
    assert back.schema.fieldNames() == ["id", "body"]
    assert back.collect() == []
    assert spark.read.format("indextables").option("query", "body:x").load(path).count() == 0


def test_schema_mismatch_and_bad_input_errors(spark, tmp_path):
    path = str(tmp_path / "strict")
    spark.createDataFrame([(1, "a")], "id long, body string").write.format("indextables").mode("append").save(path)
    with pytest.raises(Exception, match="body"):
        spark.createDataFrame([(1, 2)], "id long, body int").write.format("indextables").mode("append").save(path)
    with pytest.raises(Exception, match="extra"):
        spark.createDataFrame([(1, "a", 3)], "id long, body string, extra int").write.format("indextables").mode(
            "append"
        ).save(path)
    assert it.IndexTable(path).version() == 0
    # bare save (ErrorIfExists) on an existing table is refused with a clear message
    with pytest.raises(it.IndexTablesError, match="already exists"):
        spark.createDataFrame([(1, "a")], "id long, body string").write.format("indextables").save(path)
    # a type that cannot be stored fails before any file is written
    bad = str(tmp_path / "bad")
    with pytest.raises(Exception, match="(?i)interval"):
        spark.sql("select 1 as id, interval '1' day as dur").write.format("indextables").mode("append").save(bad)
    assert not os.path.exists(os.path.join(bad, "_transaction_log"))
    # reading a path without a table names it
    with pytest.raises(Exception, match="nothing-here"):
        spark.read.format("indextables").load(str(tmp_path / "nothing-here")).collect()


def test_failed_job_commits_nothing(spark, tmp_path):
    path = str(tmp_path / "fail")
    spark.createDataFrame([(1, "a")], "id long, body string").write.format("indextables").mode("append").save(path)

    @sf.udf("string")
    def boom(v):
        if v == "b":
            raise ValueError("injected failure")
        return v

    df = spark.createDataFrame([(2, "a"), (3, "b")], "id long, body string").repartition(2)
    with pytest.raises(Exception, match="injected failure"):
        df.withColumn("body", boom("body")).write.format("indextables").mode("append").save(path)
    t = it.IndexTable(path)
    assert t.version() == 0
    assert spark.read.format("indextables").load(path).count() == 1


def test_full_text_query_option_and_errors(spark, tmp_path):
    path = str(tmp_path / "fts")
    rows = [
        (i, f"title {i}", ("apache spark sql engine" if i % 10 == 0 else "tantivy search library"), i % 7)
        for i in range(200)
    ]
    df = spark.createDataFrame(rows, "id long, title string, body string, bucket int")
    (df.write.format("indextables").mode("append").option("spark.indextables.indexing.typemap.body", "text").save(path))
    reader = spark.read.format("indextables")
    assert reader.option("query", 'body:"spark sql"').load(path).count() == 20
    assert reader.option("query", "body:spark AND body:engine").load(path).count() == 20
    q = spark.read.format("indextables").option("query", "body:tantivy OR body:spark").load(path)
    assert q.count() == 200
    combined = spark.read.format("indextables").option("query", "body:spark").load(path).filter("bucket = 3")
    assert sorted(r.id for r in combined.collect()) == [i for i in range(0, 200, 10) if i % 7 == 3]
    # the typemap was recorded in the table: an append without the option still tokenizes body
    df.limit(10).write.format("indextables").mode("append").save(path)
    assert spark.read.format("indextables").option("query", 'body:"spark sql"').load(path).count() == 21
    with pytest.raises(Exception, match=r"body:\(spark AND"):
        spark.read.format("indextables").option("query", "body:(spark AND").load(path).collect()


def test_sql_temporary_view(spark, tmp_path):
    path = str(tmp_path / "view")
    spark.createDataFrame([(1, "a b"), (2, "b c")], "id long, v string").write.format("indextables").option(
        "spark.indextables.indexing.typemap.v", "text"
    ).mode("append").save(path)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW it_view USING indextables OPTIONS (path '{path}')")
    assert spark.sql("SELECT count(*) AS n FROM it_view WHERE v = 'b c'").collect()[0].n == 1
    spark.sql("INSERT INTO it_view VALUES (3, 'c d')")
    # later scans of the same view see the new version, and no earlier filter leaks into them
    assert spark.sql("SELECT count(*) AS n FROM it_view").collect()[0].n == 3
    assert sorted(r.id for r in spark.sql("SELECT id FROM it_view WHERE _indexall = 'v:c'").collect()) == [2, 3]
    assert spark.sql("SELECT count(*) AS n FROM it_view WHERE _indexall = 'v:b' AND id > 1").collect()[0].n == 1
    spark.sql("INSERT OVERWRITE it_view SELECT 9, 'z'")
    assert [tuple(r) for r in spark.sql("SELECT id, v FROM it_view").collect()] == [(9, "z")]
    # DataFrameWriter.insertInto on the view: by position, cast to the table's types
    spark.createDataFrame([(10, "y")], "a int, b string").write.insertInto("it_view")
    assert sorted(tuple(r) for r in spark.sql("SELECT id, v FROM it_view").collect()) == [(9, "z"), (10, "y")]
    spark.createDataFrame([(11, "x")], "a long, b string").write.insertInto("IT_VIEW", overwrite=True)
    assert [tuple(r) for r in spark.sql("SELECT id, v FROM it_view").collect()] == [(11, "x")]
    with pytest.raises(it.SchemaMismatchError, match="it_view"):
        spark.createDataFrame([(1,)], "a long").write.insertInto("it_view")
    with pytest.raises(it.IndexTablesError, match="_indexall"):
        spark.sql("SELECT * FROM it_view WITH ('query'='v:z')")


def test_dataframe_reuse_sees_new_versions_and_no_stale_filters(spark, tmp_path):
    path = str(tmp_path / "reuse")
    spark.createDataFrame([(1,), (2,), (3,)], "id long").write.format("indextables").mode("append").save(path)
    df = spark.read.format("indextables").load(path)
    assert df.columns == ["id"]
    assert df.filter("id > 1").count() == 2
    assert df.count() == 3  # Spark 4.3 would reuse the filtered read without the plan guard
    spark.createDataFrame([(4,)], "id long").write.format("indextables").mode("append").save(path)
    assert df.count() == 4


def test_spark_conf_options_reach_the_writer(spark, tmp_path):
    path = str(tmp_path / "conf")
    spark.conf.set("spark.indextables.indexing.typemap.body", "text")
    try:
        spark.createDataFrame([(1, "Quick Brown Fox")], "id long, body string").write.format("indextables").mode(
            "append"
        ).save(path)
    finally:
        spark.conf.unset("spark.indextables.indexing.typemap.body")
    assert spark.read.format("indextables").option("query", "body:fox").load(path).count() == 1
