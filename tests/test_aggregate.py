"""Aggregations: equal to Spark's groupBy().agg() on the same data, for every kind, across >= 8 splits.

One broad Spark test checks every kind in both executions (a Spark job; driver threads), the SQL
table function and IndexTable.count; Spark-free tests cover exactness edges (bucket-limit
fallback, NaN, decimals) and request errors.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pytest
from pyspark.sql import functions as sf

import indextables_spark as it
from indextables_spark.core.split.aggregate.agg_request import AggregationError
from indextables_spark.expr.search_query import SearchQuery
from search_tables import DOCS_OPTIONS, docs, docs_schema, write_table

N = 3000
QUERY = "body:spark"
SPARK_QUERY = "body rlike '(?i)(^|[^a-z0-9])spark([^a-z0-9]|$)'"  # what body:spark matches (ASCII words)
WEEK_US = 7 * 86_400_000_000

AGGS = {
    "by_tag": {
        "terms": {"field": "tag", "size": 100},
        "aggs": {"views": {"stats": {"field": "views"}}, "avg_score": {"avg": {"field": "score"}}},
    },
    "by_region": {
        "terms": {"field": "region"},
        "aggs": {
            "p": {"percentiles": {"field": "views", "percents": [10, 50, 99]}},
            "titles": {"cardinality": {"field": "title"}},
            "by_day": {"terms": {"field": "day", "size": 1000}},
        },
    },
    "top_titles": {"terms": {"field": "title", "size": 5}},
    "score": {"stats": {"field": "score"}},
    "min_views": {"min": {"field": "views"}},
    "max_views": {"max": {"field": "views"}},
    "sum_views": {"sum": {"field": "views"}},
    "avg_views": {"avg": {"field": "views"}},
    "n_views": {"value_count": {"field": "views"}},
    "n_tags": {"value_count": {"field": "tag"}},
    "views_hist": {
        "histogram": {"field": "views", "interval": 1000},
        "aggs": {"max_score": {"max": {"field": "score"}}},
    },
    "months": {"date_histogram": {"field": "day", "calendar_interval": "month"}},
    "weeks": {"date_histogram": {"field": "ts", "fixed_interval": "7d"}},
    "score_ranges": {"range": {"field": "score", "ranges": [{"to": 25}, {"from": 25, "to": 75}, {"from": 75}]}},
    "day_ranges": {"range": {"field": "day", "ranges": [{"to": "2024-03-01"}, {"from": "2024-03-01"}]}},
    "p": {"percentiles": {"field": "score", "percents": [0, 25, 50, 90, 100]}},
    "distinct_views": {"cardinality": {"field": "views"}},
    "distinct_days": {"cardinality": {"field": "day"}},
    "max_day": {"max": {"field": "day"}},
    "avg_price": {"avg": {"field": "price"}},
}


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("agg") / "t")
    data = docs(N)
    write_table(path, data, docs_schema(), DOCS_OPTIONS)
    assert len(it.IndexTable(path).files()) >= 8
    return path, spark.createDataFrame(data.to_pylist(), docs_schema())


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, (float, decimal.Decimal)) or isinstance(b, (float, decimal.Decimal)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def buckets(result) -> dict:
    return {b["key"]: b for b in result["buckets"]}


def assert_stats(ours, theirs: dict, what):
    for k in ("count", "min", "max", "sum", "avg"):
        assert close(ours[k], theirs[k]), f"{what}.{k}: {ours[k]} != {theirs[k]}"


def stats_cols(col, prefix):
    return [
        sf.count(col).alias(f"{prefix}count"),
        sf.min(col).alias(f"{prefix}min"),
        sf.max(col).alias(f"{prefix}max"),
        sf.sum(col).alias(f"{prefix}sum"),
        sf.avg(col).alias(f"{prefix}avg"),
    ]


def sub(row, prefix) -> dict:
    return {k[len(prefix) :]: v for k, v in row.asDict().items() if k.startswith(prefix)}


def spark_reference(mem) -> dict:
    """Spark's answers for AGGS over `mem` (a few jobs, each with many aggregate expressions)."""
    day0 = sf.lit(dt.date(2024, 3, 1))
    g = mem.agg(
        sf.count("*").alias("n"),
        *stats_cols("score", "score_"),
        *stats_cols("views", "views_"),
        sf.count("tag").alias("n_tags"),
        sf.max("day").alias("max_day"),
        sf.avg("price").alias("avg_price"),
        sf.count_if(sf.col("score") < 25).alias("r0"),
        sf.count_if((sf.col("score") >= 25) & (sf.col("score") < 75)).alias("r1"),
        sf.count_if(sf.col("score") >= 75).alias("r2"),
        sf.count_if(sf.col("day") < day0).alias("d0"),
        sf.count_if(sf.col("day") >= day0).alias("d1"),
        sf.percentile("score", sf.array(*[sf.lit(x) for x in (0.0, 0.25, 0.5, 0.9, 1.0)])).alias("p"),
        sf.countDistinct("views").alias("distinct_views"),
        sf.countDistinct("day").alias("distinct_days"),
    ).collect()[0]
    tags = {
        r.tag: r
        for r in mem.where("tag IS NOT NULL")
        .groupBy("tag")
        .agg(sf.count("*").alias("n"), *stats_cols("views", "v_"), sf.avg("score").alias("avg_score"))
        .collect()
    }
    regions = {
        r.region: r
        for r in mem.groupBy("region")
        .agg(
            sf.count("*").alias("n"),
            sf.percentile("views", sf.array(sf.lit(0.1), sf.lit(0.5), sf.lit(0.99))).alias("p"),
            sf.countDistinct("title").alias("titles"),
        )
        .collect()
    }
    region_days: dict = {}
    for r in mem.where("day IS NOT NULL").groupBy("region", "day").count().collect():
        region_days.setdefault(r.region, {})[r.day] = r["count"]
    top = mem.groupBy("title").count().orderBy(sf.desc("count"), "title").limit(5).collect()
    hist = {
        float(r.k): r
        for r in mem.where("views IS NOT NULL")
        .groupBy((sf.floor(sf.col("views") / 1000) * 1000).alias("k"))
        .agg(sf.count("*").alias("n"), sf.max("score").alias("max_score"))
        .collect()
    }
    months = {
        r.m: r["count"]
        for r in mem.where("day IS NOT NULL").groupBy(sf.trunc("day", "month").alias("m")).count().collect()
    }
    weeks = {
        r.w: r["count"]
        for r in mem.where("ts IS NOT NULL")
        .groupBy((sf.floor(sf.unix_micros("ts") / WEEK_US) * WEEK_US).alias("w"))
        .count()
        .collect()
    }
    return {
        "g": g,
        "tags": tags,
        "regions": regions,
        "region_days": region_days,
        "top": top,
        "hist": hist,
        "months": months,
        "weeks": weeks,
    }


