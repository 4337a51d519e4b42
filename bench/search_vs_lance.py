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

Partitioned real text (`--case man`, #28): the man pages of this machine (/usr/share/man, every
language; .gz decompressed, roff requests and escapes stripped roughly), one row per non-empty line
(id, lang, page, line; the English sections man1-man8 are lang "en"). Ours
`it.write_table(path, lines, partition_by=["lang"], options={"indexing.typemap.line": "text"})`
(the default tokenizer: lowercased, no stemming; one split per language and write chunk, of very
different sizes), Lance one dataset with an INVERTED index on `line` (no stemming, no stop words,
lowercased, no ASCII folding). Queries: a rare, a mid and a common term, and a term in no split,
whose time divided by the number of splits is the per-split cost of a split that has no match
(printed with the bare tantivy-py floor: a searcher and a count per split).
"""

from __future__ import annotations

import gzip
import os
import re
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


MAN_ROOT = "/usr/share/man"
_ROFF_REQUEST = re.compile(r"^[.'][ \t]*([A-Za-z]{1,3}\b)?")
_ROFF_ESCAPE = re.compile(r"\\(?:f(?:\[[^\]]*\]|\(..|.)|s[-+]?\d+|\*(?:\[[^\]]*\]|\(..|.)|\(..|\[[^\]]*\]|.)")


def _roff_text(line: str) -> str:
    """The text of a roff line, roughly: comments dropped, a request's name dropped (its arguments
    kept: `.SH NAME`, `.B word`), escapes (fonts, sizes, special characters) removed."""
    if line.startswith(('.\\"', "'\\\"", '\\"')):
        return ""
    if line[:1] in (".", "'"):
        line = _ROFF_REQUEST.sub("", line, count=1)
    return _ROFF_ESCAPE.sub(" ", line).replace('"', " ").strip()


def man_corpus(root: str = MAN_ROOT) -> pa.Table:
    """One row per non-empty text line of every man page under `root` (id, lang, page, line)."""
    langs, pages, lines = [], [], []
    for d in sorted(os.listdir(root)):
        lang = "en" if d.startswith("man") else d
        for dirpath, _dirs, names in sorted(os.walk(os.path.join(root, d))):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    continue
                try:
                    with gzip.open(path) if name.endswith(".gz") else open(path, "rb") as f:
                        text = f.read().decode("utf-8", "replace")
                except (OSError, EOFError):
                    continue
                page = name[:-3] if name.endswith(".gz") else name
                for raw in text.splitlines():
                    line = _roff_text(raw)
                    if line:
                        langs.append(lang)
                        pages.append(page)
                        lines.append(line)
    n = len(lines)
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "lang": pa.array(langs, pa.string()),
            "page": pa.array(pages, pa.string()),
            "line": pa.array(lines, pa.string()),
        }
    )


def pick_terms(lines: pa.Table) -> dict[str, str]:
    """A rare (~100-200 rows), a mid (~5,000-10,000) and a common (~50,000-150,000 rows) ASCII term
    of the corpus, chosen from a sample's token counts (deterministic), and a term in no row."""
    sample = lines.column("line").slice(0, min(lines.num_rows, 400_000)).to_pylist()
    counts: dict[str, int] = {}
    for line in sample:
        for tok in set(re.findall(r"[a-z]{5,12}", line.lower())):
            counts[tok] = counts.get(tok, 0) + 1
    scale = lines.num_rows / len(sample)

    def near(target: int) -> str:
        words = sorted(counts, key=lambda w: (abs(counts[w] * scale - target), w))
        return words[0]

    return {"rare": near(150), "mid": near(7_000), "common": near(100_000), "none": "qzxjvwq"}


def _lance_man(lance_path: str, corpus_file: str | None, terms: list[str], runs: int) -> dict:
    """The Lance side of the man-page case, in its own process (spawned: Lance's runtime threads,
    once started, slow down the other Python work of the process by 10-50%, which would be charged
    to ours): with `corpus_file`, write the dataset and its INVERTED index first. Returns
    {"write": seconds or None, "rows": count, term: (median seconds, sorted ids)}."""
    import lance
    from lance.query import MatchQuery

    out: dict = {"write": None}
    if corpus_file is not None:
        with pa.memory_map(corpus_file) as source:
            lines = pa.ipc.open_file(source).read_all()
        t0 = time.perf_counter()
        ds = lance.write_dataset(lines, lance_path)
        ds.create_scalar_index(
            "line",
            "INVERTED",
            with_position=False,
            stem=False,
            remove_stop_words=False,
            lower_case=True,
            ascii_folding=False,
        )
        out["write"] = time.perf_counter() - t0
        del lines, ds
    ds = lance.dataset(lance_path)
    out["rows"] = ds.count_rows()
    for term in terms:
        t, r = median_time(
            lambda: ds.to_table(
                full_text_query=MatchQuery(term, "line"), columns=["id"], disable_scoring_autoprojection=True
            ),
            runs,
        )
        out[term] = (t, sorted(r.column("id").to_pylist()))
    return out


def _in_child(fn, *a):
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, a)


