"""The commit policy (core/log/commit/policy.py): one retry loop for every writer. Lost races are
retried for a time budget, with backoff and jitter, not a small count; a conflict the protocol's
rules refuse fails at once; DELETE, a write over a table created meanwhile and a companion sync
plan again through the same loop. The racing proof on three stores: test_reliability_commit_race.py."""

from __future__ import annotations

import os
import sys
import time

import pytest

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.core.log.commit.policy import CommitPolicy, Lost, replan, retry
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.errors import CommitRetriesExhaustedError, ConcurrentModificationError, InvalidOptionError

sys.path.insert(0, os.path.dirname(__file__))
from cmd_helpers import append, rows  # noqa: E402
from test_commit_concurrency import create_table  # noqa: E402
from test_deletes import RacingStorage, docs, make_table  # noqa: E402

FAST = {"transaction.retry.baseDelayMs": "1", "transaction.retry.maxDelayMs": "5", "checkpoint.enabled": "false"}


def _add(name: str) -> AddFile:
    return AddFile(f"splits/{name}.split", {}, 1, 0, num_records=1)


# ---- the policy, pure -------------------------------------------------------------------------------


def test_defaults_and_options():
    p = CommitPolicy.from_options(Options.of({}))
    assert (p.time_budget_ms, p.base_delay_ms, p.max_delay_ms, p.max_attempts) == (120_000, 100, 1000, None)
    p = CommitPolicy.from_options(Options.of({"spark.indextables.transaction.retry.maxAttempts": "7"}))
    assert p.max_attempts == 7 and p.cap_key == "transaction.retry.maxAttempts"
    p = CommitPolicy.from_options(Options.of({"delete.maxAttempts": "2"}), cap_key="delete.maxAttempts")
    assert p.max_attempts == 2
    p = CommitPolicy.from_options(Options.of({"state.retry.timeBudgetMs": "5"}), "state.retry")
    assert p.time_budget_ms == 5 and p.cap_key == "state.retry.maxAttempts"
    for key, value in (("timeBudgetMs", "-1"), ("baseDelayMs", "-5"), ("maxAttempts", "0")):
        with pytest.raises(InvalidOptionError, match=f"transaction.retry.{key}"):
            CommitPolicy.from_options(Options.of({f"transaction.retry.{key}": value}))


