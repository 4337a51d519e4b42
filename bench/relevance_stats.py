"""Latency of `IndexTable.search(q, limit=10)` with corpus-wide BM25 statistics
(`spark.indextables.search.statistics=table`, the default) against each split's own statistics
(`split`, the old behaviour), measured in one run on one table.

    .venv/bin/python bench/relevance_stats.py [--rows 300000] [--splits 16] [--runs 7]
                                              [--cold-runs 3] [--dir /tmp/it-relevance-bench] [--reuse]

Builds a table of `--rows` generated documents (title, body of 20-80 words over a Zipf-like
vocabulary of 3,000 words, with topical words whose frequency differs by partition, as in
tests/test_relevance_corpus.py) partitioned by `part` (4 values), written in chunks so that it has
`--splits` splits (local disk, under `--dir`). Then, per query:

- warm: the median of `--runs` searches per mode after a warm-up search (split cache filled, splits
  open), the modes taking turns;
- statistics dropped: the same with `table`, the process's corpus statistics dropped before each
  search (`corpus_stats.forget_table_stats()`; splits still cached and open), so each search gathers
  them again: its time minus warm `table` is the cost of gathering them (column "gather");
- cold: the median of `--cold-runs` searches per mode, each after FLUSH INDEXTABLES DISK CACHE
  (`it.flush_disk_cache` on the bench's own cache directory, `--dir`/cache: the splits are extracted
  and opened again). Whatever the search keeps besides the split cache (parsed queries, corpus
  statistics, if cached) is not flushed.

Prints the median latencies, the ratio table/split, the number of splits the query searched (the
statistics are gathered over every live split of the table, printed in the header) and its number
of terms, and how many of the top 10 ids the two modes share (with per-split statistics
on a skewed table they differ: that is the point of the corpus-wide ones).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import time

import numpy as np
import pyarrow as pa

import indextables_spark as it
from bench_common import bench_arguments
from indextables_spark.core.split.read.corpus_stats import forget_table_stats

STATS_OPTION = "spark.indextables.search.statistics"
LIMIT = 10
PARTS = ["north", "south", "east", "west"]
TOPICS = {  # share of documents holding the word, per part (north, south, east, west)
    "lake": (0.40, 0.02, 0.10, 0.005),
    "river": (0.02, 0.40, 0.005, 0.10),
    "forest": (0.10, 0.005, 0.40, 0.02),
    "mountain": (0.005, 0.10, 0.02, 0.40),
    "desert": (0.002, 0.15, 0.01, 0.03),
    "ocean": (0.12, 0.002, 0.03, 0.01),
    "glacier": (0.02, 0.0005, 0.001, 0.0002),
    "canyon": (0.0005, 0.0002, 0.001, 0.02),
}
PHRASES = {("quiet", "lake"): (0.05, 0.002, 0.01, 0.0005), ("lake", "by", "river"): (0.01, 0.01, 0.0005, 0.002)}

# (query, where)
QUERIES = [
    ("body:lake", None),
    ("body:glacier", None),
    ("lake", None),
    ("body:lake OR body:river", None),
    ("body:lake AND body:forest", None),
    ("(body:lake OR body:river) AND NOT body:desert", None),
    ("body:lake^3 OR body:river OR body:mountain OR body:ocean", None),
    ('body:"quiet lake"', None),
    ('body:"lake river"~2', None),
    ("body:lakr~1", None),
    ("body:riv*", None),
    ("body:lake OR body:river", "n < 100"),
]


def vocabulary(size: int = 3000) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    two = [a + b for a in syllables for b in syllables]
    reserved = set(TOPICS) | {w for p in PHRASES for w in p}
    words = sorted(set(two + [w + "n" for w in two]) - reserved)
    np.random.default_rng(1).shuffle(words)
    return words[:size]


def documents(n: int, seed: int = 35) -> pa.Table:
    """id, part, title (2-8 words), body (20-80 words), n; topical words and phrases replace words,
    so every part has the same length distribution and different term statistics."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(), dtype=object)
    p = 1.0 / (np.arange(1, len(vocab) + 1) + 2.7) ** 1.07
    p /= p.sum()
    part = rng.integers(0, len(PARTS), size=n)
    body_len = rng.integers(20, 81, size=n)
    title_len = rng.integers(2, 9, size=n)
    body = vocab[rng.choice(len(vocab), size=(n, 80), p=p)]
    title = vocab[rng.choice(len(vocab), size=(n, 8), p=p)]
    rows = np.arange(n)
    for word, shares in TOPICS.items():
        share = np.array(shares)[part]
        hit = rng.random(n) < share
        body[rows[hit], (rng.random(n) * body_len).astype(int)[hit]] = word
        hit = rng.random(n) < share / 4
        title[rows[hit], (rng.random(n) * title_len).astype(int)[hit]] = word
    for phrase, shares in PHRASES.items():
        hit = rng.random(n) < np.array(shares)[part]
        at = (rng.random(n) * (body_len - len(phrase) + 1)).astype(int)
        for k, word in enumerate(phrase):
            body[rows[hit], at[hit] + k] = word
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "part": pa.array(np.array(PARTS, dtype=object)[part], pa.string()),
            "title": pa.array([" ".join(r[:k]) for r, k in zip(title, title_len)], pa.string()),
            "body": pa.array([" ".join(r[:k]) for r, k in zip(body, body_len)], pa.string()),
            "n": pa.array(rng.integers(0, 1000, size=n), pa.int32()),
        }
    )


