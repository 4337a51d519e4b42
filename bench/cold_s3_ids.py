"""Cold rare-term ids on S3: the bytes a read with an empty split cache fetches, against the bytes
of the table's split files (the issue's target: cold S3 rare-term ids <= 25% of the data bytes).

    make emulators-start && source .emulators/state/env.sh
    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/cold_s3_ids.py [--rows 200000]
        [--partitions 4] [--regions 2] [--s3-endpoint URL] [--runs 1]
    .venv/bin/python bench/cold_s3_ids.py --uri s3://BUCKET/docs --s3-endpoint URL [--runs 3]
    make emulators-stop

Without --s3-endpoint (or INDEXTABLES_TEST_S3_ENDPOINT) the bench starts its own moto server
(cloud_bench.moto_server) and stops it at the end; with it, the table stays, and `--uri` (printed)
runs only the scored searches below on it again, without Spark (to compare two versions of the
code on one table: `PYTHONPATH=<worktree>/src`, runs interleaved).

The table: search_vs_parquet's documents (0.01% of the bodies hold "osprey"), written by Spark to
s3:// with partitions x regions splits, body indexed as text. Then, for the rare-term query
body:osprey, each with a fresh (empty) split cache directory:
- Spark-free: `IndexTable(uri, storage=CountingStorage(...)).search(query, columns=["id"])` and
  the same with every column; every byte this process reads through the storage layer is counted
  (core/storage/counting.py), split files apart from the transaction log.
- Through Spark: `SELECT id FROM docs WHERE body TEXTSEARCH 'osprey'`, the reader with
  query + columns=id, and the reader with every column (.select("id")), collected. The Python
  workers that open the splits are separate processes, so a CountingStorage in the driver cannot
  see their reads: the views read S3 through a byte-counting HTTP proxy in front of the emulator
  (bench/s3_proxy.py), which counts the response bytes of every GET, whichever process sent it.
Each is run with the split cache's default handling (`cache.rows.lazy` auto: a Spark-free search
with only a query fetches, of remote splits of 1 MiB or more, only the parts of the index files the
query reads (core/split/cache/sparse.py) and the row store by ranges; other reads fetch splits under
`cache.rows.lazyMinSplitSize`, 16 MB by default, whole) and with `cache.rows.lazy` true (the same,
every split). The Spark reads (separate worker processes) do not pass the query to the split cache:
they fetch the index files whole. bench/cloud_bench.py compares the ways, cold and warm.

Scored: the Spark-free `search(query, columns=["id"], limit=10)`, and the same `where region = <the
first region>` (partition pruning reads 1/--regions of the splits; the corpus statistics look the
query's terms up in every split: core/split/read/corpus_stats.py), each --runs times with a fresh
cache and the statistics kept by the process dropped: split bytes and wall time (median, each run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter

import indextables_spark as it
from bench_common import local_spark
from cloud_bench import moto_server, new_bucket
from s3_proxy import S3Proxy, s3_options
from search_vs_parquet import RARE_MARKER, BenchDocs, docs_source

QUERY = f"body:{RARE_MARKER}"
SQL = {  # the Spark reads by SQL (a view with `_score`)
    "sql": f"SELECT id FROM {{view}} WHERE body TEXTSEARCH '{RARE_MARKER}'",
    "top10": f"SELECT id, _score FROM {{view}} WHERE body TEXTSEARCH '{RARE_MARKER}' ORDER BY _score DESC LIMIT 10",
    "filter": "SELECT id, body FROM {view} WHERE id = 12345",
}


def split_bytes(proxy: S3Proxy) -> tuple[int, int, int]:
    """(bytes of split files, bytes of everything else (the transaction log), GET requests) the
    proxy forwarded since its last reset."""
    by_key = proxy.bytes_by_key("GET")
    splits = sum(n for k, n in by_key.items() if k.endswith(".split"))
    return splits, sum(by_key.values()) - splits, sum(1 for r in proxy.log if r.method == "GET")


def build(spark, uri: str, endpoint: str, args) -> None:
    """The documents written by Spark to `uri` (partitioned by region, body as text)."""
    src = docs_source(spark, args)
    w = src.write.format("indextables").mode("overwrite").partitionBy("region")
    for k, v in {**s3_options(endpoint), "spark.indextables.indexing.typemap.body": "text"}.items():
        w = w.option(k, v)
    w.save(uri)


def spark_free(uri: str, endpoint: str, cache: str, columns: list[str] | None, lazy: str) -> tuple[int, int, int]:
    """(matches, split bytes, other bytes) a cold IndexTable.search reads, counted through the
    storage layer of this process."""
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.storage.counting import CountingStorage
    from indextables_spark.core.log.maintenance.shared_logs import forget_logs

    forget_logs()
    shutil.rmtree(cache, ignore_errors=True)
    opts = {**s3_options(endpoint), "cache.disk.path": cache, "cache.rows.lazy": lazy}
    storage = CountingStorage(open_storage(uri, opts))
    n = it.IndexTable(uri, opts, storage=storage).search(QUERY, columns=columns).num_rows
    split = storage.bytes_read["read_range"] + storage.bytes_read["download_file"]
    return n, split, storage.bytes_read["read"]


def scored(uri: str, endpoint: str, cache: str, where: str | None, lazy: str) -> tuple[int, int, float]:
    """(ids, split bytes, seconds) of a cold scored top 10 (the table opened and searched: its
    log, the corpus statistics of every split, the splits read)."""
    from indextables_spark.core.log.maintenance.shared_logs import forget_logs
    from indextables_spark.core.storage import open_storage
    from indextables_spark.core.storage.counting import CountingStorage

    try:  # (code before the corpus statistics, run with PYTHONPATH=<worktree>/src, has none to drop)
        from indextables_spark.core.split.read.corpus_stats import forget_table_stats
    except ImportError:
        forget_table_stats = None

    forget_logs()
    if forget_table_stats is not None:
        forget_table_stats()
    shutil.rmtree(cache, ignore_errors=True)
    opts = {**s3_options(endpoint), "cache.disk.path": cache, "cache.rows.lazy": lazy}
    t0 = time.perf_counter()
    storage = CountingStorage(open_storage(uri, opts))
    n = it.IndexTable(uri, opts, storage=storage).search(QUERY, columns=["id"], limit=10, where=where).num_rows
    seconds = time.perf_counter() - t0
    return n, storage.bytes_read["read_range"] + storage.bytes_read["download_file"], seconds


def scored_runs(uri: str, endpoint: str, workdir: str, runs: int) -> None:
    table = it.IndexTable(uri, s3_options(endpoint))
    files = table.files()
    data = sum(f.size for f in files)
    region = sorted({f.partition_values["region"] for f in files})[0]
    read = sum(f.partition_values["region"] == region for f in files)
    cases = ((None, ""), (f"region = '{region}'", f" where region = '{region}' ({read} of {len(files)} splits read)"))
    for lazy in ("auto", "true"):
        for where, what in cases:
            caches = [os.path.join(workdir, f"q-{uuid.uuid4().hex[:6]}") for _ in range(runs)]
            got = [scored(uri, endpoint, cache, where, lazy) for cache in caches]
            n, split, _ = got[-1]
            times = sorted(t for _, _, t in got)
            print(
                f"  lazy={lazy} scored search({QUERY!r}, columns=['id'], limit=10){what}: {n} ids, split files "
                f"{split / 1e6:.2f} MB = {split / data:.1%} of the data bytes; {times[len(times) // 2]:.3f} s "
                f"(runs {', '.join(f'{t:.3f}' for _, _, t in got)})"
            )


def through_spark(spark, proxy: S3Proxy, uri: str, cache: str, how: str, lazy: str) -> tuple[int, int, int, int]:
    """(ids, split bytes, other bytes, GET requests) one cold Spark read fetches through the proxy:
    `how` is "sql" (SELECT id ... TEXTSEARCH), "top10" (its top 10 by `_score`), "filter" (a selective
    filter, no query), "columns" (reader, columns=id) or "all" (reader, every column, .select("id"))."""
    from indextables_spark.core.log.maintenance.shared_logs import forget_logs

    forget_logs()
    shutil.rmtree(cache, ignore_errors=True)
    opts = {
        **s3_options(proxy.url),
        "spark.indextables.cache.disk.path": cache,
        "spark.indextables.cache.rows.lazy": lazy,
    }
    proxy.reset()
    if how in SQL:
        quoted = ", ".join(f"'{k}' '{v}'" for k, v in opts.items())
        view = f"docs_{uuid.uuid4().hex[:8]}"
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW {view} USING indextables OPTIONS (path '{uri}', withScore 'true', {quoted})"
        )
        rows = spark.sql(SQL[how].format(view=view)).collect()
    else:
        r = spark.read.format("indextables").option("query", QUERY)
        if how == "columns":
            r = r.option("columns", "id")
        for k, v in opts.items():
            r = r.option(k, v)
        rows = r.load(uri).select("id").collect()
    split, other, requests = split_bytes(proxy)
    return len(rows), split, other, requests


def print_composition(table, data: int) -> None:
    """What the split files hold: the row store against the index files (by extension), from
    their footers (ranged reads)."""
    from indextables_spark.core.split.format.bundle import RangeSource, read_footer

    by: Counter[str] = Counter()
    for f in table.files():
        footer = read_footer(RangeSource(f.size, lambda s, e, p=f.path: table.storage.read_range(p, s, e)), f.path)
        by["row store (rows.arrow)"] += footer.rows.length
        for b in footer.files:
            by[f"index *.{b.name.rsplit('.', 1)[-1]}"] += b.length
    index = sum(n for k, n in by.items() if k.startswith("index"))
    parts = ", ".join(f"{k} {n / data:.1%}" for k, n in by.most_common())
    print(f"split files: index files {index / data:.1%} of the data bytes ({parts})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--regions", type=int, default=2)
    ap.add_argument("--s3-endpoint", default=os.environ.get("INDEXTABLES_TEST_S3_ENDPOINT"))
    ap.add_argument("--uri", help="a table an earlier run wrote on --s3-endpoint: only the scored searches")
    ap.add_argument("--runs", type=int, default=1, help="cold runs of each scored search")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="cold-s3-ids-")
    if args.uri:
        if not args.s3_endpoint:
            ap.error("--uri needs --s3-endpoint (the emulator holding the table)")
        scored_runs(args.uri, args.s3_endpoint, workdir, args.runs)
        shutil.rmtree(workdir, ignore_errors=True)
        return 0
    from pyspark import cloudpickle

    import search_vs_parquet

    cloudpickle.register_pickle_by_value(search_vs_parquet)  # the workers cannot import bench/
    spark = local_spark()
    spark.dataSource.register(BenchDocs)
    with moto_server(args.s3_endpoint) as endpoint:
        bucket = new_bucket(endpoint)
        uri = f"s3://{bucket}/docs"
        t0 = time.perf_counter()
        build(spark, uri, endpoint, args)
        table = it.IndexTable(uri, s3_options(endpoint))
        files = table.files()
        data = sum(f.size for f in files)
        print(
            f"table: {table.count():,} rows in {len(files)} splits, {data / 1e6:.1f} MB of split files "
            f"({data / len(files) / 1e6:.1f} MB each; written in {time.perf_counter() - t0:.1f}s); "
            f"query {QUERY} (0.01%); bytes fetched cold (empty split cache), split files / transaction log"
            + (f"; --uri {uri}" if args.s3_endpoint else "")
        )
        print_composition(table, data)
        proxy = S3Proxy(endpoint, memory=False)  # counts what the Spark workers fetch
        try:
            for lazy in ("auto", "true"):
                print(f"cache.rows.lazy={lazy}:")
                for columns in (["id"], None):
                    cache = os.path.join(workdir, f"c-{uuid.uuid4().hex[:6]}")  # a new directory: nothing warm
                    n, split, other = spark_free(uri, endpoint, cache, columns, lazy)
                    what = "columns=['id']" if columns else "every column"
                    print(
                        f"  Spark-free IndexTable.search({QUERY!r}, {what}) {n} rows: split files "
                        f"{split / 1e6:.2f} MB = {split / data:.1%} of the data bytes; log {other / 1e3:.0f} kB"
                    )
                for how, label in (
                    ("sql", f"SQL SELECT id ... WHERE body TEXTSEARCH '{RARE_MARKER}'"),
                    ("top10", "SQL top 10 by _score of that"),
                    ("filter", "SQL SELECT id, body ... WHERE id = 12345"),
                    ("columns", "reader query + columns=id"),
                    ("all", "reader query, every column, .select(id)"),
                ):
                    n, split, other, requests = through_spark(
                        spark, proxy, uri, os.path.join(workdir, f"s-{uuid.uuid4().hex[:6]}"), how, lazy
                    )
                    print(
                        f"  Spark {label:<48} {n} ids: split files {split / 1e6:.2f} MB = {split / data:.1%} of "
                        f"the data bytes; log {other / 1e3:.0f} kB; {requests} GETs"
                    )
            print("scored (Spark-free):")
            scored_runs(uri, endpoint, workdir, args.runs)
        finally:
            proxy.close()
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
