"""SQL aggregates (`SELECT keys, COUNT/SUM/AVG/MIN/MAX … GROUP BY keys`) over the rows of a
search, with Spark's semantics, Spark-free.

A group of splits yields a *partial*: an Arrow table with one row per group key and, per
aggregate, what merges exactly — row and non-NULL counts, sums (integers as decimal128(38, 0), so
no overflow can hide; doubles as doubles), the least and greatest non-NaN values and the count of
NaNs (Spark orders NaN above every other double). Partials of any grouping of splits merge into
the same result (`merge`), which `finish` turns into rows:
- COUNT(*) / COUNT(col) count rows / non-NULL values (NaN counts);
- SUM of integers is exact; outside the long range it is an overflow (`SumOverflow`: the caller
  lets Spark answer, which raises or wraps as its ANSI setting says); SUM of floats is a double;
- AVG is the sum as a double over the count (Spark's Average: double accumulation, so beyond 2^53
  the last bits may differ, as they do between Spark's own partitionings);
- MIN/MAX: NaN is the greatest double; NULL when the group has no value;
- GROUP BY keys are columns or buckets of a column (buckets.py: the reference's
  indextables_histogram / _date_histogram / _range, with the keys Spark computes for them);
- GROUP BY keeps a NULL group; -0.0 and 0.0 are one group (0.0) and NaNs one group, as Spark
  normalizes float keys; without GROUP BY an empty input is one row (0 counts, NULL values).
Only where these semantics are exact does the SQL planner route a statement here (sqlplan/).

Counting by partition columns needs no rows: each split counts its matches (`count_only`).
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.split.aggregate.buckets import Bucket, bucket_keys
from indextables_spark.errors import IndexTablesError

FUNCTIONS = ("count_star", "count", "sum", "avg", "min", "max")
_ROWS = "__rows"
_INT_TYPES = ("byte", "short", "integer", "long")
_FLOAT_TYPES = ("float", "double")
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class SumOverflow(IndexTablesError):
    """An integer SUM outside the long range (Spark raises or wraps it: let Spark answer)."""


@dataclass(frozen=True)
class SqlAgg:
    function: str  # one of FUNCTIONS
    column: str | None  # None for COUNT(*)
    spark_type: str | None = None  # the column's Spark type name ("long", "double", "string", ...)


@dataclass(frozen=True)
class BucketKey:
    """A GROUP BY key computed from a column by a bucket function (buckets.py)."""

    name: str  # the key's name in the request (not a column's)
    column: str
    spec: Bucket


@dataclass(frozen=True)
class GroupRequest:
    keys: tuple[str, ...]
    aggs: tuple[SqlAgg, ...]
    key_types: tuple[str, ...] = ()
    buckets: tuple[BucketKey, ...] = ()  # the keys that are buckets of a column

    @property
    def columns(self) -> list[str]:
        """Columns the rows must carry: keys (a bucket's column), then aggregated columns (each once)."""
        bucketed = {b.name: b.column for b in self.buckets}
        out: list[str] = []
        for k in self.keys:
            c = bucketed.get(k, k)
            if c not in out:
                out.append(c)
        for a in self.aggs:
            if a.column is not None and a.column not in out:
                out.append(a.column)
        return out

    @property
    def count_only(self) -> bool:
        return all(a.function == "count_star" for a in self.aggs)


def _with_buckets(table: pa.Table, request: GroupRequest) -> pa.Table:
    """The rows with their bucket keys attached."""
    for b in request.buckets:
        table = table.append_column(b.name, bucket_keys(table.column(b.column), b.spec))
    return table


def _normalized_keys(table: pa.Table, request: GroupRequest) -> pa.Table:
    """Float keys as Spark groups them: -0.0 → 0.0 (NaNs already group together in Arrow)."""
    for name, t in zip(request.keys, request.key_types):
        if t in _FLOAT_TYPES:
            col = table.column(name)
            fixed = pc.if_else(pc.equal(col, pa.scalar(0.0, col.type)), pa.scalar(0.0, col.type), col)
            table = table.set_column(table.schema.get_field_index(name), name, fixed)
    return table


def _agg_inputs(table: pa.Table, request: GroupRequest) -> tuple[pa.Table, list[tuple[Any, str, Any]], list[str]]:
    """The table with helper columns, the pyarrow aggregations and the partial's column names."""
    cols: dict[str, pa.ChunkedArray] = {k: table.column(k) for k in request.keys}
    aggs: list[tuple[Any, str, Any]] = [([], "count_all", None)]
    names = [_ROWS]
    for i, a in enumerate(request.aggs):
        if a.function == "count_star":
            continue
        assert a.column is not None
        v = table.column(a.column)
        t = a.spark_type or ""
        cols[f"c{i}"] = v
        aggs.append((f"c{i}", "count", pc.CountOptions(mode="only_valid")))
        names.append(f"c{i}")
        if a.function in ("sum", "avg"):
            if t in _INT_TYPES:
                cols[f"s{i}"] = v.cast(pa.decimal128(38, 0))
            else:
                cols[f"s{i}"] = v.cast(pa.float64())
            aggs.append((f"s{i}", "sum", pc.ScalarAggregateOptions(min_count=1)))
            names.append(f"s{i}")
        if a.function in ("min", "max"):
            if t in _FLOAT_TYPES:
                nan = pc.is_nan(v)
                cols[f"n{i}"] = pc.cast(pc.fill_null(nan, False), pa.int64())
                aggs.append((f"n{i}", "sum", None))
                names.append(f"n{i}")
                v = pc.if_else(nan, pa.scalar(None, v.type), v)
            cols[f"v{i}"] = v
            aggs.append((f"v{i}", "min", None))
            aggs.append((f"v{i}", "max", None))
            names += [f"v{i}_min", f"v{i}_max"]
    return pa.table(cols), aggs, names


def partial(tables: Iterable[pa.Table], request: GroupRequest) -> pa.Table:
    """The partial of some rows (tables with the request's columns)."""
    parts = [t for t in tables if t.num_rows]
    out = [_partial_of(t, request) for t in parts]
    return merge(out, request) if len(out) != 1 else out[0]


def _partial_of(table: pa.Table, request: GroupRequest) -> pa.Table:
    table = _normalized_keys(_with_buckets(table, request), request)
    data, aggs, names = _agg_inputs(table, request)
    if not data.num_columns:  # COUNT(*) alone, no keys: Arrow cannot group a table without columns
        return pa.table({_ROWS: pa.array([table.num_rows], pa.int64())})
    grouped = data.group_by(list(request.keys), use_threads=False).aggregate(
        [(c, f, o) if o is not None else (c, f) for c, f, o in aggs]
    )
    return _rename(grouped, request, names)


def _rename(grouped: pa.Table, request: GroupRequest, names: list[str]) -> pa.Table:
    """pyarrow names outputs `<col>_<fn>`: back to the partial's names (keys, then `names`)."""
    cols = {k: grouped.column(k) for k in request.keys}
    cols[_ROWS] = grouped.column("count_all")
    for n in names[1:]:
        if n.endswith("_min") or n.endswith("_max"):
            cols[n] = grouped.column(n)
        else:
            fn = "count" if n.startswith("c") else "sum"
            cols[n] = grouped.column(f"{n}_{fn}")
    return pa.table(cols)


def count_partial(
    counts: Sequence[tuple[dict[str, Any], int]], request: GroupRequest, key_schema: pa.Schema
) -> pa.Table:
    """The partial of COUNT(*) grouped by partition columns from per-split counts: (the split's
    partition values as Python values, its matching rows)."""
    rows = [(vals, n) for vals, n in counts if n]
    cols: dict[str, pa.Array] = {
        k: pa.array([vals.get(k) for vals, _ in rows], key_schema.field(k).type) for k in request.keys
    }
    cols[_ROWS] = pa.array([n for _, n in rows], pa.int64())
    table = _normalized_keys(pa.table(cols), request)
    return merge([table], request) if rows else table


def merge(partials: Sequence[pa.Table], request: GroupRequest) -> pa.Table:
    """Partials of disjoint rows → one partial."""
    parts = [p for p in partials if p.num_rows]
    if not parts:
        return partials[0] if partials else pa.table({_ROWS: pa.array([], pa.int64())})
    table = pa.concat_tables(parts, promote_options="default")
    aggs: list[tuple[str, str]] = []
    for n in table.column_names:
        if n in request.keys:
            continue
        if n.endswith("_min"):
            aggs.append((n, "min"))
        elif n.endswith("_max"):
            aggs.append((n, "max"))
        else:
            aggs.append((n, "sum"))
    grouped = table.group_by(list(request.keys), use_threads=False).aggregate(aggs)
    cols = {k: grouped.column(k) for k in request.keys}
    for n, fn in aggs:
        cols[n] = grouped.column(f"{n}_{fn}")
    return pa.table(cols)


def finish(merged: pa.Table, request: GroupRequest) -> list[tuple[Any, ...]]:
    """Rows of (keys..., aggregates...) in the request's order (see the module doc for the rules)."""
    if merged.num_rows == 0 and not request.keys:
        return [tuple(0 if a.function in ("count_star", "count") else None for a in request.aggs)]
    data = merged.to_pydict()
    out = []
    for r in range(merged.num_rows):
        row: list[Any] = [data[k][r] for k in request.keys]
        for i, a in enumerate(request.aggs):
            row.append(_value(a, i, data, r))
        out.append(tuple(row))
    return out


def _value(a: SqlAgg, i: int, data: dict[str, list[Any]], r: int) -> Any:
    if a.function == "count_star":
        return int(data[_ROWS][r] or 0)
    n = int(data[f"c{i}"][r] or 0)
    if a.function == "count":
        return n
    if n == 0:
        return None
    if a.function in ("sum", "avg"):
        s = data[f"s{i}"][r]
        if isinstance(s, decimal.Decimal):
            if a.function == "avg":
                return float(s) / n if abs(s) < 2**53 else float(decimal.Decimal(s) / n)
            total = int(s)
            if not LONG_MIN <= total <= LONG_MAX:
                raise SumOverflow(f"sum of column {a.column!r} is {total}, outside the long range")
            return total
        return s if a.function == "sum" else s / n
    nans = int(data.get(f"n{i}", [0] * (r + 1))[r] or 0)
    lo, hi = data[f"v{i}_min"][r], data[f"v{i}_max"][r]
    if a.function == "max":
        return math.nan if nans else hi
    return lo if lo is not None else (math.nan if nans else None)
