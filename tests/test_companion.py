"""Companion indexes (issue 15): BUILD INDEXTABLES COMPANION over Delta, Iceberg and Parquet tables;
reads through the index return the source's rows (differential against the source read directly),
incremental sync, refusals, maintenance."""

from __future__ import annotations

import datetime
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import indextables_spark as it
from cloud_helpers import session_conf
from cmd_helpers import rows
from indextables_spark.errors import CompanionSourceError
from indextables_spark.core.split.cache.companion_rows import forget_source_files

COLUMNS = ["id", "body", "views", "region", "day"]
INDEXING = {"body": "text"}
# Most builds here index in this process: a local build otherwise starts a Python process per split
# group (1-3 s each on a loaded 2-core machine), which the sync logic tested here does not depend on.
# The process route stays tested: test_build_and_read_each_format (each format),
# test_cloud_source_and_index's Delta cases and test_iceberg_on_azure (credentials reach the
# processes), and test_companion_sources.py's provider test.
IN_PROCESS = {"spark.indextables.companion.parallelism": "1"}


# -- sources ---------------------------------------------------------------------------------------


def write_delta(path: str, data: pa.Table, mode: str = "append", partition_by=("day",), storage_options=None) -> None:
    from deltalake import write_deltalake

    write_deltalake(path, data, mode=mode, partition_by=list(partition_by) or None, storage_options=storage_options)


def write_parquet_dir(
    path: str, data: pa.Table, partition_by=("day",), name: str = "part-{i}.parquet", row_group_size: int = 64
) -> None:
    pq.write_to_dataset(
        data, path, partition_cols=list(partition_by) or None, basename_template=name, row_group_size=row_group_size
    )


def iceberg_catalog(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "warehouse"
    wh.mkdir(exist_ok=True)
    cat = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace_if_not_exists("db")
    return cat, {
        "iceberg.catalog.c.uri": f"sqlite:///{tmp_path}/catalog.db",
        "iceberg.catalog.c.warehouse": f"file://{wh}",
    }


def write_iceberg(tmp_path, data: pa.Table, partitioned: bool = True):
    cat, options = iceberg_catalog(tmp_path)
    table = cat.create_table("db.docs", schema=data.schema)
    if partitioned:
        with table.update_spec() as spec:
            spec.add_identity("day")
    table.append(data)
    return cat.load_table("db.docs"), options


def _plain(v):
    # hive partition discovery reads day=2024-01-01 as a date (as Spark does); compare as text
    return v.isoformat() if isinstance(v, datetime.date) else v


def delta_keys(src: str) -> set[str]:
    from indextables_spark.ops.companion.sources import open_source

    return {f.key for f in open_source("delta", src).files}


def write_source(fmt: str, tmp_path, data: pa.Table) -> tuple[str, dict, dict]:
    """The rows as a `fmt` table: (source, build_companion keyword arguments, options)."""
    src = str(tmp_path / "src")
    if fmt == "delta":
        write_delta(src, data)
    elif fmt == "parquet":
        write_parquet_dir(src, data)
    else:
        _, options = write_iceberg(tmp_path, data)
        return "db.docs", {"catalog": "c", "catalog_type": "sql"}, options
    return src, {}, {}


def tuples(data) -> list[tuple]:
    rows_ = data.select(COLUMNS).to_pylist() if isinstance(data, pa.Table) else data
    return sorted(tuple(_plain(r[c]) for c in COLUMNS) for r in rows_)


def has_word(data: pa.Table, word: str) -> pa.Table:
    return data.filter(pa.array([word in b.split() for b in data.column("body").to_pylist()]))


def index_rows(location: str, query: str | None = None, where: str | None = None) -> list[tuple]:
    t = it.IndexTable(location)
    got = t.search(query, where=where, columns=COLUMNS) if query else t.to_arrow(where=where, columns=COLUMNS)
    return tuples(got)


# -- build and read, each format -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["delta", "parquet", "iceberg"])
def test_build_and_read_each_format(fmt, tmp_path):
    data = rows(600)
    loc = str(tmp_path / "index")
    src, kwargs, options = write_source(fmt, tmp_path, data)
    res = it.build_companion(src, loc, format=fmt, indexing=INDEXING, options=options, **kwargs)
    assert res["filesIndexed"] > 0 and res["rowsIndexed"] == 600 and res["version"] == 0
    assert index_rows(loc) == tuples(data)
    assert index_rows(loc, "body:alpha") == tuples(has_word(data, "alpha"))
    bravo = has_word(data, "bravo")
    exp = bravo.filter(pc.greater(bravo.column("views"), 500))
    assert index_rows(loc, "body:bravo", "views > 500") == tuples(exp)
    t = it.IndexTable(loc)
    assert t.count() == 600 and t.count("body:alpha") == has_word(data, "alpha").num_rows
    # every split points at source files, holds no rows
    files = t.snapshot().files
    assert all(f.companion_source_files for f in files)
    assert sum(len(f.companion_source_files) for f in files) == res["filesIndexed"]


def test_top_n_by_score_and_snippets(tmp_path):
    data = rows(300)
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, data)
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    got = it.IndexTable(loc).search("body:alpha OR body:bravo", limit=5, columns=["id", "body"])
    assert got.num_rows == 5 and "_score" in got.column_names
    scores = got.column("_score").to_pylist()
    assert scores == sorted(scores, reverse=True)


