"""The transaction API under real concurrency (processes that read the same version, then commit),
and the conflict rules of delete logs (merge resolver)."""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.log.model.actions import AddFile, Metadata, Protocol, RemoveFile
from indextables_spark.core.log.deletes.delete_logs import positional_table, write_delete_log
from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL, DELETION_LOGS
from indextables_spark.core.log.commit.transaction import new_table_id

sys.path.insert(0, os.path.dirname(__file__))
from test_commit_concurrency import spawn_and_collect  # noqa: E402
from test_deletes import make_table, visible  # noqa: E402

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]})
OPTIONS = {"transaction.retry.maxAttempts": "50", "checkpoint.enabled": "false"}
N_PROCS = 4


def seeded_table(path: str, seeds: int = N_PROCS) -> it.IndexTable:
    t = it.IndexTable(path, OPTIONS)
    txn = t.transaction()
    txn.set_protocol(CURRENT_PROTOCOL).set_metadata(
        Metadata(id=new_table_id(), schema_string=SCHEMA, partition_columns=[])
    )
    txn.add_files([AddFile(f"splits/seed-{i}.split", {}, 10, 0, num_records=1) for i in range(seeds)])
    txn.commit()
    return t


def _worker(path: str, resolver: str, worker: int, remove: str, barrier, q) -> None:
    """Open a transaction, wait until every worker has read the same version, then commit."""
    t = it.IndexTable(path, OPTIONS)
    txn = t.transaction(resolver=resolver)
    read_version = txn.read_version
    txn.snapshot()  # read the state the transaction is based on
    txn.add_files([AddFile(f"splits/w{worker}.split", {}, 10, 0, num_records=1)]).remove_files([remove])
    barrier.wait(timeout=120)
    try:
        q.put((worker, read_version, txn.commit(), None))
    except it.ConcurrentModificationError as e:
        q.put((worker, read_version, None, str(e)))


def run_workers(path: str, resolver: str, removes: list[str]) -> list[tuple]:
    return sorted(spawn_and_collect(_worker, [(path, resolver, w, r) for w, r in enumerate(removes)], barrier=True))


def test_merge_resolver_rebases_concurrent_commits(tmp_path):
    path = str(tmp_path / "t")
    seeded_table(path)
    results = run_workers(path, "merge", [f"splits/seed-{i}.split" for i in range(N_PROCS)])
    assert all(err is None for *_, err in results)
    assert all(read == 0 for _, read, _, _ in results)  # every worker read version 0
    assert sorted(v for _, _, v, _ in results) == list(range(1, N_PROCS + 1))
    snap = it.IndexTable(path).snapshot()
    assert sorted(f.path for f in snap.files) == sorted(f"splits/w{w}.split" for w in range(N_PROCS))


def test_fail_resolver_lets_exactly_one_commit(tmp_path):
    path = str(tmp_path / "t")
    seeded_table(path)
    results = run_workers(path, "fail", [f"splits/seed-{i}.split" for i in range(N_PROCS)])
    winners = [r for r in results if r[3] is None]
    losers = [r for r in results if r[3] is not None]
    assert len(winners) == 1 and winners[0][2] == 1
    assert all("resolver 'fail'" in err and "version 1 was committed concurrently" in err for *_, err in losers)
    t = it.IndexTable(path)
    assert t.version() == 1
    assert f"splits/w{winners[0][0]}.split" in {f.path for f in t.snapshot().files}


def test_remove_remove_conflict(tmp_path):
    path = str(tmp_path / "t")
    seeded_table(path)
    results = run_workers(path, "merge", ["splits/seed-0.split"] * 3)
    winners = [r for r in results if r[3] is None]
    losers = [r for r in results if r[3] is not None]
    assert len(winners) == 1 and len(losers) == 2
    assert all("file splits/seed-0.split was removed concurrently in version 1" in err for *_, err in losers)
    paths = {f.path for f in it.IndexTable(path).snapshot().files}
    assert "splits/seed-0.split" not in paths
    assert {f"splits/w{r[0]}.split" for r in results} & paths == {f"splits/w{winners[0][0]}.split"}


def _deleter(path: str, where: str, barrier, q) -> None:
    t = it.IndexTable(path)
    barrier.wait(timeout=120)
    try:
        q.put((where, t.delete(where).version, None))
    except it.ConcurrentModificationError as e:
        q.put((where, None, str(e)))


def test_concurrent_deletes_in_processes(tmp_path):
    """Positional deletes of different rows of the same splits from four processes all land."""
    path = str(tmp_path / "t")
    t = make_table(path)
    before = visible(t)
    wheres = ["views < 100", "views BETWEEN 300 AND 350", "id IN (7, 8, 9)", "region = 'us' AND views > 900"]
    results = spawn_and_collect(_deleter, [(path, w) for w in wheres], barrier=True)
    assert all(err is None for *_, err in results), results
    assert sorted(v for _, v, _ in results) == [2, 3, 4, 5]
    gone = {
        r[0]
        for r in before
        if (r[2] is not None and (r[2] < 100 or 300 <= r[2] <= 350))
        or r[0] in (7, 8, 9)
        or (r[3] == "us" and r[2] is not None and r[2] > 900)
    }
    assert visible(it.IndexTable(path)) == [r for r in before if r[0] not in gone]
    protocol = it.IndexTable(path).snapshot().protocol_action
    assert DELETION_LOGS in protocol.reader_features


