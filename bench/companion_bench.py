"""Companion index over a Delta table vs a full indextables table vs Spark on the Delta files, in one run.

    .venv/bin/python bench/companion_bench.py [--rows 1000000] [--runs 5] [--dir /tmp/indextables-companion-bench]
        [--reuse]

Corpus: examples/datagen.py documents (8-word title, 50-word body, ...); 1% of the bodies also hold
"kestrel" (planted as in search_vs_parquet.py), and datagen puts one of its RARE words in ~0.5% of
the bodies, so "zephyr" selects ~0.1%. From the same in-memory Arrow table:

- source:    `deltalake.write_deltalake(src, docs, partition_by=["region"])` (delta-rs; its time is
             printed, not compared: the table exists before a companion is built)
- companion: `it.build_companion(src, companion, indexing={"body": "text", "title": "text"})`, no
             Spark: the Delta files indexed by local processes (companion.parallelism = cores),
             rows left in the Delta table's Parquet files
- full:      `it.write_table(full, docs, partition_by=["region"], options={"indexing.typemap.body":
             "text", "indexing.typemap.title": "text"})`: the same rows, stored in the splits

Build: seconds (timed once, as the tables are written), rows/s, full write time / companion build
time. Size: the live splits of each table (`snapshot().files`, `.size`) and the Delta table's
Parquet bytes (its add actions); target: companion <= 60% of full.

Queries through Spark, warm (one warm-up), median of --runs, count() and collect() of id and of
every column: `spark.read.format("indextables").option("query", "body:<word>").load(<table>)` on
the companion and on the full table vs `body like '%<word>%'` on the Delta table read by Spark's
own Parquet reader. There are no delta-spark jars here, so the Delta table is read as
`spark.read.option("basePath", src).parquet(*DeltaTable(src).file_uris())`: exactly the files of
its current version (delta-rs writes no deletion vectors, so those files hold exactly the live
rows; `region` comes back from the hive directory names). The match counts of the three must be
equal (asserted). Ratios: Delta+like / companion and full / companion (above 1: companion faster).
Warm means warm for the companion too: each Python worker keeps the source columns it decoded
(core/split/cache/companion_rows.py, up to 512 MiB per process), so after the warm-up a companion collect() reads
no Parquet; its first collect of every column reads whole row groups (delta-rs writes one row
group per file here, ~250k rows at 1M rows) of each file that has a match.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import indextables_spark as it  # noqa: E402
from bench_common import bench_arguments, local_spark, median_time  # noqa: E402
from datagen import documents  # noqa: E402

MARKER = "kestrel"
MARKER_SHARE = 0.01
RARE_WORD = "zephyr"  # one of datagen.RARE: ~0.1% of the bodies
INDEXING = {"body": "text", "title": "text"}
QUERIES = [(f"{MARKER} (1%)", MARKER), (f"{RARE_WORD} (~0.1%)", RARE_WORD)]


def corpus(rows: int) -> pa.Table:
    """`rows` documents in 100k-row chunks (each chunk its own seed), 1% of bodies + MARKER."""
    parts = []
    for start in range(0, rows, 100_000):
        n = min(100_000, rows - start)
        t = documents(n, seed=42 + start, start=start)
        marked = pa.array(np.random.default_rng(7 + start).random(n) < MARKER_SHARE)
        body = t.column("body").combine_chunks()
        body = pc.if_else(marked, pc.binary_join_element_wise(body, MARKER, " "), body)
        parts.append(t.set_column(t.schema.get_field_index("body"), "body", body))
    return pa.concat_tables(parts).combine_chunks()


def delta_files(src: str) -> tuple[list[str], int]:
    """The current version's data files of the Delta table (absolute paths) and their bytes."""
    import deltalake

    dt = deltalake.DeltaTable(src)
    actions = pa.table(dt.get_add_actions(flatten=True))
    return list(dt.file_uris()), int(pc.sum(actions.column("size_bytes")).as_py() or 0)


