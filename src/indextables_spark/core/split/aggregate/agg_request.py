"""Aggregation requests (Spark-free): their model, parsing, and validation against a table's
columns (the driver's side of core/split/aggregate/aggregate.py), with the bucket definitions (sizes,
intervals, ranges) the per-split run and the results share."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from indextables_spark.core.schema.partitions import date_to_days, datetime_to_micros
from indextables_spark.core.schema.types import STRING_KINDS, ColumnSpec
from indextables_spark.errors import IndexTablesError

BUCKET_KINDS = ("terms", "histogram", "date_histogram", "range")
STATS_KINDS = ("stats", "avg", "min", "max", "sum", "value_count")
VALUE_KINDS = ("percentiles", "cardinality")  # exact, from the row store
KINDS = BUCKET_KINDS + STATS_KINDS + VALUE_KINDS
NUMERIC = ("i64", "f64", "decimal")
TEMPORAL = ("date", "timestamp")
_US = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
EPOCH = dt.date(1970, 1, 1)


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
    from_rows = k in VALUE_KINDS or (k in STATS_KINDS and (kind == "decimal" or kind not in NUMERIC + TEMPORAL))
    if spec.index_only and from_rows:
        raise AggregationError(
            f"{agg.where}: {agg.column!r} is index-only (indexing.indexonlyfields): {k} of a {kind} column is "
            f"computed from the rows, which do not hold it"
        )
    if spec.string_mode is not None and not from_rows:
        # (core/schema/compact_strings.py) the index holds hashes or stripped text, not the values
        raise AggregationError(
            f"{agg.where}: {agg.column!r} is indexed with {spec.string_mode} (hashes or stripped text, not its "
            f"values): {k} on it is computed from fast fields, which do not hold its values; aggregate it in "
            f"Spark, or index it with indexing.typemap.{agg.column}=string"
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
        terms_size(agg)
        return
    if k == "cardinality":
        if kind in ("json",):
            raise AggregationError(f"{agg.where}: cardinality of a {kind} column is not supported")
        return
    if k == "date_histogram":
        if kind not in TEMPORAL:
            raise AggregationError(
                f"{agg.where}: date_histogram needs a date or timestamp column, {agg.column!r} is {kind}"
            )
        date_interval(agg)
        return
    numeric = kind in NUMERIC or (kind in TEMPORAL and k in ("stats", "min", "max", "value_count", "range"))
    if k == "percentiles" and kind in NUMERIC:
        percents(agg)
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
        bucket_ranges(agg)


def terms_size(agg: Agg) -> int:
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


def percents(agg: Agg) -> list[float]:
    ps = agg.params.get("percents", [1, 5, 25, 50, 75, 95, 99])
    if (
        not isinstance(ps, list)
        or not ps
        or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 100 for p in ps)
    ):
        raise AggregationError(f'{agg.where}: "percents" must be a list of numbers in [0, 100], got {ps!r}')
    return [float(p) for p in ps]


@dataclass(frozen=True)
class DateInterval:
    fixed: int | None  # in column units (days for date, microseconds for timestamp)
    calendar: str | None  # month | quarter | year
    offset: int  # in column units


def date_interval(agg: Agg) -> DateInterval:
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
        return DateInterval(us // unit_us, None, offset)
    cal = str(p.get("calendar_interval", "")).lower().lstrip("1")
    if cal in ("d", "day"):
        return DateInterval(86_400_000_000 // unit_us, None, offset)
    if cal in ("w", "week"):  # weeks start on Monday; 1970-01-05 was one
        return DateInterval(7 * 86_400_000_000 // unit_us, None, offset + 4 * 86_400_000_000 // unit_us)
    if cal in ("m", "month", "q", "quarter", "y", "year"):
        return DateInterval(None, {"m": "month", "q": "quarter", "y": "year"}.get(cal, cal), offset)
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


def bucket_ranges(agg: Agg) -> list[tuple[Any, Any, str]]:
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


def calendar_starts(a: Agg, iv: DateInterval, lo: int, hi: int) -> list[int]:
    """Bucket start values (column units) covering [lo, hi], plus the end of the last bucket."""
    assert iv.calendar is not None  # only calendar intervals (fixed is None) get here
    months = {"month": 1, "quarter": 3, "year": 12}[iv.calendar]
    unit_us = 86_400_000_000 if a.col_kind == "date" else 1

    def to_date(v: int) -> dt.date:
        return (
            EPOCH + dt.timedelta(microseconds=(v - iv.offset) * unit_us)
            if unit_us == 1
            else EPOCH + dt.timedelta(days=v - iv.offset)
        )

    def to_units(d: dt.date) -> int:
        days = (d - EPOCH).days
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