def check_against_spark(res, ref):
    """Every aggregation of AGGS in `res` equals Spark's answer `ref` (spark_reference)."""
    g = ref["g"]
    assert res["doc_count"] == g.n
    # terms + sub-aggregations (NULL keys are in no bucket), ordered by count
    ours = buckets(res["by_tag"])
    assert set(ours) == set(ref["tags"])
    for tag, b in ours.items():
        r = ref["tags"][tag]
        assert b["doc_count"] == r.n
        assert_stats(b["views"], sub(r, "v_"), f"by_tag[{tag}].views")
        assert close(b["avg_score"]["value"], r.avg_score)
    counts = [b["doc_count"] for b in res["by_tag"]["buckets"]]
    assert counts == sorted(counts, reverse=True)
    # terms on the partition column, with exact percentiles / cardinality / terms on a date below
    ours = buckets(res["by_region"])
    assert set(ours) == set(ref["regions"])
    for region, b in ours.items():
        r = ref["regions"][region]
        assert b["doc_count"] == r.n and b["titles"]["value"] == r.titles
        assert all(close(b["p"]["values"][k], v) for k, v in zip(("10.0", "50.0", "99.0"), r.p)), region
        assert {k: x["doc_count"] for k, x in buckets(b["by_day"]).items()} == ref["region_days"][region]
    # top 5 titles: exact counts (not per-split top-k estimates), ties by key
    top = ref["top"]
    assert [(b["key"], b["doc_count"]) for b in res["top_titles"]["buckets"]] == [(r.title, r["count"]) for r in top]
    assert res["top_titles"]["sum_other_doc_count"] == g.n - sum(r["count"] for r in top)
    # metrics
    assert_stats(res["score"], sub(g, "score_"), "score")
    v = sub(g, "views_")
    assert (res["min_views"]["value"], res["max_views"]["value"], res["n_views"]["value"]) == (
        v["min"],
        v["max"],
        v["count"],
    )
    assert res["sum_views"]["value"] == v["sum"] and close(res["avg_views"]["value"], v["avg"])
    assert res["n_tags"]["value"] == g.n_tags and res["max_day"]["value"] == g.max_day
    assert close(res["avg_price"]["value"], g.avg_price)
    # histogram (empty buckets in between filled with 0, as Elasticsearch does)
    ours = buckets(res["views_hist"])
    assert {k: b["doc_count"] for k, b in ours.items() if b["doc_count"]} == {k: r.n for k, r in ref["hist"].items()}
    assert all(close(b["max_score"]["value"], ref["hist"][k].max_score) for k, b in ours.items() if b["doc_count"])
    # date histograms: calendar months of a date, 7-day buckets of a timestamp
    assert {k: b["doc_count"] for k, b in buckets(res["months"]).items()} == ref["months"]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert {
        int((k - epoch).total_seconds()) * 1_000_000: b["doc_count"]
        for k, b in buckets(res["weeks"]).items()
        if b["doc_count"]
    } == ref["weeks"]
    # ranges
    assert [b["doc_count"] for b in res["score_ranges"]["buckets"]] == [g.r0, g.r1, g.r2]
    assert [b["key"] for b in res["score_ranges"]["buckets"]] == ["*-25", "25-75", "75-*"]
    assert [b["doc_count"] for b in res["day_ranges"]["buckets"]] == [g.d0, g.d1]
    # exact percentiles and distinct counts
    assert all(close(res["p"]["values"][k], x) for k, x in zip(("0.0", "25.0", "50.0", "90.0", "100.0"), g.p))
    assert res["distinct_views"]["value"] == g.distinct_views
    assert res["distinct_days"]["value"] == g.distinct_days


