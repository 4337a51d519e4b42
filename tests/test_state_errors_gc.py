"""State errors, garbage collection (docs/reference/table-format.md, "Garbage collection"), time travel and
retention."""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import pytest

import indextables_spark as it
from indextables_spark.errors import ConcurrentModificationError, CorruptStateError, VersionNotFoundError
from indextables_spark.core.log.read.avro_state import read_state_manifest
from indextables_spark.core.log.maintenance.state_writer import write_state
from indextables_spark.core.log.model.paths import LAST_CHECKPOINT
from indextables_spark.core.log.commit.synthetic import commit_files, create_table, synthetic_add, synthetic_adds


def table(tmp_path, name="t", **opts):
    t = it.IndexTable(str(tmp_path / name), {"checkpoint.enabled": "false", **opts})
    create_table(t)
    return t


def logdir(t):
    return os.path.join(t.path, "_transaction_log")


def sm_of(t, v=None):
    listing = t.log.listing()
    v = max(listing.state_manifests) if v is None else v
    return read_state_manifest(t.storage, listing.state_manifests[v])


def manifest_file(t, i=0):
    return os.path.join(logdir(t), sm_of(t).manifests[i].path)


def drop_versions(t, upto):
    for v in range(0, upto + 1):
        p = os.path.join(logdir(t), f"{v:020d}.json")
        if os.path.exists(p):
            os.unlink(p)


def with_state(tmp_path, n=50):
    t = table(tmp_path)
    commit_files(t, synthetic_adds(0, n))
    commit_files(t, synthetic_adds(n, n))
    t.maintenance.checkpoint()
    return t


# ---- §11 error handling: fallback while version files cover the state, clear errors otherwise -------------


def test_missing_manifest_falls_back_to_version_files(tmp_path, caplog):
    t = with_state(tmp_path)
    os.unlink(manifest_file(t))
    with caplog.at_level(logging.WARNING):
        s = it.IndexTable(t.path).snapshot()
    assert s.num_files == 100 and s.source == "log"
    assert "is missing" in caplog.text and "replaying version files" in caplog.text


def test_missing_manifest_without_history_names_the_file(tmp_path):
    t = with_state(tmp_path)
    name = sm_of(t).manifests[0].path
    drop_versions(t, 1)
    os.unlink(os.path.join(logdir(t), name))
    with pytest.raises(CorruptStateError, match=name.split("/")[-1] + " is missing"):
        it.IndexTable(t.path).snapshot()


def test_missing_state_dir_named_by_last_checkpoint(tmp_path, caplog):
    t = with_state(tmp_path)
    sd = os.path.join(logdir(t), "state-v00000000000000000002")
    os.unlink(os.path.join(sd, "_manifest.avro"))
    with caplog.at_level(logging.WARNING):
        assert it.IndexTable(t.path).snapshot().num_files == 100
    assert "state-v00000000000000000002/_manifest.avro is missing" in caplog.text
    drop_versions(t, 2)
    with pytest.raises(CorruptStateError, match="state-v00000000000000000002/_manifest.avro is missing"):
        it.IndexTable(t.path).snapshot()


@pytest.mark.parametrize("damage", ["truncate", "corrupt_header", "garbage", "empty"])
def test_corrupt_state_manifest(tmp_path, damage):
    t = with_state(tmp_path)
    p = os.path.join(logdir(t), "state-v00000000000000000002", "_manifest.avro")
    data = open(p, "rb").read()
    bad = {
        "truncate": data[: len(data) - 20],
        "corrupt_header": b"Obj\x02" + data[4:],
        "garbage": b"\x00" * 50,
        "empty": b"",
    }[damage]
    open(p, "wb").write(bad)
    assert it.IndexTable(t.path).snapshot().num_files == 100  # falls back to the version files
    drop_versions(t, 2)
    with pytest.raises(CorruptStateError, match="state-v00000000000000000002/_manifest.avro"):
        it.IndexTable(t.path).snapshot()


