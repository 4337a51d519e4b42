"""What reading a split the reference implementation wrote costs, against reading one of ours, in one run.

    .venv/bin/python bench/reference_conversion.py [--rows 200000] [--runs 3] [--dir /tmp/indextables-ref-bench]

A reference split is opened in place (core/split/reference/native.py): its bundle's files are
extracted as they are, the term dictionaries a read needs are transcoded from SSTable to FST
(transcode.py), rows come from its document store (docstore.py). This bench builds the same
generated rows (examples/datagen.py: id, 8-word title, 50-word body, ...) two ways:

- reference-like: a Tantivy index written by tantivy-py with every field stored, fast and indexed
  as the reference's mapping does (strings `raw`, body `default` with the reference's 255-byte
  limit), its term dictionaries rewritten as the reference's SSTables (tests/sstable_writer.py),
  bundled exactly like a Quickwit split, committed as a reference AddFile;
- ours: the same rows written by `it.write_table`.

- converted: a copy of the reference-like table after CONVERT (core/split/reference/rewrite.py:
  the reference's index kept, its dictionaries transcoded, its rows moved into our row store).

Printed, each cold figure the median of `runs` fresh split caches: the first text query, the first
id lookup (a query on `id`: only its dictionary is transcoded) and the first filter on `id` (a
filter transcodes every dictionary), the same first query with every dictionary transcoded at entry,
what transcoding each field costs, what CONVERT costs and the sizes, and warm queries on the three
tables.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from typing import Any, Callable

import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import indextables_spark as it  # noqa: E402
from bench_common import bench_arguments  # noqa: E402
from datagen import documents  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference_bundles import add_reference_split  # noqa: E402

COLUMNS = ["id", "title", "body", "views", "score", "region"]
FIELDS = [  # the reference's mapping of these columns (its conventions: tests/reference_bundles.py)
    {"name": "id", "type": "i64"},
    {"name": "title", "type": "text", "tokenizer": "raw"},
    {"name": "body", "type": "text", "tokenizer": "default"},
    {"name": "views", "type": "i64"},
    {"name": "score", "type": "f64"},
    {"name": "region", "type": "text", "tokenizer": "raw"},
]
SPLIT = "part-00000000-0000-0000-0000-000000000000.split"
TEXT = "body:kestrel"  # the first query (no match: its cost is opening the split)
PHRASE = 'body:"data lake spark"'  # ~1 row in 4,500: rows read from the document store


def reference_table(rows: pa.Table, path: str, work: str) -> None:
    """A table whose one split is the reference-like bundle (tests/reference_bundles.py)."""
    t = it.IndexTable.create(path, rows.schema)
    add_reference_split(t, FIELDS, rows.to_pylist(), work, SPLIT)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def transcode_each_field(split: str, work: str) -> dict[str, float]:
    """Seconds to transcode each field's dictionary of the split, alone."""
    from indextables_spark.core.split.reference import native
    from indextables_spark.core.split.reference.quickwit import extract_bundle
    from indextables_spark.core.split.reference.transcode import transcode_term_file

    out = {}
    idx = os.path.join(work, "fields")
    extract_bundle(split, idx, split)
    fields = native.meta_fields(native.load_meta(idx, split))
    names = {f.id: f.name for f in fields}
    term = next(n for n in os.listdir(idx) if n.endswith(".term"))
    with open(os.path.join(idx, term), "rb") as f:
        data = f.read()
    for fid, name in names.items():
        out[name] = timed(lambda: transcode_term_file(data, [fid], names, split))
    out["(all at once)"] = timed(lambda: transcode_term_file(data, None, names, split))
    shutil.rmtree(idx)
    return out


