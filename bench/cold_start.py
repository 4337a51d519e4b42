"""Cold starts: a fresh Python process importing the package, and its first snapshot of a
70,000-split table, against delta-rs on the same file list (fresh processes, medians).

    .venv/bin/pip install -e '.[bench]'      # deltalake
    .venv/bin/python bench/cold_start.py [--runs 7] [--workdir /tmp/indextables_state_bench]

Each figure is measured inside a new interpreter (`python -c ...`, perf_counter around the step):
- `import indextables_spark`                         target <= 60 ms
- `from indextables_spark import IndexTable` (the entry point a service imports) vs
  `from deltalake import DeltaTable`
- then the first `IndexTable(path).snapshot()` (+ its Arrow file table) vs the first
  `DeltaTable(path)` + `get_add_actions()`: the import above excluded   target: ours <= delta-rs
The tables are state_bench.py's (built there once and reused: V4 Avro state / Delta checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")

IMPORT_ONLY = """
import time
t0 = time.perf_counter()
import indextables_spark
print(json.dumps({"import": time.perf_counter() - t0}))
"""

OURS = """
import time
t0 = time.perf_counter()
from indextables_spark import IndexTable
t1 = time.perf_counter()
n = IndexTable(PATH).snapshot().files_table.num_rows
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "n": n}))
"""

DELTA = """
import time
t0 = time.perf_counter()
from deltalake import DeltaTable
t1 = time.perf_counter()
n = DeltaTable(PATH).get_add_actions(flatten=False).num_rows
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "n": n}))
"""


def fresh(code: str, path: str = "") -> dict:
    prog = f"import json, sys\nsys.path.insert(0, {SRC!r})\nPATH = {path!r}\n{code}"
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def medians(code: str, path: str, runs: int) -> dict:
    fresh(code, path)  # page cache warm: the first process reads the .so files from disk
    results = [fresh(code, path) for _ in range(runs)]
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--workdir", default=os.environ.get("INDEXTABLES_BENCH_DIR", "/tmp/indextables_state_bench"))
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import state_bench as sb

    os.makedirs(args.workdir, exist_ok=True)
    t70 = sb.ensure(args.workdir, "it_70k", sb.build_indextable, 70_000, 1000, 100)
    d70 = sb.ensure(args.workdir, "delta_70k", sb.build_delta, 70_000, 100)
    imp = medians(IMPORT_ONLY, "", args.runs)["import"]
    ours = medians(OURS, t70, args.runs)
    delta = medians(DELTA, d70, args.runs)
    assert ours["n"] == delta["n"] == 70_000, (ours, delta)
    ms = 1000.0
    print(f"fresh processes, medians of {args.runs}")
    print(f"import indextables_spark: {imp * ms:.0f} ms (target <= 60 ms)")
    print(f"{'':<34} {'indextables':>12} {'delta-rs':>10} {'ratio':>7}")
    print(
        f"{'import of the table class':<34} {ours['import'] * ms:>10.0f}ms {delta['import'] * ms:>8.0f}ms "
        f"{delta['import'] / ours['import']:>6.2f}x"
    )
    print(
        f"{'first snapshot + file list (70k)':<34} {ours['first'] * ms:>10.0f}ms {delta['first'] * ms:>8.0f}ms "
        f"{delta['first'] / ours['first']:>6.2f}x  (target: ratio >= 1)"
    )
    total_o, total_d = ours["import"] + ours["first"], delta["import"] + delta["first"]
    print(f"{'both':<34} {total_o * ms:>10.0f}ms {total_d * ms:>8.0f}ms {total_d / total_o:>6.2f}x")


if __name__ == "__main__":
    main()