@pytest.mark.parametrize(
    "bad", ["state-v00000000000000000002/manifest\x00/m.avro", "../../elsewhere.avro", "/abs.avro"]
)
def test_damaged_manifest_path_in_state_manifest_is_corruption(tmp_path, bad):
    """A state manifest whose manifest path was damaged (a bit flip can make a NUL or a `/`) is a
    corrupt state: the read falls back to the version files, or fails naming `_manifest.avro`."""
    from indextables_spark.core.log.state.state_manifest import encode_state_manifest

    t = with_state(tmp_path)
    p = os.path.join(logdir(t), "state-v00000000000000000002", "_manifest.avro")
    sm = sm_of(t)
    sm.manifests[0].path = bad
    open(p, "wb").write(encode_state_manifest(sm))
    assert it.IndexTable(t.path).snapshot().num_files == 100  # falls back to the version files
    drop_versions(t, 2)
    with pytest.raises(CorruptStateError, match="state-v00000000000000000002/_manifest.avro"):
        it.IndexTable(t.path).snapshot()


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_or_truncated_manifest_names_it(tmp_path, damage):
    t = with_state(tmp_path, n=2000)
    p = manifest_file(t)
    data = bytearray(open(p, "rb").read())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    open(p, "wb").write(bytes(data))
    drop_versions(t, 2)
    with pytest.raises(CorruptStateError, match=os.path.basename(p)):
        it.IndexTable(t.path).snapshot()


def test_corrupt_last_checkpoint(tmp_path, caplog):
    t = with_state(tmp_path)
    open(os.path.join(t.path, LAST_CHECKPOINT), "w").write("{not json")
    with caplog.at_level(logging.WARNING):
        s = it.IndexTable(t.path).snapshot()
    assert s.num_files == 100 and s.source == "avro-state"  # the state is found by listing
    assert "_last_checkpoint: not valid JSON" in caplog.text
    assert "corrupt" in it.IndexTable(t.path).inspect.state()["lastCheckpointStatus"]
    t.maintenance.checkpoint()  # rewrites the pointer
    assert json.load(open(os.path.join(t.path, LAST_CHECKPOINT)))["version"] == 2


def test_corrupt_json_checkpoint_names_it(tmp_path):
    t = table(tmp_path, **{"state.format": "json"})
    commit_files(t, synthetic_adds(0, 10))
    t.maintenance.checkpoint()
    p = os.path.join(logdir(t), f"{1:020d}.checkpoint.json")
    open(p, "wb").write(b"\x1f\x8b garbage")
    assert it.IndexTable(t.path).snapshot().num_files == 10
    drop_versions(t, 1)
    with pytest.raises(CorruptStateError, match="00000000000000000001.checkpoint.json"):
        it.IndexTable(t.path).snapshot()


def test_invalid_schema_version(tmp_path):
    from indextables_spark.core.log.state.state_manifest import decode_state_manifest, encode_state_manifest

    t = with_state(tmp_path)
    p = os.path.join(logdir(t), "state-v00000000000000000002", "_manifest.avro")
    sm = decode_state_manifest(open(p, "rb").read(), p)
    sm.format_version = 2
    open(p, "wb").write(encode_state_manifest(sm))
    drop_versions(t, 2)
    with pytest.raises(CorruptStateError, match="unsupported state formatVersion 2"):
        it.IndexTable(t.path).snapshot()


def test_partial_manifest_write_is_invisible_and_collected(tmp_path):
    """A crash after writing a manifest but before the state manifest: readers never see it;
    GC removes it once it is older than the age protection."""
    t = with_state(tmp_path)
    from indextables_spark.core.log.state.file_entries import add_files_to_table
    from indextables_spark.core.log.state.manifest_write import write_manifest

    key, _ = write_manifest(t.storage, add_files_to_table(synthetic_adds(900, 5)), ["date"])
    assert it.IndexTable(t.path).snapshot().num_files == 100
    assert t.maintenance.gc_state()["orphanedManifests"] == 1 and os.path.exists(os.path.join(t.path, key))
    old = time.time() - 2 * 3600
    os.utime(os.path.join(t.path, key), (old, old))
    r = t.maintenance.gc_state(dry_run=True)
    assert r["wouldDeleteManifests"] == 1 and r["deletedManifests"] == 0 and os.path.exists(os.path.join(t.path, key))
    r = t.maintenance.gc_state()
    assert r["deletedManifests"] == 1 and not os.path.exists(os.path.join(t.path, key))
    assert it.IndexTable(t.path).snapshot().num_files == 100


def test_concurrent_state_update(tmp_path):
    t = table(tmp_path)
    commit_files(t, synthetic_adds(0, 30))
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(30, 30), remove=[synthetic_add(3).path])
    results, errors = [], []

    def run():
        try:
            results.append(write_state(it.IndexTable(t.path).log, 2))
        except Exception as e:  # asserted below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert sum(1 for r in results if not r.already_existed) == 1
    assert it.IndexTable(t.path).snapshot().num_files == 59
    referenced = {m.path.split("/")[-1] for m in sm_of(t).manifests}
    assert set(os.listdir(os.path.join(logdir(t), "manifests"))) == referenced


