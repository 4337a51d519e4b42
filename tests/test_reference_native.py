"""Splits the reference implementation wrote, opened in place (#37): what changed against the
re-indexing the package did before (core/split/reference/native.py, docstore.py).

- Nothing is re-indexed: the cache holds the bundle's own files (the document store byte for byte)
  and the term dictionaries a read needs, transcoded from SSTable to FST, the others left as the
  reference wrote them until a read needs them.
- Queries run on the reference's index: its tokens (40-255-byte tokens of a `default` field, which
  our tokenizers dropped), its record options (a phrase on a field without positions fails naming
  the field), its index-only fields (test_reference_types.py), corpus-wide BM25 statistics.

Reference-like splits from tests/reference_bundles.py (tantivy-py, FST dictionaries, the
reference's 255-byte `default`); the SSTable ones are the 17 real tables (tests/data/reference_v0.5.4).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.split.reference import native
from indextables_spark.errors import QueryParseError
from indextables_spark.expr.model import Filter, StringContains, StringEndsWith, StringStartsWith
from reference_bundles import add_reference_split

ROOT = Path(__file__).parent / "data" / "reference_v0.5.4"
LONG = "a" + "b" * 59  # one 60-byte token: our tokenizers' old 40-byte limit dropped it
HUGE = "h" * 300  # past the reference's 255 bytes: not in its `default` index either


def _cache_dirs(cache: Path) -> list[Path]:
    return [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")]


def _fixture(tmp_path: Path, name: str) -> tuple[it.IndexTable, Path]:
    cache = tmp_path / "cache"
    t = it.IndexTable(str(ROOT / name), options={"spark.indextables.cache.disk.path": str(cache)})
    return t, cache


def _sstable_names(local_dir: Path) -> set[str]:
    info = native.load_info(str(local_dir))
    fields = native.meta_fields(native.load_meta(str(local_dir), info.where))
    left = native.sstable_fields(str(local_dir), len(fields), info.where)
    return {f.name for f in fields if f.id in left}


def test_the_cache_holds_the_reference_files_not_a_reindexed_split(tmp_path: Path) -> None:
    t, cache = _fixture(tmp_path, "06_schema_dedup")
    assert t.count('title:"Title 3-2"') == 1
    (local,) = _cache_dirs(cache)[:1]
    names = set(os.listdir(local))
    assert native.REFERENCE_FILE in names and "rows.arrow" not in names and "footer.json" not in names
    add = next(f for f in t.snapshot().files if (Path(t.path) / f.path).exists())
    data = (Path(t.path) / add.path).read_bytes()
    footer = data[add.footer_start_offset + 8 :].split(b"}}}", 1)[0] + b"}}}"
    spans = json.loads(footer)["files"]
    for name, span in spans.items():
        if name.endswith((".store", ".idx", ".pos", ".fast", ".fieldnorm")) and (local / name).exists():
            assert (local / name).read_bytes() == data[span["start"] : span["end"]], name


def test_term_dictionaries_are_transcoded_when_a_read_needs_them(tmp_path: Path) -> None:
    """A query on `title` transcodes that field's dictionary only; a scan none; a filter on `id`
    that field's; a read that promises nothing (PREWARM, aggregations) every one, and the index
    open in this process sees each change."""
    t, cache = _fixture(tmp_path, "06_schema_dedup")
    got = t.search('title:"Title 3-2"', columns=["id", "rating"])
    assert got.to_pylist()[0]["id"] == 302 and got.num_rows == 1
    left = [_sstable_names(d) for d in _cache_dirs(cache)]
    assert all(names == {"id", "body", "rating"} for names in left)  # not read yet: still the reference's
    assert t.to_arrow().num_rows == t.count()  # a scan asks no dictionary
    assert all(_sstable_names(d) == {"id", "body", "rating"} for d in _cache_dirs(cache))
    assert t.to_arrow(where="id >= 0").num_rows == t.count()
    assert all(_sstable_names(d) == {"body", "rating"} for d in _cache_dirs(cache))
    assert t.to_arrow(where="body = 'Body for 5-1'").column("id").to_pylist() == [501]
    assert t.search("id:302", columns=["id"]).column("id").to_pylist() == [302]
    for add in t.snapshot().files:  # what PREWARM does
        get_cache(t.options).local_dir(t.log.storage, add)
    assert all(_sstable_names(d) == set() for d in _cache_dirs(cache))
    assert t.search("rating:3.2", columns=["id"]).column("id").to_pylist() == [302]


def _tokens_table(tmp_path: Path, default_limit: int = 255) -> it.IndexTable:
    schema = pa.schema([("id", pa.int64()), ("body", pa.string()), ("tag", pa.string()), ("notes", pa.string())])
    it.IndexTable.create(str(tmp_path / "t"), schema)
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "c")})
    fields = [
        {"name": "id", "type": "i64"},
        {"name": "body", "type": "text", "tokenizer": "default"},
        {"name": "tag", "type": "text", "tokenizer": "raw"},
        {"name": "notes", "type": "text", "tokenizer": "default", "record": "basic"},
    ]
    docs = [
        {"id": 1, "body": "quick brown fox", "tag": "short", "notes": "quick fox"},
        {"id": 2, "body": f"see {LONG} here", "tag": "x" * 300, "notes": "brown dog"},
        {"id": 3, "body": f"huge {HUGE}", "tag": None, "notes": "fox quick"},
    ]
    add_reference_split(t, fields, docs, str(tmp_path), "part-tokens.split", default_limit=default_limit)
    return t


def _reader(t: it.IndexTable) -> SplitReader:
    (add,) = t.snapshot().files
    return SplitReader(get_cache(t.options).local_dir(t.log.storage, add))


def _read(split: SplitReader, f: Filter) -> pa.Table:
    return pa.Table.from_batches(list(split.read([f], columns=["id"])), schema=pa.schema([("id", pa.int64())]))


def test_the_reference_tokens_are_found(tmp_path: Path) -> None:
    """40-255-byte tokens of a `default` field are in the reference's index and now found (the
    re-indexing used our 40-byte default and lost them); 255 bytes and more the reference dropped."""
    t = _tokens_table(tmp_path)
    ids = lambda tb: sorted(tb.column("id").to_pylist())  # noqa: E731
    assert ids(t.search(f"body:{LONG}")) == [2]
    assert ids(t.search(f"body:{HUGE}")) == []
    split = _reader(t)
    assert ids(_read(split, StringContains("body", LONG))) == [2]  # narrowed by the token, rows check
    assert ids(_read(split, StringContains("body", HUGE))) == [3]  # no token to narrow by: rows decide


def test_filters_do_not_require_tokens_a_reference_writer_may_have_dropped(tmp_path: Path) -> None:
    """The reference's Arrow write path indexes `default` fields with tantivy's own tokenizer, which
    drops tokens of 40 bytes or more, while its searcher keeps them up to 255 (and its older writer
    indexed them): a split does not say which. Filters on such a column are decided on its rows
    (never narrowed by its terms); a query finds what the split's writer kept, as the reference's
    searcher does."""
    t = _tokens_table(tmp_path, default_limit=40)
    ids = lambda tb: sorted(tb.column("id").to_pylist())  # noqa: E731
    assert ids(t.to_arrow(where=f"body = 'see {LONG} here'")) == [2]
    assert ids(_read(_reader(t), StringContains("body", f" {LONG} "))) == [2]
    assert ids(t.search(f"body:{LONG}")) == []  # the searcher looks the token up: this writer dropped it
    assert ids(t.to_arrow(where="body = 'quick brown fox'")) == [1]


def test_raw_values_of_any_length_are_found(tmp_path: Path) -> None:
    """The reference indexes `raw` values with tantivy's RawTokenizer, without a length filter
    (tantivy drops only terms over 65,530 bytes): =, IN, IS NULL and patterns on long values give
    the rows' answer."""
    t = _tokens_table(tmp_path)
    ids = lambda tb: sorted(tb.column("id").to_pylist())  # noqa: E731
    assert ids(t.to_arrow(where=f"tag = '{'x' * 300}'")) == [2]
    assert ids(t.to_arrow(where="tag IS NOT NULL")) == [1, 2]
    assert ids(t.to_arrow(where="tag IS NULL")) == [3]
    assert ids(_read(_reader(t), StringStartsWith("tag", "xxx"))) == [2]
    assert ids(_read(_reader(t), StringEndsWith("tag", "ort"))) == [1]
    assert ids(t.to_arrow(where="tag IN ('short', 'other')")) == [1]
    assert ids(t.search('tag:"short"')) == [1]


