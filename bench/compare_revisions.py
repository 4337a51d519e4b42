"""The same spark.sql statements timed with two revisions of indextables_spark on one existing
table, in interleaved fresh processes: the way to tell a code change's cost from the machine's noise.

    .venv/bin/python bench/compare_revisions.py --baseline-src /tmp/old/src [--pairs 4] [--runs 7]
                                                [--table /tmp/b10m/it]

`--baseline-src` is the `src/` folder of another checkout (`git worktree add /tmp/old <rev>`); the
revision under test is the one this script belongs to. The table is any indextables table with a
text column `body` (bench/search_vs_parquet.py builds one: `--rows 10000000 --partitions 32
--regions 16 --dir /tmp/b10m`). Each pair starts one process per revision (the order alternates
between pairs, so drift in the machine's load falls on both), each process takes one warm-up
collect and `--runs` timed collects of each statement (bench_common.local_spark: local[2]); the
Python workers inherit PYTHONPATH, so the executors run the same revision as the driver.

Prints each process's median, then per statement the pooled median of every timed run of each
revision and the ratio under-test / baseline (< 1 is faster), with both revisions' row counts
(which must agree).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
UNDER_TEST_SRC = os.path.join(os.path.dirname(HERE), "src")
STATEMENTS = {
    "1% term ids": "SELECT id FROM docs WHERE body TEXTSEARCH 'kestrel'",
    "phrase ids": "SELECT id FROM docs WHERE body TEXTSEARCH '\"data lake\"'",
    "count": "SELECT count(*) FROM docs WHERE body TEXTSEARCH 'kestrel'",
    "GROUP BY": "SELECT region, count(*), avg(views) FROM docs WHERE body TEXTSEARCH 'kestrel' GROUP BY region",
}


def child(table: str, runs: int) -> None:
    """One process: time every statement, print one JSON line."""
    sys.path.insert(0, HERE)
    from bench_common import local_spark

    spark = local_spark()
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW docs USING indextables OPTIONS (path '{table}')")
    out = {}
    for name, stmt in STATEMENTS.items():
        rows = len(spark.sql(stmt).collect())
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            spark.sql(stmt).collect()
            times.append(time.perf_counter() - t0)
        out[name] = {"rows": rows, "times": times}
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


def run_child(src: str, table: str, runs: int) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--table", table, "--runs", str(runs)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the child process for {src} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-src", help="src/ of the baseline checkout")
    ap.add_argument("--table", default="/tmp/b10m/it")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.table, args.runs)
        return
    if not args.baseline_src or not os.path.isdir(os.path.join(args.baseline_src, "indextables_spark")):
        raise SystemExit("--baseline-src must be the src/ folder of another checkout (holding indextables_spark/)")
    revisions = {"baseline": args.baseline_src, "under test": UNDER_TEST_SRC}
    pooled: dict[str, dict[str, list[float]]] = {r: {s: [] for s in STATEMENTS} for r in revisions}
    rows: dict[str, dict[str, int]] = {r: {} for r in revisions}
    print(
        f"table {args.table}; {args.pairs} pairs x {args.runs} timed runs per statement; load {os.getloadavg()[0]:.1f}"
    )
    for pair in range(args.pairs):
        order = list(revisions) if pair % 2 == 0 else list(reversed(revisions))
        for rev in order:
            result = run_child(revisions[rev], args.table, args.runs)
            medians = []
            for name, r in result.items():
                pooled[rev][name].extend(r["times"])
                rows[rev][name] = r["rows"]
                medians.append(f"{name} {statistics.median(r['times']):.3f}s")
            print(f"  pair {pair + 1} {rev:<10} " + "; ".join(medians) + f" (load {os.getloadavg()[0]:.1f})")
    print("pooled medians (every timed run of every pair):")
    for name, stmt in STATEMENTS.items():
        base, new = statistics.median(pooled["baseline"][name]), statistics.median(pooled["under test"][name])
        same = "rows agree" if rows["baseline"][name] == rows["under test"][name] else "ROWS DIFFER"
        print(f"  {name:<12} baseline {base:.3f}s, under test {new:.3f}s -> {new / base:.2f}x ({same})  `{stmt}`")


if __name__ == "__main__":
    main()