# ---- delete-log conflict rules (deterministic: two transactions opened at the same version) --------


def _positional(t: it.IndexTable, add: AddFile, rows: list[int]):
    return write_delete_log(t.storage, "POSITIONAL", positional_table(rows), split_path=add.path)


def test_positional_delete_conflicts_with_a_concurrent_rewrite_of_its_split(tmp_path):
    t = make_table(str(tmp_path / "t"))
    target = t.snapshot().files[0]
    deleting = t.transaction().add_delete_log(_positional(t, target, [0, 1]))
    merging = t.transaction()
    merging.remove_files([RemoveFile(target.path, 0, data_change=False)]).commit()
    with pytest.raises(
        it.ConcurrentModificationError, match=f"split {target.path}, whose rows this transaction deletes"
    ):
        deleting.commit()


def test_rewrite_conflicts_with_concurrent_deletes(tmp_path):
    t = make_table(str(tmp_path / "t"))
    a, b = t.snapshot().files[:2]
    merging = t.transaction(operation="MERGE SPLITS").remove_files([RemoveFile(a.path, 0, data_change=False)])
    t.transaction().add_delete_log(_positional(t, a, [3])).commit()
    with pytest.raises(it.ConcurrentModificationError, match="rows were deleted concurrently"):
        merging.commit()
    # a key delete applies to every older split: any concurrent rewrite conflicts
    merging = t.transaction(operation="MERGE SPLITS").remove_files([RemoveFile(b.path, 0, data_change=False)])
    t.delete("id IN (1, 2)", kind="equality")
    with pytest.raises(it.ConcurrentModificationError, match="EQUALITY delete log"):
        merging.commit()
    # a data-changing remove of a split (its rows are gone anyway) does not
    dropping = t.transaction().remove_files([b.path])
    t.delete("id IN (3)", kind="equality")
    assert dropping.commit() == t.version()


def test_equality_delete_rebases_over_a_concurrent_merge(tmp_path):
    """A key delete committed after a concurrent merge applies to the merged split (added before it)."""
    t = make_table(str(tmp_path / "t"))
    before = visible(t)
    txn = t.transaction(resolver="merge", operation="DELETE")
    txn.add_delete_log(write_delete_log(t.storage, "EQUALITY", pa.table({"id": pa.array([5, 6], pa.int64())})))
    t.maintenance.merge_splits()
    v = txn.commit()
    assert v == t.version()
    assert visible(t) == [r for r in before if r[0] not in (5, 6)]


def test_first_deletes_upgrade_the_protocol_once_and_appends_rebase(tmp_path):
    t = make_table(str(tmp_path / "t"))
    f = t.snapshot().files[0]
    appending = t.transaction().add_files([AddFile("splits/extra.split", {"day": "2024-01-01"}, 1, 0, num_records=0)])
    first = t.transaction().add_delete_log(_positional(t, f, [0]))
    second = t.transaction().add_delete_log(_positional(t, f, [1]))
    v1 = first.commit()
    v2 = second.commit()  # the concurrent protocol change adds the same feature: merged
    v3 = appending.commit()
    assert (v1, v2, v3) == (2, 3, 4)
    upgrades = [v for v in (v1, v2, v3) if any(isinstance(a, Protocol) for a in t.log.read_actions(v))]
    assert upgrades == [v1]
    assert len(t.snapshot().delete_logs) == 2 and "splits/extra.split" in {x.path for x in t.snapshot().files}


def test_transaction_api_open_at_version_add_delete_log_and_update_stat(tmp_path):
    t = make_table(str(tmp_path / "t"))
    first = t.snapshot().files[0]
    txn = t.transaction(version=0)
    assert txn.read_version == 0 and txn.snapshot().version == 0
    assert len(txn.snapshot().files) == 3  # the first write only
    stat = first.path[: -len(".split")] + ".bloom"
    v = txn.add_delete_log(_positional(t, first, [2])).update_stat("bloomfilter", [stat]).commit()
    assert v == 2  # rebased over version 1
    snap = t.snapshot()
    assert snap.stats_files == {"bloomfilter": [stat]}
    assert [d.split_path for d in snap.delete_logs] == [first.path]
    with pytest.raises(it.CorruptStateError, match="not named after its split"):
        t.transaction().update_stat("bloomfilter", ["bloom-without-extension"])
    with pytest.raises(it.IndexTablesError, match="already committed"):
        t.transaction().add_delete_log(snap.delete_logs[0])
