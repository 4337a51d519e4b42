"""The rows of a split the reference implementation wrote: Tantivy's document store, where the
reference's own reader takes them from (tantivy4java `streaming_doc_retrieval.rs`), read only for
the documents a read needs and typed by the table schema (reference.documents_table).

It is cache/row_access.py's SplitRows for that layout: a row id is a document's position among
the index's documents in (segment, doc id) order: the doc id plus the documents of the segments
before it in meta.json (the searcher's segment ordinals follow meta.json's order), so with one
segment the doc id itself. Only an index with deleted documents lists its live ones (once).

Columns the reference also keeps as fast fields of the same value (integers, floats, booleans) are
read from them instead: 0.07 us a value against ~9 us a document (decompressing its store block and
decoding every field), so a read of only such columns never touches the document store.

The first read of every row that needs the document store (a scan, or a read of half the rows or
more) decodes them all and keeps them: the stored columns as an uncompressed Arrow file (`docs.arrow`) in the split's cache directory, renamed
into place once complete. Later reads of any rows take them from that file, memory-mapped, as they
take ours from rows.arrow: a decoded row costs ~12 us once per cache, not once per read. Nothing
is indexed: the index stays the reference's."""

from __future__ import annotations

import bisect
import os
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from indextables_spark.core.schema.arrow_types import arrow_type
from indextables_spark.core.split.format.row_layout import live_batches
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.reference import native
from indextables_spark.core.split.reference.reference import documents_table
from indextables_spark.errors import SplitFormatError

if TYPE_CHECKING:
    import tantivy

CHUNK = 65536  # documents decoded into one record batch (docs.arrow: batch i holds rows i*CHUNK ..), as ours
DECODED = native.DECODED_ROWS  # the document store decoded (see the module docstring)