# -- sync ------------------------------------------------------------------------------------------


def test_delta_incremental_sync(tmp_path):
    from deltalake import DeltaTable

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(300))
    first = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    # nothing changed: nothing to do, no new version
    again = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert again["filesIndexed"] == 0 and again["version"] is None
    # an append: only the new files are indexed
    write_delta(src, rows(90, start=300))
    new_files = len(delta_keys(src)) - first["filesIndexed"]
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert res["filesIndexed"] == new_files and res["splitsRemoved"] == 0 and res["version"] == 1
    expected = DeltaTable(src).to_pyarrow_table()
    assert index_rows(loc) == tuples(expected)
    # a delete rewrites files: splits holding removed files go, their valid files are indexed again
    DeltaTable(src).delete("id % 7 = 0")
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert res["filesRemoved"] > 0 and res["splitsRemoved"] > 0
    expected = DeltaTable(src).to_pyarrow_table()
    assert index_rows(loc) == tuples(expected)
    assert index_rows(loc, "body:alpha") == tuples(has_word(expected, "alpha"))
    indexed = {k for f in it.IndexTable(loc).snapshot().files for k in f.companion_source_files}
    assert indexed == delta_keys(src)


def test_a_rewritten_file_is_logged_not_its_split_indexed_again(tmp_path):
    """A copy-on-write delete rewrites one file: its rows are logged as deleted in the split that
    holds it, the rewritten file is indexed, the split's other files are not indexed again; reads
    never open the removed file (vacuumed); a RESTORE that brings it back indexes its split again."""
    from deltalake import DeltaTable

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    for i in range(3):
        write_delta(src, rows(60, start=60 * i), partition_by=())
    first = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert first["filesIndexed"] == 3 and first["splitsAdded"] == 1
    DeltaTable(src).delete("id = 70")  # in the second file only
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert (res["filesIndexed"], res["filesRemoved"], res["splitsRemoved"], res["rowsIndexed"]) == (1, 1, 0, 59)
    expected = DeltaTable(src).to_pyarrow_table()
    assert index_rows(loc) == tuples(expected)
    # the removed file is gone from storage: the rows of the kept split are still read
    DeltaTable(src).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    forget_source_files()
    assert index_rows(loc) == tuples(expected) and it.IndexTable(loc).count() == 179
    assert index_rows(loc, "body:alpha") == tuples(has_word(expected, "alpha"))
    again = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert again["status"] == "NO_ACTION" and again["filesRemoved"] == 0
    # the first split's other files and the rewritten file rewritten: both splits go
    DeltaTable(src).delete("id % 60 = 1")
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert res["splitsRemoved"] == 2 and res["filesRemoved"] == 4  # every file of a split removed
    assert index_rows(loc) == tuples(DeltaTable(src).to_pyarrow_table())
    indexed = {k for f in it.IndexTable(loc).snapshot().files for k in f.companion_source_files}
    assert indexed == delta_keys(src)