def test_a_phrase_needs_the_positions_the_reference_indexed(tmp_path: Path) -> None:
    t = _tokens_table(tmp_path)
    assert sorted(t.search('body:"brown fox"').column("id").to_pylist()) == [1]
    assert sorted(t.search("notes:quick").column("id").to_pylist()) == [1, 3]  # terms: fine
    with pytest.raises(QueryParseError, match="notes"):
        t.search('notes:"quick fox"')


def _ranked_table(tmp_path: Path, name: str, parts: list[list[dict]]) -> it.IndexTable:
    path = tmp_path / name
    it.IndexTable.create(str(path), pa.schema([("id", pa.int64()), ("body", pa.string())]))
    t = it.IndexTable(str(path), options={"spark.indextables.cache.disk.path": str(tmp_path / f"cache-{name}")})
    fields = [{"name": "id", "type": "i64"}, {"name": "body", "type": "text", "tokenizer": "default"}]
    for i, docs in enumerate(parts):
        add_reference_split(t, fields, docs, str(tmp_path / name), f"part-{i:05d}.split")
    return t


def test_corpus_statistics_rank_reference_splits_as_one(tmp_path: Path) -> None:
    """Two reference splits with skewed term frequencies score as the same rows in one split do
    (corpus-wide BM25 statistics, read/corpus_stats.py, from the splits' own dictionaries)."""
    rng = random.Random(7)
    docs = []
    for i in range(600):
        words = rng.choices([f"w{j}" for j in range(50)], k=rng.randint(8, 20))
        for j, w in enumerate(["lake", "river"]):
            if rng.random() < (0.4 if j == i % 2 else 0.02):
                words[rng.randrange(len(words))] = w
        docs.append({"id": i, "body": " ".join(words)})
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = _ranked_table(tmp_path, "one", [docs])
    two = _ranked_table(tmp_path, "two", [[d for d in docs if d["id"] % 2 == p] for p in range(2)])
    q = "body:lake OR body:river"
    truth = {r["id"]: r["_score"] for r in one.search(q, limit=600).to_pylist()}
    got = {r["id"]: r["_score"] for r in two.search(q, limit=600).to_pylist()}
    assert set(got) == set(truth)
    worst = max(abs(got[i] - truth[i]) / truth[i] for i in truth)
    assert worst < 0.02, worst  # only the average field lengths differ
    split_only = it.IndexTable(two.path, options={**two.options, "spark.indextables.search.statistics": "split"})
    own = {r["id"]: r["_score"] for r in split_only.search(q, limit=600).to_pylist()}
    assert max(abs(own[i] - truth[i]) / truth[i] for i in truth) > 0.05  # the skew shows without them


