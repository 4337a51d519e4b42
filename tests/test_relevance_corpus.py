"""Relevance does not depend on the table's layout (issue #35): the same 40,000 rows stored as

  (a) one split (one write, no partitioning),
  (b) partitioned by `part` (4 splits whose term statistics are very different),
  (c) 12 appends (12 small splits, each holding rows of mostly one `part`),
  (d) (c) after MERGE SPLITS (3 merged splits),

give the same top 10 and the same `_score`s for every kind of query, because BM25's idf comes from
the whole table version (`spark.indextables.search.statistics` = `table`, the default) and not from
each split alone (`split`, the old behaviour, still reachable: see
test_OLD_BEHAVIOUR_per_split_statistics_still_reachable).

Tolerance: idf is corpus-wide, but BM25's average field length (avgdl) stays each split's own
(tantivy-py cannot override it), so scores may differ slightly; the layouts here have the same
document length distribution in every partition, so the difference stays well under 1%. Rows whose
scores are within 1% are interchangeable (ties): a layout's top 10 is right when its i-th score is
within 1% of (a)'s i-th score, every id it returns has, in (a), a score within 1% of the one the
layout reports, and (a)'s 10th score is at most the layout's 10th * 1.01 (nothing better missed).

Checked Spark-free (`IndexTable.search(q, limit=10)`, also with a `where`), and every case again
through a classic Spark read (`option("query", q).option("limit", 10)`; with a `where`, `orderBy`
`_score` and the filter pushed below the ranking), the `indextables_search(path, q, 10)` table
function (the cases without a `where`) and a Spark Connect read — each route one Spark job per
layout (a union of one read per case). `pytest -s` prints the largest relative score difference per
query and layout (the figures in docs/guide/search-and-relevance.md).
"""

from __future__ import annotations

import bisect
import functools
import math
import shutil
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import indextables_spark as it

N_ROWS = 40_000
SEED = 20240607
LIMIT = 10
TOL = 0.01  # relative score tolerance (avgdl stays per split)
STATS_OPTION = "spark.indextables.search.statistics"
OPTIONS = {
    "spark.indextables.indexing.typemap.title": "text",
    "spark.indextables.indexing.typemap.body": "text",
}
ONE_CHUNK = {"spark.indextables.write.chunkRows": str(10 * N_ROWS), "spark.indextables.write.parallelism": "1"}
APPENDS = 12
MERGE_SOURCES = 4  # MERGE SPLITS ... MAX SOURCE SPLITS PER MERGE: 12 splits -> 3

# ---- the corpus ----------------------------------------------------------------------------------

PARTS = ["north", "south", "east", "west"]
# topical words: the share of documents holding one, per part (north, south, east, west). A word
# common in one part is rare in another, so per-split idf differs a lot between partitions.
TOPICS = {
    "lake": (0.40, 0.02, 0.10, 0.005),
    "river": (0.02, 0.40, 0.005, 0.10),
    "forest": (0.10, 0.005, 0.40, 0.02),
    "mountain": (0.005, 0.10, 0.02, 0.40),
    "desert": (0.002, 0.15, 0.01, 0.03),
    "ocean": (0.12, 0.002, 0.03, 0.01),
    "valley": (0.05, 0.05, 0.002, 0.002),
    "glacier": (0.02, 0.0005, 0.001, 0.0002),
    "canyon": (0.0005, 0.0002, 0.001, 0.02),
    "meadow": (0.001, 0.003, 0.03, 0.0005),
}
PHRASES = {  # written as consecutive words (phrase and slop-phrase queries)
    ("quiet", "lake"): (0.05, 0.002, 0.01, 0.0005),
    ("old", "forest"): (0.002, 0.0005, 0.05, 0.01),
    ("lake", "by", "river"): (0.01, 0.01, 0.0005, 0.002),
}
RESERVED = set(TOPICS) | {w for p in PHRASES for w in p} | {"and", "or", "not", "to"}


