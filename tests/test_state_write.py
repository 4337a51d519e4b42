"""The state manifest, incremental writes and compaction (docs/reference/table-format.md, "Avro state")."""

from __future__ import annotations

import json
import os

import fastavro
import pyarrow.compute as pc
import pytest

import indextables_spark as it
from indextables_spark.core.log.read.avro_state import read_state_files, read_state_manifest
from indextables_spark.core.log.state.state_compaction import needs_compaction
from indextables_spark.core.log.maintenance.state_writer import write_state
from indextables_spark.core.log.model.paths import LAST_CHECKPOINT
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.state.state_manifest import (
    ManifestInfo,
    StateManifest,
    decode_state_manifest,
    encode_state_manifest,
    state_manifest_key,
)
from indextables_spark.core.log.commit.synthetic import commit_files, create_table, synthetic_add, synthetic_adds


def new_table(tmp_path, name="t", partition_columns=("date",), **opts):
    o = {"checkpoint.enabled": "false", **{k.replace("_", "."): v for k, v in opts.items()}}
    t = it.IndexTable(str(tmp_path / name), o)
    create_table(t, partition_columns)
    return t


def state(t, version=None):
    listing = t.log.listing()
    v = max(listing.state_manifests) if version is None else version
    return read_state_manifest(t.storage, listing.state_manifests[v])


def live_paths(t, version=None):
    return sorted(t.snapshot(version).files_table.column("path").to_pylist())


def replay_paths(t, version=None):
    log = t.log
    v = log.latest_version() if version is None else version
    return sorted(log._files(None, log.collect_changes(None, v)).column("path").to_pylist())


# ---- §3 state manifest -------------------------------------------------------------------------------------


def test_write_and_read_state_manifest(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 30))
    r = t.maintenance.checkpoint()
    key = state_manifest_key(r["version"])
    assert os.path.exists(os.path.join(t.path, key))
    with open(os.path.join(t.path, key), "rb") as f:
        reader = fastavro.reader(f)
        assert reader.writer_schema["name"] == "io.indextables.state.StateManifest"
        rec = list(reader)[0]
    names = [f["name"] for f in reader.writer_schema["fields"]]
    assert (
        names[:11]
        == [
            "formatVersion",
            "stateVersion",
            "createdAt",
            "numFiles",
            "totalBytes",
            "manifests",
            "tombstones",
            "schemaRegistry",
            "protocolVersion",
            "metadata",
            "protocol",
        ][:11]
    )
    assert rec["formatVersion"] == 1 and rec["stateVersion"] == 1 and rec["numFiles"] == 30
    assert rec["manifests"][0]["path"].startswith("manifests/manifest-")
    assert json.loads(rec["metadata"])["metaData"]["partitionColumns"] == ["date"]
    sm = state(t)
    assert sm.num_files == 30 and sm.protocol_version == 4


def test_state_manifest_json_form_is_readable(tmp_path):
    sm = StateManifest(
        7,
        1,
        2,
        30,
        [ManifestInfo("manifests/manifest-a.avro", 2, 1, 7, {"date": ("a", "b")})],
        ["x.split"],
        {"ref": "[]"},
        4,
        None,
    )
    rec = sm.to_record()
    back = decode_state_manifest(json.dumps(rec).encode(), "s/_manifest.json")
    assert back == sm
    assert decode_state_manifest(encode_state_manifest(sm, "snappy"), "s/_manifest.avro") == sm
    assert decode_state_manifest(encode_state_manifest(sm, "none"), "s/_manifest.avro") == sm


def test_state_manifest_with_tombstones_and_apply(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 100))
    t.maintenance.checkpoint()
    removed = [synthetic_add(i).path for i in range(0, 100, 10)]
    commit_files(t, [], remove=removed)
    t.maintenance.checkpoint()
    sm = state(t)
    assert sorted(sm.tombstones) == sorted(removed) and sm.num_files == 90
    files = read_state_files(t.log, sm)
    assert files.num_rows == 90 and not set(removed) & set(files.column("path").to_pylist())


def test_empty_tombstones(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 5))
    t.maintenance.checkpoint()
    assert state(t).tombstones == [] and t.snapshot().num_files == 5


