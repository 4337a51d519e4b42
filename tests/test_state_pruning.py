"""Partition pruning (docs/reference/table-format.md, "Partition bounds") and the partition filter
parser/evaluator."""

from __future__ import annotations

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.state.file_entries import add_files_to_table
from indextables_spark.core.log.state.manifest import read_manifest
from indextables_spark.core.log.state.manifest_write import compute_partition_bounds, write_manifest
from indextables_spark.expr.model import (
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThanOrEqual,
    Not,
    Or,
)
from indextables_spark.expr.partition_filter import (
    PartitionFilterError,
    filter_files_table,
    parse_partition_filter,
    prune_manifests,
)
from indextables_spark.core.log.state.state_manifest import ManifestInfo
from indextables_spark.core.log.commit.synthetic import (
    commit_files,
    create_table,
    partition_value,
    synthetic_add,
    synthetic_adds,
)
from indextables_spark.core.storage import LocalStorage

COLS = {"date": "string", "region": "string", "year": "integer"}


def P(text, cols=COLS):
    return parse_partition_filter(text, cols)


def files_with(values: list[dict]) -> pa.Table:
    return add_files_to_table([AddFile(f"f{i}", pv, 1, 1) for i, pv in enumerate(values)])


def info(bounds) -> ManifestInfo:
    return ManifestInfo("manifests/m.avro", 10, 0, 0, bounds)


# ---- parser -----------------------------------------------------------------------------------------------


def test_parse_shapes():
    # the parser builds the filter model (expr/model.py)
    assert P("date = '2024-01-01'").expr == EqualTo("date", "2024-01-01")
    assert P("date = '2024-01-01' AND region IN ('a','b')").expr == And(
        EqualTo("date", "2024-01-01"), In("region", ("a", "b"))
    )
    e = P("date >= '2024-01-01' OR NOT (year = 1)").expr
    assert e == Or(GreaterThanOrEqual("date", "2024-01-01"), Not(EqualTo("year", 1)))
    assert P("region IS NULL").expr == IsNull("region")
    assert P("region is not null").expr == IsNotNull("region")
    assert P("'2024' < date").expr == GreaterThan("date", "2024")
    assert P("year NOT IN (1, 2)").expr == Not(In("year", (1, 2)))
    assert P("year BETWEEN 2020 AND 2022").expr == And(GreaterThanOrEqual("year", 2020), LessThanOrEqual("year", 2022))
    assert P("year NOT BETWEEN 1 AND 2").expr == Not(And(GreaterThanOrEqual("year", 1), LessThanOrEqual("year", 2)))
    assert P("`Date` <> 'x'").expr == Not(EqualTo("date", "x"))  # case-insensitive names
    assert P("region = 'it''s'").expr == EqualTo("region", "it's")
    assert P("a = 1 OR b = 2 AND c = 3", {"a": "int", "b": "int", "c": "int"}).expr == Or(
        EqualTo("a", 1), And(EqualTo("b", 2), EqualTo("c", 3))
    )


@pytest.mark.parametrize(
    "text,msg",
    [
        ("date = ", "expected a literal value.*end of input"),
        ("date = '2024", "unterminated string starting at position 7"),
        ("(date = 'a'", "expected '\\)'.*end of input"),
        ("date ~ 'a'", "unexpected character '~' at position 5"),
        ("date = 'a' region = 'b'", "unexpected 'region' at position 11"),
        ("", "empty filter"),
        ("date = NULL", "IS NULL"),
    ],
)
def test_parse_errors_name_the_position(text, msg):
    with pytest.raises(PartitionFilterError, match=msg):
        P(text)


def test_unknown_column_is_named():
    with pytest.raises(PartitionFilterError, match="column 'body' at position 0 is not a partition column.*date"):
        P("body = 'x'")


# ---- exact filtering ----------------------------------------------------------------------------------------


