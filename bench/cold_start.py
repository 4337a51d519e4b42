"""Cold starts (#28 criterion 2): a fresh Python process, from its first import to the first
snapshot and file list of a 70,000-split table, against delta-rs on the same file list.

    .venv/bin/pip install -e '.[bench]'      # deltalake
    .venv/bin/python bench/cold_start.py [--runs 11] [--workdir /tmp/indextables_state_bench]

Each run is ONE new interpreter per side (`python -c ...`), timed inside it with perf_counter from
before its first import to the file list in hand; the sides run interleaved (ours, delta-rs,
floor, ours, ...) so that a busy machine slows both alike, and the figures are medians:
- indextables: `import indextables_spark as it; from indextables_spark.api.table import IndexTable`,
  then `IndexTable(path).snapshot()` and its file list (`.files_table`, a pyarrow Table with one
  row per split: path, size, partition values, statistics, ...)
- delta-rs: `from deltalake import DeltaTable`, then `DeltaTable(path)` and its file list
  (`get_add_actions(flatten=False)`, an Arrow table with one row per file)
  target: indextables total <= delta-rs total (ratio delta-rs / indextables >= 1)
- the floor of any reader handing out a pyarrow Table: a process doing only `import pyarrow`
  (pyarrow imports numpy); delta-rs returns arro3 tables and never imports pyarrow.
Also printed: `import indextables_spark` alone (target <= 60 ms), and each side's total split
into its imports and its first snapshot + file list. Our snapshot includes pyarrow's import: the
manifests decode in worker threads while the main thread imports it (core/log/read/avro_state.py).
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

# cpu: the process's CPU time (all its threads) over the same span: on a busy machine, wall times
# depend on the other load, CPU times much less.
OURS = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import indextables_spark as it
from indextables_spark.api.table import IndexTable
t1 = time.perf_counter()
files = IndexTable(PATH).snapshot().files_table
n = files.num_rows
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "total": t2 - t0, "cpu": c2 - c0, "n": n}))
"""

DELTA = """
import time
t0, c0 = time.perf_counter(), time.process_time()
from deltalake import DeltaTable
t1 = time.perf_counter()
files = DeltaTable(PATH).get_add_actions(flatten=False)
n = files.num_rows
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "total": t2 - t0, "cpu": c2 - c0, "n": n}))
"""

FLOOR = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import pyarrow
print(json.dumps({"total": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


# The processes may write bytecode (PYTHONDONTWRITEBYTECODE dropped): an installed package has its
# .pyc files (pip compiles them), and without them every run would compile the modules it imports.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def fresh(code: str, path: str = "") -> dict:
    prog = f"import json, sys\nsys.path.insert(0, {SRC!r})\nPATH = {path!r}\n{code}"
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=ENV)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def interleaved(cases: dict[str, tuple[str, str]], runs: int) -> dict[str, list[dict]]:
    """Each case's results over `runs` rounds; each round runs every case once, in a new process."""
    for code, path in cases.values():
        fresh(code, path)  # page cache warm (the first process reads the .so files), .pyc files written
    results: dict[str, list[dict]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (code, path) in cases.items():
            results[name].append(fresh(code, path))
    return results


def medians(results: list[dict]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--workdir", default=os.environ.get("INDEXTABLES_BENCH_DIR", "/tmp/indextables_state_bench"))
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import state_bench as sb

    os.makedirs(args.workdir, exist_ok=True)
    t70 = sb.ensure(args.workdir, "it_70k", sb.build_indextable, 70_000, 1000, 100)
    d70 = sb.ensure(args.workdir, "delta_70k", sb.build_delta, 70_000, 100)
    res = interleaved(
        {"ours": (OURS, t70), "delta": (DELTA, d70), "floor": (FLOOR, ""), "import": (IMPORT_ONLY, "")}, args.runs
    )
    m = {name: medians(rs) for name, rs in res.items()}
    ours, delta, floor = m["ours"], m["delta"], m["floor"]
    assert ours["n"] == delta["n"] == 70_000, (ours, delta)
    ms = 1000.0
    print(f"fresh processes, {args.runs} interleaved rounds, medians (70,000 files)")
    print(f"import indextables_spark: {m['import']['import'] * ms:.0f} ms (target <= 60 ms)")
    print(f"{'':<44} {'indextables':>12} {'delta-rs':>10} {'ratio':>7}")
    rows = [
        ("imports (table class)", "import"),
        ("first snapshot + file list, after the imports", "first"),
    ]
    for label, k in rows:
        print(f"{label:<44} {ours[k] * ms:>10.0f}ms {delta[k] * ms:>8.0f}ms {delta[k] / ours[k]:>6.2f}x")
    print(
        f"{'total: imports + snapshot + file list':<44} {ours['total'] * ms:>10.0f}ms {delta['total'] * ms:>8.0f}ms "
        f"{delta['total'] / ours['total']:>6.2f}x  (target: ratio >= 1, i.e. ours <= delta-rs)"
    )
    print(
        f"{'  CPU time of that span (all threads)':<44} {ours['cpu'] * ms:>10.0f}ms {delta['cpu'] * ms:>8.0f}ms "
        f"{delta['cpu'] / ours['cpu']:>6.2f}x"
    )
    # On a busy machine: the ratio within each round (runs a few hundred ms apart), and each side's
    # least disturbed run
    paired = statistics.median(d["total"] / o["total"] for o, d in zip(res["ours"], res["delta"]))
    best_o, best_d = (min(r["total"] for r in res[k]) for k in ("ours", "delta"))
    print(f"{'  median of the per-round ratios':<44} {'':>12} {'':>10} {paired:>6.2f}x")
    print(
        f"{'  best run of each side (min)':<44} {best_o * ms:>10.0f}ms {best_d * ms:>8.0f}ms {best_d / best_o:>6.2f}x"
    )
    print(
        f"floor: a process importing only pyarrow: {floor['total'] * ms:.0f} ms, CPU {floor['cpu'] * ms:.0f} ms "
        f"(our total is {ours['total'] / floor['total']:.2f}x of it; delta-rs's arro3 does not need pyarrow)"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