def main() -> None:
    ap = bench_arguments("/tmp/indextables-ref-bench", runs=3)
    ap.set_defaults(rows=200_000)
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    rows = documents(args.rows).select(COLUMNS)
    ref, ours = os.path.join(args.dir, "reference"), os.path.join(args.dir, "ours")
    build_s = timed(lambda: reference_table(rows, ref, args.dir))
    write_s = timed(lambda: it.write_table(ours, rows, options={"indexing.typemap.body": "text"}))
    split = os.path.join(ref, SPLIT)
    conv = os.path.join(args.dir, "converted")
    shutil.copytree(ref, conv)
    convert_s = timed(lambda: it.IndexTable(conv).maintenance.convert())
    (conv_add,) = it.IndexTable(conv).snapshot().files
    conv_size = conv_add.size
    some_id = int(rows.column("id")[args.rows // 3].as_py())

    cold: dict[str, list[float]] = {}

    def cold_run(name: str, path: str, run: int, fn: Callable[[it.IndexTable], Any]) -> None:
        cache = os.path.join(args.dir, f"cache-{name}-{run}")
        t = it.IndexTable(path, options={"spark.indextables.cache.disk.path": cache})
        cold.setdefault(name, []).append(timed(lambda: fn(t)))
        shutil.rmtree(cache, ignore_errors=True)

    def prewarm_then_count(t: it.IndexTable) -> None:
        from indextables_spark.core.split.cache.cache import get_cache

        for add in t.snapshot().files:  # what PREWARM does: every dictionary transcoded at entry
            get_cache(t.options).local_dir(t.log.storage, add)
        t.count(TEXT)

    # one throwaway cold read of each kind first: imports (the transcoder, zstandard, ducer) and
    # first-use costs belong to the process, not to a split
    cold_run("warm-up ref", ref, 0, lambda t: t.search(PHRASE))
    cold_run("warm-up ours", ours, 0, lambda t: t.search(PHRASE))
    for run in range(args.runs):
        for kind, path in (("ref", ref), ("ours", ours), ("conv", conv)):
            cold_run(f"{kind} text count", path, run, lambda t: t.count(TEXT))
            cold_run(f"{kind} text search", path, run, lambda t: t.search(TEXT))
            cold_run(f"{kind} phrase rows", path, run, lambda t: t.search(PHRASE))
            cold_run(f"{kind} id query", path, run, lambda t: t.search(f"id:{some_id}"))
            cold_run(f"{kind} id filter", path, run, lambda t: t.to_arrow(where=f"id = {some_id}"))
        cold_run("ref all at entry + text count", ref, run, prewarm_then_count)
    per_field = transcode_each_field(split, args.dir)

    warm: dict[str, dict[str, float]] = {}
    queries: dict[str, Callable[[it.IndexTable], Any]] = {
        f"search('{TEXT}', ids)": lambda t: t.search(TEXT, columns=["id"]),
        f"search('{TEXT}'), every column": lambda t: t.search(TEXT),
        f"count('{TEXT}')": lambda t: t.count(TEXT),
        f"search('{PHRASE}'), every column": lambda t: t.search(PHRASE),
        f"count('{PHRASE}')": lambda t: t.count(PHRASE),
        f"search('id:{some_id}')": lambda t: t.search(f"id:{some_id}"),
        f"to_arrow(where='id = {some_id}')": lambda t: t.to_arrow(where=f"id = {some_id}"),
        f"search('{TEXT}', limit=10)": lambda t: t.search(TEXT, limit=10),
        "aggregate stats(views)": lambda t: t.aggregate({"s": {"stats": {"field": "views"}}}),
        "to_arrow(columns=['id', 'views'])": lambda t: t.to_arrow(columns=["id", "views"]),
        "to_arrow() every row": lambda t: t.to_arrow(),
    }
    for name, path in (("reference", ref), ("ours", ours), ("converted", conv)):
        t = it.IndexTable(path, options={"spark.indextables.cache.disk.path": os.path.join(args.dir, "warm-cache")})
        t.to_arrow(columns=["id"])  # into the cache, every dictionary
        cold_scan = timed(lambda: t.to_arrow())  # the reference's: decodes its document store once
        warm.setdefault("first to_arrow() every row (decodes the store)", {})[name] = cold_scan
        for q, fn in queries.items():
            fn(t)
            reps = 3 if "every row" in q else 7
            warm.setdefault(q, {})[name] = statistics.median(timed(lambda: fn(t)) for _ in range(reps))

    med = statistics.median
    n = args.rows
    print(f"rows: {n:,}; reference-like split {os.path.getsize(split) / 1e6:.1f} MB (built in {build_s:.1f} s)")
    print(f"  writing the same rows as our split (it.write_table): {write_s:.2f} s")
    print(
        f"CONVERT (no re-indexing): {convert_s:.2f} s ({convert_s / n * 1e6:.1f} us a row); "
        f"the converted split {conv_size / 1e6:.1f} MB, ours {sum(f.size for f in it.IndexTable(ours).snapshot().files) / 1e6:.1f} MB"
    )
    print(f"cold first read into an empty split cache, median of {args.runs} (reference / ours / converted):")
    for what in ("text count", "text search", "phrase rows", "id query", "id filter"):
        r, o, c = med(cold[f"ref {what}"]), med(cold[f"ours {what}"]), med(cold[f"conv {what}"])
        print(f"  {what:12s} {r:7.3f} s  {o:7.3f} s  {c:7.3f} s")
    print(f"  hits: text {it.IndexTable(ours).count(TEXT)}, phrase {it.IndexTable(ours).count(PHRASE)}")
    print(f"  text count with every dictionary transcoded at entry: {med(cold['ref all at entry + text count']):.3f} s")
    print("transcoding one field's dictionary alone (s): " + ", ".join(f"{k} {v:.3f}" for k, v in per_field.items()))
    print("warm, median (reference / ours / converted, ms; the first line: once, the store decoded into the cache):")
    for q, by in warm.items():
        print(f"  {q:45s} {by['reference'] * 1000:9.1f} {by['ours'] * 1000:9.1f} {by['converted'] * 1000:9.1f}")


if __name__ == "__main__":
    main()
