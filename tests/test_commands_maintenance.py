"""DROP PARTITIONS, REPAIR, DESCRIBE (state, transaction log), CHECKPOINT/COMPACT/TRUNCATE through
the command dispatcher, and a tour of the commands on every storage backend."""

from __future__ import annotations

import datetime as dt
import json
import hashlib
import os
import shutil

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.frontends.execute import spark_schema
from indextables_spark import results as it_results
from indextables_spark.results.record import python_rows
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.errors import InvalidOptionError, TableExistsError
from indextables_spark.expr.partition_filter import PartitionFilterError
from indextables_spark.ops.registry import OPERATIONS

from cmd_helpers import age_tree, append, query_ids, read_all, rows, small_splits_table, split_rows


def run(text: str, options=None):
    return execute(parse_command(text), options)


def _tree_digest(root: str) -> dict[str, str]:
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            full = os.path.join(d, n)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_drop_partitions(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 3)
    t = it.IndexTable(path)
    before = read_all(t)
    res = run(f"DROP INDEXTABLES PARTITIONS FROM '{path}' WHERE day = '2024-01-02' OR day > '2024-01-02'")
    assert res.raw["status"] == "SUCCESS" and res.raw["partitionsDropped"] == 2 and res.raw["splitsRemoved"] == 6
    assert res.raw["partitions"] == ["day=2024-01-02", "day=2024-01-03"]
    assert res.table.column("records_removed").to_pylist() == [sum(1 for r in before if r[4] != "2024-01-01")]
    t = it.IndexTable(path)
    assert read_all(t) == [r for r in before if r[4] == "2024-01-01"]
    actions = t.log.read_actions(res.raw["version"])
    removes = [a for a in actions if isinstance(a, it.RemoveFile)]
    assert len(removes) == 6 and all(r.data_change and r.size and r.partition_values for r in removes)
    assert all(os.path.exists(os.path.join(path, r.path)) for r in removes)  # logical: PURGE deletes later
    assert read_all(t, res.raw["version"] - 1) == before  # time travel still sees them
    # Nothing matches: no new version.
    again = t.maintenance.drop_partitions("day = '2024-01-02'")
    assert again["status"] == "NO_ACTION" and again["version"] is None and t.version() == res.raw["version"]
    # Only partition columns; WHERE is mandatory; a table without partitions cannot drop any.
    with pytest.raises(PartitionFilterError, match=r"column 'region' at position 0 is not a partition column"):
        t.maintenance.drop_partitions("region = 'eu'")
    with pytest.raises(InvalidOptionError, match="needs a WHERE predicate"):
        t.maintenance.drop_partitions("  ")
    flat = str(tmp_path / "flat")
    small_splits_table(flat, 1, partition_by=())
    with pytest.raises(InvalidOptionError, match="has no partition columns"):
        it.IndexTable(flat).maintenance.drop_partitions("day = 'x'")
    with pytest.raises(it.TableNotFoundError):
        run(f"DROP INDEXTABLES PARTITIONS FROM '{tmp_path}/nope' WHERE day = 'x'")


def test_repair_writes_a_clean_log_and_never_touches_the_source(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 4)
    t = it.IndexTable(path)
    t.maintenance.merge_splits(where="day = '2024-01-01'")
    before = read_all(t)
    expected_q = query_ids(t, "alpha")
    lost = sorted(f.path for f in t.snapshot().files if f.partition_values["day"] == "2024-01-03")[0]
    lost_rows = split_rows(t, next(f for f in t.snapshot().files if f.path == lost))
    os.unlink(os.path.join(path, lost))
    digest = _tree_digest(path)
    target = str(tmp_path / "repaired_log")
    res = run(f"REPAIR INDEXFILES TRANSACTION LOG '{path}/_transaction_log' AT LOCATION '{target}'")
    assert res.raw["status"] == "SUCCESS" and res.raw["sourceVersion"] == t.version()
    assert res.raw["totalSplits"] == t.snapshot().num_files and res.raw["missingSplits"] == 1
    assert res.raw["missingPaths"] == [lost] and res.raw["validSplits"] == res.raw["totalSplits"] - 1
    assert _tree_digest(path) == digest  # the source is only read
    assert os.listdir(target) == ["00000000000000000000.json"]
    # Swap the repaired log in: the table reads every row but the lost split's.
    shutil.move(os.path.join(path, "_transaction_log"), str(tmp_path / "old_log"))
    shutil.move(target, os.path.join(path, "_transaction_log"))
    r = it.IndexTable(path)
    assert r.version() == 0 and r.inspect.history()[0]["operation"] == "REPAIR TRANSACTION LOG"
    assert read_all(r) == sorted(set(before) - set(lost_rows))
    assert set(query_ids(r, "alpha")) == set(expected_q) - {row[0] for row in lost_rows}
    assert r.snapshot().metadata_action.partition_columns == ["day"]
    # Errors: target not empty, target is the source, source not a _transaction_log, no table.
    os.makedirs(str(tmp_path / "busy"))
    open(str(tmp_path / "busy" / "x"), "w").close()
    with pytest.raises(TableExistsError, match="is not empty"):
        r.maintenance.repair_transaction_log(str(tmp_path / "busy"))
    with pytest.raises(InvalidOptionError, match="must be a table's _transaction_log directory"):
        run(f"REPAIR INDEXFILES TRANSACTION LOG '{path}' AT LOCATION '{tmp_path}/x'")
    with pytest.raises(InvalidOptionError, match="is the source"):
        run(f"REPAIR INDEXFILES TRANSACTION LOG '{path}/_transaction_log' AT LOCATION '{path}/_transaction_log/'")
    with pytest.raises(it.TableNotFoundError):
        run(f"REPAIR INDEXFILES TRANSACTION LOG '{tmp_path}/nope/_transaction_log' AT LOCATION '{tmp_path}/y'")