def test_a_damaged_term_dictionary_fails_naming_the_split(tmp_path: Path) -> None:
    """The `.term` file's CRC-32 is checked when the bundle is extracted: a flipped byte in a
    dictionary fails before anything is transcoded or read."""
    dst = tmp_path / "t"
    shutil.copytree(ROOT / "01_single_write", dst)
    t = it.IndexTable(str(dst), options={"spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    add = t.snapshot().files[0]
    p = dst / add.path
    data = bytearray(p.read_bytes())
    spans = json.loads(bytes(data[add.footer_start_offset + 8 :]).split(b"}}}", 1)[0] + b"}}}")["files"]
    term = next(span for name, span in spans.items() if name.endswith(".term"))
    data[term["start"] + 3] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(it.IndexTablesError, match=add.path.replace(".", r"\.")):
        t.search("text:doc1")


def test_a_scan_keeps_the_decoded_rows(tmp_path: Path) -> None:
    """The first read of every row (or of half of them) decodes the document store once
    (docstore.py): later reads take the rows from docs.arrow in the split's cache directory, with
    the same answers; a read of a few rows reads only theirs."""
    from indextables_spark.core.split.reference.docstore import DECODED

    schema = pa.schema([("id", pa.int64()), ("tag", pa.string()), ("n", pa.float64())])
    it.IndexTable.create(str(tmp_path / "t"), schema)
    cache = tmp_path / "c"
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(cache)})
    fields = [{"name": "id", "type": "i64"}, {"name": "tag", "type": "text"}, {"name": "n", "type": "f64"}]
    docs = [{"id": i, "tag": f"t{i % 4}", "n": i / 2} for i in range(20)]
    add_reference_split(t, fields, docs, str(tmp_path), "part-rows.split")
    hit = t.search('tag:"t1"')
    assert sorted(hit.column("id").to_pylist()) == [1, 5, 9, 13, 17]
    (local,) = _cache_dirs(cache)
    assert not (local / DECODED).exists()  # a quarter of the rows: read from the store, nothing kept
    first = t.to_arrow()
    assert (local / DECODED).exists()
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(first.to_pylist(), key=key) == docs
    assert sorted(t.to_arrow().to_pylist(), key=key) == docs
    assert t.search('tag:"t1"').to_pylist() == hit.to_pylist()
    assert sorted(t.to_arrow(where="n > 7.0").column("id").to_pylist()) == list(range(15, 20))


