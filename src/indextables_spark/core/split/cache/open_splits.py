"""The per-process cache of opened splits: each extracted split directory's Tantivy index, row
store and searcher, opened once (SplitHandles), and the directories live SplitReaders read (what
the split cache must not evict). A directory holds one of our splits (footer.json, a row store) or
one the reference implementation wrote (reference/native.py: its rows are its document store);
either way its handles carry the row_access.SplitRows the readers use."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import pyarrow as pa

from indextables_spark.core.schema import analyzers
from indextables_spark.core.schema.types import ColumnSpec, with_fully_tokenized, with_truncated_terms
from indextables_spark.core.split.cache.companion_rows import open_rows
from indextables_spark.core.split.format.companion import companion_info
from indextables_spark.core.split.cache.lazy_rows import LazyRows, source_for
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.bundle import (
    EXTRACTED_FROM,
    LAZY_ROWS,
    ROWS_NAME,
    SplitFooter,
    load_extracted_footer,
)
from indextables_spark.core.split.cache.row_access import IpcRows, SplitRows
from indextables_spark.core.split.cache.vector_rows import with_vectors
from indextables_spark.core.split.format.doc_mapping import specs_from_doc_mapping
from indextables_spark.core.split.reference import native
from indextables_spark.errors import SplitFormatError
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import tantivy


def _max_open_splits() -> int:
    """Per-process cache of opened indexes and row stores, so that a table of hundreds of splits is
    searched without reopening them per query: up to 1,024, within a quarter of the process's file
    descriptor limit (each open row store keeps its memory-mapped file open)."""
    try:
        import resource  # optional dependency: ImportError is handled here

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(64, min(1024, soft // 4))


MAX_OPEN_SPLITS = _max_open_splits()
MAX_PROJECTIONS = 8  # per split: readers of column subsets (see SplitHandles.batch)


class RowStore(Protocol):
    """A row store read batch by batch: lazy_rows.LazyRows, companion.CompanionRows."""

    schema: pa.Schema
    num_record_batches: int

    def batch(self, i: int, columns: Sequence[str] | None = None) -> pa.RecordBatch: ...


@dataclass
class SplitHandles:
    """What opening a split costs once per process: the Tantivy index and the IPC reader (none for
    a reference split: its `rows` read the document store)."""

    footer: SplitFooter | None  # None: a split the reference implementation wrote
    specs: list[ColumnSpec]
    index: tantivy.Index
    ipc: Any  # pa.ipc.RecordBatchFileReader or a RowStore; None for a reference split
    batch_starts: list[int]
    source: Any = None  # the memory-mapped row store, shared by the readers
    lazy: RowStore | None = None  # lazy_rows.LazyRows when the row store is fetched by ranges
    # what a query parses the same for (parsed queries are cached by it: _parsed): the doc mapping
    # and the footer's term notes, from which the specs and the Tantivy schema are derived
    mapping_key: tuple[str, tuple[str, ...], tuple[str, ...]] = ("", (), ())
    searcher: Any = None  # the index's searcher, made on first use (a split never changes)
    # field indices -> (reader of only those fields, its batches as read so far). The extracted
    # row store is uncompressed (bundle.uncompress_rows), so a batch is a zero-copy view of the
    # memory map: keeping it costs no memory, and reading it again costs no metadata decoding.
    projected: dict[tuple[int, ...], tuple[Any, list[pa.RecordBatch | None]]] = dataclass_field(default_factory=dict)
    rows: SplitRows | None = None  # where the rows come from and how documents name them (set at open)
    vector_indexes: dict[str, Any] = dataclass_field(default_factory=dict)  # column -> vector_index.VectorIndex

    @property
    def ranged(self) -> bool:
        """Whether the row store is read by ranges (lazy_rows.py, or a companion's source files)."""
        return self.lazy is not None

    def prefetch(self, batches: Sequence[int], columns: Sequence[str] | None = None) -> None:
        """Fetch at once what reading these batches will, when the row store is read by ranges."""
        fetch = getattr(self.lazy, "prefetch", None)
        if fetch is not None:
            fetch(list(batches), columns)

    def has(self, batches: Sequence[int], columns: Sequence[str] | None = None) -> bool:
        """Whether reading these batches reads nothing remote (a row store extracted whole: yes;
        read by ranges: what it holds already; a companion's Parquet files: no)."""
        if self.lazy is None:
            return True
        has = getattr(self.lazy, "has", None)
        return bool(has(list(batches), columns)) if has is not None else False

    def batch(self, i: int, columns: Sequence[str] | None = None) -> pa.RecordBatch:
        """Record batch i, only `columns` (in that order) when given. A reader of only some fields
        touches only their buffers: the id column of a 65,536-row batch costs 0.014 ms, every
        column 0.11 ms."""
        if self.lazy is not None:
            return self.lazy.batch(i, columns)
        schema = self.ipc.schema
        key = (
            tuple(range(len(schema)))
            if columns is None
            else tuple(sorted({schema.get_field_index(c) for c in columns}))
        )
        entry = self.projected.get(key)
        if entry is None:
            reader = (
                self.ipc
                if len(key) == len(schema)
                else pa.ipc.open_file(self.source, options=pa.ipc.IpcReadOptions(included_fields=list(key)))
            )
            if len(self.projected) >= MAX_PROJECTIONS:
                self.projected.pop(next(iter(self.projected)), None)
            entry = self.projected[key] = (reader, [None] * reader.num_record_batches)
        batch = entry[1][i]
        if batch is None:
            batch = entry[1][i] = entry[0].get_batch(i)
        return batch if columns is None or list(columns) == batch.schema.names else batch.select(list(columns))


_handles: LruCache[SplitHandles] = LruCache(MAX_OPEN_SPLITS)
_live_lock = threading.Lock()  # guards _live_readers
_live_readers: dict[str, int] = {}  # local_dir -> live SplitReader objects (for cache eviction)


def _open_reference(local_dir: str) -> SplitHandles:
    """A split the reference implementation wrote (reference/native.py), opened in place."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.cache.open_splits` free of tantivy

    from indextables_spark.core.split.reference.docstore import (
        StoredDocs,  # lazy: keeps `import indextables_spark.core.split.cache.open_splits` light
    )

    info = native.load_info(local_dir)
    meta = native.load_meta(local_dir, info.where)
    fields = native.meta_fields(meta)
    specs = native.native_specs(fields, info.schema_json, info.partition_columns)
    with tantivy_call(f"opening the Tantivy index of split {info.where} (extracted in {local_dir})"):
        index = tantivy.Index.open(local_dir)
        native.register_analyzers(index, native.reference_analyzers(fields))
    columns = native.stored_columns(fields, info.schema_json, info.partition_columns)
    rows = StoredDocs(index, columns, meta, info.where, native.fast_columns(fields, columns), local_dir)
    # queries parse the same on splits of one Tantivy schema and table schema (field ids, tokenizers)
    key = ("reference:" + json.dumps(meta["schema"], sort_keys=True), (json.dumps(info.schema_json),), ())
    return SplitHandles(None, specs, index, None, [], mapping_key=key, rows=rows)


def _open_handles(local_dir: str) -> SplitHandles:
    import tantivy  # lazy: keeps `import indextables_spark.core.split.cache.open_splits` free of tantivy

    if native.is_reference_dir(local_dir):
        return _open_reference(local_dir)
    footer = load_extracted_footer(local_dir)
    specs = with_truncated_terms(specs_from_doc_mapping(footer.doc_mapping), footer.truncated_terms)
    specs = with_fully_tokenized(specs, footer.fully_tokenized)

    where = f"split {footer.raw.get(EXTRACTED_FROM) or local_dir}"
    with tantivy_call(f"opening the Tantivy index of {where} (extracted in {local_dir})"):
        index = tantivy.Index.open(local_dir)
        analyzers.register(index, (f.index_tokenizer for s in specs for f in s.indexed_fields))
        # a converted reference split keeps the reference's tokenizer names (reference/rewrite.py)
        native.register_analyzers(index, footer.raw.get(native.ANALYZERS_KEY) or {})
    lazy: RowStore | None = None
    ipc: pa.ipc.RecordBatchFileReader | RowStore
    if footer.is_companion:
        info = companion_info(footer.raw, where)
        if info is None:  # (the footer checks say a companion split has the section)
            raise SplitFormatError(f"{where}: the companion split's footer has no companion section")
        source = None
        ipc = lazy = open_rows(local_dir, info, where)
    elif footer.raw.get(LAZY_ROWS) and not os.path.exists(os.path.join(local_dir, ROWS_NAME)):
        row_source = source_for(local_dir)
        if row_source is None:
            raise SplitFormatError(
                f"{where} (extracted in {local_dir}): the row store is fetched by ranges and no "
                f"storage is registered for it (open the split through the split cache)"
            )
        source = None
        ipc = lazy = LazyRows(local_dir, row_source, where)
    else:
        try:
            source = pa.memory_map(os.path.join(local_dir, ROWS_NAME), "r")
            ipc = pa.ipc.open_file(source)
        except FileNotFoundError:
            raise SplitFormatError(f"{where}: the row store {ROWS_NAME} is missing in {local_dir}") from None
        except pa.ArrowException as e:
            raise SplitFormatError(f"{where}: the row store {ROWS_NAME} is unreadable ({e})") from e
    starts = [0]
    for n in footer.batch_rows:
        starts.append(starts[-1] + n)
    if ipc.num_record_batches != len(footer.batch_rows):
        raise SplitFormatError(
            f"{where} (extracted in {local_dir}): {ROWS_NAME} has {ipc.num_record_batches} record "
            f"batches, footer says {len(footer.batch_rows)}"
        )
    mapping_key = (footer.doc_mapping, tuple(footer.truncated_terms), tuple(footer.fully_tokenized))
    h = SplitHandles(footer, specs, index, ipc, starts, source, lazy=lazy, mapping_key=mapping_key)
    h.rows = with_vectors(IpcRows(h, ipc.schema, footer.num_rows, starts), local_dir, footer, where)
    return h


def searcher_of(h: SplitHandles, local_dir: str) -> Any:
    """The split's searcher, made once (a split never changes)."""
    if h.searcher is None:
        with tantivy_call(f"opening a searcher on split {local_dir}"):
            h.searcher = h.index.searcher()
    return h.searcher


def handles(local_dir: str) -> SplitHandles:
    # the split cache's directories are absolute already: no abspath per split
    h = _handles.get(local_dir)
    if h is not None:
        return h
    key = os.path.abspath(local_dir)
    return _handles.get_or_build(key, lambda: _open_handles(key))


def is_open(local_dir: str) -> bool:
    """Whether this process has the split's handles cached (local_dir: an absolute path)."""
    return local_dir in _handles


def forget(local_dir: str) -> None:
    """Drop the cached handles of a directory (before it is deleted)."""
    _handles.pop(os.path.abspath(local_dir))


def dirs_being_read() -> set[str]:
    """Directories a live SplitReader reads now (cached handles alone do not count)."""
    with _live_lock:
        return {d for d, n in _live_readers.items() if n > 0}


def dirs_in_use() -> set[str]:
    cached = {d for d in _handles.keys() if isinstance(d, str)}
    with _live_lock:
        return cached | {d for d, n in _live_readers.items() if n > 0}


def register_reader(local_dir: str) -> None:
    with _live_lock:
        _live_readers[local_dir] = _live_readers.get(local_dir, 0) + 1


def unregister_reader(local_dir: str) -> None:
    with _live_lock:
        n = _live_readers.get(local_dir, 0) - 1
        if n <= 0:
            _live_readers.pop(local_dir, None)
        else:
            _live_readers[local_dir] = n
