"""Optimized writes (`write.optimizeWrite.*`, IndexTables4Spark's names; issue #39): the shuffle that
gives splits near the target size instead of one small split per task and partition value. Real
Spark sessions (classic and Connect) write real tables; the split sizes are read from their logs."""

from __future__ import annotations

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.config.sessions import functions
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.errors import InvalidOptionError
from indextables_spark.ops.write import optimize_write as ow

VALUES = 4  # partition values
ROWS = 24_000  # 6,000 per value
TASKS = 16  # input tasks: a plain write gives TASKS * VALUES splits
TARGET = 256 << 10


def frame(spark, rows=ROWS, tasks=TASKS):
    F = functions(spark)
    return spark.range(0, rows, 1, tasks).select(
        F.col("id"),
        (F.col("id") % VALUES).cast("string").alias("region"),
        F.concat(
            F.lit("word"),
            (F.col("id") % 97).cast("string"),
            F.lit(" lorem ipsum "),
            F.sha2(F.col("id").cast("string"), 256),
        ).alias("body"),
    )


def write(df, path, **options):
    w = df.write.format("indextables").mode("overwrite").partitionBy("region")
    w = w.option("spark.indextables.indexing.typemap.body", "text")
    for k, v in options.items():
        w = w.option(k, v)
    w.save(path)


def splits(path) -> list[AddFile]:
    t = it.IndexTable(path)
    return t.log.snapshot(t.log.latest_version()).files


def assert_near(files: list[AddFile], target: float, what=lambda a: a.size, within=0.30):
    ratios = sorted(what(a) / target for a in files)
    assert ratios and 1 - within <= ratios[0] and ratios[-1] <= 1 + within, ratios


ON = "spark.indextables.write.optimizeWrite.enabled"
SIZE = "spark.indextables.write.optimizeWrite.targetSplitSize"


# ---- Spark-free --------------------------------------------------------------------------------------


def test_config_names_defaults_precedence_and_errors():
    d = ow.OptimizedWriteConfig.resolve({})
    assert (d.enabled, d.target_split_bytes, d.sampling_ratio, d.min_rows_for_estimation) == (
        False,
        1 << 30,
        1.1,
        10_000,
    )
    assert (d.distribution_mode, d.max_split_bytes, d.target_records) == ("hash", 4 << 30, None)
    # the reference's earlier names; write options (first layer) over the session conf
    c = ow.OptimizedWriteConfig.resolve(
        {"spark.indextables.optimizeWrite.enabled": "true", "optimizeWrite.targetRecordsPerSplit": "500"},
        {"spark.indextables.write.optimizeWrite.enabled": "false", "write.optimizeWrite.distributionMode": "NONE"},
    )
    assert (c.enabled, c.target_records, c.distribution_mode, c.shuffles) == (True, 500, "none", False)
    c = ow.OptimizedWriteConfig.resolve({ON: "false"}, {"optimizeWrite.enabled": "true", SIZE: "64M"})
    assert (c.enabled, c.target_split_bytes) == (False, 64 << 20)
    for key, value in [
        ("write.optimizeWrite.distributionMode", "spread"),
        ("write.optimizeWrite.targetSplitSize", "big"),
        ("write.optimizeWrite.targetSplitSize", "0"),
        ("write.optimizeWrite.samplingRatio", "0"),
        ("write.optimizeWrite.minRowsForEstimation", "-1"),
        ("optimizeWrite.targetRecordsPerSplit", "many"),
        ("write.optimizeWrite.enabled", "maybe"),
    ]:
        with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
            ow.OptimizedWriteConfig.resolve({"spark.indextables." + key: value})