def test_aggregations_equal_spark(spark, table):
    path, mem = table
    everything = spark_reference(mem)
    check_against_spark(it.IndexTable(path, spark=spark).aggregate(AGGS, spark=spark, execution="spark"), everything)
    check_against_spark(it.IndexTable(path, spark=spark).aggregate(AGGS, spark=spark, execution="driver"), everything)
    # with a full-text query, and with a partition filter
    matched = mem.where(SPARK_QUERY)
    some = spark_reference(matched)
    check_against_spark(
        it.IndexTable(path, spark=spark).aggregate(AGGS, query=QUERY, spark=spark, execution="spark"), some
    )
    check_against_spark(it.IndexTable(path).aggregate(AGGS, query=QUERY), some)
    eu = it.IndexTable(path, spark=spark).aggregate(
        {"t": {"terms": {"field": "tag"}}}, partition_filter="region = 'eu'", spark=spark
    )
    assert eu["doc_count"] == everything["regions"]["eu"].n
    # counts: from the log without a query, through the index with one
    t = it.IndexTable(path)
    assert t.count() == N and t.count(QUERY) == some["g"].n
    assert t.count(partition_filter="region = 'us'") == everything["regions"]["us"].n
    # the SQL table function returns the same numbers as rows
    rows = spark.sql(
        f'SELECT * FROM indextables_aggregate(\'{path}\', \'{{"by_tag": {{"terms": {{"field": '
        f'"tag"}}, "aggs": {{"s": {{"stats": {{"field": "views"}}}}}}}}}}\', \'{QUERY}\')'
    ).collect()
    assert {r["keys"][0]: r.doc_count for r in rows if r.agg == "by_tag"} == {k: r.n for k, r in some["tags"].items()}
    sums = {r["keys"][0]: r.value for r in rows if r.agg == "by_tag.s" and r.metric == "sum"}
    assert sums == {k: float(r.v_sum) for k, r in some["tags"].items()}
    assert [r.doc_count for r in rows if r.agg == "_all"] == [some["g"].n]


# ---------------------------------------------------------------------------------------------
# Spark-free: exactness edges and errors


