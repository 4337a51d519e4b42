"""`it.register(spark)` changes nothing for other formats: the same writes, catalog operations and
SQL, run with and without register, give the same partition layouts on disk, catalog entries and
results."""

from __future__ import annotations

import os
import re

import pytest

import indextables_spark as it

pytestmark = pytest.mark.spark

SCHEMA = "id long, region string, day string, v double"
ROWS = [(i, ["eu", "us"][i % 2], f"2024-01-0{1 + i % 3}", i / 4) for i in range(30)]


def layout(root: str) -> list[str]:
    """Directories and data-file kinds under root, part-file names normalised."""
    out = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if "_spark_metadata" in rel or "checkpoint" in rel:
            continue
        out.add("dir " + rel)
        for f in files:
            if f.startswith(("part-", ".part-")):
                out.add(f"file {rel}/{re.sub(r'part-[0-9a-f-]+(c000)?', 'part-*', f)}")
            elif not f.startswith("."):
                out.add(f"file {rel}/{f}")
    return sorted(out)


def rows_of(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def exercise(spark, root: str, tag: str) -> dict:
    """Every write/read route of other formats; returns what must not depend on register."""
    df = spark.createDataFrame(ROWS, SCHEMA)
    seen: dict = {}
    for fmt in ("parquet", "csv", "json", "orc"):
        p = f"{root}/{fmt}"
        getattr(df.write.partitionBy("region", "day").mode("overwrite"), fmt)(p)
        reader = spark.read.option("header", "false") if fmt == "csv" else spark.read
        seen[fmt] = (layout(p), getattr(reader, fmt)(p).count())
    df.select("day", "region").write.partitionBy("region").mode("overwrite").text(f"{root}/text")
    seen["text"] = layout(f"{root}/text")
    df.write.format("parquet").partitionBy("day").option("compression", "gzip").mode("overwrite").save(f"{root}/save")
    seen["save"] = (layout(f"{root}/save"), rows_of(spark.read.format("parquet").load(f"{root}/save")))
    df.write.save(f"{root}/default", format="parquet", mode="overwrite", partitionBy="region")
    seen["save_kwargs"] = layout(f"{root}/default")
    table = f"other_fmt_{tag}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    df.write.partitionBy("region").option("path", f"{root}/table").saveAsTable(table)
    spark.createDataFrame(ROWS[:4], SCHEMA).select("id", "day", "v", "region").write.insertInto(table)
    cols = spark.catalog.listColumns(table)
    seen["saveAsTable"] = (
        layout(f"{root}/table"),
        sorted((c.name, c.isPartition) for c in cols),
        rows_of(spark.table(table)),
    )
    seen["sql"] = rows_of(spark.sql(f"SELECT region, count(*) AS n FROM {table} GROUP BY region"))
    seen["show_partitions"] = rows_of(spark.sql(f"SHOW PARTITIONS {table}"))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW other_view_{tag} USING parquet OPTIONS (path '{root}/save')")
    seen["view"] = rows_of(spark.sql(f"SELECT day, count(*) FROM other_view_{tag} GROUP BY day"))
    stream = spark.readStream.schema(SCHEMA).parquet(f"{root}/parquet")
    sink = f"stream_{tag}"
    spark.sql(f"DROP TABLE IF EXISTS {sink}")
    q = (
        stream.writeStream.partitionBy("region")
        .option("checkpointLocation", f"{root}/ck")
        .option("path", f"{root}/stream")
        .trigger(availableNow=True)
        .toTable(sink)
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    seen["toTable"] = (
        layout(f"{root}/stream"),
        spark.table(sink).count(),
        sorted((c.name, c.isPartition) for c in spark.catalog.listColumns(sink)),
    )
    spark.sql(f"DROP TABLE {sink}")
    spark.sql(f"DROP TABLE {table}")
    return seen


def test_register_changes_nothing_for_other_formats(spark, tmp_path):
    it.unregister(spark)
    try:
        without = exercise(spark, str(tmp_path / "without"), "a")
    finally:
        it.register(spark)
    with_register = exercise(spark, str(tmp_path / "with"), "b")
    assert with_register == without
    # and the writes really are partitioned
    assert "dir region=eu/day=2024-01-01" in without["parquet"][0]
    assert ("region", True) in without["saveAsTable"][1]


def test_unregister_restores_pyspark(spark):
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
    from pyspark.sql.session import SparkSession

    before = {c: dict(vars(c)) for c in (DataFrameReader, DataFrameWriter, SparkSession)}
    it.unregister(spark)
    try:
        for cls in (DataFrameReader, DataFrameWriter, SparkSession):
            for name, fn in vars(cls).items():
                assert not hasattr(fn, "_indextables_original"), f"{cls.__name__}.{name} still wrapped"
    finally:
        it.register(spark)
    wrapped = [n for c in (DataFrameWriter,) for n, fn in vars(c).items() if hasattr(fn, "_indextables_original")]
    assert sorted(wrapped) == ["format", "insertInto", "mode", "option", "options", "partitionBy", "save"]
    assert before[DataFrameWriter].keys() == vars(DataFrameWriter).keys()