def test_split_counts_history_and_task_keys():
    m = ow.SizeModel(100.0)
    assert ow.split_count(10_000, m, 400_000) == 3  # 2.5 splits: 3 of 333 KB beat 2 of 500 KB
    assert ow.split_count(10, m, 400_000) == 1
    assert ow.split_count(13_000, m, 1_000_000) == 1  # 1.3: +30% beats -35%
    assert ow.split_count(1_000, m, 1, target_rows=300) == 3
    adds = [
        AddFile(path=f"s{i}", partition_values={}, size=size, modification_time=0, data_change=True, num_records=n)
        for i, (size, n) in enumerate([(1000, 10), (50_000, 100), (150_000, 300)])
    ]
    h = ow.history_model(adds, min_rows=100)
    assert h is not None and h.bytes_per_row == 500.0 and h.source == "history"
    assert ow.history_model(adds, min_rows=1000) is None
    for n in (1, 7, 64, 1000):
        keys = ow.task_keys(n)
        assert len(set(keys)) == n and [ow.spark_hash_int(k) % n for k in keys] == list(range(n))


def test_sample_model_and_rows_roll(tmp_path):
    """The sample model predicts the size of a bigger split; SplitWriter rolls at maxRowsPerSplit."""
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.schema.arrow_types import spark_schema_json
    from indextables_spark.ops.write.write import plan_write, write_splits

    n = 40_000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "region": pa.array(["eu"] * n),
            "body": pa.array([f"word{i % 97} lorem ipsum {i * 7919 % 100_003}" for i in range(n)]),
        }
    )
    opts = Options.of({"partitionBy": "region", "indexing.typemap.body": "text"})
    t = it.IndexTable(str(tmp_path / "t"))
    plan, _, _ = plan_write(t.log, opts, spark_schema_json(data.schema), False)
    model = ow.measure_sample(plan, data.slice(0, 10_000))
    assert model is not None and model.source == "sample"
    whole = write_splits(open_storage(str(tmp_path / "w")), plan, iter(data.to_batches()))
    assert len(whole.adds) == 1
    assert abs(model.size_of(n) / whole.adds[0]["size"] - 1) < 0.15
    rolled = plan.__class__(**{**plan.__dict__, "options": Options.of(plan.options, {ow.MAX_ROWS: "15000"})})
    out = write_splits(open_storage(str(tmp_path / "r")), rolled, iter(data.to_batches()))
    assert sorted(a["numRecords"] for a in out.adds) == [10_000, 15_000, 15_000]


def test_spark_free_write_table(tmp_path):
    """it.write_table of an Arrow table: each partition value's rows cut into splits near the target."""
    n = 40_000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "region": pa.array([str(i % VALUES) for i in range(n)]),
            "body": pa.array([f"word{i % 97} lorem ipsum {i * 7919 % 100_003} {i * 31 % 977}" for i in range(n)]),
        }
    )
    opts = {"indexing.typemap.body": "text", "write.parallelism": "2"}
    plain = str(tmp_path / "plain")
    it.write_table(plain, data, partition_by="region", options={**opts, "write.chunkRows": "2500"})
    assert len(splits(plain)) == 16 * VALUES
    opt = str(tmp_path / "opt")
    it.write_table(opt, data, partition_by="region", options={**opts, ON: "true", SIZE: str(TARGET)})
    files = splits(opt)
    assert len(files) < 16 * VALUES and sum(a.num_records for a in files) == n
    assert_near(files, TARGET)
    assert it.IndexTable(opt).to_arrow().num_rows == n


# ---- classic Spark ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_partitioned_write_splits_near_target(spark, tmp_path):
    F = functions(spark)
    n = 37  # Spark's hash partitioning is what task_keys inverts
    got = [r[0] for r in spark.range(300).select(F.pmod(F.hash(F.col("id").cast("int")), F.lit(n))).collect()]
    assert got == [ow.spark_hash_int(i) % n for i in range(300)]

    df = frame(spark)
    plain, opt = str(tmp_path / "plain"), str(tmp_path / "opt")
    write(df, plain)
    assert len(splits(plain)) == TASKS * VALUES  # disabled (the default): one split per task and value
    write(df, opt, **{ON: "true", SIZE: str(TARGET)})
    files = splits(opt)
    assert len(files) < TASKS * VALUES // 2 and sum(a.num_records for a in files) == ROWS
    assert_near(files, TARGET)
    d = spark.read.format("indextables").load(opt)
    assert d.count() == ROWS and d.filter("region = '1'").count() == ROWS // VALUES

    # an append takes the bytes per row from the table's splits (history mode)
    more = frame(spark).withColumn("id", F.col("id") + ROWS)
    more.write.format("indextables").mode("append").option(ON, "true").option(SIZE, str(TARGET)).option(
        "spark.indextables.write.optimizeWrite.minRowsForEstimation", "1000"
    ).save(opt)
    added = [a for a in splits(opt) if a.path not in {f.path for f in files}]
    assert_near(added, TARGET)
    assert spark.read.format("indextables").load(opt).count() == 2 * ROWS


