"""Exact aggregations over a table's splits (Spark-free): plan → per-split partials → merge → result.

Requests use the Elasticsearch / Tantivy aggregation syntax with column names:

    {"by_region": {"terms": {"field": "region", "size": 10},
                   "aggs": {"views": {"stats": {"field": "views"}}}},
     "p": {"percentiles": {"field": "score", "percents": [50, 99]}}}

Kinds: terms, histogram, date_histogram (fixed_interval, or calendar_interval day/week/month/
quarter/year), range (bucket kinds, may nest), stats, avg, min, max, sum, value_count,
percentiles, cardinality.

Each split computes a *partial* that merges exactly:
- Tantivy runs terms/histogram/range/stats on fast fields, asked for every bucket (terms `size`
  is applied only after the merge, so merged top-k is exact, not a per-split top-k estimate;
  histograms ask min_doc_count 1 and empty buckets are filled in after the merge).
- percentiles and cardinality are exact, unlike Tantivy's sketches: the split hands over the
  distinct values of the matching rows (with their counts), taken from the columnar row store;
  the merged distribution gives Spark's `percentile` (linear interpolation) and
  `count(DISTINCT)`. They run at the top level or under a terms on a partition column.
- terms with more than Tantivy's 65,000 buckets in one split fall back to the row store (value
  counts), when they have no sub-aggregations.
- Stats of a double column holding NaN/±Infinity and of decimal columns come from the row store
  at the top level (Spark semantics, exact decimals); under buckets they come from the index's
  f64 values (decimals approximate; a non-finite double raises).
- terms on a partition column need no index at all: each split is one bucket.
Rows whose field is NULL fall in no bucket and no metric (like Spark's aggregate functions;
Spark's groupBy would show a NULL group).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.errors import IndexTablesError
from indextables_spark.util.lru import LruCache
from indextables_spark.core.split._tantivy import tantivy_call
from indextables_spark.core.split.partitions import date_to_days, datetime_to_micros, parse_partition_value
from indextables_spark.core.split.stats import chunk_min_max
from indextables_spark.core.split.types import STRING_KINDS, ColumnSpec

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.config.options import Options
    from indextables_spark.core.split.reader import SplitReader

BUCKET_KINDS = ("terms", "histogram", "date_histogram", "range")
STATS_KINDS = ("stats", "avg", "min", "max", "sum", "value_count")
VALUE_KINDS = ("percentiles", "cardinality")  # exact, from the row store
KINDS = BUCKET_KINDS + STATS_KINDS + VALUE_KINDS
ALL_BUCKETS = 2**31 - 1
F64_MAX = 1.7976931348623157e308
_NUMERIC = ("i64", "f64", "decimal")
_TEMPORAL = ("date", "timestamp")
_US = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
_EPOCH = dt.date(1970, 1, 1)


class AggregationError(IndexTablesError):
    """An aggregation request is invalid for the table (names the aggregation and the column)."""


@dataclass(frozen=True)
class Agg:
    name: str
    kind: str
    column: str
    col_kind: str  # ColumnSpec kind; partition columns keep their atomic kind
    spark_type: Any
    partition: bool
    params: Mapping[str, Any] = field(default_factory=dict)
    subs: tuple["Agg", ...] = ()

    @property
    def where(self) -> str:
        return f"aggregation {self.name!r} ({self.kind} on column {self.column!r})"


# ---------------------------------------------------------------------------------------------
# Planning (driver): validate the request against the table's columns


def parse_request(aggs: Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(aggs, str):
        text = aggs
        try:
            aggs = json.loads(text)
        except json.JSONDecodeError as e:
            raise AggregationError(f"aggregation request is not valid JSON: {e}: {text[:200]!r}") from None
    if not isinstance(aggs, Mapping) or not aggs:
        raise AggregationError(
            f"aggregation request must be a non-empty object {{name: {{kind: {{...}}}}}}, got {str(aggs)[:200]}"
        )
    return dict(aggs)


def plan(aggs: Mapping[str, Any] | str, specs: Sequence[ColumnSpec]) -> tuple[Agg, ...]:
    """Validated aggregations for a table whose columns are `specs` (partition columns included)."""
    by_name = {s.name: s for s in specs}
    return _plan_level(parse_request(aggs), by_name, parent=None)


def _plan_level(request: Mapping[str, Any], by_name: Mapping[str, ColumnSpec], parent: Agg | None) -> tuple[Agg, ...]:
    out = []
    for name, body in request.items():
        if not isinstance(body, Mapping):
            raise AggregationError(f'aggregation {name!r}: expected an object like {{"terms": {{...}}}}, got {body!r}')
        kinds = [k for k in body if k not in ("aggs", "aggregations")]
        if len(kinds) != 1 or kinds[0] not in KINDS:
            raise AggregationError(f"aggregation {name!r}: expected exactly one of {', '.join(KINDS)}, got {kinds}")
        kind = kinds[0]
        params = body[kind]
        if not isinstance(params, Mapping) or not isinstance(params.get("field"), str):
            raise AggregationError(f'aggregation {name!r} ({kind}): needs a "field" naming a column')
        column = params["field"]
        spec = by_name.get(column)
        if spec is None:
            raise AggregationError(f"aggregation {name!r} ({kind}): no column {column!r} (columns: {sorted(by_name)})")
        agg = Agg(name, kind, column, spec.kind, spec.spark_type, spec.partition, dict(params))
        _check(agg, spec, parent)
        sub_request = body.get("aggs", body.get("aggregations")) or {}
        if sub_request and kind not in BUCKET_KINDS:
            raise AggregationError(
                f"{agg.where}: only bucket aggregations ({', '.join(BUCKET_KINDS)}) take sub-aggregations"
            )
        subs = _plan_level(parse_request(sub_request), by_name, agg) if sub_request else ()
        out.append(Agg(name, kind, column, spec.kind, spec.spark_type, spec.partition, dict(params), subs))
    return tuple(out)


def _check(agg: Agg, spec: ColumnSpec, parent: Agg | None) -> None:
    k, kind = agg.kind, spec.kind
    per_split_parent = parent is None or (parent.kind == "terms" and parent.partition)
    if not spec.partition and not spec.indexed_fields and kind != "binary":
        raise AggregationError(
            f"{agg.where}: {agg.column!r} is stored only (indexing.storeonly): it has no "
            f"index or fast field to aggregate"
        )
    field = spec.exact_field or spec.value_field
    from_rows = k in VALUE_KINDS or (k in STATS_KINDS and (kind == "decimal" or kind not in _NUMERIC + _TEMPORAL))
    if spec.index_only and from_rows:
        raise AggregationError(
            f"{agg.where}: {agg.column!r} is index-only (indexing.indexonlyfields): {k} of a {kind} column is "
            f"computed from the rows, which do not hold it"
        )
    if not spec.partition and kind not in ("text", "json", "binary") and field is not None and not field.fast:
        if not from_rows:
            raise AggregationError(
                f"{agg.where}: {agg.column!r} has no fast field (indexing.nonfastfields): {k} is computed "
                f"from fast fields; aggregate it in Spark, or write the column without nonfastfields"
            )
    if spec.partition:
        if k != "terms":
            raise AggregationError(
                f"{agg.where}: {agg.column!r} is a partition column; only terms aggregates partition columns"
            )
        if not per_split_parent:
            raise AggregationError(
                f"{agg.where}: terms on a partition column may only be top-level or under "
                f"another terms on a partition column"
            )
        return
    if k in VALUE_KINDS and not per_split_parent:
        raise AggregationError(
            f"{agg.where}: {k} is exact and runs only at the top level or under terms on a partition column"
        )
    if k == "terms":
        if kind == "text" and not (spec.value_field and spec.value_field.fast):
            raise AggregationError(
                f"{agg.where}: {agg.column!r} is a tokenized text column without a fast field; index it with "
                f"indexing.typemap.{agg.column}=string or text_and_string (whole values), or list it in "
                f"indexing.fastfields (counts tokens)"
            )
        if kind in ("json", "binary"):
            raise AggregationError(f"{agg.where}: cannot group by a {kind} column")
        _size(agg)
        return
    if k == "cardinality":
        if kind in ("json",):
            raise AggregationError(f"{agg.where}: cardinality of a {kind} column is not supported")
        return
    if k == "date_histogram":
        if kind not in _TEMPORAL:
            raise AggregationError(
                f"{agg.where}: date_histogram needs a date or timestamp column, {agg.column!r} is {kind}"
            )
        _date_interval(agg)
        return
    numeric = kind in _NUMERIC or (kind in _TEMPORAL and k in ("stats", "min", "max", "value_count", "range"))
    if k == "percentiles" and kind in _NUMERIC:
        _percents(agg)
        return
    if k == "value_count" and kind in STRING_KINDS | {"bool", "binary"}:
        if not per_split_parent:
            raise AggregationError(f"{agg.where}: value_count of a {kind} column runs only at the top level")
        return
    if not numeric:
        raise AggregationError(f"{agg.where}: needs a numeric column, {agg.column!r} is {kind}")
    if k == "histogram":
        iv = agg.params.get("interval")
        if not isinstance(iv, (int, float)) or isinstance(iv, bool) or not iv > 0:
            raise AggregationError(f'{agg.where}: histogram needs a positive "interval", got {iv!r}')
    if k == "range":
        _ranges(agg)


def _size(agg: Agg) -> int:
    size = agg.params.get("size", 10)
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise AggregationError(f'{agg.where}: "size" must be a positive integer, got {size!r}')
    order = agg.params.get("order", {"_count": "desc"})
    if not (
        isinstance(order, Mapping)
        and len(order) == 1
        and next(iter(order)) in ("_count", "_key")
        and str(next(iter(order.values()))).lower() in ("asc", "desc")
    ):
        raise AggregationError(f'{agg.where}: "order" must be {{"_count"|"_key": "asc"|"desc"}}, got {order!r}')
    return size


def _percents(agg: Agg) -> list[float]:
    ps = agg.params.get("percents", [1, 5, 25, 50, 75, 95, 99])
    if (
        not isinstance(ps, list)
        or not ps
        or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 100 for p in ps)
    ):
        raise AggregationError(f'{agg.where}: "percents" must be a list of numbers in [0, 100], got {ps!r}')
    return [float(p) for p in ps]


@dataclass(frozen=True)
class _Interval:
    fixed: int | None  # in column units (days for date, microseconds for timestamp)
    calendar: str | None  # month | quarter | year
    offset: int  # in column units


def _date_interval(agg: Agg) -> _Interval:
    p = agg.params
    unit_us = 86_400_000_000 if agg.col_kind == "date" else 1
    offset = _duration_us(agg, p["offset"]) // unit_us if "offset" in p else 0
    if "fixed_interval" in p:
        us = _duration_us(agg, p["fixed_interval"])
        if us <= 0 or us % unit_us:
            raise AggregationError(
                f"{agg.where}: fixed_interval {p['fixed_interval']!r} must be a positive whole "
                f"number of {'days' if unit_us > 1 else 'microseconds'}"
            )
        return _Interval(us // unit_us, None, offset)
    cal = str(p.get("calendar_interval", "")).lower().lstrip("1")
    if cal in ("d", "day"):
        return _Interval(86_400_000_000 // unit_us, None, offset)
    if cal in ("w", "week"):  # weeks start on Monday; 1970-01-05 was one
        return _Interval(7 * 86_400_000_000 // unit_us, None, offset + 4 * 86_400_000_000 // unit_us)
    if cal in ("m", "month", "q", "quarter", "y", "year"):
        return _Interval(None, {"m": "month", "q": "quarter", "y": "year"}.get(cal, cal), offset)
    raise AggregationError(
        f'{agg.where}: needs fixed_interval (e.g. "7d", "6h") or calendar_interval '
        f"(day, week, month, quarter, year), got {dict(p)}"
    )


def _duration_us(agg: Agg, text: Any) -> int:
    s = str(text).strip().lower()
    sign = -1 if s.startswith("-") else 1
    s = s.lstrip("+-")
    for unit in ("ms", "s", "m", "h", "d"):
        if s.endswith(unit) and s[: -len(unit)].isdigit():
            return sign * int(s[: -len(unit)]) * _US[unit]
    raise AggregationError(f"{agg.where}: cannot read duration {text!r} (use e.g. 30s, 15m, 6h, 7d)")


def _to_units(agg: Agg, v: Any) -> Any:
    """A bound given by the user, in the column's index units (days / microseconds / number)."""
    if v is None:
        return None
    if agg.col_kind == "date":
        if isinstance(v, str):
            v = dt.date.fromisoformat(v)
        if isinstance(v, dt.datetime):
            v = v.date()
        if isinstance(v, dt.date):
            return date_to_days(v)
    elif agg.col_kind == "timestamp":
        if isinstance(v, str):
            v = dt.datetime.fromisoformat(v)
        if isinstance(v, dt.datetime):
            if v.tzinfo is None and str(agg.spark_type) == "timestamp":
                v = v.replace(tzinfo=dt.timezone.utc)
            return datetime_to_micros(v)
    if isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
        return float(v) if isinstance(v, decimal.Decimal) else v
    raise AggregationError(f"{agg.where}: bound {v!r} does not fit column kind {agg.col_kind}")


