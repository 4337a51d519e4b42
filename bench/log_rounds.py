"""Opening a table's log on a slow object store: requests, dependent rounds and time of a cold
`IndexTable(...).search(...)` and of warm searches, with every request delayed (tests/slow_storage.py's
SlowStorage: 20 ms per request by default, an object store's round trip).

    python bench/log_rounds.py [--delay 0.02] [--runs 20]

Tables (built in a temporary directory): `one-version` (version 0 only), `checkpointed` (12 versions,
an Avro state at 10), `replay` (12 versions, no checkpoint)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import pyarrow as pa  # noqa: E402
from slow_storage import SlowStorage  # noqa: E402

import indextables_spark as it  # noqa: E402
from indextables_spark.core.storage import open_storage  # noqa: E402

LOG = "_transaction_log/"


def build(root: str) -> dict[str, str]:
    tables = {}
    for name, versions, interval in (("one-version", 1, 10), ("checkpointed", 12, 10), ("replay", 12, 1000)):
        path = os.path.join(root, name)
        t = it.IndexTable(path, {"checkpoint.interval": str(interval), "indexing.typemap.body": "text"})
        for v in range(versions):
            t.write(
                pa.table({"id": [v * 10 + i for i in range(10)], "body": [f"hello world {v} {i}" for i in range(10)]})
            )
        tables[name] = path
    return tables


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        tables = build(root)
        print(f"delay {args.delay * 1000:.0f} ms per request")
        for name, path in tables.items():
            cold_log_rounds, cold_requests, cold_times, open_times = [], [], [], []
            for run in range(5):
                slow = SlowStorage(open_storage(path), args.delay)
                opts = {"cache.disk.path": os.path.join(root, f"cache-{name}-{run}")}
                t0 = time.perf_counter()
                t = it.IndexTable(path, opts, storage=slow)
                t.snapshot()
                open_times.append(time.perf_counter() - t0)
                n = t.search("hello").num_rows
                cold_times.append(time.perf_counter() - t0)
                cold_log_rounds.append(slow.rounds(LOG))
                cold_requests.append(len(slow.ops(LOG)))
            slow.reset()
            warm = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                t.search("hello")
                warm.append(time.perf_counter() - t0)
            lists = sum(1 for op, _ in slow.ops() if op == "list")
            print(
                f"{name:13s} rows {n:4d} | cold: log requests {cold_requests[-1]}, log rounds "
                f"{cold_log_rounds[-1]}, open {statistics.median(open_times) * 1000:.0f} ms, open + search "
                f"{statistics.median(cold_times) * 1000:.0f} ms | warm search: "
                f"{statistics.median(warm) * 1000:.1f} ms, listings {lists} in {args.runs} searches"
            )


if __name__ == "__main__":
    main()