@pytest.mark.spark
def test_option_precedence_records_and_modes(spark, tmp_path):
    small = frame(spark, rows=8_000, tasks=8)
    spark.conf.set(ON, "true")
    try:
        p = str(tmp_path / "off")
        write(small, p, **{ON: "false"})  # the write option wins over the session conf
        assert len(splits(p)) == 8 * VALUES
        p = str(tmp_path / "records")
        write(small, p, **{"spark.indextables.optimizeWrite.targetRecordsPerSplit": "1000"})  # conf: enabled
        assert_near(splits(p), 1000, what=lambda a: a.num_records)
    finally:
        spark.conf.unset(ON)
    spark.conf.set(ON, "false")
    try:
        p = str(tmp_path / "alias")
        write(small, p, **{"spark.indextables.optimizeWrite.enabled": "true", SIZE: "64M"})
        assert len(splits(p)) == VALUES  # each value's 2,000 rows: one split
    finally:
        spark.conf.unset(ON)
    p = str(tmp_path / "balanced")
    write(small, p, **{ON: "true", "spark.indextables.write.optimizeWrite.distributionMode": "balanced"})
    assert len(splits(p)) == VALUES  # hashed by value over the default parallelism: one task per value
    p = str(tmp_path / "none")
    write(small, p, **{ON: "true", "spark.indextables.write.optimizeWrite.distributionMode": "none"})
    assert len(splits(p)) == 8 * VALUES
    for key, value in [
        ("write.optimizeWrite.distributionMode", "spread"),
        ("write.optimizeWrite.targetSplitSize", "big"),
    ]:
        with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
            write(small, str(tmp_path / "bad"), **{ON: "true", "spark.indextables." + key: value})


@pytest.mark.spark
def test_without_register_writes_as_it_comes(unregistered, tmp_path):
    """Without register nothing shuffles (a warning says so); a bad value still fails the write."""
    small = frame(unregistered, rows=4_000, tasks=4)

    def w(path, **options):
        b = small.write.format("indextables").mode("append").option("partitionBy", "region")
        for k, v in options.items():
            b = b.option(k, v)
        b.save(path)

    w(str(tmp_path / "t"), **{ON: "true"})
    assert len(splits(str(tmp_path / "t"))) == 4 * VALUES
    with pytest.raises(Exception, match=r"write\.optimizeWrite\.distributionMode"):
        w(str(tmp_path / "bad"), **{ON: "true", "spark.indextables.write.optimizeWrite.distributionMode": "x"})


# ---- Spark Connect ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_connect_session(connect_spark, tmp_path):
    it.register(connect_spark)
    path = str(tmp_path / "t")
    connect_spark.conf.set(ON, "true")
    try:
        write(frame(connect_spark), path, **{SIZE: str(TARGET)})
    finally:
        connect_spark.conf.unset(ON)
    files = splits(path)
    assert len(files) < TASKS * VALUES // 2 and sum(a.num_records for a in files) == ROWS
    assert_near(files, TARGET)
    with pytest.raises(Exception, match=r"write\.optimizeWrite\.distributionMode"):
        write(
            frame(connect_spark, rows=100),
            str(tmp_path / "bad"),
            **{ON: "true", "spark.indextables.write.optimizeWrite.distributionMode": "x"},
        )