def _ranges(agg: Agg) -> list[tuple[Any, Any, str]]:
    rs = agg.params.get("ranges")
    if not isinstance(rs, list) or not rs:
        raise AggregationError(f'{agg.where}: range needs a non-empty "ranges" list of {{from, to}}')
    out = []
    for r in rs:
        if not isinstance(r, Mapping) or not ({"from", "to"} & set(r)):
            raise AggregationError(f'{agg.where}: each range needs "from" and/or "to", got {r!r}')
        lo, hi = r.get("from"), r.get("to")
        key = r.get("key") or f"{'*' if lo is None else lo}-{'*' if hi is None else hi}"
        out.append((_to_units(agg, lo), _to_units(agg, hi), str(key)))
    return out


# ---------------------------------------------------------------------------------------------
# Per split (executor or driver thread)


@dataclass
class _SplitCtx:
    reader: SplitReader
    searcher: tantivy.Searcher
    query: tantivy.Query
    has_query: bool
    partition_values: Mapping[str, str | None]
    doc_count: int
    specs: Mapping[str, ColumnSpec]
    _rows: list[int] | None = None

    def field_of(self, agg: Agg) -> str:
        spec = self.specs.get(agg.column)
        f = (spec.exact_field or spec.value_field) if spec is not None else None
        if spec is not None and spec.kind == "text":
            f = spec.value_field
        if f is None or not f.fast:
            raise AggregationError(
                f"{agg.where}: column {agg.column!r} has no fast field in split "
                f"{self.reader.local_dir} (see indexing.fastfields and indexing.nonfastfields)"
            )
        return f.name

    def values(self, column: str) -> pa.Array:
        """The column's values on the matching rows, nulls dropped (from the row store)."""
        r = self.reader
        if self.has_query:
            if self._rows is None:
                self._rows = r.matching_rows((self.query, True, True)) or []
            chunks = [b.column(column) for b in r.take(self._rows, [column])] if self._rows else []
        else:
            chunks = [r.batch(i, [column]).column(0) for i in range(r.ipc.num_record_batches)]
        typ = r.schema.field(column).type
        arr = pa.chunked_array(chunks, typ).combine_chunks() if chunks else pa.array([], typ)
        return arr.drop_null() if arr.null_count else arr


