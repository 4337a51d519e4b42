"""Protocol safety: no operation mutates a table whose protocol is newer than ours or that needs
writer features we do not know (the table's files stay byte-identical); an old-protocol table is
upgraded only by a checkpoint (explicit or automatic), as a recorded version."""

from __future__ import annotations

import gzip
import json
import os

import pytest

import indextables_spark as it
from indextables_spark.errors import ProtocolVersionError
from indextables_spark.core.log.model.action_wire import action_to_json
from indextables_spark.core.log.model.actions import Protocol
from indextables_spark.core.log.commit.synthetic import commit_files, create_table, synthetic_add, synthetic_adds

FUTURE = {
    "writer version 5": Protocol(4, 5, ["avroState", "schemaDeduplication"], ["avroState", "schemaDeduplication"]),
    "unknown writer feature": Protocol(
        4, 4, ["avroState", "schemaDeduplication"], ["avroState", "schemaDeduplication", "identityColumns"]
    ),
    "reader version 5": Protocol(5, 5, ["avroState"], ["avroState"]),
    "unknown reader feature": Protocol(4, 4, ["avroState", "variantType"], ["avroState", "variantType"]),
}

OPERATIONS = {
    "append": lambda t: commit_files(t, synthetic_adds(1000, 2)),
    "remove": lambda t: commit_files(t, [], remove=[synthetic_add(0).path]),
    "checkpoint": lambda t: t.maintenance.checkpoint(),
    "compact": lambda t: t.maintenance.compact(),
    "merge": lambda t: t.maintenance.merge_splits(),
    "purge": lambda t: t.maintenance.purge(older_than_hours=0, tx_log_retention_hours=0),
    "drop partitions": lambda t: t.maintenance.drop_partitions("date = '2024-01-01'"),
    "delete": lambda t: t.delete("date = '2024-01-01'"),
    "truncate time travel": lambda t: t.maintenance.truncate_time_travel(),
    "gc state": lambda t: t.maintenance.gc_state(),
    "set protocol back to ours": lambda t: t.transaction()
    .set_protocol(Protocol(4, 4, ["avroState"], ["avroState"]))
    .commit(),
}


def _files(root: str) -> dict[str, bytes]:
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def _future_table(tmp_path, protocol: Protocol, name: str):
    t = it.IndexTable(str(tmp_path / name), {"checkpoint.enabled": "false", "purge.retentionCheckEnabled": "false"})
    create_table(t)
    commit_files(t, synthetic_adds(0, 4))
    t.maintenance.checkpoint()
    commit_files(t, synthetic_adds(4, 4))
    v = t.version() + 1
    # Written by a newer writer: the protocol action of version v.
    line = (
        json.dumps({"commitInfo": {"timestamp": 1, "operation": "UPGRADE PROTOCOL"}})
        + "\n"
        + json.dumps(action_to_json(protocol))
        + "\n"
    )
    with open(os.path.join(t.path, "_transaction_log", f"{v:020d}.json"), "wb") as f:
        f.write(gzip.compress(line.encode()))
    return it.IndexTable(t.path, t.options)


@pytest.mark.parametrize("what", list(FUTURE))
def test_no_operation_mutates_a_table_with_a_newer_protocol(tmp_path, what):
    protocol = FUTURE[what]
    t = _future_table(tmp_path, protocol, "t")
    before = _files(t.path)
    refused = []
    for name, op in OPERATIONS.items():
        with pytest.raises(ProtocolVersionError) as e:
            op(it.IndexTable(t.path, t.options))
        refused.append(name)
        assert _files(t.path) == before, f"{what}: {name} changed the table's files"
        assert "version" in str(e.value) or "feature" in str(e.value)
    assert len(refused) == len(OPERATIONS)
    if protocol.min_reader_version <= 4 and set(protocol.reader_features or []) <= {"avroState", "schemaDeduplication"}:
        # Still readable: reading does not need the writer features.
        assert it.IndexTable(t.path).snapshot().num_files == 8
    else:
        with pytest.raises(ProtocolVersionError):
            it.IndexTable(t.path).snapshot()


def test_old_protocol_is_upgraded_only_by_a_checkpoint(tmp_path):
    v2 = Protocol(2, 2)
    t = it.IndexTable(str(tmp_path / "old"), {"checkpoint.interval": "4"})
    create_table(t, protocol=v2)
    for k in range(2):
        commit_files(t, synthetic_adds(k * 3, 3))
    # Reads, appends and removes keep the old protocol.
    t.snapshot()
    commit_files(t, [], remove=[synthetic_add(0).path])
    assert t.snapshot().protocol_action.min_reader_version == 2
    assert all(h["operation"] != "UPGRADE PROTOCOL" for h in t.inspect.history())
    # The automatic checkpoint (interval 4) upgrades, as its own recorded version.
    v = commit_files(t, synthetic_adds(50, 1))
    hist = {h["version"]: h for h in t.inspect.history()}
    upgrades = [h for h in hist.values() if h["operation"] == "UPGRADE PROTOCOL"]
    assert len(upgrades) == 1 and upgrades[0]["version"] == v + 1 and upgrades[0]["metadataChanged"]
    snap = t.snapshot()
    assert snap.protocol_action.min_reader_version == 4 and "avroState" in snap.protocol_action.reader_features
    assert snap.version == v + 1 and snap.num_files == 6
    # Old versions still read with the old protocol (time travel across the upgrade).
    assert t.snapshot(v).protocol_action.min_reader_version == 2

    # An explicit checkpoint upgrades a table with automatic checkpoints off.
    t2 = it.IndexTable(str(tmp_path / "old2"), {"checkpoint.enabled": "false"})
    create_table(t2, protocol=Protocol(3, 3, ["multiPartCheckpoint"], ["multiPartCheckpoint"]))
    for k in range(6):
        commit_files(t2, synthetic_adds(k * 2, 2))
    assert t2.snapshot().protocol_action.min_reader_version == 3
    before = t2.version()
    t2.maintenance.checkpoint()
    assert t2.version() == before + 1
    assert t2.inspect.history()[0]["operation"] == "UPGRADE PROTOCOL"
    assert t2.snapshot().protocol_action.min_writer_version == 4