def build(args, src: str, comp_path: str, full_path: str) -> None:
    import deltalake

    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    t0 = time.perf_counter()
    docs = corpus(args.rows)
    print(
        f"corpus: {args.rows:,} documents generated in {time.perf_counter() - t0:.1f}s "
        f"({docs.nbytes / 2**20:,.0f} MiB in Arrow)"
    )
    t0 = time.perf_counter()
    deltalake.write_deltalake(src, docs, partition_by=["region"])
    t_delta = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = it.build_companion(src, comp_path, indexing=INDEXING)
    t_comp = time.perf_counter() - t0
    t0 = time.perf_counter()
    it.write_table(
        full_path, docs, partition_by=["region"], options={f"indexing.typemap.{c}": m for c, m in INDEXING.items()}
    )
    t_full = time.perf_counter() - t0
    assert res["rowsIndexed"] == args.rows, res
    print(f"{'build':<34} {'seconds':>9} {'rows/s':>11}")
    print(f"{'delta write (deltalake, source)':<34} {t_delta:>8.2f}s {args.rows / t_delta:>11,.0f}  (not ours)")
    print(
        f"{'companion build (local processes)':<34} {t_comp:>8.2f}s {args.rows / t_comp:>11,.0f}  "
        f"({res['filesIndexed']} files, {res['bytesIndexed'] / 2**20:,.0f} MiB -> {res['splitsAdded']} splits)"
    )
    print(f"{'full indextables write':<34} {t_full:>8.2f}s {args.rows / t_full:>11,.0f}")
    print(f"full write / companion build: {t_full / t_comp:.2f}x")


def print_sizes(src: str, comp_path: str, full_path: str) -> None:
    comp_files = it.IndexTable(comp_path).snapshot().files
    full_files = it.IndexTable(full_path).snapshot().files
    comp = sum(f.size for f in comp_files)
    full = sum(f.size for f in full_files)
    uris, delta = delta_files(src)
    print(f"{'size':<34} {'MiB':>9} {'files':>6}")
    print(f"{'delta parquet (source)':<34} {delta / 2**20:>9,.1f} {len(uris):>6}")
    print(f"{'companion splits':<34} {comp / 2**20:>9,.1f} {len(comp_files):>6}")
    print(f"{'full indextables splits':<34} {full / 2**20:>9,.1f} {len(full_files):>6}")
    print(
        f"companion / full: {comp / full:.0%} (target <= 60%); companion / delta parquet: {comp / delta:.0%}; "
        f"delta + companion / full: {(delta + comp) / full:.0%}"
    )


def main() -> None:
    ap = bench_arguments("/tmp/indextables-companion-bench", runs=5)
    args = ap.parse_args()
    src, comp_path, full_path = (os.path.join(args.dir, d) for d in ("delta", "companion", "full"))

    if not (
        args.reuse
        and os.path.isdir(os.path.join(src, "_delta_log"))
        and it.IndexTable(comp_path).exists()
        and it.IndexTable(full_path).exists()
    ):
        build(args, src, comp_path, full_path)  # before Spark starts: the builds have the machine
    print_sizes(src, comp_path, full_path)

    spark = local_spark()
    cores = spark.sparkContext.defaultParallelism
    uris, _ = delta_files(src)
    delta = spark.read.option("basePath", src).parquet(*uris)
    rows = it.IndexTable(full_path).count()
    print(
        f"rows: {rows:,}; companion {len(it.IndexTable(comp_path).files())} splits, full "
        f"{len(it.IndexTable(full_path).files())} splits, delta {len(uris)} files; cores: {cores}; "
        f"runs per figure: {args.runs} (median)"
    )

    def ours(path: str, word: str):
        return spark.read.format("indextables").option("query", f"body:{word}").load(path)

    cols = delta.columns
    print(
        f"{'query (Spark)':<28} {'rows':>8} {'companion':>10} {'full':>9} {'delta+like':>10} "
        f"{'delta/comp':>10} {'full/comp':>9}"
    )
    counts = []
    for name, word in QUERIES:
        comp, full, pq = ours(comp_path, word), ours(full_path, word), delta.filter(f"body like '%{word}%'")
        n_comp, n_full, n_pq = comp.count(), full.count(), pq.count()
        assert n_comp == n_full == n_pq, f"{name}: companion {n_comp:,}, full {n_full:,}, delta+like {n_pq:,} rows"
        ids = sorted(r.id for r in comp.select("id").collect())
        assert ids == sorted(r.id for r in pq.select("id").collect()), f"{name}: companion and delta ids differ"
        counts.append(f"{word} {n_comp:,} / {n_full:,} / {n_pq:,}")
        for what, fn in [
            ("count", lambda df: df.count),
            ("collect id", lambda df: (lambda: df.select("id").collect())),
            ("collect *", lambda df: (lambda: df.select(*cols).collect())),
        ]:
            t_comp = median_time(fn(comp), args.runs)
            t_full = median_time(fn(full), args.runs)
            t_pq = median_time(fn(pq), args.runs)
            print(
                f"{name + ' ' + what:<28} {n_comp:>8,} {t_comp:>9.3f}s {t_full:>8.3f}s {t_pq:>9.3f}s "
                f"{t_pq / t_comp:>9.1f}x {t_full / t_comp:>8.2f}x"
            )
    print(f"match counts (companion / full / delta+like, ids of companion = delta): {'; '.join(counts)}")
    spark.stop()


if __name__ == "__main__":
    main()
