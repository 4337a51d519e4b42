"""A split's vectors gathered while its rows are written (SplitWriter), checked before anything is
uploaded: every vector of a column declared with `indexing.vector.<col>` has the declared number of
dimensions, finite components and (for `cosine`) a direction. A row whose vector is NULL is stored
as NULL and left out of the column's nearest-neighbour index: a vector search never returns it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema.types import ColumnSpec, VectorSpec
from indextables_spark.errors import SchemaMismatchError

# The AddFile tag (Delta-style `tags`) of a split with vector columns: the milliseconds its task
# spent building their indexes (and writing their vectors files). A write's commitInfo sums it
# (ops/write/write.py); DESCRIBE INDEXTABLES TRANSACTION LOG shows it per split.
BUILD_TAG = "vectorIndexBuildMs"


def vector_matrix(column: pa.Array | pa.ChunkedArray, spec: VectorSpec, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(positions of the rows holding a vector, their vectors as a float32 matrix) of a list
    column; SchemaMismatchError naming `where` (the column and the rows) for a vector of other
    dimensions, a NULL or non-finite component, or a zero vector under `cosine`."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not (
        pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or pa.types.is_fixed_size_list(column.type)
    ):
        raise SchemaMismatchError(f"{where}: expected a list of numbers, got Arrow type {column.type}")
    present = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
    if len(present) == len(column):
        values = column
    else:
        values = column.take(pa.array(present, pa.int64()))
    lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
    wrong = np.flatnonzero(lengths != spec.dims)
    if len(wrong):
        row = int(present[wrong[0]])
        raise SchemaMismatchError(
            f"{where}: row {row} has a vector of {int(lengths[wrong[0]])} dimensions, the column is declared "
            f"with {spec.dims} ({len(wrong)} such rows)"
        )
    flat = pc.list_flatten(values)
    if flat.null_count:
        nulls = np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False)) // spec.dims
        raise SchemaMismatchError(f"{where}: row {int(present[nulls[0]])} has a NULL component in its vector")
    matrix = flat.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, spec.dims)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise SchemaMismatchError(
            f"{where}: row {int(present[bad])} has a NaN or infinite component (or one beyond float32) in its vector"
        )
    if spec.metric == "cosine":
        zero = ~np.any(matrix != 0, axis=1)
        if zero.any():
            raise SchemaMismatchError(
                f"{where}: row {int(present[int(np.flatnonzero(zero)[0])])} has a zero vector, which has no cosine "
                f"distance to anything"
            )
    return present.astype(np.int64), matrix


def outside_rows(row_schema: pa.Schema, specs: Sequence[ColumnSpec], stores_rows: bool) -> dict[str, int]:
    """The vector columns (name -> position in the row store) whose split's vectors file is their
    one copy: those of float32 vectors. The row store holds them as empty lists (`without_vectors`),
    reads take their values from the vectors file (cache/vector_rows.py); an array<double> column
    keeps its exact values in the row store. None for a split without a row store (`stores_rows`
    False: a companion split's rows are its source's)."""
    names = {s.name for s in specs if s.vector is not None and stores_rows}
    return {f.name: i for i, f in enumerate(row_schema) if f.name in names and pa.types.is_float32(f.type.value_type)}


def without_vectors(batch: pa.RecordBatch, outside: Mapping[str, int]) -> pa.RecordBatch:
    """The rows as the row store holds them: each column of `outside` as empty lists (valid for
    a non-nullable column too; the vectors file says which rows have a vector)."""
    for i in outside.values():
        field = batch.schema.field(i)
        offsets = pa.array(np.zeros(batch.num_rows + 1, np.int32))
        empty = pa.ListArray.from_arrays(offsets, pa.array([], field.type.value_type), type=field.type)
        batch = batch.set_column(i, field, empty)
    return batch


@dataclass
class VectorCollector:
    """One vector column's vectors of one split, with their row ids, as rows arrive in row order."""

    name: str
    spec: VectorSpec
    # whether the split's row store keeps the column's values (array<double>: the exact doubles);
    # else it holds empty lists and the vectors file is the column's one copy (cache/vector_rows.py)
    in_row_store: bool = True
    ids: list[np.ndarray] = field(default_factory=list)
    parts: list[np.ndarray] = field(default_factory=list)

    def add(self, column: pa.Array | pa.ChunkedArray, first_row: int, where: str) -> None:
        present, matrix = vector_matrix(column, self.spec, f"{where}, column {self.name!r}")
        if len(present):
            self.ids.append(present + first_row)
            self.parts.append(matrix)

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, float32 matrix) of every vector gathered."""
        if not self.parts:
            return np.empty(0, np.int64), np.empty((0, self.spec.dims), np.float32)
        return np.concatenate(self.ids), np.concatenate(self.parts)


def collectors(specs: Sequence[ColumnSpec], outside: Mapping[str, int]) -> dict[str, VectorCollector]:
    """A new split's collectors of its vector columns (`outside`: those the row store leaves out)."""
    return {s.name: VectorCollector(s.name, s.vector, s.name not in outside) for s in specs if s.vector is not None}


def write_vector_indexes(
    collectors: Mapping[str, VectorCollector], tmp_dir: str, extra: dict[str, Any]
) -> tuple[list[str], dict[str, str] | None]:
    """Each vector column's nearest-neighbour index built into a split's temp directory: (the files
    to bundle, the split's tags: BUILD_TAG, the build's milliseconds; None without vector columns).
    The split footer's `vectors` entry (`extra`) describes them (vector_index.py)."""
    if not collectors:
        return [], None
    from indextables_spark.core.split.format.vector_index import (  # lazy: faiss only for vector tables
        ROW_STORE_KEY,
        VECTORS_KEY,
        VectorIndexInfo,
        build_index,
        index_file_names,
        library_name,
    )

    started = time.perf_counter()
    files, described = [], {}
    for i, (name, collector) in enumerate(collectors.items()):
        ids, matrix = collector.finish()
        graph, vectors = (os.path.join(tmp_dir, n) for n in index_file_names(i))
        params, written = build_index(ids, matrix, collector.spec, graph, vectors)
        if not collector.in_row_store:
            params[ROW_STORE_KEY] = False
        info = VectorIndexInfo(
            name,
            os.path.basename(graph) if written else "",
            os.path.basename(vectors),
            collector.spec,
            len(ids),
            library_name(),
            params,
        )
        described[name] = info.to_json()
        files += [graph, vectors] if written else [vectors]
    extra[VECTORS_KEY] = described
    return files, {BUILD_TAG: str(round((time.perf_counter() - started) * 1000))}
