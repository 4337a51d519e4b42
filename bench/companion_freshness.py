"""How fresh a streaming companion stays while its Delta source changes, measured end to end.

    .venv/bin/python bench/companion_freshness.py [--seconds 120] [--appends 910] [--no-deletes]
        [--deletion-vectors] [--poll 2] [--dir /tmp/indextables-freshness-bench]

Three processes, as in production (the source's writer, the sync, a reader):

- writer: every second one Delta commit appending `--appends` rows (all carry the token `w<batch>`
  in `msg`) and, from batch 10 on, one commit deleting a tenth of batch-10's rows (those whose id
  is a multiple of 10; they carry `x<batch>`): 910 + 91 = 1,001 changed rows a second by default.
  By default the writer is deltalake, which writes no deletion vectors: a delete rewrites the
  file it touches (copy-on-write). With `--deletion-vectors` a delete is a deletion vector, as
  Spark and Databricks write it (the tests' protocol-level writer, tests/delta_dv_writer.py).
- sync: `it.start_companion_sync(source, index, format="delta", indexing={"msg": "text"},
  poll_interval=--poll)`, its own process.
- reader (this process): every 0.2 s it refreshes the companion and searches `msg:w<b>` for the
  next batches not yet found and `msg:x<d>` for the deleted ones not yet gone.

Lag of a row = the time the reader first sees the change minus the time the writer's commit
returned. Printed: the distribution (p50, p90, p99, max) for appended and for deleted rows, the
share of each within 60 s, and what the sync indexed: rows appended + rows of files the deletes
rewrote (their survivors, a new file) against the rows the sync reports it indexed: the difference
is what was indexed again although nothing changed (0 expected).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Callable

import numpy as np
import pyarrow as pa

import indextables_spark as it

DELETE_BEHIND = 10  # batches between a batch's append and the delete of some of its rows
PROBE_EVERY = 0.2


def batch_rows(b: int, appends: int) -> pa.Table:
    ids = np.arange(b * appends, (b + 1) * appends, dtype=np.int64)
    msg = [f"w{b} {'x' + str(b) if i % 10 == 0 else 'kept'} lorem ipsum row {i}" for i in ids.tolist()]
    return pa.table({"id": ids, "batch": pa.array(np.full(appends, b, dtype=np.int64)), "msg": msg})


def run_writer(src: str, seconds: float, appends: int, deletes: bool, out: str) -> None:
    """The source's writer (delta-rs): one append a second, and a delete of DELETE_BEHIND batches
    ago, written copy-on-write."""
    from deltalake import DeltaTable, write_deltalake  # bench-only dependency of this process

    def append(b: int) -> None:
        write_deltalake(src, batch_rows(b, appends), mode="append")

    def delete(d: int) -> dict[str, object]:
        return dict(DeltaTable(src).delete(f"batch = {d} AND id % 10 = 0"))

    write_loop(seconds, deletes, out, append, delete)


def run_dv_writer(src: str, seconds: float, appends: int, deletes: bool, out: str, go: str) -> None:
    """The source's writer as Spark and Databricks write with deletion vectors on: appends as
    above, each delete a deletion vector of the batch's file (no file rewritten). The table is
    created here (the writer keeps its log's state); the loop starts when `go` appears."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from delta_dv_writer import DeltaWriter  # the tests' protocol-level Delta writer (deletion vectors)

    w = DeltaWriter(src)
    first = batch_rows(-1, 10)
    w.create(first.schema)
    w.add_file(first)
    files: dict[int, str] = {}
    while not os.path.exists(go):
        time.sleep(0.05)

    def append(b: int) -> None:
        files[b] = w.add_file(batch_rows(b, appends))

    def delete(d: int) -> dict[str, object]:
        ids = batch_rows(d, appends).column("id").to_numpy()
        w.delete({files[d]: np.flatnonzero(ids % 10 == 0).tolist()})
        return {"num_copied_rows": 0}

    write_loop(seconds, deletes, out, append, delete)


def write_loop(
    seconds: float,
    deletes: bool,
    out: str,
    append: Callable[[int], None],
    delete: Callable[[int], dict[str, object]],
) -> None:
    """One append a second, and from batch DELETE_BEHIND on a delete of that many batches ago;
    each change's time logged to `out` when its commit returned."""
    start = time.time()
    with open(out, "w") as log:
        b = 0
        while time.time() - start < seconds:
            append(b)
            log.write(json.dumps({"kind": "append", "batch": b, "t": time.time()}) + "\n")
            if deletes and b >= DELETE_BEHIND:
                d = b - DELETE_BEHIND
                metrics = delete(d)
                log.write(json.dumps({"kind": "delete", "batch": d, "t": time.time(), "metrics": metrics}) + "\n")
            log.flush()
            b += 1
            time.sleep(max(0.0, start + b - time.time()))


def run_sync(src: str, index: str, poll: float, stop_file: str, out: str) -> None:
    """The streaming sync, until stop_file appears; writes each poll's result to out."""
    seen: dict[int | None, dict[str, object]] = {}
    with it.start_companion_sync(src, index, format="delta", indexing={"msg": "text"}, poll_interval=poll) as sync:
        while not os.path.exists(stop_file):
            time.sleep(0.5)
            for r in sync.recent_progress:
                seen[r.version] = {k: getattr(r, k) for k in ("source_version", "files_indexed", "rows_indexed")}
            if sync.exception() is not None:
                raise sync.exception()  # type: ignore[misc]
        sync.stop()
        for r in sync.recent_progress:
            seen[r.version] = {k: getattr(r, k) for k in ("source_version", "files_indexed", "rows_indexed")}
    with open(out, "w") as f:
        json.dump([v for k, v in seen.items() if k is not None], f)


def percentiles(lags: list[float]) -> str:
    if not lags:
        return "none"
    a = np.asarray(lags)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    within = float(np.mean(a <= 60.0)) * 100
    return f"p50 {p50:5.1f} s  p90 {p90:5.1f} s  p99 {p99:5.1f} s  max {a.max():5.1f} s  ({within:.0f}% within 60 s, n={len(a)})"


def read_log(path: str) -> list[dict[str, object]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--appends", type=int, default=910)
    ap.add_argument("--no-deletes", dest="deletes", action="store_false", help="appends only")
    ap.add_argument("--poll", type=float, default=2.0)
    ap.add_argument("--dir", default="/tmp/indextables-freshness-bench")
    ap.add_argument(
        "--deletion-vectors", dest="dv", action="store_true", help="deletes as deletion vectors (no file rewritten)"
    )
    ap.add_argument("--role", choices=["writer", "sync"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    src, index = os.path.join(a.dir, "source"), os.path.join(a.dir, "companion")
    writes, polls, stop, go = (os.path.join(a.dir, n) for n in ("writes.jsonl", "polls.json", "stop", "go"))
    if a.role == "writer" and a.dv:
        run_dv_writer(src, a.seconds, a.appends, a.deletes, writes, go)
        return
    if a.role == "writer":
        run_writer(src, a.seconds, a.appends, a.deletes, writes)
        return
    if a.role == "sync":
        run_sync(src, index, a.poll, stop, polls)
        return

    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    from deltalake import write_deltalake  # bench-only dependency

    me = [sys.executable, os.path.abspath(__file__), "--dir", a.dir, "--seconds", str(a.seconds)]
    me += ["--appends", str(a.appends), "--poll", str(a.poll)] + ([] if a.deletes else ["--no-deletes"])
    me += ["--deletion-vectors"] if a.dv else []
    writer = None
    if a.dv:  # the writer creates the table (it keeps the log's state), then waits for `go`
        writer = subprocess.Popen([*me, "--role", "writer"])
        while not os.path.exists(os.path.join(src, "_delta_log", f"{1:020d}.json")):
            time.sleep(0.05)
    else:
        write_deltalake(src, batch_rows(-1, 10), mode="append")  # the table exists before the sync starts
    sync = subprocess.Popen([*me, "--role", "sync"])
    while not os.path.exists(os.path.join(index, "_transaction_log")):  # the first build
        if sync.poll() is not None:
            raise SystemExit("the sync stopped before its first build")
        time.sleep(0.2)
    if writer is None:
        writer = subprocess.Popen([*me, "--role", "writer"])
    open(go, "w").close()

    found: dict[int, float] = {}
    gone: dict[int, float] = {}
    t = it.IndexTable(index)
    next_batch = 0
    deadline = time.time() + a.seconds + 90  # time for the last changes to arrive
    while time.time() < deadline:
        time.sleep(PROBE_EVERY)
        t.refresh()
        now = time.time()
        while t.count(query=f"msg:w{next_batch}") > 0:
            found[next_batch] = now
            next_batch += 1
        deleted = [int(w["batch"]) for w in read_log(writes) if w["kind"] == "delete"]  # type: ignore[call-overload]
        for d in deleted:
            if d not in gone and t.count(query=f"msg:x{d}") == 0:
                gone[d] = now
        if writer.poll() is not None:
            log = read_log(writes)
            appended = sum(1 for w in log if w["kind"] == "append")
            if next_batch >= appended and all(d in gone for d in deleted):
                break
    writer.wait()
    open(stop, "w").close()
    sync.wait()

    log = read_log(writes)
    append_at = {int(w["batch"]): float(w["t"]) for w in log if w["kind"] == "append"}  # type: ignore[call-overload,arg-type]
    delete_at = {int(w["batch"]): float(w["t"]) for w in log if w["kind"] == "delete"}  # type: ignore[call-overload,arg-type]
    append_lags = [found[b] - append_at[b] for b in append_at if b in found]
    delete_lags = [gone[d] - delete_at[d] for d in delete_at if d in gone]
    with open(polls) as f:
        results = json.load(f)
    rows_indexed = sum(int(r["rows_indexed"]) for r in results)
    appended_rows = len(append_at) * a.appends + 10
    rewritten = sum(int(w["metrics"].get("num_copied_rows", 0)) for w in log if w["kind"] == "delete")  # type: ignore[union-attr]
    dels = a.appends // 10 if a.deletes else 0
    print(
        f"companion freshness: {a.seconds:.0f} s of {a.appends} appended + {dels} deleted rows a second, poll {a.poll} s"
    )
    print(f"  appended rows found:  {percentiles(append_lags)}; not found: {len(append_at) - len(append_lags)}")
    print(f"  deleted rows gone:    {percentiles(delete_lags)}; still there: {len(delete_at) - len(delete_lags)}")
    print(
        f"  syncs that committed: {len(results)}; rows indexed {rows_indexed:,} = appended {appended_rows:,} "
        f"+ survivors of files the deletes rewrote {rewritten:,} + indexed again {rows_indexed - appended_rows - rewritten:,}"
    )
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