def small_table(tmp_path, n: int, columns: dict, options=None):
    from pyspark.sql.types import DecimalType, DoubleType, LongType, StringType, StructField, StructType

    types = {"long": LongType(), "double": DoubleType(), "string": StringType(), "dec": DecimalType(20, 4)}
    schema = StructType([StructField(c, types[t]) for c, (t, _) in columns.items()])
    from indextables_spark.core.schema.arrow_types import arrow_schema

    data = pa.Table.from_pydict({c: v for c, (_, v) in columns.items()}, schema=arrow_schema(schema.jsonValue()))
    path = str(tmp_path / "t")
    write_table(path, data, schema, options or {}, batch_rows=20_000)
    return path


def test_terms_beyond_tantivys_bucket_limit_stay_exact(tmp_path):
    n = 66_000
    path = small_table(
        tmp_path, n, {"id": ("long", list(range(n))), "k": ("string", [f"k{i % 65_500}" for i in range(n)])}
    )
    res = it.IndexTable(path).aggregate(
        {
            "ids": {"terms": {"field": "id", "size": 3, "order": {"_key": "desc"}}},
            "ks": {"terms": {"field": "k", "size": 2}},
            "n": {"cardinality": {"field": "k"}},
        }
    )
    assert [b["key"] for b in res["ids"]["buckets"]] == [n - 1, n - 2, n - 3]
    assert res["ids"]["sum_other_doc_count"] == n - 3
    assert [(b["key"], b["doc_count"]) for b in res["ks"]["buckets"]] == [("k0", 2), ("k1", 2)]
    assert res["n"]["value"] == 65_500
    with pytest.raises(AggregationError, match="65,000"):
        it.IndexTable(path).aggregate({"ids": {"terms": {"field": "id"}, "aggs": {"m": {"max": {"field": "id"}}}}})


def test_non_finite_doubles_and_decimals_are_exact(tmp_path):
    xs = [1.5, float("nan"), -2.0, float("inf"), None]
    decs = [
        decimal.Decimal("0.1000"),
        decimal.Decimal("0.2000"),
        None,
        decimal.Decimal("12345678901.0001"),
        decimal.Decimal("-3.0000"),
    ]
    path = small_table(tmp_path, 5, {"x": ("double", xs), "d": ("dec", decs), "g": ("string", list("aabbb"))})
    res = it.IndexTable(path).aggregate(
        {"x": {"stats": {"field": "x"}}, "d": {"stats": {"field": "d"}}, "dsum": {"sum": {"field": "d"}}}
    )
    assert res["x"]["count"] == 4 and math.isnan(res["x"]["max"]) and res["x"]["min"] == -2.0  # NaN is largest
    assert math.isnan(res["x"]["sum"])
    assert res["dsum"]["value"] == decimal.Decimal("12345678898.3001")  # exact, not f64
    with pytest.raises(AggregationError, match="NaN"):
        it.IndexTable(path).aggregate({"g": {"terms": {"field": "g"}, "aggs": {"x": {"max": {"field": "x"}}}}})


@pytest.mark.parametrize(
    "aggs, match",
    [
        ({"a": {"terms": {"field": "nope"}}}, "no column 'nope'"),
        ({"a": {"stats": {"field": "g"}}}, "numeric"),
        ({"a": {"terms": {"field": "g", "size": 0}}}, "size"),
        ({"a": {"histogram": {"field": "x"}}}, "interval"),
        ({"a": {"date_histogram": {"field": "x", "fixed_interval": "1d"}}}, "date or timestamp"),
        ({"a": {"terms": {"field": "g"}, "aggs": {"p": {"percentiles": {"field": "x"}}}}}, "top level"),
        ({"a": {"wat": {"field": "x"}}}, "exactly one of"),
        ({"a": {"stats": {"field": "x"}, "aggs": {"b": {"max": {"field": "x"}}}}}, "only bucket"),
        ("{not json", "not valid JSON"),
    ],
)
def test_request_errors_name_the_aggregation(tmp_path, aggs, match):
    path = small_table(tmp_path, 2, {"x": ("double", [1.0, 2.0]), "g": ("string", ["a", "b"])})
    with pytest.raises(AggregationError, match=match) as e:
        it.IndexTable(path).aggregate(aggs)
    assert isinstance(e.value, it.IndexTablesError)


