"""A split the reference implementation wrote, rewritten as one of ours without re-indexing: what
CONVERT (ops/maintenance/convert.py) does to each reference split.

The reference's Tantivy index is kept, so queries keep the reference's answers (its tokens, its
index-only fields, its record options, its fast fields):
1. the bundle's files are extracted (quickwit.extract_bundle: every file's CRC-32 checked) and
   every term dictionary transcoded from SSTable to FST (transcode.py);
2. the rows are read from the reference's document store and fast fields (docstore.StoredDocs) in
   document order into our row store (rows.arrow: the table's stored columns, LZ4 IPC batches of
   65,536 rows); columns the reference indexed without storing stay out of it, as ours do
   (index-only: they read NULL, their filters are the index's); columns the split lacks read NULL;
3. the segment files become ours (segments.py): the `__row` fast column gives each document its
   row's position, the document store is emptied, meta.json stores nothing;
4. everything is bundled as our split (format/bundle.py) with the doc mapping of the reference's
   fields as we read them (native.native_specs: the same specs a native read uses), the analyzers
   its tokenizer names stand for (native.ANALYZERS_KEY) and where it came from.
Statistics and Bloom filters are computed from the rows, as a write computes them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.types import ColumnSpec, row_store_columns
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.bloom import BloomConfig, SplitBloomBuilder
from indextables_spark.core.split.format.bundle import ROWS_NAME, bundle
from indextables_spark.core.split.format.doc_mapping import doc_mapping_from_specs
from indextables_spark.core.split.format.row_layout import batch_rows_for, write_layout
from indextables_spark.core.split.format.stats import StatsCollector
from indextables_spark.core.split.reference import native, segments
from indextables_spark.core.split.reference.docstore import StoredDocs
from indextables_spark.core.split.reference.quickwit import extract_bundle
from indextables_spark.core.split.reference.transcode import transcode_index
from indextables_spark.errors import SchemaMismatchError, SplitFormatError

if TYPE_CHECKING:
    import tantivy

CONVERTED_FROM = "convertedFrom"  # split footer key: the reference split this one was made from
REFERENCE_WRITER = "IndexTables4Spark"


@dataclass
class RewrittenSplit:
    """A converted split in a local file, with what its AddFile records."""

    path: str
    num_rows: int
    uncompressed: int  # bytes of its rows in memory (AddFile uncompressedSizeBytes)
    footer_start: int
    footer_end: int
    doc_mapping: str
    stats: StatsCollector
    bloom: SplitBloomBuilder | None


def rewrite_split(
    source: str,
    work_dir: str,
    where: str,
    schema_json: Mapping[str, Any],
    partition_columns: Sequence[str],
    options: Options,
) -> RewrittenSplit:
    """The reference split in the local file `source` (`where` names it in errors) rewritten as one
    of ours in work_dir (see the module docstring); options: the table's write options (statistics,
    Bloom filters)."""
    index_dir = os.path.join(work_dir, "index")
    extract_bundle(source, index_dir, where)  # (its .managed.json is not bundled again: bundle._index_files)
    meta = native.load_meta(index_dir, where)
    fields = native.meta_fields(meta)
    specs = native.native_specs(fields, schema_json, partition_columns)
    transcode_index(index_dir, None, where)
    rows_path = os.path.join(work_dir, ROWS_NAME)
    rows = _write_rows(index_dir, rows_path, where, meta, fields, specs, schema_json, partition_columns, options)
    _make_segments_ours(index_dir, where, meta, rows.row_ids)
    extra = {
        native.ANALYZERS_KEY: native.reference_analyzers(fields),
        CONVERTED_FROM: {"writer": REFERENCE_WRITER, "split": where},
    }
    doc_mapping = doc_mapping_from_specs(specs, origin=REFERENCE_WRITER)
    out = os.path.join(work_dir, "split.bin")
    footer_start, footer_end = bundle(
        index_dir,
        rows_path,
        doc_mapping,
        out,
        num_rows=rows.num_rows,
        batch_rows=rows.batch_rows,
        extra=extra,
        extra_files=[write_layout(rows_path, work_dir)],
    )
    return RewrittenSplit(
        out, rows.num_rows, rows.uncompressed, footer_start, footer_end, doc_mapping, rows.stats, rows.bloom
    )


@dataclass
class _Rows:
    num_rows: int
    batch_rows: list[int]
    uncompressed: int
    stats: StatsCollector
    bloom: SplitBloomBuilder | None
    row_ids: list[np.ndarray]  # per segment (meta.json order): each document's row id


def _write_rows(
    index_dir: str,
    rows_path: str,
    where: str,
    meta: Mapping[str, Any],
    fields: Sequence[native.NativeField],
    specs: list[ColumnSpec],
    schema_json: Mapping[str, Any],
    partition_columns: Sequence[str],
    options: Options,
) -> _Rows:
    """Every live document's stored columns into rows.arrow, in document order."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.reference.rewrite` free of tantivy

    with tantivy_call(f"opening the Tantivy index of split {where}"):
        index = tantivy.Index.open(index_dir)
    stored = native.stored_columns(fields, schema_json, partition_columns)
    docs = StoredDocs(index, stored, meta, where, native.fast_columns(fields, stored))
    names = row_store_columns(specs)
    schema = arrow_schema(schema_json, names)
    held = [c["name"] for c in stored if c["name"] in names]
    stats = StatsCollector.for_options([s for s in specs if not s.index_only], options)
    bloom_config = BloomConfig.from_options(options, schema, partition_columns)
    bloom = bloom_config.new_split() if bloom_config is not None else None
    batch_rows: list[int] = []
    uncompressed = 0
    with (
        pa.OSFile(rows_path, "wb") as sink,
        pa.ipc.new_file(sink, schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer,
    ):
        for _ids, batch in docs.scan(False, held):
            batch = _conform(batch, schema, where)
            step = batch_rows_for(batch.nbytes, batch.num_rows)  # as write/builder.py
            for start in range(0, batch.num_rows, step):
                part = batch.slice(start, step)
                writer.write_batch(part)
                batch_rows.append(part.num_rows)
                stats.add(part)
                if bloom is not None:
                    bloom.add(part)
                uncompressed += part.nbytes
    row_ids = _row_ids(index, meta, docs.num_rows, where)
    return _Rows(docs.num_rows, batch_rows, uncompressed, stats, bloom, row_ids)


def _conform(batch: pa.RecordBatch, schema: pa.Schema, where: str) -> pa.RecordBatch:
    """The batch with every column of the row store (NULL where the split has none), in its order."""
    arrays = []
    for f in schema:
        if f.name in batch.schema.names:
            a = batch.column(f.name)
            a = a if a.type.equals(f.type) else a.cast(f.type)
        else:
            a = pa.nulls(batch.num_rows, f.type)  # a column added after the reference wrote the split
        if not f.nullable and a.null_count:
            raise SchemaMismatchError(
                f"split {where}: column {f.name!r} is not nullable but {a.null_count} of its rows have no value"
            )
        arrays.append(a)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _row_ids(index: tantivy.Index, meta: Mapping[str, Any], num_rows: int, where: str) -> list[np.ndarray]:
    """Each segment's documents' row ids: a live document's position among the live ones in
    (segment, doc) order, as StoredDocs numbers them; a deleted document gets its next live
    neighbour's (never read: tantivy skips it)."""
    sizes = [int(s.get("max_doc") or 0) for s in meta.get("segments") or []]
    if not any((s.get("deletes") or {}).get("num_deleted_docs") for s in meta.get("segments") or []):
        out, base = [], 0
        for n in sizes:
            out.append(np.arange(base, base + n, dtype=np.uint64))
            base += n
        if base != num_rows:
            raise SplitFormatError(f"split {where}: meta.json lists {base} documents, the index {num_rows}")
        return out
    import tantivy  # lazy: keeps `import indextables_spark.core.split.reference.rewrite` free of tantivy

    with tantivy_call(f"listing the documents of split {where}"):
        hits = index.searcher().search(tantivy.Query.all_query(), max(num_rows, 1), count=False).hits
    alive = [np.zeros(n, dtype=bool) for n in sizes]
    for _score, a in hits:
        alive[a.segment_ord][a.doc] = True
    out, base = [], 0
    for live in alive:
        rank = np.cumsum(live) - live  # live documents before each one
        ids = (base + rank).astype(np.uint64)
        out.append(ids)
        base += int(live.sum())
    return out


def _make_segments_ours(index_dir: str, where: str, meta: Mapping[str, Any], row_ids: list[np.ndarray]) -> None:
    """Each segment's fast field file with `__row`, its document store empty, meta.json storing
    nothing (every file written anew and renamed over the old one: never rewritten in place)."""
    for seg, ids in zip(meta.get("segments") or [], row_ids):
        name = str(seg["segment_id"]).replace("-", "")
        fast = os.path.join(index_dir, f"{name}.fast")
        store = os.path.join(index_dir, f"{name}.store")
        seg_where = f"{where} (segment {name})"
        _replace(fast, segments.with_row_ids(_read(fast, where), ids, seg_where))
        _replace(store, segments.empty_store(_read(store, where), seg_where))
    try:
        new_meta = segments.converted_meta(meta)
    except ValueError as e:
        raise SplitFormatError(f"split {where}: {e}") from None
    _replace(os.path.join(index_dir, "meta.json"), json.dumps(new_meta).encode("utf-8"))


def _read(path: str, where: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SplitFormatError(f"split {where}: {os.path.basename(path)}: {e}") from None


def _replace(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.rewriting"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
