"""Per-split column statistics: minValues / maxValues strings and null counts.

Encoding of `minValues` / `maxValues` (strings in the log):

| kind                 | text                                                               |
|----------------------|--------------------------------------------------------------------|
| i64 (byte..long)     | decimal digits, e.g. `-42`                                         |
| f64 (float/double)   | Python repr of the value as a double (`0.10000000149011612` for a float32 0.1), `NaN`, `Infinity`, `-Infinity`; Spark order: NaN is the largest value |
| decimal              | plain notation, exact (`12.340`)                                   |
| string/text          | the value; cut to `stats.truncation.maxLength` characters (default 32). A cut max has its last character incremented so it stays an upper bound (`"abz…"` → `"ab{"`). Compared by code point = UTF-8 byte order, like Spark |
| date                 | ISO `YYYY-MM-DD`                                                   |
| timestamp(_ntz)      | integer microseconds since the epoch, e.g. `1704067200000000`      |
| boolean              | `false` / `true`                                                   |

`stats` JSON: {"numRecords": N, "nullCount": {col: n}} for the same columns.
Binary and json (array/map/struct) columns get a null count only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import logging
import math
from dataclasses import dataclass
from typing import Any, Collection

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.config.options import Options
from indextables_spark.core.schema.partitions import format_float
from indextables_spark.core.schema.types import STRING_KINDS, ColumnSpec

ORDERABLE_KINDS = frozenset({"i64", "f64", "decimal", "date", "timestamp", "bool"}) | STRING_KINDS
_EPOCH_DAY = dt.date(1970, 1, 1)
_MAX_CODE_POINT = 0x10FFFF


def order_key(kind: str, v: Any) -> Any:
    """A Python key ordering values like Spark (NaN above every other double)."""
    if kind == "f64":
        return (1, 0.0) if math.isnan(v) else (0, v)
    return v


@dataclass
class ColumnStats:
    null_count: int = 0
    min: Any = None  # comparable Python value (int days/micros for date/timestamp)
    max: Any = None

    def merge(self, kind: str, null_count: int, lo: Any, hi: Any) -> None:
        self.null_count += null_count
        if lo is not None and (self.min is None or order_key(kind, lo) < order_key(kind, self.min)):
            self.min = lo
        if hi is not None and (self.max is None or order_key(kind, hi) > order_key(kind, self.max)):
            self.max = hi


def chunk_min_max(kind: str, a: pa.Array) -> tuple[Any, Any]:
    """(min, max) of the non-null values of a column chunk in Spark order, or (None, None)."""
    if kind == "f64":
        x = a.cast(pa.float64())
        nan = pc.is_nan(x)
        has_nan = bool(pc.any(nan).as_py())
        mm = pc.min_max(pc.filter(x, pc.invert(nan))) if has_nan else pc.min_max(x)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if has_nan:
            return (lo if lo is not None else math.nan), math.nan
        return lo, hi
    if kind == "date":
        a = a.cast(pa.int32())
    elif kind == "timestamp":
        a = a.cast(pa.int64())
    elif kind in STRING_KINDS and not pa.types.is_string(a.type):
        a = a.cast(pa.string())
    mm = pc.min_max(a)
    return mm["min"].as_py(), mm["max"].as_py()


def increment_string(s: str) -> str | None:
    """The smallest string above every string starting with s (None when none exists)."""
    chars = list(s)
    while chars:
        c = ord(chars[-1])
        if c < _MAX_CODE_POINT:
            nxt = c + 1
            if 0xD800 <= nxt <= 0xDFFF:  # surrogates are not characters
                nxt = 0xE000
            chars[-1] = chr(nxt)
            return "".join(chars)
        chars.pop()
    return None


def encode_stat(kind: str, v: Any, *, is_max: bool, max_length: int | None) -> str | None:
    """The log string of a min (is_max False) or max value; None when it cannot be written."""
    if v is None:
        return None
    if kind in STRING_KINDS:
        text: str = v
        if max_length is None or len(text) <= max_length:
            return text
        cut = text[:max_length]
        return increment_string(cut) if is_max else cut
    if kind == "f64":
        return format_float(v)
    if kind == "decimal":
        return format(v, "f")
    if kind == "bool":
        return "true" if v else "false"
    if kind == "date":
        try:
            return (_EPOCH_DAY + dt.timedelta(days=v)).isoformat()
        except OverflowError:  # outside 0001-9999: leave the column without stats
            return None
    return str(int(v))


def decode_stat(kind: str, text: str) -> Any:
    """Inverse of encode_stat into the comparable domain (int days/micros, str, ...)."""
    if kind == "i64" or kind == "timestamp":
        return int(text)
    if kind == "f64":
        return float(text)
    if kind == "decimal":
        return decimal.Decimal(text)
    if kind == "bool":
        return text.strip().lower() == "true"
    if kind == "date":
        return (dt.date.fromisoformat(text) - _EPOCH_DAY).days
    return text


def stats_columns(options: Options, specs: list[ColumnSpec]) -> frozenset[str] | None:
    """The data columns `dataSkippingStatsColumns` names (lower-cased), None when it is not set.
    As in the reference, a name that is no data column is logged and left out (a partition
    column's values are in the log already)."""
    raw = options.get_str("dataSkippingStatsColumns")
    if raw is None or not raw.strip():
        return None
    wanted = {c.strip().lower(): c.strip() for c in raw.split(",") if c.strip()}
    data = {s.name.lower() for s in specs if not s.partition}
    missing = sorted(v for k, v in wanted.items() if k not in data)
    if missing and tuple(missing) not in _warned:
        _warned.add(tuple(missing))
        logging.getLogger(__name__).warning(
            "indextables: option dataSkippingStatsColumns names %s, not data columns of the table (no statistics for them)",
            missing,
        )
    return frozenset(k for k in wanted if k in data)


_warned: set[tuple[str, ...]] = set()


class StatsCollector:
    """Accumulates stats of one split over its chunks."""

    def __init__(
        self,
        specs: list[ColumnSpec],
        num_indexed_cols: int,
        max_length: int | None,
        columns: Collection[str] | None = None,
    ):
        """Stats of the first `num_indexed_cols` data columns (-1: all), or of the named `columns`
        (lower-cased; dataSkippingStatsColumns) when given."""
        stored = [s for s in specs if not s.partition]
        if columns is not None:
            self.specs = [s for s in stored if s.name.lower() in columns]
        else:
            self.specs = stored[: max(0, num_indexed_cols)] if num_indexed_cols >= 0 else stored
        self.max_length = max_length
        self.cols = {s.name: ColumnStats() for s in self.specs}
        self.num_records = 0

    @classmethod
    def for_options(cls, specs: list[ColumnSpec], options: Options) -> StatsCollector:
        """The collector the write options ask for: `dataSkippingNumIndexedCols`,
        `dataSkippingStatsColumns` and `stats.truncation.*`."""
        max_len = options.get_int("stats.truncation.maxLength")
        return cls(
            specs,
            options.get_int("dataSkippingNumIndexedCols"),
            max_len if options.get_bool("stats.truncation.enabled") else None,
            stats_columns(options, specs),
        )

    def add(self, batch: pa.RecordBatch) -> None:
        self.num_records += batch.num_rows
        for s in self.specs:
            a = batch.column(s.name)
            lo = hi = None
            if s.kind in ORDERABLE_KINDS and a.null_count < len(a):
                lo, hi = chunk_min_max(s.kind, a)
            self.cols[s.name].merge(s.kind, a.null_count, lo, hi)

    def min_max_values(self) -> tuple[dict[str, str], dict[str, str]]:
        mins: dict[str, str] = {}
        maxs: dict[str, str] = {}
        for s in self.specs:
            c = self.cols[s.name]
            if s.kind not in ORDERABLE_KINDS:
                continue
            lo = encode_stat(s.kind, c.min, is_max=False, max_length=self.max_length)
            hi = encode_stat(s.kind, c.max, is_max=True, max_length=self.max_length)
            if lo is not None:
                mins[s.name] = lo
            if hi is not None:
                maxs[s.name] = hi
        return mins, maxs

    def stats_json(self) -> str:
        return json.dumps(
            {"numRecords": self.num_records, "nullCount": {s.name: self.cols[s.name].null_count for s in self.specs}},
            separators=(",", ":"),
            ensure_ascii=False,
        )


def null_counts(stats: str | None) -> dict[str, int]:
    if not stats:
        return {}
    try:
        d = json.loads(stats)
    except json.JSONDecodeError:
        # Stats are only a skipping hint and other writers may shape them differently:
        # unreadable stats mean "no null counts" (never skip on them), not a failed read.
        return {}
    nc = d.get("nullCount") if isinstance(d, dict) else None
    return {k: v for k, v in nc.items() if isinstance(v, int)} if isinstance(nc, dict) else {}
