"""Remote splits fetched only as far as a query reads their index files (core/split/cache/sparse.py): results
identical to whole fetches for every query kind, holes never read, partly fetched directories
completed before a read that needs more, and the bytes saved."""

from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.cache import sparse
from indextables_spark.core.split.format.bundle import RangeSource, read_footer
from indextables_spark.core.split.read.corpus_stats import forget_table_stats
from indextables_spark.core.split.format.composite import (
    INDEX_SECTIONS,
    TAIL_BYTES,
    columnar_tail,
    composite_sections,
    index_sections,
)
from indextables_spark.core.storage import open_storage
from indextables_spark.core.storage.counting import CountingStorage
from indextables_spark.util.ranges import coalesce
from indextables_spark.expr.search_query import SearchQuery

VOCAB = "data lake spark search index query table split tantivy arrow parquet stream batch engine".split()
RARE = ["quasar", "nebula", "zephyr"]
ROWS = 6000


def _docs(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    vocab = np.array(VOCAB, dtype=object)
    body = vocab[rng.integers(0, len(VOCAB), size=(n, 12))]
    rare = rng.random(n) < 0.01
    body[rare, 2] = np.array(RARE, dtype=object)[rng.integers(0, len(RARE), size=int(rare.sum()))]
    return pa.table(
        {
            "id": pa.array(np.arange(seed * n, (seed + 1) * n, dtype=np.int64)),
            "title": [" ".join(r) for r in vocab[rng.integers(0, len(VOCAB), size=(n, 4))]],
            "body": [" ".join(r) for r in body],
            "views": pa.array(rng.integers(0, 10_000, size=n, dtype=np.int64)),
            "score": pa.array(rng.random(n)),
            "region": pa.array(np.array(["us-east", "eu-west", "ap-south"], dtype=object)[rng.integers(0, 3, size=n)]),
        }
    )


TEXT = {"spark.indextables.indexing.typemap.body": "text", "spark.indextables.indexing.typemap.title": "text"}


@pytest.fixture(scope="module")
def s3_table(s3_module_uri, s3_options):
    """Two splits on S3 (the S3 emulator), written once: the tests only read them, each through
    cache directories of its own (cold_stats keeps their term statistics cold too)."""
    for k in range(2):
        it.write_table(s3_module_uri, _docs(ROWS, k), mode="append", options={**s3_options, **TEXT})
    return s3_module_uri, s3_options


@pytest.fixture(autouse=True)
def cold_stats():
    """No table statistics kept from an earlier test (they are kept per process and table), so a
    test's reads fetch what they would on a table of their own."""
    forget_table_stats()


def _table(uri, options, cache_dir, lazy="true"):
    opts = {**options, "spark.indextables.cache.disk.path": str(cache_dir), "spark.indextables.cache.rows.lazy": lazy}
    storage = CountingStorage(open_storage(uri, opts))
    return it.IndexTable(uri, opts, storage=storage), storage


QUERIES = [
    "body:quasar OR body:nebula",  # rare terms
    "quasar",  # default fields (title, body)
    'body:"data lake"',  # phrase: positions
    'title:"spark search"~2',  # sloppy phrase
    'body:"data la"*',  # phrase prefix
    "body:qua*",  # prefix (regex)
    "body:quasr~1",  # fuzzy
    "views:[100 TO 500]",  # range on a fast field
    "score:>0.99",
    "id:IN [1 5 77 6001]",  # term set
    "region:us-east AND body:zephyr",
    "region:*",  # exists
    "+body:lake -title:spark",
    "body:quasar^2 OR title:tantivy",
]


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


@pytest.mark.cloud
@pytest.mark.parametrize("query", QUERIES)
def test_sparse_reads_equal_whole_reads(s3_table, tmp_path, monkeypatch, query):
    """Each query kind, on a fresh cache (only that query's sections fetched, the rest filled
    with 0xFF so that a read of it would show), returns the rows and scores a whole fetch does."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    uri, options = s3_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    part, storage = _table(uri, options, tmp_path / "part")
    expect = _sorted(whole.search(query))
    got = _sorted(part.search(query))
    assert got.equals(expect), query
    dirs = [os.path.join(tmp_path / "part", d) for d in os.listdir(tmp_path / "part") if not d.startswith(".")]
    assert len(dirs) == 2
    # scored top 20: same rows, same scores
    a, b = whole.search(query, limit=20), part.search(query, limit=20)
    assert a.column("id").to_pylist() == b.column("id").to_pylist()
    assert np.allclose(a.column("_score").to_numpy(), b.column("_score").to_numpy())
    # counts and aggregations (they need whole directories: the cache completes them first)
    assert part.count(query=query) == whole.count(query=query) == expect.num_rows
    aggs = {"v": {"stats": {"field": "views"}}, "r": {"terms": {"field": "region"}}}
    assert part.aggregate(aggs, query=query) == whole.aggregate(aggs, query=query)
    assert not any(os.path.exists(os.path.join(d, sparse.STATE_FILE)) for d in dirs)


@pytest.mark.cloud
def test_partial_directory_is_extended_then_completed(s3_table, tmp_path, monkeypatch):
    """One cache: a rare-term query fetches a part of the index files; a phrase on another field
    fetches its sections too (the first query still answers from what is there); a read with a
    filter fetches its column's parts; one with snippets completes the directories; results
    equal whole fetches throughout."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    monkeypatch.setattr(sparse, "GAP_BYTES", 0)  # (small splits: no gap merged, to see the saving)
    uri, options = s3_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    part, storage = _table(uri, options, tmp_path / "part")
    data = sum(f.size for f in part.files())
    storage.reset()
    q1 = "body:quasar OR body:nebula"
    assert _sorted(part.search(q1, columns=["id"])).equals(_sorted(whole.search(q1, columns=["id"])))
    first = storage.bytes_read["read_range"]
    assert storage.bytes_read["download_file"] == 0 and first < 0.5 * data
    root = tmp_path / "part"
    dirs = [os.path.join(root, d) for d in os.listdir(root) if not d.startswith(".")]
    states = [json.load(open(os.path.join(d, sparse.STATE_FILE))) for d in dirs]
    assert all(any(s["missing"].values()) for s in states)
    storage.reset()
    assert _sorted(part.search(q1, columns=["id"])).equals(_sorted(whole.search(q1, columns=["id"])))
    assert storage.bytes_read["read_range"] == 0  # warm: nothing fetched
    q2 = 'title:"spark search"'
    assert _sorted(part.search(q2)).equals(_sorted(whole.search(q2)))
    assert storage.bytes_read["read_range"] > 0  # title's sections and positions
    assert all(os.path.exists(os.path.join(d, sparse.STATE_FILE)) for d in dirs)  # body's positions still missing
    where = "views < 300"
    assert _sorted(part.search("body:lake", where=where)).equals(_sorted(whole.search("body:lake", where=where)))
    assert all(os.path.exists(os.path.join(d, sparse.STATE_FILE)) for d in dirs)  # views' parts only
    got = part.search("body:lake", where=where, snippets="body")  # (snippets: the index whole)
    assert _sorted(got).equals(_sorted(whole.search("body:lake", where=where, snippets="body")))
    assert not any(os.path.exists(os.path.join(d, sparse.STATE_FILE)) for d in dirs)
    for d in dirs:  # complete: every index file equals the split's bytes
        footer = json.load(open(os.path.join(d, "footer.json")))
        path = footer["extractedFrom"].split("/", 3)[-1]
        key = path[len(uri.split("/", 3)[-1]) + 1 :]
        for f in footer["files"]:
            local = open(os.path.join(d, f["name"]), "rb").read()
            assert local == storage.read_range(key, f["offset"], f["offset"] + f["length"]), f["name"]


@pytest.mark.cloud
def test_old_splits_without_sections_in_the_footer(s3_table, tmp_path, monkeypatch):
    """Splits whose footer has no indexSections (written before it) read the offset tables first;
    the results are the same."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    monkeypatch.setattr(sparse, "_footer_layout", lambda footer: None)
    uri, options = s3_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    part, storage = _table(uri, options, tmp_path / "part")
    for q in ("body:quasar OR body:nebula", 'body:"data lake"', "views:[100 TO 500]"):
        assert _sorted(part.search(q)).equals(_sorted(whole.search(q))), q
    assert storage.bytes_read["download_file"] == 0


@pytest.mark.cloud
def test_splits_without_a_hotcache(s3_table, tmp_path, monkeypatch):
    """Splits written before the hotcache (format/hotcache.py) open by the ends of their files,
    one more round; the results are the same."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    monkeypatch.setattr(sparse, "hotcache_range", lambda raw: None)
    uri, options = s3_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    part, _ = _table(uri, options, tmp_path / "part")
    for q in ("body:quasar OR body:nebula", 'body:"data lake"', "views:[100 TO 500]"):
        assert _sorted(part.search(q)).equals(_sorted(whole.search(q))), q
        assert part.search(q, limit=5).equals(whole.search(q, limit=5)), q


@pytest.mark.cloud
def test_the_hotcache_opens_a_split_with_its_first_request(s3_table, tmp_path, monkeypatch):
    """With the hotcache, a rare term's top 10 costs per split: the split's end (footer and
    hotcache); its dictionary, field norms, token count and row id column; its postings; and the
    winners' rows (one split here): at most 7 requests; without it, the files' ends more."""
    uri, options = s3_table

    def requests(name: str) -> int:
        t, storage = _table(uri, options, tmp_path / name)
        storage.reset()
        t.search("body:quasar", columns=["id", "body"], limit=10)
        return storage.requests["read_range"]

    with_hot = requests("hot")
    monkeypatch.setattr(sparse, "hotcache_range", lambda raw: None)
    without = requests("cold")
    assert with_hot <= 2 * 7 and with_hot < without, (with_hot, without)


def test_a_damaged_hotcache_is_named(tmp_path):
    from indextables_spark.core.split.format.hotcache import parse_hotcache

    raw = {"hotcache": {"offset": 0, "length": 10, "pieces": [["meta.json", 0, 12]]}}
    with pytest.raises(it.IndexTablesError, match="split s3://b/x.split: the hotcache holds 10 bytes"):
        parse_hotcache(raw, b"0123456789", {"meta.json": 12}, "s3://b/x.split")
    raw = {"hotcache": {"offset": 0, "length": 10, "pieces": [["meta.json", 5, 15]]}}
    with pytest.raises(it.IndexTablesError, match="outside its file"):
        parse_hotcache(raw, b"0123456789", {"meta.json": 12}, "s3://b/x.split")


class KeyCountingStorage(CountingStorage):
    """CountingStorage that also counts the bytes of ranged reads per object key."""

    def __init__(self, inner):
        super().__init__(inner)
        self.by_key: Counter[str] = Counter()

    def read_range(self, key: str, start: int, end: int) -> bytes:
        data = super().read_range(key, start, end)
        with self._lock:
            self.by_key[key] += len(data)
        return data


def _postings(state: dict, below: dict[str, int]) -> list[tuple[str, int, int]]:
    """(file, start, end) of every field's postings in the state's sections (.pos whole, .idx after
    its token count), up to below[file]."""
    out = []
    for name, secs in state["sections"].items():
        ext = name.rsplit(".", 1)[-1]
        if ext in ("idx", "pos"):
            head = sparse.TOKEN_COUNT_BYTES if ext == "idx" else 0
            out += [(name, s + head, min(e, below[name])) for s, e in secs.values() if min(e, below[name]) > s + head]
    return out


@pytest.mark.cloud
@pytest.mark.parametrize("footer_sections", [True, False])
def test_statistics_of_pruned_splits_fetch_no_postings(s3_uri, s3_options, tmp_path, monkeypatch, footer_sections):
    """A cold scored search with a partition filter gathers the corpus statistics of every split
    (core/split/read/corpus_stats.py), but of the splits the filter pruned it fetches only the term
    dictionaries (no postings, no positions, of the fast fields only the column dictionary: the
    state lists the rest missing), and of the splits it reads nothing twice; its top 10 equal a warm
    whole cache's. A later search of a pruned split fetches the rest through the index opened for
    the statistics and is exact (a hole read would show the 0xFF fill: the token count the open
    index keeps is fetched with the dictionary)."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    monkeypatch.setattr(sparse, "GAP_BYTES", 0)  # (small splits: no gap merged, to see what is read)
    if not footer_sections:  # splits written before indexSections: offset tables read first
        monkeypatch.setattr(sparse, "_footer_layout", lambda footer: None)
    for k in range(2):
        it.write_table(s3_uri, _docs(ROWS, k), mode="append", partition_by="region", options={**s3_options, **TEXT})
    query, where = 'body:quasar OR body:"data lake" OR title:tantivy', "region = 'us-east'"
    whole, _ = _table(s3_uri, s3_options, tmp_path / "whole", lazy="false")
    whole.search(query, where=where, limit=10)  # warm
    expect = whole.search(query, where=where, limit=10)

    def cold(name: str, **extra: str):
        forget_table_stats()  # (kept per process: the whole cache's search gathered them)
        opts = {**s3_options, "spark.indextables.cache.disk.path": str(tmp_path / name), **extra}
        storage = KeyCountingStorage(open_storage(s3_uri, {**opts, "spark.indextables.cache.rows.lazy": "true"}))
        table = it.IndexTable(s3_uri, {**opts, "spark.indextables.cache.rows.lazy": "true"}, storage=storage)
        return table, storage, table.search(query, where=where, limit=10)

    part, storage, got = cold("part")
    assert got.column("id").to_pylist() == expect.column("id").to_pylist() and got.num_rows == 10
    assert np.allclose(got.column("_score").to_numpy(), expect.column("_score").to_numpy(), rtol=1e-6)
    files = part.files()
    assert len(files) == 6
    read = {f.path for f in files if f.partition_values["region"] == "us-east"}
    root = tmp_path / "part"
    dirs = {}
    for d in os.listdir(root):
        if not d.startswith("."):
            where_from = json.load(open(root / d / "footer.json"))["extractedFrom"]
            dirs[next(f.path for f in files if where_from.endswith(f.path))] = root / d
    assert len(dirs) == 6  # the statistics opened every split
    for path, d in dirs.items():
        state = json.load(open(d / sparse.STATE_FILE))
        missing = {n: sparse._ranges(rs) for n, rs in state["missing"].items()}
        lengths = {f["name"]: f["length"] for f in json.load(open(d / "footer.json"))["files"]}
        # (without the footer's sections, the last TAIL_BYTES of each file are read first, whatever they hold)
        tail = 0 if footer_sections else TAIL_BYTES
        postings = _postings(state, {n: max(0, n_len - tail) for n, n_len in lengths.items()})
        assert postings
        lacking = [(n, s, e) for n, s, e in postings if sparse.intersect(missing.get(n, []), [(s, e)]) != [(s, e)]]
        if path in read:
            assert lacking  # the search read postings there
        else:  # every byte of every postings list and positions list missing, the rest fetched
            assert not lacking, path
            (fast,) = [n for n in lengths if n.endswith(".fast")]
            data = open(d / fast, "rb").read()  # (its end: what opening the segment reads)
            columns = len(data) - max(columnar_tail(len(data), data), TAIL_BYTES)
            # (the hotcache holds exactly the end opening reads; without one, a TAIL_BYTES guess)
            assert [(s, min(e, columns)) for s, e in missing[fast]] == [(0, columns)] and columns > len(data) / 2
            assert missing[fast][0][1] <= len(data) - columnar_tail(len(data), data)
            size = next(f.size for f in files if f.path == path)
            assert storage.by_key[path] <= size - sum(e - s for _, s, e in postings) - columns
    # the splits read fetch exactly what a search with each split's own statistics fetches
    _, own, _ = cold("own", **{"spark.indextables.search.statistics": "split"})
    assert {k: storage.by_key[k] for k in read} == {k: own.by_key[k] for k in read}
    assert not any(own.by_key[k] for k in dirs if k not in read)
    # a later search of the pruned splits: their postings fetched, the answer exact
    for region in ("eu-west", "ap-south"):
        w = f"region = '{region}'"
        a, b = whole.search(query, where=w, limit=10), part.search(query, where=w, limit=10)
        assert a.column("id").to_pylist() == b.column("id").to_pylist()
        assert np.allclose(a.column("_score").to_numpy(), b.column("_score").to_numpy(), rtol=1e-6)
        assert _sorted(part.search(query, where=w)).equals(_sorted(whole.search(query, where=w)))
        ranged = "views:[100 TO 500]"  # (a fast field)
        assert _sorted(part.search(ranged, where=w)).equals(_sorted(whole.search(ranged, where=w)))


def test_sections_written_in_the_footer(tmp_path):
    """The writer records every sectioned file's field sections; they match the offset tables."""
    uri = str(tmp_path / "t")
    it.write_table(uri, _docs(2000, 0), options=TEXT)
    t = it.IndexTable(uri)
    (add,) = t.files()
    path = os.path.join(uri, add.path)
    footer = read_footer(path, path)
    layout = footer.raw[INDEX_SECTIONS]
    assert layout["fields"][-1] == "__row" and "body" in layout["fields"]
    data = open(path, "rb").read()
    exts = set()
    for f in footer.files:
        if f.name.rsplit(".", 1)[-1] in ("term", "idx", "pos"):
            exts.add(f.name.rsplit(".", 1)[-1])
            blob = data[f.offset : f.offset + f.length]
            secs = composite_sections(len(blob), blob, len(layout["fields"]))
            assert {str(k): list(v) for k, v in secs.items()} == layout["files"][f.name]["sections"]
    assert exts == {"term", "idx", "pos"}
    # what opening the fast field file reads: its column dictionary and footers, told from its end
    (fast,) = [f for f in footer.files if f.name.endswith(".fast")]
    blob = data[fast.offset : fast.offset + fast.length]
    need = columnar_tail(len(blob), blob)
    assert 20 < need < len(blob) / 4 and columnar_tail(len(blob), blob[-need:]) == need
    with pytest.raises(ValueError):
        columnar_tail(len(blob), blob[:-4] + b"\x01\x00\x00\x00")  # not a tantivy footer
    assert index_sections(str(tmp_path / "nowhere"), ["x.term"]) is None


def test_query_needs_and_ranges(tmp_path):
    """Fields and positions from the query's Tantivy form; unknown kinds mean: fetch whole."""
    uri = str(tmp_path / "t")
    it.write_table(uri, _docs(500, 0), options=TEXT)
    (add,) = it.IndexTable(uri).files()
    path = os.path.join(uri, add.path)
    footer = read_footer(path, path)
    names = footer.raw[INDEX_SECTIONS]["fields"]
    body, ident = names.index("body"), names.index("id")
    need = sparse.query_needs(footer, names, SearchQuery("body:quasar OR id:5"))
    five = sparse.term_key("i64", 5)
    assert need == sparse.Needs(
        frozenset(),
        frozenset(),
        terms=tuple(sorted({(body, frozenset({b"quasar"})), (ident, frozenset({five}))})),
        norms=frozenset({body, ident}),
        columns=frozenset({"__row"}),
    )
    phrase = sparse.query_needs(footer, names, SearchQuery('body:"a b"'))
    assert phrase.terms == ((body, frozenset({b"a", b"b"})),) and phrase.term_positions == frozenset({body})
    assert sparse.query_needs(footer, names, SearchQuery("body:a-b")).term_positions == frozenset(
        {body}
    )  # two tokens: a phrase
    # terms not known (prefix, fuzzy): the field's whole sections; ranges and exists: fast field columns
    loose = sparse.query_needs(footer, names, SearchQuery('body:qua* OR title:"da la"* OR views:[1 TO 5] OR region:*'))
    assert loose.fields == frozenset({body, names.index("title")}) and not loose.terms
    assert loose.positions == frozenset({names.index("title")})
    assert loose.columns == frozenset({"__row", "views", "region"})
    assert [sparse.term_key("i64", v) for v in (-1, 0)] == [b"\x7f" + b"\xff" * 7, b"\x80" + bytes(7)]
    assert sparse.term_key("f64", -0.5) < sparse.term_key("f64", 0.0) < sparse.term_key("f64", 2.5)
    assert sparse.query_needs(footer, names[::-1], SearchQuery("body:x")) is None  # field ids would not line up
    assert sparse.query_needs(footer, names, SearchQuery("body:(")) is None  # does not parse: whole
    # term lookups (corpus statistics): the dictionaries of the scored leaves' fields, no positions
    stats = sparse.query_needs(footer, names, SearchQuery('body:"a b" OR id:5 OR title:ta*'), postings=False)
    assert stats == sparse.Needs(frozenset({body, ident}), frozenset(), postings=False)
    assert coalesce([(0, 10), (20, 30), (1000, 1010)], gap=15) == [(0, 30), (1000, 1010)]
    # bounded (row pieces): a 4-byte read does not take along the 10 bytes after its 10-byte gap
    assert coalesce([(0, 4), (14, 30), (30, 31)], gap=64, bounded=True) == [(0, 4), (14, 31)]
    assert coalesce([(0, 40), (50, 60)], gap=64, bounded=True) == [(0, 60)]
    assert sparse.subtract([(0, 100)], [(10, 20), (90, 120)]) == [(0, 10), (20, 90)]
    assert sparse.intersect([(0, 10), (20, 30)], [(5, 25)]) == [(5, 10), (20, 25)]


@pytest.mark.spark
@pytest.mark.cloud
def test_spark_reads_fetch_only_the_query_parts(spark, s3_table, tmp_path):
    """A Spark read with only a query (no data filter) fetches each split's index the way a
    Spark-free search does, and returns what a whole fetch returns; a pushed filter adds its
    column's parts (test_split_sparse_filters.py), not the whole index."""
    uri, options = s3_table
    whole, _ = _table(uri, options, tmp_path / "whole", lazy="false")
    cache = tmp_path / "spark-cache"
    opts = {**options, "spark.indextables.cache.disk.path": str(cache), "spark.indextables.cache.rows.lazy": "true"}
    query = "body:quasar OR body:nebula"
    df = spark.read.format("indextables").options(**opts).option("query", query).load(uri)
    got = sorted(r.id for r in df.select("id").collect())
    assert got == sorted(whole.search(query, columns=["id"]).column("id").to_pylist())
    dirs = [d for d in os.listdir(cache) if not d.startswith(".") and os.path.isdir(cache / d)]
    assert len(dirs) == 2 and all(os.path.exists(cache / d / sparse.STATE_FILE) for d in dirs)
    # a data filter needs more of the index: its column's parts are fetched, the answer exact
    n = df.filter("views < 5000").count()
    assert n == len(whole.search(query, columns=["id"], where="views < 5000"))
    assert all(os.path.exists(cache / d / sparse.STATE_FILE) for d in dirs)


def test_text_queries_leave_the_vector_files_to_vector_searches(s3_uri, s3_options, tmp_path):
    """A vector table on S3: a cold text query fetches none of the vector index files (on a vector
    table they are most of a split); a vector search then fetches them, and answers as a whole fetch."""
    rng = np.random.default_rng(4)
    data = _docs(2000, 0)
    x = rng.standard_normal((2000, 16)).astype(np.float32)
    data = data.append_column("emb", pa.array(list(x), pa.list_(pa.float32())))
    it.write_table(s3_uri, data, options={**s3_options, **TEXT, "spark.indextables.indexing.vector.emb": "16,l2"})
    part, storage = _table(s3_uri, s3_options, tmp_path / "part")
    (f,) = part.files()
    footer = read_footer(RangeSource(f.size, lambda s, e: storage.read_range(f.path, s, e)), f.path)
    vector_bytes = sum(b.length for b in footer.files if b.name.startswith("vectors."))
    assert vector_bytes > 0.3 * f.size
    storage.reset()
    assert part.search("body:quasar", columns=["id"]).num_rows > 0
    assert storage.bytes_read["read_range"] < f.size - vector_bytes
    (d,) = [os.path.join(tmp_path / "part", n) for n in os.listdir(tmp_path / "part") if not n.startswith(".")]
    missing = json.load(open(os.path.join(d, sparse.STATE_FILE)))["missing"]
    assert all(missing[b.name] == [[0, b.length]] for b in footer.files if b.name.startswith("vectors."))
    # the vector column's values (its vectors file is their one copy) are read by ranges, only
    # those of the rows returned: the vector files stay unfetched
    storage.reset()
    rows = part.search("body:quasar", columns=["id", "emb"])
    assert rows.column("emb").to_pylist() == [list(map(float, x[i])) for i in rows.column("id").to_pylist()]
    assert storage.bytes_read["read_range"] < vector_bytes
    missing = json.load(open(os.path.join(d, sparse.STATE_FILE)))["missing"]
    assert all(missing[b.name] == [[0, b.length]] for b in footer.files if b.name.startswith("vectors."))
    got = part.search(vector=x[7], limit=5, columns=["id"])
    whole, _ = _table(s3_uri, s3_options, tmp_path / "whole", lazy="false")
    assert got.equals(whole.search(vector=x[7], limit=5, columns=["id"]))
    assert got.column("id").to_pylist()[0] == 7


def test_term_dictionary_reader_matches_the_dictionaries(tmp_path):
    """format/termdict.py finds every term of every field of a split with the TermInfo tantivy
    wrote (checked against a full read of each FST dictionary), and no absent term."""
    from indextables_spark.core.split.format.termdict import is_fst_dictionary, lookup_terms
    from sstable_writer import read_fst_section

    uri = str(tmp_path / "t")
    it.write_table(uri, _docs(3000, 0), options=TEXT)
    (add,) = it.IndexTable(uri).files()
    path = os.path.join(uri, add.path)
    footer = read_footer(path, path)
    data = open(path, "rb").read()
    checked = 0
    for f in footer.files:
        if not f.name.endswith(".term"):
            continue
        for s, e in footer.raw[INDEX_SECTIONS]["files"][f.name]["sections"].values():
            section = data[f.offset + s : f.offset + e]
            if s == e:
                continue
            assert is_fst_dictionary(section)
            terms = read_fst_section(section)
            got = lookup_terms(section, [t[0] for t in terms] + [b"\xff\xfe absent"])
            assert len(got) == len(terms)
            for key, doc_freq, p0, p1, q0, q1 in terms:
                info = got[key]
                assert (info.doc_freq, info.postings, info.positions) == (doc_freq, (p0, p1), (q0, q1))
            checked += len(terms)
    assert checked > 3000


@pytest.mark.cloud
def test_term_queries_fetch_their_terms(s3_uri, s3_options, tmp_path, monkeypatch):
    """A cold query on a big split fetches its terms' postings, not its fields' sections: a rare
    term reads a small part of the split; a later query with other terms (AND/NOT, a phrase, a
    scored top 10, a count) on the same cache fetches what it lacks; with unfetched bytes filled
    with 0xFF every answer equals a whole fetch's."""
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    it.write_table(s3_uri, _docs(30_000, 0), options={**s3_options, **TEXT})
    whole, _ = _table(s3_uri, s3_options, tmp_path / "whole", lazy="false")
    part, storage = _table(s3_uri, s3_options, tmp_path / "part")
    (f,) = part.files()
    storage.reset()
    q = "body:quasar"
    assert _sorted(part.search(q, columns=["id"])).equals(_sorted(whole.search(q, columns=["id"])))
    first = storage.bytes_read["read_range"]
    assert first < 0.06 * f.size, (first, f.size)
    (d,) = [os.path.join(tmp_path / "part", n) for n in os.listdir(tmp_path / "part") if not n.startswith(".")]
    assert os.path.exists(os.path.join(d, sparse.STATE_FILE))
    assert sparse.satisfies(d, SearchQuery(q)) and not sparse.satisfies(d, SearchQuery("body:nebula"))
    for q2 in (
        "body:nebula AND NOT title:spark",
        'body:"data lake" OR body:zephyr',
        "views:[100 TO 500] AND body:quasar",
    ):
        storage.reset()
        assert _sorted(part.search(q2, columns=["id", "views"])).equals(
            _sorted(whole.search(q2, columns=["id", "views"]))
        )
        assert 0 < storage.bytes_read["read_range"] < 0.25 * f.size, q2
        a, b = whole.search(q2, limit=10), part.search(q2, limit=10)
        assert a.column("id").to_pylist() == b.column("id").to_pylist()
        assert np.allclose(a.column("_score").to_numpy(), b.column("_score").to_numpy())
        assert part.count(query=q2) == whole.count(query=q2)
    storage.reset()
    assert _sorted(part.search(q, columns=["id"])).equals(_sorted(whole.search(q, columns=["id"])))
    assert storage.bytes_read["read_range"] == 0  # warm: nothing fetched
    state = json.load(open(os.path.join(d, sparse.STATE_FILE)))
    assert any(state["missing"].values())  # other terms' postings, other columns, the doc store's blocks
