"""indextables vs Lance, Spark-free, on the same generated documents, measured in one run.

    .venv/bin/pip install -e '.[bench]'      # pylance
    .venv/bin/python bench/search_vs_lance.py [--rows 1000000] [--runs 7] [--dir /tmp/indextables-lance-bench] [--reuse]

Corpus: examples/datagen.py documents (8-word title, 50-word body, ...); 1% of the bodies also hold
"kestrel" (as in search_vs_parquet.py). Both tables are built from the same in-memory Arrow table:

- ours:  `it.write_table(path, docs, options={"indexing.typemap.body": "text"})` (every column
          indexed, the default), and again with `indexing.storeonly` for all but body and id (about
          the work Lance does: one inverted index; the other columns only stored)
- Lance: `lance.write_dataset(docs, path)` + `create_scalar_index("body", "INVERTED", with_position=True,
          stem=False, remove_stop_words=False)` (lowercased, like Tantivy's default tokenizer; Lance
          stems and drops stop words by default, which would change the matches)

Queries, warm (each run once first), median of --runs: `IndexTable.search(q, columns=["id"])` (every
match) vs `dataset.to_table(full_text_query=<the same query as Lance query objects>, columns=["id"])`.
Match counts of both are printed; a query where they differ is marked.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import indextables_spark as it  # noqa: E402
from bench_common import bench_arguments  # noqa: E402
from datagen import documents  # noqa: E402

MARKER = "kestrel"
STORE_ONLY = "title,tags,views,score,day,ts,region"  # indexed: body (text) and id


def corpus(rows: int) -> pa.Table:
    """`rows` documents in 100k-row chunks (each chunk its own seed), 1% of bodies + MARKER."""
    parts = []
    for start in range(0, rows, 100_000):
        n = min(100_000, rows - start)
        t = documents(n, seed=42 + start, start=start)
        marked = pa.array(np.random.default_rng(7 + start).random(n) < 0.01)
        body = t.column("body").combine_chunks()
        body = pc.if_else(marked, pc.binary_join_element_wise(body, MARKER, " "), body)
        parts.append(t.set_column(t.schema.get_field_index("body"), "body", body))
    return pa.concat_tables(parts).combine_chunks()


def median_time(fn, runs: int) -> tuple[float, object]:
    out = fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def lance_queries():
    from lance.query import BooleanQuery, MatchQuery, Occur, PhraseQuery

    def term(w):
        return MatchQuery(w, "body")

    return [
        ("rare term (~0.1%)", "body:zephyr", term("zephyr")),
        ("1% term", f"body:{MARKER}", term(MARKER)),
        ("common term", "body:spark", term("spark")),
        ("phrase", 'body:"data lake"', PhraseQuery("data lake", "body")),
        (
            "boolean AND",
            f"body:{MARKER} AND body:zephyr",
            BooleanQuery([(Occur.MUST, term(MARKER)), (Occur.MUST, term("zephyr"))]),
        ),
        (
            "boolean OR",
            "body:zephyr OR body:quasar",
            BooleanQuery([(Occur.SHOULD, term("zephyr")), (Occur.SHOULD, term("quasar"))]),
        ),
        (
            "AND NOT",
            f"body:{MARKER} AND NOT body:spark",
            BooleanQuery([(Occur.MUST, term(MARKER)), (Occur.MUST_NOT, term("spark"))]),
        ),
    ]


def main() -> None:
    import lance

    ap = bench_arguments("/tmp/indextables-lance-bench", runs=7)
    args = ap.parse_args()
    it_path, lance_path = os.path.join(args.dir, "it"), os.path.join(args.dir, "lance")

    if not (args.reuse and it.IndexTable(it_path).exists() and os.path.exists(lance_path)):
        shutil.rmtree(args.dir, ignore_errors=True)
        t0 = time.perf_counter()
        docs = corpus(args.rows)
        print(
            f"corpus: {args.rows:,} documents generated in {time.perf_counter() - t0:.1f}s "
            f"({docs.nbytes / 2**20:,.0f} MiB in Arrow)"
        )
        t0 = time.perf_counter()
        it.write_table(it_path, docs, options={"indexing.typemap.body": "text"})
        t_it = time.perf_counter() - t0
        t0 = time.perf_counter()
        it.write_table(
            it_path + "-storeonly", docs, options={"indexing.typemap.body": "text", "indexing.storeonly": STORE_ONLY}
        )
        t_so = time.perf_counter() - t0
        t0 = time.perf_counter()
        ds = lance.write_dataset(docs, lance_path)
        t_lw = time.perf_counter() - t0
        ds.create_scalar_index(
            "body", "INVERTED", with_position=True, stem=False, remove_stop_words=False, lower_case=True
        )
        t_lance = time.perf_counter() - t0
        print(f"{'write':<20} {'indextables':>12} {'lance':>10} {'ratio':>7}")
        print(
            f"{'every column indexed':<20} {t_it:>11.2f}s {t_lance:>9.2f}s {t_lance / t_it:>6.2f}x  "
            f"(ours: the default, 9 columns indexed + fast fields; lance: write {t_lw:.2f}s + "
            f"INVERTED index on body {t_lance - t_lw:.2f}s)"
        )
        print(
            f"{'body + id indexed':<20} {t_so:>11.2f}s {t_lance:>9.2f}s {t_lance / t_so:>6.2f}x  "
            f"(ours: indexing.storeonly={STORE_ONLY}, about Lance's work; target: ratio >= 1)"
        )
        del docs
    table = it.IndexTable(it_path)
    ds = lance.dataset(lance_path)
    it_bytes = sum(f.size for f in table.files())
    lance_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(lance_path) for f in fs)
    print(
        f"rows: {table.count():,}; indextables {len(table.files())} splits, {it_bytes / 2**20:,.0f} MiB; "
        f"lance {ds.count_rows():,} rows, {lance_bytes / 2**20:,.0f} MiB; runs per figure: {args.runs} (median)"
    )
    print(f"{'query':<20} {'it rows':>9} {'lance rows':>10} {'indextables':>12} {'lance':>9} {'ratio':>7}")
    worst = None
    for name, ours, theirs in lance_queries():
        t_it, r_it = median_time(lambda: table.search(ours, columns=["id"]), args.runs)
        t_l, r_l = median_time(
            lambda: ds.to_table(full_text_query=theirs, columns=["id"], disable_scoring_autoprojection=True), args.runs
        )
        same = set(r_it.column("id").to_pylist()) == set(r_l.column("id").to_pylist())
        note = "" if same else "  (matches differ: not compared)"
        print(
            f"{name:<20} {r_it.num_rows:>9,} {r_l.num_rows:>10,} {t_it * 1000:>10.1f}ms {t_l * 1000:>7.1f}ms "
            f"{t_l / t_it:>6.2f}x{note}"
        )
        if same:
            worst = min(worst or float("inf"), t_l / t_it)
    print(f"slowest of ours relative to Lance (queries with equal matches): {worst:.2f}x (target: >= 1)")


if __name__ == "__main__":
    main()
