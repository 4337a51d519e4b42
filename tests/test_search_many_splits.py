"""Spark-free search of a table of many splits of very different sizes (issue #28, criterion 1):
splits whose index has no match for the query are counted and left (SearchPlan.matching), parsed
queries are shared by the splits of one doc mapping (SearchQuery.tantivy_query), and the split cache
hands out open splits without touching the disk (SplitCache._open_dir). The answers must be
exactly those of a brute-force match of the same rows."""

from __future__ import annotations

import os
import random
import shutil

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.read import reader as reader_mod
from indextables_spark.expr import search_query
from indextables_spark.core.split.read import search as search_mod
from indextables_spark.core.split.cache.cache import get_cache

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda"]
LANGS = {"en": 1500, "de": 300, "fr": 120, "it": 40, "nl": 12, "sv": 5, "fi": 2, "da": 1}
OPTIONS = {"indexing.typemap.line": "text", "write.parallelism": "2", "write.chunkRows": "1000"}


def lines(seed: int = 7, start: int = 0) -> pa.Table:
    """Rows (id, lang, n, line) partitioned very unevenly; "zephyr" in 3 rows of 2 languages,
    "quasar" in ~5% of the rows of every language, common words everywhere."""
    rng = random.Random(seed)
    ids, langs, ns, texts = [], [], [], []
    i = start
    for lang, count in LANGS.items():
        for _ in range(count):
            words = rng.choices(WORDS, k=6)
            if rng.random() < 0.05:
                words.append("quasar")
            ids.append(i)
            langs.append(lang)
            ns.append(i % 10)
            texts.append(" ".join(words))
            i += 1
    for k in (3, 700, 1650):  # rows of en, en, de
        texts[k] += " zephyr"
    return pa.table({"id": ids, "lang": langs, "n": ns, "line": texts})


def expected(data: pa.Table, match, where=lambda r: True) -> list[int]:
    return sorted(r["id"] for r in data.to_pylist() if match(r["line"].split()) and where(r))


QUERIES = [
    ("line:zephyr", lambda w: "zephyr" in w),
    ("line:quasar", lambda w: "quasar" in w),
    ("line:alpha", lambda w: "alpha" in w),
    ("line:nowhere", lambda w: False),
    ("line:zephyr OR line:quasar", lambda w: "zephyr" in w or "quasar" in w),
    ("line:quasar AND line:beta", lambda w: "quasar" in w and "beta" in w),
    ("line:quasar AND NOT line:beta", lambda w: "quasar" in w and "beta" not in w),
    # not counted before the search (query_parsing.COUNTED_KINDS): every split is read
    ('line:"beta quasar"', lambda w: ("beta", "quasar") in zip(w, w[1:])),
    ("line:zeph*", lambda w: any(x.startswith("zeph") for x in w)),
    ("line:zephir~1", lambda w: "zephyr" in w),
]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    path = str(root / "t")
    data = lines()
    it.write_table(path, data, partition_by=["lang"], options=OPTIONS)
    opts = {"cache.disk.path": str(root / "cache")}
    return it.IndexTable(path, opts), data


def ids(result: pa.Table) -> list[int]:
    return sorted(result.column("id").to_pylist())


def test_the_table_has_many_splits_of_very_different_sizes(table):
    t, _ = table
    sizes = sorted(f.num_records for f in t.files())
    assert len(sizes) >= 9 and sizes[0] == 1 and sizes[-1] >= 500


@pytest.mark.parametrize("query,match", QUERIES)
def test_answers_equal_a_brute_force_match(table, query, match):
    t, data = table
    for _ in range(2):  # cold, then with the parsed queries and open splits cached
        assert ids(t.search(query, columns=["id"])) == expected(data, match)
        assert ids(t.search(query, where="n > 4", columns=["id"])) == expected(data, match, lambda r: r["n"] > 4)
        assert ids(t.search(query, where="lang = 'de'", columns=["id"])) == expected(
            data, match, lambda r: r["lang"] == "de"
        )
        streamed = [b for b in t.to_batches(query, columns=["id", "lang"])]
        assert sorted(x for b in streamed for x in b.column("id").to_pylist()) == expected(data, match)
        top = t.search(query, columns=["id", "lang"], limit=4)
        want = expected(data, match)
        assert top.num_rows == min(4, len(want)) and set(top.column("id").to_pylist()) <= set(want)
        assert t.count(query) == len(want)
        full = t.search(query)
        assert full.column_names == ["id", "lang", "n", "line"]
        by_id = {r["id"]: r for r in data.to_pylist()}
        assert all(by_id[r["id"]] == r for r in full.to_pylist())


