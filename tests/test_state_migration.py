"""Migration and upgrade to the Avro state, the change feed (docs/reference/table-format.md,
"Streaming reads"); the protocol gate ("Protocol versions")."""

from __future__ import annotations

import gzip
import json
import os

import pytest

import indextables_spark as it
from indextables_spark.errors import ProtocolVersionError, VersionNotFoundError
from indextables_spark.core.log.model.action_wire import action_to_json
from indextables_spark.core.log.model.actions import AddFile, Protocol, RemoveFile, SkipAction
from indextables_spark.core.log.model.paths import LAST_CHECKPOINT
from indextables_spark.core.log.commit.synthetic import (
    DOC_MAPPING_REF,
    commit_files,
    create_table,
    synthetic_add,
    synthetic_adds,
)

V2 = Protocol(2, 2)
V3 = Protocol(3, 3, ["multiPartCheckpoint", "schemaDeduplication"], ["multiPartCheckpoint", "schemaDeduplication"])


def legacy_table(tmp_path, protocol=V2, n=30, name="legacy", **opts):
    t = it.IndexTable(str(tmp_path / name), {"checkpoint.enabled": "false", **opts})
    create_table(t, protocol=protocol)
    for k in range(3):
        commit_files(t, synthetic_adds(k * (n // 3), n // 3))
    return t


def logdir(t):
    return os.path.join(t.path, "_transaction_log")


def write_lines(path, actions, gz):
    text = "".join(json.dumps(action_to_json(a)) + "\n" for a in actions)
    data = gzip.compress(text.encode()) if gz else text.encode()
    with open(path, "wb") as f:
        f.write(data)


def paths(t, version=None):
    return sorted(f.path for f in t.snapshot(version).files)


def replay(t, version=None):
    log = t.log
    v = log.latest_version() if version is None else version
    return sorted(log._files(None, log.collect_changes(None, v)).column("path").to_pylist())


# ---- §7 legacy JSON checkpoints -------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_read_legacy_single_file_json_checkpoint(tmp_path, gz):
    t = legacy_table(tmp_path)
    snap = t.snapshot(3)
    skip = SkipAction("x.split", 1, "bad footer", "merge")
    write_lines(
        os.path.join(logdir(t), f"{3:020d}.checkpoint.json"),
        [snap.protocol_action, snap.metadata_action, *snap.files, skip],
        gz,
    )
    with open(os.path.join(logdir(t), "_last_checkpoint"), "w") as f:  # no format → json
        json.dump({"version": 3, "size": 32, "sizeInBytes": 1, "numFiles": 30, "createdTime": 1}, f)
    commit_files(t, synthetic_adds(100, 2), remove=[synthetic_add(0).path])
    for v in range(0, 4):  # the checkpoint alone must suffice for versions <= 3
        os.unlink(os.path.join(logdir(t), f"{v:020d}.json"))
    s = t.snapshot()
    assert s.source == "json" and s.num_files == 31 and s.version == 4
    assert "x.split" in s.skips
    assert t.inspect.state()["format"] == "json"


def test_read_legacy_multipart_checkpoint(tmp_path):
    t = legacy_table(tmp_path)
    snap = t.snapshot(3)
    cid = "abc123def456"
    files = snap.files
    parts = [[snap.protocol_action, snap.metadata_action, *files[:10]], files[10:20], files[20:]]
    names = []
    for i, acts in enumerate(parts, 1):
        name = f"{3:020d}.checkpoint.{cid}.{i:05d}.json"
        write_lines(os.path.join(logdir(t), name), acts, gz=True)
        names.append(name)
    with open(os.path.join(logdir(t), f"{3:020d}.checkpoint.json"), "w") as f:
        json.dump({"version": 3, "checkpointId": cid, "parts": names, "createdTime": 1, "format": "json"}, f)
    with open(os.path.join(logdir(t), "_last_checkpoint"), "w") as f:
        json.dump(
            {
                "version": 3,
                "size": 32,
                "sizeInBytes": 1,
                "numFiles": 30,
                "createdTime": 1,
                "parts": 3,
                "checkpointId": cid,
            },
            f,
        )
    for v in range(0, 4):
        os.unlink(os.path.join(logdir(t), f"{v:020d}.json"))
    s = t.snapshot()
    assert s.source == "json-multipart" and sorted(f.path for f in s.files) == sorted(f.path for f in files)
    assert t.inspect.state()["format"] == "json-multipart"
    # the manifest gone: the parts named by _last_checkpoint are read
    os.unlink(os.path.join(logdir(t), f"{3:020d}.checkpoint.json"))
    assert it.IndexTable(t.path).snapshot().num_files == 30


def test_auto_upgrade_on_read_keeps_state_in_memory(tmp_path):
    t = legacy_table(tmp_path, protocol=V3)
    files_before = os.listdir(logdir(t))
    assert paths(t) == replay(t)
    assert os.listdir(logdir(t)) == files_before  # reading never writes


def test_checkpoint_upgrades_v2_table_to_v4(tmp_path):
    t = legacy_table(tmp_path, protocol=V2)
    before = t.snapshot()
    r = t.maintenance.checkpoint()
    assert r["upgradedFromProtocol"] == {"minReaderVersion": 2, "minWriterVersion": 2}
    assert r["newFormat"] == "avro-state" and r["version"] == 4
    hist = t.inspect.history()[0]
    assert hist["operation"] == "UPGRADE PROTOCOL"
    after = t.snapshot()
    assert after.protocol["minReaderVersion"] == 4 and set(after.protocol["readerFeatures"]) >= {"avroState"}
    assert after.source == "avro-state"
    # nothing lost: paths, partition values, statistics, doc-mapping refs
    key = lambda f: f.path  # noqa: E731
    for a, b in zip(sorted(before.files, key=key), sorted(after.files, key=key)):
        assert (
            a.path,
            a.partition_values,
            a.min_values,
            a.max_values,
            a.num_records,
            a.doc_mapping_ref,
            a.footer_start_offset,
            a.size,
        ) == (
            b.path,
            b.partition_values,
            b.min_values,
            b.max_values,
            b.num_records,
            b.doc_mapping_ref,
            b.footer_start_offset,
            b.size,
        )
    assert after.doc_mapping(DOC_MAPPING_REF) == before.doc_mapping(DOC_MAPPING_REF)
    lc = json.load(open(os.path.join(logdir(t), "_last_checkpoint")))
    # no protocolVersion: the reference's strict LastCheckpointInfo reader would ignore the file
    assert lc["format"] == "avro-state" and "protocolVersion" not in lc


def test_automatic_checkpoint_upgrades_v3_table(tmp_path):
    t = legacy_table(tmp_path, protocol=V3)
    auto = it.IndexTable(t.path, {"checkpoint.interval": "4"})
    v = commit_files(auto, synthetic_adds(500, 1))
    assert v == 4
    s = auto.snapshot()
    assert s.version == 5 and s.protocol["minReaderVersion"] == 4 and s.source == "avro-state"
    assert paths(auto) == replay(auto)


def test_upgrade_with_active_tombstones_and_write_after_upgrade(tmp_path):
    t = legacy_table(tmp_path, protocol=V2)
    commit_files(t, [], remove=[synthetic_add(1).path, synthetic_add(2).path])
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(900, 3))
    r = t.maintenance.checkpoint()
    assert r["newFormat"] == "avro-state" and r["compacted"] is False and r["manifestsWritten"] == 1
    assert paths(t) == replay(t) and t.snapshot().num_files == 31


def test_mixed_format_rollback_to_json(tmp_path):
    t = legacy_table(tmp_path, protocol=V2)
    t.maintenance.checkpoint()  # avro (upgrade)
    commit_files(t, synthetic_adds(700, 2))
    j = it.IndexTable(t.path, {"state.format": "json"})
    r = j.maintenance.checkpoint()
    assert r["newFormat"] == "json" and os.path.exists(os.path.join(logdir(t), f"{r['version']:020d}.checkpoint.json"))
    lc = json.load(open(os.path.join(logdir(t), "_last_checkpoint")))
    assert lc["format"] == "json" and lc["version"] == r["version"]
    for v in range(0, r["version"] + 1):
        os.unlink(os.path.join(logdir(t), f"{v:020d}.json"))
    s = it.IndexTable(t.path).snapshot()
    assert s.source == "json" and s.num_files == 32


def test_json_format_writes_json_checkpoints_automatically(tmp_path):
    t = it.IndexTable(str(tmp_path / "j"), {"state.format": "json", "checkpoint.interval": "2"})
    create_table(t)
    commit_files(t, synthetic_adds(0, 3))
    commit_files(t, synthetic_adds(3, 3))
    assert os.path.exists(os.path.join(logdir(t), f"{2:020d}.checkpoint.json"))
    assert not t.log.listing().state_manifests
    data = open(os.path.join(logdir(t), f"{2:020d}.checkpoint.json"), "rb").read()
    assert data[:4] == b"\x01\x01\x1f\x8b"  # GZIP, framed as the reference writes it (core/log/model/codec.py)


@pytest.mark.slow
def test_upgrade_large_table(tmp_path):
    t = it.IndexTable(str(tmp_path / "big"), {"checkpoint.enabled": "false"})
    create_table(t, protocol=V2)
    for k in range(7):
        commit_files(t, synthetic_adds(k * 10_000, 10_000, num_partitions=100))
    r = t.maintenance.checkpoint()
    assert r["numFiles"] == 70_000 and r["numManifests"] == 2
    assert it.IndexTable(t.path).snapshot().num_files == 70_000


# ---- protocol gate ----------------------------------------------------------------------------------------


def test_reader_refuses_newer_protocol_before_touching_state(tmp_path):
    t = legacy_table(tmp_path, protocol=Protocol(4, 4, ["avroState"], ["avroState"]))
    t.maintenance.checkpoint()
    commit_files(t, [], remove=[])
    txn = t.transaction()
    txn.set_protocol(Protocol(4, 5, ["avroState"], ["avroState"]))
    with pytest.raises(ProtocolVersionError, match="writer version 5"):
        txn.commit()
    # a future reader version written by someone else
    with open(os.path.join(logdir(t), f"{t.version() + 1:020d}.json"), "w") as f:
        f.write(json.dumps({"protocol": {"minReaderVersion": 7, "minWriterVersion": 7}}) + "\n")
    with pytest.raises(ProtocolVersionError, match="reader version 7"):
        t.snapshot()
    with pytest.raises(ProtocolVersionError, match="reader version 7"):
        t.maintenance.checkpoint()
    with pytest.raises(ProtocolVersionError, match="reader version 7"):
        commit_files(t, synthetic_adds(0, 1))


def test_state_with_newer_protocol_version_is_refused(tmp_path):
    t = legacy_table(tmp_path, protocol=Protocol(4, 4, ["avroState"], ["avroState"]))
    t.maintenance.checkpoint()
    with open(os.path.join(t.path, LAST_CHECKPOINT)) as f:
        lc = json.load(f)
    lc["protocolVersion"] = 9
    with open(os.path.join(t.path, LAST_CHECKPOINT), "w") as f:
        json.dump(lc, f)
    with pytest.raises(ProtocolVersionError, match="_last_checkpoint: checkpoint requires protocol version 9"):
        t.snapshot()


def test_unknown_reader_feature_is_refused(tmp_path):
    t = legacy_table(tmp_path, protocol=Protocol(4, 4, ["avroState"], ["avroState"]))
    with open(os.path.join(logdir(t), f"{t.version() + 1:020d}.json"), "w") as f:
        f.write(json.dumps(action_to_json(Protocol(4, 4, ["avroState", "rowTracking"], ["avroState"]))) + "\n")
    with pytest.raises(ProtocolVersionError, match="rowTracking"):
        t.snapshot()
    with pytest.raises(ProtocolVersionError, match="rowTracking"):
        t.maintenance.checkpoint()
    assert not t.log.listing().state_manifests  # nothing was written


# ---- §8 change feed ---------------------------------------------------------------------------------------


def test_changes_since_version(tmp_path):
    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.interval": "3"})
    create_table(t)
    for k in range(8):
        commit_files(t, synthetic_adds(k * 10, 10))
    cs = t.changes_since(5)
    assert cs.version == 8 and sorted(f.path for f in cs.adds) == sorted(f.path for f in synthetic_adds(50, 30))
    assert all(f.added_at_version > 5 for f in cs.adds) and cs.removes == []
    # version-bounded manifest skipping: the state at 6 has manifests up to version 3 and 6
    assert cs.stats.manifests_read < cs.stats.manifests_total


def test_changes_include_removes_and_skip_removed_adds(tmp_path):
    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.interval": "2"})
    create_table(t)
    commit_files(t, synthetic_adds(0, 5))
    v2 = commit_files(t, synthetic_adds(5, 5))
    commit_files(t, synthetic_adds(10, 5), remove=[synthetic_add(0).path])
    commit_files(t, [], remove=[synthetic_add(11).path])
    cs = t.changes_since(v2)
    assert sorted(r.path for r in cs.removes) == sorted([synthetic_add(0).path, synthetic_add(11).path])
    assert all(isinstance(r, RemoveFile) for r in cs.removes)
    assert sorted(f.path for f in cs.adds) == sorted(
        f.path for f in synthetic_adds(10, 5) if f.path != synthetic_add(11).path
    )


def test_streaming_empty_delta_and_all_changes(tmp_path):
    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.interval": "2"})
    create_table(t)
    for k in range(5):
        commit_files(t, synthetic_adds(k * 4, 4))
    empty = t.changes_since(t.version())
    assert empty.is_empty and empty.version == 5
    everything = t.changes_since(-1)
    assert len(everything.adds) == 20


def test_changes_since_timestamp(tmp_path):
    import time

    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.interval": "2"})
    create_table(t)
    commit_files(t, synthetic_adds(0, 3))
    commit_files(t, synthetic_adds(3, 3))
    cut = t.snapshot().timestamp
    time.sleep(0.01)
    commit_files(t, synthetic_adds(6, 3), remove=[synthetic_add(0).path])
    cs = t.changes_since_timestamp(cut)
    assert sorted(f.path for f in cs.adds) == sorted(f.path for f in synthetic_adds(6, 3))
    assert [r.path for r in cs.removes] == [synthetic_add(0).path]


def test_streaming_with_compaction(tmp_path):
    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.enabled": "false"})
    create_table(t)
    for k in range(4):
        commit_files(t, synthetic_adds(k * 5, 5))
    t.maintenance.compact()
    cs = t.changes_since(2)
    assert sorted(f.path for f in cs.adds) == sorted(f.path for f in synthetic_adds(10, 10))


def test_changes_since_truncated_history_is_a_clear_error(tmp_path):
    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.enabled": "false"})
    create_table(t)
    for k in range(4):
        commit_files(t, synthetic_adds(k * 5, 5))
    t.maintenance.truncate_time_travel()
    commit_files(t, synthetic_adds(100, 1))
    with pytest.raises(VersionNotFoundError, match="since version 1.*removed by retention"):
        t.changes_since(1)
    assert [f.path for f in t.changes_since(4).adds] == [synthetic_add(100).path]


def test_added_at_fields_from_legacy_adds_do_not_break_streaming(tmp_path):
    t = legacy_table(tmp_path)
    raw = AddFile("legacy.split", {"date": "2024-01-01"}, 1, 1)
    commit_files(t, [raw])
    t.maintenance.checkpoint()
    assert "legacy.split" in {f.path for f in t.changes_since(3).adds}
