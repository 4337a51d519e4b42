"""The parsed full-text query (expr/fulltext.py) and corpus-wide BM25 statistics
(core/split/read/corpus_stats.py), on Tantivy indexes built here (no Spark, no table)."""

from __future__ import annotations

import random

import pytest
import tantivy

from indextables_spark.core.schema.types import ColumnSpec, IndexedField
from indextables_spark.core.split.read import corpus_stats as cs
from indextables_spark.expr.fulltext import CONSTANT, PHRASE, TERM
from indextables_spark.expr.search_query import SearchQuery, full_text_query

SPECS = [
    ColumnSpec("title", "string", "text", (IndexedField("title", "text", "default", "position"),)),
    ColumnSpec("body", "string", "text", (IndexedField("body", "text", "default", "position"),)),
    ColumnSpec("tag", "string", "string", (IndexedField("tag", "text", "raw", "basic", exact=True),)),
    ColumnSpec("n", "long", "long", (IndexedField("n", "i64", fast=True),)),
    ColumnSpec("attrs", {"type": "struct"}, "json", (IndexedField("attrs", "json", "default", "position"),)),
]

QUERIES = [
    "body:lake OR body:river",
    "lake",
    '"lake river"',
    'body:"lake river"~2',
    "title:lake^2 AND -body:sea",
    "lake AND NOT sea",
    "body:riv*",
    "n:[1 TO 3]",
    "n:{1 TO *]",
    "n: IN [1 2]",
    "body:/la.e/",
    "lake-river",
    "(lake river)^3",
    'body:"lake riv"*',
    "kestrel~1",
    "body:kestrl~1 AND body:falcon",
    "tag:a",
    'tag:"c d"',
    "n:3",
    "+lake +river -sea",
    "(lake OR sea) AND (river OR mountain^0.5)",
    "attrs.user:ann",
    "attrs.k:1",
    "*",
    "title:the",
    "lake river forest",
    'body:lakes^1.5 title:"big sea"',
    "a\\:b",
    'body:"quote \\" in"',
    "title:(lake OR sea)",
    # operator precedence and groups the grammar flattens or nests
    "lake OR river AND sea",
    "lake AND river OR sea",
    "lake AND (river OR -sea)",
    "a OR (+lake)",
    "river OR (+sea) AND lake",
    "lake AND NOT (sea)",
    "title:lake OR body:river AND NOT body:sea^2",
    "((lake river))^2 sea",
]


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("title", stored=False)
    sb.add_text_field("body", stored=False)
    sb.add_text_field("tag", stored=False, tokenizer_name="raw")
    sb.add_integer_field("n", indexed=True, fast=True)
    sb.add_json_field("attrs", stored=False)
    sb.add_integer_field("id", indexed=True, fast=True)
    return sb.build()


def _index(tmp_path, name: str, rows: list[tuple[int, str, str, str, int]]) -> tantivy.Index:
    d = tmp_path / name
    d.mkdir()
    idx = tantivy.Index(_schema(), str(d))
    w = idx.writer(50_000_000, 1)
    for i, title, body, tag, n in rows:
        w.add_document(tantivy.Document(id=i, title=title, body=body, tag=tag, n=n, attrs={"user": "ann", "k": n}))
    w.commit()
    idx.reload()
    return idx


def _rows(count: int, seed: int = 1) -> list[tuple[int, str, str, str, int]]:
    rng = random.Random(seed)
    vocab = "lake river forest sea mountain big small the and of kestrel falcon riverbank lakes".split()
    return [
        (
            i,
            " ".join(rng.choices(vocab, k=3)),
            " ".join(rng.choices(vocab, k=rng.randint(3, 20))),
            rng.choice(["a", "b", "c d"]),
            i % 7,
        )
        for i in range(count)
    ]


def _parse(idx: tantivy.Index, text: str, fq) -> tantivy.Query:
    return idx.parse_query(
        text, list(fq.default_fields), fuzzy_fields=fq.fuzzy_fields or None, allow_regexes="/" in fq.parser_text
    )


def _hits(idx: tantivy.Index, q: tantivy.Query, k: int = 1000) -> list[tuple[float, int]]:
    s = idx.searcher()
    hits = s.search(q, k).hits
    ids = s.fast_field_values("id", [h[1] for h in hits]) if hits else []
    return [(round(h[0], 5), i) for h, i in zip(hits, ids)]


@pytest.mark.parametrize("query", QUERIES)
def test_written_back_text_is_the_same_query(tmp_path, query):
    """The tree written back (no boosts, and every leaf boosted by 1) matches and scores exactly as
    the parser's own text: the boosts for corpus statistics change nothing else."""
    idx = _index(tmp_path, "a", _rows(300))
    fq = full_text_query(SPECS, query)
    want = _hits(idx, _parse(idx, fq.parser_text, fq))
    assert _hits(idx, _parse(idx, fq.boosted_text({}), fq)) == want
    ones = {i: 1.0 for i in range(len(fq.leaves))}
    assert _hits(idx, _parse(idx, fq.boosted_text(ones), fq)) == want