def test_a_removed_file_back_indexes_its_split_again(tmp_path):
    from deltalake import DeltaTable

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    for i in range(2):
        write_delta(src, rows(40, start=40 * i), partition_by=())
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    before = DeltaTable(src).version()
    DeltaTable(src).delete("id = 3")
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    DeltaTable(src).restore(before)  # the removed file is back, the rewritten one removed
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert res["splitsRemoved"] == 2  # the split whose logs delete the file's rows, the rewritten file's
    assert index_rows(loc) == tuples(rows(80))


def test_iceberg_copy_on_write_delete_keeps_the_split(tmp_path):
    import pyiceberg.expressions as ex

    table, options = write_iceberg(tmp_path, rows(50), partitioned=False)
    table.append(rows(50, start=50))
    loc = str(tmp_path / "index")
    kwargs = {"catalog": "c", "options": {**options, **IN_PROCESS}, "indexing": INDEXING, "format": "iceberg"}
    it.build_companion("db.docs", loc, **kwargs)
    table = table.refresh()
    table.delete(ex.EqualTo("id", 60))  # pyiceberg rewrites the file (copy-on-write)
    res = it.build_companion("db.docs", loc, **kwargs)
    assert (res["filesIndexed"], res["filesRemoved"], res["splitsRemoved"]) == (1, 1, 0)
    assert index_rows(loc) == tuples(table.refresh().scan().to_arrow())


def test_index_serves_its_version_and_fails_clearly_when_files_are_gone(tmp_path):
    from deltalake import DeltaTable

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    data = rows(200)
    write_delta(src, data)
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    # the source moves on (overwrite): the index still serves the version it indexed
    write_delta(src, rows(50, start=1000), mode="overwrite")
    assert index_rows(loc) == tuples(data)
    # the old files are vacuumed: reads fail naming the file and the remedy, never mixing rows
    DeltaTable(src).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    forget_source_files()  # as a fresh process (cached columns of the indexed files are still right)
    with pytest.raises(CompanionSourceError, match="BUILD INDEXTABLES COMPANION"):
        index_rows(loc)
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert index_rows(loc) == tuples(DeltaTable(src).to_pyarrow_table())