def vocabulary(size: int = 3000) -> list[str]:
    """`size` made-up words (consonant-vowel syllables), in a fixed pseudo-random order: the
    position is the Zipf rank."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    two = [a + b for a in syllables for b in syllables]
    words = sorted(set(two + [w + "n" for w in two]) - RESERVED)
    np.random.default_rng(1).shuffle(words)
    return words[:size]


VOCAB = vocabulary()
COMMON, FREQUENT, MIDDLING, RARE = VOCAB[0], VOCAB[3], VOCAB[60], VOCAB[900]


def corpus(n: int = N_ROWS, seed: int = SEED) -> pa.Table:
    """id (unique int64), part (4 values), title (2-8 words), body (20-80 words, Zipf-like over
    VOCAB), n (int 0-999). Topical words and phrases replace random words, so every part has the
    same length distribution, only the term statistics differ."""
    rng = np.random.default_rng(seed)
    vocab = np.array(VOCAB, dtype=object)
    p = 1.0 / (np.arange(1, len(vocab) + 1) + 2.7) ** 1.07
    p /= p.sum()
    part_of = rng.integers(0, len(PARTS), size=n)
    body_len = rng.integers(20, 81, size=n)
    title_len = rng.integers(2, 9, size=n)
    body_words = vocab[rng.choice(len(vocab), size=(n, 80), p=p)]
    title_words = vocab[rng.choice(len(vocab), size=(n, 8), p=p)]
    bodies, titles = [], []
    for i in range(n):
        k = part_of[i]
        body = list(body_words[i, : body_len[i]])
        title = list(title_words[i, : title_len[i]])
        for word, shares in TOPICS.items():
            if rng.random() < shares[k]:
                tf = 1 + int(rng.integers(0, 3)) if rng.random() < 0.3 else 1
                for _ in range(tf):
                    body[int(rng.integers(0, len(body)))] = word
            if rng.random() < shares[k] / 4:
                title[int(rng.integers(0, len(title)))] = word
        for phrase, shares in PHRASES.items():
            if rng.random() < shares[k]:
                at = int(rng.integers(0, len(body) - len(phrase) + 1))
                body[at : at + len(phrase)] = phrase
            if rng.random() < shares[k] / 4 and len(title) >= len(phrase):
                at = int(rng.integers(0, len(title) - len(phrase) + 1))
                title[at : at + len(phrase)] = phrase
        bodies.append(" ".join(body))
        titles.append(" ".join(title))
    return pa.table(
        {
            "id": pa.array(rng.permutation(n).astype(np.int64) * 7 + 11),
            "part": pa.array([PARTS[k] for k in part_of], pa.string()),
            "title": pa.array(titles, pa.string()),
            "body": pa.array(bodies, pa.string()),
            "n": pa.array(rng.integers(0, 1000, size=n), pa.int32()),
        }
    )


# ---- the queries ---------------------------------------------------------------------------------

# (query, where, kind); kind "const" = a query Tantivy scores constant (fuzzy, prefix)
CASES = [
    ("body:lake", None, "term"),
    ("body:river", None, "term"),
    ("title:forest", None, "term"),
    ("body:glacier", None, "rare term"),
    (f"body:{MIDDLING}", None, "zipf term"),
    ("lake", None, "unfielded term"),
    ("mountain", None, "unfielded term"),
    ("body:lake OR body:river", None, "OR"),
    ("body:canyon OR body:glacier OR body:meadow", None, "OR of rare terms"),
    (f"body:{FREQUENT} OR body:desert", None, "OR, common + skewed"),
    ("body:lake AND body:forest", None, "AND"),
    (f"body:{COMMON} AND body:ocean", None, "AND, common + skewed"),
    ("body:river AND NOT body:lake", None, "AND NOT"),
    ("body:forest -body:mountain", None, "-"),
    ("(body:lake OR body:river) AND (title:forest OR title:mountain)", None, "nested boolean"),
    ("(lake AND river) OR (desert AND NOT ocean)", None, "nested boolean, unfielded"),
    ('body:"quiet lake"', None, "phrase"),
    ('"old forest"', None, "phrase, unfielded"),
    ('body:"lake river"~2', None, "slop phrase"),
    ("body:lake^3 OR body:river", None, "boost"),
    ("title:mountain^2 OR body:glacier OR body:valley", None, "boost"),
    ("body:lakr~1", None, "const"),
    ("body:riv*", None, "const"),
    ("body:lake", "n < 250", "term + where"),
    ("body:lake OR body:river", "n >= 500 AND n < 900", "OR + where"),
    ('body:"quiet lake" OR title:ocean', "n < 100", "phrase OR term + where"),
    (f"{RARE} OR valley", "n >= 300", "unfielded OR + where"),
]
LAYOUTS = ["b", "c", "d"]
LAYOUT_NAMES = {
    "a": "one split",
    "b": "partitioned",
    "c": f"{APPENDS} appends",
    "d": "appends merged",
}


def case_id(case: tuple[str, str | None, str]) -> str:
    q, where, _ = case
    return q if where is None else f"{q} WHERE {where}"


# ---- writing the four layouts --------------------------------------------------------------------


@dataclass
class Layouts:
    paths: dict[str, str]
    splits: dict[str, int] = field(default_factory=dict)
    c_before_merge: int = 0
    merged: dict[str, object] = field(default_factory=dict)  # MERGE SPLITS: status, sources, created
    seconds: dict[str, float] = field(default_factory=dict)


def _num_splits(path: str) -> int:
    return it.IndexTable(path).snapshot().num_files


def append_chunks(data: pa.Table, rng: np.random.Generator) -> list[pa.Table]:
    """APPENDS chunks of shuffled rows, each of mostly one part (so each split's own statistics are
    skewed too), appended in shuffled order."""
    order = np.lexsort((rng.random(data.num_rows), pc.index_in(data["part"], pa.array(PARTS)).to_numpy()))
    by_part = data.take(pa.array(order))
    size = -(-data.num_rows // APPENDS)
    chunks = [by_part.slice(i * size, size) for i in range(APPENDS)]
    chunks = [c.take(pa.array(rng.permutation(c.num_rows))) for c in chunks]
    return [chunks[i] for i in rng.permutation(len(chunks))]


@pytest.fixture(scope="module")
def data() -> pa.Table:
    return corpus()


@pytest.fixture(scope="module")
def layouts(data, tmp_path_factory) -> Layouts:
    root = tmp_path_factory.mktemp("relevance")
    out = Layouts({k: str(root / k) for k in "abcd"})
    t0 = time.perf_counter()
    it.write_table(out.paths["a"], data, mode="error", options={**OPTIONS, **ONE_CHUNK})
    out.seconds["write a"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    it.write_table(out.paths["b"], data, mode="error", partition_by=["part"], options={**OPTIONS, **ONE_CHUNK})
    out.seconds["write b"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    for chunk in append_chunks(data, np.random.default_rng(SEED + 1)):
        it.write_table(out.paths["c"], chunk, options={**OPTIONS, **ONE_CHUNK})
    shutil.copytree(out.paths["c"], out.paths["d"])  # (d: the same appends, merged below)
    out.seconds["write c (12 appends), copied to d"] = time.perf_counter() - t0
    out.c_before_merge = _num_splits(out.paths["d"])

    t0 = time.perf_counter()
    res = it.IndexTable(out.paths["d"]).maintenance.merge_splits(max_source_splits_per_merge=MERGE_SOURCES)
    out.seconds["merge d"] = time.perf_counter() - t0
    out.merged = {"status": res.status, "sourceSplitsMerged": res.source_splits_merged, "created": res.splits_created}
    out.splits = {k: _num_splits(p) for k, p in out.paths.items()}
    print(f"\nlayouts: splits {out.splits}; " + ", ".join(f"{k} {v:.1f} s" for k, v in out.seconds.items()))
    return out


def test_layouts_have_the_intended_splits(layouts, data):
    """(a) is one split, (b) one per part, (c) many, (d) fewer than (c) after MERGE SPLITS; all
    hold the same rows."""
    assert layouts.splits["a"] == 1
    assert layouts.splits["b"] == len(PARTS)
    assert layouts.splits["c"] == APPENDS
    assert layouts.c_before_merge == APPENDS
    assert layouts.merged["sourceSplitsMerged"] == APPENDS, layouts.merged
    assert 1 < layouts.splits["d"] < layouts.splits["c"]
    assert layouts.splits["d"] == APPENDS // MERGE_SOURCES
    assert layouts.merged["created"] == layouts.splits["d"], layouts.merged
    assert "MERGE SPLITS" in [h.operation for h in it.IndexTable(layouts.paths["d"]).inspect.history()]
    for path in layouts.paths.values():
        t = it.IndexTable(path)
        assert t.count() == N_ROWS
        assert sorted(t.to_arrow(columns=["id"])["id"].to_pylist()) == sorted(data["id"].to_pylist())


def test_term_statistics_are_skewed_by_partition(layouts):
    """The premise: per-part document frequencies differ a lot (else per-split idf would not
    matter), while the length distribution does not (else avgdl would)."""
    t = it.IndexTable(layouts.paths["b"])
    for word in ("lake", "river"):
        counts = [t.count(f"body:{word}", f"part = '{p}'") for p in PARTS]
        assert max(counts) > 10 * min(counts), (word, counts)
    rows = it.IndexTable(layouts.paths["a"]).to_arrow(columns=["part", "title", "body"])
    parts = rows["part"].to_numpy(zero_copy_only=False)
    for column in ("title", "body"):
        lengths = pc.list_value_length(pc.split_pattern(rows[column], " ")).to_numpy()
        means = [lengths[parts == p].mean() for p in PARTS]
        assert max(means) / min(means) < 1.02, (column, means)


# ---- comparing a top 10 with (a)'s ---------------------------------------------------------------

Hits = list[tuple[int, float]]  # (id, _score), best first


def rel(x: float, y: float) -> float:
    return abs(x - y) / max(abs(y), 1e-12)


@dataclass
class Comparison:
    """A layout's top 10 against the one-split table's (a)."""

    query: str
    where: str | None
    layout: str
    ref: Hits  # (a)'s top 10
    got: Hits  # the layout's top 10
    ref_score_of: dict[int, float]  # (a)'s score of each id in `got`

    def rank_diff(self) -> float:
        """Largest relative difference between the i-th scores."""
        return max((rel(g[1], r[1]) for g, r in zip(self.got, self.ref)), default=0.0)

    def id_diff(self) -> float:
        """Largest relative difference between a returned row's score and (a)'s score of that row
        (inf when (a) does not match it)."""
        return max(
            (rel(s, self.ref_score_of[i]) if i in self.ref_score_of else math.inf for i, s in self.got), default=0.0
        )

    def max_diff(self) -> float:
        return max(self.rank_diff(), self.id_diff())

    def off(self) -> int:
        """Rows of the top 10 that are not interchangeable with (a)'s (score off by more than TOL)."""
        return sum(1 for i, s in self.got if i not in self.ref_score_of or rel(s, self.ref_score_of[i]) > TOL)

    def problems(self) -> list[str]:
        out = []
        if len(self.got) != len(self.ref):
            out.append(f"{len(self.got)} rows, (a) has {len(self.ref)}")
        if any(s <= 0 for _, s in self.got):
            out.append("a score <= 0")
        for k, (g, r) in enumerate(zip(self.got, self.ref)):
            if rel(g[1], r[1]) > TOL:
                out.append(f"score #{k + 1} {g[1]:.5f}, (a)'s #{k + 1} {r[1]:.5f} ({rel(g[1], r[1]):.2%})")
        for i, s in self.got:
            if i not in self.ref_score_of:
                out.append(f"id {i} (score {s:.5f}) does not match in (a)")
            elif rel(s, self.ref_score_of[i]) > TOL:
                out.append(
                    f"id {i}: score {s:.5f}, in (a) {self.ref_score_of[i]:.5f} ({rel(s, self.ref_score_of[i]):.2%})"
                )
        if len(self.got) == LIMIT == len(self.ref) and self.ref[-1][1] > self.got[-1][1] * (1 + TOL):
            out.append(f"(a)'s 10th score {self.ref[-1][1]:.5f} beats the layout's 10th {self.got[-1][1]:.5f}")
        return out

    def describe(self) -> str:
        where = f" WHERE {self.where}" if self.where else ""
        return (
            f"layout ({self.layout}) {LAYOUT_NAMES[self.layout]}, {self.query!r}{where}: "
            + "; ".join(self.problems())
            + f"\n  (a): {self.ref}\n  got: {self.got}"
        )