def test_filter_files_table_exact_and_three_valued():
    t = files_with(
        [
            {"date": "2024-01-01", "region": "a", "year": "9"},
            {"date": "2024-01-02", "region": "b", "year": "10"},
            {"date": "2024-01-03", "year": "11"},
            {"date": "2024-01-04", "region": "c", "year": "100"},
        ]
    )

    def paths(text):
        return filter_files_table(t, P(text)).column("path").to_pylist()

    assert paths("date = '2024-01-02'") == ["f1"]
    assert paths("date >= '2024-01-02' AND region IN ('b','c')") == ["f1", "f3"]
    assert paths("region IS NULL") == ["f2"]
    assert paths("NOT (region = 'a')") == ["f1", "f3"]  # null region: unknown, not selected
    assert paths("year > 9") == ["f1", "f2", "f3"]  # numeric, not lexicographic
    assert paths("year < 100 AND year >= 10") == ["f1", "f2"]
    assert paths("year = '10'") == ["f1"]
    assert paths("region = 'a' OR year = 11") == ["f0", "f2"]


# ---- §6 manifest pruning -----------------------------------------------------------------------------------


def test_partition_bounds_computation_with_nulls_and_multiple_columns(tmp_path):
    t = files_with(
        [{"date": "2024-01-05", "region": "eu"}, {"date": "2024-01-01"}, {"date": "2024-01-03", "region": "ap"}]
    )
    assert compute_partition_bounds(t, ["date", "region", "year"]) == {
        "date": ("2024-01-01", "2024-01-05"),
        "region": ("ap", "eu"),
        "year": (None, None),
    }


def test_prune_by_equality_range_in_and_or():
    m1 = info({"date": ("2024-01-01", "2024-01-10"), "region": ("a", "c")})
    m2 = info({"date": ("2024-01-11", "2024-01-20"), "region": ("d", "f")})
    ms = [m1, m2]

    def kept(text):
        return [ms.index(m) for m in prune_manifests(ms, P(text))]

    assert kept("date = '2024-01-15'") == [1]
    assert kept("date = '2024-02-01'") == []
    assert kept("date > '2024-01-10'") == [1]
    assert kept("date < '2024-01-11'") == [0]
    assert kept("date <= '2024-01-11'") == [0, 1]
    assert kept("date >= '2024-01-21'") == []
    assert kept("region IN ('b', 'z')") == [0]
    assert kept("region IN ('x', 'z')") == []
    assert kept("date = '2024-01-05' AND region = 'e'") == []
    assert kept("date = '2024-01-05' OR region = 'e'") == [0, 1]
    assert kept("NOT (date < '2024-01-11')") == [1]  # NOT pushed down: date >= ...
    assert kept("NOT (date = '2024-01-05' OR region = 'a')") == [0, 1]


def test_no_pruning_without_bounds_or_for_unknown_columns_or_null_bounds():
    no_bounds = info(None)
    nulls = info({"date": (None, None)})
    other = info({"region": ("a", "b")})
    pred = P("date = '2099-01-01'")
    assert prune_manifests([no_bounds, nulls, other], pred) == [no_bounds, nulls, other]
    assert prune_manifests([info({"region": ("a", "b")})], P("region IS NULL")) != []
    assert prune_manifests([info({"region": ("a", "b")})], P("region IS NOT NULL")) != []


def test_numeric_columns_prune_only_on_equality():
    m = info({"year": ("10", "9")})  # lexicographic bounds of {9, 10}
    assert prune_manifests([m], P("year = 9")) == [m]
    assert prune_manifests([m], P("year = 10")) == [m]
    assert prune_manifests([m], P("year > 50")) == [m]  # ranges never pruned on numeric columns
    assert prune_manifests([info({"year": ("2020", "2021")})], P("year = 2019")) == []


def test_not_in_prunes_single_valued_manifests():
    assert prune_manifests([info({"region": ("a", "a")})], P("region NOT IN ('a')")) == []
    assert len(prune_manifests([info({"region": ("a", "b")})], P("region NOT IN ('a')"))) == 1


