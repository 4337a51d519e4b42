"""Companion indexes over Delta tables with deletion vectors and column mapping (issue 48): rows the
source deleted are never returned (to_arrow, search, top-n, count, aggregate), vectors changed
later are taken up by sync without indexing the file again, a missing or damaged vector fails
naming its file; column-mapped tables read under their logical names and follow renames and
drops. Every table is checked row for row against an independent reading: the Parquet rows minus
the positions our decoder and deltalake's deletion_vectors() agree on."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import indextables_spark as it
from cmd_helpers import rows
from delta_dv_writer import DeltaWriter, bitmap_array
from indextables_spark.errors import CompanionSourceError, StorageError
from indextables_spark.ops.companion.sources import open_source
from indextables_spark.ops.companion.sources.deletion_vectors import decode_bitmap_array, deleted_positions

DATA = os.path.join(os.path.dirname(__file__), "data", "delta_rs")
COLUMNS = ["id", "body", "views", "region", "day"]
# builds index in this process (no Python process started per split group: the vectors are read
# the same either way); test_missing_or_damaged_vector_file_fails_naming_it keeps the process route
# (its error raised in an indexing process)
IN_PROCESS = {"spark.indextables.companion.parallelism": "1"}


def copy_table(name: str, tmp_path) -> str:
    dst = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), dst)
    return dst


def our_positions(src: str, version: int | None = None) -> dict[str, list[int]]:
    """{file key: deleted positions} by our decoder."""

    snap = open_source("delta", src, version=version)

    def read_range(path: str, start: int, length: int) -> bytes:
        full = path[len("file://") :] if path.startswith("file://") else os.path.join(src, path)
        with open(full, "rb") as f:
            f.seek(start)
            return f.read(length)

    return {
        f.key: deleted_positions(f.deletion_vector, read_range, f.key).tolist()
        for f in snap.files
        if f.deletion_vector is not None
    }


def deltalake_positions(src: str, version: int | None = None) -> dict[str, list[int]]:
    """{file key: deleted positions} by deltalake (a keep mask per file)."""
    from deltalake import DeltaTable

    got = pa.table(DeltaTable(src, version=version).deletion_vectors()).to_pylist()
    prefix = "file://" + os.path.abspath(src) + "/"
    return {
        r["filepath"][len(prefix) :]: np.flatnonzero(~np.array(r["selection_vector"])).tolist()
        for r in got
        if not all(r["selection_vector"])
    }


def expected_rows(src: str, version: int | None = None) -> pa.Table:
    """The source's live rows, independently: each Parquet file minus the positions both decoders
    agree on (partition columns from the deltalake file list)."""
    ours, theirs = our_positions(src, version), deltalake_positions(src, version)
    assert ours == theirs
    snap = open_source("delta", src, version=version)
    parts = []
    for f in snap.files:
        t = pq.read_table(f.uri)
        keep = np.ones(t.num_rows, dtype=bool)
        keep[ours.get(f.key, [])] = False
        t = t.filter(pa.array(keep))
        logical = {p: c for c, p in snap.physical_names.items()}  # column mapping: physical -> logical
        t = t.rename_columns([logical.get(c, c) for c in t.column_names])
        for c, v in f.partition_values.items():
            t = t.append_column(c, pa.array([v] * t.num_rows, pa.string()))
        parts.append(t)
    return pa.concat_tables(parts)


def deleted_in_log(src: str, upto: int) -> int:
    """The sum of the commits' numDeletedRows operation metrics up to `upto`."""
    total = 0
    for v in range(upto + 1):
        with open(f"{src}/_delta_log/{v:020d}.json") as f:
            for line in f:
                info = json.loads(line).get("commitInfo")
                if info:
                    total += int((info.get("operationMetrics") or {}).get("numDeletedRows", 0))
    return total


def sorted_rows(t: pa.Table, columns) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in t.select(columns).to_pylist())


def index_table(loc: str, columns) -> list[tuple]:
    return sorted_rows(it.IndexTable(loc).to_arrow(columns=columns), columns)