@pytest.mark.parametrize("kind", ["positional", "equality"])
def test_deleted_rows_are_in_no_aggregation(tmp_path, kind):
    n = 4000
    xs = [float(i % 97) for i in range(n)]
    gs = [("a", "b", "c", "d")[i % 4] for i in range(n)]
    path = small_table(
        tmp_path,
        n,
        {"id": ("long", list(range(n))), "x": ("double", xs), "g": ("string", gs)},
        {"write.targetSplitSize": "16K"},
    )
    assert len(it.IndexTable(path).files()) >= 4
    if kind == "positional":
        it.IndexTable(path).delete("g = 'b' OR id < 100", kind=kind)
    else:  # rows equal to a deleted value, plus positions
        it.IndexTable(path).delete("g = 'b'", kind="equality")
        it.IndexTable(path).delete("id < 100", kind="positional")
    live = [(i, x, g) for i, x, g in zip(range(n), xs, gs) if not (g == "b" or i < 100)]
    aggs = {
        "g": {"terms": {"field": "g"}, "aggs": {"sx": {"sum": {"field": "x"}}}},
        "ids": {"cardinality": {"field": "id"}},
        "p": {"percentiles": {"field": "x", "percents": [50]}},
        "h": {"histogram": {"field": "x", "interval": 50}},
    }
    res = it.IndexTable(path).aggregate(aggs)
    assert res["doc_count"] == len(live) == it.IndexTable(path).count()
    want = {}
    for _, x, g in live:
        c, s = want.get(g, (0, 0.0))
        want[g] = (c + 1, s + x)
    assert {b["key"]: (b["doc_count"], b["sx"]["value"]) for b in res["g"]["buckets"]} == want
    assert res["ids"]["value"] == len(live)
    assert {b["key"]: b["doc_count"] for b in res["h"]["buckets"]} == {
        0.0: sum(1 for _, x, _ in live if x < 50),
        50.0: sum(1 for _, x, _ in live if x >= 50),
    }
    xs_live = sorted(x for _, x, _ in live)
    pos = (len(xs_live) - 1) * 0.5
    lo, hi = math.floor(pos), math.ceil(pos)
    assert close(res["p"]["values"]["50.0"], xs_live[lo] + (pos - lo) * (xs_live[hi] - xs_live[lo]))
    q = it.IndexTable(path).aggregate({"g": {"terms": {"field": "g"}}}, query="g:c OR g:b")
    assert [(b["key"], b["doc_count"]) for b in q["g"]["buckets"]] == [("c", want["c"][0])]


def test_split_partial_cache_never_serves_stale_results(tmp_path):
    n = 3000
    path = small_table(
        tmp_path,
        n,
        {"id": ("long", list(range(n))), "g": ("string", [("a", "b", "c")[i % 3] for i in range(n)])},
        {"write.targetSplitSize": "16K"},
    )
    aggs = {"g": {"terms": {"field": "g"}}}
    cold = it.IndexTable(path, {"aggregate.cache.enabled": "false"}).aggregate(aggs)
    assert it.IndexTable(path).aggregate(aggs) == cold == it.IndexTable(path).aggregate(aggs)  # cached: same
    it.IndexTable(path).delete("g = 'a'", kind="equality")  # new delete logs: new cache keys
    assert {b["key"] for b in it.IndexTable(path).aggregate(aggs)["g"]["buckets"]} == {"b", "c"}
    it.IndexTable(path).delete("id < 10", kind="positional")
    after = it.IndexTable(path).aggregate(aggs)
    assert after["doc_count"] == 2000 - sum(1 for i in range(10) if i % 3 != 0)
    assert after == it.IndexTable(path, {"aggregate.cache.enabled": "false"}).aggregate(aggs)