@pytest.mark.spark
def test_spark_reads_the_reference_index(spark, tmp_path: Path) -> None:
    """Through Spark (pushed filters, the query option, SQL on a view): the reference's long tokens,
    its index-only column answered by its index, LIKE decided on the rows, as Spark over the same rows."""
    t = _tokens_table(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("secret", pa.string())])
    it.IndexTable.create(str(tmp_path / "io"), schema)
    io = it.IndexTable(str(tmp_path / "io"), options={"spark.indextables.cache.disk.path": str(tmp_path / "c2")})
    fields = [{"name": "id", "type": "i64"}, {"name": "secret", "type": "text", "tokenizer": "raw", "stored": False}]
    add_reference_split(io, fields, [{"id": 1, "secret": "a"}, {"id": 2, "secret": "b"}], str(tmp_path), "io.split")

    ids = lambda df: sorted(r["id"] for r in df.select("id").collect())  # noqa: E731
    q = spark.read.format("indextables").option("query", f"body:{LONG}").load(t.path)
    assert ids(q) == [2]
    df = spark.read.format("indextables").load(t.path)
    assert ids(df.filter(f"body LIKE '%{HUGE}%'")) == [3]
    assert ids(df.filter("tag LIKE 'xx%' OR id = 1")) == [1, 2]
    assert ids(df.filter("tag IS NULL")) == [3]
    sec = spark.read.format("indextables").load(io.path)
    assert ids(sec.filter("secret = 'b'")) == [2]
    assert [r["secret"] for r in sec.collect()] == [None, None]
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW ref_io USING indextables OPTIONS (path '{io.path}')")
    assert [r["id"] for r in spark.sql("SELECT id FROM ref_io WHERE secret IN ('a', 'z')").collect()] == [1]
    assert spark.sql("SELECT id FROM ref_io WHERE _indexall = 'secret:b'").collect()[0]["id"] == 2