def test_state_manifest_with_schema_registry(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 5))
    t.maintenance.checkpoint()
    sm = state(t)
    assert "c2NoZW1hLXJlZi0x" in sm.schema_registry
    assert t.snapshot().doc_mapping("c2NoZW1hLXJlZi0x") == sm.schema_registry["c2NoZW1hLXJlZi0x"]


def test_state_manifest_version_bounds_num_files_total_bytes(tmp_path):
    t = new_table(tmp_path)
    v1 = commit_files(t, synthetic_adds(0, 10))
    v2 = commit_files(t, synthetic_adds(10, 10))
    t.maintenance.checkpoint()
    v3 = commit_files(t, synthetic_adds(20, 10), remove=[synthetic_add(0).path])
    t.maintenance.checkpoint()
    sm = state(t)
    assert [(m.min_added_at_version, m.max_added_at_version) for m in sm.manifests] == [(v1, v2), (v3, v3)]
    snap = t.snapshot()
    assert sm.num_files == snap.num_files == 29
    assert sm.total_bytes == snap.total_bytes


def test_large_tombstone_list(tmp_path):
    t = new_table(tmp_path, **{"state_compaction_tombstoneThreshold": "0.9"})
    commit_files(t, synthetic_adds(0, 12_000, num_partitions=50))
    t.maintenance.checkpoint()
    removed = [synthetic_add(i, num_partitions=50).path for i in range(10_000)]
    commit_files(t, [], remove=removed)
    r = t.maintenance.checkpoint()
    assert r["compacted"] is False and r["numTombstones"] == 10_000
    assert t.snapshot().num_files == 2_000
    assert live_paths(t) == replay_paths(t)


# ---- §4 incremental writes ---------------------------------------------------------------------------------


def test_incremental_add_files_reuses_manifests(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 1000))
    t.maintenance.checkpoint()
    before = state(t)
    first = os.path.join(t.path, "_transaction_log", before.manifests[0].path)
    mtime = os.stat(first).st_mtime_ns
    commit_files(t, synthetic_adds(1000, 10))
    r = t.maintenance.checkpoint()
    after = state(t)
    assert r["compacted"] is False and r["manifestsWritten"] == 1 and r["entriesWritten"] == 10
    assert after.manifests[0].path == before.manifests[0].path  # referenced, not rewritten
    assert os.stat(first).st_mtime_ns == mtime
    assert after.manifests[1].num_entries == 10
    assert live_paths(t) == replay_paths(t)


def test_incremental_remove_files_adds_tombstones_only(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 200))
    t.maintenance.checkpoint()
    commit_files(t, [], remove=[synthetic_add(5).path, synthetic_add(6).path])
    r = t.maintenance.checkpoint()
    assert r["manifestsWritten"] == 0 and r["numTombstones"] == 2 and r["numFiles"] == 198
    assert live_paths(t) == replay_paths(t)


def test_incremental_mixed_add_remove(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 100))
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(100, 5), remove=[synthetic_add(1).path])
    r = t.maintenance.checkpoint()
    assert (r["manifestsWritten"], r["entriesWritten"], r["numTombstones"], r["numFiles"]) == (1, 5, 1, 104)
    assert live_paths(t) == replay_paths(t)


def test_bytes_written_do_not_depend_on_table_size(tmp_path):
    sizes = {}
    for n in (500, 5000):
        t = new_table(tmp_path, name=f"t{n}")
        commit_files(t, synthetic_adds(0, n))
        t.maintenance.checkpoint()
        commit_files(t, synthetic_adds(10_000_000, 20))
        sizes[n] = t.maintenance.checkpoint()["bytesWritten"]
    assert abs(sizes[500] - sizes[5000]) < 300, sizes


def test_manifest_reuse_with_partial_overlap(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 50))
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(50, 50))
    t.maintenance.checkpoint()
    s2 = state(t)
    commit_files(t, synthetic_adds(100, 50))
    t.maintenance.checkpoint()
    s3 = state(t)
    assert [m.path for m in s3.manifests[:2]] == [m.path for m in s2.manifests]
    assert s3.manifests[2].path not in {m.path for m in s2.manifests}