def _table(tmp_path, n, parts, epm, name="t"):
    t = it.IndexTable(str(tmp_path / name), {"checkpoint.enabled": "false", "state.entriesPerManifest": str(epm)})
    create_table(t)
    commit_files(t, synthetic_adds(0, n, num_partitions=parts))
    t.maintenance.compact()
    return t


def test_partition_pruning_effectiveness(tmp_path):
    t = _table(tmp_path, 6000, 10, 1200)  # 5 manifests of 2 partitions (600 files) each
    target = partition_value(7, 10)
    snap, stats = t.log.scan(f"date = '{target}'")
    assert stats.manifests_total == 5 and stats.manifests_read == 1
    assert snap.num_files == 600
    assert sorted(f.path for f in t.files(f"date = '{target}'")) == sorted(
        f.path for f in synthetic_adds(0, 6000, num_partitions=10) if f.partition_values["date"] == target
    )
    # the block index inside the manifest: only that partition's blocks were decoded
    assert stats.entries_decoded == 600 and stats.blocks_skipped_entries == 600


def test_partition_locality_sorting_and_incremental_bounds(tmp_path):
    t = _table(tmp_path, 300, 30, 100)
    sm_bounds = [m.partition_bounds["date"] for m in t.log.listing() and _state(t).manifests]
    assert all(a[1] <= b[0] for a, b in zip(sm_bounds, sm_bounds[1:]))
    commit_files(t, [synthetic_add(10_000, num_partitions=30)])
    t.maintenance.checkpoint()
    new = _state(t).manifests[-1]
    d = synthetic_add(10_000, num_partitions=30).partition_values["date"]
    assert new.partition_bounds == {"date": (d, d)} and new.num_entries == 1


def _state(t):
    from indextables_spark.core.log.read.avro_state import read_state_manifest

    listing = t.log.listing()
    return read_state_manifest(t.storage, listing.state_manifests[max(listing.state_manifests)])


def test_mixed_bounds_and_no_bounds(tmp_path):
    storage = LocalStorage(str(tmp_path))
    a = write_manifest(storage, files_with([{"date": "2024-01-01"}]), ["date"])[1]
    b = write_manifest(storage, files_with([{"date": "2024-01-09"}]), [])[1]  # written without bounds
    assert b.partition_bounds is None
    assert prune_manifests([a, b], P("date = '2024-01-09'")) == [b]


def test_partition_pruning_with_tombstones(tmp_path):
    t = _table(tmp_path, 400, 20, 100)
    target = partition_value(3, 20)
    victims = [f.path for f in synthetic_adds(0, 400, num_partitions=20) if f.partition_values["date"] == target][:5]
    commit_files(t, [], remove=victims)
    t.maintenance.checkpoint()
    assert _state(t).tombstones == victims
    got = {f.path for f in t.files(f"date = '{target}'")}
    assert len(got) == 15 and not got & set(victims)


def test_scan_applies_version_files_after_the_state(tmp_path):
    t = _table(tmp_path, 100, 10, 50)
    target = partition_value(1, 10)
    commit_files(t, [synthetic_add(5001, num_partitions=10)], remove=[synthetic_add(1, num_partitions=10).path])
    paths = {f.path for f in t.files(f"date = '{target}'")}
    assert (
        synthetic_add(5001, num_partitions=10).path in paths and synthetic_add(1, num_partitions=10).path not in paths
    )
    assert len(paths) == 10


def test_block_index_is_ignored_by_other_readers_and_exact(tmp_path):
    import fastavro

    t = _table(tmp_path, 3000, 6, 50_000)
    sm = _state(t)
    key = "_transaction_log/" + sm.manifests[0].path
    with open(t.storage.local_path(key), "rb") as f:
        assert sum(1 for _ in fastavro.reader(f)) == 3000
    pred = P(f"date = '{partition_value(2, 6)}'")
    part = read_manifest(t.storage, key, 3000, pred)
    assert 500 <= part.num_rows < 3000
    assert filter_files_table(part, pred).num_rows == 500


