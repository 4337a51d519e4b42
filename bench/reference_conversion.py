"""What reading a split the reference implementation wrote costs, against reading one of ours, in one run.

    .venv/bin/python bench/reference_conversion.py [--rows 200000] [--runs 3] [--dir /tmp/indextables-ref-bench]

A reference split is re-indexed into our format when it enters the split cache (split/reference.py).
This bench builds the same generated rows (examples/datagen.py: id, 8-word title, 50-word body, ...)
two ways and prints, for the first (cold) read of one split and for warm queries after it:

- reference-like: a Tantivy index written by tantivy-py with every field stored, fast and indexed
  as the reference's mapping does (strings `raw`, body `default`), bundled exactly like a Quickwit
  split (file offsets table, hotcache framing, footer offsets), committed as a reference AddFile
  (docMappingJson in the reference's form). tantivy-py writes FST term dictionaries where the
  reference's Tantivy writes SSTables; the conversion never reads a term dictionary (documents come
  from the document store), so its cost is the same.
- ours: the same rows written by `it.write_table`.

Printed: cold first read (fetch + convert vs fetch + extract), its parts (documents read from the
document store = the floor of any reader of that split from Python, re-indexing), and the warm
query time of both tables (the same after conversion: both are our splits then).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import struct
import sys
import time

import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import indextables_spark as it  # noqa: E402
from bench_common import bench_arguments  # noqa: E402
from datagen import documents  # noqa: E402

COLUMNS = ["id", "title", "body", "views", "score", "region"]


def reference_bundle(rows: pa.Table, index_dir: str, out_path: str) -> tuple[int, str]:
    """A Quickwit-format split of `rows` (tantivy-py index, every field stored); returns
    (footerStartOffset, docMappingJson)."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("id", stored=True, indexed=True, fast=True)
    sb.add_text_field("title", stored=True, tokenizer_name="raw", fast=True)
    sb.add_text_field("body", stored=True, tokenizer_name="default", index_option="position")
    sb.add_integer_field("views", stored=True, indexed=True, fast=True)
    sb.add_float_field("score", stored=True, indexed=True, fast=True)
    sb.add_text_field("region", stored=True, tokenizer_name="raw", fast=True)
    schema = sb.build()
    os.makedirs(index_dir)
    index = tantivy.Index(schema, index_dir)
    w = index.writer(200_000_000, 1)
    for r in rows.to_pylist():
        w.add_document(tantivy.Document.from_dict(r, schema))
    w.commit()
    w.wait_merging_threads()
    names = sorted(n for n in os.listdir(index_dir) if not n.startswith(".tantivy") and not n.endswith(".lock"))
    offsets: dict[str, dict[str, int]] = {}
    with open(out_path, "wb") as out:
        pos = 0
        for n in names + ["split_fields"]:
            data = b"" if n == "split_fields" else open(os.path.join(index_dir, n), "rb").read()
            out.write(data)
            offsets[n] = {"start": pos, "end": pos + len(data)}
            pos += len(data)
        footer_start = pos
        table = json.dumps({"files": offsets}).encode()
        section = struct.pack("<II", 403881646, 1) + table
        out.write(section + struct.pack("<I", len(section)))
        # A hotcache with no cached slice (the reader opens local copies of the files, not via it).
        meta = b"\x00\x00"  # postcard: empty file_lengths map, empty slice_offsets
        hotcache = struct.pack("<III", 2557869106, 1, len(meta)) + meta
        out.write(hotcache + struct.pack("<I", len(hotcache)))
    mapping = [
        {"fast": True, "indexed": True, "name": "id", "stored": True, "type": "i64"},
        {"fast": True, "indexed": True, "name": "title", "stored": True, "tokenizer": "raw", "type": "text"},
        {"fast": False, "indexed": True, "name": "body", "stored": True, "tokenizer": "default", "type": "text"},
        {"fast": True, "indexed": True, "name": "views", "stored": True, "type": "i64"},
        {"fast": True, "indexed": True, "name": "score", "stored": True, "type": "f64"},
        {"fast": True, "indexed": True, "name": "region", "stored": True, "tokenizer": "raw", "type": "text"},
    ]
    return footer_start, json.dumps(mapping, separators=(",", ":"))


