"""Cold vector searches on object storage: what a top-10 search fetches with an empty cache, and
how long it takes: ours (the compressed index, the row ids, the candidates' vector pages), ours
fetching the vector files whole (how a vector search read a split before), and Lance's IVF_PQ, on
the same vectors, behind the same latency proxy, in the same run (issue #50, item 5).

    .venv/bin/pip install -e '.[bench]'      # pylance
    .venv/bin/python bench/cold_vector_s3.py [--vectors 500000] [--dims 128] [--splits 8]
        [--queries 3] [--latency 20] [--stream-mbs 0] [--warm 5] [--lance 20,100] [--where 'sel < 1']
        [--s3-endpoint URL]

Data: bench/vector_search_vs_lance.py's `data` (clustered float32 vectors, `id`, `sel` = id % 100).
Tables on a moto S3 server (scripts/moto_server.py, or --s3-endpoint):
- ours: `it.write_table` with `indexing.vector.emb = "<dims>,cosine"` (the default kind, ivf_pq),
  --splits splits;
- Lance: `lance.write_dataset` + `create_index("emb", "IVF_PQ", metric="cosine",
  num_partitions=256, num_sub_vectors=dims // 8)`.
Every read goes through bench/s3_proxy.py (objects served from memory, --latency ms added to every
request, each answer held for its bytes at --stream-mbs MB/s, each request recorded).

Each query runs in a fresh process with an empty cache (imports and the table's open excluded from
its time): ours `IndexTable(uri, opts).search(vector=q, limit=10, columns=["id"])`, ours again with
`cache.index.partialMinSplitSize` = 1 PB (the splits' index files, vector files included, fetched
whole), Lance `ds.to_table(nearest={"column": "emb", "q": q, "k": 10, "nprobes": N, "refine_factor":
R}, columns=["id"])`, each side with `--where` as its filter (Lance prefiltering). Then in the
same process: the same query again (warm), and the other queries (the index held, their
candidates not: `next`). Printed per side: the cold query's time (median and
range over the queries), its requests and bytes (MB, % of the side's table and, for ours, of its
vector files), the warm and next times, recall@10 against exact cosine neighbours; then ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
RESULT_MARK = "@@cold-vector-result@@ "
K = 10
WHOLE = {"cache.index.partialMinSplitSize": str(10**15)}


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    from s3_proxy import lance_storage_options, s3_options

    queries = np.asarray(spec["queries"], np.float32)
    marks = [time.time()]
    if spec["side"] == "lance":
        import lance

        os.environ.setdefault("LANCE_LOG", "error")
        ds = lance.dataset(spec["uri"], storage_options=lance_storage_options(spec["endpoint"]))
        nprobes, refine = spec["lance"]

        where = {"filter": spec["where"], "prefilter": True} if spec["where"] else {}

        def search(q: np.ndarray) -> list[int]:
            nearest = {"column": "emb", "q": q, "k": K, "nprobes": nprobes, "refine_factor": refine}
            return ds.to_table(nearest=nearest, columns=["id"], **where).column("id").to_pylist()  # type: ignore[no-any-return]

    else:
        import faiss  # noqa: F401 - process start-up, not the search
        import pyarrow  # noqa: F401

        import indextables_spark as it

        opts = {**s3_options(spec["endpoint"]), "cache.disk.path": spec["cache"], **spec["options"]}
        table = it.IndexTable(spec["uri"], opts)
        table.snapshot()

        def search(q: np.ndarray) -> list[int]:
            found = table.search(vector=q, limit=K, where=spec["where"], columns=["id"])
            return found.column("id").to_pylist()  # type: ignore[no-any-return]

    marks.append(time.time())
    first = queries[spec["first"]]
    t = time.perf_counter()
    found = {spec["first"]: search(first)}
    cold = time.perf_counter() - t
    marks.append(time.time())
    warm = []
    for _ in range(spec["warm"]):
        t = time.perf_counter()
        search(first)
        warm.append(time.perf_counter() - t)
    nxt = []
    for i, q in enumerate(queries):
        if i != spec["first"]:
            t = time.perf_counter()
            found[i] = search(q)
            nxt.append(time.perf_counter() - t)
    marks.append(time.time())
    return {"cold": cold, "warm": warm, "next": nxt, "found": {str(k): v for k, v in found.items()}, "marks": marks}


def _run(proxy: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    from s3_proxy import cold_child

    out, log = cold_child(
        proxy, __file__, spec, workdir, os.path.join(ROOT, "src"), RESULT_MARK, 1800, str(spec["side"])
    )
    m = out["marks"]
    cold = [r for r in log if m[1] <= r.t <= m[2]]
    out["requests"], out["bytes"] = len(cold), sum(r.nbytes for r in cold)
    out["vector_bytes"] = sum(r.nbytes for r in cold if r.key in spec.get("vector_keys", ()))
    return out


def _write(endpoint: str, bucket: str, args: argparse.Namespace) -> tuple[np.ndarray, dict[str, Any]]:
    import lance
    from s3_proxy import lance_storage_options, s3_options
    from vector_search_vs_lance import data

    import indextables_spark as it

    table, x = data(args.vectors, args.dims)
    t0 = time.perf_counter()
    opts = {
        **s3_options(endpoint),
        "indexing.vector.emb": f"{args.dims},cosine",
        "write.chunkRows": str(-(-args.vectors // args.splits)),
    }
    it.write_table(f"s3://{bucket}/ours", table, options=opts)
    t1 = time.perf_counter()
    so = lance_storage_options(endpoint)
    ds = lance.write_dataset(table, f"s3://{bucket}/lance", storage_options=so)
    ds.create_index("emb", "IVF_PQ", metric="cosine", num_partitions=256, num_sub_vectors=args.dims // 8)
    t2 = time.perf_counter()
    print(f"written: ours {t1 - t0:.0f} s, Lance {t2 - t1:.0f} s (data and IVF_PQ)", flush=True)
    ours = it.IndexTable(f"s3://{bucket}/ours", s3_options(endpoint))
    return x, {"splits": [f.path for f in ours.files()]}


def _vector_parts(endpoint: str, bucket: str, splits: list[str]) -> tuple[int, int]:
    """(bytes of the splits' vector files, of the splits) from their footers."""
    from s3_proxy import s3_options

    from indextables_spark.core.split.format.bundle import RangeSource, read_footer
    from indextables_spark.core.storage import open_storage

    storage = open_storage(f"s3://{bucket}/ours", s3_options(endpoint))
    vec = total = 0
    for path in splits:
        stat = storage.stat(path)
        assert stat is not None, path
        size = stat.size
        footer = read_footer(RangeSource(size, lambda s, e, p=path: storage.read_range(p, s, e)), path)
        vec += sum(f.length for f in footer.files if f.name.startswith("vectors."))
        total += size
    return vec, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=int, default=500_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--splits", type=int, default=8)
    ap.add_argument("--queries", type=int, default=3, help="cold runs per side (one query each)")
    ap.add_argument("--latency", type=float, default=20.0, help="ms added to every request")
    ap.add_argument("--stream-mbs", type=float, default=0.0, help="MB/s of one request's answer (0: unlimited)")
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--lance", default="20,100", help="Lance's nprobes,refine_factor")
    ap.add_argument("--where", default="", help="a filter of both sides' searches, e.g. 'sel < 1' (1%% of the rows)")
    ap.add_argument("--s3-endpoint", default=os.environ.get("INDEXTABLES_TEST_S3_ENDPOINT"))
    ap.add_argument("--child")
    args = ap.parse_args(argv)
    if args.child:
        print(RESULT_MARK + json.dumps(_child(json.loads(args.child))), flush=True)
        return 0
    from cloud_bench import moto_server, new_bucket
    from cold_search_vs_lance import list_objects
    from s3_proxy import S3Proxy
    from vector_search_vs_lance import truth

    workdir = tempfile.mkdtemp(prefix="cold-vector-s3-")
    try:
        with moto_server(args.s3_endpoint) as endpoint:
            bucket = new_bucket(endpoint)
            x, info = _write(endpoint, bucket, args)
            objects = list_objects(endpoint, bucket)
            sizes = {side: sum(n for k, n in objects.items() if k.startswith(side + "/")) for side in ("ours", "lance")}
            vec_bytes, split_bytes = _vector_parts(endpoint, bucket, info["splits"])
            print(
                f"tables: ours {sizes['ours'] / 1e6:.0f} MB ({split_bytes / 1e6:.0f} MB of splits, of which "
                f"{vec_bytes / 1e6:.0f} MB vector files), Lance {sizes['lance'] / 1e6:.0f} MB",
                flush=True,
            )
            proxy = S3Proxy(endpoint, latency_ms=args.latency)
            proxy.stream_mb_s = args.stream_mbs
            proxy.preload([f"{bucket}/{k}" for k in objects])
            rng = np.random.default_rng(7)
            queries = x[rng.integers(0, len(x), args.queries)] + rng.standard_normal((args.queries, args.dims)).astype(
                np.float32
            ) * np.float32(0.5)
            keep = np.ones(len(x), bool)
            if args.where:  # (the filters of vector_search_vs_lance.py: sel = id % 100)
                bound = int(args.where.replace(" ", "").removeprefix("sel<"))
                keep = np.arange(len(x)) % 100 < bound
            want = truth(x, queries, keep)
            sides = {
                "ours": {"side": "ours", "uri": f"s3://{bucket}/ours", "options": {}},
                "ours, vector files whole": {"side": "ours", "uri": f"s3://{bucket}/ours", "options": WHOLE},
                "Lance IVF_PQ": {
                    "side": "lance",
                    "uri": f"s3://{bucket}/lance",
                    "lance": [int(v) for v in args.lance.split(",")],
                },
            }
            results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
            for i in range(args.queries):
                for name, spec in sides.items():
                    run = {
                        **spec,
                        "queries": queries.tolist(),
                        "first": i,
                        "warm": args.warm,
                        "where": args.where or None,
                    }
                    r = _run(proxy, run, workdir)
                    results[name].append(r)
                    print(
                        f"  query {i} {name:<26} cold {r['cold']:.3f} s, {r['requests']} requests, "
                        f"{r['bytes'] / 1e6:.1f} MB",
                        flush=True,
                    )
            rate = f", {args.stream_mbs:g} MB/s a request" if args.stream_mbs else ""
            filtered = f", where {args.where}" if args.where else ""
            print(
                f"cold top-{K} vector search{filtered}, {args.latency:g} ms a request{rate}, {args.vectors:,} x {args.dims}:"
            )
            med = {}
            for name, runs in results.items():
                cold = [r["cold"] for r in runs]
                mb = [r["bytes"] / 1e6 for r in runs]
                table_mb = sizes["lance" if name.startswith("Lance") else "ours"] / 1e6
                recall = statistics.mean(len(set(v) & want[int(k)]) / K for r in runs for k, v in r["found"].items())
                med[name] = statistics.median(cold)
                share = (
                    f", {100 * statistics.median(mb) * 1e6 / vec_bytes:.1f}% of the vector files"
                    if name.startswith("ours")
                    else ""
                )
                print(
                    f"  {name:<26} cold {med[name] * 1e3:.0f} ms ({min(cold) * 1e3:.0f}-{max(cold) * 1e3:.0f}), "
                    f"{statistics.median(r['requests'] for r in runs):.0f} requests, {statistics.median(mb):.1f} MB "
                    f"({100 * statistics.median(mb) / table_mb:.1f}% of its table{share}); warm "
                    f"{statistics.median(w for r in runs for w in r['warm']) * 1e3:.1f} ms, next "
                    f"{statistics.median(w for r in runs for w in r['next']) * 1e3:.1f} ms; recall@{K} {recall:.2f}"
                )
            print(
                f"ratios (cold): ours / vector files whole {med['ours'] / med['ours, vector files whole']:.2f}x, "
                f"ours / Lance {med['ours'] / med['Lance IVF_PQ']:.2f}x"
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