def test_splits_without_a_match_are_not_opened(table, monkeypatch):
    t, data = table
    opened: list[str] = []

    class Counting(reader_mod.SplitReader):
        def __init__(self, local_dir):
            opened.append(local_dir)
            super().__init__(local_dir)

    monkeypatch.setattr(search_mod, "SplitReader", Counting)
    assert ids(t.search("line:zephyr", columns=["id"])) == expected(data, lambda w: "zephyr" in w)
    with_zephyr = {"en", "de"}
    splits = [f for f in t.files() if f.partition_values["lang"] in with_zephyr]
    assert 0 < len(opened) <= len(splits) < len(t.files())
    opened.clear()
    assert ids(t.search('line:"beta quasar"', columns=["id"])) == expected(
        data, lambda w: ("beta", "quasar") in zip(w, w[1:])
    )
    assert len(opened) == len(t.files())  # a phrase is not counted first: every split is read
    opened.clear()
    assert t.search("line:nowhere", columns=["id"]).num_rows == 0
    assert t.search("line:nowhere", columns=["id"], limit=3).num_rows == 0
    assert opened == []


def test_parsed_queries_are_shared_by_a_doc_mapping_only(tmp_path):
    """A column added later (mergeSchema) gives new splits another doc mapping; a column that sorts
    first may move field ids, so the old mapping's parsed query must not serve the new splits."""
    path = str(tmp_path / "t")
    first = lines()
    it.write_table(path, first, partition_by=["lang"], options=OPTIONS)
    second = lines(seed=8, start=10_000)
    second = second.add_column(0, "aaa", pa.array([f"x{i % 3}" for i in range(second.num_rows)]))
    it.write_table(path, second, partition_by=["lang"], options={**OPTIONS, "mergeSchema": "true"})
    t = it.IndexTable(path, {"cache.disk.path": str(tmp_path / "cache")})
    mappings = {f.doc_mapping_ref for f in t.files()}
    assert len(mappings) == 2
    both = pa.concat_tables([first, second.drop_columns(["aaa"])])
    for query, match in QUERIES:
        assert ids(t.search(query, columns=["id"])) == expected(both, match), query
    assert ids(t.search("line:quasar", where="aaa = 'x1'", columns=["id"])) == sorted(
        r["id"] for r in second.to_pylist() if r["aaa"] == "x1" and "quasar" in r["line"].split()
    )
    keys = {k for k in search_query._built.keys() if k[1] == "line:quasar" and k[0][0] != "empty index"}
    assert len({k[0] for k in keys}) == 2


def test_deleted_rows_stay_deleted_in_splits_with_matches(tmp_path):
    path = str(tmp_path / "t")
    data = lines()
    it.write_table(path, data, partition_by=["lang"], options=OPTIONS)
    t = it.IndexTable(path, {"cache.disk.path": str(tmp_path / "cache")})
    assert ids(t.search("line:zephyr", columns=["id"])) == [3, 700, 1650]
    t.delete("id = 700")
    assert ids(t.search("line:zephyr", columns=["id"])) == [3, 1650]
    assert t.count("line:zephyr") == 2


def test_flushed_or_removed_cache_directories_are_fetched_again(tmp_path):
    path = str(tmp_path / "t")
    data = lines()
    it.write_table(path, data, partition_by=["lang"], options=OPTIONS)
    opts = {"cache.disk.path": str(tmp_path / "cache")}
    t = it.IndexTable(path, opts)
    want = expected(data, lambda w: "quasar" in w)
    assert ids(t.search("line:quasar", columns=["id"])) == want
    cache = get_cache(t.options)
    hits = cache.hits
    assert ids(t.search("line:quasar", columns=["id"])) == want
    assert cache.hits >= hits + len(t.files())  # every split found in the cache
    assert cache.flush()["entriesRemoved"] == len(t.files())
    assert ids(t.search("line:quasar", columns=["id"])) == want
    assert all(cache.is_cached(t.storage, f) for f in t.files())
    # another process evicting directories under open indexes: answers unchanged, and once the
    # recheck interval passed the directories are fetched again
    for d in os.listdir(cache.root):
        if not d.startswith("."):
            shutil.rmtree(os.path.join(cache.root, d))
    assert ids(t.search("line:quasar", columns=["id"])) == want
    cache._checked.clear()  # as if RECHECK_SECONDS had passed
    assert ids(t.search("line:quasar", columns=["id"])) == want
    assert all(cache.is_cached(t.storage, f) for f in t.files())