def test_leaves_say_what_the_query_reads():
    fq = full_text_query(SPECS, 'lake AND body:"big sea"~2 AND n:[1 TO 2] AND body:riv*')
    kinds = [(leaf.field, leaf.kind, leaf.terms) for leaf in fq.leaves]
    assert kinds == [
        ("title", TERM, ("lake",)),
        ("body", TERM, ("lake",)),
        ("body", PHRASE, ("big", "sea")),
        ("n", CONSTANT, ()),
        ("body", CONSTANT, ()),
    ]
    assert fq.fields == {"title", "body", "n"}
    assert fq.position_fields == {"body"}
    assert not fq.countable
    assert full_text_query(SPECS, "lake OR n:3 OR tag:a OR n: IN [1 2]").countable
    assert full_text_query(SPECS, "n:3").scored_terms == {("n", 3)}
    assert not full_text_query(SPECS, "attrs.user:ann").exact_stats


def test_parsed_once_per_mapping_and_text():
    # (one read's value: no process-wide cache of analyses any more; expr/search_query.py)
    q = SearchQuery("lake river")
    assert q.analysis(SPECS) is q.analysis(list(SPECS))


def test_corpus_statistics_make_split_scores_those_of_one_split(tmp_path):
    """The same rows as one index and as two with skewed term frequencies: with the table's
    statistics each split scores as the one index does (up to the average field lengths)."""
    rng = random.Random(3)
    rows = []
    for i in range(4000):
        part = i % 2
        words = rng.choices([f"w{j}" for j in range(200)], k=rng.randint(10, 30))
        for j, w in enumerate(["lake", "river"]):
            if rng.random() < (0.4 if j == part else 0.02):
                words[rng.randrange(len(words))] = w
        rows.append((i, "t", " ".join(words), "a", i % 7))
    one = _index(tmp_path, "one", rows)
    parts = [_index(tmp_path, f"p{p}", [r for r in rows if r[0] % 2 == p]) for p in range(2)]
    for query in ["body:lake OR body:river", 'body:"lake w1"~4', "body:lake^3 OR body:w5 OR n:3"]:
        fq = full_text_query(SPECS, query)
        truth = dict((i, s) for s, i in _hits(one, _parse(one, fq.parser_text, fq), 4000))
        corpus = cs.combine([cs.split_stats(p.searcher(), fq) for p in parts])
        assert corpus == cs.split_stats(one.searcher(), fq)
        worst_split, worst_table = 0.0, 0.0
        for p in parts:
            local = cs.split_stats(p.searcher(), fq)
            plain = _hits(p, _parse(p, fq.parser_text, fq), 4000)
            weighted = _hits(p, _parse(p, fq.boosted_text(cs.leaf_weights(fq, local, corpus)), fq), 4000)
            assert sorted(i for _, i in weighted) == sorted(i for _, i in plain)  # the same matches
            worst_split = max(worst_split, max((abs(s - truth[i]) / truth[i] for s, i in plain), default=0.0))
            worst_table = max(worst_table, max((abs(s - truth[i]) / truth[i] for s, i in weighted), default=0.0))
        assert worst_split > 0.05, query  # the skew shows with the split's statistics
        assert worst_table < 0.01, (query, worst_table)  # only the average field lengths differ


def test_statistics_ship_as_json():
    stats = cs.CorpusStats(10, {("body", "lake"): 3, ("n", 3): 1, ("flag", True): 2})
    assert cs.CorpusStats.from_json(stats.to_json()) == stats


def _random_query(rng: random.Random, depth: int = 0) -> str:
    words = ["lake", "river", "sea", "forest", "big", "the", "kestrel", "falcon"]
    r = rng.random()
    if depth > 2 or r < 0.45:
        field = rng.choice(["", "", "title:", "body:"])
        leaf = rng.choice(
            [
                rng.choice(words),
                '"' + " ".join(rng.sample(words, 2)) + '"',
                '"' + " ".join(rng.sample(words, 2)) + f'"~{rng.randint(1, 3)}',
                rng.choice(words) + "^" + rng.choice(["2", "0.5", "1.5"]),
            ]
        )
        return field + leaf
    parts = [_random_query(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    ops = [rng.choice([" ", " AND ", " OR ", " AND NOT ", " OR -", " +", " -"]) for _ in parts[1:]]
    text = parts[0] + "".join(op + p for op, p in zip(ops, parts[1:]))
    return f"({text})" + (rng.choice(["", "", "^2"]) if depth else "")


def test_written_back_text_on_random_queries(tmp_path):
    """300 generated boolean queries (terms, phrases, slops, boosts, AND / OR / NOT / + / -,
    nested groups): the written-back text matches and scores as the parser's own text."""
    idx = _index(tmp_path, "a", _rows(300))
    rng = random.Random(11)
    checked = 0
    for _ in range(300):
        query = _random_query(rng)
        fq = full_text_query(SPECS, query)
        try:
            want = _hits(idx, _parse(idx, fq.parser_text, fq))
        except ValueError:
            continue  # e.g. only negations: the parser refuses the text itself
        for weights in ({}, {i: 1.0 for i in range(len(fq.leaves))}):
            assert _hits(idx, _parse(idx, fq.boosted_text(weights), fq)) == want, (query, fq.boosted_text(weights))
        checked += 1
    assert checked > 200