def test_describe_transaction_log_and_state(tmp_path):
    path = str(tmp_path / "t")
    opts = {"checkpoint.interval": "2"}
    small_splits_table(path, 3, options=opts)  # versions 0..2, state at 2
    t = it.IndexTable(path, opts)
    t.maintenance.drop_partitions("day = '2024-01-03'")  # version 3
    # Current: the state of version 2 (is_checkpoint rows) and version 3.
    cur = t.inspect.transaction_log()
    assert cur.schema == it_results.TransactionLogRow.arrow_schema()
    rows_ = python_rows(cur)
    cp = [r for r in rows_ if r["is_checkpoint"]]
    assert {r["version"] for r in cp} == {2} and cp[0]["log_file_path"].endswith(
        "state-v00000000000000000002/_manifest.avro"
    )
    assert [r["action_type"] for r in cp][:2] == ["protocol", "metadata"]
    assert sum(1 for r in cp if r["action_type"] == "add") == 9
    later = [r for r in rows_ if not r["is_checkpoint"]]
    assert {r["version"] for r in later} == {3}
    removes = [r for r in later if r["action_type"] == "remove"]
    assert len(removes) == 3 and all(r["commit_operation"] == "DROP PARTITIONS" for r in removes)
    assert isinstance(removes[0]["deletion_timestamp"], dt.datetime) and removes[0]["partition_values"] == {
        "day": "2024-01-03"
    }
    add = next(r for r in cp if r["action_type"] == "add")
    assert add["num_records"] > 0 and add["has_footer_offsets"] and add["doc_mapping_ref"] and add["min_values"]
    # INCLUDE ALL: every version file, oldest first, no checkpoint rows.
    everything = run(f"DESCRIBE INDEXTABLES TRANSACTION LOG '{path}' INCLUDE ALL", opts).raw
    assert everything.column("version").to_pylist() == sorted(everything.column("version").to_pylist())
    assert set(everything.column("version").to_pylist()) == {0, 1, 2, 3} and not any(
        everything.column("is_checkpoint").to_pylist()
    )
    kinds = python_rows(everything)
    assert {r["action_type"] for r in kinds} == {"commit_info", "protocol", "metadata", "add", "remove"}
    meta = next(r for r in kinds if r["action_type"] == "metadata")
    assert meta["metadata_partition_columns"] == ["day"] and "body" in meta["metadata_schema_string"]

    state = run(f"DESCRIBE INDEXTABLES STATE '{path}'", opts)
    assert state.raw["format"] == "avro-state" and state.raw["version"] == 2 and state.raw["tableVersion"] == 3
    row = python_rows(state.table)[0]
    assert row["needs_compaction"] is False and row["num_files"] == 9 and row["skipped_files"] == []
    assert row["partition_columns"] == ["day"] and row["num_skipped_files"] == 0
    with pytest.raises(it.TableNotFoundError):
        run(f"DESCRIBE INDEXTABLES STATE '{tmp_path}/none'")
    with pytest.raises(it.TableNotFoundError):
        it.IndexTable(str(tmp_path / "none")).inspect.transaction_log()