def test_fast_field_configuration_for_text_columns(tmp_path):
    bodies = ["Spark SQL", "spark streaming", "search engine", "SQL"]
    plain = small_table(tmp_path / "plain", 4, {"body": ("string", bodies)}, {"indexing.typemap.body": "text"})
    with pytest.raises(AggregationError, match="indexing.fastfields"):
        it.IndexTable(plain).aggregate({"t": {"terms": {"field": "body"}}})
    fast = small_table(
        tmp_path / "fast",
        4,
        {"body": ("string", bodies)},
        {"indexing.typemap.body": "text", "indexing.fastfields": "body"},
    )
    res = it.IndexTable(fast).aggregate({"t": {"terms": {"field": "body", "size": 3}}})
    # a tokenized fast field counts documents per token
    assert [(b["key"], b["doc_count"]) for b in res["t"]["buckets"]] == [("spark", 2), ("sql", 2), ("engine", 1)]
    both = small_table(tmp_path / "both", 4, {"body": ("string", bodies)}, {"indexing.typemap.body": "text_and_string"})
    res = it.IndexTable(both).aggregate({"t": {"terms": {"field": "body"}}})  # whole values (the raw field)
    assert sorted(b["key"] for b in res["t"]["buckets"]) == sorted(bodies)


def test_driver_threads_give_the_same_result(spark, table, monkeypatch):
    """The driver path searches small splits in one thread and big ones in contiguous runs per
    thread (split_threads.map_chunks): both give Spark's result (the threaded path forced here,
    the split partial cache off so that every split is searched)."""
    from indextables_spark.core.split.read import split_threads

    path, mem = table
    files = it.IndexTable(path).files()
    assert split_threads.search_threads(files) == 1  # this table's splits are small
    monkeypatch.setattr(split_threads, "SMALL_SPLIT_ROWS", 1)
    monkeypatch.setattr(split_threads.os, "cpu_count", lambda: 4)
    assert split_threads.search_threads(files) == 4
    t = it.IndexTable(path, {"spark.indextables.aggregate.cache.enabled": "false"})
    check_against_spark(t.aggregate(AGGS, execution="driver"), spark_reference(mem))
    check_against_spark(t.aggregate(AGGS, query=QUERY, execution="driver"), spark_reference(mem.where(SPARK_QUERY)))


def test_aggregations_run_the_read_plan(tmp_path):
    """Each split aggregates the rows its read plan selects (ReadPlan.index_selection): the query,
    the filters the index answers exactly and the live rows; what only the rows could decide (a
    residual filter, a text filter the index only narrows) is refused, never ignored."""
    from dataclasses import replace

    from indextables_spark.api.aggregate import aggregate, aggregation_plan
    from indextables_spark.expr.model import EqualTo, GreaterThanOrEqual, StringContains
    from indextables_spark.expr.values import UnsupportedFilterError

    n = 2000
    path = str(tmp_path / "t")
    it.write_table(
        path,
        pa.table(
            {
                "id": pa.array(range(n), pa.int64()),
                "body": [f"w{i % 7} x" for i in range(n)],
                "region": [f"r{i % 3}" for i in range(n)],
            }
        ),
        partition_by=["region"],
        options={"indexing.typemap.body": "text", "write.chunkRows": "500"},
    )
    t = it.IndexTable(path)
    t.delete("id < 100")
    snap = t.snapshot()
    plan = aggregation_plan(t.storage, snap, t.options, SearchQuery("body:w3"))
    aggs = {"ids": {"stats": {"field": "id"}}}
    exact = replace(plan, filters=(GreaterThanOrEqual("id", 1000),))
    got = aggregate(t.storage, snap, snap.files, exact, aggs, execution="driver")
    want = [i for i in range(1000, n) if i % 7 == 3]
    assert got["doc_count"] == len(want) and got["ids"]["count"] == len(want)
    assert (got["ids"]["min"], got["ids"]["max"], got["ids"]["sum"]) == (min(want), max(want), sum(want))
    everything = aggregate(t.storage, snap, snap.files, aggregation_plan(t.storage, snap, t.options, None), aggs)
    assert everything["doc_count"] == n - 100 and everything["ids"]["min"] == 100  # deleted rows left out
    for refused in (
        replace(plan, residual=(EqualTo("region", "r1"),)),
        replace(plan, filters=(StringContains("body", "3 x"),)),  # the index narrows, the rows would decide
        replace(plan, query=plan.query.with_narrowing(("body:x",))),  # (the narrowing is part of the query value)
    ):
        with pytest.raises(UnsupportedFilterError, match="index"):
            aggregate(t.storage, snap, snap.files, refused, aggs, execution="driver")