class StoredDocs:
    """SplitRows over the document store of an opened reference index."""

    def __init__(
        self,
        index: tantivy.Index,
        columns: Sequence[Mapping[str, Any]],
        meta: Mapping[str, Any],
        where: str,
        fast: frozenset[str] = frozenset(),
        local_dir: str | None = None,
    ) -> None:
        """columns: the stored data columns (Spark field JSONs); fast: those of them whose fast
        field holds the stored value (native.fast_columns); local_dir: the split's cache directory,
        where a scan keeps the decoded rows (None: nowhere)."""
        import tantivy  # lazy: keeps `import indextables_spark.core.split.reference.docstore` free of tantivy

        self._t = tantivy
        self.where = where
        self._columns = {c["name"]: c for c in columns}
        self._fast = fast
        self._dir = local_dir
        self._decoded_batches: list[pa.RecordBatch] | None = None
        self.schema = pa.schema([pa.field(c["name"], arrow_type(c["type"])) for c in columns])
        with tantivy_call(f"opening the document store of split {where}"):
            self._searcher = index.searcher()
            self.num_rows = int(self._searcher.num_docs)
        segments = meta.get("segments") or []
        deleted = any((s.get("deletes") or {}).get("num_deleted_docs") for s in segments)
        # Row id -> address: segment bases from meta.json without deletes; else the live
        # documents' addresses in order (found once).
        self._bases = [0]
        for seg in segments:
            self._bases.append(self._bases[-1] + int(seg.get("max_doc") or 0))
        self._addresses: list[Any] | None = None
        self._rows_of: dict[tuple[int, int], int] | None = None
        if (deleted or self._bases[-1] != self.num_rows) and self.num_rows:
            with tantivy_call(f"listing the documents of split {where}"):
                hits = self._searcher.search(tantivy.Query.all_query(), self.num_rows, count=False).hits
            self._addresses = sorted((a for _s, a in hits), key=lambda a: (a.segment_ord, a.doc))
            self._rows_of = {(a.segment_ord, a.doc): i for i, a in enumerate(self._addresses)}

    # -- ids ----------------------------------------------------------------------------------------

    def _address(self, row: int) -> Any:
        if self._addresses is not None:
            return self._addresses[row]
        if len(self._bases) <= 2:
            return self._t.DocAddress(0, row)
        seg = bisect.bisect_right(self._bases, row) - 1
        return self._t.DocAddress(seg, row - self._bases[seg])

    def hit_rows(self, searcher: tantivy.Searcher, addresses: Sequence[tantivy.DocAddress]) -> list[int]:
        if self._rows_of is not None:
            return [self._rows_of[(a.segment_ord, a.doc)] for a in addresses]
        if len(self._bases) <= 2:
            return [a.doc for a in addresses]
        return [self._bases[a.segment_ord] + a.doc for a in addresses]

    def sorted_rows(self, searcher: tantivy.Searcher, query: tantivy.Query, limit: int) -> list[int]:
        """The matches by row id (the reference's index has no row id field to order by: Tantivy
        collects the top `limit` by score, limit >= the matches when all are wanted)."""
        hits = searcher.search(query, limit, count=False).hits
        return sorted(self.hit_rows(searcher, [a for _s, a in hits]))

    def without_rows(self, schema: tantivy.Schema, query: tantivy.Query | None, dead: np.ndarray) -> tantivy.Query:
        raise SplitFormatError(
            f"split {self.where}: rows of a split IndexTables4Spark wrote cannot be deleted here "
            f"(CONVERT INDEXTABLES TABLE rewrites it as ours first)"
        )

    # -- rows ---------------------------------------------------------------------------------------

    def _batch(self, rows: Sequence[int], columns: Sequence[str] | None) -> pa.RecordBatch:
        names = list(columns) if columns is not None else self.schema.names
        unknown = [c for c in names if c not in self._columns]
        if unknown:
            raise SplitFormatError(f"split {self.where}: columns {unknown} are not in its document store")
        if not names:  # (a count: the rows, no column; nothing to read)
            return pa.RecordBatch.from_arrays([pa.nulls(len(rows))], names=["_"]).select([])
        addresses = [self._address(r) for r in rows]
        stored = [c for c in names if c not in self._fast]
        arrays: dict[str, pa.Array] = {}
        with tantivy_call(f"reading documents of split {self.where}"):
            for c in names:
                if c in self._fast:
                    values = self._searcher.fast_field_values(c, addresses)
                    arrays[c] = pa.array(values, arrow_type(self._columns[c]["type"]))
            if stored:
                docs = [self._searcher.doc(a).to_dict() for a in addresses]
        if stored:
            table = documents_table(docs, [self._columns[c] for c in stored], self.where)
            arrays.update((c, table.column(c).combine_chunks()) for c in stored)
        return pa.RecordBatch.from_arrays(
            [arrays[c] for c in names], schema=pa.schema([self.schema.field(c) for c in names])
        )

    def local(self, rows: list[int], columns: Sequence[str] | None) -> bool:
        """The document store is extracted with the split: nothing remote."""
        return True

    def take(self, rows: list[int], columns: Sequence[str] | None) -> Iterator[tuple[pa.Array, pa.RecordBatch]]:
        if rows and rows[-1] >= self.num_rows:
            raise SplitFormatError(f"split {self.where}: row id {rows[-1]} is beyond its {self.num_rows} documents")
        # half the rows or more from the store: decoding all of them once costs about as much
        decoded = self._decoded(decode=2 * len(rows) >= self.num_rows and self._needs_store(columns))
        i = 0
        while i < len(rows):
            if decoded is None:
                chunk = rows[i : i + CHUNK]
                yield pa.array(chunk, pa.int64()), self._batch(chunk, columns)
                i += len(chunk)
                continue
            b = rows[i] // CHUNK  # the rows of one decoded batch
            end = i
            while end < len(rows) and rows[end] // CHUNK == b:
                end += 1
            ids = pa.array(rows[i:end], pa.int64())
            batch = decoded[b] if columns is None else decoded[b].select(list(columns))
            yield ids, batch.take(pa.array([r - b * CHUNK for r in rows[i:end]], pa.int64()))
            i = end

    def scan(
        self, with_ids: bool, columns: Sequence[str] | None, dead: np.ndarray | None = None
    ) -> Iterator[tuple[pa.Array | None, pa.RecordBatch]]:
        decoded = self._decoded(decode=self._needs_store(columns))
        starts = [*range(0, self.num_rows, CHUNK), self.num_rows]
        for k in live_batches(starts, dead):
            start = starts[k]
            stop = min(start + CHUNK, self.num_rows)
            ids = pa.array(np.arange(start, stop, dtype=np.int64)) if with_ids else None
            if decoded is None:  # fast fields only (or nowhere to keep the rows)
                yield ids, self._batch(range(start, stop), columns)
            else:
                yield ids, decoded[k] if columns is None else decoded[k].select(list(columns))

    def _needs_store(self, columns: Sequence[str] | None) -> bool:
        names = self.schema.names if columns is None else columns
        return any(c not in self._fast for c in names)

    def _decoded(self, decode: bool = False) -> list[pa.RecordBatch] | None:
        """The batches of docs.arrow, memory-mapped: None until a read decoded the store, which
        this one does with `decode` (written batch by batch, renamed into place when complete)."""
        if self._decoded_batches is not None or self._dir is None:
            return self._decoded_batches
        path = os.path.join(self._dir, DECODED)
        if not os.path.exists(path):
            if not decode:
                return None
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            try:
                with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, self.schema) as writer:
                    for start in range(0, self.num_rows, CHUNK):
                        writer.write_batch(self._batch(range(start, min(start + CHUNK, self.num_rows)), None))
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        try:
            reader = pa.ipc.open_file(pa.memory_map(path, "r"))
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        except (OSError, pa.ArrowException) as e:
            raise SplitFormatError(f"split {self.where}: its decoded rows {path} are unreadable ({e})") from e
        if not reader.schema.equals(self.schema) or sum(b.num_rows for b in batches) != self.num_rows:
            raise SplitFormatError(f"split {self.where}: its decoded rows {path} do not match its documents")
        self._decoded_batches = batches
        return batches