def hits(table: pa.Table) -> Hits:
    return list(zip(table["id"].to_pylist(), table["_score"].to_pylist()))


def top(t: it.IndexTable, query: str, where: str | None = None) -> Hits:
    return hits(t.search(query, where=where, columns=["id"], limit=LIMIT))


def scores_in(ref: it.IndexTable, query: str, ids: list[int]) -> dict[int, float]:
    """(a)'s scores of these rows for the query (a `where` narrows without changing scores)."""
    if not ids:
        return {}
    found = ref.search(query, where=f"id IN ({', '.join(map(str, ids))})", columns=["id"], limit=len(ids))
    return dict(hits(found))


def compare(ref: it.IndexTable, query: str, where: str | None, layout: str, got: Hits, ref_top: Hits | None = None):
    if ref_top is None:
        ref_top = top(ref, query, where)
    return Comparison(query, where, layout, ref_top, got, scores_in(ref, query, [i for i, _ in got]))


# ---- Spark-free ----------------------------------------------------------------------------------


@dataclass
class Measured:
    ref: dict[str, Hits]  # case id -> (a)'s top 10
    comparisons: dict[tuple[str, str], Comparison | Exception]  # (case id, layout) -> comparison (or its error)
    seconds: float


@pytest.fixture(scope="module")
def measured(layouts) -> Measured:
    """Every case on every layout against (a), computed once (a search that fails fails its case
    only); prints the differences."""
    t0 = time.perf_counter()
    ref = it.IndexTable(layouts.paths["a"])
    tables = {k: it.IndexTable(layouts.paths[k]) for k in LAYOUTS}
    refs: dict[str, Hits] = {}
    comps: dict[tuple[str, str], Comparison | Exception] = {}
    for case in CASES:
        q, where, _ = case
        refs[case_id(case)] = ref_top = top(ref, q, where)
        for k in LAYOUTS:
            try:
                comps[(case_id(case), k)] = compare(ref, q, where, k, top(tables[k], q, where), ref_top)
            except Exception as e:  # reported by the case's test
                comps[(case_id(case), k)] = e
    out = Measured(refs, comps, time.perf_counter() - t0)
    print_report(out)
    return out