def test_state_version_increment_and_chain_of_writes(tmp_path):
    t = new_table(tmp_path)
    versions = []
    for k in range(12):
        commit_files(t, synthetic_adds(k * 10, 10), remove=[synthetic_add((k - 1) * 10).path] if k else [])
        versions.append(t.maintenance.checkpoint()["version"])
    assert versions == list(range(1, 13))
    listing = t.log.listing()
    assert sorted(listing.state_manifests) == list(range(1, 13))
    assert live_paths(t) == replay_paths(t)
    for v in (3, 7, 12):
        assert live_paths(t, v) == replay_paths(t, v)


def test_automatic_checkpoint_every_interval(tmp_path):
    t = it.IndexTable(str(tmp_path / "auto"), {"checkpoint.interval": "3"})
    create_table(t)
    for k in range(7):
        commit_files(t, synthetic_adds(k * 5, 5))
    assert sorted(t.log.listing().state_manifests) == [3, 6]
    lc = json.loads(open(os.path.join(t.path, LAST_CHECKPOINT)).read())
    assert lc["format"] == "avro-state" and lc["stateDir"] == "state-v00000000000000000006" and lc["version"] == 6
    assert lc["numFiles"] == 30 and {"size", "sizeInBytes", "createdTime"} <= set(lc)
    assert t.snapshot().num_files == 35 and t.snapshot().source == "avro-state"


def test_automatic_checkpoint_disabled(tmp_path):
    t = it.IndexTable(str(tmp_path / "off"), {"checkpoint.interval": "2", "checkpoint.enabled": "false"})
    create_table(t)
    for k in range(4):
        commit_files(t, synthetic_adds(k, 1))
    assert t.log.listing().state_manifests == {}


def test_failed_automatic_checkpoint_does_not_fail_commit(tmp_path, caplog):
    t = it.IndexTable(str(tmp_path / "bad"), {"checkpoint.interval": "2", "state.compression": "zstd"})
    create_table(t)
    commit_files(t, synthetic_adds(0, 1))
    broken = it.IndexTable(t.path, {"checkpoint.interval": "2", "state.entriesPerManifest": "0"})
    with caplog.at_level("WARNING"):
        v = commit_files(broken, synthetic_adds(1, 1))
    assert v == 2 and "automatic checkpoint" in caplog.text and "entriesPerManifest" in caplog.text
    assert t.snapshot().num_files == 2


def test_state_write_retry_rereads_base(tmp_path, monkeypatch):
    """A concurrent writer creates the state first: we drop our manifest, re-read, and find it."""
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 20))
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(20, 5))
    storage = t.storage
    real = storage.put_if_absent
    calls = {"n": 0}

    def racing(key, data):
        if key.endswith("_manifest.avro") and calls["n"] == 0:
            calls["n"] += 1
            other = it.IndexTable(t.path, {"checkpoint.enabled": "false"})
            other.storage.put_if_absent = real
            assert write_state(other.log, 2).version == 2  # the other writer wins
        return real(key, data)

    monkeypatch.setattr(storage, "put_if_absent", racing)
    r = write_state(t.log, 2)
    assert r.already_existed and r.attempts == 2
    manifests = os.listdir(os.path.join(t.path, "_transaction_log", "manifests"))
    referenced = {m.path.split("/")[-1] for m in state(t).manifests}
    assert set(manifests) == referenced  # our losing manifest was deleted


# ---- §5 compaction ---------------------------------------------------------------------------------------


def test_compaction_trigger_by_tombstone_ratio(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 100))
    t.maintenance.checkpoint()
    commit_files(t, [], remove=[synthetic_add(i).path for i in range(5)])
    assert t.maintenance.checkpoint()["compacted"] is False  # 5%
    commit_files(t, [], remove=[synthetic_add(i).path for i in range(5, 12)])
    r = t.maintenance.checkpoint()  # 12/95 > 10%
    assert r["compacted"] is True and "tombstone ratio" in r["reason"] and r["numTombstones"] == 0
    assert live_paths(t) == replay_paths(t)


def test_compaction_trigger_by_manifest_count(tmp_path):
    t = new_table(tmp_path, **{"state_compaction_maxManifests": "4"})
    commit_files(t, synthetic_adds(0, 10))
    t.maintenance.checkpoint()
    reasons = []
    for k in range(1, 6):
        commit_files(t, synthetic_adds(k * 10, 10))
        reasons.append(t.maintenance.checkpoint()["reason"])
    assert reasons[:3] == ["incremental"] * 3 and "manifests > 4" in reasons[4]
    assert len(state(t).manifests) <= 2


