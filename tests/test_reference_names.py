"""The names a job written for the reference (IndexTables4Spark) uses: its format names
(`io.indextables.provider.IndexTablesProvider`, `io.indextables.spark.core.IndexTables4SparkTableProvider`),
the TANTIVY4SPARK keyword of its SQL commands, and table names (`t`, `db.t`, `catalog.db.t`) where its
commands take a table — resolved through the Spark catalog (catalog tables created `USING <our
format> LOCATION '…'`, and our temporary views). Classic and Spark Connect sessions."""

from __future__ import annotations

import io

import pytest
from cmd_helpers import TEXT_OPTIONS, small_splits_table

import indextables_spark as it
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import TableName, parse_command
from indextables_spark.errors import InvalidOptionError, TableNotFoundError

PROVIDER = "io.indextables.provider.IndexTablesProvider"
INTERNAL = "io.indextables.spark.core.IndexTables4SparkTableProvider"
SCHEMA = "id long, region string, body string"
ROWS = [(i, ["eu", "us", "ap"][i % 3], f"doc {i} word{i % 7}") for i in range(60)]


def ids(rows) -> list[int]:
    return sorted(r.id for r in rows)


def with_word(k: int) -> list[int]:
    return [r[0] for r in ROWS if f"word{k}" in r[2].split()]


# ---- without Spark -----------------------------------------------------------------------------


def test_spark_finds_the_reference_names_without_register():
    """pyspark's own lookup of static Python data sources (the worker Spark runs once per JVM) finds
    the data source under each of its three names (the pyspark_indextables* modules)."""
    from pyspark.serializers import UTF8Deserializer, read_int
    from pyspark.sql.worker.lookup_data_sources import _main
    from pyspark.worker_util import pickleSer

    from indextables_spark.spark.datasource import IndexTablesDataSource

    out = io.BytesIO()
    _main(io.BytesIO(), out)
    out.seek(0)
    found = {}
    for _ in range(read_int(out)):
        name = UTF8Deserializer().loads(out)
        found[name] = pickleSer._read_with_length(out)
    ours = {n: c for n, c in found.items() if issubclass(c, IndexTablesDataSource)}
    assert sorted(ours) == sorted(["indextables", PROVIDER, INTERNAL])
    assert all(c.name() == n for n, c in ours.items())


def test_a_table_name_needs_a_spark_catalog():
    """The command line and `execute` have no catalog: a table name is refused, naming it."""
    cmd = parse_command("CHECKPOINT TANTIVY4SPARK db.`my t`")
    assert cmd.path == TableName(("db", "my t"))
    with pytest.raises(InvalidOptionError, match=r"table name db\.`my t`: .*path in quotes"):
        execute(cmd)


# ---- classic session ---------------------------------------------------------------------------


@pytest.mark.spark
def test_reference_format_names_read_write_stream_views(spark, tmp_path):
    """Every indextables behaviour of the DataFrame API under the reference's names, in any case:
    partitionBy (moved into the option by the wrapper), the session conf (a typemap), queries,
    streaming, and SQL views USING the provider name."""
    path = str(tmp_path / "t")
    df = spark.createDataFrame(ROWS, SCHEMA)
    spark.conf.set("spark.indextables.indexing.typemap.body", "text")
    try:
        df.write.format(PROVIDER).mode("append").partitionBy("region").save(path)
        df.limit(6).write.format(INTERNAL.upper()).mode("append").save(path)
    finally:
        spark.conf.unset("spark.indextables.indexing.typemap.body")
    table = it.IndexTable(path)
    assert table.snapshot().partition_columns == ["region"]
    assert table.snapshot().version == 1
    for fmt in (PROVIDER, INTERNAL, PROVIDER.lower(), "indextables"):
        d = spark.read.format(fmt).load(path)
        assert d.columns == ["id", "region", "body"]
        assert d.count() == len(ROWS) + 6
        q = spark.read.format(fmt).option("query", "body:word3").load(path)
        assert ids(q.collect()) == sorted(with_word(3) + [i for i in with_word(3) if i < 6])
        assert d.filter("region = 'eu'").count() == sum(1 for r in ROWS if r[1] == "eu") + 2

    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q = (
        spark.readStream.format(INTERNAL)
        .load(path)
        .writeStream.format(PROVIDER)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start(out)
    )
    assert q.awaitTermination(120), "the streaming query did not finish in time"
    assert spark.read.format("indextables").load(out).count() == len(ROWS) + 6

    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW refdocs USING {PROVIDER} OPTIONS (path '{path}')")
    try:
        got = spark.sql("SELECT id FROM refdocs WHERE _indexall = 'body:word2' AND id >= 6").collect()
        assert ids(got) == [i for i in with_word(2) if i >= 6]
    finally:
        spark.catalog.dropTempView("refdocs")