def test_parquet_directory_sync_and_replaced_file(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_parquet_dir(src, rows(200), name="a-{i}.parquet")
    it.build_companion(src, loc, format="parquet", indexing=INDEXING, options=IN_PROCESS)
    write_parquet_dir(src, rows(100, start=200), name="b-{i}.parquet")
    res = it.build_companion(src, loc, format="parquet", indexing=INDEXING, options=IN_PROCESS)
    assert res["filesIndexed"] == 3  # one new file per day partition
    assert index_rows(loc) == tuples(rows(300))
    # a file deleted from the directory: its rows are logged as deleted, the split's other files stay
    victim = next(p for p in sorted(_parquet_files(src)) if "a-" in p)
    os.remove(victim)
    res = it.build_companion(src, loc, format="parquet", indexing=INDEXING, options=IN_PROCESS)
    assert res["filesRemoved"] == 1
    expected = pa.concat_tables([_read_hive(p) for p in _parquet_files(src)])
    assert index_rows(loc) == tuples(expected)


def _parquet_files(root: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet")]


def _read_hive(path: str) -> pa.Table:
    t = pq.read_table(path)
    day = os.path.basename(os.path.dirname(path)).split("=", 1)[1]
    return t.append_column("day", pa.array([day] * t.num_rows, pa.string()))


def test_iceberg_sync_after_append_and_overwrite(tmp_path):
    table, options = write_iceberg(tmp_path, rows(200))
    loc = str(tmp_path / "index")
    kwargs = {"catalog": "c", "options": {**options, **IN_PROCESS}, "indexing": INDEXING, "format": "iceberg"}
    first = it.build_companion("db.docs", loc, **kwargs)
    table.append(rows(60, start=200))
    res = it.build_companion("db.docs", loc, **kwargs)
    assert res["filesIndexed"] >= 1 and res["splitsRemoved"] == 0
    assert res["sourceVersion"] != first["sourceVersion"]  # the snapshot id indexed
    assert index_rows(loc) == tuples(rows(260))
    # an overwrite replaces every data file: every split goes, the new files are indexed
    table = table.refresh() if hasattr(table, "refresh") else table
    table.overwrite(rows(40, start=500))
    res = it.build_companion("db.docs", loc, **kwargs)
    assert res["filesRemoved"] >= 1 and res["splitsRemoved"] >= 1
    assert index_rows(loc) == tuples(rows(40, start=500))


def test_where_and_dry_run(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    data = rows(300)
    write_delta(src, data)
    dry = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS, where="day = '2024-01-01'", dry_run=True)
    assert dry["dryRun"] and dry["filesIndexed"] >= 1 and dry["version"] is None
    assert it.IndexTable(loc).version() < 0  # a dry run writes nothing
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS, where="day = '2024-01-01'")
    assert index_rows(loc) == tuples(data.filter(pc.equal(data.column("day"), "2024-01-01")))
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)  # the other partitions later
    assert index_rows(loc) == tuples(data)


def test_time_travel_source_version(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(100))
    write_delta(src, rows(100, start=100))
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS, from_version=0)
    assert res["sourceVersion"] == 0
    assert index_rows(loc) == tuples(rows(100))


# -- refusals and maintenance ------------------------------------------------------------------------


def test_companion_refuses_writes_and_other_sources(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(50))
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    with pytest.raises(CompanionSourceError, match="BUILD INDEXTABLES COMPANION"):
        it.write_table(loc, rows(5))
    other = str(tmp_path / "other")
    write_delta(other, rows(10))
    with pytest.raises(CompanionSourceError, match="companion index of delta table"):
        it.build_companion(other, loc)
    plain = str(tmp_path / "plain")
    it.write_table(plain, rows(5))
    with pytest.raises(CompanionSourceError, match="not a companion index"):
        it.build_companion(src, plain)


def test_merge_purge_describe_on_companion(tmp_path):
    from indextables_spark.frontends.execute import execute
    from indextables_spark.frontends.sql_parser import parse_command

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    for i in range(3):
        write_delta(src, rows(60, start=60 * i))
        it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    before = index_rows(loc)
    n_before = len(it.IndexTable(loc).snapshot().files)
    res = execute(parse_command(f"MERGE SPLITS '{loc}' TARGET SIZE 100M")).raw
    files = it.IndexTable(loc).snapshot().files
    assert len(files) < n_before and res
    assert index_rows(loc) == before
    assert index_rows(loc, "body:alpha") == tuples(has_word(rows(180), "alpha"))
    assert all(f.companion_source_files for f in files)
    # syncing after the merge still knows every file is indexed
    assert it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)["filesIndexed"] == 0
    execute(
        parse_command(f"PURGE INDEXTABLE '{loc}' OLDER THAN 0 HOURS"),
        {"spark.indextables.purge.retentionCheckEnabled": "false"},
    )
    assert index_rows(loc) == before
    state = execute(parse_command(f"DESCRIBE INDEXTABLES STATE '{loc}'")).raw
    assert state["numFiles"] == len(files)