def split_partial(
    reader: SplitReader,
    query: str | None,
    aggs: Sequence[Agg],
    partition_values: Mapping[str, str | None],
    deletes: Any = None,
) -> dict[str, Any]:
    """The mergeable partial of one split: {"doc_count": n, "aggs": {name: partial}}.
    deletes: the split's log.delete_logs.SplitDeletes (its rows are left out), or None."""
    import tantivy

    searcher = reader.searcher()
    q = reader.parse_query(query) if query is not None else tantivy.Query.all_query()
    dead = dead_rows(reader, deletes) if deletes is not None else []
    if len(dead):
        q = without_rows(reader, q, dead)
    if searcher.num_docs == 0:
        n = 0
    elif query is None and not len(dead):
        n = searcher.num_docs
    else:
        with tantivy_call(f"counting matches in split {reader.local_dir}"):
            n = searcher.search(q, 1, count=True).count
    ctx = _SplitCtx(
        reader,
        searcher,
        q,
        query is not None or bool(len(dead)),
        partition_values,
        n,
        {s.name: s for s in reader.specs},
    )
    return {"doc_count": n, "aggs": _level_partials(ctx, aggs)}


def dead_rows(reader: SplitReader, deletes: Any) -> Any:
    """Sorted row ids of the split's deleted rows (positions, and rows equal to deleted values)."""
    import numpy as np

    dead = [deletes.positions]
    if deletes.equalities:
        for ids, batch in reader.source(None, True):
            assert ids is not None  # asked for with_ids
            keep = deletes.keep_mask(batch, ids)
            if keep is not None:
                dead.append(ids.filter(pc.invert(keep)).to_numpy())
    return np.unique(np.concatenate(dead)) if len(dead) > 1 else dead[0]