def test_compaction_trigger_after_merge_like_removes(tmp_path):
    t = new_table(
        tmp_path, **{"state_compaction_largeRemoveThreshold": "10", "state_compaction_tombstoneThreshold": "0.9"}
    )
    commit_files(t, synthetic_adds(0, 200))
    t.maintenance.checkpoint()
    merged = [synthetic_add(i).path for i in range(20)]
    commit_files(t, synthetic_adds(1000, 1), remove=merged, operation="MERGE SPLITS")
    r = t.maintenance.checkpoint()
    assert r["compacted"] is True and "removes > 10" in r["reason"]


def test_needs_compaction_policy():
    cfg = StateConfig()
    sm = StateManifest(1, 0, 100, 0, [ManifestInfo("m", 100, 0, 0)] * 3, [])
    assert needs_compaction(sm, 0, cfg) == (False, "")
    assert needs_compaction(sm, 11, cfg)[0] and needs_compaction(sm, 0, cfg, force=True) == (True, "forced")
    assert needs_compaction(StateManifest(1, 0, 0, 0), 0, cfg) == (True, "empty state")
    sm.manifests = [ManifestInfo("m", 5, 0, 0)] * 21
    assert "manifests > 20" in needs_compaction(sm, 0, cfg)[1]


def test_compaction_produces_clean_state_preserving_all_files(tmp_path):
    t = new_table(tmp_path)
    for k in range(6):
        commit_files(t, synthetic_adds(k * 50, 50, num_partitions=7), remove=[synthetic_add(k).path] if k else [])
        t.maintenance.checkpoint()
    before = live_paths(t)
    r = t.maintenance.compact()
    assert r["compacted"] is True and r["numTombstones"] == 0
    sm = state(t)
    assert sm.tombstones == [] and sm.num_files == len(before)
    assert live_paths(t) == before == replay_paths(t)
    full = t.snapshot().files_table
    assert pc.sum(full.column("size")).as_py() == sm.total_bytes


def test_compaction_splits_large_manifests_and_merges_small_ones(tmp_path):
    t = new_table(tmp_path, **{"state_entriesPerManifest": "100"})
    for k in range(5):
        commit_files(t, synthetic_adds(k * 70, 70))
        t.maintenance.checkpoint()
    assert len(state(t).manifests) == 5
    t.maintenance.compact()
    sm = state(t)
    assert [m.num_entries for m in sm.manifests] == [100, 100, 100, 50]


def test_compaction_sorts_by_partition_and_computes_bounds(tmp_path):
    t = new_table(tmp_path, partition_columns=("date", "region"), **{"state_entriesPerManifest": "30"})
    commit_files(t, synthetic_adds(0, 120, partition_columns=("date", "region"), num_partitions=6))
    t.maintenance.compact()
    sm = state(t)
    files = read_state_files(t.log, sm)
    keys = [f"{dict(pv)['date']}|{dict(pv)['region']}" for pv in files.column("partitionValues").to_pylist()]
    assert keys == sorted(keys)  # partition locality
    for m in sm.manifests:
        assert set(m.partition_bounds) == {"date", "region"}
        assert m.partition_bounds["date"][0] <= m.partition_bounds["date"][1]
    bounds = [m.partition_bounds["date"] for m in sm.manifests]
    assert all(bounds[i][1] <= bounds[i + 1][0] for i in range(len(bounds) - 1))


def test_compaction_skips_clean_state(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 40))
    assert t.maintenance.compact()["status"] == "SUCCESS"
    r = t.maintenance.compact()
    assert r["status"] == "SKIPPED" and r["bytesWritten"] == 0


def test_concurrent_compaction(tmp_path):
    import threading

    t = new_table(tmp_path)
    for k in range(4):
        commit_files(t, synthetic_adds(k * 100, 100), remove=[synthetic_add(k).path])
        t.maintenance.checkpoint()
    expected = live_paths(t)
    errors = []

    def run():
        try:
            it.IndexTable(t.path, {"checkpoint.enabled": "false"}).maintenance.compact()
        except Exception as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert live_paths(t) == expected and state(t).tombstones == []


