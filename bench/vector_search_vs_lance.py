"""indextables vector search vs Lance's vector index, on the same generated vectors, in one run (#38).

    .venv/bin/pip install -e '.[bench]'      # pylance
    .venv/bin/python bench/vector_search_vs_lance.py [--vectors 1000000] [--dims 128] [--splits 8]
        [--queries 100] [--batch 10000] [--dir /tmp/indextables-vector-bench] [--reuse]
        [--filters none,1%,10%] [--new-filter-only] [--no-join]

Data: `--vectors` float32 vectors of `--dims` dimensions around 1,000 Gaussian cluster centres
(fixed seed), an integer `sel` = row % 100 (filters of 1% and 10%: `sel < 1`, `sel < 10`), and an
id. Queries: `--queries` data vectors plus noise. Ground truth: exact cosine top 10 (numpy).

- ours: `it.write_table` in `--splits` equal parts (one split each) with
  `indexing.vector.emb = "<dims>,cosine[,<--kind>]"` (the default kind unless `--kind`); the same
  rows written with the column stored only (`indexing.storeonly`) give the write's own cost, so the
  difference is the index build. Bytes: the whole table directory (splits: rows, text index,
  vector files; the transaction log), and the splits' vector files (the float32 vectors, the
  vector index) and row stores apart.
  Queries: `IndexTable.search(vector=q, limit=10, where=..., columns=["id"])`, warm, one at a time,
  for a sweep of `search.vector.expansion`; filtered, also with `cache.selections.enabled=false`
  (each query selects its rows again instead of reusing each split's selection of the filter).
- Lance: `lance.write_dataset` + `create_index("emb", "IVF_PQ", metric="cosine", num_partitions,
  num_sub_vectors)`; queries `to_table(nearest={..., "nprobes", "refine_factor"}, filter=...,
  prefilter=True, columns=["id"])` for a sweep of nprobes / refine factors.

Printed: build time per million vectors (both sides in the same run: a loaded machine slows both),
the bytes of each whole table (ours / Lance's: the 1.3x target) and per vector, then per filter the
median and p95 latency and recall@10 of each setting, and the lowest latency at recall >= 0.95 of
each side with their ratio; last (unless `--batch 0` or `--no-join`), `it.search_join` of `--batch`
query vectors through Spark (local[2]) in queries per second. The load average is printed at the
start and the end. `--filters` runs only some of the filters; `--new-filter-only` times ours at
expansion 64 only, with the selection cache and without it (each query selecting its rows again: a
filter new to each query).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("LANCE_LOG", "error")  # else a deprecation warning per Lance query (_distance autoprojection)

import indextables_spark as it  # noqa: E402
from bench_common import local_spark  # noqa: E402

FILTERS = {"none": None, "1%": "sel < 1", "10%": "sel < 10"}
K = 10


def data(n: int, dims: int, seed: int = 38) -> tuple[pa.Table, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dims)).astype(np.float32) * 3
    x = centres[rng.integers(0, 1000, n)] + rng.standard_normal((n, dims)).astype(np.float32)
    ids = np.arange(n, dtype=np.int64)
    emb = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel(), pa.float32()), dims)
    return pa.table({"id": ids, "sel": pa.array(ids % 100), "emb": emb}), x


def truth(x: np.ndarray, queries: np.ndarray, keep: np.ndarray) -> list[set[int]]:
    ids = np.flatnonzero(keep)
    xs = x[ids] / np.linalg.norm(x[ids], axis=1, keepdims=True)
    out = []
    for q in queries:
        sims = xs @ (q / np.linalg.norm(q))
        out.append(set(ids[np.argpartition(-sims, K)[:K]].tolist()))
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def latencies(
    search: Callable[[np.ndarray], list[int]], queries: np.ndarray, want: list[set[int]]
) -> tuple[float, float, float]:
    """(median ms, p95 ms, recall@10) of one query at a time (one warm-up pass first)."""
    for q in queries[:5]:
        search(q)
    times, found = [], 0
    for q, w in zip(queries, want):
        t, got = timed(lambda: search(q))
        times.append(t * 1000)
        found += len(set(got) & w)
    return statistics.median(times), float(np.percentile(times, 95)), found / (K * len(queries))


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def split_bytes(table: it.IndexTable) -> dict[str, int]:
    """Bytes of the splits' parts, from their footers: `f32` the float32 vectors files, `index`
    the vector indexes, `rows` the row stores, `text` the rest (the Tantivy index, hotcache, footer)."""
    from indextables_spark.core.split.format.bundle import read_footer

    out = {"f32": 0, "index": 0, "rows": 0, "text": 0}
    for f in table.snapshot().files:
        footer = read_footer(os.path.join(table.storage.uri, f.path), f.path)
        vectors = [b for b in footer.files if b.name.startswith("vectors.")]
        f32 = sum(b.length for b in vectors if b.name.endswith(".f32"))
        index = sum(b.length for b in vectors) - f32
        out["f32"] += f32
        out["index"] += index
        out["rows"] += footer.rows.length
        out["text"] += footer.footer_end - f32 - index - footer.rows.length
    return out


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--splits", type=int, default=8)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--dir", default="/tmp/indextables-vector-bench")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--filters", default=",".join(FILTERS), help="which of " + ", ".join(FILTERS))
    ap.add_argument("--new-filter-only", action="store_true", help="ours only without the selection cache")
    ap.add_argument("--no-join", action="store_true", help="skip it.search_join through Spark")
    ap.add_argument("--kind", default="", help="the vector index kind (default: the table default)")
    args = ap.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    filters = {name: FILTERS[name] for name in args.filters.split(",")}
    n, dims = args.vectors, args.dims
    table, x = data(n, dims)
    rng = np.random.default_rng(7)
    qs = x[rng.integers(0, n, args.queries)] + rng.standard_normal((args.queries, dims)).astype(np.float32) * 0.5
    sel = np.arange(n) % 100
    keeps = {"none": np.ones(n, bool), "1%": sel < 1, "10%": sel < 10}
    want = {name: truth(x, qs, keep) for name, keep in keeps.items()}
    ours, plain, lance_dir = (os.path.join(args.dir, d) for d in ("ours", "plain", "lance"))
    info_path = os.path.join(args.dir, "build.json")
    per = -(-n // args.splits)
    vec_opts = {"spark.indextables.indexing.vector.emb": f"{dims},cosine" + (f",{args.kind}" if args.kind else "")}
    if not (args.reuse and os.path.exists(info_path)):
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(args.dir)
        t_ours = sum(
            timed(lambda s=s: it.write_table(ours, table.slice(s * per, per), options=vec_opts))[0]
            for s in range(args.splits)
        )
        plain_opts = {"spark.indextables.indexing.storeonly": "emb"}  # stored, no index (else a JSON field)
        t_plain = sum(
            timed(lambda s=s: it.write_table(plain, table.slice(s * per, per), options=plain_opts))[0]
            for s in range(args.splits)
        )
        import lance

        t_lw, _ = timed(lambda: lance.write_dataset(table, lance_dir))
        ds = lance.dataset(lance_dir)
        before = dir_bytes(lance_dir)
        t_li, _ = timed(
            lambda: ds.create_index("emb", "IVF_PQ", metric="cosine", num_partitions=256, num_sub_vectors=dims // 8)
        )
        info = {
            "ours": t_ours,
            "plain": t_plain,
            "lance_write": t_lw,
            "lance_index": t_li,
            "lance_index_bytes": dir_bytes(lance_dir) - before,
            "load_after_build": os.getloadavg()[1],
        }
        with open(info_path, "w") as f:
            json.dump(info, f)
    with open(info_path) as f:
        info = json.load(f)
    import lance

    t = it.IndexTable(ours)
    ds = lance.dataset(lance_dir)
    millions = n / 1e6
    print(f"{n:,} vectors of {dims} dimensions, cosine; ours in {t.snapshot().num_files} splits")
    print(
        f"build per million vectors: ours {(info['ours'] - info['plain']) / millions:.1f} s (write with the index "
        f"{info['ours'] / millions:.1f} s, without {info['plain'] / millions:.1f} s); Lance IVF_PQ index "
        f"{info['lance_index'] / millions:.1f} s (its write {info['lance_write'] / millions:.1f} s)"
    )
    parts = split_bytes(t)
    ours_total, lance_total = dir_bytes(ours), dir_bytes(lance_dir)
    print(
        f"whole table: ours {ours_total / 1e6:.0f} MB, Lance {lance_total / 1e6:.0f} MB (data and index): "
        f"{ours_total / lance_total:.2f}x; per vector {ours_total / n:.0f} / {lance_total / n:.0f} bytes"
    )
    print(
        f"  ours per million vectors: float32 vectors {parts['f32'] / millions / 1e6:.0f} MB, vector index "
        f"{parts['index'] / millions / 1e6:.1f} MB, row store {parts['rows'] / millions / 1e6:.1f} MB, text index "
        f"and footers {parts['text'] / millions / 1e6:.1f} MB, log {(ours_total - sum(parts.values())) / 1e6:.1f} MB; "
        f"Lance's IVF_PQ index {info['lance_index_bytes'] / millions / 1e6:.1f} MB"
    )
    print(f"load average (5 min) after the builds: {info.get('load_after_build', float('nan')):.1f}")
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for name, where in filters.items():
        print(f"filter {name}: setting, median ms, p95 ms, recall@10")
        # the last setting: each query selects its rows again (no selection cache), for the cost of that
        # (--new-filter-only keeps one cached setting, run first: the splits' rows are warm for both)
        sweep = (64,) if args.new_filter_only and where else (32, 64, 128, 256)
        cached_settings = [(ef, True) for ef in sweep]
        settings = cached_settings + ([(64, False)] if where else [])
        for ef, cached in settings:
            opts = {"spark.indextables.search.vector.expansion": str(ef)}
            if not cached:
                opts["spark.indextables.cache.selections.enabled"] = "false"
            tt = it.IndexTable(ours, options=opts)

            def ours_search(q: np.ndarray, tt: it.IndexTable = tt) -> list[int]:
                return tt.search(vector=q, limit=K, where=where, columns=["id"]).column("id").to_pylist()

            med, p95, rec = latencies(ours_search, qs, want[name])
            label = f"expansion={ef:<4d}" + ("" if cached else " no selection cache")
            print(f"  ours {label} {med:8.2f} {p95:8.2f}  {rec:.3f}")
            if cached and rec >= 0.95 and med < best.get(("ours", name), (1e9, ""))[0]:
                best[("ours", name)] = (med, f"expansion {ef}")
            if not cached:
                best[("ours-uncached", name)] = (med, f"expansion {ef}, no selection cache")
        for nprobes, refine in ((10, 1), (20, 5), (40, 10), (80, 20), (20, 100), (80, 100)):

            def lance_search(q: np.ndarray, nprobes: int = nprobes, refine: int = refine) -> list[int]:
                nearest = {"column": "emb", "q": q, "k": K, "nprobes": nprobes, "refine_factor": refine}
                kw: dict[str, Any] = {"filter": where, "prefilter": True} if where else {}
                return ds.to_table(nearest=nearest, columns=["id"], **kw).column("id").to_pylist()

            med, p95, rec = latencies(lance_search, qs, want[name])
            print(f"  Lance nprobes={nprobes:<3d} refine={refine:<3d} {med:8.2f} {p95:8.2f}  {rec:.3f}")
            if rec >= 0.95 and med < best.get(("lance", name), (1e9, ""))[0]:
                best[("lance", name)] = (med, f"nprobes {nprobes}, refine {refine}")
    print("lowest median latency at recall >= 0.95 (ours / Lance):")
    for name in filters:
        o, la = best.get(("ours", name)), best.get(("lance", name))
        ratio = f"{o[0] / la[0]:.2f}x" if o and la else "n/a"
        print(
            f"  filter {name:5s} ours {o[0] if o else float('nan'):.2f} ms ({o[1] if o else 'none'}), "
            f"Lance {la[0] if la else float('nan'):.2f} ms ({la[1] if la else 'none'}): {ratio}"
        )
        u = best.get(("ours-uncached", name))
        if u and la:
            print(
                f"  filter {name:5s} ours selecting every query's rows again: {u[0]:.2f} ms, {u[0] / la[0]:.2f}x Lance"
            )
    print(f"load average at the end of the searches: {os.getloadavg()[1]:.1f}")
    if args.batch <= 0 or args.no_join:
        return
    spark = local_spark()
    batch = x[rng.integers(0, n, args.batch)] + rng.standard_normal((args.batch, dims)).astype(np.float32) * 0.5
    qdf = spark.createDataFrame(
        [(i, [float(v) for v in row]) for i, row in enumerate(batch)], "qid int, vec array<float>"
    )
    qdf = qdf.repartition(2).cache()
    qdf.count()
    secs, rows = timed(
        lambda: it.search_join(qdf, ours, vector_col="vec", k=K, prefix="m_").select("qid", "m_id").count()
    )
    print(
        f"search_join: {args.batch:,} query vectors through Spark local[2] in {secs:.1f} s: "
        f"{args.batch / secs:,.0f} queries/s ({rows:,} rows)"
    )


if __name__ == "__main__":
    main()
