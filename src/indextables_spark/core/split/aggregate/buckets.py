"""The reference's SQL bucket functions, Spark-free: their arguments and the bucket key of a value.

    indextables_histogram(col, interval [, offset [, min_doc_count]])         -> DOUBLE
    indextables_date_histogram(col, interval [, offset [, min_doc_count]])    -> TIMESTAMP
    indextables_range(col, name1, from1, to1 [, name2, from2, to2 ...])       -> STRING

One definition of each key, computed the same way by Spark (spark/bucket_functions.py registers
the functions in the session) and here over Arrow columns (the index route of GROUP BY,
core/split/aggregate/group_aggregate.py), so both routes group the same rows under the same keys:
- histogram: floor((v - offset) / interval) * interval + offset, in doubles (the bucket's lower
  bound, as the reference's Tantivy histogram keys); NaN and ±Infinity stay NaN and ±Infinity;
- date_histogram: the start of the fixed-length interval ('1ms' … '7d': a number and ms, s, m, h
  or d) holding the instant, intervals aligned on the epoch (UTC) shifted by `offset` ('6h',
  '-30m'): an instant, so the session time zone changes how a key is shown, never which rows it
  holds;
- range: the name of the range [from, to) holding the value (NULL bound: unbounded), compared as
  doubles with Spark's ordering (NaN above every number); ranges may not overlap;
- a NULL value, or a value in no range, has a NULL key: GROUP BY keeps it as the NULL group, as it
  does for any expression (the reference's index dropped those rows; SQL cannot).
GROUP BY returns no empty group, so `min_doc_count` 0 (the reference's default) and 1 mean the
same; a larger one would need HAVING and is refused (`HAVING COUNT(*) >= n` says it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.errors import IndexTablesError

HISTOGRAM = "indextables_histogram"
DATE_HISTOGRAM = "indextables_date_histogram"
RANGE = "indextables_range"
FUNCTIONS = (HISTOGRAM, DATE_HISTOGRAM, RANGE)
UNIT_MICROS = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
INTERVAL_PATTERN = r"^([0-9]+)(ms|s|m|h|d)$"
OFFSET_PATTERN = r"^([+-]?)([0-9]+)(ms|s|m|h|d)$"
KEY_TYPES = {HISTOGRAM: "double", DATE_HISTOGRAM: "timestamp", RANGE: "string"}


class BucketArgumentError(IndexTablesError, ValueError):
    """A bucket function's arguments are not one of its forms."""


@dataclass(frozen=True)
class Histogram:
    interval: float
    offset: float = 0.0


@dataclass(frozen=True)
class DateHistogram:
    interval: str  # as written ('1h')
    interval_micros: int
    offset_micros: int = 0


@dataclass(frozen=True)
class RangeBucket:
    key: str
    start: float | None  # inclusive; None: unbounded
    end: float | None  # exclusive; None: unbounded


@dataclass(frozen=True)
class Ranges:
    ranges: tuple[RangeBucket, ...]


Bucket = Union[Histogram, DateHistogram, Ranges]


def describe(b: Bucket) -> str:
    if isinstance(b, Histogram):
        return f"histogram(interval={b.interval}, offset={b.offset})"
    if isinstance(b, DateHistogram):
        return f"date_histogram(interval={b.interval}, offset={b.offset_micros}us)"
    return "range(" + ", ".join(f"{r.key}:[{_bound(r.start)}, {_bound(r.end)})" for r in b.ranges) + ")"


def _bound(v: float | None) -> str:
    return "*" if v is None else repr(v)


# ---- arguments --------------------------------------------------------------------------------


def check_min_doc_count(function: str, n: Any) -> None:
    if n is None or isinstance(n, bool) or not isinstance(n, (int, float)) or n not in (0, 1):
        raise BucketArgumentError(
            f"{function}: min_doc_count must be 0 or 1 (GROUP BY returns no empty bucket), got {n!r}; "
            f"keep larger buckets with HAVING COUNT(*) >= n"
        )


def interval_micros(text: Any, what: str = "interval") -> int:
    """'1h' → 3600000000; an offset may carry a sign ('-6h')."""
    m = re.match(OFFSET_PATTERN if what == "offset" else INTERVAL_PATTERN, str(text)) if isinstance(text, str) else None
    if m is None:
        raise BucketArgumentError(
            f"{DATE_HISTOGRAM}: invalid {what} {text!r}; a number and a unit ms, s, m, h or d "
            f"(e.g. '1ms', '30s', '15m', '1h', '1d', '7d'; an offset may be negative: '-6h')"
        )
    if what == "offset":
        sign, n, unit = m.groups()
        return (-1 if sign == "-" else 1) * int(n) * UNIT_MICROS[unit]
    n, unit = m.groups()
    micros = int(n) * UNIT_MICROS[unit]
    if micros <= 0:
        raise BucketArgumentError(f"{DATE_HISTOGRAM}: the interval must be positive, got {text!r}")
    return micros