def print_report(m: Measured) -> None:
    print(f"\nSpark-free top {LIMIT} vs (a) one split, {len(CASES)} cases x {len(LAYOUTS)} layouts, {m.seconds:.1f} s")
    print("largest relative score difference (i-th score, or a row's score vs its score in (a)); [k] = rows off")
    head = f"{'query':64} {'kind':26}" + "".join(f" {'(' + k + ') ' + LAYOUT_NAMES[k]:>20}" for k in LAYOUTS)
    print(head)
    for case in CASES:
        cells = []
        for k in LAYOUTS:
            c = m.comparisons[(case_id(case), k)]
            if isinstance(c, Exception):
                cells.append(type(c).__name__)
                continue
            d = c.max_diff()
            cells.append(f"{'inf' if math.isinf(d) else f'{d:.2%}'} [{c.off()}]")
        print(f"{case_id(case)[:64]:64} {case[2][:26]:26}" + "".join(f" {c:>20}" for c in cells))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_top10_equals_one_split(measured, case, layout):
    c = measured.comparisons[(case_id(case), layout)]
    if isinstance(c, Exception):
        raise c
    assert not c.problems(), c.describe()


def test_scores_are_not_trivially_equal(measured):
    """The comparisons are not vacuous: every query matches in (a) with positive scores, BM25
    scores vary within a top 10 and between queries, and the constant-score queries are constant."""
    bm25_tops = []
    for case in CASES:
        ref = measured.ref[case_id(case)]
        assert ref, f"{case_id(case)} matches nothing"
        assert all(s > 0 for _, s in ref), case
        scores = [s for _, s in ref]
        if case[2] == "const":
            assert max(scores) == min(scores), (case, scores)
        else:
            bm25_tops.append(scores[0])
    assert len({round(s, 4) for s in bm25_tops}) >= len(bm25_tops) * 3 // 4, bm25_tops
    varied = [
        case for case in CASES if case[2] != "const" and len({round(s, 4) for _, s in measured.ref[case_id(case)]}) > 1
    ]
    assert len(varied) >= len(bm25_tops) // 2, varied
    full = [case for case in CASES if len(measured.ref[case_id(case)]) == LIMIT]
    assert len(full) >= len(CASES) - 2, [case_id(c) for c in CASES if c not in full]


