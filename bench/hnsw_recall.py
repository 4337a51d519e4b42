"""An `hnsw` split index per metric, walked: recall@10 and per-query CPU time, unfiltered and filtered.

    PYTHONPATH=src .venv/bin/python bench/hnsw_recall.py [--data tests|bench] [--vectors 25000] [--dims 24]
        [--queries 200] [--rounds 9] [--dir /tmp/indextables-hnsw-recall]

One split's index of each metric built with build_index (core/split/format/vector_index.py) and searched
through nearest() (core/split/read/vector/nearest.py) with exactBelow 0, so every search walks the graph:
unfiltered and among the rows with `id % 100 < 10` (10%) and `< 1` (1%), as a bitmap. `dot` twice: the
graph faiss builds by inner product (`dot-ip`: what splits written before the lift hold, a footer without
`mipsNorm`) and the graph of the vectors lifted to L2 (`dot`: core/split/format/vector_space.py).
Recall@10 against exact search over the same rows; CPU time (process_time, one thread as a search runs)
per query and split, the median of --rounds rounds of all queries, the metrics' rounds interleaved (a
loaded machine slows them alike); build time is CPU time with one faiss thread.

Data (fixed seeds): `tests` — the recall test's (tests/test_vector_kinds.py): 40 centres N(0, 16) per
dimension plus N(0, 1) noise, queries near rows (noise 0.3): norms vary 12-31 (median 20), the case where
the inner-product graph's hubs answer unfiltered searches fastest; `bench` — vector_index_choice.py's:
1,000 centres N(0, 1) with noise of a decaying spectrum, norms 9-15.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from indextables_spark.core.schema.types import VectorSpec
from indextables_spark.core.split.format import vector_index
from indextables_spark.core.split.format.vector_index import VectorIndex, VectorIndexInfo, build_index
from indextables_spark.core.split.read.vector.nearest import nearest, one_thread_math

GRAPHS = ("cosine", "l2", "dot-ip", "dot")
FILTERS = (("unfiltered", None), ("10%", 10), ("1%", 1))


def tests_data(n: int, dims: int, nq: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((40, dims)).astype(np.float32) * 4
    x = (centres[rng.integers(0, 40, n)] + rng.standard_normal((n, dims))).astype(np.float32)
    rng = np.random.default_rng(11)
    picked = rng.integers(0, n, nq)
    return x, (x[picked] + rng.standard_normal((nq, dims)).astype(np.float32) * 0.3).astype(np.float32)


def exact_top(x: np.ndarray, q: np.ndarray, metric: str, ids: np.ndarray) -> set[int]:
    xs = x.astype(np.float64)
    if metric == "cosine":
        d = 1 - (xs @ q) / (np.linalg.norm(xs, axis=1) * np.linalg.norm(q))
    elif metric == "l2":
        d = ((xs - q) ** 2).sum(axis=1)
    else:
        d = -(xs @ q)
    return {int(i) for i in ids[np.lexsort((ids, d))][:10]}


def build(root: str, graph: str, x: np.ndarray) -> tuple[VectorIndex, float]:
    """The split index of `graph` (built once per --dir), and its build's CPU seconds."""
    import faiss  # lazy: as the package imports it (vector columns only)

    metric = graph.split("-")[0]
    spec = VectorSpec(x.shape[1], metric, "hnsw")
    d = os.path.join(root, graph)
    params_file = os.path.join(d, "params")
    if not os.path.exists(params_file):
        os.makedirs(d, exist_ok=True)
        lifts = vector_index.lifts
        if graph == "dot-ip":  # as a split written before the lift
            vector_index.lifts = lambda kind, metric: False  # type: ignore[assignment]
        faiss.omp_set_num_threads(1)
        t0 = time.process_time()
        params, _ = build_index(np.arange(len(x)), x, spec, os.path.join(d, "i.faiss"), os.path.join(d, "v.f32"))
        seconds = time.process_time() - t0
        vector_index.lifts = lifts  # type: ignore[assignment]
        with open(params_file, "w") as f:
            f.write(repr((params, seconds)))
    with open(params_file) as f:
        params, seconds = eval(f.read())
    info = VectorIndexInfo("e", "i.faiss", "v.f32", spec, len(x), "faiss", params)
    return VectorIndex.open(d, info, graph), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=("tests", "bench"), default="tests")
    ap.add_argument("--vectors", type=int, default=25_000)
    ap.add_argument("--dims", type=int, default=24)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--dir", default="/tmp/indextables-hnsw-recall")
    args = ap.parse_args()
    n, nq = args.vectors, args.queries
    if args.data == "tests":
        x, queries = tests_data(n, args.dims, nq)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from vector_index_choice import make_data  # lazy: its data only with --data bench

        x, queries, _ = make_data(n, args.dims, nq)
    root = os.path.join(args.dir, f"{args.data}-{n}x{args.dims}")
    built = {g: build(root, g, x) for g in GRAPHS}
    ids = np.arange(n)
    print(
        f"{args.data} data, {n} x {args.dims}, {nq} queries; build CPU s (1 thread): "
        + ", ".join(f"{g} {s:.1f}" for g, (_i, s) in built.items())
    )
    print("| graph | filter | recall@10 | CPU us a query |")
    print("|---|---|---:|---:|")
    with one_thread_math():
        for name, percent in FILTERS:
            allowed = None if percent is None else ids[ids % 100 < percent]
            if allowed is not None:
                allowed.flags.writeable = False
            times: dict[str, list[float]] = {g: [] for g in GRAPHS}
            answers: dict[str, list[np.ndarray]] = {}
            for g, (index, _s) in built.items():
                answers[g] = [nearest(index, q, 10, allowed, exact_below=0)[0][0] for q in queries]
            rounds = args.rounds if percent != 1 else max(3, args.rounds // 3)
            for r in range(rounds):
                for g in GRAPHS[r % len(GRAPHS) :] + GRAPHS[: r % len(GRAPHS)]:
                    index = built[g][0]
                    t0 = time.process_time()
                    for q in queries:
                        nearest(index, q, 10, allowed, exact_below=0)
                    times[g].append((time.process_time() - t0) / nq * 1e6)
            keep = ids if allowed is None else allowed
            for g in GRAPHS:
                metric = g.split("-")[0]
                found = sum(
                    len(set(a.tolist()) & exact_top(x[keep], q, metric, keep)) for a, q in zip(answers[g], queries)
                )
                print(f"| {g} | {name} | {found / (10 * nq):.3f} | {statistics.median(times[g]):.0f} |", flush=True)


if __name__ == "__main__":
    main()
