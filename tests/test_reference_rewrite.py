"""CONVERT without re-indexing (#37 criterion 3; core/split/reference/rewrite.py, segments.py): a
split the reference implementation wrote becomes one of ours that keeps the reference's Tantivy
index — its tokens, index-only fields and record options answer as before — with its rows in our
row store and our `__row` fast column, so deletes, appends and merges work afterwards.

Reference-like splits from tests/reference_bundles.py (SSTable dictionaries, the reference's
255-byte `default`, several segments); the 17 real tables are converted in test_reference_convert.py.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import tantivy

import indextables_spark as it
from indextables_spark.core.split.format.bundle import extract, read_footer
from indextables_spark.core.split.reference import segments
from indextables_spark.core.split.reference.quickwit import extract_bundle, read_bundle
from indextables_spark.core.split.reference.transcode import transcode_index
from indextables_spark.errors import QueryParseError, SplitFormatError
from reference_bundles import add_reference_split, bundle, write_index

P = "spark.indextables."
LONG = "a" + "b" * 59  # a 60-byte token: in the reference's `default` index (255), dropped by ours (40)
SCHEMA = pa.schema(
    [("id", pa.int64()), ("body", pa.string()), ("tag", pa.string()), ("notes", pa.string()), ("secret", pa.string())]
)
FIELDS = [
    {"name": "id", "type": "i64"},
    {"name": "body", "type": "text", "tokenizer": "default"},
    {"name": "tag", "type": "text", "tokenizer": "raw"},
    {"name": "notes", "type": "text", "tokenizer": "default", "record": "basic"},
    {"name": "secret", "type": "text", "tokenizer": "raw", "stored": False},
]


def _docs(n: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    words = ["quick", "brown", "fox", "lazy", "dog", "jumps", LONG]
    return [
        {
            "id": i,
            "body": " ".join(rng.choice(words) for _ in range(6)),
            "tag": "x" * 300 if i % 50 == 0 else f"tag{i % 7}",
            "notes": f"note {i % 3}",
            "secret": f"s{i % 5}",
        }
        for i in range(n)
    ]


def _table(tmp_path: Path, n: int = 600, segments_: int = 3) -> it.IndexTable:
    path = str(tmp_path / "t")
    it.IndexTable.create(path, SCHEMA)
    t = it.IndexTable(path, options={P + "cache.disk.path": str(tmp_path / "cache")})
    add_reference_split(t, FIELDS, _docs(n), str(tmp_path), "part-ref.split", segments=segments_)
    return t


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


QUERIES = [f"body:{LONG}", "body:fox AND body:dog", 'body:"quick brown"', "secret:s3", "notes:note", "tag:tag3"]
FILTERS = ["id > 550", "secret = 's1'", "secret IN ('s2', 's4')", f"tag = '{'x' * 300}'", "tag IS NULL", "tag = 'tag5'"]


def _answers(t: it.IndexTable) -> dict[str, Any]:
    out: dict[str, Any] = {q: _ids(t.search(q, limit=10_000)) for q in QUERIES}
    out |= {f: _ids(t.to_arrow(where=f)) for f in FILTERS}
    out["top"] = t.search(f"body:{LONG} OR body:fox", limit=10).column("id").to_pylist()
    out["count"] = t.count("body:lazy")
    out["rows"] = sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"])
    return out


def test_convert_keeps_the_reference_index_and_its_answers(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before = _answers(t)
    assert before[f"body:{LONG}"] and before["secret:s3"] and before["rows"][0]["secret"] is None
    (src,) = t.snapshot().files
    res = t.maintenance.convert()
    assert res["status"] == "SUCCESS" and res["recordsConverted"] == 600
    assert _answers(t) == before
    with pytest.raises(QueryParseError, match="notes"):  # no positions: as the reference indexed it
        t.search('notes:"note 1"')
    # the index is the reference's, byte for byte, but for what CONVERT rewrites
    (add,) = t.snapshot().files
    ours = tmp_path / "ours"
    extract(os.path.join(t.storage.root, add.path), str(ours))  # type: ignore[attr-defined]
    theirs = tmp_path / "theirs"
    extract_bundle(os.path.join(t.storage.root, src.path), str(theirs), src.path)  # type: ignore[attr-defined]
    transcode_index(str(theirs), None, src.path)
    index_files = sorted(n for n in os.listdir(theirs) if n != ".managed.json")
    # (and the row store's layout, format/row_layout.py)
    assert sorted(n for n in os.listdir(ours) if n not in ("rows.arrow", "footer.json", "rows.layout")) == index_files
    for name in index_files:
        same = (ours / name).read_bytes() == (theirs / name).read_bytes()
        assert same == (name.rsplit(".", 1)[-1] not in ("fast", "store", "json")), name
    footer = read_footer(os.path.join(t.storage.root, add.path), add.path)  # type: ignore[attr-defined]
    assert footer.raw["convertedFrom"]["writer"] == "IndexTables4Spark"
    assert footer.raw["referenceAnalyzers"] == {"default": "default_limit_255"}
    # index-only: the row store leaves the column out, the table records it for later appends
    assert footer.num_rows == 600 and "secret" not in pa.ipc.open_file(str(ours / "rows.arrow")).schema.names
    conf = t.snapshot().metadata_action.configuration
    assert conf[P + "indexing.indexonlyfields"] == "secret"


def test_deletes_appends_and_merges_after_convert(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.maintenance.convert()
    v = t.delete(where="id = 2 OR id = 401").version
    assert v == t.version() and t.count() == 598
    assert 2 not in _ids(t.to_arrow(where="id < 5")) and _ids(t.search("secret:s1", limit=10_000))[:2] == [1, 6]
    assert t.delete(query=f"body:{LONG}").version > v  # a full-text delete on the reference's tokens
    left = t.count()
    assert t.count(f"body:{LONG}") == 0 and left > 0
    new = pa.table(
        {
            "id": [1000, 1001],
            "body": ["new fox", f"new {LONG}"],
            "tag": ["n", "n"],
            "notes": ["x", "y"],
            "secret": ["s1", "zz"],
        },
        schema=SCHEMA,
    )
    it.write_table(t.storage.uri, new)
    assert t.count() == left + 2
    assert _ids(t.to_arrow(where="secret = 'zz'")) == [1001]  # indexed, not stored: as the converted split
    assert t.to_arrow(where="id = 1001").column("secret").to_pylist() == [None]
    assert 1001 in _ids(t.search(f"body:{LONG}"))


def test_a_segment_with_deleted_documents(tmp_path: Path) -> None:
    """A reference segment that lists deleted documents (its `.del` file): the row store holds the
    live ones, `__row` numbers them (bit-packed: not consecutive)."""
    path = str(tmp_path / "t")
    it.IndexTable.create(path, SCHEMA)
    t = it.IndexTable(path, options={P + "cache.disk.path": str(tmp_path / "cache")})
    index_dir = str(tmp_path / "idx")
    docs = _docs(300)
    write_index(index_dir, FIELDS, docs, segments=2)
    index = tantivy.Index.open(index_dir)
    w = index.writer(15_000_000, 1)
    for i in (0, 7, 150, 299):
        w.delete_documents_by_term("id", i)
    w.commit()
    w.wait_merging_threads()
    meta = json.loads(Path(index_dir, "meta.json").read_text())
    assert sum((s.get("deletes") or {}).get("num_deleted_docs", 0) for s in meta["segments"]) == 4
    local = str(tmp_path / "del.split")
    footer_start = bundle(index_dir, local)
    t.storage.put("del.split", Path(local).read_bytes())
    mapping = [{"fast": True, "indexed": True, "stored": f.get("stored", True), **f} for f in FIELDS]
    for m in mapping:
        m.pop("record", None)
    add = it.AddFile(
        "del.split",
        {},
        os.path.getsize(local),
        0,
        num_records=296,
        footer_start_offset=footer_start,
        footer_end_offset=os.path.getsize(local),
        doc_mapping_json=json.dumps(sorted(mapping, key=lambda d: d["name"]), separators=(",", ":")),
    )
    with t.transaction() as tx:
        tx.add_files([add])
    before = _answers(t)
    assert len(before["rows"]) == 296 and 7 not in _ids(t.to_arrow(where="id < 10"))
    t.maintenance.convert()
    assert _answers(t) == before
    t.delete(where="id = 8")
    assert _ids(t.to_arrow(where="id < 10")) == [1, 2, 3, 4, 5, 6, 9]


@pytest.mark.parametrize("consecutive", [True, False])
def test_the_row_id_column_is_what_tantivy_reads(tmp_path: Path, consecutive: bool) -> None:
    """segments.with_row_ids: the column tantivy-py reads back (values, ordering, ranges), laid out
    among the segment's other columns (linear codec for consecutive ids, bit-packed otherwise)."""
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("a", stored=False, indexed=True, fast=True)
    sb.add_text_field("zz", stored=False, fast=True, tokenizer_name="raw")
    index = tantivy.Index(sb.build(), str(tmp_path))
    w = index.writer(15_000_000, 1)
    n = 5000
    for i in range(n):
        w.add_document(tantivy.Document(a=i, zz=f"v{i % 13}"))
    w.commit()
    w.wait_merging_threads()
    meta = json.loads((tmp_path / "meta.json").read_text())
    (seg,) = meta["segments"]
    fast = tmp_path / (seg["segment_id"].replace("-", "") + ".fast")
    ids = np.arange(100, 100 + n, dtype=np.uint64)
    if not consecutive:
        ids = np.random.default_rng(3).permutation(n).astype(np.uint64) * np.uint64(1_000_003)
    fast.write_bytes(segments.with_row_ids(fast.read_bytes(), ids, "test"))
    (tmp_path / "meta.json").write_text(json.dumps(segments.converted_meta(meta)))
    reopened = tantivy.Index.open(str(tmp_path))
    searcher = reopened.searcher()
    hits = [a for _, a in searcher.search(tantivy.Query.all_query(), n).hits]
    got = searcher.fast_field_values("__row", hits)
    a = searcher.fast_field_values("a", hits)
    assert [int(ids[x]) for x in a] == list(got)  # doc id = value of `a` (one segment, in order)
    top = searcher.search(tantivy.Query.all_query(), 3, order_by_field="__row", order=tantivy.Order.Asc)
    assert [k for k, _ in top.hits] == sorted(int(x) for x in ids)[:3]
    lo, hi = int(np.sort(ids)[10]), int(np.sort(ids)[20])
    q = tantivy.Query.range_query(reopened.schema, "__row", tantivy.FieldType.Unsigned, lo, hi)
    assert searcher.search(q, 100).count == 11
    assert searcher.search(tantivy.Query.term_query(reopened.schema, "zz", "v3"), 1).count == len(range(3, n, 13))


def test_a_damaged_reference_split_fails_convert_naming_it(tmp_path: Path) -> None:
    t = _table(tmp_path, n=50, segments_=1)
    (src,) = t.snapshot().files
    path = os.path.join(t.storage.root, src.path)  # type: ignore[attr-defined]
    with open(path, "rb") as f:
        (idx,) = [b for b in read_bundle(f, os.path.getsize(path), path).files if b.name.endswith(".idx")]
    data = bytearray(Path(path).read_bytes())
    data[(idx.start + idx.end) // 2] ^= 0xFF  # a postings byte
    Path(path).write_bytes(bytes(data))
    version = t.version()
    before = set(os.listdir(t.storage.root))  # type: ignore[attr-defined]
    with pytest.raises(SplitFormatError, match="part-ref.split"):
        t.maintenance.convert()
    assert t.version() == version and set(os.listdir(t.storage.root)) == before  # type: ignore[attr-defined]
    assert not os.path.exists(os.path.join(t.storage.root, "splits"))  # type: ignore[attr-defined]
