"""IndexTable's public surface: t.maintenance, t.inspect, t.aggregate, t.write, `with t.transaction()`,
typed results, and the deprecated flat names (they still work, with a DeprecationWarning)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.api import results as r


def rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": [f"doc {i} {'spark' if i % 3 == 0 else 'arrow'}" for i in ids],
            "day": ["2024-01-01" if i % 2 else "2024-01-02" for i in ids],
        }
    )


@pytest.fixture
def table(tmp_path) -> it.IndexTable:
    path = str(tmp_path / "t")
    t = it.IndexTable(path, {"indexing.typemap.body": "text"})
    t.write(rows(10), partition_by=["day"])
    t.write(rows(10, start=10))
    return it.IndexTable(path)


def test_maintenance_and_inspect_return_typed_results(table, tmp_path):
    t = table
    hist = t.inspect.history()
    assert [h.version for h in hist] == [1, 0] and all(isinstance(h, r.HistoryEntry) for h in hist)
    assert hist[0].num_added_records == 10 and hist[0]["numAddedRecords"] == 10
    assert [h.version for h in t.inspect.history(limit=1)] == [1]
    files = t.inspect.files()
    assert files.schema == r.FileRow.arrow_schema() and files.num_rows == t.snapshot().num_files
    assert t.inspect.files("day = '2024-01-01'").num_rows == 2
    cp = t.maintenance.checkpoint()
    assert isinstance(cp, r.CheckpointResult) and cp.status == "SUCCESS" and cp.version == 1 and cp.num_files == 4
    state = t.inspect.state()
    assert isinstance(state, r.DescribeStateResult) and state.version == 1 and state.num_files == 4
    assert state.partition_columns == ["day"] and state["numFiles"] == 4
    assert t.inspect.transaction_log().num_rows > 0 and t.inspect.skipped_files() == []
    merged = t.maintenance.merge_splits(target_size="1G")
    assert isinstance(merged, r.MergeSplitsResult) and merged.status == "SUCCESS" and merged.splits_created == 2
    assert t.count() == 20 and t.snapshot().num_files == 2
    purged = t.maintenance.purge(dry_run=True)
    assert isinstance(purged, r.PurgeResult) and purged.status == "DRY_RUN" and purged.dry_run
    dropped = t.maintenance.drop_partitions("day = '2024-01-01'")
    assert isinstance(dropped, r.DropPartitionsResult) and dropped.records_removed == 10 and t.count() == 10
    tt = t.maintenance.truncate_time_travel(dry_run=True)
    assert isinstance(tt, r.TruncateTimeTravelResult) and tt.status == "DRY_RUN" and tt.version_files_removed == 3
    repaired = t.maintenance.repair_transaction_log(str(tmp_path / "repaired_log"))
    assert isinstance(repaired, r.RepairResult) and repaired.valid_splits == repaired.total_splits == 1
    # options are keyword-only
    with pytest.raises(TypeError):
        t.maintenance.purge(24.0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.maintenance.merge_splits(None, "1G")  # type: ignore[misc]


def test_results_are_frozen_read_only_dicts(table):
    res = table.maintenance.checkpoint()
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.version = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        res["version"] = 9
    with pytest.raises(TypeError):
        res.update(version=9)
    assert res.to_dict() == dict(res) and res.to_dict()["tablePath"] == table.storage.uri


def test_transaction_context_manager_commits_on_exit(table):
    t = table
    victim = t.files()[0]
    v = t.version()
    with t.transaction() as tx:
        tx.remove_files([victim.path])
    assert tx.committed_version == v + 1 == t.version()
    assert victim.path not in {f.path for f in t.files()}
    with pytest.raises(RuntimeError):
        with t.transaction() as tx:
            tx.add_files([victim])
            raise RuntimeError("abandon")
    assert t.version() == v + 1 and victim.path not in {f.path for f in t.files()}
    # committed inside the block: not committed twice
    with t.transaction() as tx:
        tx.add_files([victim])
        assert tx.commit() == v + 2
    assert t.version() == v + 2


def test_aggregate_write_and_delete(table):
    t = table
    res = t.aggregate({"days": {"terms": {"field": "day"}}}, query="body:spark")
    assert res["doc_count"] == 7 and {b["key"]: b["doc_count"] for b in res["days"]["buckets"]} == {
        "2024-01-02": 4,
        "2024-01-01": 3,
    }
    eu = t.aggregate({"n": {"value_count": {"field": "id"}}}, partition_filter="day = '2024-01-01'")
    assert eu["n"]["value"] == 10
    with pytest.warns(DeprecationWarning, match="IndexTable.*aggregate"):
        old = it.aggregate(None, t.path, query="body:spark", aggs={"days": {"terms": {"field": "day"}}})
    assert old == res
    assert t.write(rows(5, start=100)) == t.version() and t.count() == 25
    assert t.delete("id >= 100", kind="positional") == t.version() and t.count() == 20


@pytest.mark.parametrize(
    "old,new",
    [
        ("checkpoint", "maintenance.checkpoint"),
        ("compact", "maintenance.compact"),
        ("history", "inspect.history"),
        ("describe_state", "inspect.state"),
        ("describe_transaction_log", "inspect.transaction_log"),
        ("skipped_files", "inspect.skipped_files"),
        ("gc_state", "maintenance.gc_state"),
        ("merge_splits", "maintenance.merge_splits"),
        ("purge", "maintenance.purge"),
    ],
)
def test_deprecated_names_still_work(table, old, new):
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        got = getattr(table, old)()
    obj = table
    for part in new.split("."):
        obj = getattr(obj, part)
    want = obj()
    assert type(got) is type(want)
