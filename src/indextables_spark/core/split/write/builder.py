"""SplitWriter: Arrow batches → split files in storage → AddFile actions.

Rows are grouped by partition values (one open split per combination). Each open split has a
Tantivy index in a temp directory (one writer thread, a large heap: one segment) and an Arrow IPC
file (LZ4, record batches cut by size: format/row_layout.py) holding the stored columns, whose
layout is bundled as `rows.layout`; partition columns are not stored. `finish()` bundles each split
(bundle.py), uploads it to `[col=value/...]splits/split-<uuid4>.split` and describes it as an
AddFile (tagged with its vector index build time: write/vectors.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.core.schema import analyzers
from indextables_spark.core.schema.arrow_types import arrow_schema, cast_or_fail
from indextables_spark.core.schema.partitions import format_partition_value, partition_path
from indextables_spark.core.schema.types import ColumnSpec, row_store_columns
from indextables_spark.core.split.format.companion import (
    COMPANION_KEY,
    CompanionFile,
    CompanionInfo,
    CompanionSource,
    conform_source_column,
)
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.bloom import STATS_KEY as BLOOM_STATS_KEY
from indextables_spark.core.split.format.bloom import BloomConfig, SplitBloomBuilder, bloom_file_for
from indextables_spark.core.split.format.bundle import ROWS_NAME, bundle
from indextables_spark.core.split.format.column_specs import validate_schema
from indextables_spark.core.split.format.doc_mapping import doc_mapping_from_specs, tantivy_schema
from indextables_spark.core.split.format.nested_names import NestedNames
from indextables_spark.core.split.format.row_layout import batch_rows_for, write_layout
from indextables_spark.core.split.format.stats import StatsCollector
from indextables_spark.core.split.write.documents import json_documents
from indextables_spark.core.split.write import vectors as split_vectors
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import IndexTablesError, SchemaMismatchError
from indextables_spark.expr.text import has_long_token
from indextables_spark.expr.text import supported as text_supported

BATCH_ROWS = 65_536  # rows per indexing chunk (record batches of the row store: row_layout.batch_rows_for)
# Rows gathered per split before its Tantivy documents are built: a task's Arrow batches (10,000
# rows from Spark) spread over many partitions arrive as small slices, and building documents costs
# ~40 Arrow compute calls per slice whatever its size (16 partitions: 625-row slices, 0.65 s of
# call overhead per 200,000 rows).
INDEX_ROWS = 8_192
MIN_HEAP_BYTES = 15 << 20  # Tantivy needs at least ~15 MB per writer thread
_TARGET_SIZE_KEYS = ("indexing.split.targetSize", "split.targetSize", "write.targetSplitSize")


def target_split_bytes_option(options: Options) -> int | None:
    """The split size a write rolls over at, when an option sets one (aliases: the first set wins)."""
    for key in _TARGET_SIZE_KEYS:
        v = options.get_size(key, 0)
        if v > 0:
            return v
    return None


@dataclass
class _OpenSplit:
    partition_values: dict[str, str | None]
    tmp_dir: str
    index: Any  # tantivy.Index
    writer: Any  # tantivy.IndexWriter
    sink: Any  # pa.OSFile (None for a companion split: no row store)
    ipc: pa.ipc.RecordBatchFileWriter | None
    stats: StatsCollector
    pending: list[pa.RecordBatch] = field(default_factory=list)  # rows not yet in the row store
    pending_rows: int = 0
    pending_bytes: int = 0
    unindexed: list[pa.RecordBatch] = field(default_factory=list)  # rows not yet given to Tantivy
    unindexed_rows: int = 0
    batch_rows: list[int] = field(default_factory=list)
    num_rows: int = 0
    rows_in: int = 0  # rows given to the split (indexed or not yet)
    uncompressed: int = 0
    truncated: set[str] = field(default_factory=set)
    long_tokens: set[str] = field(default_factory=set)  # text columns with a token too long to index
    bloom: SplitBloomBuilder | None = None  # Bloom filter columns (bloom.py), if configured
    companion_files: list[CompanionFile] = field(default_factory=list)  # companion split: its source files
    vectors: dict[str, split_vectors.VectorCollector] = field(default_factory=dict)  # vector columns (write/vectors.py)

    @property
    def index_dir(self) -> str:
        return os.path.join(self.tmp_dir, "index")

    @property
    def rows_path(self) -> str:
        return os.path.join(self.tmp_dir, ROWS_NAME)


class SplitWriter:
    """Writes the rows of one task as splits; see the module doc."""

    def __init__(
        self,
        storage: Storage,
        schema_json: dict[str, Any],
        partition_columns: Sequence[str],
        options: Options | Mapping[str, str] | None = None,
        target_split_bytes: int | None = None,
        companion: CompanionSource | None = None,
        lost_columns: Sequence[str] = (),
    ):
        """lost_columns: columns whose values the source did not hold (a reference split's
        index-only fields, core/split/reference/reference.py): neither stored nor indexed, and marked index-only
        with no index, so they read NULL and every filter on them is refused."""
        self.storage = storage
        # Companion splits index rows of source Parquet files (write_source_file) and keep no rows.
        self.companion = companion
        self.options = options if isinstance(options, Options) else Options.of(options)
        self.partition_columns = list(partition_columns)
        self.specs: list[ColumnSpec] = validate_schema(schema_json, self.partition_columns, self.options)
        if lost_columns:
            lost = set(lost_columns)
            self.specs = [replace(s, index_only=True, indexed_fields=()) if s.name in lost else s for s in self.specs]
        self.stored_specs = [s for s in self.specs if not s.partition]
        if not self.stored_specs:
            raise SchemaMismatchError(
                f"every column is a partition column ({self.partition_columns}): nothing to store in a split"
            )
        self.doc_mapping = doc_mapping_from_specs(self.specs)
        self.doc_mapping_ref = doc_mapping_hash(self.doc_mapping)
        self.full_schema = arrow_schema(schema_json)
        self.stored_schema = arrow_schema(schema_json, [s.name for s in self.stored_specs])
        # the row store leaves index-only columns out (indexing.indexonlyfields): they are indexed only
        self._row_names = row_store_columns(self.stored_specs)
        every_column = len(self._row_names) == len(self.stored_specs)
        self.row_schema = self.stored_schema if every_column else arrow_schema(schema_json, self._row_names)
        self._partition_types = {s.name: s.spark_type for s in self.specs if s.partition}
        self._tantivy_schema = tantivy_schema(self.stored_specs)
        self.target_split_bytes = target_split_bytes if target_split_bytes else target_split_bytes_option(self.options)
        # optimized writes (ops/write/optimize_write.py): roll a partition value's split after this many rows
        self.max_split_rows = self.options.get_int("write.optimizeWrite.maxRowsPerSplit")
        self.heap_bytes = max(MIN_HEAP_BYTES, self.options.get_size("indexWriter.heapSize"))
        self.tmp_root = (
            self.options.get_str("indexWriter.tempDirectoryPath")
            or self.options.get_str("indexing.tempDirectoryPath")
            or None
        )
        # Tokenized text columns whose token lengths are checked (see text.py, fullyTokenized).
        self._token_checked = [
            (s, s.value_field.tokenizer, s.value_field.token_limit)
            for s in self.stored_specs
            if s.kind == "text"
            and s.string_mode is None  # (a stripped column's tokens are not its value's)
            and s.value_field is not None
            and s.value_field.tokenizer is not None  # (supported() is False for None)
            and text_supported(s.value_field.tokenizer)
        ]
        self._vector_specs = [s for s in self.stored_specs if s.vector is not None]
        self._vectors_outside = split_vectors.outside_rows(self.row_schema, self._vector_specs, companion is None)
        self._open: dict[tuple[str | None, ...], _OpenSplit] = {}
        self._done: list[AddFile] = []
        self._closed = False
        self._bloom = BloomConfig.from_options(self.options, self.stored_schema, self.partition_columns)
        # Per-split stats files written with the splits (e.g. {"bloomfilter": [...]}): the commit
        # lists them with Transaction.update_stat.
        self.stats_files: dict[str, list[str]] = {}

    # -- public --------------------------------------------------------------------------------

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add rows (every column of the schema, partition columns included)."""
        if self._closed:
            raise IndexTablesError("SplitWriter: write_batch after finish() or abort()")
        if isinstance(batch, pa.Table):
            for b in batch.to_batches():
                self.write_batch(b)
            return
        if batch.num_rows == 0:
            return
        batch = self._conform(batch)
        for values, rows in self._partition_groups(batch):
            self._append(values, rows)

    def ensure_split(self, partition_values: Mapping[str, str | None] | None = None) -> None:
        """Have a split open for these partition values even when no row comes: finish() then
        writes it empty (re-indexing a split with no live documents must still give a split)."""
        values = dict(partition_values or {})
        key = tuple(values.get(c) for c in self.partition_columns)
        if key not in self._open:
            self._open[key] = self._new_split(values)

    def finish(self) -> list[AddFile]:
        """Close every open split, upload it, and return its AddFile (no rows → [])."""
        if self._closed:
            raise IndexTablesError("SplitWriter: finish() called twice")
        try:
            for key in list(self._open):
                self._done.append(self._close_split(self._open.pop(key)))
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return list(self._done)

    @property
    def written(self) -> list[AddFile]:
        """The splits uploaded so far (what a caller deletes when its commit fails)."""
        return list(self._done)

    def abort(self) -> None:
        """Drop open splits and their temp files (uploaded splits are left to the caller)."""
        self._closed = True
        for split in self._open.values():
            _discard(split)
        self._open.clear()

    def __enter__(self) -> "SplitWriter":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None or not self._closed:
            self.abort()

    def write_source_file(
        self,
        key: str,
        uri: str,
        size: int,
        partition_values: Mapping[str, str | None],
        row_groups: Iterable[tuple[int, pa.RecordBatch]],
        columns: Mapping[str, str] | None = None,
        nested: Mapping[str, NestedNames] | None = None,
    ) -> None:
        """Companion writers: index every row of one source Parquet file (its row groups in order,
        as (row group index, rows of the stored columns)) into the open split of its partition.
        `columns`: {column: its name in the file} where they differ (ops/companion/rows.py);
        `nested`: {column: the file's names of its nested fields} where any differs."""
        if self.companion is None:
            raise IndexTablesError("SplitWriter.write_source_file needs a companion writer")
        if self._closed:
            raise IndexTablesError("SplitWriter: write_source_file after finish() or abort()")
        values = {c: partition_values.get(c) for c in self.partition_columns}
        pkey = tuple(values.get(c) for c in self.partition_columns)
        split = self._open.get(pkey)
        if split is None:
            split = self._open[pkey] = self._new_split(values)
        groups, columns, nested = [], dict(columns or {}), dict(nested or {})
        for group, rows in row_groups:
            got = {n: rows.column(n) for n in rows.schema.names}
            conformed = [
                conform_source_column(got.get(f.name), f, rows.num_rows, nested.get(f.name)) for f in self.stored_schema
            ]
            rows = pa.RecordBatch.from_arrays(conformed, schema=self.stored_schema)
            if rows.num_rows:
                for start in range(0, rows.num_rows, BATCH_ROWS):  # as the row-store path: Tantivy
                    self._index_rows(split, rows.slice(start, BATCH_ROWS))  # indexes while we build JSON
                split.uncompressed += rows.nbytes
                split.batch_rows.append(rows.num_rows)
                groups.append((group, rows.num_rows))
        file = CompanionFile(
            key, uri, size, tuple(groups), tuple(sorted(columns.items())), tuple(sorted(nested.items()))
        )
        split.companion_files.append(file)

    # -- input ---------------------------------------------------------------------------------

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        cols = []
        for f in self.full_schema:
            if f.name not in names:
                raise SchemaMismatchError(f"batch has no column {f.name!r} (batch columns: {names})")
            col = batch.column(names.index(f.name))
            if not col.type.equals(f.type):
                message = f"column {f.name!r}: cannot convert Arrow type {col.type} to {f.type}"
                col = cast_or_fail(col, f.type, SchemaMismatchError, message)
            if not f.nullable and col.null_count:
                raise SchemaMismatchError(f"column {f.name!r} is not nullable but the batch has {col.null_count} nulls")
            cols.append(col)
        return pa.RecordBatch.from_arrays(cols, schema=self.full_schema)

    def _partition_groups(self, batch: pa.RecordBatch) -> list[tuple[dict[str, str | None], pa.RecordBatch]]:
        stored = batch.select([s.name for s in self.stored_specs])
        stored = pa.RecordBatch.from_arrays(stored.columns, schema=self.stored_schema)
        if not self.partition_columns:
            return [({}, stored)]
        # One hash group-by gives each combination's row indices (nulls form their own group).
        keys = pa.Table.from_batches([batch.select(self.partition_columns)])
        keys = keys.append_column("__i", pa.array(range(batch.num_rows), pa.int64()))
        grouped = keys.group_by(self.partition_columns, use_threads=False).aggregate([("__i", "list")])
        out = []
        for row in grouped.to_pylist():
            values = {c: format_partition_value(row[c], self._partition_types[c]) for c in self.partition_columns}
            idx = row["__i_list"]
            out.append((values, stored if len(idx) == batch.num_rows else stored.take(pa.array(idx, pa.int64()))))
        return out

    # -- splits --------------------------------------------------------------------------------

    def _append(self, values: dict[str, str | None], rows: pa.RecordBatch) -> None:
        key = tuple(values.get(c) for c in self.partition_columns)
        start = 0
        while start < rows.num_rows:
            split = self._open.get(key)
            if split is None:
                split = self._open[key] = self._new_split(values)
            n = rows.num_rows - start
            if self.target_split_bytes:
                # Take about as many rows as fit the remaining budget (at least one).
                per_row = max(1, rows.nbytes // max(1, rows.num_rows))
                budget = self.target_split_bytes - split.uncompressed
                n = min(n, max(1, budget // per_row))
            if self.max_split_rows > 0:
                n = min(n, max(1, self.max_split_rows - split.rows_in))
            n = min(n, BATCH_ROWS)
            self._write_rows(split, rows.slice(start, n))
            start += n
            if (self.target_split_bytes and split.uncompressed >= self.target_split_bytes) or (
                self.max_split_rows > 0 and split.rows_in >= self.max_split_rows
            ):
                self._done.append(self._close_split(self._open.pop(key)))

    def _new_split(self, values: dict[str, str | None]) -> _OpenSplit:
        import tantivy  # lazy: keeps `import indextables_spark.core.split.write.builder` free of tantivy

        tmp = tempfile.mkdtemp(prefix="indextables-split-", dir=self.tmp_root)
        try:
            os.makedirs(os.path.join(tmp, "index"))
            where = f"new split in {tmp}"
            with tantivy_call(f"creating the Tantivy index of a {where}"):
                index = tantivy.Index(self._tantivy_schema, os.path.join(tmp, "index"))
                analyzers.register(index, (f.index_tokenizer for s in self.stored_specs for f in s.indexed_fields))
                writer = index.writer(self.heap_bytes, 1)
            sink = ipc = None
            if self.companion is None:
                sink = pa.OSFile(os.path.join(tmp, ROWS_NAME), "wb")
                ipc = pa.ipc.new_file(sink, self.row_schema, options=pa.ipc.IpcWriteOptions(compression="lz4"))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        stats = StatsCollector.for_options(self.specs, self.options)
        return _OpenSplit(
            dict(values),
            tmp,
            index,
            writer,
            sink,
            ipc,
            stats,
            bloom=self._bloom.new_split() if self._bloom is not None else None,
            vectors=split_vectors.collectors(self._vector_specs, self._vectors_outside),
        )

    def _write_rows(self, split: _OpenSplit, rows: pa.RecordBatch) -> None:
        stored = rows if self.row_schema is self.stored_schema else rows.select(self._row_names)
        split.pending.append(split_vectors.without_vectors(stored, self._vectors_outside))
        split.pending_rows += rows.num_rows
        split.pending_bytes += split.pending[-1].nbytes
        split.rows_in += rows.num_rows
        split.unindexed.append(rows)
        split.unindexed_rows += rows.num_rows
        split.uncompressed += rows.nbytes
        if split.unindexed_rows >= INDEX_ROWS:
            self._index_unindexed(split)
        self._flush_rows(split)

    def _index_unindexed(self, split: _OpenSplit) -> None:
        """Index the gathered rows (in row-store order, so `__row` numbers match it)."""
        if not split.unindexed:
            return
        rows = split.unindexed[0] if len(split.unindexed) == 1 else pa.concat_batches(split.unindexed)
        split.unindexed, split.unindexed_rows = [], 0
        self._index_rows(split, rows)

    def _index_rows(self, split: _OpenSplit, rows: pa.RecordBatch) -> None:
        """Statistics, Bloom filters and the Tantivy documents of rows (`__row` continues the split's)."""
        split.stats.add(rows)
        if split.bloom is not None:
            split.bloom.add(rows)
        for name, vectors in split.vectors.items():  # checked before Tantivy sees the rows
            vectors.add(
                rows.column(name),
                split.num_rows,
                f"rows {split.num_rows}..{split.num_rows + rows.num_rows} of a split of partition "
                f"{split.partition_values or '(none)'}",
            )
        docs, truncated = json_documents(rows, self.stored_specs, split.num_rows)
        split.truncated |= truncated
        for spec, tok, limit in self._token_checked:
            if spec.name not in split.long_tokens and has_long_token(rows.column(spec.name), tok, limit):
                split.long_tokens.add(spec.name)
        add = split.writer.add_json
        with tantivy_call(
            f"indexing rows {split.num_rows}..{split.num_rows + rows.num_rows} "
            f"of a split of partition {split.partition_values or '(none)'}"
        ):
            for d in docs:
                add(d)
        split.num_rows += rows.num_rows

    @staticmethod
    def _flush_rows(split: _OpenSplit, final: bool = False) -> None:
        """Write the pending rows as record batches of about row_layout.ROW_BATCH_BYTES (batch_rows_for
        of the pending rows' size), and the short rest too when `final`."""
        while split.pending_rows >= (n := batch_rows_for(split.pending_bytes, split.pending_rows)) or (
            final and split.pending_rows
        ):
            if split.ipc is None:  # a companion split stores no rows (none are ever pending)
                raise IndexTablesError("SplitWriter: rows pending in a split without a row store")
            table = pa.Table.from_batches(split.pending)
            n = min(n, split.pending_rows)
            split.ipc.write_batch(table.slice(0, n).combine_chunks().to_batches(max_chunksize=n)[0])
            split.batch_rows.append(n)
            rest = table.slice(n)
            split.pending, split.pending_rows, split.pending_bytes = rest.to_batches(), rest.num_rows, rest.nbytes

    def _close_split(self, split: _OpenSplit) -> AddFile:
        try:
            where = f"split of partition {split.partition_values or '(none)'} in {split.tmp_dir}"
            self._index_unindexed(split)
            with tantivy_call(f"committing the Tantivy index of a {where}"):
                split.writer.commit()
                split.writer.wait_merging_threads()
            self._flush_rows(split, final=True)
            if split.ipc is not None:
                split.ipc.close()
                split.sink.close()
            layout_files = [write_layout(split.rows_path, split.tmp_dir)] if split.ipc is not None else []
            prefix = partition_path(self.partition_columns, split.partition_values)
            key = (prefix + "/" if prefix else "") + f"splits/split-{uuid.uuid4()}.split"
            out_path = os.path.join(split.tmp_dir, "split.bin")
            extra: dict[str, Any] = {"truncatedTerms": sorted(split.truncated)} if split.truncated else {}
            if self._token_checked:
                # Columns where every token was indexed: term-regex narrowing of substring filters is safe.
                extra["fullyTokenized"] = sorted(
                    s.name for s, _, _ in self._token_checked if s.name not in split.long_tokens
                )
            if self.companion is not None:
                c = self.companion
                extra[COMPANION_KEY] = CompanionInfo(
                    c.format, c.source, c.version, self.stored_schema, tuple(split.companion_files)
                ).to_json()
            vector_files, tags = split_vectors.write_vector_indexes(split.vectors, split.tmp_dir, extra)
            footer_start, footer_end = bundle(
                split.index_dir,
                split.rows_path if split.ipc is not None else None,
                self.doc_mapping,
                out_path,
                num_rows=split.num_rows,
                batch_rows=split.batch_rows,
                extra=extra,
                extra_files=[*vector_files, *layout_files],
            )
            size = os.path.getsize(out_path)
            self.storage.upload_file(key, out_path)
            if split.bloom is not None:
                bloom_key = bloom_file_for(key)
                self.storage.put(bloom_key, split.bloom.encode(key))
                self.stats_files.setdefault(BLOOM_STATS_KEY, []).append(bloom_key)
            mins, maxs = split.stats.min_max_values()
            return AddFile(
                path=key,
                partition_values=dict(split.partition_values),
                size=size,
                modification_time=int(time.time() * 1000),
                data_change=True,
                stats=split.stats.stats_json(),
                min_values=mins or None,
                max_values=maxs or None,
                num_records=split.num_rows,
                footer_start_offset=footer_start,
                footer_end_offset=footer_end,
                doc_mapping_ref=self.doc_mapping_ref,
                uncompressed_size_bytes=split.uncompressed,
                companion_source_files=([f.key for f in split.companion_files] if self.companion is not None else None),
                companion_source_version=self.companion.version if self.companion is not None else None,
                tags=tags,
            )
        finally:
            _discard(split)


def _discard(split: _OpenSplit) -> None:
    # Release Tantivy's writer (and its lock) before deleting its directory.
    split.writer = None
    split.index = None
    if split.sink is not None and not split.sink.closed:
        split.sink.close()
    shutil.rmtree(split.tmp_dir, ignore_errors=True)