def test_commit_state_unknown_is_resolved_by_rereading(tmp_path, monkeypatch):
    """The state manifest write reports failure although it landed (unknown outcome): the writer
    re-reads the state manifest, recognises its own manifests and keeps them."""
    t = table(tmp_path)
    commit_files(t, synthetic_adds(0, 10))
    real = t.storage.put_if_absent

    def landed_but_reported_lost(key, data):
        ok = real(key, data)
        return False if key.endswith("_manifest.avro") else ok

    monkeypatch.setattr(t.storage, "put_if_absent", landed_but_reported_lost)
    r = write_state(t.log, 1)
    assert r.version == 1 and r.attempts == 1 and r.manifests_written == 1
    monkeypatch.undo()
    assert it.IndexTable(t.path).snapshot().source == "avro-state"


def test_state_write_gives_up_after_max_attempts(tmp_path, monkeypatch):
    t = table(tmp_path, **{"state.retry.maxAttempts": "2", "state.retry.baseDelayMs": "1"})
    commit_files(t, synthetic_adds(0, 10))
    real = t.storage.put_if_absent
    monkeypatch.setattr(
        t.storage, "put_if_absent", lambda key, data: False if key.endswith("_manifest.avro") else real(key, data)
    )
    monkeypatch.setattr(
        "indextables_spark.core.log.maintenance.state_writer.newest_state_at_or_below", lambda listing, v: None
    )
    with pytest.raises(ConcurrentModificationError, match="state.retry.maxAttempts"):
        write_state(t.log, 1)


def test_storage_error_propagates_from_state_read(tmp_path, monkeypatch):
    from indextables_spark.errors import StorageError

    t = with_state(tmp_path)
    fresh = it.IndexTable(t.path)
    real = fresh.storage.read

    def flaky(key):
        if key.endswith(".avro"):
            raise StorageError(f"transient failure reading {key}")
        return real(key)

    monkeypatch.setattr(fresh.storage, "read", flaky)
    with pytest.raises(StorageError, match="transient failure"):
        fresh.snapshot()  # not mistaken for corruption: no silent fallback on I/O errors


# ---- time travel ------------------------------------------------------------------------------------------


def test_time_travel_by_version_and_timestamp_across_states(tmp_path):
    t = it.IndexTable(str(tmp_path / "tt"), {"checkpoint.interval": "2"})
    create_table(t)
    stamps = {}
    for k in range(1, 6):
        commit_files(t, synthetic_adds(k * 10, 10), remove=[synthetic_add((k - 1) * 10).path] if k > 1 else [])
        stamps[k] = t.snapshot(k).timestamp
        time.sleep(0.005)
    for v in range(1, 6):
        assert t.snapshot(v).num_files == 10 + 9 * (v - 1)
        assert t.snapshot(timestamp_ms=stamps[v]).version == v


def test_time_travel_past_retention_is_a_clear_error(tmp_path):
    t = table(tmp_path)
    for k in range(4):
        commit_files(t, synthetic_adds(k * 5, 5))
    t.maintenance.checkpoint()
    drop_versions(t, 2)
    assert t.snapshot(4).num_files == 20  # the state covers it
    with pytest.raises(
        VersionNotFoundError, match="version 2 .*can no longer be reconstructed.*oldest retained version file is 3"
    ):
        t.snapshot(2)


def test_truncate_time_travel(tmp_path):
    t = table(tmp_path)
    for k in range(5):
        commit_files(t, synthetic_adds(k * 5, 5))
        t.maintenance.checkpoint()
    dry = t.maintenance.truncate_time_travel(dry_run=True)
    assert dry["versionFilesRemoved"] == 5 and dry["dryRun"] and len(t.log.list_versions()) == 6
    r = t.maintenance.truncate_time_travel()
    assert r["versionFilesRemoved"] == 5 and r["stateDirsRemoved"] == 4
    assert t.log.list_versions() == [5]
    assert sorted(t.log.listing().state_manifests) == [5]
    fresh = it.IndexTable(t.path)
    assert fresh.snapshot().num_files == 25 and fresh.version() == 5
    with pytest.raises(VersionNotFoundError):
        fresh.snapshot(3)
    assert commit_files(fresh, synthetic_adds(100, 1)) == 6


# ---- §13 garbage collection -------------------------------------------------------------------------------


def aged_states(tmp_path, count=6, **opts):
    t = table(tmp_path, **opts)
    for k in range(count):
        commit_files(t, synthetic_adds(k * 3, 3), remove=[synthetic_add((k - 1) * 3).path] if k else [])
        t.maintenance.checkpoint()
    return t


