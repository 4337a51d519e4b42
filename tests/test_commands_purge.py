"""PURGE INDEXTABLE: what it deletes, what it never deletes, dry runs, retention checks, and safety
under concurrent appends and merges (every retained version still reads)."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

import indextables_spark as it
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.errors import InvalidOptionError, VersionNotFoundError

from cmd_helpers import age_tree, append, read_all, rows, small_splits_table

DAY_H = 24.0


def _files(root: str) -> dict[str, float]:
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            full = os.path.join(d, n)
            out[os.path.relpath(full, root).replace(os.sep, "/")] = os.stat(full).st_mtime
    return out


def _plant_orphan(root: str, like: str, name: str) -> str:
    """A copy of a split that no version references (e.g. left by a failed job)."""
    rel = os.path.join(os.path.dirname(like), name)
    shutil.copyfile(os.path.join(root, like), os.path.join(root, rel))
    return rel.replace(os.sep, "/")


def _check_retained_versions(t: it.IndexTable) -> list[int]:
    """Every retained version reads: all its splits exist and hold the rows the log says."""
    versions = t.log.list_versions()
    for v in versions:
        snap = t.snapshot(v)
        assert len(read_all(t, v)) == sum(f.num_records for f in snap.files), f"version {v}"
    return versions


def test_purge_deletes_old_orphans_and_covered_versions(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 6)  # versions 0..5, 18 splits
    t = it.IndexTable(path)
    merged = t.maintenance.merge_splits()  # version 6 (+ its compacted state): 18 removes, 3 adds
    assert merged["version"] == 6
    expected = read_all(t)
    some_split = t.snapshot().files[0].path
    orphan = _plant_orphan(path, some_split, "split-orphan.split")
    with open(os.path.join(path, "notes.txt"), "w") as fh:
        fh.write("not a split: never purged")

    # Everything is young: nothing goes (the orphan is too young, the sources are referenced).
    res = t.maintenance.purge()
    assert res["status"] == "SUCCESS" and res["splitsDeleted"] == 0 and res["versionFilesDeleted"] == 0
    assert res["orphanedSplitsFound"] == 1 and res["youngOrphansKept"] == 1

    # Ten days later (file times moved back): the 18 merged-away sources and the orphan are orphans.
    age_tree(path, 10 * DAY_H)
    before = _files(path)
    dry = execute(
        parse_command(f"PURGE INDEXTABLE '{path}' OLDER THAN 7 DAYS TRANSACTION LOG RETENTION 7 DAYS DRY RUN")
    )
    assert _files(path) == before  # a dry run deletes nothing
    assert dry.raw["status"] == "DRY_RUN" and dry.raw["splitsDeleted"] == 19
    assert dry.raw["versionFilesDeleted"] == 6 and dry.raw["oldestRetainedVersion"] == 6
    assert orphan in dry.raw["deletedSplits"] and some_split not in dry.raw["deletedSplits"]
    assert dry.table.column("splits_deleted").to_pylist() == [19]

    res = t.maintenance.purge(older_than_hours=7 * DAY_H, tx_log_retention_hours=7 * DAY_H)
    assert {k: res[k] for k in ("splitsDeleted", "versionFilesDeleted", "bytesDeleted")} == {
        k: dry.raw[k] for k in ("splitsDeleted", "versionFilesDeleted", "bytesDeleted")
    }
    after = _files(path)
    assert sorted(set(before) - set(after)) == sorted(
        res["deletedSplits"] + [f"_transaction_log/{v:020d}.json" for v in range(6)]
    )
    assert "notes.txt" in after and all(f.path in after for f in t.snapshot().files)
    assert read_all(it.IndexTable(path)) == expected
    assert _check_retained_versions(it.IndexTable(path)) == [6]
    with pytest.raises(VersionNotFoundError):
        it.IndexTable(path).snapshot(5)
    # Nothing left to do.
    again = t.maintenance.purge(older_than_hours=7 * DAY_H, tx_log_retention_hours=7 * DAY_H)
    assert again["splitsDeleted"] == 0 and again["versionFilesDeleted"] == 0


def test_purge_keeps_history_readable_from_a_checkpoint(tmp_path):
    """Version files go only below a checkpoint all older ones are covered by; every version left reads."""
    path = str(tmp_path / "t")
    opts = {"checkpoint.interval": "3"}
    small_splits_table(path, 5, options=opts)  # versions 0..4, state at 3
    t = it.IndexTable(path, opts)
    t.maintenance.drop_partitions("day = '2024-01-03'")  # version 5
    age_tree(path, 10 * DAY_H)  # 0..5 and their splits are old
    small_splits_table(str(tmp_path / "t"), 2, options=opts)  # versions 6, 7 (young), state at 6
    t.maintenance.merge_splits(where="day = '2024-01-01'")  # version 8 (young)
    res = t.maintenance.purge(older_than_hours=7 * DAY_H, tx_log_retention_hours=7 * DAY_H)
    # The newest checkpoint with only old versions below it is the state of version 6 (versions 0..5 old).
    assert res["oldestRetainedVersion"] == 6 and res["versionFilesDeleted"] == 6
    # The dropped day-3 splits are old and no retained version file references them, but the state of
    # version 3 is still retained (state.retention.versions=2) and reads on its own: its four day-3
    # splits stay. Only the one added in version 4 goes. Merged-away day-1 sources are referenced by
    # versions 6..7 (time travel): kept.
    assert res["splitsDeleted"] == 1 and res["deletedSplits"][0].startswith("day=2024-01-03/")
    t = it.IndexTable(path, opts)
    assert _check_retained_versions(t) == [6, 7, 8]
    state3 = t.snapshot(3)
    assert len(read_all(t, 3)) == sum(f.num_records for f in state3.files)
    with pytest.raises(VersionNotFoundError):
        t.snapshot(4)


def test_purge_retention_checks_and_bad_paths(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 1)
    t = it.IndexTable(path)
    with pytest.raises(InvalidOptionError, match=r"OLDER THAN\) of 1 hours is below the minimum of 24 hours"):
        t.maintenance.purge(older_than_hours=1)
    with pytest.raises(InvalidOptionError, match="retentionCheckEnabled=false"):
        execute(parse_command(f"PURGE INDEXTABLE '{path}' TRANSACTION LOG RETENTION 2 HOURS"))
    with pytest.raises(InvalidOptionError, match="minimum of 48 hours"):
        it.IndexTable(path, {"purge.minRetentionHours": "48"}).maintenance.purge(older_than_hours=30)
    # Explicit override: a young orphan goes at once.
    orphan = _plant_orphan(path, t.snapshot().files[0].path, "split-young-orphan.split")
    time.sleep(0.01)  # "older than 0 hours": at least a millisecond old
    res = it.IndexTable(path, {"spark.indextables.purge.retentionCheckEnabled": "false"}).maintenance.purge(
        older_than_hours=0
    )
    assert res["deletedSplits"] == [orphan] and not os.path.exists(os.path.join(path, orphan))
    with pytest.raises(it.TableNotFoundError):
        it.IndexTable(str(tmp_path / "missing")).maintenance.purge()
    with pytest.raises(it.TableNotFoundError):
        execute(parse_command(f"PURGE INDEXTABLE '{tmp_path}/missing' DRY RUN"))


def test_concurrent_append_and_purge_never_delete_a_referenced_split(tmp_path):
    path = str(tmp_path / "t")
    opts = {"checkpoint.interval": "4", "transaction.retry.maxAttempts": "50"}
    small_splits_table(path, 4, options=opts)
    t = it.IndexTable(path, opts)
    t.maintenance.merge_splits()
    orphans = [_plant_orphan(path, t.snapshot().files[0].path, f"split-orphan-{i}.split") for i in range(3)]
    age_tree(path, 10 * DAY_H)  # all history so far is old: purges delete aggressively
    errors: list[BaseException] = []
    done = threading.Event()

    def writer():
        try:
            for i in range(8):
                append(path, rows(20, start=1000 + i * 20), options=opts)
                if i % 3 == 2:
                    it.IndexTable(path, opts).maintenance.merge_splits()
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        finally:
            done.set()

    th = threading.Thread(target=writer)
    th.start()
    purges = []
    while not done.is_set() or not purges:
        purges.append(it.IndexTable(path, opts).maintenance.purge(older_than_hours=DAY_H, tx_log_retention_hours=DAY_H))
        time.sleep(0.05)
    th.join()
    assert not errors, errors
    t = it.IndexTable(path, opts)
    assert sum(p["splitsDeleted"] for p in purges) >= len(orphans)
    assert not any(os.path.exists(os.path.join(path, o)) for o in orphans)
    # The latest version and every retained version read completely.
    versions = _check_retained_versions(t)
    assert versions[-1] == t.version() and len(read_all(t)) == 4 * 20 + 8 * 20
    assert all(os.path.exists(os.path.join(path, f.path)) for v in versions for f in t.snapshot(v).files)