# -- the decoder --------------------------------------------------------------------------------------


@pytest.mark.parametrize("runs", [False, True])
def test_bitmap_array_round_trip(runs):
    positions = sorted({3, 4, 5, 6, 70000, 70001, *range(200000, 205000), (1 << 32) + 7, (3 << 32) + 1})
    assert decode_bitmap_array(bitmap_array(positions, runs), "test").tolist() == positions


# -- Delta tables written by Databricks (delta-rs's test data) ---------------------------------------------


@pytest.mark.parametrize("table,version", [("table-with-dv-small", None), ("table_with_deletion_logs", 3)])
def test_databricks_tables_with_deletion_vectors(table, version, tmp_path):
    src, loc = copy_table(table, tmp_path), str(tmp_path / "index")
    exp = expected_rows(src, version)
    snap = open_source("delta", src, version=version)
    physical = sum(f.num_records for f in snap.files)
    assert physical - exp.num_rows == deleted_in_log(src, snap.version) > 0
    res = it.build_companion(src, loc, format="delta", from_version=version, options=IN_PROCESS)
    assert res["status"] == "SUCCESS"
    cols = exp.column_names
    assert index_table(loc, cols) == sorted_rows(exp, cols)
    assert it.IndexTable(loc).count() == exp.num_rows


def test_sync_takes_up_changed_vectors_without_reindexing(tmp_path):
    """table_with_deletion_logs: a vector at version 3, replaced at version 4 (one more row), a
    checkpoint at version 20 (the same vector: nothing to do): no sync indexes anything."""
    src, loc = copy_table("table_with_deletion_logs", tmp_path), str(tmp_path / "index")
    cols = ["id", "name", "nbr"]
    it.build_companion(src, loc, format="delta", indexing={"name": "text"}, options=IN_PROCESS, from_version=3)
    t = it.IndexTable(loc)
    for version in (4, None):
        res = it.build_companion(
            src, loc, format="delta", indexing={"name": "text"}, options=IN_PROCESS, from_version=version
        )
        assert res["filesIndexed"] == 0 and res["splitsRemoved"] == 0
        assert res["status"] == ("SUCCESS" if version == 4 else "NO_ACTION")
        exp = expected_rows(src, version)
        assert index_table(loc, cols) == sorted_rows(exp, cols)
        assert t.count() == exp.num_rows == 98
    ids = {12, 89}  # the rows deleted at versions 3 and 4
    assert not ids & set(t.to_arrow(columns=["id"]).column("id").to_pylist())
    # the two vectors' positions were not counted twice: one entry each
    assert sum(d.num_entries for d in t.snapshot().delete_logs) == 2


def test_databricks_table_with_column_mapping(tmp_path):
    src, loc = copy_table("table_with_column_mapping", tmp_path), str(tmp_path / "index")
    res = it.build_companion(src, loc, format="delta", indexing={"Super Name": "text"}, options=IN_PROCESS)
    assert res["rowsIndexed"] == 5
    got = it.IndexTable(loc).to_arrow()
    assert sorted(got.column_names) == ["Company Very Short", "Super Name"]
    exp = expected_rows(src)
    assert index_table(loc, ["Company Very Short", "Super Name"]) == sorted_rows(
        exp, ["Company Very Short", "Super Name"]
    )
    assert it.IndexTable(loc).count("Super_Name:timothy") == 1


# -- tables of our own writer ---------------------------------------------------------------------------


def own_table(tmp_path, mapping: str = "none", v2_checkpoint: bool = False) -> DeltaWriter:
    w = DeltaWriter(str(tmp_path / "src"))
    data = rows(900)
    w.create(data.schema, partition_by=("day",), mapping=mapping, v2_checkpoint=v2_checkpoint)
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        part = data.filter(pc.equal(data.column("day"), day))
        w.add_file(part.slice(0, 200), row_group_size=64)
        w.add_file(part.slice(200), row_group_size=50)
    return w


