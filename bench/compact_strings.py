"""Compact string indexing (issue #39 part 5): split size and write time of a log-like table with
UUID-heavy text, written with the default indexing and with each compact string mode, and which
query kinds each mode answers (through the index, on the rows) or refuses. Ratios are measured in
one run against the default written in the same run.

    .venv/bin/python bench/compact_strings.py --rows 200000 --runs 1

Table: ts (long), level, service (strings), trace_id and request_id (UUIDs), message (text holding
one or two UUIDs among ~8 words). "default" indexes message as `text` and the ids as `string`.
Sizes: the split files (index + our row store, which every mode writes alike) and the index alone
(the split minus its row store section).
"""

from __future__ import annotations

import os
import random
import shutil
import time
import uuid

import pyarrow as pa

from bench_common import bench_arguments

P = "spark.indextables."
WORDS = "error timeout retry request user cache disk queue worker ok done failed slow upstream reset".split()
IDS = ("trace_id", "request_id")

MODES: dict[str, dict[str, str]] = {
    "default": {"message": "text"},
    "ids exact_only": {"message": "text", "trace_id": "exact_only", "request_id": "exact_only"},
    "+ message text_uuid_exactonly": {
        "message": "text_uuid_exactonly",
        "trace_id": "exact_only",
        "request_id": "exact_only",
    },
    "+ message text_uuid_strip": {"message": "text_uuid_strip", "trace_id": "exact_only", "request_id": "exact_only"},
    "+ message text_custom_strip": {
        "message": r"text_custom_strip:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "trace_id": "exact_only",
        "request_id": "exact_only",
    },
}


def log_rows(n: int, seed: int = 7) -> pa.Table:
    rnd = random.Random(seed)
    u = lambda: str(uuid.UUID(int=rnd.getrandbits(128), version=4))  # noqa: E731
    traces = [u() for _ in range(max(1, n // 4))]  # a trace spans ~4 rows
    trace = [traces[rnd.randrange(len(traces))] for _ in range(n)]
    msgs = []
    for i in range(n):
        words = rnd.choices(WORDS, k=8)
        words.insert(rnd.randrange(9), trace[i])
        if rnd.random() < 0.5:
            words.insert(rnd.randrange(10), f"session={u()}")
        msgs.append(" ".join(words))
    return pa.table(
        {
            "ts": pa.array(range(n), pa.int64()),
            "level": rnd.choices(["INFO", "WARN", "ERROR"], k=n),
            "service": [f"svc-{rnd.randrange(20)}" for _ in range(n)],
            "trace_id": trace,
            "request_id": [u() for _ in range(n)],
            "message": msgs,
        }
    )


def sizes(t) -> tuple[int, int]:
    """(split bytes, index bytes = split minus its row store) over the table's splits."""
    from indextables_spark.core.split.format.bundle import read_footer

    total = index = 0
    for f in t.snapshot().files:
        path = os.path.join(t.path, f.path)
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            footer = read_footer(fh, size)
        total += size
        index += size - footer.rows.length
    return total, index


def query_kinds(data: pa.Table) -> list[tuple[str, str | None, str | None]]:
    """(kind, where, query) probes."""
    tid, msg_uuid = data.column("trace_id")[0].as_py(), data.column("trace_id")[1].as_py()
    return [
        ("trace_id = v", f"trace_id = '{tid}'", None),
        ("trace_id IN (v, w)", f"trace_id IN ('{tid}', '{msg_uuid}')", None),
        ("trace_id > v", f"trace_id > '{tid}'", None),
        ("trace_id IS NULL", "trace_id IS NULL", None),
        ("query trace_id:v", None, f'trace_id:"{tid}"'),
        ("query trace_id:v*", None, f"trace_id:{tid[:6]}*"),
        ("query message:word", None, "message:timeout"),
        ("query message:<uuid>", None, f"message:{msg_uuid}"),
        ("query message:phrase", None, 'message:"error timeout"'),
    ]


def main() -> None:
    import indextables_spark as it
    from indextables_spark.errors import IndexTablesError

    ap = bench_arguments("/tmp/bench-compact-strings", runs=1)
    args = ap.parse_args()
    data = log_rows(args.rows)
    print(f"{args.rows} rows, {data.nbytes / 1e6:.1f} MB in Arrow; {args.runs} write(s) per mode, best kept")
    results = {}
    for name, modes in MODES.items():
        path = os.path.join(args.dir, name.replace(" ", "_").replace("+", "p"))
        opts = {P + f"indexing.typemap.{c}": m for c, m in modes.items()}
        best = float("inf")
        for _ in range(max(1, args.runs)):
            shutil.rmtree(path, ignore_errors=True)
            t0 = time.perf_counter()
            it.write_table(path, data, options=opts)
            best = min(best, time.perf_counter() - t0)
        t = it.IndexTable(path)
        results[name] = (best, *sizes(t), t)
    base_time, base_total, base_index, _ = results["default"]
    print(f"\n{'mode':32} {'write s':>8} {'vs def':>7} {'split MB':>9} {'vs def':>7} {'index MB':>9} {'vs def':>7}")
    for name, (secs, total, index, _) in results.items():
        print(
            f"{name:32} {secs:8.2f} {secs / base_time:7.2f} {total / 1e6:9.2f} {total / base_total:7.2f} "
            f"{index / 1e6:9.2f} {index / base_index:7.2f}"
        )
    print("\nquery kinds: rows returned (ms, warm), or refused (LIKE: Spark reads only, decided on the rows)")
    probes = query_kinds(data)
    print(f"{'':24}" + "".join(f"{n[:18]:>20}" for n in results))
    for kind, where, query in probes:
        cells = []
        for _name, (_s, _t, _i, t) in results.items():
            try:
                for _ in range(2):  # the second run is timed: the first opens the split (cache)
                    t0 = time.perf_counter()
                    if query is not None:
                        n = t.search(query, columns=["ts"], where=where).num_rows
                    else:
                        n = t.to_arrow(where=where, columns=["ts"]).num_rows
                cells.append(f"{n} ({(time.perf_counter() - t0) * 1000:.0f})")
            except IndexTablesError:
                cells.append("refused")
        print(f"{kind:24}" + "".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
