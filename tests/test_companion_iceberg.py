"""Companion indexes over Iceberg tables with delete files (position, equality), partitions by
transform and renamed columns: every read returns exactly the rows pyiceberg's own scan returns,
after each delete, rename and sync; pruning by transform partitions keeps every matching row."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import indextables_spark as it
from iceberg_helpers import (
    append_files,
    commit_deletes,
    data_file,
    equality_delete_file,
    position_delete_file,
)
from indextables_spark.errors import CompanionSourceError

pytest.importorskip("pyiceberg")

COLUMNS = ["id", "body", "grp", "n", "ts"]
GROUPS = ["g0", "g1", "g2", None]
T0 = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)


def _catalog(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "wh"
    wh.mkdir(exist_ok=True)
    uri = f"sqlite:///{tmp_path}/cat.db"
    cat = SqlCatalog("c", uri=uri, warehouse=f"file://{wh}")
    cat.create_namespace_if_not_exists("db")
    return cat, {"iceberg.catalog.c.uri": uri, "iceberg.catalog.c.warehouse": f"file://{wh}"}


def _schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType, TimestamptzType

    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "body", StringType(), required=False),
        NestedField(3, "grp", StringType(), required=False),
        NestedField(4, "n", IntegerType(), required=False),
        NestedField(5, "ts", TimestamptzType(), required=False),
    )


def _rows(ids, ts_of=lambda i: T0 + dt.timedelta(hours=5 * i)) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": [f"w{i % 7} doc{i}" for i in ids],
            "grp": [GROUPS[i % 4] for i in ids],
            "n": pa.array([i % 10 for i in ids], pa.int32()),
            "ts": pa.array([ts_of(i) for i in ids], pa.timestamp("us", tz="UTC")),
        }
    )


def _one_file_table(cat, ids, row_group_size=None):
    """db.t holding one data file of `ids`, appended: (the table as reloaded, the file)."""
    table = cat.create_table("db.t", schema=_schema())
    a = data_file(table, _rows(ids), row_group_size=row_group_size)
    append_files(table, [a])
    return cat.load_table("db.t"), a


def _build(loc, options, **kw):
    opts = {**options, "companion.parallelism": "1"}  # in this process: small tables, quick tests
    return it.build_companion("db.t", loc, format="iceberg", catalog="c", options=opts, indexing={"body": "text"}, **kw)


def _tuples(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in table.select(COLUMNS).to_pylist())


def _check_reads(loc: str, expected: pa.Table) -> None:
    """Every read route returns exactly `expected` (the source's live rows)."""
    t = it.IndexTable(loc)
    assert _tuples(t.to_arrow(columns=COLUMNS)) == _tuples(expected)
    assert t.count() == expected.num_rows
    w3 = expected.filter(pc.starts_with(expected.column("body"), "w3 "))
    assert _tuples(t.search("body:w3", columns=COLUMNS)) == _tuples(w3)
    assert t.count("body:w3") == w3.num_rows
    top = t.search("body:w3", limit=5, columns=["id"]).column("id").to_pylist()
    assert len(top) == min(5, w3.num_rows) and set(top) <= set(w3.column("id").to_pylist())
    agg = t.aggregate({"s": {"stats": {"field": "n"}}})["s"]
    assert agg["count"] == expected.num_rows and agg["sum"] == pc.sum(expected.column("n")).as_py()
    assert _tuples(t.to_arrow(where="n = 3", columns=COLUMNS)) == _tuples(expected.filter(pc.equal(expected["n"], 3)))


def _splits(loc):
    return it.IndexTable(loc).files()


def test_position_and_equality_deletes_build_and_sync(tmp_path):
    cat, options = _catalog(tmp_path)
    table = cat.create_table("db.t", schema=_schema())
    a, b = data_file(table, _rows(range(100)), row_group_size=30), data_file(table, _rows(range(100, 150)))
    append_files(table, [a, b])
    table = cat.load_table("db.t")
    deletes = [(a.file_path, 0), (a.file_path, 31), (a.file_path, 99), (b.file_path, 7)]
    commit_deletes(table, [position_delete_file(table, deletes)])
    table = cat.load_table("db.t")
    expected = table.scan().to_arrow()
    assert expected.num_rows == 146  # pyiceberg's scan applies the position deletes
    loc = str(tmp_path / "index")
    res = _build(loc, options)
    assert res.files_indexed == 2
    _check_reads(loc, expected)

    # equality deletes (NULL matches NULL) apply to the files written before them only
    commit_deletes(table, [equality_delete_file(table, ["grp"], pa.table({"grp": pa.array(["g1", None])}))])
    table = cat.load_table("db.t")
    c = data_file(table, _rows(range(150, 170)))
    append_files(table, [c])
    table = cat.load_table("db.t")
    commit_deletes(table, [equality_delete_file(table, ["id", "n"], pa.table({"id": [4, 160, 161], "n": [4, 0, 9]}))])
    table = cat.load_table("db.t")
    kept = expected.filter(pc.invert(pc.or_(pc.equal(expected["grp"], "g1"), pc.is_null(expected["grp"]))))
    expected = pa.concat_tables([kept, _rows(range(150, 170)).cast(kept.schema)])
    expected = expected.filter(pc.invert(pc.is_in(expected["id"], pa.array([4, 160]))))  # (161, 9) matches no row
    res = _build(loc, options)
    assert (res.files_indexed, res.splits_removed) == (1, 0)  # the old splits get delete logs, no re-indexing
    _check_reads(loc, expected)

    # a later position delete is taken up by the next sync, without indexing anything
    commit_deletes(table, [position_delete_file(table, [(c.file_path, 2)])])
    res = _build(loc, options)
    assert (res.files_indexed, res.splits_removed, res.splits_added) == (0, 0, 0)
    _check_reads(loc, expected.filter(pc.not_equal(expected["id"], 152)))
    assert _build(loc, options).status == "NO_ACTION"


def test_rollback_of_deletes_reindexes_the_split(tmp_path):
    cat, options = _catalog(tmp_path)
    table, a = _one_file_table(cat, range(40))
    before = table.current_snapshot().snapshot_id
    commit_deletes(table, [position_delete_file(table, [(a.file_path, 3)])])
    loc = str(tmp_path / "index")
    _build(loc, options)
    _check_reads(loc, cat.load_table("db.t").scan().to_arrow())
    table = cat.load_table("db.t")
    table.manage_snapshots().rollback_to_snapshot(before).commit()
    res = _build(loc, options)
    assert res.splits_removed == 1 and res.files_indexed == 1
    _check_reads(loc, _rows(range(40)))


def test_missing_delete_file_fails_naming_it(tmp_path):
    cat, options = _catalog(tmp_path)
    table, a = _one_file_table(cat, range(20))
    d = position_delete_file(table, [(a.file_path, 1)])
    commit_deletes(table, [d])
    os.remove(d.file_path.removeprefix("file://"))
    with pytest.raises(CompanionSourceError) as e:
        _build(str(tmp_path / "index"), options)
    assert os.path.basename(d.file_path) in str(e.value) and "position delete file" in str(e.value)


def _transform_table(cat):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import BucketTransform, DayTransform, TruncateTransform

    spec = PartitionSpec(
        PartitionField(5, 1000, DayTransform(), "ts_day"),
        PartitionField(1, 1001, BucketTransform(2), "id_bucket"),
        PartitionField(3, 1002, TruncateTransform(1), "grp_trunc"),
    )
    return cat.create_table("db.t", schema=_schema(), partition_spec=spec)


def _partitioned_files(table, ids):
    """Data files of `ids`, one per (day, bucket, truncated group), with Iceberg's own transforms."""
    from pyiceberg.transforms import BucketTransform, DayTransform, TruncateTransform
    from pyiceberg.types import LongType, StringType, TimestamptzType

    day = DayTransform().transform(TimestamptzType())
    bucket = BucketTransform(2).transform(LongType())
    trunc = TruncateTransform(1).transform(StringType())
    rows = _rows(ids, ts_of=lambda i: T0 + dt.timedelta(days=i % 3, hours=i % 5)).to_pylist()
    parts: dict[tuple, list[dict]] = {}
    for r in rows:
        micros = int((r["ts"] - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) / dt.timedelta(microseconds=1))
        parts.setdefault((day(micros), bucket(r["id"]), trunc(r["grp"])), []).append(r)
    schema = _rows([0]).schema
    return [data_file(table, pa.Table.from_pylist(rs, schema=schema), key) for key, rs in parts.items()]


def test_transform_partitions_prune_exactly(tmp_path):
    from pyiceberg.expressions import EqualTo, GreaterThanOrEqual, In

    cat, options = _catalog(tmp_path)
    table = _transform_table(cat)
    files = _partitioned_files(table, range(60))
    append_files(table, files)
    table = cat.load_table("db.t")
    loc = str(tmp_path / "index")
    _build(loc, options)
    assert len(_splits(loc)) == len(files)  # one split per partition tuple
    t = it.IndexTable(loc)
    cases = [
        ("ts >= '2024-06-03 00:00:00'", GreaterThanOrEqual("ts", "2024-06-03T00:00:00+00:00")),
        ("id = 5", EqualTo("id", 5)),
        ("id IN (7, 33)", In("id", {7, 33})),
        ("grp = 'g2'", EqualTo("grp", "g2")),
    ]
    everything = t.to_arrow(columns=COLUMNS)
    for where, expr in cases:
        want = table.scan(row_filter=expr).to_arrow()
        assert want.num_rows > 0
        assert _tuples(t.to_arrow(where=where, columns=COLUMNS)) == _tuples(want), where
        plain = it.IndexTable(loc, {"spark.indextables.read.bloomfilter.enabled": "false"})
        assert _tuples(plain.to_arrow(where=where, columns=COLUMNS)) == _tuples(want), where
        ex = t.explain(where=where)
        assert ex.splits_after_bloom_filters < ex.splits_total, (where, ex)
    assert everything.num_rows == 60


def test_renamed_columns_followed_by_field_id(tmp_path):
    cat, options = _catalog(tmp_path)
    table, _ = _one_file_table(cat, range(30))
    loc = str(tmp_path / "index")
    _build(loc, options)
    with table.update_schema() as u:
        u.rename_column("grp", "team")
    table = cat.load_table("db.t")
    append_files(table, [data_file(table, _rows(range(30, 40)).rename_columns(["id", "body", "team", "n", "ts"]))])
    table = cat.load_table("db.t")
    res = _build(loc, options)
    assert res.splits_removed == 1 and res.files_indexed == 2  # the old split named the column "grp"
    want = table.scan().to_arrow()
    cols = ["id", "body", "team", "n", "ts"]
    got = it.IndexTable(loc).to_arrow(columns=cols)
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == sorted(
        want.select(cols).to_pylist(), key=lambda r: r["id"]
    )
    assert it.IndexTable(loc).count() == 40
    g2 = it.IndexTable(loc).to_arrow(where="team = 'g2'", columns=["id"]).column("id").to_pylist()
    assert sorted(g2) == [i for i in range(40) if i % 4 == 2]
    # a fresh build over files written before the rename reads them by field id too
    loc2 = str(tmp_path / "index2")
    _build(loc2, options)
    got2 = it.IndexTable(loc2).to_arrow(columns=cols)
    assert sorted(got2.to_pylist(), key=lambda r: r["id"]) == sorted(
        want.select(cols).to_pylist(), key=lambda r: r["id"]
    )


@pytest.mark.spark
def test_spark_read_skips_deleted_rows(spark, tmp_path):
    cat, options = _catalog(tmp_path)
    table, a = _one_file_table(cat, range(80), row_group_size=25)
    commit_deletes(table, [position_delete_file(table, [(a.file_path, p) for p in (0, 26, 50, 79)])])
    table = cat.load_table("db.t")
    commit_deletes(table, [equality_delete_file(table, ["grp"], pa.table({"grp": pa.array(["g1"])}))])
    loc = str(tmp_path / "index")
    _build(loc, options)
    want = sorted(r["id"] for r in _rows(range(80)).to_pylist() if r["id"] not in (0, 26, 50, 79) and r["grp"] != "g1")
    df = spark.read.format("indextables").load(loc)
    assert sorted(r[0] for r in df.select("id").collect()) == want
    assert df.filter("n >= 5").count() == sum(1 for i in want if i % 10 >= 5)
    q = spark.read.format("indextables").option("query", "body:w3").load(loc)
    assert sorted(r[0] for r in q.select("id").collect()) == [i for i in want if i % 7 == 3]