def test_checkpoint_compact_truncate_through_the_dispatcher(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 3, options={"checkpoint.enabled": "false"})
    t = it.IndexTable(path)
    cp = run(f"CHECKPOINT INDEXTABLES '{path}'")
    assert cp.raw["status"] == "SUCCESS" and cp.raw["version"] == 2 and cp.table.column("num_files").to_pylist() == [9]
    t.maintenance.drop_partitions("day = '2024-01-01'")
    comp = run(f"COMPACT INDEXTABLES '{path}'")
    assert comp.raw["version"] == 3 and comp.raw["compacted"] is True and comp.raw["numTombstones"] == 0
    dry = run(f"TRUNCATE INDEXTABLES TIME TRAVEL '{path}' DRY RUN")
    assert dry.raw["dryRun"] is True and dry.raw["status"] == "DRY_RUN" and dry.raw["versionFilesRemoved"] == 3
    assert t.log.list_versions() == [0, 1, 2, 3]
    done = run(f"TRUNCATE INDEXTABLES TIME TRAVEL '{path}'")
    assert done.raw["status"] == "SUCCESS" and t.log.list_versions() == [3]
    assert len(read_all(it.IndexTable(path))) == 40
    with pytest.raises(it.TableNotFoundError):
        run(f"CHECKPOINT INDEXTABLES '{tmp_path}/none'")


def test_result_columns_are_the_dataclass_fields():
    """SQL columns come from the result dataclass's fields (a mistyped field fails loudly, never a
    silent NULL); the dict form is the camelCase JSON; results are frozen and read-only."""
    import dataclasses
    import pickle

    from indextables_spark import results as r

    res = r.MergeSplitsResult(
        table_path="/t",
        status="SUCCESS",
        target_size=5,
        duration_ms=1,
        skipped_files=[r.SkippedFile("a", "r", "merge", skip_timestamp=1000, retry_after=2000, skip_count=2)],
    )
    assert r.MergeSplitsResult.column_names() == [f.name for f in dataclasses.fields(r.MergeSplitsResult)]
    table = r.MergeSplitsResult.table([res])
    assert table.schema == r.MergeSplitsResult.arrow_schema() and table.num_rows == 1
    row = python_rows(table)[0]
    assert (
        row["table_path"] == "/t" and row["target_size"] == 5 and row["duration_ms"] == 1.0 and row["version"] is None
    )
    skip = row["skipped_files"][0]
    assert skip["skip_count"] == 2 and skip["retry_after"] == dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.timezone.utc)
    # the dict / JSON form
    assert res["tablePath"] == "/t" and res["skippedFiles"][0]["retryAfter"] == 2000 and isinstance(res, dict)
    assert res == res.to_dict() and json.loads(json.dumps(res))["targetSize"] == 5
    assert pickle.loads(pickle.dumps(res)) == res and pickle.loads(pickle.dumps(res)).skipped_files[0].path == "a"
    with pytest.raises(TypeError):
        res["status"] = "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.status = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.MergeSplitsResult(table_path="/t", status="SUCCESS", splits_createdd=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        r.MergeSplitsResult.table([{"tablePath": "/t"}])  # type: ignore[list-item]  # a dict is not a result
    assert dataclasses.replace(res, version=3)["version"] == 3
    # every operation's output columns: its result class's fields
    for op in OPERATIONS:
        result = op.load().result
        assert spark_schema(result).fieldNames() == result.arrow_schema().names == result.column_names(), op.name
    assert pa.types.is_timestamp(r.DescribeStateResult.arrow_schema().field("created_at").type)


def test_commands_on_every_backend(storage_backend):
    """Merge, drop, describe, purge and repair on local disk, S3 and Azure."""
    uri, opts = storage_backend.uri, storage_backend.options
    for w in range(4):
        append(uri, rows(15, start=w * 15), options=opts)
    t = it.IndexTable(uri, opts)
    before = read_all(t)
    res = t.maintenance.merge_splits()
    assert res["status"] == "SUCCESS" and t.snapshot().num_files == 3 and read_all(t) == before
    assert t.maintenance.drop_partitions("day = '2024-01-03'")["splitsRemoved"] == 1
    assert run(f"DESCRIBE INDEXTABLES STATE '{uri}'", opts).raw["numFiles"] == 3  # state at the merge version
    log_rows = t.inspect.transaction_log(include_all=True)
    assert set(log_rows.column("version").to_pylist()) == set(range(t.version() + 1))
    # Purge a while from now (object stores keep their own file times): the 12 merged-away sources
    # are old enough but referenced by retained versions; nothing referenced goes.
    import time

    later = int(time.time() * 1000) + 10 * 24 * 3600 * 1000
    from indextables_spark.ops.maintenance.purge import purge

    p = purge(t.log, older_than_hours=7 * 24, tx_log_retention_hours=30 * 24, now_ms=later)
    assert p["splitsDeleted"] == 0 and p["orphanedSplitsFound"] == 0
    p = purge(t.log, older_than_hours=7 * 24, tx_log_retention_hours=7 * 24, now_ms=later)
    assert p["versionFilesDeleted"] == res["version"] and p["splitsDeleted"] == 12  # history before the merge's state
    assert len(read_all(it.IndexTable(uri, opts))) == len([r for r in before if r[4] != "2024-01-03"])
    target = storage_backend.child("repaired").uri
    rep = it.IndexTable(uri, opts).maintenance.repair_transaction_log(target)
    assert rep["validSplits"] == 2 and rep["missingSplits"] == 0