def test_explicit_table_statistics_is_the_default(layouts):
    """`search.statistics=table` is the default: the explicit option changes nothing."""
    default = it.IndexTable(layouts.paths["b"])
    explicit = it.IndexTable(layouts.paths["b"], options={STATS_OPTION: "table"})
    for q in ("body:lake OR body:river", 'body:"quiet lake"'):
        e, d = top(explicit, q), top(default, q)
        assert [s for _, s in e] == [s for _, s in d], q
        assert {i for i, s in e if s > e[-1][1]} == {i for i, s in d if s > d[-1][1]}, q  # ids, modulo ties


# ---- the one-split scores are BM25 as documented (the formula the corpus statistics feed) ---------

K1, B = 1.2, 0.75
# tantivy's fieldnorm code (fieldnorm/code.rs): lengths up to 40 exact, then these buckets (floor)
FIELDNORMS = [*range(41), 42, 44, 46, 48, 50, 52, 54, 56, 60, 64, 68, 72, 76, 80, 84, 88, 96]


def fieldnorm(length: int) -> int:
    return FIELDNORMS[bisect.bisect_right(FIELDNORMS, length) - 1]


# query -> clauses (field, words (several: a phrase), boost, required)
BM25_CASES = {
    "body:lake": [("body", ("lake",), 1.0, False)],
    "lake": [("title", ("lake",), 1.0, False), ("body", ("lake",), 1.0, False)],
    "body:lake^3 OR body:river": [("body", ("lake",), 3.0, False), ("body", ("river",), 1.0, False)],
    "body:lake AND body:forest": [("body", ("lake",), 1.0, True), ("body", ("forest",), 1.0, True)],
    "title:mountain^2 OR body:glacier": [("title", ("mountain",), 2.0, False), ("body", ("glacier",), 1.0, False)],
    'body:"quiet lake"': [("body", ("quiet", "lake"), 1.0, True)],
}


