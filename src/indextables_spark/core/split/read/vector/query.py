"""What a vector search asks (NearestQuery: the column, the query vector, k, the fusion and the
graph settings), built once from a caller's arguments (NearestQuery.build: IndexTable.search's,
and a Spark read's options), then checked against the table's vector columns and bound to its
column's declaration when the read is planned (bound_to_table). ReadPlan carries it to every
split (read/plan.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from indextables_spark.config.options import Options
from indextables_spark.core.schema.types import ColumnSpec, VectorSpec
from indextables_spark.core.split.read.vector.fusion_spec import Fusion
from indextables_spark.core.split.read.vector.nearest import EXACT_BELOW, EXPANSION
from indextables_spark.errors import InvalidOptionError

DEFAULT_K = 10  # rows a vector search returns when no limit is given


@dataclass(frozen=True)
class NearestQuery:
    """A vector search: the `k` rows whose `column` is nearest `vector`; with `fusion`, fused with
    the read's full-text query (else that query, like the filters, only selects the rows)."""

    column: str
    vector: tuple[float, ...]
    k: int
    fusion: Fusion | None = None
    expansion: int = EXPANSION
    exact_below: int = EXACT_BELOW
    # the table's declaration of `column` (bound_to_table): how a split written before the column
    # was declared a vector has its vectors compared (reader.vector_index)
    spec: VectorSpec | None = None

    def __post_init__(self) -> None:
        if self.k < 1:
            raise InvalidOptionError(f"a vector search needs k >= 1 (got {self.k})")
        if not self.vector or not all(math.isfinite(v) for v in self.vector):
            raise InvalidOptionError(f"the query vector of {self.column!r} must be non-empty and finite")

    @classmethod
    def build(
        cls,
        vector: Any,
        k: int | None,
        fusion: Fusion | None,
        options: Options,
        *,
        column: str | None,
        vector_columns: Sequence[str],
        where: str,
        column_option: str,
    ) -> NearestQuery:
        """The vector search a read asks for (InvalidOptionError for what it cannot be): on
        `column` (None: the table's only one among `vector_columns`; `column_option` is how the
        caller names it, when it must), the query `vector` (numbers), `k` (None: DEFAULT_K), the
        `fusion` (every route's argument parsed once by fusion_spec.parse_fusion; None: the query,
        if any, only selects the rows) and the graph settings of `options` (search.vector.expansion
        / exactBelow). Its dimensions are bound_to_table's."""
        values = vector_values(vector, "search(): vector")
        return cls(
            search_column(column, vector_columns, where, column_option),
            values,
            DEFAULT_K if k is None else int(k),
            fusion,
            expansion=options.get_int("search.vector.expansion"),
            exact_below=options.get_int("search.vector.exactBelow"),
        )

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.vector, dtype=np.float32)

    @property
    def wanted(self) -> int:
        """How many neighbours each split returns: k, or the fusion window."""
        return self.fusion.window_for(self.k) if self.fusion is not None else self.k


def search_column(column: str | None, vector_columns: Sequence[str], where: str, column_option: str) -> str:
    """The column a vector search runs on, THE choice of every route (the search join's too):
    `column`, else the table's only one among `vector_columns` (`column_option`: how the caller
    names it, when it must); InvalidOptionError naming the table's vector columns otherwise."""
    if column is not None:
        if column not in vector_columns:
            raise InvalidOptionError(
                f"table {where}: {column!r} is not a vector column (vector columns: {sorted(vector_columns) or 'none'}; "
                f"declare one with indexing.vector.<col> when the table is created)"
            )
        return column
    if not vector_columns:
        raise InvalidOptionError(
            f"table {where} has no vector column to search: declare an array<float> column a vector "
            "when writing, spark.indextables.indexing.vector.<column>=<dimensions>[,<metric>] "
            "(e.g. '384,cosine'); a later append may declare it for a column the table has"
        )
    if len(vector_columns) != 1:
        raise InvalidOptionError(
            f"table {where}: name the vector column ({column_option}): its vector columns are {list(vector_columns)}"
        )
    return vector_columns[0]


def bound_to_table(specs: Sequence[ColumnSpec], nearest: NearestQuery, where: str) -> NearestQuery:
    """`nearest` with its column's declaration among the table's column specs (`spec`), once when
    the read is planned; InvalidOptionError unless it names a vector column and matches its
    dimensions."""
    vectors = {s.name: s.vector for s in specs if s.vector is not None}
    spec = vectors[search_column(nearest.column, list(vectors), where, "")]
    if len(nearest.vector) != spec.dims:
        raise InvalidOptionError(
            f"table {where}: the query vector has {len(nearest.vector)} dimensions, column {nearest.column!r} {spec.dims}"
        )
    return replace(nearest, spec=spec)


def vector_values(vector: Any, what: str) -> tuple[float, ...]:
    """A query vector's components (InvalidOptionError naming `what` unless a sequence of numbers)."""
    try:
        return tuple(float(v) for v in vector)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"{what} must be a sequence of numbers, got {str(vector)[:80]}") from None


def vector_columns(specs: Sequence[ColumnSpec]) -> list[str]:
    """The vector columns among these column specs."""
    return [s.name for s in specs if s.vector is not None]