def test_a_reference_split_of_several_segments(tmp_path: Path) -> None:
    """Row ids run across segments in meta.json's order (the searcher's segment ordinals): rows,
    queries, top-n and filters on such a split, before and after its store is decoded."""
    schema = pa.schema([("id", pa.int64()), ("tag", pa.string()), ("body", pa.string())])
    it.IndexTable.create(str(tmp_path / "t"), schema)
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "c")})
    fields = [
        {"name": "id", "type": "i64"},
        {"name": "tag", "type": "text"},
        {"name": "body", "type": "text", "tokenizer": "default"},
    ]
    docs = [{"id": i, "tag": f"t{i % 5}", "body": f"word{i % 7} common"} for i in range(300)]
    add_reference_split(t, fields, docs, str(tmp_path), "part-segs.split", segments=3)
    key = lambda r: r["id"]  # noqa: E731
    want = lambda p: sorted((d for d in docs if p(d)), key=key)  # noqa: E731
    for _ in range(2):  # from the document store, then from docs.arrow
        assert sorted(t.search('tag:"t3"').to_pylist(), key=key) == want(lambda d: d["tag"] == "t3")
        assert sorted(t.to_arrow(where="id >= 250").to_pylist(), key=key) == want(lambda d: d["id"] >= 250)
        top = t.search("body:word2", limit=5)
        assert top.num_rows == 5 and all(r["body"] == "word2 common" for r in top.to_pylist())
        assert sorted(t.to_arrow().to_pylist(), key=key) == docs
    (local,) = _cache_dirs(tmp_path / "c")
    meta = json.loads((local / "meta.json").read_text())
    assert len(meta["segments"]) == 3


def test_the_decoded_rows_count_in_the_cache_size(tmp_path: Path) -> None:
    """A scan keeps the reference split's decoded rows next to its index (docs.arrow): the cache
    counts them in its size (and evicts by it) from then on."""
    t = _tokens_table(tmp_path)
    t.count("body:fox")  # into the cache: the index only
    cache = get_cache(t.options)
    before = cache.usage_bytes()
    assert t.to_arrow().num_rows == 3  # decodes the document store
    (local,) = _cache_dirs(tmp_path / "c")
    decoded = os.path.getsize(local / native.DECODED_ROWS)
    assert cache.usage_bytes() == before + decoded


def test_a_column_the_table_gains_later_types_a_new_reference_split_in_the_same_process(tmp_path: Path) -> None:
    """A reference split's rows are typed by the table's schema, read once per process: a split
    written after the table gained a column (the reference implementation's schema evolution)
    holds a field that schema lacks, and it is read again, so the new column's values come back
    (they read as NULL before)."""
    import dataclasses

    from indextables_spark.core.log.commit.transaction import Transaction

    it.IndexTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("a", pa.string())]))
    t = it.IndexTable(str(tmp_path / "t"), options={"spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    before = [{"name": "id", "type": "i64"}, {"name": "a", "type": "text", "tokenizer": "raw"}]
    add_reference_split(t, before, [{"id": 1, "a": "x"}, {"id": 2, "a": "y"}], str(tmp_path), "p1.split")
    assert t.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "a": "x"}, {"id": 2, "a": "y"}]
    metadata = t.snapshot().metadata_action
    schema = json.loads(metadata.schema_string)
    schema["fields"].append({"name": "b", "type": "string", "nullable": True, "metadata": {}})
    tx = Transaction(t.log)
    tx.set_metadata(dataclasses.replace(metadata, schema_string=json.dumps(schema)))
    tx.commit()
    after = before + [{"name": "b", "type": "text", "tokenizer": "raw"}]
    add_reference_split(t, after, [{"id": 3, "a": "z", "b": "new"}], str(tmp_path), "p2.split")
    assert t.to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "a": "x", "b": None},
        {"id": 2, "a": "y", "b": None},
        {"id": 3, "a": "z", "b": "new"},
    ]
    assert t.to_arrow(where="b = 'new'", columns=["id"]).to_pylist() == [{"id": 3}]
