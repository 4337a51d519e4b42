"""Driver-side planning of a partition-pruned read of a table with many splits (synthetic log
entries: state_bench.py's tables), measured on the data source's own planning calls as Spark's
planner worker makes them: DataSource.schema(), reader(), pushFilters(), partitions().

    .venv/bin/python bench/planning_bench.py [--splits 100000] [--runs 7]

Target: <= 100 ms for a query selecting one of the 100 partitions of a 100,000-split table: the
first planning in a fresh process (its imports reported apart: a Python worker pays them once) and
again in the same process (Spark reuses its Python workers).
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

PLAN = """
import time
from pyspark.sql.datasource import EqualTo, EqualNullSafe, Not
t0 = time.perf_counter()
from indextables_spark.spark.datasource import IndexTablesDataSource
from indextables_spark.spark.guard import GUARD_PREFIX, INDEXGUARD
import indextables_spark.spark.reader, indextables_spark.api.table, indextables_spark.core.split.read.search
import indextables_spark.core.log.read.avro_state, indextables_spark.core.log.state.manifest as manifest
manifest.datafusion_core()
import pyarrow
pyarrow.array([0]).to_numpy()   # pyarrow loads pandas on its first to_numpy: once per worker too
imports = time.perf_counter() - t0

def plan(epoch):
    t0 = time.perf_counter()
    ds = IndexTablesDataSource({"path": PATH})
    reader = ds.reader(ds.schema())
    filters = [EqualTo(("date",), "2024-01-05"), Not(EqualNullSafe((INDEXGUARD,), GUARD_PREFIX + str(epoch)))]
    back = list(reader.pushFilters(filters))
    groups = reader.partitions()
    n = sum(len(g.files) for g in groups)
    return time.perf_counter() - t0, n

first, n = plan(1)
again = sorted(plan(2 + i)[0] for i in range(5))[2]
print(json.dumps({"imports": imports, "first": first, "again": again, "n": n}))
"""


def fresh(path: str) -> dict:
    prog = f"import json, sys\nsys.path.insert(0, {SRC!r})\nPATH = {path!r}\n{PLAN}"
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--workdir", default=os.environ.get("INDEXTABLES_BENCH_DIR", "/tmp/indextables_state_bench"))
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import state_bench as sb

    os.makedirs(args.workdir, exist_ok=True)
    name = "it_100k" if args.splits == 100_000 else f"it_{args.splits}"
    path = sb.ensure(args.workdir, name, sb.build_indextable, args.splits, 1000, 100)
    fresh(path)
    runs = [fresh(path) for _ in range(args.runs)]
    imports = statistics.median(r["imports"] for r in runs) * 1000
    first = statistics.median(r["first"] for r in runs) * 1000
    again = statistics.median(r["again"] for r in runs) * 1000
    print(
        f"{args.splits:,} splits in 100 partitions, one partition selected ({runs[0]['n']:,} splits planned); "
        f"medians of {args.runs} fresh processes"
    )
    print(
        f"first planning in a process: {first:.0f} ms (after the package's imports, {imports:.0f} ms once per "
        f"Python worker); again in the same process: {again:.0f} ms (target <= 100 ms)"
    )


if __name__ == "__main__":
    main()
