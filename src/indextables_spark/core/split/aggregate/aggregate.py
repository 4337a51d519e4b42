"""Exact aggregations over a table's splits (Spark-free): plan (agg_request.py) → per-split
partials (here, on Tantivy and the row store) → merge → result (agg_result.py).

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.model.actions import AddFile, DeleteLog
from indextables_spark.core.schema.partitions import date_to_days, datetime_to_micros, parse_partition_value
from indextables_spark.core.schema.types import ColumnSpec
from indextables_spark.core.split.aggregate.agg_request import (
    NUMERIC,
    STATS_KINDS,
    TEMPORAL,
    VALUE_KINDS,
    Agg,
    AggregationError,
    DateInterval,
    bucket_ranges,
    calendar_starts,
    date_interval,
)
from indextables_spark.core.split.aggregate.agg_result import empty_partial, merge_all
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.stats import chunk_min_max
from indextables_spark.errors import IndexTablesError
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.split.read.plan import ReadPlan
    from indextables_spark.core.split.read.reader import SplitReader
    from indextables_spark.core.storage.base import Storage

ALL_BUCKETS = 2**31 - 1
F64_MAX = 1.7976931348623157e308


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
            chunks = [b.column(0) for _, b in r.source(None, False, [column])]
        typ = r.schema.field(column).type
        arr = pa.chunked_array(chunks, typ).combine_chunks() if chunks else pa.array([], typ)
        return arr.drop_null() if arr.null_count else arr


def split_partial(
    reader: SplitReader,
    plan: ReadPlan,
    aggs: Sequence[Agg],
    partition_values: Mapping[str, str | None],
    deletes: SplitDeletes | None = None,
) -> dict[str, Any]:
    """The mergeable partial of one split: {"doc_count": n, "aggs": {name: partial}}, over the
    rows the plan selects (ReadPlan.index_selection: its query and exact filters, minus `deletes`,
    the split's deleted rows)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.aggregate.aggregate` free of tantivy

    searcher = reader.searcher()
    q = plan.index_selection(reader, deletes)
    if searcher.num_docs == 0:
        n = 0
    elif q is None:
        n = searcher.num_docs
    else:
        with tantivy_call(f"counting matches in split {reader.local_dir}"):
            n = searcher.search(q, 1, count=True).count
    ctx = _SplitCtx(
        reader,
        searcher,
        q if q is not None else tantivy.Query.all_query(),
        q is not None,
        partition_values,
        n,
        {s.name: s for s in reader.specs},
    )
    return {"doc_count": n, "aggs": _level_partials(ctx, aggs)}


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
            out[a.name] = empty_partial(a)
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
    return a.kind in STATS_KINDS and (a.col_kind == "decimal" or a.col_kind not in NUMERIC + TEMPORAL)


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
        iv = date_interval(a)
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
                    for i, (lo, hi, _) in enumerate(bucket_ranges(a))
                ],
            }
        }
    if a.subs:
        body["aggs"] = {s.name: _tantivy_request(s, ctx) for s in a.subs}
    return body


def _calendar_ranges(a: Agg, iv: DateInterval, ctx: _SplitCtx, f: str) -> list[dict[str, Any]]:
    """Calendar buckets (month/quarter/year) as explicit ranges over this split's value span."""
    with tantivy_call(f"aggregating split {ctx.reader.local_dir}"):
        st = ctx.searcher.aggregate(ctx.query, {"s": {"stats": {"field": f}}})["s"]
    if st["min"] is None:
        return [{"to": 0, "key": "none"}]
    starts = calendar_starts(a, iv, int(st["min"]), int(st["max"]))
    return [{"from": lo, "to": hi, "key": f"c{lo}"} for lo, hi in zip(starts, starts[1:])]


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
        if a.kind == "range" or (a.kind == "date_histogram" and date_interval(a).fixed is None):
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
    if n == 0 or a.col_kind not in NUMERIC + TEMPORAL:  # value_count of strings, booleans, binaries
        return {"count": n, "sum": None, "min": None, "max": None}
    lo, hi = chunk_min_max(a.col_kind, vals)
    total = None if a.col_kind in TEMPORAL else pc.sum(vals).as_py()
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
    if v is None or a.col_kind not in TEMPORAL:
        return v
    return v if isinstance(v, int) else _plain(a, v)


# ---------------------------------------------------------------------------------------------
# Running over files (a Spark task's group of splits, or the driver in local execution)


def aggregate_files(
    storage: Storage,
    files: Sequence[AddFile],
    plan: ReadPlan,
    aggs: Sequence[Agg],
    threads: int = 1,
    deletes: Mapping[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The merged partial of these splits (AddFile objects) over the rows the plan selects;
    threads > 1 lets them be searched in parallel threads (as many as split_threads.map_chunks
    finds worth it). deletes: {split path: its deleteLog actions as JSON} (log.delete_logs.deletes_json)."""
    from indextables_spark.core.log.deletes.delete_logs import (
        load_split_deletes,  # lazy: keeps `import indextables_spark.core.split.aggregate.aggregate` free of numpy
    )
    from indextables_spark.core.split.cache.cache import (
        get_cache,  # lazy: keeps `import indextables_spark.core.split.aggregate.aggregate` free of numpy
    )
    from indextables_spark.core.split.read.reader import (
        SplitReader,  # lazy: keeps `import indextables_spark.core.split.aggregate.aggregate` free of numpy
    )

    cache = get_cache(plan.options)
    deletes = deletes or {}
    use_cache = plan.options.get_bool("aggregate.cache.enabled")
    request = repr((plan.query, plan.filters, tuple(aggs)))

    def from_log(f: AddFile) -> bool:  # a bare count of a split without deletes: its logged row count
        return plan.query is None and not plan.filters and not aggs and not deletes.get(f.path)

    def one(f: AddFile) -> dict[str, Any]:
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
        partial = split_partial(reader, plan, aggs, f.partition_values or {}, split_deletes)
        if use_cache and _items(partial) <= _MAX_CACHED_ITEMS:
            _partials.put(key, partial)
        return partial

    files = list(files)
    if threads <= 1 or len(files) <= 1:
        return merge_all(aggs, (one(f) for f in files))
    from indextables_spark.core.split.read.split_threads import (  # lazy: keeps `import indextables_spark.core.split.aggregate.aggregate` free of numpy
        fetch_missing,
        map_chunks,
    )

    # as a Spark-free search: fetch in parallel, then fewer threads on contiguous runs of splits
    # (small splits in one thread: their work is mostly Python, threads only take turns on the GIL)
    fetch_missing(storage, plan.options, [f for f in files if not from_log(f)])
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