def reference_table(rows: pa.Table, path: str, work: str) -> None:
    """A table whose one split is the reference-like bundle (log written through our API)."""
    t = it.IndexTable.create(path, rows.schema)
    split = os.path.join(path, "part-00000000-0000-0000-0000-000000000000.split")
    footer_start, mapping = reference_bundle(rows, os.path.join(work, "ref-index"), split)
    size = os.path.getsize(split)
    add = it.AddFile(
        os.path.basename(split),
        {},
        size,
        int(time.time() * 1000),
        num_records=rows.num_rows,
        footer_start_offset=footer_start,
        footer_end_offset=size,
        doc_mapping_json=mapping,
    )
    with t.transaction() as tx:
        tx.add_files([add])


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = bench_arguments("/tmp/indextables-ref-bench", runs=3)
    ap.set_defaults(rows=200_000)
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    rows = documents(args.rows).select(COLUMNS)
    ref, ours = os.path.join(args.dir, "reference"), os.path.join(args.dir, "ours")
    reference_table(rows, ref, args.dir)
    write_s = timed(lambda: it.write_table(ours, rows, options={"indexing.typemap.body": "text"}))

    from indextables_spark.split import reference as conv

    cold_ref, cold_ours, docs_s, reindex_s = [], [], [], []
    for run in range(args.runs):
        cache = os.path.join(args.dir, f"cache{run}")
        opts = {"spark.indextables.cache.disk.path": cache}
        cold_ref.append(timed(lambda: it.IndexTable(ref, options=opts).count("body:kestrel")))
        cold_ours.append(timed(lambda: it.IndexTable(ours, options=opts).count("body:kestrel")))
        # the parts of a conversion: the document store alone, then the whole conversion
        idx = os.path.join(args.dir, f"parts{run}")
        from indextables_spark.split.quickwit import extract_bundle

        split = os.path.join(ref, "part-00000000-0000-0000-0000-000000000000.split")
        extract_bundle(split, idx, split)
        docs_s.append(timed(lambda: conv.read_documents(idx, split)))
        snap = it.IndexTable(ref).snapshot()
        dest = os.path.join(args.dir, f"conv{run}")
        reindex_s.append(
            timed(lambda: conv.convert(split, dest, split, snap.schema_json, [], size=os.path.getsize(split)))
        )
        shutil.rmtree(idx)
        shutil.rmtree(dest)

    warm = {}
    for name, path in (("reference", ref), ("ours", ours)):
        t = it.IndexTable(path, options={"spark.indextables.cache.disk.path": os.path.join(args.dir, "cache0")})
        t.count("body:kestrel")
        warm[name] = statistics.median(timed(lambda: t.search("body:kestrel", columns=["id"])) for _ in range(7))

    med = statistics.median
    n = args.rows
    print(f"rows: {n:,}; split sizes: reference-like {os.path.getsize(split) / 1e6:.1f} MB")
    print(f"cold first query (fetch into the cache, then count 'body:kestrel'), median of {args.runs}:")
    print(
        f"  reference split (convert): {med(cold_ref):.2f} s   ours (extract): {med(cold_ours):.3f} s   ratio {med(cold_ref) / med(cold_ours):.0f}x"
    )
    print(
        f"  conversion: {med(reindex_s):.2f} s = {med(reindex_s) / n * 1e6:.1f} µs/row, of which reading the document store {med(docs_s):.2f} s ({med(docs_s) / n * 1e6:.1f} µs/row, the floor of any Python reader of that split)"
    )
    print(
        f"  for scale: writing the same rows as our split (it.write_table) took {write_s:.2f} s ({write_s / n * 1e6:.1f} µs/row)"
    )
    print(
        f"warm 'body:kestrel' ids, median of 7: reference table {warm['reference'] * 1000:.1f} ms, ours {warm['ours'] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
