"""Crash safety: SIGKILL a child process at random points of appends, removes, checkpoints,
compactions, merges and purges (tests/crash_harness.py), then prove nothing committed was lost,
nothing half-written is visible, the interrupted operation can be retried and PURGE removes the
orphans. Trial counts: INDEXTABLES_CRASH_TRIALS_LOCAL (default 200), INDEXTABLES_CRASH_TRIALS_S3
(default 50); INDEXTABLES_CRASH_TRIALS_PER_TABLE (default 25); INDEXTABLES_CRASH_MAX_DELAY_S."""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import crash_harness as ch  # noqa: E402

pytestmark = pytest.mark.slow


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def run_trials(target, tmp_path, trials: int, per_table: int, max_delay: float, seed: int) -> dict:
    summary = {"backend": target.kind, "trials": 0, "tables": 0, "killed_during": {}, "unreported_commits": 0,
               "versions_checked": 0, "versions": 0, "orphans_removed": 0, "seconds": 0.0}
    t0 = time.time()
    n_tables = (trials + per_table - 1) // per_table
    killed: dict[str, int] = {}
    for k in range(n_tables):
        work = tmp_path / f"work{k}"
        work.mkdir(parents=True)
        sub = target.child(f"crash{k}")
        ct = ch.CrashTable(uri=sub.uri, options={**sub.options, **ch.TABLE_OPTIONS}, workdir=str(work), seed=seed + k)
        ct.create()
        for _ in range(min(per_table, trials - summary["trials"])):
            res = ct.trial(max_delay)
            summary["trials"] += 1
            summary["versions_checked"] += res.versions_checked
        end = ct.finish()
        summary["tables"] += 1
        summary["orphans_removed"] += end["orphans_removed"]
        summary["unreported_commits"] += ct.unreported_commits
        summary["versions"] += len(ct.expected)
        for op, n in ct.killed_ops.items():
            killed[op] = killed.get(op, 0) + n
    summary["killed_during"] = dict(sorted(killed.items()))
    summary["seconds"] = round(time.time() - t0, 1)
    print("crash summary:", json.dumps(summary))
    return summary


def _check_coverage(summary: dict, trials: int) -> None:
    assert summary["trials"] == trials
    # The harness must really interrupt operations, of several kinds (else it proves nothing).
    interrupted = sum(summary["killed_during"].values())
    assert interrupted >= trials // 4, summary
    if trials >= 100:
        assert {"append", "merge", "checkpoint"} <= set(summary["killed_during"]), summary


def test_crash_trials_local_and_s3(tmp_path, request):
    """Local and S3 trials run at the same time (two threads, one forkserver): the suite's time
    budget. Without the S3 emulator and with INDEXTABLES_TEST_LOCAL_ONLY=1, local only."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import ENV_LOCAL_ONLY, ENV_S3_ENDPOINT, StorageTarget, _target

    per_table = _env_int("INDEXTABLES_CRASH_TRIALS_PER_TABLE", 25)
    runs = [(StorageTarget("local", str(tmp_path / "tables"), {}), _env_int("INDEXTABLES_CRASH_TRIALS_LOCAL", 200),
             float(os.environ.get("INDEXTABLES_CRASH_MAX_DELAY_S", "0.4")), 11)]
    if os.environ.get(ENV_S3_ENDPOINT) or os.environ.get(ENV_LOCAL_ONLY) != "1":
        runs.append((_target("s3", request), _env_int("INDEXTABLES_CRASH_TRIALS_S3", 50),
                     float(os.environ.get("INDEXTABLES_CRASH_MAX_DELAY_S", "0.6")), 23))
    ch.context()  # start the fork server once, before the threads
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = [pool.submit(run_trials, target, tmp_path / target.kind, trials, per_table, delay, seed)
                   for target, trials, delay, seed in runs]
        summaries = [f.result() for f in futures]
    for (target, trials, _, _), summary in zip(runs, summaries):
        _check_coverage(summary, trials)