@pytest.fixture
def catalog_tables(spark, tmp_path):
    """An indextables table (3 day partitions, 4 small splits each) registered in the session catalog
    twice (USING indextables / USING the reference's provider name), a parquet table, a plain
    temporary view and one of our views over the table."""
    path = str(tmp_path / "docs")
    small_splits_table(path, 4)
    spark.sql("CREATE DATABASE IF NOT EXISTS refnames_db")
    spark.sql(f"CREATE TABLE refnames_db.docs USING indextables LOCATION '{path}'")
    spark.sql(f"CREATE TABLE refnames_db.ref_docs USING {PROVIDER} LOCATION '{path}'")
    (tmp_path / "pq").mkdir()
    spark.sql(f"CREATE TABLE refnames_db.pq (id bigint) USING parquet LOCATION '{tmp_path / 'pq'}'")
    spark.range(3).createOrReplaceTempView("plain_view")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW viewdocs USING indextables OPTIONS (path '{path}')")
    try:
        yield path
    finally:
        spark.sql("USE default")
        spark.catalog.dropTempView("plain_view")
        spark.catalog.dropTempView("viewdocs")
        spark.sql("DROP DATABASE refnames_db CASCADE")


@pytest.mark.spark
def test_table_names_in_commands(spark, catalog_tables):
    path = catalog_tables
    table = it.IndexTable(path)
    before = table.snapshot().num_files
    assert before == 12

    state = spark.sql("DESCRIBE TANTIVY4SPARK STATE refnames_db.docs").collect()[0]
    assert state.table_path == path and state.table_version == 3
    merged = spark.sql("MERGE SPLITS refnames_db.ref_docs WHERE day = '2024-01-01' TARGET SIZE 100M").collect()[0]
    assert merged.table_path == path and merged.status == "SUCCESS" and merged.source_splits_merged == 4
    assert table.snapshot().num_files == before - 3
    checkpoint = it.sql(spark, "CHECKPOINT TANTIVY4SPARK spark_catalog.refnames_db.`docs`").collect()[0]
    assert checkpoint.table_path == path and checkpoint.version == table.snapshot().version
    spark.sql("USE refnames_db")
    log = spark.sql("DESCRIBE INDEXTABLES TRANSACTION LOG docs INCLUDE ALL").collect()
    assert {r.version for r in log} >= set(range(5))
    dry = spark.sql("TRUNCATE TANTIVY4SPARK TIME TRAVEL viewdocs DRY RUN").collect()[0]
    assert dry.table_path == path and dry.status == "DRY_RUN"
    purge = spark.sql("PURGE INDEXTABLE ref_docs DRY RUN").collect()[0]
    assert purge.table_path == path and purge.status == "DRY_RUN"
    dropped = spark.sql("DROP TANTIVY4SPARK PARTITIONS FROM refnames_db.docs WHERE day = '2024-01-03'").collect()[0]
    assert dropped.table_path == path and dropped.partitions_dropped == 1
    assert spark.read.format(PROVIDER).load(path).count() == sum(1 for i in range(80) if i % 3 != 2)


