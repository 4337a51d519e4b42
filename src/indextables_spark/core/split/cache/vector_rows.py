"""A split's rows with its vector columns read from their vectors files: the row store of a split
that keeps a vector column only in its vectors file (`"rowStore": false` in the footer's `vectors`
entry, format/vector_index.py; written as empty lists, write/vectors.py) hands out rows whose
column is filled from that file by row id, so every reader (rows returned to users, Spark reads,
MERGE SPLITS, the flat search of a split without an index) sees the vectors as written. A row
absent from the file (its vector was NULL) reads NULL.

The file is memory-mapped; in a directory fetched only as far as a query reads (sparse.py: text
queries leave the vector files out) only the pages of the rows asked for are fetched first
(file_pages.py: their vectors, and the file's row ids unless every row has a vector: then a
row's position in the file is its row id).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np
import pyarrow as pa

from indextables_spark.core.split.cache.file_pages import FilePages
from indextables_spark.core.split.format.vector_index import VectorIndexInfo
from indextables_spark.errors import SplitFormatError

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.split.cache.row_access import SplitRows
    from indextables_spark.core.split.format.bundle import SplitFooter


@dataclass
class _VectorFile:
    """One vector column kept only in its vectors file."""

    info: VectorIndexInfo
    field: pa.Field
    pages: FilePages | None = None  # what the directory holds of it (opened on first use)
    ids: np.ndarray | None = None  # the file's row ids, memory-mapped
    matrix: np.ndarray | None = None  # its vectors, memory-mapped


class VectorRows:
    """SplitRows (row_access.py) whose vector columns come from their vectors files."""

    def __init__(self, inner: SplitRows, local_dir: str, files: dict[str, _VectorFile], where: str) -> None:
        self._inner = inner
        self._dir = local_dir
        self._files = files
        self._where = where
        self.schema = inner.schema
        self.num_rows = inner.num_rows

    def sorted_rows(self, searcher: tantivy.Searcher, query: tantivy.Query, limit: int) -> list[int]:
        return self._inner.sorted_rows(searcher, query, limit)

    def hit_rows(self, searcher: tantivy.Searcher, addresses: Sequence[tantivy.DocAddress]) -> list[int]:
        return self._inner.hit_rows(searcher, addresses)

    def local(self, rows: list[int], columns: Sequence[str] | None) -> bool:
        wanted = self._files if columns is None else [c for c in columns if c in self._files]
        return self._inner.local(rows, columns) and all(self._whole(self._files[c]) for c in wanted)

    def without_rows(self, schema: tantivy.Schema, query: tantivy.Query | None, dead: np.ndarray) -> tantivy.Query:
        return self._inner.without_rows(schema, query, dead)

    def take(self, rows: list[int], columns: Sequence[str] | None) -> Iterator[tuple[pa.Array, pa.RecordBatch]]:
        for ids, batch in self._inner.take(rows, columns):
            yield ids, self._filled(batch, ids)

    def scan(
        self, with_ids: bool, columns: Sequence[str] | None, dead: np.ndarray | None = None
    ) -> Iterator[tuple[pa.Array | None, pa.RecordBatch]]:
        filling = any(c in self._files for c in (columns if columns is not None else self.schema.names))
        for ids, batch in self._inner.scan(with_ids or filling, columns, dead):
            if filling:
                assert ids is not None  # (asked for)
                batch = self._filled(batch, ids)
            yield (ids if with_ids else None), batch

    def _filled(self, batch: pa.RecordBatch, ids: pa.Array) -> pa.RecordBatch:
        """The batch (rows `ids`) with each vector column's values from its file."""
        for name, file in self._files.items():
            i = batch.schema.get_field_index(name)
            if i >= 0:
                batch = batch.set_column(i, batch.schema.field(i), self._column(file, ids.to_numpy()))
        return batch

    def _column(self, file: _VectorFile, rows: np.ndarray) -> pa.Array:
        """The column's values of these row ids (increasing): a list per row, NULL for a row
        without a vector."""
        positions, present = self._positions(file, rows)
        vectors = self._vectors(file, positions[present])
        lengths = np.where(present, file.info.spec.dims, 0).astype(np.int32)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int32)]), pa.int32())
        values = pa.array(vectors.reshape(-1), pa.float32())
        mask = None if present.all() else pa.array(~present)
        return pa.ListArray.from_arrays(offsets, values, type=file.field.type, mask=mask)

    def _positions(self, file: _VectorFile, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in the file, which rows have one) of these row ids."""
        if file.info.count == self.num_rows:  # every row has a vector: position = row id
            return rows, np.ones(len(rows), bool)
        ids = self._ids(file)
        at = np.minimum(np.searchsorted(ids, rows), max(len(ids) - 1, 0))
        present = ids[at] == rows if len(ids) else np.zeros(len(rows), bool)
        return at, present

    def _whole(self, file: _VectorFile) -> bool:
        """Whether the directory holds the vectors file whole (else pages are fetched first)."""
        return self._pages(file).whole

    def _pages(self, file: _VectorFile) -> FilePages:
        if file.pages is None:
            file.pages = FilePages(self._dir, file.info.vectors_file)
        return file.pages

    def _mapped(self, file: _VectorFile) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, vectors) of the file, memory-mapped (holes where the directory lacks pages)."""
        if file.ids is None or file.matrix is None:
            n, dims = file.info.count, file.info.spec.dims
            path = os.path.join(self._dir, file.info.vectors_file)
            # plain ndarrays over the maps (as vector_index.VectorIndex.open)
            file.ids = np.asarray(np.memmap(path, dtype="<i8", mode="r", shape=(n,))) if n else np.empty(0, np.int64)
            file.matrix = (
                np.asarray(np.memmap(path, dtype="<f4", mode="r", offset=n * 8, shape=(n, dims)))
                if n
                else np.empty((0, dims), np.float32)
            )
        return file.ids, file.matrix

    def _ids(self, file: _VectorFile) -> np.ndarray:
        self._pages(file).ensure([(0, file.info.count * 8)])
        return self._mapped(file)[0]

    def _vectors(self, file: _VectorFile, positions: np.ndarray) -> np.ndarray:
        dims = file.info.spec.dims
        if not len(positions):
            return np.empty((0, dims), np.float32)
        width = dims * 4
        starts = file.info.count * 8 + positions.astype(np.int64) * width
        self._pages(file).ensure(list(zip(starts.tolist(), (starts + width).tolist())))
        return np.asarray(self._mapped(file)[1][positions], dtype=np.float32)


def with_vectors(rows: SplitRows, local_dir: str, footer: SplitFooter, where: str) -> SplitRows:
    """The split's rows, their vector columns kept only in vectors files filled from them."""
    files = {}
    names = {f.name for f in footer.files}
    for column, info in VectorIndexInfo.of_footer(footer.raw, where).items():
        i = rows.schema.get_field_index(column)
        if info.in_row_store or i < 0:
            continue
        if info.vectors_file not in names:
            raise SplitFormatError(f"split {where}: the footer lists no file {info.vectors_file!r} for {column!r}")
        files[column] = _VectorFile(info, rows.schema.field(i))
    return VectorRows(rows, local_dir, files, where) if files else rows
