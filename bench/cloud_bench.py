"""Object store vs local disk: the same tables and reads on the S3 emulator (moto) and on local disk,
measured in one run, with the ratio.

Cases (medians over --runs, default 5, after one warm-up run; fresh IndexTable each run):
  state-read-70k       snapshot of a 70,000-file table (V4 Avro state + 5 version files after it)
                       with its Arrow file table: listing, state manifest, manifests, version files
  partition-70k        the files of one partition of that table (manifest pruning)
  query-warm           a full-text count over the splits of a small table, split cache warm
                       (what a long-running executor sees)
  query-cold           the same count with an empty split cache (every split downloaded/extracted)
  fetch-rows-warm      rows matching a rare-term query, materialised (warm cache)
and, on S3, the bytes a cold and a warm rare-term IndexTable.search fetch (counted through the
storage layer: core/storage/counting.py) against the bytes of the splits it opens.

Cold reads of small splits (--cold-docs, default 50,000,200,000,640,000 documents in --cold-splits
16 splits: splits of about 1, 4.5 and 15 MB): the rare-term id query
`IndexTable.search(RARE_QUERY, columns=["id"])` on S3 three ways, in the same run: the splits
fetched whole (cache.rows.lazy=false, the behaviour before), the index files whole and the row
store by ranges (what cache.rows.lazy did for splits of 16 MB or more), and only the parts of the
index files the query reads (core/split/cache/sparse.py, the default now). For each: GET requests, bytes,
% of the data bytes, cold time (median of --runs, empty split cache each time) and warm time.
--only-cold runs just that part.

Usage:
  .venv/bin/python bench/cloud_bench.py [--runs 5] [--files 70000] [--docs 200000] [--splits 8]
                                         [--s3-endpoint URL] [--workdir DIR]

Without --s3-endpoint (or INDEXTABLES_TEST_S3_ENDPOINT) the bench starts its own moto server
(scripts/moto_server.py, the one `make test` uses) on a free 127.0.0.1 port and stops it at the end.
moto is a Python server on the same machine: its per-request latency (5–20 ms) stands in for a
real S3 round trip (10–30 ms within a region), its bandwidth is not S3's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import indextables_spark as it  # noqa: E402
from bench_common import fetch_rows  # noqa: E402
from s3_proxy import ACCESS_KEY, REGION, SECRET_KEY  # noqa: E402
from indextables_spark.core.log.maintenance.state_writer import write_state  # noqa: E402
from indextables_spark.core.log.commit.synthetic import (  # noqa: E402
    DEFAULT_SCHEMA,
    create_table,
    partition_value,
    synthetic_add,
    write_bulk_versions,
)

PER_VERSION = 1000
NUM_PARTITIONS = 20
TAIL_VERSIONS = 5  # version files committed after the state (a table between checkpoints)
QUERY = "body:spark AND body:cloud"
RARE_QUERY = "body:quasar OR body:nebula"


# ---- the S3 emulator ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client for the moto server (the bench credentials)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )


def new_bucket(endpoint: str, name: str | None = None) -> str:
    """A bucket on the moto server: `name`, or a fresh name."""
    bucket = name or f"indextables-bench-{uuid.uuid4().hex[:8]}"
    s3_client(endpoint).create_bucket(Bucket=bucket)
    return bucket


@contextlib.contextmanager
def moto_server(endpoint: str | None) -> Iterator[str]:
    """The given endpoint, or a moto server of our own for the duration of the block."""
    if endpoint:
        yield endpoint
        return
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="cloud-bench-moto-")
    log = open(os.path.join(workdir, "moto.log"), "wb")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "scripts", "moto_server.py"), "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"moto server exited during start-up (see {workdir}/moto.log)")
            try:
                urllib.request.urlopen(url + "/", timeout=1)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit(f"moto server did not answer on {url} within 60 s")
                time.sleep(0.2)
        print(f"started moto S3 server on {url} (pid {proc.pid})", flush=True)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
        if not endpoint:
            print(f"stopped moto S3 server (pid {proc.pid})", flush=True)


# ---- building the tables (through the Storage interface, so the same code builds both) -----------------


def build_state_table(uri: str, options: dict, n: int) -> None:
    """Version 0 through the Transaction API; then version files of PER_VERSION adds each (written
    directly for speed: the bytes a commit writes); a V4 Avro state; TAIL_VERSIONS more commits."""
    t = it.IndexTable(uri, {**options, "checkpoint.enabled": "false"})
    create_table(t, ["date"], schema=DEFAULT_SCHEMA)
    base = n - TAIL_VERSIONS
    v = write_bulk_versions(t, base, PER_VERSION, NUM_PARTITIONS)
    write_state(t.log, v)
    for i in range(base, n):
        t.transaction().add_files([synthetic_add(i, num_partitions=NUM_PARTITIONS)]).commit()


def build_text_table(uri: str, options: dict, docs: int, splits: int) -> None:
    """`splits` splits of generated documents, written like Spark tasks write them."""
    from datagen import documents
    from pyspark.sql.types import StructType

    from indextables_spark.config.options import Options
    from indextables_spark.spark.writer import commit_write, plan_write, write_splits
    from indextables_spark.core.schema.arrow_types import spark_schema_json

    data = documents(docs).drop_columns(["tags"])
    opts = Options.of(options, {"indexing.typemap.body": "text", "indexing.typemap.title": "text"})
    plan, read_version, _ = plan_write(uri, opts, StructType.fromJson(spark_schema_json(data.schema)), False)
    step = -(-docs // splits)
    adds = []
    for k in range(splits):
        msg = write_splits(uri, opts, plan, iter(data.slice(k * step, step).to_batches()))
        adds.extend(it.AddFile.from_json(d) for d in msg.adds)
    commit_write(uri, opts, plan, read_version, False, adds)


# ---- measuring ---------------------------------------------------------------------------------------------


def median_ms(fn, runs: int, before=None) -> tuple[float, object]:
    if before:
        before()
    out = fn()  # warm-up
    times = []
    for _ in range(runs):
        if before:
            before()
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 1), out


def cases(uri_state: str, uri_text: str, options: dict, cache_dir: str, runs: int) -> dict[str, tuple[float, object]]:
    opts = {**options, "cache.disk.path": cache_dir}
    day = partition_value(3, NUM_PARTITIONS)

    def clear_cache():
        from indextables_spark.core.split.cache import open_splits
        from indextables_spark.core.split.cache.cache import get_cache

        cache = get_cache(opts)
        for name in os.listdir(cache.root):
            path = os.path.join(cache.root, name)
            if not name.startswith("."):
                open_splits.forget(path)
                shutil.rmtree(path)

    from indextables_spark.core.log.maintenance.shared_logs import forget_logs

    res = {  # forget_logs: each run decodes the state afresh (no snapshot kept from the last run)
        "state-read-70k": median_ms(
            lambda: it.IndexTable(uri_state, opts).snapshot().files_table.num_rows, runs, before=forget_logs
        ),
        "partition-70k": median_ms(
            lambda: len(it.IndexTable(uri_state, opts).files(f"date = '{day}'")), runs, before=forget_logs
        ),
    }
    res["query-cold"] = median_ms(lambda: it.IndexTable(uri_text, opts).count(query=QUERY), runs, before=clear_cache)
    res["query-warm"] = median_ms(lambda: it.IndexTable(uri_text, opts).count(query=QUERY), runs)
    res["fetch-rows-warm"] = median_ms(lambda: fetch_rows(it.IndexTable(uri_text, opts), RARE_QUERY), runs)
    return res


def search_bytes(
    uri_text: str, options: dict, cache_dir: str, columns: list[str], lazy: str = "auto"
) -> tuple[int, int, int, int, float]:
    """(split bytes of the splits the query opens, bytes fetched by a cold search, by the same
    search warm, matches, warm median ms): IndexTable.search(RARE_QUERY, columns=columns) with
    every byte counted through the storage layer (core/storage/counting.py)."""
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.storage.counting import CountingStorage

    opts = {**options, "cache.disk.path": cache_dir, "cache.rows.lazy": lazy}
    shutil.rmtree(cache_dir, ignore_errors=True)
    storage = CountingStorage(open_storage(uri_text, opts))
    t = it.IndexTable(uri_text, opts, storage=storage)
    split_bytes = sum(f.size for f in t.files())
    storage.reset()
    n = t.search(RARE_QUERY, columns=columns).num_rows
    cold = storage.bytes_read["read_range"] + storage.bytes_read["download_file"]
    storage.reset()
    assert t.search(RARE_QUERY, columns=columns).num_rows == n
    warm = storage.bytes_read["read_range"] + storage.bytes_read["download_file"]
    warm_ms, _ = median_ms(lambda: t.search(RARE_QUERY, columns=columns).num_rows, 7)
    return split_bytes, cold, warm, n, warm_ms


COLD_MODES = (
    ("whole splits (before)", {"cache.rows.lazy": "false"}, False),
    (
        "index whole, rows by ranges",
        {"cache.rows.lazy": "auto", "cache.rows.lazyMinSplitSize": "0", "cache.index.partialMinSplitSize": "1024g"},
        True,
    ),
    # every size here (the default, cache.index.partialMinSplitSize = 4 MB, leaves smaller splits whole)
    ("query's index parts (now)", {"cache.rows.lazy": "auto", "cache.index.partialMinSplitSize": "0"}, False),
)


def cold_small_splits(bucket: str, s3_options: dict, workdir: str, docs_list: list[int], args) -> None:
    """The rare-term id query on tables of small splits, cold and warm, fetched three ways."""
    import pyarrow as pa

    from indextables_spark.core.split.cache import open_splits
    from indextables_spark.core.split.read.scan import TableScan
    from indextables_spark.core.split.read.search import SearchPlan, search_table
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.storage.counting import CountingStorage

    class S3Like(CountingStorage):
        """moto with each GET taking what it would on S3 (args.s3_latency_ms first byte, then
        args.s3_mbps per connection): a sleep after the answer, so parallel GETs overlap."""

        def _wait(self, nbytes: int) -> None:
            time.sleep(args.s3_latency_ms / 1000 + nbytes / (args.s3_mbps * 1e6))

        def read_range(self, key: str, start: int, end: int) -> bytes:
            data = super().read_range(key, start, end)
            self._wait(len(data))
            return data

        def download_file(self, key: str, local_path: str) -> None:
            super().download_file(key, local_path)
            self._wait(os.path.getsize(local_path))

    print(
        f"\ncold reads of small splits on S3 (moto): IndexTable.search({RARE_QUERY!r}, columns=['id']); "
        f"requests and bytes of one cold search (split files only), medians of {args.runs} runs; "
        f"'moto': as moto answers (a few ms per GET, local bandwidth), 'S3-like': each GET also waits "
        f"{args.s3_latency_ms:g} ms + its bytes at {args.s3_mbps:g} MB/s"
    )
    print(
        f"{'splits':>16} {'GETs as':8} {'how':30} {'rows':>5} {'GETs':>5} {'MB':>7} {'of data':>8} "
        f"{'cold ms':>8} {'warm ms':>8}"
    )
    profiles = (
        [("moto", CountingStorage), ("S3-like", S3Like)] if args.s3_latency_ms >= 0 else [("moto", CountingStorage)]
    )
    for docs, (profile, wrapper) in [(d, p) for d in docs_list for p in profiles]:
        uri = f"s3://{bucket}/cold-{docs}"
        if profile == profiles[0][0]:
            build_text_table(uri, s3_options, docs, args.cold_splits)
        modes = []
        for label, extra, index_whole in COLD_MODES:
            root = os.path.join(workdir, f"cold-{docs}-{uuid.uuid4().hex[:6]}")
            opts = {**s3_options, **extra, "cache.disk.path": root}
            storage = wrapper(open_storage(uri, opts))
            t = it.IndexTable(uri, opts, storage=storage)
            modes.append((label, index_whole, root, storage, t, t.snapshot()))
        files = modes[0][4].files()
        data = sum(f.size for f in files)

        def search(mode) -> pa.Table:
            # IndexTable.search on a snapshot read once: the split cache and the searches are
            # timed, not the listing of the transaction log (moto: 20-45 ms, noisy)
            _label, _index_whole, _root, storage, t, snap = mode
            scan = TableScan(storage, snap, t.options, columns=["id"])
            files = scan.live_files()
            return search_table(SearchPlan(scan.with_query(RARE_QUERY, files), files))

        def clear(mode) -> None:
            root, storage = mode[2], mode[3]
            if os.path.isdir(root):
                for name in os.listdir(root):
                    if not name.startswith("."):
                        open_splits.forget(os.path.join(root, name))
                        shutil.rmtree(os.path.join(root, name))
            storage.reset()

        expect = sorted(modes[0][4].search(RARE_QUERY, columns=["id"]).column("id").to_pylist())
        cold: dict[str, list[float]] = {m[0]: [] for m in modes}
        warm: dict[str, list[float]] = {m[0]: [] for m in modes}
        fetched: dict[str, tuple[int, int]] = {}
        for run in range(args.runs + 1):  # the modes take turns (the machine's load varies); run 0 warms up
            for mode in modes:
                clear(mode)
                gc.collect()
                t0 = time.perf_counter()
                got = search(mode)
                if run:
                    cold[mode[0]].append(time.perf_counter() - t0)
                storage = mode[3]
                fetched[mode[0]] = (
                    storage.bytes_read["read_range"] + storage.bytes_read["download_file"],
                    storage.requests["read_range"] + storage.requests["download_file"],
                )
                if sorted(got.column("id").to_pylist()) != expect:
                    raise SystemExit(f"{mode[0]}: different rows than IndexTable.search")
        for run in range(max(3 * args.runs, 15)):
            for mode in modes:
                gc.collect()
                t0 = time.perf_counter()
                search(mode)
                warm[mode[0]].append(time.perf_counter() - t0)
        for mode in modes:
            label = mode[0]
            nbytes, gets = fetched[label]
            size = f"{len(files)} x {data / len(files) / 1e6:.1f} MB"
            print(
                f"{size:>16} {profile:8} {label:30} {len(expect):5d} {gets:5d} {nbytes / 1e6:7.2f} {nbytes / data:8.1%} "
                f"{statistics.median(cold[label]) * 1000:8.1f} {statistics.median(warm[label]) * 1000:8.1f}",
                flush=True,
            )
            shutil.rmtree(mode[2], ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=70_000)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--splits", type=int, default=8)
    ap.add_argument("--s3-endpoint", default=os.environ.get("INDEXTABLES_TEST_S3_ENDPOINT"))
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--cold-docs", default="50000,200000,640000", help="documents per cold-read table")
    ap.add_argument("--cold-splits", type=int, default=16)
    ap.add_argument("--only-cold", action="store_true", help="only the cold reads of small splits")
    ap.add_argument("--s3-latency-ms", type=float, default=20.0, help="S3-like GETs: first byte (-1: no such rows)")
    ap.add_argument("--s3-mbps", type=float, default=100.0, help="S3-like GETs: MB/s per connection")
    args = ap.parse_args()
    if args.runs < 5:
        ap.error("--runs must be at least 5 (medians of at least 5 runs)")
    workdir = args.workdir or tempfile.mkdtemp(prefix="cloud-bench-")
    os.makedirs(workdir, exist_ok=True)

    with moto_server(args.s3_endpoint) as endpoint:
        s3_options = {
            "aws.accessKey": "bench",
            "aws.secretKey": "bench-secret",
            "aws.region": "us-east-1",
            "s3.endpoint": endpoint,
            "s3.pathStyleAccess": "true",
        }
        bucket = new_bucket(endpoint)
        targets = {
            "local": (os.path.join(workdir, "local-state"), os.path.join(workdir, "local-text"), {}),
            "s3": (f"s3://{bucket}/state", f"s3://{bucket}/text", s3_options),
        }
        cold_small_splits(bucket, s3_options, workdir, [int(x) for x in args.cold_docs.split(",")], args)
        if args.only_cold:
            targets = {}
        for name, (state_uri, text_uri, options) in targets.items():
            for p in (state_uri, text_uri):
                if "://" not in p:
                    shutil.rmtree(p, ignore_errors=True)
            t0 = time.perf_counter()
            build_state_table(state_uri, options, args.files)
            build_text_table(text_uri, options, args.docs, args.splits)
            print(f"built the {name} tables in {time.perf_counter() - t0:.1f} s", flush=True)

        results = {}
        for name, (state_uri, text_uri, options) in targets.items():
            results[name] = cases(state_uri, text_uri, options, os.path.join(workdir, f"cache-{name}"), args.runs)

        if not args.only_cold:
            text = it.IndexTable(targets["local"][1])
            print(
                f"\n{args.files:,}-file table ({NUM_PARTITIONS} partitions, state + {TAIL_VERSIONS} version files); "
                f"{args.docs:,} documents in {text.snapshot().num_files} splits "
                f"({text.snapshot().total_bytes / 1e6:.1f} MB); medians of {args.runs} runs"
            )
            print(f"{'case':18} {'local (ms)':>11} {'S3 moto (ms)':>13} {'S3 / local':>11}  result")
            for case, (t_local, r_local) in results["local"].items():
                t_s3, r_s3 = results["s3"][case]
                if r_local != r_s3:
                    raise SystemExit(f"{case}: {r_local} on local disk but {r_s3} on S3")
                print(f"{case:18} {t_local:11.1f} {t_s3:13.1f} {t_s3 / t_local:10.1f}x  {r_local}")
            for columns in (["id"], ["id", "title"]):
                split_bytes, cold, warm, n, warm_ms = search_bytes(
                    targets["s3"][1], targets["s3"][2], os.path.join(workdir, f"cache-bytes-{len(columns)}"), columns
                )
                _, whole, _, _, whole_ms = search_bytes(
                    targets["s3"][1],
                    targets["s3"][2],
                    os.path.join(workdir, f"cache-whole-{len(columns)}"),
                    columns,
                    lazy="false",
                )
                print(
                    f"rare-term search on S3 ({n:,} rows, columns {', '.join(columns)}), bytes fetched through the "
                    f"storage layer against the {split_bytes / 1e6:.1f} MB of the splits it opens: cold "
                    f"{cold / 1e6:.1f} MB ({cold / split_bytes:.1%}; target <= 50%; splits fetched whole: "
                    f"{whole / 1e6:.1f} MB), warm {warm / 1e6:.2f} MB; warm search {warm_ms:.1f} ms "
                    f"(splits fetched whole: {whole_ms:.1f} ms)"
                )
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
