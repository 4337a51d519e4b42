"""The transaction log and the state layer on every backend (local disk, S3 emulator, Azure emulator).

A broad cross-section of the local-filesystem suites (test_commit_concurrency, test_state_*), run
through the `storage_backend` fixture: every file operation goes through the backend's Storage
(damage is done with storage.put / storage.delete instead of os calls).
"""

from __future__ import annotations

import gzip
import json
import logging
import time

import pytest
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from test_state_write import live_paths, replay_paths, state

import indextables_spark as it
from indextables_spark.errors import CorruptStateError, VersionNotFoundError
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.maintenance.gc import gc_state
from indextables_spark.core.log.model.paths import LAST_CHECKPOINT, LOG_DIR, version_key
from indextables_spark.core.log.commit.synthetic import (
    commit_files,
    create_table,
    partition_value,
    synthetic_add,
    synthetic_adds,
)

HOUR_MS = 3600 * 1000


def new_table(target, name="t", **opts) -> it.IndexTable:
    t = it.IndexTable(target.child(name).uri, {**target.options, "checkpoint.enabled": "false", **opts})
    create_table(t)
    return t


def fresh(t: it.IndexTable) -> it.IndexTable:
    """The same table through a new IndexTable, its log listed now: the tests damage the log
    through the storage, which no commit records, so a read within read.stalenessLimit would
    still reuse the listing (and snapshot) taken before."""
    return it.IndexTable(t.path, t.options).refresh()


def test_log_commits_time_travel_history_and_changes(storage_backend):
    t = new_table(storage_backend)
    assert t.version() == 0
    v1 = commit_files(t, synthetic_adds(0, 10))
    v2 = commit_files(t, synthetic_adds(10, 5), remove=[synthetic_add(0).path, synthetic_add(1).path])
    time.sleep(0.01)
    v3 = commit_files(t, [], remove=[synthetic_add(10).path])
    assert (v1, v2, v3) == (1, 2, 3)

    # version files: 20-digit names, GZIP NDJSON with commitInfo + adds/removes, read raw from the store
    keys = [f.key for f in t.storage.list(LOG_DIR + "/")]
    assert keys == [version_key(v) for v in range(4)]
    raw = t.storage.read(version_key(2))
    assert raw[:4] == b"\x01\x01\x1f\x8b"  # framed as the reference writes it (core/log/model/codec.py)
    kinds = [next(iter(json.loads(line))) for line in gzip.decompress(raw[2:]).decode().splitlines()]
    assert kinds.count("add") == 5 and kinds.count("remove") == 2 and "commitInfo" in kinds

    # snapshots and time travel by version and by timestamp, through a fresh reader
    r = fresh(t)
    assert r.version() == 3
    assert live_paths(r) == sorted(f.path for f in synthetic_adds(2, 13) if f.path != synthetic_add(10).path)
    assert [r.snapshot(v).num_files for v in range(4)] == [0, 10, 13, 12]
    ts2 = r.snapshot(2).timestamp
    assert r.snapshot(timestamp_ms=ts2).version == 2
    with pytest.raises(VersionNotFoundError, match="version 9"):
        r.snapshot(version=9)
    hist = r.inspect.history()
    assert [h["version"] for h in hist] == [3, 2, 1, 0]
    assert (hist[1]["numAddedFiles"], hist[1]["numRemovedFiles"]) == (5, 2)

    # change feed
    ch = r.changes_since(1)
    assert sorted(a.path for a in ch.adds) == sorted(f.path for f in synthetic_adds(11, 4))
    assert sorted(x.path for x in ch.removes) == sorted(synthetic_add(i).path for i in (0, 1, 10))
    assert ch.version == 3 and r.changes_since(3).is_empty

    # conflicts: the fail resolver refuses a concurrent commit, merge rebases blind appends,
    # and a remove of a file another commit removed is a conflict naming the file
    stale = r.transaction(resolver="fail").add_files([synthetic_add(100)])
    rebased = r.transaction(resolver="merge").add_files([synthetic_add(101)])
    both_remove = [r.transaction(resolver="merge").remove_files([synthetic_add(2).path]) for _ in range(2)]
    assert commit_files(t, [synthetic_add(102)]) == 4
    with pytest.raises(it.ConcurrentModificationError, match="version 4"):
        stale.commit()
    assert rebased.commit() == 5
    assert both_remove[0].commit() == 6
    with pytest.raises(it.ConcurrentModificationError, match=synthetic_add(2).path):
        both_remove[1].commit()
    assert fresh(t).version() == 6 and t.storage.list(LOG_DIR + "/")[-1].key == version_key(6)

    # a missing table: version -1, and an error naming its URI
    missing = it.IndexTable(storage_backend.child("nothing-here").uri, storage_backend.options)
    assert missing.version() == -1
    with pytest.raises(it.TableNotFoundError, match="nothing-here"):
        missing.snapshot()