def test_repair_and_purge_keep_row_level_deletes(tmp_path):
    """Delete logs survive REPAIR (a split whose delete log is lost is left out) and are purged with
    the splits they belong to once nothing references them."""
    from cmd_helpers import live_rows

    path = str(tmp_path / "t")
    small_splits_table(path, 3)
    t = it.IndexTable(path)
    t.delete("views < 300")  # positional delete logs
    t.delete("region = 'eu'", kind="equality")  # an equality log: splits added before it
    append(path, rows(30, start=900))  # added after: its 'eu' rows stay
    expected = live_rows(t)
    assert expected and not any(r[2] < 300 for r in expected if r[0] < 900)
    assert any(r[3] == "eu" for r in expected if r[0] >= 900) and not any(r[3] == "eu" for r in expected if r[0] < 900)
    snap = t.snapshot()
    assert snap.delete_logs
    # Lose one positional delete log: its split must not come back with deleted rows.
    positional = next(d for d in snap.delete_logs if d.kind == "POSITIONAL")
    os.rename(os.path.join(path, positional.path), str(tmp_path / "lost.dlog"))
    target = str(tmp_path / "repaired")
    res = t.maintenance.repair_transaction_log(target)
    assert res["missingDeleteLogs"] == [positional.path] and res["missingPaths"] == [positional.split_path]
    assert res["deleteLogs"] == len(snap.delete_logs) - 1
    os.rename(str(tmp_path / "lost.dlog"), os.path.join(path, positional.path))
    shutil.move(os.path.join(path, "_transaction_log"), str(tmp_path / "old_log"))
    shutil.move(target, os.path.join(path, "_transaction_log"))
    repaired = it.IndexTable(path)
    left_out = {r[0] for r in split_rows(t, next(f for f in snap.files if f.path == positional.split_path))}
    assert live_rows(repaired) == [r for r in expected if r[0] not in left_out]  # deletes still applied
    # Back to the original log; merge rewrites the deletes away, then PURGE drops the old logs.
    shutil.rmtree(os.path.join(path, "_transaction_log"))
    shutil.move(str(tmp_path / "old_log"), os.path.join(path, "_transaction_log"))
    t = it.IndexTable(path)
    t.maintenance.merge_splits()
    assert live_rows(t) == expected
    age_tree(path, 24 * 30)
    p = t.maintenance.purge(older_than_hours=24 * 7, tx_log_retention_hours=24 * 7)
    gone = set(p["deletedSplits"])
    assert {d.path for d in snap.delete_logs} <= gone and not os.listdir(os.path.join(path, "_delete_logs"))
    assert live_rows(it.IndexTable(path)) == expected


def test_describe_transaction_log_shows_delete_logs_and_stats_files(tmp_path):
    path = str(tmp_path / "t")
    opts = {"spark.indextables.indexing.bloomfilter.columns": "region", "checkpoint.interval": "3"}
    small_splits_table(path, 2, options=opts)
    t = it.IndexTable(path, opts)
    t.delete("views < 100")  # version 2: positional logs
    rows_ = python_rows(t.inspect.transaction_log(include_all=True))
    logs = [r for r in rows_ if r["action_type"] == "delete_log"]
    assert logs and all(
        r["version"] == 2
        and r["delete_log_kind"] == "POSITIONAL"
        and r["delete_log_split_path"]
        and r["delete_log_num_entries"] > 0
        and r["path"].startswith("_delete_logs/")
        for r in logs
    )
    stats = [r for r in rows_ if r["action_type"] == "stats_files"]
    assert {r["stats_key"] for r in stats} == {"bloomfilter"} and sum(len(r["stats_files"]) for r in stats) == 6
    append(path, rows(20, start=500), options=opts)  # version 3: a checkpoint
    current = python_rows(t.inspect.transaction_log())
    cp = [r for r in current if r["is_checkpoint"]]
    assert {r["version"] for r in cp} == {3}
    assert {r["path"] for r in cp if r["action_type"] == "delete_log"} == {r["path"] for r in logs}
    assert sum(len(r["stats_files"]) for r in cp if r["action_type"] == "stats_files") == 9
    assert None not in {r["action_type"] for r in current}
