"""Aggregation partials merged (exactly) and turned into results in Elasticsearch's shape: the
driver's side after core/split/aggregate/aggregate.py computed each split's partial."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.split.aggregate.agg_request import (
    BUCKET_KINDS,
    EPOCH,
    STATS_KINDS,
    TEMPORAL,
    Agg,
    bucket_ranges,
    calendar_starts,
    date_interval,
    percents,
    terms_size,
)


def empty_partial(a: Agg) -> dict[str, Any]:
    if a.kind in BUCKET_KINDS:
        return {"buckets": {}}
    if a.kind in STATS_KINDS:
        return {"count": 0, "sum": None, "min": None, "max": None}
    if a.kind == "percentiles":
        return {"values": pa.array([], pa.float64()), "counts": pa.array([], pa.int64())}
    return {"values": None}


def merge(aggs: Sequence[Agg], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two split-level partials ({"doc_count", "aggs"}) → one."""
    return {"doc_count": a["doc_count"] + b["doc_count"], "aggs": _merge_level(aggs, a["aggs"], b["aggs"])}


def merge_all(aggs: Sequence[Agg], partials: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out = {"doc_count": 0, "aggs": {x.name: empty_partial(x) for x in aggs}}
    for p in partials:
        out = merge(aggs, out, p)
    return out


def _merge_level(aggs: Sequence[Agg], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {x.name: _merge_one(x, a.get(x.name) or empty_partial(x), b.get(x.name) or empty_partial(x)) for x in aggs}


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
    return {a.name: _result_one(a, partials.get(a.name) or empty_partial(a)) for a in aggs}


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
    size = terms_size(a)
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
        return EPOCH + dt.timedelta(days=int(k))
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
            for i, (_lo, _hi, key) in enumerate(bucket_ranges(a))
        ]
    if a.kind == "date_histogram":
        iv = date_interval(a)
        keys = sorted(buckets)
        if int(a.params.get("min_doc_count", 0)) == 0 and keys:
            keys = (
                list(range(int(keys[0]), int(keys[-1]) + 1, iv.fixed))
                if iv.fixed is not None
                else calendar_starts(a, iv, int(keys[0]), int(keys[-1]))[:-1]
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
    return {a.name: empty_partial(a) for a in aggs}


def _stats_result(a: Agg, p: dict[str, Any]) -> dict[str, Any]:
    count, total = p["count"], p["sum"]
    lo, hi = (
        _key_out(a, p["min"]) if p["min"] is not None else None,
        _key_out(a, p["max"]) if p["max"] is not None else None,
    )
    if a.col_kind == "i64" and isinstance(total, float) and abs(total) < 2**53:
        total = int(total)
    if a.col_kind in TEMPORAL:
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
    ps = percents(a)
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