def test_compaction_on_table_without_state(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 25))
    r = t.maintenance.compact()
    assert r["compacted"] and r["numFiles"] == 25 and t.snapshot().source == "avro-state"


@pytest.mark.slow
def test_compaction_performance_70k(tmp_path):
    import time

    t = new_table(tmp_path, **{"checkpoint_enabled": "true"})
    for k in range(7):
        commit_files(t, synthetic_adds(k * 10_000, 10_000, num_partitions=100))
    t.maintenance.checkpoint()
    t0 = time.perf_counter()
    res = write_state(t.log, t.version(), force_compaction=True, overwrite=True)
    elapsed = time.perf_counter() - t0
    assert res.num_files == 70_000 and res.num_manifests == 2
    assert elapsed < 2.0, f"compaction of 70K files took {elapsed:.2f} s (target: < 2 s)"


def test_readd_without_remove_replaces_the_entry(tmp_path):
    """An add for a live path (Delta 'replace' semantics) in an incremental state: the reader keeps
    the newer entry only, matching a replay of the version files."""
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 40))
    t.maintenance.compact()
    again = synthetic_add(7)
    again.size = 123
    commit_files(t, [again])
    r = t.maintenance.checkpoint()
    assert r["compacted"] is False and state(t).distinct_prefix_manifests == 1
    snap = it.IndexTable(t.path).snapshot()
    assert snap.num_files == 40 and live_paths(t) == replay_paths(t)
    assert {f.path: f.size for f in snap.files}[again.path] == 123


def test_remove_then_readd_compacts(tmp_path):
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 100))
    t.maintenance.checkpoint()
    commit_files(t, [], remove=[synthetic_add(3).path])
    t.maintenance.checkpoint()
    commit_files(t, [synthetic_add(3)])
    r = t.maintenance.checkpoint()
    assert r["compacted"] is True and "added again" in r["reason"]
    assert live_paths(t) == replay_paths(t) and len(live_paths(t)) == 100


def test_state_written_as_manifest_json_is_read(tmp_path):
    """A state manifest may be `_manifest.json` (same fields, JSON-encoded: docs/reference/table-format.md,
    "State manifest")."""
    t = new_table(tmp_path)
    commit_files(t, synthetic_adds(0, 12))
    t.maintenance.checkpoint()
    sdir = os.path.join(t.path, "_transaction_log", "state-v00000000000000000001")
    rec = state(t).to_record()
    os.unlink(os.path.join(sdir, "_manifest.avro"))
    with open(os.path.join(sdir, "_manifest.json"), "w") as f:
        json.dump(rec, f)
    for v in (0, 1):
        os.unlink(os.path.join(t.path, "_transaction_log", f"{v:020d}.json"))
    s = it.IndexTable(t.path).snapshot()
    assert s.source == "avro-state" and s.num_files == 12


@pytest.mark.slow
def test_streaming_performance_70k(tmp_path):
    import time

    t = new_table(tmp_path, **{"checkpoint_enabled": "true"})
    for k in range(7):
        commit_files(t, synthetic_adds(k * 10_000, 10_000, num_partitions=100))
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(100_000, 50))
    t.maintenance.checkpoint()
    t0 = time.perf_counter()
    cs = it.IndexTable(t.path).changes_since(7)
    elapsed = time.perf_counter() - t0
    assert len(cs.adds) == 50 and cs.stats.manifests_read == 1 and cs.stats.manifests_total > 1
    assert elapsed < 1.0, f"changes_since on 70K files took {elapsed:.2f} s"


def test_compaction_after_merge_splits(tmp_path):
    t = it.IndexTable(str(tmp_path / "m"), {"checkpoint.interval": "100"})
    create_table(t)
    commit_files(t, synthetic_adds(0, 20))
    commit_files(t, [synthetic_add(999)], remove=[synthetic_add(i).path for i in range(5)], operation="MERGE SPLITS")
    sm = state(t)
    assert sm.state_version == 2 and sm.tombstones == [] and sm.num_files == 16
    off = it.IndexTable(str(tmp_path / "m"), {"checkpoint.interval": "100", "state.compaction.afterMerge": "false"})
    commit_files(off, [synthetic_add(998)], remove=[synthetic_add(5).path], operation="MERGE SPLITS")
    assert state(off).state_version == 2