def test_avro_state_checkpoints_incremental_compaction_and_pruning(storage_backend):
    t = new_table(storage_backend, **{"state.entriesPerManifest": "100"})
    commit_files(t, synthetic_adds(0, 300, num_partitions=6))
    r1 = t.maintenance.checkpoint()
    assert r1["version"] == 1 and r1["numFiles"] == 300
    keys = {f.key for f in t.storage.list(LOG_DIR + "/")}
    assert f"{LOG_DIR}/state-v{1:020d}/_manifest.avro" in keys and LAST_CHECKPOINT in keys
    assert json.loads(t.storage.read(LAST_CHECKPOINT))["version"] == 1
    s1 = state(t)
    assert s1.num_files == 300 and all(m.path.startswith("manifests/manifest-") for m in s1.manifests)

    # incremental: new manifest for the adds, tombstones for the removes, old manifests referenced
    removed = [synthetic_add(i, num_partitions=6).path for i in range(0, 30, 3)]
    commit_files(t, synthetic_adds(300, 12, num_partitions=6), remove=removed)
    r2 = t.maintenance.checkpoint()
    s2 = state(t)
    assert (r2["version"], r2["compacted"], r2["manifestsWritten"], r2["entriesWritten"]) == (2, False, 1, 12)
    assert [m.path for m in s2.manifests[: len(s1.manifests)]] == [m.path for m in s1.manifests]
    assert sorted(s2.tombstones) == sorted(removed) and s2.num_files == 302
    assert live_paths(fresh(t)) == replay_paths(t)
    assert fresh(t).snapshot().source == "avro-state"

    # a commit after the state: state + version file
    commit_files(t, synthetic_adds(400, 3, num_partitions=6))
    snap = fresh(t).snapshot()
    assert snap.version == 3 and snap.num_files == 305 and snap.source == "avro-state"

    # partition pruning through the state's manifest bounds
    day = partition_value(4, 6)
    expected = sorted(f.path for f in fresh(t).snapshot().files if f.partition_values["date"] == day)
    assert sorted(f.path for f in fresh(t).files(f"date = '{day}'")) == expected and expected
    pruned, stats = fresh(t).log.scan(f"date = '{day}'")
    assert stats.manifests_read < stats.manifests_total

    # compaction: one clean state (no tombstones) at the latest version, same files
    before = live_paths(t)
    c = t.maintenance.compact()
    assert c["compacted"] is True and c["numTombstones"] == 0 and c["version"] == 3
    assert live_paths(fresh(t)) == before == replay_paths(t)
    d = fresh(t).inspect.state()
    assert (d["format"], d["version"], d["numFiles"], d["numTombstones"]) == ("avro-state", 3, 305, 0)

    # time travel across states: versions at and between states
    assert [fresh(t).snapshot(v).num_files for v in (1, 2, 3)] == [300, 302, 305]

    # automatic checkpoints every 2 versions
    auto = new_table(storage_backend, "auto", **{"checkpoint.enabled": "true", "checkpoint.interval": "2"})
    for k in range(4):
        commit_files(auto, synthetic_adds(k * 5, 5))
    assert sorted(auto.log.listing().state_manifests) == [2, 4]
    assert fresh(auto).snapshot().num_files == 20


