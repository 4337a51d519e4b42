"""What reading a split the reference implementation wrote costs, against reading one of ours, in one run.

    .venv/bin/python bench/reference_conversion.py [--rows 200000] [--runs 3] [--dir /tmp/indextables-ref-bench]

A reference split is re-indexed into our format when it enters the split cache (core/split/reference/reference.py).
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

import os
import shutil
import statistics
import sys
import time

import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import indextables_spark as it  # noqa: E402
from bench_common import bench_arguments  # noqa: E402
from datagen import documents  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference_bundles import add_reference_split  # noqa: E402

COLUMNS = ["id", "title", "body", "views", "score", "region"]
FIELDS = [  # the reference's mapping of these columns (split-format.md §5)
    {"name": "id", "type": "i64"},
    {"name": "title", "type": "text", "tokenizer": "raw"},
    {"name": "body", "type": "text", "tokenizer": "default"},
    {"name": "views", "type": "i64"},
    {"name": "score", "type": "f64"},
    {"name": "region", "type": "text", "tokenizer": "raw"},
]
SPLIT = "part-00000000-0000-0000-0000-000000000000.split"


def reference_table(rows: pa.Table, path: str, work: str) -> None:
    """A table whose one split is the reference-like bundle (tests/reference_bundles.py)."""
    t = it.IndexTable.create(path, rows.schema)
    add_reference_split(t, FIELDS, rows.to_pylist(), work, SPLIT)


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

    from indextables_spark.core.split.reference import reference as conv

    cold_ref, cold_ours, docs_s, reindex_s = [], [], [], []
    for run in range(args.runs):
        cache = os.path.join(args.dir, f"cache{run}")
        opts = {"spark.indextables.cache.disk.path": cache}
        cold_ref.append(timed(lambda: it.IndexTable(ref, options=opts).count("body:kestrel")))
        cold_ours.append(timed(lambda: it.IndexTable(ours, options=opts).count("body:kestrel")))
        # the parts of a conversion: the document store alone, then the whole conversion
        idx = os.path.join(args.dir, f"parts{run}")
        from indextables_spark.core.split.reference.quickwit import extract_bundle

        split = os.path.join(ref, SPLIT)
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