def man_case(args) -> None:
    """Partitioned real text: man pages by language, ours vs one Lance dataset (see the docstring)."""
    it_path, lance_path = os.path.join(args.dir, "man-it"), os.path.join(args.dir, "man-lance")
    terms_path = os.path.join(args.dir, "man-terms.txt")
    corpus_file = None
    if not (args.reuse and it.IndexTable(it_path).exists() and os.path.exists(lance_path)):
        for p in (it_path, lance_path):
            shutil.rmtree(p, ignore_errors=True)
        os.makedirs(args.dir, exist_ok=True)
        t0 = time.perf_counter()
        lines = man_corpus()
        print(
            f"man corpus: {lines.num_rows:,} lines of {len(pc.unique(lines.column('lang')))} languages "
            f"read in {time.perf_counter() - t0:.1f}s ({lines.nbytes / 2**20:,.0f} MiB in Arrow)"
        )
        terms = pick_terms(lines)
        with open(terms_path, "w") as f:
            f.write(" ".join(terms[k] for k in ("rare", "mid", "common", "none")))
        corpus_file = os.path.join(args.dir, "man-corpus.arrow")  # the same rows for Lance's process
        with pa.OSFile(corpus_file, "wb") as sink, pa.ipc.new_file(sink, lines.schema) as w:
            w.write_table(lines)
        t0 = time.perf_counter()
        it.write_table(it_path, lines, partition_by=["lang"], options={"indexing.typemap.line": "text"})
        t_it = time.perf_counter() - t0
        del lines
    with open(terms_path) as f:
        rare, mid, common, none = f.read().split()
    table = it.IndexTable(it_path)
    files = table.files()
    queries = (("rare", rare), ("mid", mid), ("common", common), ("in no split", none))
    ours = {}
    for _name, term in queries:
        ours[term] = median_time(lambda: table.search(f"line:{term}", columns=["id"]), args.runs)
    # the marginal cost of a split without a match: core/split/read/search.search_table of the no-match
    # query over every split against the same over only the smallest (live_files replaced)
    from indextables_spark.core.split.read.search import search_table

    smallest = min(files, key=lambda f: f.num_records or 0)
    plans = [table._search_plan(f"line:{none}", None, ["id"], None, None) for _ in range(2)]
    plans[1].live_files = lambda: [smallest]  # type: ignore[method-assign]
    t_all, t_one = (median_time(lambda: search_table(p), args.runs)[0] for p in plans)
    floor = _bare_tantivy_floor(table, f"line:{none}", args.runs)
    theirs = _in_child(_lance_man, lance_path, corpus_file, [t for _, t in queries], args.runs)
    if corpus_file is not None:
        os.unlink(corpus_file)
        print(f"man write: indextables {t_it:.1f}s, lance (write + INVERTED index) {theirs['write']:.1f}s")
    sizes = sorted((f.num_records or 0 for f in files), reverse=True)
    print(
        f"rows: {table.count():,}; indextables {len(files)} splits partitioned by lang "
        f"(rows per split: {', '.join(f'{n:,}' for n in sizes[:3])}, ..., {sizes[-1]:,}); "
        f"lance {theirs['rows']:,} rows in one dataset (measured in its own process); "
        f"runs per figure: {args.runs} (median)"
    )
    print(f"{'query':<28} {'it rows':>9} {'lance rows':>10} {'indextables':>12} {'lance':>9} {'ratio':>7}")
    worst = None
    for name, term in queries:
        t_it, r_it = ours[term]
        t_l, ids_l = theirs[term]
        same = sorted(r_it.column("id").to_pylist()) == ids_l
        note = "" if same else "  (matches differ: not compared)"
        label = f"{name} ({term})"
        print(
            f"{label:<28} {r_it.num_rows:>9,} {len(ids_l):>10,} {t_it * 1000:>10.2f}ms {t_l * 1000:>7.2f}ms "
            f"{t_l / t_it:>6.2f}x{note}"
        )
        if same and r_it.num_rows:
            worst = min(worst or float("inf"), t_l / t_it)
    print(f"slowest of ours relative to Lance (rare/mid/common, equal matches): {worst:.2f}x (target: >= 1)")
    n = len(files)
    t_none = ours[none][0]
    print(
        f"split with no match: {(t_all - t_one) / (n - 1) * 1e6:.1f} us each (search_table of the "
        f"no-match query over {n} splits, {t_all * 1e3:.2f} ms, minus over the smallest alone, "
        f"{t_one * 1e3:.2f} ms, over {n - 1}; target <= 20 us); {t_none / n * 1e6:.1f} us with the "
        f"whole IndexTable.search shared out ({t_none * 1e3:.2f} ms: snapshot, planning, {n} splits); "
        f"bare tantivy-py floor (index.searcher() + parse_query + search(count) per split, indexes "
        f"open): {floor / n * 1e6:.1f} us"
    )


def _bare_tantivy_floor(table, query: str, runs: int) -> float:
    """Seconds for the tantivy-py calls alone of a search of every split (already open)."""
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    cache = get_cache(table.options)
    indexes = [SplitReader(cache.local_dir(table.storage, f)).index for f in table.files()]

    def run():
        for index in indexes:
            index.searcher().search(index.parse_query(query, ["line"]), 1, count=True)

    return median_time(run, runs)[0]


def main() -> None:
    ap = bench_arguments("/tmp/indextables-lance-bench", runs=7)
    ap.add_argument(
        "--case",
        choices=["generated", "man", "all"],
        default="all",
        help="generated documents (--rows), partitioned man pages, or both",
    )
    args = ap.parse_args()
    if args.case in ("man", "all"):
        man_case(args)
    if args.case in ("generated", "all"):
        generated_case(args)


def generated_case(args) -> None:
    import lance

    it_path, lance_path = os.path.join(args.dir, "it"), os.path.join(args.dir, "lance")

    if not (args.reuse and it.IndexTable(it_path).exists() and os.path.exists(lance_path)):
        for p in (it_path, it_path + "-storeonly", lance_path):
            shutil.rmtree(p, ignore_errors=True)
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