def test_json_checkpoint_and_corruption_fallback(storage_backend, caplog):
    # legacy JSON checkpoints: written with state.format=json, read back; damage → fallback, then error
    j = new_table(storage_backend, "json", **{"state.format": "json"})
    commit_files(j, synthetic_adds(0, 10))
    j.maintenance.checkpoint()
    cp = f"{LOG_DIR}/{1:020d}.checkpoint.json"
    assert j.storage.exists(cp)
    commit_files(j, synthetic_adds(10, 2))
    snap = fresh(j).snapshot()
    assert snap.num_files == 12 and snap.source == "json"
    j.storage.put(cp, b"\x1f\x8b garbage")
    assert fresh(j).snapshot().num_files == 12
    j.storage.delete([version_key(0), version_key(1)])
    with pytest.raises(CorruptStateError, match="00000000000000000001.checkpoint.json"):
        fresh(j).snapshot()

    # Avro state damage: a corrupt state manifest, a missing manifest, a corrupt _last_checkpoint
    t = new_table(storage_backend)
    commit_files(t, synthetic_adds(0, 50))
    commit_files(t, synthetic_adds(50, 50))
    t.maintenance.checkpoint()
    sm_key = f"{LOG_DIR}/state-v{2:020d}/_manifest.avro"
    manifest_key = f"{LOG_DIR}/{state(t).manifests[0].path}"
    good_sm = t.storage.read(sm_key)

    t.storage.put(LAST_CHECKPOINT, b"{not json")
    with caplog.at_level(logging.WARNING):
        s = fresh(t).snapshot()
    assert (s.num_files, s.source) == (100, "avro-state") and "_last_checkpoint: not valid JSON" in caplog.text

    t.storage.put(sm_key, good_sm[: len(good_sm) - 20])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        s = fresh(t).snapshot()
    assert (s.num_files, s.source) == (100, "log") and "_manifest.avro" in caplog.text
    t.storage.put(sm_key, good_sm)

    t.storage.delete([manifest_key])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        s = fresh(t).snapshot()
    assert (s.num_files, s.source) == (100, "log")
    assert "is missing" in caplog.text and "replaying version files" in caplog.text
    t.storage.delete([version_key(0), version_key(1)])
    with pytest.raises(CorruptStateError, match=manifest_key.rsplit("/", 1)[-1] + " is missing"):
        fresh(t).snapshot()


def test_gc_dry_run_retention_and_truncate(storage_backend):
    t = new_table(storage_backend)
    for k in range(6):
        commit_files(t, synthetic_adds(k * 3, 3), remove=[synthetic_add((k - 1) * 3).path] if k else [])
        t.maintenance.checkpoint()
    objects = sorted((f.key, f.size) for f in t.storage.list(""))
    assert gc_state(t.log)["stateDirsRemoved"] == 0  # every state is young (168 h retention)
    later = int(time.time() * 1000) + 200 * HOUR_MS  # object stores keep their own file times
    dry = gc_state(t.log, dry_run=True, now_ms=later)
    assert dry["stateVersionsRemoved"] == [1, 2, 3] and dry["dryRun"]
    assert sorted((f.key, f.size) for f in t.storage.list("")) == objects  # a dry run deletes nothing
    r = gc_state(t.log, now_ms=later)
    assert r["stateVersionsRemoved"] == [1, 2, 3]
    assert sorted(t.log.listing().state_manifests) == [4, 5, 6]
    assert fresh(t).snapshot().num_files == 13 and live_paths(fresh(t)) == replay_paths(t)

    dry = t.maintenance.truncate_time_travel(dry_run=True)
    assert dry["versionFilesRemoved"] == 6 and len(t.log.list_versions()) == 7
    r = t.maintenance.truncate_time_travel()
    assert r["versionFilesRemoved"] == 6 and t.log.list_versions() == [6]
    f = fresh(t)
    assert f.snapshot().num_files == 13
    with pytest.raises(VersionNotFoundError):
        f.snapshot(3)
    assert commit_files(f, [AddFile("splits/after-truncate.split", {"date": "x"}, 1, 0)]) == 7
    assert fresh(t).snapshot().num_files == 14