def build(path: str, rows: int, splits: int) -> float:
    """The table in `splits` splits: chunks of rows (write.chunkRows), each one split per part."""
    t0 = time.perf_counter()
    data = documents(rows)
    chunks = max(1, splits // len(PARTS))
    options = {
        "spark.indextables.indexing.typemap.title": "text",
        "spark.indextables.indexing.typemap.body": "text",
        "spark.indextables.write.chunkRows": str(-(-rows // chunks)),
    }
    it.write_table(path, data, mode="overwrite", partition_by=["part"], options=options)
    return time.perf_counter() - t0


def terms(query: str) -> int:
    """Words of the query (a prefix or fuzzy term counts one, a phrase its words)."""
    text = re.sub(r"\b\w+:", " ", query)  # field names
    text = re.sub(r"[\^~]\d+(\.\d+)?", " ", text)  # boosts, slops, distances
    return len([w for w in re.findall(r"[A-Za-z]\w*", text) if w not in ("AND", "OR", "NOT")])


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = bench_arguments("/tmp/it-relevance-bench", runs=7)
    ap.set_defaults(rows=300_000)
    ap.add_argument("--splits", type=int, default=16, help="splits of the table (a multiple of 4: 4 partitions)")
    ap.add_argument("--cold-runs", type=int, default=3)
    args = ap.parse_args()
    path, cache = os.path.join(args.dir, "table"), os.path.join(args.dir, "cache")
    if not args.reuse or not it.IndexTable(path).exists():
        shutil.rmtree(args.dir, ignore_errors=True)
        print(f"building {args.rows:,} rows in {args.splits} splits ... ", end="", flush=True)
        print(f"{build(path, args.rows, args.splits):.1f} s")
    cache_opt = {"spark.indextables.cache.disk.path": cache}
    tables = {mode: it.IndexTable(path, {**cache_opt, STATS_OPTION: mode}) for mode in ("table", "split")}
    snap = tables["table"].snapshot()
    print(
        f"table: {snap.num_files} splits, {sum(f.num_records or 0 for f in snap.files):,} rows, "
        f"{sum(f.size for f in snap.files) / 1e6:.1f} MB; search(q, limit={LIMIT}), "
        f"warm: median of {args.runs}, cold (split cache flushed): median of {args.cold_runs}"
    )

    def flush() -> None:
        it.flush_disk_cache(options=cache_opt)

    head = (
        f"{'query':58} {'terms':>5} {'splits':>6}  {'warm table':>10} {'stats drop':>10} {'gather':>8}"
        f" {'warm split':>10} {'ratio':>6} {'drop/split':>10}"
        f"  {'cold table':>10} {'cold split':>10} {'ratio':>6}  {'same ids':>8}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    ratios, drop_ratios, gathers = [], [], []
    modes = ("table", "dropped", "split")
    for query, where in QUERIES:
        search = {m: (lambda t=t: t.search(query, where=where, columns=["id"], limit=LIMIT)) for m, t in tables.items()}
        tops = {m: search[m]() for m in search}  # warm-up (fills the cache, opens the splits)
        warm: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(args.runs):
            for m in modes[r % 3 :] + modes[: r % 3]:  # each mode first in turn
                if m == "dropped":
                    forget_table_stats()
                warm[m].append(timed(search["table" if m == "dropped" else m]))
        cold: dict[str, list[float]] = {m: [] for m in search}
        for r in range(args.cold_runs):
            for m in ("table", "split") if r % 2 == 0 else ("split", "table"):
                flush()
                cold[m].append(timed(search[m]))
        w = {m: statistics.median(v) * 1000 for m, v in warm.items()}
        c = {m: statistics.median(v) * 1000 for m, v in cold.items()}
        shared = len(set(tops["table"]["id"].to_pylist()) & set(tops["split"]["id"].to_pylist()))
        searched = tables["table"].explain(query, where).splits_after_bloom_filters
        name = query if where is None else f"{query} WHERE {where}"
        ratios.append(w["table"] / w["split"])
        drop_ratios.append(w["dropped"] / w["split"])
        gathers.append(w["dropped"] - w["table"])
        print(
            f"{name[:58]:58} {terms(query):5} {searched:6}  {w['table']:8.2f}ms {w['dropped']:8.2f}ms "
            f"{w['dropped'] - w['table']:6.2f}ms {w['split']:8.2f}ms {w['table'] / w['split']:5.2f}x "
            f"{w['dropped'] / w['split']:9.2f}x  {c['table']:8.1f}ms {c['split']:8.1f}ms {c['table'] / c['split']:5.2f}x"
            f"  {shared:5}/{min(LIMIT, tops['table'].num_rows)}"
        )
    print(f"\nwarm ratio table/split: median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x")
    print(
        f"statistics dropped before each search, ratio to split: median {statistics.median(drop_ratios):.2f}x, "
        f"max {max(drop_ratios):.2f}x; gathering them over {snap.num_files} splits: median "
        f"{statistics.median(gathers):.2f} ms, max {max(gathers):.2f} ms a query"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