def test_backoff_doubles_to_the_cap_and_jitter_cuts_it():
    p = CommitPolicy(base_delay_ms=100, max_delay_ms=1000, jitter=0.5)
    assert p.delay_s(2, 0.9) == 0.0  # the first retry at once: the loser has just read the newest version
    assert [p.delay_s(n, 0.0) for n in range(3, 9)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert p.delay_s(5, 0.5) == pytest.approx(0.3) and p.delay_s(10_000, 0.0) == 1.0


def test_retry_spends_the_budget_then_names_table_operation_attempts_time_and_option():
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    policy = CommitPolicy(time_budget_ms=1000, base_delay_ms=125, max_delay_ms=500, jitter=0.0)
    with pytest.raises(CommitRetriesExhaustedError) as e:
        retry(policy, lambda n: Lost(f"version {n} was taken"), "s3://b/t", "WRITE", clock=lambda: now[0], sleep=sleep)
    assert waits == [0.0, 0.125, 0.25, 0.5, 0.125]  # the last wait cut to the budget: one more try at its end
    assert (e.value.attempts, e.value.elapsed_s, e.value.table_path, e.value.operation) == (6, 1.0, "s3://b/t", "WRITE")
    text = str(e.value)
    assert "WRITE on s3://b/t: gave up after 6 attempts in 1.0 s" in text and "last: version 6 was taken" in text
    assert "raise spark.indextables.transaction.retry.timeBudgetMs (now 1000 ms)" in text
    # a value ends it; so does a cap, which the error names
    assert retry(policy, lambda n: n if n == 3 else Lost("x"), "t", "W", sleep=lambda s: None).attempts == 3
    with pytest.raises(
        CommitRetriesExhaustedError, match=r"2 attempts .* raise spark.indextables.transaction.retry.maxAt"
    ):
        retry(CommitPolicy(max_attempts=2), lambda n: Lost("x"), "t", "W", sleep=lambda s: None)


def test_replan_retries_what_it_may_and_raises_the_rest():
    calls: list[int] = []

    def attempt(n: int) -> str:
        calls.append(n)
        if n < 3:
            raise ConcurrentModificationError(f"conflict {n}")
        return "done"

    assert replan(CommitPolicy(base_delay_ms=0), attempt, "t", "DELETE") == "done" and calls == [1, 2, 3]
    with pytest.raises(ConcurrentModificationError, match="conflict 1"):
        replan(CommitPolicy(), attempt, "t", "DELETE", retryable=lambda e: False)
    spent = CommitRetriesExhaustedError("a commit's own budget")
    with pytest.raises(CommitRetriesExhaustedError, match="own budget"):  # never planned again
        replan(CommitPolicy(), lambda n: (_ for _ in ()).throw(spent), "t", "DELETE")


# ---- every writer goes through it -------------------------------------------------------------------


def test_an_append_that_loses_15_races_in_a_row_commits(tmp_path):
    path = str(tmp_path / "t")
    create_table(path, FAST)
    n = iter(range(100))

    def race() -> None:
        it.IndexTable(path, FAST).transaction().add_files([_add(f"other-{next(n)}")]).commit()

    racing = it.IndexTable(path, FAST, storage=RacingStorage(path, race, times=15))
    txn = racing.transaction().add_files([_add("mine")])
    assert txn.commit() == 16 and txn.attempts == 16 and txn.commit_s > 0
    t = it.IndexTable(path)
    assert [[a.path for a in t.log.read_actions(v) if isinstance(a, AddFile)] for v in range(1, 17)] == [
        [f"splits/other-{i}.split"] for i in range(15)
    ] + [["splits/mine.split"]]

    # maxAttempts, when set, still caps the attempts; nothing is committed then
    capped = {**FAST, "transaction.retry.maxAttempts": "10"}
    racing = it.IndexTable(path, capped, storage=RacingStorage(path, race, times=15))
    with pytest.raises(CommitRetriesExhaustedError, match=r"WRITE on .*t: gave up after 10 attempts") as e:
        racing.transaction().add_files([_add("capped")]).commit()
    assert "spark.indextables.transaction.retry.maxAttempts (now 10" in str(e.value)
    assert "splits/capped.split" not in {f.path for f in it.IndexTable(path).snapshot().files}


def test_a_real_conflict_fails_at_once(tmp_path):
    path = str(tmp_path / "t")
    t = create_table(path, FAST)
    t.transaction().add_files([_add("a")]).commit()
    loser = it.IndexTable(path, {**FAST, "transaction.retry.baseDelayMs": "10000"}).transaction()
    loser.remove_files(["splits/a.split"])
    t.transaction().remove_files(["splits/a.split"]).commit()
    started = time.monotonic()
    with pytest.raises(ConcurrentModificationError, match="splits/a.split was removed concurrently") as e:
        loser.commit()
    assert type(e.value) is ConcurrentModificationError and time.monotonic() - started < 5


def test_a_delete_capped_by_delete_max_attempts(tmp_path):
    path = str(tmp_path / "t")
    make_table(path)
    racing = it.IndexTable(
        path,
        {"delete.maxAttempts": "1"},
        storage=RacingStorage(path, lambda: it.IndexTable(path).maintenance.merge_splits()),
    )
    with pytest.raises(CommitRetriesExhaustedError, match=r"DELETE on .*1 attempts.*spark.indextables.delete.maxAt"):
        racing.delete("views < 300")


def test_a_write_planned_before_another_job_created_the_table_commits_as_an_append(tmp_path):
    from pyspark.sql.types import StructType

    from indextables_spark.core.schema.arrow_types import spark_schema_json
    from indextables_spark.ops.write.write import commit_write
    from indextables_spark.spark.writer import plan_write, write_splits

    def planned(path: str, partition_by: str):
        data = docs(10, start=1000)
        opts = Options.of({"partitionBy": partition_by})
        plan, read_version, _ = plan_write(path, opts, StructType.fromJson(spark_schema_json(data.schema)), False)
        msg = write_splits(path, opts, plan, iter(data.to_batches()))
        return plan, read_version, [AddFile.from_json(d) for d in msg.adds], msg.stats

    path = str(tmp_path / "t")
    plan, read_version, adds, stats = planned(path, "day")
    assert read_version == -1
    append(path, docs(20))  # another job creates the table meanwhile (version 0)
    assert commit_write(it.IndexTable(path).log, plan, read_version, False, adds, stats_files=stats) == 1
    assert it.IndexTable(path).count() == 30

    other = str(tmp_path / "other")
    plan, read_version, adds, stats = planned(other, "region")
    append(other, docs(20))  # partitioned by day: the write cannot join it, and says so at once
    started = time.monotonic()
    with pytest.raises(ConcurrentModificationError, match="created concurrently, partitioned by"):
        commit_write(it.IndexTable(other).log, plan, read_version, False, adds, stats_files=stats)
    assert time.monotonic() - started < 5


def test_a_companion_sync_that_loses_a_race_is_planned_again(tmp_path, monkeypatch):
    import indextables_spark.ops.companion.build as build
    from test_companion import INDEXING, write_delta

    src, loc = str(tmp_path / "src"), str(tmp_path / "index")
    options = {"spark.indextables.companion.parallelism": "1"}
    write_delta(src, rows(20))
    assert it.build_companion(src, loc, indexing=INDEXING, options=options).version == 0
    write_delta(src, rows(10, start=20))
    real, commits = build.commit_build, []

    def racing(*args, **kwargs):
        commits.append(1)
        if len(commits) == 1:  # another writer commits to the companion first
            it.IndexTable(loc).transaction(operation="OTHER").commit()
        return real(*args, **kwargs)

    monkeypatch.setattr(build, "commit_build", racing)
    res = it.build_companion(src, loc, indexing=INDEXING, options=options)
    assert len(commits) == 2 and res.version == 2 and res.files_indexed >= 1
    assert [h["operation"] for h in it.IndexTable(loc).inspect.history()[:2]] == ["BUILD COMPANION", "OTHER"]
    assert it.IndexTable(loc).count() == 30
