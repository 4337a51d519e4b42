"""IndexTable's public surface: t.maintenance, t.inspect, t.schema, t.aggregate, t.write, the
data-level `with t.transaction() as tx: tx.write(...); tx.delete(...)`, an injected storage,
keyword-only options, typed results, and the flat names of 0.1.0 gone (seven in 0.2.0, the six
the API contract listed when it dropped them)."""

from __future__ import annotations

import dataclasses
import shutil

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark import results as r


def rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": [f"doc {i} {'spark' if i % 3 == 0 else 'arrow'}" for i in ids],
            "day": ["2024-01-01" if i % 2 else "2024-01-02" for i in ids],
        }
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> str:
    """The table the tests start from, written once (two versions, four splits)."""
    path = str(tmp_path_factory.mktemp("table_api") / "t")
    t = it.IndexTable(path, {"indexing.typemap.body": "text"})
    t.write(rows(10), partition_by=["day"])
    t.write(rows(10, start=10))
    return path


@pytest.fixture
def table(written, tmp_path) -> it.IndexTable:
    """A copy of `written` of the test's own (most tests change their table)."""
    path = str(tmp_path / "t")
    shutil.copytree(written, path)
    return it.IndexTable(path)


def test_maintenance_and_inspect_return_typed_results(table, tmp_path):
    t = table
    hist = t.inspect.history()
    assert [h.version for h in hist] == [1, 0] and all(isinstance(h, r.HistoryEntry) for h in hist)
    assert hist[0].num_added_records == 10 and hist[0]["numAddedRecords"] == 10
    assert [h.version for h in t.inspect.history(limit=1)] == [1]
    assert len(t.files()) == t.snapshot().files_table.num_rows == 4
    assert len(t.files("day = '2024-01-01'")) == 2
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
    assert t.write(rows(5, start=100)).version == t.version() and t.count() == 25
    assert t.delete("id >= 100", kind="positional").version == t.version() and t.count() == 20


def test_flat_names_the_contract_dropped_are_gone(table):
    """The API contract no longer lists them: only t.inspect / t.maintenance have these operations."""
    for old in ("history", "checkpoint", "compact", "describe_state", "purge", "truncate_time_travel"):
        with pytest.raises(AttributeError):
            getattr(table, old)


@pytest.mark.parametrize(
    "gone",
    [
        "gc_state",
        "merge_splits",
        "drop_partitions",
        "repair_transaction_log",
        "prewarm_cache",
        "describe_transaction_log",
        "skipped_files",
        "scan",
        "files_table",
    ],
)
def test_names_removed_in_0_2_0(table, gone):
    assert not hasattr(table, gone)
    assert not hasattr(it, "aggregate") and not hasattr(table.inspect, "files")


def test_optional_arguments_are_keyword_only(table):
    """Keyword-only after what the API contract lists positionally."""
    t = table
    for call in (
        lambda: t.files("day = '2024-01-01'", 1),
        lambda: t.to_batches("body:spark", "id < 3"),
        lambda: t.explain("body:spark", "id < 3", 1),
        lambda: t.search("body:spark", "id < 3"),
        lambda: t.transaction("fail", 1),
        lambda: t.write(rows(1), "append"),
        lambda: it.IndexTable(t.path, None, None),
        lambda: it.write_table(t.path, rows(1), "append"),
        lambda: it.build_companion("/nowhere", t.path + "_c", "parquet", None, None, None, None, 3),
    ):
        with pytest.raises(TypeError):
            call()
    assert t.version() == 1  # nothing ran


def test_the_contracts_positional_arguments_work(table):
    """The API contract shows these without `*`: positional calls keep working."""
    t = table
    assert t.count("body:spark", "day = '2024-01-01'") == t.count("body:spark", partition_filter="day = '2024-01-01'")
    assert t.to_arrow("id < 3", ["id"]).column_names == ["id"]
    assert t.snapshot(1, None).version == 1
    assert t.transaction("fail").resolver == "fail"
    created = it.IndexTable.create(t.path + "_new", rows(1).schema, ["day"])
    assert created.snapshot().partition_columns == ["day"]


def test_schema_is_what_reads_return(table):
    t = table
    schema = t.schema()
    assert isinstance(schema, pa.Schema) and schema.names == ["id", "body", "day"]  # partition column too
    assert schema == t.to_arrow().schema == t.search("body:spark").schema
    assert schema.field("id").type == pa.int64() and schema.field("day").type == pa.string()
    merged = it.IndexTable(t.path, {"mergeSchema": "true"})
    merged.write(rows(2, start=50).append_column("score", pa.array([1.5, 2.5])))
    assert t.schema().names == ["id", "body", "day", "score"] and t.schema().field("score").type == pa.float64()
    assert t.schema(version=1) == schema and t.schema() == t.to_arrow().schema


def test_one_transaction_writes_and_deletes_in_one_version(table):
    t = table
    v = t.version()
    with t.transaction() as tx:
        staged_write = tx.write(rows(5, start=100))
        assert staged_write.status == "STAGED" and staged_write.rows_written == 5 and staged_write.version == v
        staged = tx.delete("id < 4")
        assert staged.status == "STAGED" and staged.deleted_rows == 4 and staged.version == v
    assert tx.committed_version == v + 1 == t.version()
    ids = sorted(t.to_arrow(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(4, 20)) + list(range(100, 105))
    last = t.inspect.history(limit=1)[0]
    assert last.operation == "WRITE" and last.operation_parameters["operations"] == ["WRITE", "DELETE"]
    # the delete reads the table as the transaction read it: rows its writes add stay
    with t.transaction() as tx:
        tx.write(rows(1, start=200))
        assert tx.delete("id = 200").status == "NO_ACTION"
    assert t.count() == 22
    # a delete matching nothing commits nothing
    with t.transaction() as tx:
        tx.delete("id = 999")
    assert tx.committed_version == v + 2 == t.version()


def test_a_failed_transaction_leaves_no_files(table):
    import os

    t = table
    before = {os.path.join(d, f) for d, _, fs in os.walk(t.path) for f in fs}
    with pytest.raises(RuntimeError):
        with t.transaction() as tx:
            tx.write(rows(5, start=100))
            tx.delete("id = 1")
            raise RuntimeError("abandon")
    assert {os.path.join(d, f) for d, _, fs in os.walk(t.path) for f in fs} == before and t.count() == 20
    with pytest.raises(it.IndexTablesError, match="overwrite must be its first step"):
        with t.transaction() as tx:
            tx.delete("id = 1")
            tx.write(rows(1), mode="overwrite")
    assert {os.path.join(d, f) for d, _, fs in os.walk(t.path) for f in fs} == before


def test_writes_and_deletes_go_through_an_injected_storage(table):
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.storage.counting import CountingStorage

    counting = CountingStorage(open_storage(table.path, table.options))
    t = it.IndexTable(table.path, storage=counting)
    v = t.write(rows(5, start=100)).version
    assert counting.requests["upload_file"] + counting.requests["put"] >= 1  # the splits
    assert counting.requests["put_if_absent"] == 1 and t.version() == v  # the version file
    counting.reset()
    assert t.delete("id = 101").version == v + 1
    # the version file and the delete log (the whole write path used the injected storage)
    assert counting.requests["put_if_absent"] + counting.requests["put"] + counting.requests["upload_file"] >= 2
    counting.reset()
    created = it.IndexTable.create(table.path + "_other", rows(1).schema, partition_by="day")
    assert created.schema().names == ["id", "body", "day"] and counting.requests["put_if_absent"] == 0