def sync_indexes_nothing(w: DeltaWriter, loc: str) -> None:
    """A sync after vectors changed: no file indexed again, no split removed, the rows right."""
    res = it.build_companion(w.root, loc, format="delta", indexing={"body": "text"}, options=IN_PROCESS)
    assert (res["filesIndexed"], res["splitsRemoved"]) == (0, 0)
    check(w, loc)


def check(w: DeltaWriter, loc: str) -> pa.Table:
    exp = expected_rows(w.root)
    assert sorted_rows(exp, COLUMNS) == sorted_rows(w.live_rows(), COLUMNS)  # the writer's own account
    t = it.IndexTable(loc)
    assert index_table(loc, COLUMNS) == sorted_rows(exp, COLUMNS)
    assert t.count() == exp.num_rows
    alpha = exp.filter(pa.array(["alpha" in b.split() for b in exp.column("body").to_pylist()]))
    assert sorted_rows(t.search("body:alpha", columns=COLUMNS), COLUMNS) == sorted_rows(alpha, COLUMNS)
    assert t.count("body:alpha") == alpha.num_rows
    top = t.search("body:alpha", columns=["id"], limit=1000)
    assert sorted(top.column("id").to_pylist()) == sorted(alpha.column("id").to_pylist())
    agg = t.aggregate({"v": {"sum": {"field": "views"}}, "n": {"value_count": {"field": "id"}}})
    assert agg["v"]["value"] == sum(exp.column("views").to_pylist())
    assert agg["n"]["value"] == exp.num_rows
    return exp


def test_own_vectors_inline_file_backed_shared_and_changing(tmp_path):
    w = own_table(tmp_path)
    loc = str(tmp_path / "index")
    files = list(w.files)  # in the order written: 200 rows, 100 rows per day
    w.delete({files[0]: [0, 5, 63, 64, 199]}, storage="i")  # inline
    w.delete({files[1]: [1, 2, 3, 4, 99], files[2]: list(range(50, 120)), files[3]: [0]}, storage="u", prefix="ab")
    w.delete({files[4]: [7, 8]}, storage="p", runs=True)  # absolute path, run containers
    res = it.build_companion(w.root, loc, format="delta", indexing={"body": "text"}, options=IN_PROCESS)
    assert res["status"] == "SUCCESS"
    check(w, loc)
    # files[0]'s vector changes twice across versions; the sync in between and after indexes nothing
    w.delete({files[0]: [10, 11]}, storage="u")
    w.delete({files[0]: [12, 5]}, storage="i")  # 5 was deleted already
    sync_indexes_nothing(w, loc)
    w.delete({files[0]: [13], files[5]: [0, 1]}, storage="u")
    sync_indexes_nothing(w, loc)
    # a vector put back to an older one (RESTORE): rows come back, the split is indexed again
    descriptor = json.loads(open(f"{w.root}/_delta_log/{7:020d}.json").read().splitlines()[-1])["add"]["deletionVector"]
    w.restore_vector(files[0], descriptor, {0, 5, 63, 64, 199})
    res = it.build_companion(w.root, loc, format="delta", indexing={"body": "text"}, options=IN_PROCESS)
    assert res["splitsRemoved"] >= 1 and res["filesIndexed"] >= 1
    check(w, loc)


def test_vectors_from_a_v2_checkpoint_with_sidecars(tmp_path):
    """A V2 checkpoint (its add actions, vectors included, in a sidecar) and the commits before it
    cleaned up: the vectors are read from the checkpoint, then from the commits after it."""
    w = own_table(tmp_path, v2_checkpoint=True)
    loc = str(tmp_path / "index")
    files = list(w.files)
    w.delete({files[0]: [0, 5, 63]}, storage="i")
    w.delete({files[1]: [1, 2, 99], files[2]: list(range(50, 60))}, storage="u")
    checkpoint = w.checkpoint_v2()
    for v in range(w.version):  # log cleanup: only the checkpoint covers them
        os.remove(f"{w.root}/_delta_log/{v:020d}.json")
    w.delete({files[3]: [4]}, storage="u")
    res = it.build_companion(w.root, loc, format="delta", indexing={"body": "text"}, options=IN_PROCESS)
    assert res["status"] == "SUCCESS"
    check(w, loc)
    w.delete({files[0]: [7], files[5]: [0, 1]}, storage="u")
    sync_indexes_nothing(w, loc)
    # a sidecar that is gone fails the build naming it (deltalake, which lists the files, first)
    sidecar = json.loads(open(f"{w.root}/_delta_log/{checkpoint}").read().splitlines()[-1])["sidecar"]["path"]
    os.remove(f"{w.root}/_delta_log/_sidecars/{sidecar}")
    with pytest.raises((StorageError, CompanionSourceError), match=sidecar):
        it.build_companion(w.root, str(tmp_path / "other"), format="delta")


