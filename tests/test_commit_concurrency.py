"""Concurrent committers on one table: contiguous versions, no lost adds (no Spark)."""

from __future__ import annotations

import gzip
import json
import multiprocessing as mp
import os

import pytest

import indextables_spark as it
from indextables_spark.core.log.model.actions import AddFile, Metadata
from indextables_spark.core.log.model.paths import LOG_DIR
from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL
from indextables_spark.core.log.commit.transaction import new_table_id

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]})
N_PROCS = 4
N_COMMITS = 20


def create_table(path: str, options=None) -> it.IndexTable:
    t = it.IndexTable(path, options)
    txn = t.transaction()
    txn.set_protocol(CURRENT_PROTOCOL).set_metadata(
        Metadata(id=new_table_id(), schema_string=SCHEMA, partition_columns=[])
    )
    txn.commit()
    return t


def _committer(path: str, worker: int, options: dict, q) -> None:
    t = it.IndexTable(path, {**options, "transaction.retry.maxAttempts": "200", "checkpoint.enabled": "false"})
    versions = []
    for i in range(N_COMMITS):
        add = AddFile(f"splits/w{worker}-{i}.split", {}, size=100 + i, modification_time=0, num_records=1)
        versions.append(t.transaction().add_files([add]).commit())
    q.put(versions)


def spawn_and_collect(target, args: list[tuple], barrier: bool = False, ctx=None, timeout: float = 300) -> list:
    """target(*a[, barrier], queue) for each `a` in `args`, each in a process of `ctx` (default:
    spawned; with a barrier shared by all when asked, to make them race); the one result each put
    on the queue within `timeout` seconds."""
    ctx = ctx or mp.get_context("spawn")
    q = ctx.Queue()
    extra = (ctx.Barrier(len(args)),) if barrier else ()
    procs = [ctx.Process(target=target, args=(*a, *extra, q)) for a in args]
    for p in procs:
        p.start()
    results = [q.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def run_processes(target, path: str, options: dict) -> list:
    """Run target(path, worker, options, queue) in N_PROCS spawned processes; their queue results."""
    return spawn_and_collect(target, [(path, w, options) for w in range(N_PROCS)])


def run_committers(path: str, options: dict) -> list[int]:
    return sorted(v for r in run_processes(_committer, path, options) for v in r)


def test_concurrent_committers_local(tmp_path):
    path = str(tmp_path / "t")
    create_table(path, {"checkpoint.enabled": "false"})
    versions = run_committers(path, {})
    assert versions == list(range(1, N_PROCS * N_COMMITS + 1))
    t = it.IndexTable(path)
    assert t.version() == N_PROCS * N_COMMITS
    paths = sorted(f.path for f in t.snapshot().files)
    expected = sorted(f"splits/w{w}-{i}.split" for w in range(N_PROCS) for i in range(N_COMMITS))
    assert paths == expected
    # every version file holds exactly one add
    for v in range(1, N_PROCS * N_COMMITS + 1):
        adds = [a for a in t.log.read_actions(v) if isinstance(a, AddFile)]
        assert len(adds) == 1


def test_version_files_are_gzip_ndjson_with_20_digit_names(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path)
    t.transaction().add_files([AddFile("splits/a.split", {"d": "x"}, 10, 123, num_records=5)]).commit()
    names = sorted(os.listdir(os.path.join(path, LOG_DIR)))
    assert "00000000000000000000.json" in names and "00000000000000000001.json" in names
    raw = open(os.path.join(path, LOG_DIR, "00000000000000000001.json"), "rb").read()
    assert raw[:4] == b"\x01\x01\x1f\x8b"  # framed as the reference writes it: 0x01, codec 0x01 = gzip
    lines = [json.loads(l) for l in gzip.decompress(raw[2:]).decode().splitlines()]
    kinds = [next(iter(l)) for l in lines]
    assert "add" in kinds
    add = next(l["add"] for l in lines if "add" in l)
    assert add["path"] == "splits/a.split"
    assert add["partitionValues"] == {"d": "x"}
    assert add["size"] == 10 and add["modificationTime"] == 123 and add["dataChange"] is True
    v0 = [
        json.loads(l)
        for l in gzip.decompress(open(os.path.join(path, LOG_DIR, names[0]), "rb").read()[2:]).decode().splitlines()
    ]
    proto = next(l["protocol"] for l in v0 if "protocol" in l)
    meta = next(l["metaData"] for l in v0 if "metaData" in l)
    assert proto["minReaderVersion"] == 4 and proto["minWriterVersion"] == 4
    assert meta["schemaString"] == SCHEMA and meta["partitionColumns"] == []
    assert meta["format"]["provider"] == "indextables"


def test_uncompressed_version_files_are_read(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path, {"transaction.compression.enabled": "false"})
    raw = open(os.path.join(path, LOG_DIR, "00000000000000000000.json"), "rb").read()
    assert raw[:1] == b"{"
    t.transaction().add_files([AddFile("splits/a.split", {}, 10, 0)]).commit()
    assert [f.path for f in it.IndexTable(path).snapshot().files] == ["splits/a.split"]


def test_fail_resolver_raises_on_concurrent_commit(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path)
    txn = t.transaction(resolver="fail")
    t.transaction().add_files([AddFile("splits/b.split", {}, 1, 0)]).commit()
    txn.add_files([AddFile("splits/c.split", {}, 1, 0)])
    with pytest.raises(it.ConcurrentModificationError, match="version 1"):
        txn.commit()


def test_merge_resolver_remove_remove_conflict(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path)
    t.transaction().add_files([AddFile("splits/a.split", {}, 1, 0)]).commit()
    t1 = t.transaction(resolver="merge").remove_files(["splits/a.split"])
    t2 = t.transaction(resolver="merge").remove_files(["splits/a.split"])
    t1.commit()
    with pytest.raises(it.ConcurrentModificationError, match="splits/a.split"):
        t2.commit()


def test_merge_resolver_rebases_blind_appends(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path)
    t1 = t.transaction().add_files([AddFile("splits/a.split", {}, 1, 0)])
    t2 = t.transaction().add_files([AddFile("splits/b.split", {}, 1, 0)])
    assert t1.commit() == 1
    assert t2.commit() == 2
    assert sorted(f.path for f in t.snapshot().files) == ["splits/a.split", "splits/b.split"]


def test_missing_table_errors_name_the_path(tmp_path):
    t = it.IndexTable(str(tmp_path / "nothing"))
    assert t.version() == -1
    with pytest.raises(it.TableNotFoundError, match="nothing"):
        t.snapshot()


def test_time_travel_by_version_and_history(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path)
    t.transaction().add_files([AddFile("splits/a.split", {}, 1, 0)]).commit()
    t.transaction().add_files([AddFile("splits/b.split", {}, 1, 0)]).remove_files(["splits/a.split"]).commit()
    assert [f.path for f in t.snapshot(version=1).files] == ["splits/a.split"]
    assert [f.path for f in t.snapshot(version=2).files] == ["splits/b.split"]
    ts1 = t.snapshot(version=1).timestamp
    assert t.snapshot(timestamp_ms=ts1).version >= 1
    hist = t.inspect.history()
    assert [h["version"] for h in hist] == [2, 1, 0]
    assert hist[0]["numAddedFiles"] == 1 and hist[0]["numRemovedFiles"] == 1
    with pytest.raises(it.IndexTablesError, match="version 7"):
        t.snapshot(version=7)