@pytest.mark.slow
def test_partition_pruning_performance_1m(tmp_path):
    """1M files / 1000 partitions, compacted at the default entriesPerManifest (20 manifests):
    one partition decodes one manifest's matching blocks only."""
    import time

    from indextables_spark.core.log.maintenance.state_writer import write_state
    from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA

    t = it.IndexTable(str(tmp_path / "big"), {"checkpoint.enabled": "false"})
    create_table(t)
    # build the 1M-file state directly from an Arrow table (no 1M-line version files)
    import pyarrow.compute as pc
    import numpy as np

    n = 1_000_000
    idx = np.arange(n)
    dates = np.array([partition_value(i, 1000) for i in range(1000)], dtype=object)[idx % 1000]
    pv = pa.array([[("date", d)] for d in dates.tolist()], FILE_ENTRY_SCHEMA.field("partitionValues").type)
    paths = pc.binary_join_element_wise(
        pa.array(["date="] * n), pa.array(dates.tolist()), pa.array([f"/splits/{i:09d}.split" for i in range(n)]), ""
    )
    cols = {f.name: pa.nulls(n, f.type) for f in FILE_ENTRY_SCHEMA}
    cols.update(
        path=paths,
        partitionValues=pv,
        size=pa.array(idx + 1000),
        modificationTime=pa.array(idx),
        dataChange=pa.array(np.ones(n, bool)),
        hasFooterOffsets=pa.array(np.zeros(n, bool)),
        addedAtVersion=pa.array(np.ones(n, np.int64)),
        addedAtTimestamp=pa.array(idx),
    )
    files = pa.table(cols, schema=FILE_ENTRY_SCHEMA)
    from indextables_spark.core.log.maintenance import state_writer

    snap0 = t.snapshot()

    class _Snap:
        files_table = files
        metadata_action = snap0.metadata_action
        protocol_action = snap0.protocol_action
        schema_registry = snap0.schema_registry
        skips = {}
        delete_logs = []
        stats_files = snap0.stats_files

    orig = t.log.snapshot
    t.log.snapshot = lambda version=None: _Snap()
    try:
        state_writer.write_state(t.log, 0, force_compaction=True, overwrite=True)
    finally:
        t.log.snapshot = orig
    assert len(_state(t).manifests) == 20
    target = partition_value(437, 1000)
    fresh = it.IndexTable(t.path)
    fresh.log.scan(f"date = '{target}'")  # warm-up (imports, DataFusion context)
    t0 = time.perf_counter()
    snap, stats = it.IndexTable(t.path).log.scan(f"date = '{target}'")
    elapsed = time.perf_counter() - t0
    assert snap.num_files == 1000 and stats.manifests_read == 1 and stats.manifests_total == 20
    assert elapsed < 0.5, f"one partition of 1M files took {elapsed * 1000:.0f} ms"
    del write_state


def test_map_values_equals_map_lookup():
    """partition_values.map_values = pc.map_lookup(..., "first"): absent keys, NULL maps, empty maps,
    repeated keys, NULL values, sliced and chunked arrays."""
    import random

    import pyarrow as pa
    import pyarrow.compute as pc

    from indextables_spark.expr.partition_values import map_values

    rng = random.Random(5)
    typ = pa.map_(pa.string(), pa.string())
    rows = []
    for _ in range(500):
        if rng.random() < 0.1:
            rows.append(None)
            continue
        rows.append([(rng.choice(["a", "b", "c"]), rng.choice(["x", "y", None, ""])) for _ in range(rng.randint(0, 3))])
    arr = pa.array(rows, typ)
    chunked = pa.chunked_array([arr.slice(0, 100), arr.slice(100, 250), arr.slice(350)])
    for data in (arr, arr.slice(33, 300), chunked, arr.slice(0, 0)):
        for key in ("a", "b", "zz"):
            want = pc.map_lookup(data, pa.scalar(key, pa.string()), "first")
            want = want.combine_chunks() if isinstance(want, pa.ChunkedArray) else want
            assert map_values(data, key).to_pylist() == want.to_pylist(), key