def age(t, version, hours):
    d = os.path.join(logdir(t), f"state-v{version:020d}")
    old = time.time() - hours * 3600
    for f in os.listdir(d):
        os.utime(os.path.join(d, f), (old, old))


def test_cleanup_old_state_dirs_by_count_and_age(tmp_path):
    t = aged_states(tmp_path)
    assert t.maintenance.gc_state()["stateDirsRemoved"] == 0  # all young (retention 168 h)
    for v in range(1, 7):
        age(t, v, 200)
    r = t.maintenance.gc_state(dry_run=True)
    assert r["stateVersionsRemoved"] == [1, 2, 3] and sorted(t.log.listing().state_manifests) == list(range(1, 7))
    r = t.maintenance.gc_state()
    # current (6) protected, then the 2 newest old ones (5, 4) kept
    assert r["stateVersionsRemoved"] == [1, 2, 3]
    assert sorted(t.log.listing().state_manifests) == [4, 5, 6]
    assert it.IndexTable(t.path).snapshot().num_files == 13


def test_retention_by_age(tmp_path):
    t = aged_states(tmp_path, **{"state.retention.versions": "0", "state.retention.hours": "10"})
    age(t, 1, 20)
    age(t, 2, 5)
    r = t.maintenance.gc_state()
    assert r["stateVersionsRemoved"] == [1]


def test_cleanup_preserves_current_state(tmp_path):
    t = aged_states(tmp_path, 3, **{"state.retention.versions": "0", "state.retention.hours": "0"})
    for v in (1, 2, 3):
        age(t, v, 1000)
    t.maintenance.gc_state()
    assert sorted(t.log.listing().state_manifests) == [3]
    assert it.IndexTable(t.path).snapshot().num_files == 7


def test_cleanup_orphaned_manifests_after_state_removal(tmp_path):
    t = aged_states(
        tmp_path,
        3,
        **{"state.retention.versions": "0", "state.retention.hours": "0", "state.gc.minManifestAgeHours": "0"},
    )
    t.maintenance.compact()  # the current state no longer references the earlier manifests
    for v in (1, 2):
        age(t, v, 10)
    r = t.maintenance.gc_state()
    assert r["stateDirsRemoved"] == 2 and r["deletedManifests"] >= 1
    left = os.listdir(os.path.join(logdir(t), "manifests"))
    assert {m.path.split("/")[-1] for m in sm_of(t).manifests} == set(left)
    assert it.IndexTable(t.path).snapshot().num_files == 7


def test_gc_keeps_legacy_manifests_referenced_from_newer_states(tmp_path):
    """A legacy manifest inside an old state directory, still referenced (normalized path) by a
    newer state, survives the removal of its directory's state manifest."""
    t = aged_states(tmp_path, 1, **{"state.retention.versions": "0", "state.retention.hours": "0"})
    from indextables_spark.core.log.state.state_manifest import encode_state_manifest

    sm = sm_of(t, 1)
    shared = os.path.join(logdir(t), sm.manifests[0].path)
    legacy_name = "manifest-legacy.avro"
    os.rename(shared, os.path.join(logdir(t), "state-v00000000000000000001", legacy_name))
    sm.manifests[0].path = legacy_name  # legacy form: relative to its state directory
    open(os.path.join(logdir(t), "state-v00000000000000000001", "_manifest.avro"), "wb").write(
        encode_state_manifest(sm)
    )
    assert it.IndexTable(t.path).snapshot().num_files == 3
    commit_files(t, synthetic_adds(50, 2))
    t.maintenance.checkpoint()
    assert sm_of(t).manifests[0].path == "state-v00000000000000000001/" + legacy_name
    age(t, 1, 10)
    t.maintenance.gc_state()
    assert os.path.exists(os.path.join(logdir(t), "state-v00000000000000000001", legacy_name))
    assert it.IndexTable(t.path).snapshot().num_files == 5


def test_concurrent_cleanup(tmp_path):
    t = aged_states(tmp_path, 5, **{"state.retention.versions": "1", "state.gc.minManifestAgeHours": "0"})
    for v in range(1, 6):
        age(t, v, 500)
    errors = []

    def run():
        try:
            it.IndexTable(t.path, dict(t.options)).maintenance.gc_state()
        except Exception as e:  # asserted below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert sorted(t.log.listing().state_manifests) == [4, 5]
    assert it.IndexTable(t.path).snapshot().num_files == 11