def without_rows(reader: SplitReader, q: tantivy.Query, dead: Any) -> tantivy.Query:
    """The query minus the documents of these (sorted) row ids: a range per run of consecutive ids
    on the `__row` fast field, so Tantivy's aggregations never see deleted rows."""
    import numpy as np
    import tantivy

    from indextables_spark.core.split.types import ROW_FIELD

    breaks = np.flatnonzero(np.diff(dead) != 1) + 1
    ranges = [
        tantivy.Query.range_query(reader.index.schema, ROW_FIELD, tantivy.FieldType.Unsigned, int(run[0]), int(run[-1]))
        for run in np.split(dead, breaks)
    ]
    gone = ranges[0] if len(ranges) == 1 else tantivy.Query.boolean_query([(tantivy.Occur.Should, r) for r in ranges])
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, q), (tantivy.Occur.MustNot, gone)])


def _level_partials(ctx: _SplitCtx, aggs: Sequence[Agg]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    in_index = [a for a in aggs if not a.partition and a.kind not in VALUE_KINDS and not _from_rows(a)]
    if in_index and ctx.doc_count:
        request = {a.name: _tantivy_request(a, ctx) for a in in_index}
        try:
            result = ctx.searcher.aggregate(ctx.query, request)
        except ValueError as e:
            if "bucket limit" not in str(e):
                with tantivy_call(f"aggregating split {ctx.reader.local_dir}"):
                    raise
            result = _one_by_one(ctx, in_index, request)
        for a in in_index:
            out[a.name] = _normalize(a, result.get(a.name), ctx, top=True)
    for a in aggs:
        if a.name in out:
            continue
        if ctx.doc_count == 0:
            out[a.name] = _empty(a)
        elif a.partition:
            key = parse_partition_value(ctx.partition_values.get(a.column), a.spark_type)
            out[a.name] = {
                "buckets": {}
                if key is None
                else {key: _bucket_partial(a, ctx.doc_count, lambda: _level_partials(ctx, a.subs))}
            }
        else:
            out[a.name] = _rows_partial(a, ctx)
    return out


def _one_by_one(ctx: _SplitCtx, aggs: Sequence[Agg], request: Mapping[str, Any]) -> dict[str, Any]:
    """After Tantivy's bucket limit: each aggregation alone; a plain terms falls back to the row store."""
    result: dict[str, Any] = {}
    for a in aggs:
        try:
            with tantivy_call(f"aggregating split {ctx.reader.local_dir}"):
                result[a.name] = ctx.searcher.aggregate(ctx.query, {a.name: request[a.name]})[a.name]
        except IndexTablesError as e:
            if "bucket limit" not in str(e):
                raise
            if a.kind != "terms" or a.subs:
                raise AggregationError(
                    f"{a.where}: more than Tantivy's 65,000 buckets in split "
                    f"{ctx.reader.local_dir}; only a terms without sub-aggregations can go "
                    f"beyond (use a coarser interval)"
                ) from None
            result[a.name] = _ROWS_MARK
    return result


_ROWS_MARK = object()


def _from_rows(a: Agg) -> bool:
    """Top-level stats that must come from the row store: decimals (exact only there) and
    value_count of columns without a numeric fast field."""
    return a.kind in STATS_KINDS and (a.col_kind == "decimal" or a.col_kind not in _NUMERIC + _TEMPORAL)


def _tantivy_request(a: Agg, ctx: _SplitCtx) -> dict[str, Any]:
    f = ctx.field_of(a)
    if a.kind == "terms":
        body = {"terms": {"field": f, "size": ALL_BUCKETS, "min_doc_count": 1}}
    elif a.kind in STATS_KINDS:
        body = {"stats": {"field": f}}
    elif a.kind == "histogram":
        body = {
            "histogram": {
                "field": f,
                "interval": a.params["interval"],
                "offset": a.params.get("offset", 0),
                "min_doc_count": 1,
            }
        }
    elif a.kind == "date_histogram":
        iv = _date_interval(a)
        if iv.fixed is not None:
            body = {"histogram": {"field": f, "interval": iv.fixed, "offset": iv.offset % iv.fixed, "min_doc_count": 1}}
        else:
            body = {"range": {"field": f, "ranges": _calendar_ranges(a, iv, ctx, f)}}
    else:  # range
        body = {
            "range": {
                "field": f,
                "ranges": [
                    {k: v for k, v in (("from", lo), ("to", hi), ("key", f"r{i}")) if v is not None}
                    for i, (lo, hi, _) in enumerate(_ranges(a))
                ],
            }
        }
    if a.subs:
        body["aggs"] = {s.name: _tantivy_request(s, ctx) for s in a.subs}
    return body


def _calendar_ranges(a: Agg, iv: _Interval, ctx: _SplitCtx, f: str) -> list[dict[str, Any]]:
    """Calendar buckets (month/quarter/year) as explicit ranges over this split's value span."""
    with tantivy_call(f"aggregating split {ctx.reader.local_dir}"):
        st = ctx.searcher.aggregate(ctx.query, {"s": {"stats": {"field": f}}})["s"]
    if st["min"] is None:
        return [{"to": 0, "key": "none"}]
    starts = _calendar_starts(a, iv, int(st["min"]), int(st["max"]))
    return [{"from": lo, "to": hi, "key": f"c{lo}"} for lo, hi in zip(starts, starts[1:])]


def _calendar_starts(a: Agg, iv: _Interval, lo: int, hi: int) -> list[int]:
    """Bucket start values (column units) covering [lo, hi], plus the end of the last bucket."""
    assert iv.calendar is not None  # only calendar intervals (fixed is None) get here
    months = {"month": 1, "quarter": 3, "year": 12}[iv.calendar]
    unit_us = 86_400_000_000 if a.col_kind == "date" else 1

    def to_date(v: int) -> dt.date:
        return (
            _EPOCH + dt.timedelta(microseconds=(v - iv.offset) * unit_us)
            if unit_us == 1
            else _EPOCH + dt.timedelta(days=v - iv.offset)
        )

    def to_units(d: dt.date) -> int:
        days = (d - _EPOCH).days
        return (days if unit_us > 1 else days * 86_400_000_000) + iv.offset

    first = to_date(lo)
    m = (first.year * 12 + first.month - 1) // months * months
    out = []
    while True:
        start = to_units(dt.date(m // 12, m % 12 + 1, 1))
        out.append(start)
        if start > hi:
            return out
        m += months


def _normalize(a: Agg, r: Any, ctx: _SplitCtx, top: bool) -> dict[str, Any]:
    """Tantivy's result → the mergeable partial."""
    if r is _ROWS_MARK:
        return _rows_partial(a, ctx)
    if a.kind in STATS_KINDS:
        if a.col_kind == "f64" and r["count"] and (r["max"] >= F64_MAX or r["min"] <= -F64_MAX):
            # NaN/±inf are indexed as ±f64::MAX: only the row store has the real values
            if not top:
                raise AggregationError(
                    f"{a.where}: column {a.column!r} holds NaN or ±Infinity in split "
                    f"{ctx.reader.local_dir}; stats of such a column are exact only at the top level"
                )
            return _rows_partial(a, ctx)
        return {"count": int(r["count"]), "sum": r["sum"] if r["count"] else None, "min": r["min"], "max": r["max"]}
    if a.kind == "terms" and not a.subs:
        # The common case in one comprehension: per-bucket calls were half of a split's cost.
        rows = r["buckets"]
        if a.col_kind == "bool":
            return {"buckets": {bool(b["key"]): int(b["doc_count"]) for b in rows if b["doc_count"]}}
        if a.col_kind in ("i64", "date", "timestamp"):
            return {"buckets": {int(b["key"]): int(b["doc_count"]) for b in rows if b["doc_count"]}}
        return {"buckets": {b["key"]: int(b["doc_count"]) for b in rows if b["doc_count"]}}
    buckets: dict[Any, Any] = {}
    for b in r["buckets"]:
        if a.kind == "range" or (a.kind == "date_histogram" and _date_interval(a).fixed is None):
            # our ranges carry keys "r<index>" / "c<start>"; Tantivy adds buckets for the gaps
            text = str(b["key"])
            if text[:1] not in ("r", "c") or not text[1:].lstrip("-").isdigit():
                continue
            key = int(text[1:])
        elif a.kind == "terms":
            key = _term_key(a, b["key"])
        else:
            key = b["key"]
        if not b["doc_count"] and a.kind != "range":
            continue
        buckets[key] = _bucket_partial(
            a, int(b["doc_count"]), lambda: {s.name: _normalize(s, b.get(s.name), ctx, top=False) for s in a.subs}
        )
    return {"buckets": buckets}


def _bucket_partial(a: Agg, doc_count: int, subs: Callable[[], dict[str, Any]]) -> Any:
    """A bucket's partial: its count alone when there are no sub-aggregations (merging plain ints
    is what keeps a many-bucket aggregation cheap), else {"doc_count", "aggs"}."""
    return doc_count if not a.subs else {"doc_count": doc_count, "aggs": subs()}


def _term_key(a: Agg, key: Any) -> Any:
    if a.col_kind == "bool":
        return bool(key)
    if a.col_kind in ("i64", "date", "timestamp") and isinstance(key, float):
        return int(key)
    return key


def _rows_partial(a: Agg, ctx: _SplitCtx) -> dict[str, Any]:
    """Partials computed from the row store's values (exact)."""
    vals = ctx.values(a.column)
    if a.kind == "terms":
        vc = pc.value_counts(_hashable(vals))
        keys = vc.field("values").to_pylist()
        counts = vc.field("counts").to_pylist()
        return {"buckets": {_term_key(a, _plain(a, k)): c for k, c in zip(keys, counts)}}
    if a.kind == "cardinality":
        return {"values": pc.unique(_hashable(vals))}
    if a.kind == "percentiles":
        vc = pc.value_counts(pc.cast(_hashable(vals), pa.float64(), safe=False))
        return {"values": vc.field("values"), "counts": vc.field("counts")}
    # stats from rows: Spark semantics (NaN largest, exact decimals and integer sums)
    n = len(vals)
    if n == 0 or a.col_kind not in _NUMERIC + _TEMPORAL:  # value_count of strings, booleans, binaries
        return {"count": n, "sum": None, "min": None, "max": None}
    lo, hi = chunk_min_max(a.col_kind, vals)
    total = None if a.col_kind in _TEMPORAL else pc.sum(vals).as_py()
    return {"count": n, "sum": total, "min": _index_units(a, lo), "max": _index_units(a, hi)}


def _hashable(vals: pa.Array) -> pa.Array:
    # Spark's DISTINCT / GROUP BY treat -0.0 as 0.0
    if pa.types.is_floating(vals.type):
        return pc.add(vals, pa.scalar(0.0, vals.type))
    return vals


def _plain(a: Agg, v: Any) -> Any:
    """A row-store value in index units (the key space of Tantivy's partials)."""
    if isinstance(v, dt.datetime):
        return datetime_to_micros(v)
    if isinstance(v, dt.date):
        return date_to_days(v)
    return v


def _index_units(a: Agg, v: Any) -> Any:
    if v is None or a.col_kind not in _TEMPORAL:
        return v
    return v if isinstance(v, int) else _plain(a, v)


def _empty(a: Agg) -> dict[str, Any]:
    if a.kind in BUCKET_KINDS:
        return {"buckets": {}}
    if a.kind in STATS_KINDS:
        return {"count": 0, "sum": None, "min": None, "max": None}
    if a.kind == "percentiles":
        return {"values": pa.array([], pa.float64()), "counts": pa.array([], pa.int64())}
    return {"values": None}


# ---------------------------------------------------------------------------------------------
# Merge (exact) and results


def merge(aggs: Sequence[Agg], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two split-level partials ({"doc_count", "aggs"}) → one."""
    return {"doc_count": a["doc_count"] + b["doc_count"], "aggs": _merge_level(aggs, a["aggs"], b["aggs"])}


def merge_all(aggs: Sequence[Agg], partials: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out = {"doc_count": 0, "aggs": {x.name: _empty(x) for x in aggs}}
    for p in partials:
        out = merge(aggs, out, p)
    return out


def _merge_level(aggs: Sequence[Agg], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {x.name: _merge_one(x, a.get(x.name) or _empty(x), b.get(x.name) or _empty(x)) for x in aggs}


def _merge_one(x: Agg, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    if x.kind in BUCKET_KINDS and not x.subs:  # bucket -> count (see _bucket_partial)
        out = dict(a["buckets"])
        get = out.get
        for k, v in b["buckets"].items():
            out[k] = get(k, 0) + v
        return {"buckets": out}
    if x.kind in BUCKET_KINDS:
        out = dict(a["buckets"])
        for k, v in b["buckets"].items():
            if k in out:
                out[k] = {
                    "doc_count": out[k]["doc_count"] + v["doc_count"],
                    "aggs": _merge_level(x.subs, out[k]["aggs"], v["aggs"]),
                }
            else:
                out[k] = v
        return {"buckets": out}
    if x.kind in STATS_KINDS:

        def pick(f: Callable[[Any, Any], Any], u: Any, v: Any) -> Any:
            return v if u is None else u if v is None else f(u, v)

        return {
            "count": a["count"] + b["count"],
            "sum": pick(lambda u, v: u + v, a["sum"], b["sum"]),
            "min": pick(_spark_min, a["min"], b["min"]),
            "max": pick(_spark_max, a["max"], b["max"]),
        }
    if x.kind == "percentiles":
        values = pa.concat_arrays([a["values"], b["values"]])
        counts = pa.concat_arrays([a["counts"], b["counts"]])
        grouped = pa.table({"v": values, "c": counts}).group_by("v").aggregate([("c", "sum")])
        return {"values": grouped.column("v").combine_chunks(), "counts": grouped.column("c_sum").combine_chunks()}
    # cardinality
    parts = [p["values"] for p in (a, b) if p["values"] is not None]
    if not parts:
        return {"values": None}
    return {"values": pc.unique(pa.concat_arrays(parts)) if len(parts) > 1 else parts[0]}


def _nan_last(v: Any) -> tuple[int, Any]:
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)


def _spark_min(u: Any, v: Any) -> Any:
    return u if _nan_last(u) <= _nan_last(v) else v


def _spark_max(u: Any, v: Any) -> Any:
    return u if _nan_last(u) >= _nan_last(v) else v


def result(aggs: Sequence[Agg], partial: dict[str, Any]) -> dict[str, Any]:
    """The merged partial as the answer: {"doc_count": n, name: {...}, ...} (Elasticsearch shape)."""
    return {"doc_count": partial["doc_count"], **_result_level(aggs, partial["aggs"])}


def _result_level(aggs: Sequence[Agg], partials: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    return {a.name: _result_one(a, partials.get(a.name) or _empty(a)) for a in aggs}


def _result_one(a: Agg, p: dict[str, Any]) -> dict[str, Any]:
    if a.kind in BUCKET_KINDS and not a.subs:
        p = {"buckets": {k: {"doc_count": n, "aggs": {}} for k, n in p["buckets"].items()}}
    if a.kind == "terms":
        return _terms_result(a, p)
    if a.kind in ("histogram", "date_histogram", "range"):
        return {"buckets": _ordered_buckets(a, p)}
    if a.kind in STATS_KINDS:
        return _stats_result(a, p)
    if a.kind == "percentiles":
        return {"values": _percentiles(a, p)}
    return {"value": 0 if p["values"] is None else len(p["values"])}


def _bucket(a: Agg, key: Any, b: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"key": key, **extra, "doc_count": b["doc_count"], **_result_level(a.subs, b["aggs"])}


def _terms_result(a: Agg, p: dict[str, Any]) -> dict[str, Any]:
    size = _size(a)
    min_count = int(a.params.get("min_doc_count", 1))
    ((by, direction),) = dict(a.params.get("order", {"_count": "desc"})).items()
    items = [(k, b) for k, b in p["buckets"].items() if b["doc_count"] >= min_count]
    desc = str(direction).lower() == "desc"
    if by == "_count":  # ties by key ascending (Elasticsearch)
        items.sort(key=lambda kb: _key_order(kb[0]))
        items.sort(key=lambda kb: kb[1]["doc_count"], reverse=desc)
    else:
        items.sort(key=lambda kb: _key_order(kb[0]), reverse=desc)
    top, rest = items[:size], items[size:]
    return {
        "buckets": [_bucket(a, _key_out(a, k), b) for k, b in top],
        "sum_other_doc_count": sum(b["doc_count"] for _, b in rest),
    }


def _key_order(k: Any) -> tuple[int, Any]:
    return (0, k) if not isinstance(k, float) or not math.isnan(k) else (1, 0.0)


def _key_out(a: Agg, k: Any) -> Any:
    if a.partition:
        return k
    if a.col_kind == "date":
        return _EPOCH + dt.timedelta(days=int(k))
    if a.col_kind == "timestamp":
        t = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(k))
        return t.replace(tzinfo=dt.timezone.utc) if str(a.spark_type) == "timestamp" else t
    return k


def _ordered_buckets(a: Agg, p: dict[str, Any]) -> list[dict[str, Any]]:
    buckets = p["buckets"]
    if a.kind == "range":
        given = a.params["ranges"]
        return [
            _bucket(
                a,
                key,
                buckets.get(i, {"doc_count": 0, "aggs": _level_empty(a.subs)}),
                **{k: given[i][k] for k in ("from", "to") if given[i].get(k) is not None},
            )
            for i, (_lo, _hi, key) in enumerate(_ranges(a))
        ]
    if a.kind == "date_histogram":
        iv = _date_interval(a)
        keys = sorted(buckets)
        if int(a.params.get("min_doc_count", 0)) == 0 and keys:
            keys = (
                list(range(int(keys[0]), int(keys[-1]) + 1, iv.fixed))
                if iv.fixed is not None
                else _calendar_starts(a, iv, int(keys[0]), int(keys[-1]))[:-1]
            )
        return [
            _bucket(
                a,
                _key_out(a, k),
                buckets.get(k) or buckets.get(float(k)) or {"doc_count": 0, "aggs": _level_empty(a.subs)},
            )
            for k in keys
            if int(a.params.get("min_doc_count", 0))
            <= (buckets.get(k) or buckets.get(float(k)) or {"doc_count": 0})["doc_count"]
        ]
    # histogram: fill the gaps between the first and last bucket unless min_doc_count > 0
    interval = a.params["interval"]
    min_count = int(a.params.get("min_doc_count", 0))
    keys = sorted(buckets)
    if min_count == 0 and keys:
        first, count = keys[0], round((keys[-1] - keys[0]) / interval)
        keys = [first + i * interval for i in range(count + 1)]
    out = []
    for k in keys:
        b = buckets.get(k) or _near(buckets, k, interval) or {"doc_count": 0, "aggs": _level_empty(a.subs)}
        if b["doc_count"] >= min_count:
            out.append(_bucket(a, k, b))
    return out


def _near(buckets: Mapping[Any, dict[str, Any]], k: float, interval: float) -> dict[str, Any] | None:
    # float keys rebuilt as first + i*interval may differ from Tantivy's in the last bits
    for kk, b in buckets.items():
        if abs(kk - k) < interval * 1e-9:
            return b
    return None


def _level_empty(aggs: Sequence[Agg]) -> dict[str, Any]:
    return {a.name: _empty(a) for a in aggs}


def _stats_result(a: Agg, p: dict[str, Any]) -> dict[str, Any]:
    count, total = p["count"], p["sum"]
    lo, hi = (
        _key_out(a, p["min"]) if p["min"] is not None else None,
        _key_out(a, p["max"]) if p["max"] is not None else None,
    )
    if a.col_kind == "i64" and isinstance(total, float) and abs(total) < 2**53:
        total = int(total)
    if a.col_kind in _TEMPORAL:
        total = None
    avg = None
    if count and total is not None:
        avg = float(total) / count if not isinstance(total, decimal.Decimal) else total / count
    full = {"count": count, "min": lo, "max": hi, "sum": total if count else None, "avg": avg}
    if a.kind == "stats":
        return full
    return {"value": {"avg": avg, "min": lo, "max": hi, "sum": full["sum"], "value_count": count}[a.kind]}


def _percentiles(a: Agg, p: dict[str, Any]) -> dict[str, float | None]:
    """Spark's exact `percentile`: linear interpolation between the ranks around (n - 1) * p."""
    ps = _percents(a)
    values, counts = p["values"], p["counts"]
    out: dict[str, float | None] = {}
    if len(values) == 0:
        return {str(x): None for x in ps}
    order = pc.sort_indices(values)
    values, counts = values.take(order), counts.take(order)
    cum = pc.cumulative_sum(counts)
    total = cum[-1].as_py()

    def at(rank: int) -> float:  # value at 0-based rank in the sorted multiset
        v: float = values[pc.sum(pc.less_equal(cum, rank)).as_py()].as_py()
        return v

    for x in ps:
        pos = (total - 1) * x / 100.0
        lo, hi = math.floor(pos), math.ceil(pos)
        vlo, vhi = at(lo), at(hi)
        out[str(x)] = vlo if lo == hi else (hi - pos) * vlo + (pos - lo) * vhi
    return out


# ---------------------------------------------------------------------------------------------
# Running over files (a Spark task's group of splits, or the driver in local execution)


def aggregate_files(
    storage: Any,
    files: Sequence[Any],
    query: str | None,
    aggs: Sequence[Agg],
    options: Any,
    threads: int = 1,
    deletes: Mapping[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The merged partial of these splits (AddFile objects); threads > 1 lets them be searched in
    parallel threads (as many as search.map_chunks finds worth it).
    deletes: {split path: its deleteLog actions as JSON} (log.delete_logs.deletes_json)."""
    from indextables_spark.core.log.actions import DeleteLog
    from indextables_spark.core.log.delete_logs import load_split_deletes
    from indextables_spark.core.split.cache import get_cache
    from indextables_spark.core.split.reader import SplitReader

    cache = get_cache(options)
    deletes = deletes or {}
    use_cache = _options(options).get_bool("aggregate.cache.enabled")
    request = repr((query, tuple(aggs)))

    def from_log(f: Any) -> bool:  # a bare count of a split without deletes: its logged row count
        return query is None and not aggs and not deletes.get(f.path)

    def one(f: Any) -> dict[str, Any]:
        logs = deletes.get(f.path)
        if from_log(f):
            return {"doc_count": int(f.num_records or 0), "aggs": {}}
        local_dir = cache.local_dir(storage, f)
        key = (local_dir, request, tuple(d.get("path", "") for d in logs or ()))
        hit = _partials.get(key) if use_cache else None
        if hit is not None:
            return hit
        reader = SplitReader(local_dir)
        split_deletes = (
            load_split_deletes(storage, [DeleteLog.from_json(d) for d in logs], f.num_records, f.path) if logs else None
        )
        partial = split_partial(reader, query, aggs, f.partition_values or {}, split_deletes)
        if use_cache and _items(partial) <= _MAX_CACHED_ITEMS:
            _partials.put(key, partial)
        return partial

    files = list(files)
    if threads <= 1 or len(files) <= 1:
        return merge_all(aggs, (one(f) for f in files))
    from indextables_spark.core.split.search import fetch_missing, map_chunks

    # as a Spark-free search: fetch in parallel, then fewer threads on contiguous runs of splits
    # (small splits in one thread: their work is mostly Python, threads only take turns on the GIL)
    fetch_missing(storage, _options(options), [f for f in files if not from_log(f)])
    return merge_all(aggs, map_chunks(lambda chunk: [one(f) for f in chunk], files))


# Per-process LRU of split partials, like Elasticsearch's shard request cache: a split never
# changes (its cache directory names its path and size), so (split, query, request, delete logs)
# always gives the same partial. Partials are never mutated by merges. Partials with more than
# _MAX_CACHED_ITEMS buckets/values are not kept (see aggregate_files).
_MAX_CACHED_ITEMS = 50_000
_partials: LruCache[dict[str, Any]] = LruCache(1024)


def _items(p: Any) -> int:
    """Roughly how many buckets/values a partial holds."""
    if isinstance(p, dict):
        return sum(_items(v) for v in p.values()) + len(p)
    if isinstance(p, (pa.Array, pa.ChunkedArray)):
        return len(p)
    return 0


def _options(options: Any) -> Options:
    from indextables_spark.config.options import Options

    return options if isinstance(options, Options) else Options.of(options)