def test_sql_text_and_cli(tmp_path, capsys):
    from indextables_spark.frontends.cli import main
    from indextables_spark.frontends.execute import execute
    from indextables_spark.frontends.sql_parser import parse_command

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(100))
    out = execute(
        parse_command(
            f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' INDEXING MODES ('body':'text') AT LOCATION '{loc}'"
        ),
        IN_PROCESS,
    )
    assert out.table.column("files_indexed").to_pylist()[0] >= 1
    assert index_rows(loc, "body:alpha") == tuples(has_word(rows(100), "alpha"))
    write_delta(src, rows(10, start=100))
    assert (
        main(["build-companion", src, loc, "--indexing", "body=text", "-o", "companion.parallelism=1", "--json"]) == 0
    )
    assert '"filesIndexed"' in capsys.readouterr().out
    assert index_rows(loc) == tuples(rows(110))


def test_companion_is_smaller_than_a_full_table(tmp_path):
    """Issue 15: at most 60% of the bytes of a full table of the same rows (measured: ~42%)."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from datagen import documents

    src, loc, full = str(tmp_path / "src"), str(tmp_path / "index"), str(tmp_path / "full")
    data = documents(20000)
    indexing = {"body": "text", "title": "text"}
    write_delta(src, data, partition_by=["region"])
    it.build_companion(src, loc, indexing=indexing, options=IN_PROCESS)
    it.write_table(
        full, data, partition_by=["region"], options={f"indexing.typemap.{k}": v for k, v in indexing.items()}
    )
    size = lambda p: sum(f.size for f in it.IndexTable(p).snapshot().files)  # noqa: E731
    assert size(loc) <= 0.6 * size(full), (size(loc), size(full))


# -- Spark ---------------------------------------------------------------------------------------------


def _spark_rows(spark, loc: str, query: str | None = None, where: str | None = None) -> list[tuple]:
    r = spark.read.format("indextables")
    if query:
        r = r.option("query", query)
    df = r.load(loc)
    if where:
        df = df.filter(where)
    return tuples([r.asDict() for r in df.select(*COLUMNS).collect()])


def _spark_source_rows(spark, data: pa.Table, where: str | None = None, word: str | None = None) -> list[tuple]:
    df = spark.createDataFrame(data.select(COLUMNS))
    if word:
        df = df.filter(f"body rlike '(^| ){word}( |$)'")
    if where:
        df = df.filter(where)
    return tuples([r.asDict() for r in df.select(*COLUMNS).collect()])


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["delta", "parquet", "iceberg"])
def test_spark_differential(spark, fmt, tmp_path):
    """Full-text queries and filters through the companion equal the same question asked of the
    source's rows directly (read by the source's own library, filtered by Spark)."""
    data = rows(900)
    loc = str(tmp_path / "index")
    src, kwargs, options = write_source(fmt, tmp_path, data)
    # the Iceberg catalog's properties as session conf (spark.indextables.iceberg.catalog.c.*), for the build only
    with session_conf(spark, {"spark.indextables." + k: v for k, v in options.items()}):
        it.build_companion(src, loc, format=fmt, indexing=INDEXING, spark=spark, **kwargs)
    cases = [
        (None, None),
        ("body:alpha", None),
        (None, "views > 500"),
        ("body:bravo", "region = 'eu'"),
        (None, "day = '2024-01-02' AND views < 100"),
        ("body:charlie AND body:delta", None),
        (None, "id IN (1, 5, 700) OR region = 'ap'"),
    ]
    for query, where in cases:
        word = query.split(":")[1] if query and " " not in query else None
        got = _spark_rows(spark, loc, query, where)
        if query and " AND " in query:
            expected = tuples(has_word(has_word(data, "charlie"), "delta"))
        else:
            expected = _spark_source_rows(spark, data, where, word)
        assert got == expected, (query, where)
    df = spark.read.format("indextables").option("query", "body:alpha").load(loc)
    assert df.count() == has_word(data, "alpha").num_rows
    agg = spark.read.format("indextables").load(loc).groupBy("region").count().collect()
    assert sorted((r[0], r[1]) for r in agg) == sorted(
        (k, v)
        for k, v in zip(
            *[
                c.to_pylist()
                for c in data.group_by("region").aggregate([("id", "count")]).select(["region", "id_count"]).columns
            ]
        )
    )


@pytest.mark.spark
def test_spark_sql_and_write_refused(spark, tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    write_delta(src, rows(120))
    out = it.sql(
        spark, f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' INDEXING MODES ('body':'text') AT LOCATION '{loc}'"
    )
    assert out.collect()[0]["rows_indexed"] == 120
    assert _spark_rows(spark, loc, "body:alpha") == tuples(has_word(rows(120), "alpha"))
    df = spark.createDataFrame(rows(3).select(COLUMNS))
    with pytest.raises(Exception, match="BUILD INDEXTABLES COMPANION"):
        df.write.format("indextables").mode("append").save(loc)
    # spark.sql after register: the same command text (a sync with nothing new)
    write_delta(src, rows(30, start=120))
    assert (
        spark.sql(f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' AT LOCATION '{loc}'").collect()[0]["rows_indexed"]
        == 30
    )
    data = rows(150)
    # _indexall, aggregations on indexed fast fields, counts
    got = spark.read.format("indextables").load(loc).filter("_indexall = 'body:alpha'").select(*COLUMNS)
    assert tuples([r.asDict() for r in got.collect()]) == tuples(has_word(data, "alpha"))
    agg = it.IndexTable(loc, spark=spark).aggregate(
        {"v": {"stats": {"field": "views"}}, "r": {"terms": {"field": "region"}}}, query="body:alpha", spark=spark
    )
    alpha = has_word(data, "alpha")
    assert agg["doc_count"] == alpha.num_rows and agg["v"]["sum"] == sum(alpha.column("views").to_pylist())
    assert {b["key"]: b["doc_count"] for b in agg["r"]["buckets"]} == {
        k: alpha.column("region").to_pylist().count(k) for k in set(alpha.column("region").to_pylist())
    }


@pytest.mark.spark
def test_spark_connect_reads_companion(connect_spark, tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    data = rows(200)
    write_delta(src, data)
    it.build_companion(src, loc, indexing=INDEXING, spark=connect_spark)
    assert _spark_rows(connect_spark, loc, "body:alpha") == tuples(has_word(data, "alpha"))


@pytest.mark.cloud
@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_cloud_source_and_index(cloud_backend, fmt):
    """A source on S3 (moto) / Azure (Azurite) and its companion index next to it, reached with
    our options only (mapped onto deltalake's storage options; Parquet through our storage)."""
    from indextables_spark.ops.companion.sources import storage_options_for_deltalake
    from indextables_spark.core.storage import open_storage

    src, loc, options = cloud_backend.uri + "/src", cloud_backend.uri + "/index", cloud_backend.options
    data = rows(300)
    if fmt == "delta":
        write_delta(src, data, storage_options=storage_options_for_deltalake(src, options))
    else:
        storage = open_storage(src, options)
        for day in sorted(set(data.column("day").to_pylist())):
            part = data.filter(pc.equal(data.column("day"), day)).drop_columns(["day"])
            sink = pa.BufferOutputStream()
            pq.write_table(part, sink, row_group_size=40)
            storage.put(f"day={day}/part-0.parquet", sink.getvalue().to_pybytes())
    # the Delta cases index in processes (the options, credentials included, reach them), the
    # Parquet cases in this process (they read their source files the same way)
    local = IN_PROCESS if fmt == "parquet" else {}
    res = it.build_companion(src, loc, format=fmt, indexing=INDEXING, options={**options, **local})
    assert res["rowsIndexed"] == 300
    forget_source_files()
    t = it.IndexTable(loc, options)
    assert tuples(t.search("body:alpha", columns=COLUMNS)) == tuples(has_word(data, "alpha"))
    assert tuples(t.to_arrow(columns=COLUMNS, where="views > 900")) == tuples(
        data.filter(pc.greater(data.column("views"), 900))
    )


def test_reads_fetch_only_the_needed_row_groups_and_columns(tmp_path, monkeypatch):
    """Rows come from the source files by ranged reads of the row groups and columns asked for."""
    from indextables_spark.core.split.cache import companion_rows
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.storage.counting import CountingStorage

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    data = rows(40000, days=1)
    write_parquet_dir(src, data, row_group_size=1000)
    it.build_companion(src, loc, format="parquet", indexing=INDEXING, options=IN_PROCESS)
    ranges: list[tuple[int, int]] = []

    class AsIfRemote(CountingStorage):  # counted, and read by ranges as from an object store
        def local_path(self, key):
            return None

        def read_range(self, key, start, end):
            ranges.append((start, end))
            return super().read_range(key, start, end)

    counting: dict[str, CountingStorage] = {}

    def storage_for(parent, options_key):
        return counting.setdefault(parent, AsIfRemote(open_storage(parent, dict(options_key))))

    monkeypatch.setattr(companion_rows, "_storage_for", storage_for)
    forget_source_files()
    got = it.IndexTable(loc).search("*", where="id = 1234", columns=["id", "views"])
    assert got.to_pylist() == [{"id": 1234, "views": (1234 * 37) % 1000}]
    fetched = sum(c.total_bytes_read for c in counting.values())
    source_bytes = sum(os.path.getsize(p) for p in _parquet_files(src))
    # one speculative tail read for the footer (pyarrow reads the last 64 KiB), then the id and views
    # column chunks of the one row group holding the row: 2.5% of the file
    tail, *data_reads = sorted(ranges, key=lambda r: -r[1])
    assert tail[1] == source_bytes and len(data_reads) == 1, ranges
    assert sum(e - s for s, e in data_reads) < 0.05 * source_bytes, (ranges, source_bytes)
    assert fetched < 0.2 * source_bytes


def test_delta_optimize_then_sync(tmp_path):
    from deltalake import DeltaTable

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    for i in range(3):
        write_delta(src, rows(50, start=50 * i))
    it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    DeltaTable(src).optimize.compact()  # small files rewritten into bigger ones
    res = it.build_companion(src, loc, indexing=INDEXING, options=IN_PROCESS)
    assert res["filesRemoved"] >= 2 and res["splitsRemoved"] >= 1
    assert index_rows(loc) == tuples(rows(150))
    assert {k for f in it.IndexTable(loc).snapshot().files for k in f.companion_source_files} == delta_keys(src)


@pytest.mark.cloud
def test_iceberg_on_azure(azure_container, azure_options, tmp_path):
    """An Iceberg table on Azure (Azurite) and its companion index next to it."""
    import uuid

    from pyiceberg.catalog.sql import SqlCatalog

    from indextables_spark.ops.companion.sources import fileio_properties_for_iceberg

    root = f"abfs://{azure_container}/companion-{uuid.uuid4().hex[:8]}"
    data = rows(300)
    catalog = SqlCatalog(
        "azc",
        uri=f"sqlite:///{tmp_path}/cat.db",
        warehouse=f"{root}/wh",
        **fileio_properties_for_iceberg(root, azure_options),
    )
    catalog.create_namespace("db")
    catalog.create_table("db.docs", schema=data.schema).append(data)
    options = {
        **azure_options,
        "iceberg.catalog.azc.uri": f"sqlite:///{tmp_path}/cat.db",
        "iceberg.catalog.azc.warehouse": f"{root}/wh",
    }
    loc = f"az://{azure_container}/companion-index-{uuid.uuid4().hex[:8]}"
    res = it.build_companion("db.docs", loc, format="iceberg", catalog="azc", indexing=INDEXING, options=options)
    assert res["rowsIndexed"] == 300
    forget_source_files()
    t = it.IndexTable(loc, azure_options)
    assert tuples(t.search("body:alpha", columns=COLUMNS)) == tuples(has_word(data, "alpha"))