def histogram(interval: Any, offset: Any = 0.0, min_doc_count: Any = 0) -> Histogram:
    if not _number(interval) or not float(interval) > 0 or math.isinf(float(interval)):
        raise BucketArgumentError(f"{HISTOGRAM}: the interval must be a positive number, got {interval!r}")
    if offset is None:
        offset = 0.0
    if not _number(offset) or not math.isfinite(float(offset)):
        raise BucketArgumentError(f"{HISTOGRAM}: the offset must be a number, got {offset!r}")
    check_min_doc_count(HISTOGRAM, min_doc_count)
    return Histogram(float(interval), float(offset))


def date_histogram(interval: Any, offset: Any = None, min_doc_count: Any = 0) -> DateHistogram:
    micros = interval_micros(interval)
    off = 0 if offset is None else interval_micros(offset, "offset")
    check_min_doc_count(DATE_HISTOGRAM, min_doc_count)
    return DateHistogram(str(interval), micros, off)


def ranges(args: Sequence[Any]) -> Ranges:
    """(name, from, to) triples → Ranges, refused as the reference refuses them."""
    if not args or len(args) % 3:
        raise BucketArgumentError(
            f"{RANGE}(column, name1, from1, to1, name2, from2, to2, ...): ranges are groups of 3 arguments, "
            f"got {len(args)} after the column"
        )
    out = []
    for i in range(0, len(args), 3):
        name, lo, hi = args[i : i + 3]
        if not isinstance(name, str) or not name:
            raise BucketArgumentError(f"{RANGE}: range {i // 3 + 1} needs a name (a non-empty string), got {name!r}")
        for b in (lo, hi):
            if b is not None and (not _number(b) or math.isnan(float(b))):
                raise BucketArgumentError(f"{RANGE}: range {name!r} has a bound that is not a number: {b!r}")
        if lo is None and hi is None:
            raise BucketArgumentError(f"{RANGE}: range {name!r} must have at least one bound defined (from or to)")
        out.append(RangeBucket(name, None if lo is None else float(lo), None if hi is None else float(hi)))
    ordered = sorted(out, key=lambda r: -math.inf if r.start is None else r.start)
    for a, b in zip(ordered, ordered[1:]):
        if a.end is None or b.start is None or a.end > b.start:
            raise BucketArgumentError(
                f"{RANGE}: overlapping ranges are not supported: {a.key!r} ends at {_bound(a.end)} "
                f"but {b.key!r} starts at {_bound(b.start)}"
            )
    return Ranges(tuple(out))


def _number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return not isinstance(v, str)


# ---- one value (the Spark side's Python UDF of indextables_range) -----------------------------


def range_key(value: Any, spec: Ranges) -> str | None:
    """The range holding `value` (compared as a double, NaN above every number), or None."""
    if value is None:
        return None
    v = float(value)
    for r in spec.ranges:
        above = math.isnan(v) or r.start is None or v >= r.start
        below = r.end is None or (not math.isnan(v) and v < r.end)
        if above and below:
            return r.key
    return None


# ---- Arrow columns (the index route) ----------------------------------------------------------


def bucket_keys(values: pa.ChunkedArray | pa.Array, spec: Bucket) -> pa.Array:
    """The bucket key of every value (NULL for NULL)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(spec, Histogram):
        v = values.cast(pa.float64(), safe=False)  # longs beyond 2^53 round, as Spark's CAST
        q = pc.divide(pc.subtract(v, spec.offset), spec.interval)
        return pc.add(pc.multiply(pc.floor(q), spec.interval), spec.offset)
    if isinstance(spec, DateHistogram):
        # Spark's definition (spark/bucket_functions.py): micros - pmod(micros - offset, interval)
        micros = pc.cast(values, pa.int64())
        shifted = pc.subtract(micros, spec.offset_micros)
        rem = pc.subtract(shifted, pc.multiply(pc.divide(shifted, spec.interval_micros), spec.interval_micros))
        rem = pc.if_else(pc.less(rem, 0), pc.add(rem, spec.interval_micros), rem)  # Arrow divides towards zero
        return pc.cast(pc.subtract(micros, rem), values.type)
    v = values.cast(pa.float64(), safe=False)  # longs beyond 2^53 round, as Spark's CAST
    nan = pc.fill_null(pc.is_nan(v), False)
    key = pa.nulls(len(v), pa.string())
    for r in reversed(spec.ranges):  # ranges do not overlap: the order only keeps the code simple
        conds = []
        if r.start is not None:
            conds.append(pc.or_(nan, pc.greater_equal(v, r.start)))
        if r.end is not None:
            conds.append(pc.and_(pc.invert(nan), pc.less(v, r.end)))
        inside = conds[0] if len(conds) == 1 else pc.and_(conds[0], conds[1])
        key = pc.if_else(pc.fill_null(inside, False), pa.scalar(r.key, pa.string()), key)
    return key