@pytest.mark.parametrize("damage", ["missing", "damaged"])
def test_missing_or_damaged_vector_file_fails_naming_it(damage, tmp_path):
    w = own_table(tmp_path)
    files = list(w.files)  # in the order written: 200 rows, 100 rows per day
    w.delete({files[1]: [1, 2, 3]}, storage="u")
    dv = [n for n in os.listdir(w.root) if n.startswith("deletion_vector_")][0]
    if damage == "missing":
        os.remove(os.path.join(w.root, dv))
    else:
        with open(os.path.join(w.root, dv), "r+b") as f:
            f.seek(10)
            byte = f.read(1)
            f.seek(10)
            f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CompanionSourceError, match=dv) as e:
        it.build_companion(w.root, str(tmp_path / "index"), format="delta")
    assert ("missing" if damage == "missing" else "checksum") in str(e.value)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_rename_and_drop_followed_by_sync(mode, tmp_path):
    w = own_table(tmp_path, mapping=mode)
    loc = str(tmp_path / "index")
    w.delete({list(w.files)[0]: [0, 1, 2]}, storage="u")
    it.build_companion(w.root, loc, format="delta", indexing={"body": "text"}, options=IN_PROCESS)
    check(w, loc)
    w.rename("body", "text")
    w.rename("region", "area")
    res = it.build_companion(w.root, loc, format="delta", indexing={"text": "text"}, options=IN_PROCESS)
    assert res["status"] == "SUCCESS" and res["splitsRemoved"] > 0
    t = it.IndexTable(loc)
    names = ["id", "text", "views", "area", "day"]
    assert sorted(t.to_arrow().column_names) == sorted(names)
    exp = w.live_rows()
    assert index_table(loc, names) == sorted_rows(exp, names)
    assert t.count("text:alpha") == sum("alpha" in b.split() for b in exp.column("text").to_pylist())
    w.drop("area")
    it.build_companion(w.root, loc, format="delta", indexing={"text": "text"}, options=IN_PROCESS)
    got = it.IndexTable(loc).to_arrow()
    assert "area" not in got.column_names and "region" not in got.column_names
    assert index_table(loc, ["id", "text", "views", "day"]) == sorted_rows(
        w.live_rows(), ["id", "text", "views", "day"]
    )


@pytest.mark.spark
def test_spark_reads_skip_deleted_rows(spark, tmp_path):
    """A Spark read and a Spark count of a companion over a table with deletion vectors."""
    w = own_table(tmp_path)
    loc = str(tmp_path / "index")
    files = list(w.files)
    w.delete({files[0]: [0, 1, 2, 150], files[3]: list(range(10, 40))}, storage="u")
    it.build_companion(w.root, loc, format="delta", indexing={"body": "text"}, options=IN_PROCESS)
    exp = expected_rows(w.root)
    df = spark.read.format("indextables").load(loc)
    got = sorted(tuple(r[c] for c in COLUMNS) for r in (x.asDict() for x in df.select(*COLUMNS).collect()))
    assert got == sorted_rows(exp, COLUMNS)
    assert df.count() == exp.num_rows
    alpha = sum("alpha" in b.split() for b in exp.column("body").to_pylist())
    assert spark.read.format("indextables").option("query", "body:alpha").load(loc).count() == alpha