@pytest.fixture(scope="module")
def words(data) -> dict[str, list[list[str]]]:
    """Each row's title and body as their tokens (the words: lowercase, alphanumeric)."""
    return {f: [s.split() for s in data[f].to_pylist()] for f in ("title", "body")}


def bm25_scores(ids: list[int], docs: dict[str, list[list[str]]], clauses) -> dict[int, float]:
    """Every matching row's BM25 score over the whole corpus as one index: idf = ln(1 + (N - n +
    0.5) / (n + 0.5)) (a phrase: the sum of its words' idf), term score = idf * (k1 + 1) * tf /
    (tf + k1 * (1 - b + b * dl / avgdl)) (tf of a phrase: its occurrences), times the boost."""
    n_docs = len(ids)
    avgdl = {f: sum(len(d) for d in docs[f]) / n_docs for f in docs}

    def freq(d: list[str], phrase: tuple[str, ...]) -> int:
        k = len(phrase)
        return sum(1 for j in range(len(d) - k + 1) if tuple(d[j : j + k]) == phrase) if phrase[0] in d else 0

    def idf(f: str, word: str) -> float:
        n = sum(1 for d in docs[f] if word in d)
        return math.log(1 + (n_docs - n + 0.5) / (n + 0.5))

    tfs = [[freq(d, phrase) for d in docs[f]] for f, phrase, _, _ in clauses]
    idfs = [sum(idf(f, w) for w in phrase) for f, phrase, _, _ in clauses]
    out = {}
    for row, id_ in enumerate(ids):
        score, matched = 0.0, True
        for (f, _, boost, required), tf_of, w_idf in zip(clauses, tfs, idfs):
            tf = tf_of[row]
            if tf:
                norm = K1 * (1 - B + B * fieldnorm(len(docs[f][row])) / avgdl[f])
                score += boost * w_idf * tf * (K1 + 1) / (tf + norm)
            elif required:
                matched = False
        if matched and score > 0:
            out[id_] = score
    return out