@pytest.mark.spark
def test_table_names_that_name_no_indextables_table(spark, catalog_tables):
    with pytest.raises(TableNotFoundError, match=r"no table or view refnames_db\.missing in the Spark catalog"):
        spark.sql("MERGE SPLITS refnames_db.missing")
    with pytest.raises(TableNotFoundError, match=r"refnames_db\.pq is not an indextables table .*provider is parquet"):
        spark.sql("CHECKPOINT INDEXTABLES refnames_db.pq")
    with pytest.raises(TableNotFoundError, match="plain_view is a temporary view that is not over an indextables"):
        it.sql(spark, "DESCRIBE INDEXTABLES STATE plain_view")
    with pytest.raises(TableNotFoundError, match=r"table no_such_db\.t: the Spark catalog cannot look it up"):
        spark.sql("DESCRIBE TANTIVY4SPARK STATE no_such_db.t")


@pytest.mark.spark
@pytest.mark.cloud
def test_table_name_of_a_table_on_s3(spark, s3_uri, s3_options):
    """A catalog table over S3: created with its columns (without them Spark asks the data source
    for the schema with no options, so without the credentials), its commands take the session's
    conf as options."""
    from cloud_helpers import session_conf

    small_splits_table(s3_uri, 2, options=s3_options)
    spark.sql("CREATE DATABASE IF NOT EXISTS refnames_s3")
    try:
        with session_conf(spark, s3_options):
            spark.sql(
                "CREATE TABLE refnames_s3.docs (id bigint, body string, views bigint, region string, day string) "
                f"USING {PROVIDER} LOCATION '{s3_uri}'"
            )
            state = spark.sql("DESCRIBE TANTIVY4SPARK STATE refnames_s3.docs").collect()[0]
            assert state.table_path == s3_uri and state.table_version == 1
            merged = spark.sql("MERGE SPLITS refnames_s3.docs TARGET SIZE 100M").collect()[0]
            assert merged.table_path == s3_uri and merged.source_splits_merged == 6
        assert it.IndexTable(s3_uri, s3_options).snapshot().num_files == 3
    finally:
        spark.sql("DROP DATABASE refnames_s3 CASCADE")


# ---- Spark Connect -----------------------------------------------------------------------------


@pytest.mark.spark
def test_reference_names_over_connect(connect_spark, tmp_path):
    """Format names, the keyword and a catalog table's name from a Spark Connect client (the server
    runs on this machine, so a local path is the server's too)."""
    cs = connect_spark
    it.register(cs)
    path = str(tmp_path / "t")
    cs.createDataFrame(ROWS, SCHEMA).write.format(PROVIDER).mode("append").partitionBy("region").options(
        **TEXT_OPTIONS
    ).save(path)
    assert it.IndexTable(path).snapshot().partition_columns == ["region"]
    q = cs.read.format(INTERNAL).option("query", "body:word5").load(path)
    assert ids(q.collect()) == with_word(5)
    cs.createDataFrame(ROWS[:9], SCHEMA).write.format(INTERNAL).mode("append").save(path)

    cs.sql("CREATE DATABASE IF NOT EXISTS refnames_connect")
    try:
        cs.sql(f"CREATE TABLE refnames_connect.docs USING {PROVIDER} LOCATION '{path}'")
        state = cs.sql("DESCRIBE TANTIVY4SPARK STATE refnames_connect.docs").collect()[0]
        assert state.table_path == path and state.table_version == 1
        merged = cs.sql("MERGE SPLITS refnames_connect.docs TARGET SIZE 100M").collect()[0]
        assert merged.table_path == path and merged.status in ("SUCCESS", "NO_ACTION")
        assert cs.read.format("indextables").load(path).count() == len(ROWS) + 9
        with pytest.raises(TableNotFoundError, match=r"refnames_connect\.nope"):
            it.sql(cs, "CHECKPOINT TANTIVY4SPARK refnames_connect.nope")
    finally:
        cs.sql("DROP DATABASE refnames_connect CASCADE")
