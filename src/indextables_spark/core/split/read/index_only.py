"""Filters on index-only columns (`indexing.indexonlyfields`): the rows hold NULL in their place,
so the index alone answers them, exactly or not at all. Which filters those are, their Tantivy
query, the refusal naming a filter the index cannot answer exactly, and the check a scan makes
before any split is read (read/scan.py; per split the reader checks again with its doc mapping)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from indextables_spark.core.schema.types import ColumnSpec, index_only_columns, specs_by_name
from indextables_spark.core.split.format.doc_mapping import tantivy_schema
from indextables_spark.core.split.read.tantivy_query import FilterQueryBuilder
from indextables_spark.expr.model import EqualNullSafe, Filter, In, IsNotNull, columns_of, render
from indextables_spark.expr.values import (
    COMPARISONS,
    STRING_MATCHES,
    UnsupportedFilterError,
    lookup_spec,
    unquote_column,
)

if TYPE_CHECKING:
    import tantivy


def index_only_filters(
    filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]
) -> tuple[list[Filter], list[Filter]]:
    """(the filters reading an index-only column, the others). The former are the index's to
    answer: the rows hold NULL in place of an index-only column (`indexing.indexonlyfields`)."""
    only = index_only_columns(specs_by_name(specs).values())
    if not only:
        return [], list(filters)
    on = [f for f in filters if any(unquote_column(c).lower() in only for c in columns_of(f))]
    return on, [f for f in filters if not any(f is g for g in on)]


def index_only_query(
    schema: tantivy.Schema,
    filters: Sequence[Filter],
    specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec],
    where: str,
) -> tantivy.Query | None:
    """The index's exact answer to filters on index-only columns (None without filters). A filter
    the index answers only approximately (a superset the rows would re-check) has no answer: the
    rows do not hold the column, so UnsupportedFilterError names the filter and the column."""
    by_name = specs_by_name(specs)
    q = FilterQueryBuilder(schema, by_name)
    parts = []
    for f in without_implied_not_null(filters):
        sub, exact = q.build(f)
        if sub is None or not exact:
            raise UnsupportedFilterError(index_only_message(f, by_name, where))
        parts.append(sub)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else q.must(parts)


def without_implied_not_null(filters: Sequence[Filter]) -> list[Filter]:
    """The conjuncts without the `c IS NOT NULL` another conjunct implies (`c = v`, `c > v`,
    `c IN (..)`, `c LIKE ..`: never true where c is NULL). Spark adds one to every such filter, and
    an index that cannot tell NULL from a value it left out (a reference split's raw field) need
    not answer it."""
    rejecting = {
        unquote_column(str(getattr(f, "column", ""))).lower()
        for f in filters
        if isinstance(f, COMPARISONS + STRING_MATCHES + (In,))
        and not (isinstance(f, EqualNullSafe) and f.value is None)  # (that one is IS NULL)
    }
    return [f for f in filters if not (isinstance(f, IsNotNull) and unquote_column(f.column).lower() in rejecting)]


def _index_only_subject(f: Filter, specs: Mapping[str, ColumnSpec], where: str) -> tuple[str, list[str]]:
    cols = sorted(
        {unquote_column(c) for c in columns_of(f) if (s := lookup_spec(specs, c)) is not None and s.index_only}
    )
    plural = "s" if len(cols) > 1 else ""
    return f"filter {render(f)} on index-only column{plural} {', '.join(map(repr, cols))} ({where})", cols


def index_only_message(f: Filter, specs: Mapping[str, ColumnSpec], where: str) -> str:
    subject, cols = _index_only_subject(f, specs, where)
    lost = [c for c in cols if (s := lookup_spec(specs, c)) is not None and not s.indexed_fields]
    if lost:
        return (
            f"{subject}: {', '.join(map(repr, lost))} is not in the split's row store and its index cannot answer "
            f"this filter here (an index-only field IndexTables4Spark wrote, indexing.indexonlyfields, of a type "
            f"this reader does not query: dates, timestamps, binary, IP addresses; it reads as NULL)"
        )
    kinds = sorted({s.kind for c in cols if (s := lookup_spec(specs, c)) is not None})
    limits = sorted(
        {
            f.max_value_bytes
            for c in cols
            if (s := lookup_spec(specs, c)) is not None
            for f in s.indexed_fields
            if f.max_value_bytes is not None
        }
    )
    if limits:  # a reference split's raw field: only the values it indexed can be asked for
        return (
            f"{subject}: the rows do not hold an index-only column (indexing.indexonlyfields; it reads as NULL), "
            f"and this split (IndexTables4Spark's) leaves string values of {limits[0]} bytes or more out of its "
            f"index, so it answers only = and IN of shorter strings exactly (not IS [NOT] NULL, LIKE or "
            f"comparisons); search text with a query (`{cols[0] if cols else 'column'}:term`, it.fieldmatch, "
            f"indexquery)"
        )
    return (
        f"{subject}: the rows do not hold an index-only column (indexing.indexonlyfields; it reads as NULL), "
        f"and the index answers this filter only approximately (column kind {'/'.join(kinds)}). The index "
        f"answers exactly: =, IN, IS [NOT] NULL and LIKE 'prefix%' on strings (not on tokenized text), "
        f"comparisons on integers, dates and timestamps, = on booleans, AND/OR of those and NOT of one; search text "
        f"with a query (`{cols[0] if cols else 'column'}:term`, it.fieldmatch, indexquery)"
    )


def check_index_only(
    filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec], where: str
) -> list[Filter]:
    """The filters on index-only columns, checked before any split is read: each must be answered
    exactly by the index (UnsupportedFilterError otherwise) and must not read a partition column
    (those are decided on the rows). Per split the reader checks again with its own doc mapping."""
    by_name = specs_by_name(specs)
    on, _ = index_only_filters(filters, by_name)
    if not on:
        return []
    for f in on:
        if any((s := lookup_spec(by_name, c)) is not None and s.partition for c in columns_of(f)):
            raise UnsupportedFilterError(
                f"{_index_only_subject(f, by_name, where)[0]}: it also reads a partition column; the index "
                f"answers filters on an index-only column, the log those on partition columns: filter each in "
                f"its own condition (AND)"
            )
    index_only_query(tantivy_schema([s for s in by_name.values() if not s.partition]), on, by_name, where)
    return on