@pytest.mark.parametrize("query", list(BM25_CASES))
def test_one_split_scores_are_bm25(layouts, data, words, query):
    """(a)'s scores are the documented BM25 over the whole corpus (so the other layouts' expected
    scores are too): the same top scores and each returned row's score, to float32 precision."""
    want = bm25_scores(data["id"].to_pylist(), words, BM25_CASES[query])
    got = top(it.IndexTable(layouts.paths["a"]), query)
    best = sorted(want.values(), reverse=True)[:LIMIT]
    assert len(got) == len(best)
    for (i, s), w in zip(got, best):
        assert rel(s, w) < 1e-4 and rel(s, want[i]) < 1e-4, (query, i, s, want.get(i), w)


def test_OLD_BEHAVIOUR_per_split_statistics_still_reachable(layouts):
    """OLD BEHAVIOUR, kept on purpose: with `search.statistics=split` each split scores with its own
    statistics, so the partitioned table (b) ranks `body:lake OR body:river` differently from the
    one-split table (a) (a partition where "lake" is rare lifts its "lake" rows). This is why the
    option exists (Elasticsearch's query_then_fetch per shard); it must stay reachable."""
    ref = it.IndexTable(layouts.paths["a"])
    old = it.IndexTable(layouts.paths["b"], options={STATS_OPTION: "split"})
    q = "body:lake OR body:river"
    c = compare(ref, q, None, "b", top(old, q))
    print(f"\nsearch.statistics=split, (b) vs (a), {q!r}: max diff {c.max_diff():.2%}, {c.off()} rows off")
    assert c.problems(), "per-split statistics gave the one-split ranking: the skew does not show"
    assert c.off() >= 3


# ---- Spark: classic read, the indextables_search table function, Spark Connect -------------------


def spark_hits(rows) -> Hits:
    out = [(int(r["id"]), float(r["_score"])) for r in rows]
    return sorted(out, key=lambda h: -h[1])


def read_top(session, path: str, query: str, options: dict[str, str] | None = None) -> Hits:
    reader = session.read.format("indextables").option("query", query).option("limit", LIMIT)
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    return spark_hits(reader.option("columns", "id,_score").load(path).collect())


def reads_top(session, path: str, cases: list[tuple[str, str | None, str]]) -> dict[str, Hits]:
    """The top 10 of every case through the reader, in one Spark job: a union of one read per case
    (`limit`; with a `where`, `orderBy=_score`, the filter pushed below the ranking, then the 10
    best)."""
    from pyspark.sql import functions as F

    frames = []
    for k, (q, where, _) in enumerate(cases):
        reader = session.read.format("indextables").option("query", q)
        if where is None:
            df = reader.option("limit", LIMIT).option("columns", "id,_score").load(path)
        else:
            df = reader.option("orderBy", "_score").option("columns", "id,n,_score").load(path)
            df = df.filter(where).orderBy(F.col("_score").desc()).limit(LIMIT)
        frames.append(df.select(F.lit(k).alias("case"), "id", "_score"))
    return _by_case(cases, functools.reduce(lambda a, b: a.unionByName(b), frames).collect())


