"""Crash trials and load, the long reliability runs (`slow`; `make test` runs them).

Crash safety (tests/crash_harness.py): a child process is SIGKILLed at random points of appends,
removes, checkpoints, compactions, merges and purges; after each kill every reported version must
read with exactly its rows, nothing half-written may be visible, the interrupted operation is
retried and, per table, PURGE removes the orphans. INDEXTABLES_CRASH_TRIALS_LOCAL (default 200),
INDEXTABLES_CRASH_TRIALS_S3 (default 50), INDEXTABLES_CRASH_TRIALS_PER_TABLE (25),
INDEXTABLES_CRASH_MAX_DELAY_S.

Load: 8 concurrent Spark-free writer processes and 4 reader threads on one table, on local disk and
on the S3 emulator, for INDEXTABLES_LOAD_SECONDS (default 121) each. No error but retried
conflicts; every committed add readable; every snapshot a reader saw equals some committed version
exactly (its rows are exactly the rows committed up to that version).

Time budget: the four runs (crash local, crash S3, load local, load S3) run at the same time in one
test, in threads of this process (the writers and crash children are processes). Each still does
its full count / full duration; only the wall time is shared.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

import indextables_spark as it

sys.path.insert(0, os.path.dirname(__file__))
import crash_harness as ch  # noqa: E402

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("INDEXTABLES_LOAD_SECONDS", "121"))
WRITERS = int(os.environ.get("INDEXTABLES_LOAD_WRITERS", "8"))
READERS = int(os.environ.get("INDEXTABLES_LOAD_READERS", "4"))
THINK_S = float(os.environ.get("INDEXTABLES_LOAD_THINK_S", "0.15"))  # mean pause between a writer's commits


class IdReader:
    """Row ids of splits, read once per split (splits are immutable)."""

    def __init__(self, table):
        self.table = table
        self.memo: dict[str, frozenset[int]] = {}
        self.lock = threading.Lock()

    def ids(self, add) -> frozenset[int]:
        from indextables_spark.core.split.cache.cache import get_cache
        from indextables_spark.core.split.read.reader import SplitReader

        got = self.memo.get(add.path)
        if got is None:
            reader = SplitReader(get_cache(self.table.options).local_dir(self.table.storage, add))
            got = frozenset(i for b in reader.read(columns=["id"]) for i in b.column(0).to_pylist())
            assert len(got) == add.num_records, f"{add.path}: {len(got)} rows, log says {add.num_records}"
            with self.lock:
                self.memo[add.path] = got
        return got

    def snapshot_ids(self, version=None) -> tuple[int, frozenset[int]]:
        snap = self.table.snapshot(version)
        out: set[int] = set()
        for f in snap.files:
            ids = self.ids(f)
            assert not (out & ids), f"v{snap.version}: rows in two live splits"
            out |= ids
        return snap.version, frozenset(out)


def run_load(target, work, seconds: float) -> dict:
    os.makedirs(work, exist_ok=True)
    options = {
        **target.options,
        **ch.TABLE_OPTIONS,
        "spark.indextables.checkpoint.interval": "10",
        "spark.indextables.cache.disk.path": os.path.join(work, "cache"),
    }
    table = it.IndexTable(target.uri, options)
    v0, by_path = ch.create_table(table, [0, 1])
    stop = os.path.join(work, "stop")
    journals = [os.path.join(work, f"writer{i}.ndjson") for i in range(WRITERS)]
    procs = [
        ch.context().Process(target=ch.load_writer, args=(target.uri, options, journals[i], stop, i, 1000 + i, THINK_S))
        for i in range(WRITERS)
    ]
    for p in procs:
        p.start()
    observed: list[tuple[int, int, int]] = []  # (version, rows, hash of the id set)
    errors: list[str] = []
    halt = threading.Event()

    def reader_loop():
        r = IdReader(it.IndexTable(target.uri, options))
        while not halt.is_set():
            try:
                v, ids = r.snapshot_ids()
                observed.append((v, len(ids), hash(ids)))
            except Exception as e:  # recorded: any reader error fails the test
                errors.append(f"reader: {type(e).__name__}: {e}")
                return

    threads = [threading.Thread(target=reader_loop) for _ in range(READERS)]
    for th in threads:
        th.start()
    time.sleep(seconds)
    with open(stop, "w"):
        pass
    for p in procs:
        p.join(120)
    halt.set()
    for th in threads:
        th.join(120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    assert not errors, errors[:5]

    # The committed history, from the writers' journals only.
    appended: dict[int, list[int]] = {v0: [0, 1]}
    merged: set[int] = set()
    ends = []
    conflict_texts: list[str] = []
    for j in journals:
        with open(j) as f:
            for line in f:
                obj = json.loads(line)
                if "end" in obj:
                    ends.append(obj)
                elif "conflict" in obj:
                    conflict_texts.append(obj["conflict"])
                elif obj.get("merge"):
                    merged.add(obj["v"])
                else:
                    assert obj["v"] not in appended, f"version {obj['v']} reported twice"
                    appended[obj["v"]] = obj["ids"]
    assert len(ends) == WRITERS, "a writer did not finish cleanly"
    latest = it.IndexTable(target.uri, options).version()
    assert set(appended) | merged == set(range(latest + 1)), "a version was committed that no writer reported"
    expected: dict[int, frozenset[int]] = {}
    acc: set[int] = set()
    for v in range(latest + 1):
        acc |= set(appended.get(v, ()))
        expected[v] = frozenset(acc)
    bad = [(v, n) for v, n, h in observed if n != len(expected[v]) or h != hash(expected[v])]
    assert not bad, f"{len(bad)} reader snapshots differ from the committed version they claim: {bad[:5]}"
    # Every committed add readable: the latest version and a sample of the history, read fully.
    r = IdReader(it.IndexTable(target.uri, options))
    step = max(1, latest // 10)
    for v in sorted(set(range(0, latest + 1, step)) | {latest}):
        got_v, ids = r.snapshot_ids(v)
        assert got_v == v and ids == expected[v], f"version {v}: rows differ"
    summary = {
        "backend": target.kind,
        "seconds": seconds,
        "writers": WRITERS,
        "readers": READERS,
        "think_s": THINK_S,
        "versions": latest + 1,
        "appends": sum(e["commits"] for e in ends),
        "merges": sum(e["merges"] for e in ends),
        "retried_conflicts": sum(e["conflicts"] for e in ends),
        "reader_snapshots": len(observed),
        "distinct_versions_seen": len({v for v, _, _ in observed}),
        "rows": len(expected[latest]),
    }
    print("load summary:", json.dumps(summary))
    print("conflicts (first 5):", conflict_texts[:5])
    assert summary["appends"] >= WRITERS and summary["reader_snapshots"] >= READERS
    return summary


def test_crash_trials_and_load_local_and_s3_concurrently(tmp_path, request):
    from concurrent.futures import ThreadPoolExecutor

    from conftest import ENV_LOCAL_ONLY, ENV_S3_ENDPOINT, StorageTarget, _target

    with_s3 = bool(os.environ.get(ENV_S3_ENDPOINT)) or os.environ.get(ENV_LOCAL_ONLY) != "1"
    env = os.environ.get
    per_table = int(env("INDEXTABLES_CRASH_TRIALS_PER_TABLE", "25"))
    crash_runs = [
        (
            StorageTarget("local", str(tmp_path / "crash-local"), {}),
            int(env("INDEXTABLES_CRASH_TRIALS_LOCAL", "200")),
            float(env("INDEXTABLES_CRASH_MAX_DELAY_S", "0.4")),
            11,
        )
    ]
    load_targets = [StorageTarget("local", str(tmp_path / "load-local"), {})]
    if with_s3:
        s3 = _target("s3", request)
        crash_runs.append(
            (
                s3.child("crash"),
                int(env("INDEXTABLES_CRASH_TRIALS_S3", "50")),
                float(env("INDEXTABLES_CRASH_MAX_DELAY_S", "0.6")),
                23,
            )
        )
        load_targets.append(s3.child("load"))
    ch.context()  # start the fork server once, before the threads
    with ThreadPoolExecutor(len(crash_runs) + len(load_targets)) as pool:
        crash = [
            pool.submit(ch.run_trials, t, tmp_path / f"crash-work-{t.kind}", n, per_table, delay, seed)
            for t, n, delay, seed in crash_runs
        ]
        load = [pool.submit(run_load, t, str(tmp_path / f"load-work-{t.kind}"), SECONDS) for t in load_targets]
        crash_summaries = [f.result() for f in crash]
        for f in load:
            f.result()
    for (_, trials, _, _), summary in zip(crash_runs, crash_summaries):
        ch.check_coverage(summary, trials)
