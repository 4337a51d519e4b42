"""MERGE SPLITS without Spark: real splits, real log (the Spark route is in test_sql_commands.py)."""

from __future__ import annotations

import os
import shutil

import pytest

import indextables_spark as it
from indextables_spark.ops.maintenance.merge_plan import MergeConfig, plan_groups, plan_merge
from indextables_spark.ops.maintenance.merge_splits import execute_merge
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.errors import ConcurrentModificationError, InvalidOptionError
from indextables_spark.core.log.model.actions import AddFile, SkipAction

from cmd_helpers import append, as_tuples, query_ids, read_all, rows, small_splits_table, split_rows

QUERIES = ("alpha", "body:bravo AND body:charlie", "zulu OR kilo")


def _live_paths(t: it.IndexTable) -> set[str]:
    return {f.path for f in t.snapshot().files}


def _split_files(root: str) -> set[str]:
    out = set()
    for d, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".split"):
                out.add(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return out


def test_merge_many_small_splits_with_a_corrupt_one(tmp_path):
    """≥ 50 small splits over 3 partitions; one corrupt split is skipped (mergeskip) and left live;
    the next merge honours the cooldown; rows and query results are the same throughout."""
    path = str(tmp_path / "t")
    small_splits_table(path, 18)  # 18 writes × 3 day partitions = 54 splits
    t = it.IndexTable(path)
    files = t.snapshot().files
    assert len(files) == 54
    expected_rows = read_all(t)
    expected_queries = {q: query_ids(t, q) for q in QUERIES}
    assert len(expected_rows) == 18 * 20 and all(expected_queries.values())

    # Corrupt one split of day 2 (same size, garbage bytes); keep the original to restore it later.
    victim = next(f for f in sorted(files, key=lambda f: f.path) if f.partition_values["day"] == "2024-01-02")
    victim_rows = split_rows(t, victim)
    victim_file = os.path.join(path, victim.path)
    shutil.copyfile(victim_file, str(tmp_path / "victim.bak"))
    with open(victim_file, "r+b") as fh:
        fh.write(b"\xde\xad" * (victim.size // 2))

    # The merge reads through its own (empty) split cache, so it sees the corrupt file.
    merging = it.IndexTable(path, {"cache.disk.path": str(tmp_path / "merge-cache")})
    progress: list[it.Progress] = []
    res = merging.maintenance.merge_splits(progress=progress.append)
    assert res["status"] == "SUCCESS" and res["mergeGroups"] == 3 and res["splitsCreated"] == 3
    assert res["sourceSplitsMerged"] == 53 and res["splitsSkipped"] == 1
    # the splits of each group as it finishes (the corrupt one's group too: it was tried)
    assert progress[0] == it.Progress("merging", 0, 54, "splits") and progress[-1].done == 54
    assert len(progress) == 4 and all(a.done < b.done for a, b in zip(progress, progress[1:]))

    t = it.IndexTable(path)
    snap = t.snapshot()
    assert snap.num_files == 4 and victim.path in _live_paths(t)  # 3 merged + the corrupt one, left in place
    merged = [f for f in snap.files if f.path != victim.path]
    assert all(f.num_merge_ops == 1 and f.data_change is False for f in merged)
    assert sum(f.num_records for f in merged) == len(expected_rows) - victim.num_records
    skip = snap.skips[victim.path]
    assert skip.operation == "merge" and skip.skip_count == 1 and "bad magic" in skip.reason
    assert skip.retry_after - skip.skip_timestamp == 24 * 3600 * 1000
    described = t.inspect.state()
    assert described["numSkippedFiles"] == 1 and described["numSkipsCoolingDown"] == 1
    assert described["skippedFiles"][0]["path"] == victim.path
    assert described["numTombstones"] == 0 and described["version"] == res["version"]  # compacted after merge

    # The version file holds removes (dataChange=false), adds and the mergeskip, atomically.
    actions = t.log.read_actions(res["version"])
    assert sorted({type(a).__name__ for a in actions}) == ["AddFile", "CommitInfo", "RemoveFile", "SkipAction"]
    assert all(not a.data_change for a in actions if isinstance(a, (AddFile, it.RemoveFile)))

    # The merged splits hold exactly the other rows; restoring the victim gives back every result.
    assert read_all(t, exclude={victim.path}) == sorted(set(expected_rows) - set(victim_rows))
    shutil.copyfile(str(tmp_path / "victim.bak"), victim_file)
    assert read_all(t) == expected_rows
    assert {q: query_ids(t, q) for q in QUERIES} == expected_queries

    # Next merge: new small splits merge, the skipped split is not retried before retryAfter.
    append(path, rows(20, start=10_000))
    res2 = merging.maintenance.merge_splits()
    assert res2["status"] == "SUCCESS" and res2["splitsCoolingDown"] == 1 and res2["splitsSkipped"] == 0
    t = it.IndexTable(path)
    assert victim.path in _live_paths(t) and t.snapshot().skips[victim.path].skip_count == 1
    expected_rows = sorted(expected_rows + as_tuples(rows(20, start=10_000)))
    assert read_all(t) == expected_rows
    expected_queries = {q: query_ids(t, q) for q in QUERIES}

    # After retryAfter the (restored) split merges again and its SkipAction is gone.
    plan = plan_merge(merging.log, None, MergeConfig(), now_ms=skip.retry_after + 1)
    res3 = execute_merge(plan)
    assert res3["status"] == "SUCCESS" and res3["splitsSkipped"] == 0 and res3["splitsCoolingDown"] == 0
    t = it.IndexTable(path)
    assert victim.path not in _live_paths(t) and t.snapshot().skips == {} and t.snapshot().num_files == 3
    assert read_all(t) == expected_rows
    assert {q: query_ids(t, q) for q in QUERIES} == expected_queries


def test_missing_source_is_skipped_and_skip_count_grows(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 4, partition_by=())
    t = it.IndexTable(path, {"merge.skipCooldownHours": "0"})
    files = sorted(t.snapshot().files, key=lambda f: f.path)
    gone = files[0]
    os.unlink(os.path.join(path, gone.path))
    res = t.maintenance.merge_splits()
    assert res["splitsSkipped"] == 1 and res["skippedFiles"][0]["path"] == gone.path
    assert "not found" in res["skippedFiles"][0]["reason"]
    # cooldown 0: retried at once, fails again, skipCount 2
    append(path, rows(20, start=500), partition_by=())
    res = it.IndexTable(path, {"merge.skipCooldownHours": "0"}).maintenance.merge_splits()
    assert res["splitsSkipped"] == 1 and res["skippedFiles"][0]["skipCount"] == 2
    t = it.IndexTable(path)
    assert t.inspect.skipped_files()[0].skip_count == 2 and gone.path in _live_paths(t)


def test_concurrent_remove_of_a_source_fails_the_merge_cleanly(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 3)
    t = it.IndexTable(path)
    before_files = _split_files(path)
    plan = plan_merge(t.log)
    assert len(plan.groups.groups) == 3
    t.maintenance.drop_partitions("day = '2024-01-01'")  # removes sources of one group concurrently
    with pytest.raises(ConcurrentModificationError, match="removed concurrently"):
        execute_merge(plan)
    assert _split_files(path) == before_files  # the merged splits were deleted again
    assert it.IndexTable(path).inspect.history()[0]["operation"] == "DROP PARTITIONS"


def test_merge_options_where_and_limits(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 6)
    t = it.IndexTable(path)
    res = t.maintenance.merge_splits(where="day = '2024-01-01'")
    assert res["mergeGroups"] == 1 and res["sourceSplitsMerged"] == 6
    by_day = {}
    for f in it.IndexTable(path).snapshot().files:
        by_day.setdefault(f.partition_values["day"], []).append(f)
    assert len(by_day["2024-01-01"]) == 1 and len(by_day["2024-01-02"]) == 6
    # Through the command text: at most 2 sources per merge, at most 2 destination splits.
    cmd = parse_command(
        f"merge splits '{path}' where day <> '2024-01-01' max source splits per merge 2 max dest splits 2"
    )
    out = execute(cmd)
    assert out.raw["mergeGroups"] == 2 and out.raw["sourceSplitsMerged"] == 4
    assert out.table.column("merge_groups").to_pylist() == [2]
    # A target size smaller than the splits: nothing qualifies.
    assert t.maintenance.merge_splits(target_size="1k")["status"] == "NO_ACTION"
    with pytest.raises(InvalidOptionError, match="at least 2"):
        t.maintenance.merge_splits(max_source_splits_per_merge=1)
    with pytest.raises(it.TableNotFoundError):
        it.IndexTable(str(tmp_path / "nothing")).maintenance.merge_splits()


def _add(i: int, day: str, size: int, version: int, ref: str = "r") -> AddFile:
    return AddFile(
        f"day={day}/splits/s{i}.split",
        {"day": day},
        size,
        1000 + i,
        added_at_version=version,
        doc_mapping_ref=ref,
        num_records=10,
    )


def test_plan_groups_bin_packing():
    cfg = MergeConfig(target_size=100, max_source_splits_per_merge=3)
    files = [_add(i, "a", 30, i) for i in range(7)] + [_add(10 + i, "b", 20, 20 + i) for i in range(2)]
    files += [_add(50, "a", 45, 0), _add(51, "a", 10, 0, ref="other")]  # too large (>= 45%), other mapping
    now = 10_000
    skips = {files[1].path: SkipAction(files[1].path, 1, "bad", "merge", retry_after=now + 1)}
    plan = plan_groups(files, skips, now, cfg, "r")
    assert plan.too_large == 1 and plan.other_mapping == [files[-1].path] and plan.cooling_down == [files[1].path]
    sizes = [[f.path for f in g.sources] for g in plan.groups]
    # partition a (oldest first, skipping the cooling-down s1): [s0,s2,s3] (90), [s4,s5,s6]; then b: [s10,s11]
    assert sizes == [
        ["day=a/splits/s0.split", "day=a/splits/s2.split", "day=a/splits/s3.split"],
        ["day=a/splits/s4.split", "day=a/splits/s5.split", "day=a/splits/s6.split"],
        ["day=b/splits/s10.split", "day=b/splits/s11.split"],
    ]
    assert [g.partition_values for g in plan.groups] == [{"day": "a"}, {"day": "a"}, {"day": "b"}]
    limited = plan_groups(files, {}, now, MergeConfig(target_size=100, max_dest_splits=1), "r")
    assert len(limited.groups) == 1 and limited.groups[0].sources[0].path == "day=a/splits/s0.split"
    # An expired skip no longer keeps a split out.
    assert plan_groups(files, skips, now + 2, cfg, "r").cooling_down == []


def test_merged_splits_keep_their_stats_files(tmp_path):
    """With Bloom filters configured (a table setting), a merged split gets its own Bloom filter file,
    listed in the same version; PURGE later removes the sources' ones with the sources."""
    from cmd_helpers import age_tree

    path = str(tmp_path / "t")
    small_splits_table(path, 3, options={"spark.indextables.indexing.bloomfilter.columns": "region"})
    t = it.IndexTable(path)
    before = t.snapshot().stats_files["bloomfilter"]
    assert len(before) == 9
    res = t.maintenance.merge_splits()
    snap = it.IndexTable(path).snapshot()
    blooms = snap.stats_files["bloomfilter"]
    assert res["splitsCreated"] == 3 and len(blooms) == 3
    assert {b.rsplit(".", 1)[0] for b in blooms} == {f.path.rsplit(".", 1)[0] for f in snap.files}
    assert all(os.path.exists(os.path.join(path, b)) for b in blooms)
    age_tree(path, 24 * 30)
    p = t.maintenance.purge(older_than_hours=24 * 7, tx_log_retention_hours=24 * 7)
    assert set(before) <= set(p["deletedSplits"]) and not set(blooms) & set(p["deletedSplits"])
    assert all(not os.path.exists(os.path.join(path, b)) for b in before)