def functions_top(session, path: str, cases: list[tuple[str, str | None, str]]) -> dict[str, Hits]:
    """The top 10 of every case through `indextables_search`, in one statement (UNION ALL)."""
    sql = " UNION ALL ".join(
        f"SELECT {k} AS case, id, _score FROM indextables_search('{path}', '{q}', {LIMIT})"
        for k, (q, _, _) in enumerate(cases)
    )
    return _by_case(cases, session.sql(sql).collect())


def _by_case(cases: list[tuple[str, str | None, str]], rows) -> dict[str, Hits]:
    out: dict[str, list] = {case_id(c): [] for c in cases}
    for r in rows:
        out[case_id(cases[r["case"]])].append(r)
    return {k: spark_hits(v) for k, v in out.items()}


def check_spark(route: str, layouts: Layouts, layout: str, run, cases=CASES) -> None:
    """Every case (`cases`) through `run(path, cases)` on `layout` against Spark-free (a)."""
    ref = it.IndexTable(layouts.paths["a"])
    problems, t0 = [], time.perf_counter()
    got = run(layouts.paths[layout], cases)
    seconds = time.perf_counter() - t0
    worst = (0.0, "")
    for case in cases:
        q, where, _ = case
        c = compare(ref, q, where, layout, got[case_id(case)])
        if c.max_diff() >= worst[0]:
            worst = (c.max_diff(), case_id(case))
        if c.problems():
            problems.append(c.describe())
    print(
        f"\n{route}, layout ({layout}) {LAYOUT_NAMES[layout]}: {len(cases)} cases in one job ({seconds:.1f} s), "
        f"largest difference {worst[0]:.2%} ({worst[1]})"
    )
    assert not problems, f"{route}:\n" + "\n".join(problems)


SPARK_LAYOUTS = ["a", *LAYOUTS]  # (a) too: Spark's answer on one split is the Spark-free one


@pytest.mark.spark
@pytest.mark.parametrize("layout", SPARK_LAYOUTS)
def test_spark_classic_read(spark, layouts, layout):
    check_spark("classic read", layouts, layout, lambda path, cases: reads_top(spark, path, cases))


@pytest.mark.spark
@pytest.mark.parametrize("layout", SPARK_LAYOUTS)
def test_spark_table_function(spark, layouts, layout):
    unfiltered = [c for c in CASES if c[1] is None]  # the table function takes no filter
    check_spark(
        "indextables_search", layouts, layout, lambda path, cases: functions_top(spark, path, cases), unfiltered
    )


@pytest.fixture(scope="module")
def cs(connect_spark):
    it.register(connect_spark)
    return connect_spark


@pytest.mark.spark
@pytest.mark.parametrize("layout", SPARK_LAYOUTS)
def test_spark_connect_read(cs, layouts, layout):
    check_spark("Spark Connect read", layouts, layout, lambda path, cases: reads_top(cs, path, cases))


@pytest.mark.spark
def test_OLD_BEHAVIOUR_per_split_statistics_through_spark(spark, layouts):
    """OLD BEHAVIOUR, kept on purpose (see test_OLD_BEHAVIOUR_per_split_statistics_still_reachable):
    the read option `search.statistics=split` reaches the executors."""
    ref = it.IndexTable(layouts.paths["a"])
    q = "body:lake OR body:river"
    c = compare(ref, q, None, "b", read_top(spark, layouts.paths["b"], q, {STATS_OPTION: "split"}))
    assert c.problems() and c.off() >= 3, c.describe()
