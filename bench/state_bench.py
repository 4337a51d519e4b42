"""State-layer benchmark: the V4 Avro state against its baselines on the same file lists.

Baselines, measured in the same run:
  json   — the same table read by replaying its JSON version files (no state);
  delta  — the same file list as a Delta table with a checkpoint, read by delta-rs (`deltalake`,
           the `bench` extra).

Cases (medians over --runs, default 5, after one warm-up run):
  read-70k / read-100k   snapshot with its Arrow file table and count, from a fresh IndexTable
  commit-100             commit 100 added files to the 70K table (version file + incremental
                         Avro state); bytes written, also on the 10K table to show they do not
                         depend on the table size
  compact-70k            full compaction of the 70K state
  partition-1m           list one partition of a 1,000,000-file table with 1,000 partitions,
                         compacted at the default entriesPerManifest; manifests/entries decoded
  rss-100k               peak RSS of reading 100K files, above the interpreter's baseline
                         (a fresh process, measured after imports)

Usage: .venv/bin/python bench/state_bench.py [--runs 5] [--workdir DIR] [--skip-1m] [--rebuild]
Tables are built once under --workdir and reused by later runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import indextables_spark as it  # noqa: E402
from indextables_spark.core.log.maintenance.state_writer import write_state  # noqa: E402
from indextables_spark.core.log.commit.synthetic import DEFAULT_SCHEMA, create_table, synthetic_add, write_bulk_versions  # noqa: E402

# The Delta copy's columns: the synthetic table's id, title, score, date (the stats delta-rs reads).
DELTA_SCHEMA = {
    "type": "struct",
    "fields": [f for f in DEFAULT_SCHEMA["fields"] if f["name"] in ("id", "title", "score", "date")],
}


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def median_ms(fn, runs: int, warmup: int = 1) -> tuple[float, object]:
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return ms(statistics.median(times)), out


# ---- building the tables ------------------------------------------------------------------------------


def build_indextable(path: str, n: int, per_version: int, num_partitions: int) -> None:
    """Version 0 through the real Transaction API, then version files of `per_version` adds
    each (written directly for speed: the same bytes a commit writes), then a checkpoint."""
    if os.path.exists(path):
        shutil.rmtree(path)
    t = it.IndexTable(path, {"checkpoint.enabled": "false"})
    create_table(t, ["date"], schema=DEFAULT_SCHEMA)
    v = write_bulk_versions(t, n, per_version, num_partitions)
    write_state(t.log, v)  # first state: a full (compacted) write


def build_delta(path: str, n: int, num_partitions: int) -> None:
    from deltalake import DeltaTable

    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.join(path, "_delta_log"))
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "w") as f:
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        f.write(
            json.dumps(
                {
                    "metaData": {
                        "id": "00000000-0000-0000-0000-000000000001",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": json.dumps(DELTA_SCHEMA),
                        "partitionColumns": ["date"],
                        "configuration": {},
                        "createdTime": 1_700_000_000_000,
                    }
                }
            )
            + "\n"
        )
        for i in range(n):
            a = synthetic_add(i, num_partitions=num_partitions)
            stats = {
                "numRecords": a.num_records,
                "minValues": {"id": int(a.min_values["id"]), "score": 0.01, "title": a.min_values["title"]},
                "maxValues": {"id": int(a.max_values["id"]), "score": 99.9, "title": a.max_values["title"]},
                "nullCount": {"id": 0, "score": 0, "title": 0},
            }
            f.write(
                json.dumps(
                    {
                        "add": {
                            "path": a.path,
                            "partitionValues": a.partition_values,
                            "size": a.size,
                            "modificationTime": a.modification_time,
                            "dataChange": True,
                            "stats": json.dumps(stats),
                        }
                    }
                )
                + "\n"
            )
    DeltaTable(path).create_checkpoint()


def ensure(workdir: str, name: str, builder, *args, rebuild: bool = False) -> str:
    path = os.path.join(workdir, name)
    marker = path + ".built"
    if rebuild or not os.path.exists(marker):
        t0 = time.perf_counter()
        builder(path, *args)
        with open(marker, "w") as f:
            f.write("ok")
        print(f"  built {name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def copy_table(src: str, dst: str) -> str:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# ---- cases -------------------------------------------------------------------------------------------------


def read_avro(path: str):
    from indextables_spark.core.log.maintenance.shared_logs import forget_logs

    forget_logs()  # a first read: no snapshot kept from the previous run
    snap = it.IndexTable(path).snapshot()
    return snap.files_table.num_rows


def read_json_replay(path: str):
    log = it.IndexTable(path).log
    latest = log.latest_version()
    delta = log.collect_changes(None, latest)
    return log._files(None, delta).num_rows


def read_delta(path: str):
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    return dt.get_add_actions(flatten=False).num_rows


def rss_subprocess(code: str) -> dict:
    """Peak RSS of running `code` (which sets n) in a fresh interpreter, and that interpreter's
    RSS after its imports (the baseline)."""
    lines = [
        "import json, sys, gc",
        "hwm = lambda: int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])",
        f"sys.path.insert(0, {os.path.join(HERE, '..', 'src')!r})",
        "import pyarrow, indextables_spark as it, datafusion, deltalake",
        "from indextables_spark.core.log.state import manifest",
        "manifest._ctx()",
        "gc.collect()",
        "base = hwm()  # peak RSS of this process image so far (ru_maxrss survives exec)",
        *code.splitlines(),
        "peak = hwm()",
        'print(json.dumps({"baseline_mb": base / 1024, "peak_mb": peak / 1024, "n": n}))',
    ]
    out = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"RSS probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", default=os.environ.get("INDEXTABLES_BENCH_DIR", "/tmp/indextables_state_bench"))
    ap.add_argument("--skip-1m", action="store_true")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--build-only", action="store_true", help="build the tables and stop")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    runs = max(5, args.runs)
    rows: list[tuple] = []

    def row(case, ours, json_b, delta_b, target, extra=""):
        rows.append((case, ours, json_b, delta_b, target, extra))
        print(
            f"{case:<14} ours={ours!s:<10} json={json_b!s:<10} delta-rs={delta_b!s:<10} target={target:<22} {extra}",
            flush=True,
        )

    print(f"building tables under {args.workdir} (reused across runs)", flush=True)
    t10 = ensure(args.workdir, "it_10k", build_indextable, 10_000, 1000, 100, rebuild=args.rebuild)
    t70 = ensure(args.workdir, "it_70k", build_indextable, 70_000, 1000, 100, rebuild=args.rebuild)
    t100 = ensure(args.workdir, "it_100k", build_indextable, 100_000, 1000, 100, rebuild=args.rebuild)
    d70 = ensure(args.workdir, "delta_70k", build_delta, 70_000, 100, rebuild=args.rebuild)
    d100 = ensure(args.workdir, "delta_100k", build_delta, 100_000, 100, rebuild=args.rebuild)
    if args.build_only:
        if not args.skip_1m:
            ensure(args.workdir, "it_1m", build_indextable, 1_000_000, 50_000, 1000, rebuild=args.rebuild)
            ensure(args.workdir, "delta_1m", build_delta, 1_000_000, 1000, rebuild=args.rebuild)
        return 0

    print(f"\nmedians of {runs} runs (ms) after one warm-up run\n", flush=True)
    # -- reads
    for label, ipath, dpath, target_ms in (("read-70k", t70, d70, 150), ("read-100k", t100, d100, 250)):
        ours, n = median_ms(lambda: read_avro(ipath), runs)
        js, n2 = median_ms(lambda: read_json_replay(ipath), runs)
        dl, n3 = median_ms(lambda: read_delta(dpath), runs)
        assert n == n2 == n3, (n, n2, n3)
        tgt = f"<= {target_ms} ms" + (" and <= 0.5x delta-rs" if label == "read-70k" else "")
        row(label, ours, js, dl, tgt, f"files={n} ratio_vs_delta={ours / dl:.2f}")

    # -- commit 100 files (version file + incremental state) on the 70K and 10K tables
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    def commit_case(src: str, tag: str):
        path = copy_table(src, os.path.join(args.workdir, f"commit_{tag}"))
        t = it.IndexTable(path, {"checkpoint.interval": "1"})
        state = {"i": 50_000_000, "bytes": []}

        def one():
            before = du(os.path.join(path, "_transaction_log"))
            txn = t.transaction()
            txn.add_files([synthetic_add(state["i"] + k, num_partitions=100) for k in range(100)])
            state["i"] += 100
            txn.commit()
            state["bytes"].append(du(os.path.join(path, "_transaction_log")) - before)

        m, _ = median_ms(one, runs)
        return m, statistics.median(state["bytes"])

    ours, bytes70 = commit_case(t70, "70k")
    _, bytes10 = commit_case(t10, "10k")

    # json baseline: what the legacy format writes at a checkpoint (the whole table again)
    jpath = copy_table(t70, os.path.join(args.workdir, "commit_json"))
    jt = it.IndexTable(jpath, {"state.format": "json", "checkpoint.interval": "1"})
    jstate = {"i": 60_000_000}

    def json_commit():
        txn = jt.transaction()
        txn.add_files([synthetic_add(jstate["i"] + k, num_partitions=100) for k in range(100)])
        jstate["i"] += 100
        txn.commit()

    js, _ = median_ms(json_commit, runs)
    dpath = copy_table(d70, os.path.join(args.workdir, "commit_delta"))
    dstate = {"i": 70_000_000}
    import pyarrow as pa

    dschema = pa.schema([("id", pa.int64()), ("title", pa.string()), ("score", pa.float64()), ("date", pa.string())])

    def delta_commit():
        dt = DeltaTable(dpath)
        acts = []
        for k in range(100):
            a = synthetic_add(dstate["i"] + k, num_partitions=100)
            acts.append(
                AddAction(
                    a.path, a.size, a.partition_values, a.modification_time, True, json.dumps({"numRecords": 1000})
                )
            )
        dstate["i"] += 100
        dt.create_write_transaction(acts, "append", dschema, partition_by=["date"])

    dl, _ = median_ms(delta_commit, runs)
    row(
        "commit-100",
        ours,
        js,
        dl,
        "<= 30 ms, bytes O(delta)",
        f"bytes_written: 70K table={int(bytes70)} 10K table={int(bytes10)} (json baseline = full JSON checkpoint each commit)",
    )

    # -- compaction of 70K
    cpath = copy_table(t70, os.path.join(args.workdir, "compact_70k"))
    ct = it.IndexTable(cpath)
    latest = ct.version()
    ours, res = median_ms(lambda: write_state(ct.log, latest, force_compaction=True, overwrite=True), runs)
    jcp = copy_table(t70, os.path.join(args.workdir, "compact_json"))
    jlog = it.IndexTable(jcp, {"state.format": "json"}).log
    from indextables_spark.core.log.read.json_checkpoint import checkpoint_key
    from indextables_spark.core.log.maintenance.last_checkpoint import write_json_checkpoint

    def json_checkpoint():
        p = os.path.join(jcp, checkpoint_key(latest))
        if os.path.exists(p):
            os.unlink(p)
        write_json_checkpoint(jlog, jlog.snapshot(latest))

    js, _ = median_ms(json_checkpoint, runs)
    dcp = copy_table(d70, os.path.join(args.workdir, "compact_delta"))
    dl, _ = median_ms(lambda: DeltaTable(dcp).create_checkpoint(), runs)
    row(
        "compact-70k",
        ours,
        js,
        dl,
        "<= 1000 ms",
        f"manifests={res.num_manifests} (json = JSON checkpoint write, delta = create_checkpoint)",
    )

    # -- peak RSS reading 100K
    r_ours = rss_subprocess(f"snap = it.IndexTable({t100!r}).snapshot(); n = snap.files_table.num_rows")
    r_delta = rss_subprocess(f"n = deltalake.DeltaTable({d100!r}).get_add_actions(flatten=False).num_rows")
    r_json = rss_subprocess(
        f"log = it.IndexTable({t100!r}).log\n"
        "n = log._files(None, log.collect_changes(None, log.latest_version())).num_rows"
    )
    row(
        "rss-100k",
        f"{r_ours['peak_mb'] - r_ours['baseline_mb']:.0f}MB",
        f"{r_json['peak_mb'] - r_json['baseline_mb']:.0f}MB",
        f"{r_delta['peak_mb'] - r_delta['baseline_mb']:.0f}MB",
        "<= 150 MB above baseline",
        f"baseline={r_ours['baseline_mb']:.0f}MB",
    )

    # -- one partition of 1M files / 1000 partitions
    if not args.skip_1m:
        t1m = ensure(args.workdir, "it_1m", build_indextable, 1_000_000, 50_000, 1000, rebuild=args.rebuild)
        d1m = ensure(args.workdir, "delta_1m", build_delta, 1_000_000, 1000, rebuild=args.rebuild)
        from indextables_spark.core.log.commit.synthetic import partition_value

        part = partition_value(437, 1000)
        holder = {}

        def ours_part():
            snap, stats = it.IndexTable(t1m).log.scan(f"date = '{part}'")
            holder["stats"] = stats
            return snap.files_table.num_rows

        ours, n = median_ms(ours_part, runs)
        st = holder["stats"]

        def delta_part():
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                return len(DeltaTable(d1m).file_uris(partition_filters=[("date", "=", part)]))

        dl, n3 = median_ms(delta_part, max(5, runs), warmup=1)

        def json_part():
            log = it.IndexTable(t1m).log
            files = log._files(None, log.collect_changes(None, log.latest_version()))
            from indextables_spark.expr.partition_filter import filter_files_table, parse_partition_filter

            return filter_files_table(files, parse_partition_filter(f"date = '{part}'", ["date"])).num_rows

        t0 = time.perf_counter()
        n2 = json_part()
        js = ms(time.perf_counter() - t0)
        assert n == n2 == n3, (n, n2, n3)
        row(
            "partition-1m",
            ours,
            f"{js} (1 run)",
            dl,
            "<= 80 ms and <= 0.05x delta-rs",
            f"files={n} manifests_decoded={st.manifests_read}/{st.manifests_total} entries_decoded={st.entries_decoded} "
            f"ratio_vs_delta={ours / dl:.3f}",
        )

    print("\n| case | ours | JSON replay | delta-rs | target | notes |\n|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
