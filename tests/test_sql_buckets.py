"""The reference's bucket functions in GROUP BY (issue #39): indextables_histogram,
indextables_date_histogram and indextables_range.

Spark-free: their argument forms and refusals, the keys the index route computes over Arrow
(core/split/aggregate/buckets.py) against a plain Python statement of each definition, and the
statement planner (frontends/sqlplan/bucket_calls.py).
With Spark (the differential test): generated statements run twice, on an indextables view (the
index route, which must answer every one) and on an in-memory view of the same live rows (Spark
computes the buckets with the functions `it.register` defines): same column names and types, same
rows. The table has NULLs, NaN, -0.0, negative values, timestamps before 1970 and across days and
a daylight-saving change of the session time zone (America/Los_Angeles), several splits, a
partition column and deleted rows. A short run is in the fast tier; the long one and the Spark
Connect run are in the integration tier (tests/tiers.py).
"""

from __future__ import annotations

import datetime as dt
import math
import random

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.aggregate import buckets as bk
from indextables_spark.frontends.sqlplan import plans
from indextables_spark.frontends.sqlplan import statement as st
from indextables_spark.spark.sql_routes import route_of
from search_tables import write_table

N = 300
UTC = dt.timezone.utc
TZ = "America/Los_Angeles"


# ---- Spark-free ------------------------------------------------------------------------------------


def test_argument_forms_and_refusals():
    assert bk.histogram(50) == bk.Histogram(50.0, 0.0)
    assert bk.histogram(10, -5, 1) == bk.Histogram(10.0, -5.0)
    assert bk.date_histogram("1h") == bk.DateHistogram("1h", 3_600_000_000, 0)
    assert bk.date_histogram("1d", "-6h").offset_micros == -6 * 3_600_000_000
    assert bk.date_histogram("100ms").interval_micros == 100_000
    r = bk.ranges(["cheap", None, 50.0, "mid", 50, 100, "dear", 100, None])
    assert [x.key for x in r.ranges] == ["cheap", "mid", "dear"]
    for bad in (
        lambda: bk.histogram(0),
        lambda: bk.histogram(-1),
        lambda: bk.histogram(5, 0, 2),  # min_doc_count > 1: HAVING says it
        lambda: bk.date_histogram("1w"),  # no calendar intervals (the reference's Tantivy has none)
        lambda: bk.date_histogram("0h"),
        lambda: bk.date_histogram("1h", "x"),
        lambda: bk.ranges(["a", None, None]),
        lambda: bk.ranges(["a", 0, 10, "b", 5, 20]),  # overlapping
        lambda: bk.ranges(["a", 0, 10, "b"]),
        lambda: bk.ranges(["", 0, 10]),
    ):
        with pytest.raises(bk.BucketArgumentError):
            bad()


def _floor_key(v, interval, offset):
    return None if v is None else (math.floor((v - offset) / interval) if math.isfinite(v) else None)


def test_histogram_keys_are_lower_bounds():
    values = [15.0, 25.0, 49.999, 50.0, -0.5, -50.0, -50.5, 0.0, -0.0, 1e300, 2.0**60, None]
    got = bk.bucket_keys(pa.array(values, pa.float64()), bk.histogram(50.0)).to_pylist()
    want = [None if v is None else math.floor(v / 50.0) * 50.0 for v in values]
    assert got == want
    shifted = bk.bucket_keys(pa.array([12.0, 4.0, -1.0], pa.float64()), bk.histogram(10, 5)).to_pylist()
    assert shifted == [5.0, -5.0, -5.0]
    odd = bk.bucket_keys(pa.array([math.nan, math.inf, -math.inf]), bk.histogram(2)).to_pylist()
    assert math.isnan(odd[0]) and odd[1:] == [math.inf, -math.inf]
    # longs beyond 2^53 are rounded to doubles first, as Spark's CAST(col AS DOUBLE)
    big = bk.bucket_keys(pa.array([2**62 + 1, -(2**62) - 1], pa.int64()), bk.histogram(1)).to_pylist()
    assert big == [float(2**62), -float(2**62)]


def test_date_histogram_keys_are_interval_starts_in_utc():
    def micros(*a):
        return int(dt.datetime(*a, tzinfo=UTC).timestamp() * 1_000_000)

    ts = pa.array([micros(2024, 1, 1, 7, 30), micros(1969, 12, 31, 23, 0, 1), None], pa.timestamp("us", tz="UTC"))
    day = bk.bucket_keys(ts, bk.date_histogram("1d")).to_pylist()
    assert day == [dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, tzinfo=UTC), None]
    six = bk.bucket_keys(ts, bk.date_histogram("1d", "6h")).to_pylist()
    assert six[:2] == [dt.datetime(2024, 1, 1, 6, tzinfo=UTC), dt.datetime(1969, 12, 31, 6, tzinfo=UTC)]
    rng = random.Random(3)
    raw = [rng.randint(-(10**15), 10**15) for _ in range(2000)]
    for interval, offset in (("1ms", None), ("15m", "-7m"), ("7d", "1d"), ("1h", "-30m")):
        spec = bk.date_histogram(interval, offset)
        got = bk.bucket_keys(pa.array(raw, pa.int64()).cast(pa.timestamp("us")), spec).cast(pa.int64())
        want = [v - (v - spec.offset_micros) % spec.interval_micros for v in raw]  # Python's % is pmod
        assert got.to_pylist() == want


def test_range_keys_follow_spark_ordering():
    spec = bk.ranges(["low", None, 0, "mid", 0, 10.5, "high", 20, None])
    values = [-5.0, 0.0, -0.0, 10.4, 10.5, 15.0, 20.0, math.inf, math.nan, None]
    got = bk.bucket_keys(pa.array(values, pa.float64()), spec).to_pylist()
    assert got == [bk.range_key(v, spec) for v in values]
    assert got == ["low", "mid", "mid", "mid", None, None, "high", "high", "high", None]


class _Catalog:
    types = {"id": "long", "price": "double", "qty": "integer", "ts": "timestamp", "d": "date", "m": "decimal(9,2)"}

    def view(self, name):
        return plans.Source("/t/b", (("path", "/t/b"),)) if name.lower() == "b" else None

    def info(self, source):
        return plans.TableInfo([*self.types, "_indexall"], dict(self.types), [], [])

    def other_columns(self, parts):
        return None

    def check_query(self, source, query):
        pass


def _plan(text):
    return st.plan(text, _Catalog(), {"b"})


def test_planner_takes_the_reference_forms():
    call = "indextables_range(price, 'cheap', NULL, 50.0, 'mid', 50.0, 100.0, 'expensive', 100.0, NULL)"
    for text in (
        "SELECT indextables_histogram(price, 50.0) AS pb, COUNT(*) FROM b GROUP BY indextables_histogram(price, 50.0)",
        "SELECT indextables_histogram(qty, 10, 5) AS pb, SUM(qty) FROM b GROUP BY 1 ORDER BY pb",
        "SELECT indextables_date_histogram(ts, '1d', offset => '6h') AS day, qty, COUNT(*) FROM b GROUP BY day, qty",
        "SELECT indextables_date_histogram(ts, '15m', '-5m', 1), COUNT(*) FROM b WHERE qty > 0 GROUP BY 1",
        f"SELECT {call} AS tier, COUNT(*) AS cnt FROM b GROUP BY {call} ORDER BY tier",
    ):
        p = _plan(text)
        assert p is not None and p.aggregate is not None, (text, p and p.notes)
        assert p.aggregate.request.buckets
    # what Spark computes instead: a date or decimal column, an expression, a non-literal argument
    for text in (
        "SELECT indextables_date_histogram(d, '1d'), COUNT(*) FROM b GROUP BY 1",
        "SELECT indextables_histogram(m, 1), COUNT(*) FROM b GROUP BY 1",
        "SELECT indextables_histogram(price + 1, 1), COUNT(*) FROM b GROUP BY 1",
        "SELECT indextables_histogram(price, qty), COUNT(*) FROM b GROUP BY 1",
        "SELECT indextables_histogram(price, 5) AS h, COUNT(*) FROM b GROUP BY indextables_histogram(price, 6)",
    ):
        p = _plan(text)
        assert p is not None and p.aggregate is None, text
    with pytest.raises(bk.BucketArgumentError):
        _plan("SELECT indextables_range(price, 'a', 0, 10, 'b', 5, 20), COUNT(*) FROM b GROUP BY 1")


# ---- with Spark ------------------------------------------------------------------------------------


def _schema():
    from pyspark.sql.types import (
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            StructField("id", LongType()),
            StructField("price", DoubleType()),
            StructField("qty", IntegerType()),
            StructField("big", LongType()),
            StructField("score", FloatType()),
            StructField("ts", TimestampType()),
            StructField("tag", StringType()),
            StructField("region", StringType()),
        ]
    )


def _rows(seed: int = 7) -> pa.Table:
    rng = random.Random(seed)

    def maybe(v, p=0.08):
        return None if rng.random() < p else v

    # instants from 1969-12-30 to 2024-03-12 (the US daylight-saving change of 2024-03-10), with gaps
    starts = [dt.datetime(1969, 12, 30, tzinfo=UTC), dt.datetime(2024, 3, 8, tzinfo=UTC)]
    prices = [0.0, -0.0, math.nan, 49.99, 50.0, -50.0, 1e6, 0.1, 100.0]
    return pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "price": pa.array(
                [
                    maybe(rng.choice(prices) if rng.random() < 0.3 else round(rng.uniform(-120, 400), 2))
                    for _ in range(N)
                ],
                pa.float64(),
            ),
            "qty": pa.array([maybe(rng.randint(-30, 60)) for _ in range(N)], pa.int32()),
            "big": pa.array([maybe(rng.randint(-(10**12), 10**12)) for _ in range(N)], pa.int64()),
            "score": pa.array([maybe(rng.uniform(-1, 1)) for _ in range(N)], pa.float32()),
            "ts": pa.array(
                [
                    maybe(
                        rng.choice(starts)
                        + dt.timedelta(seconds=rng.randint(0, 4 * 86400), microseconds=rng.randint(0, 999_999))
                    )
                    for _ in range(N)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "tag": [rng.choice(["news", "blog", None]) for _ in range(N)],
            "region": [rng.choice(["eu", "us", "apac"]) for _ in range(N)],
        }
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """(path, live rows): several splits, partitioned by region, some rows deleted."""
    path = str(tmp_path_factory.mktemp("sqlbuckets") / "t")
    rows = _rows()
    write_table(path, rows.slice(0, N // 2), _schema(), {"partitionBy": "region"}, batch_rows=40)
    write_table(path, rows.slice(N // 2), _schema(), {"partitionBy": "region"}, batch_rows=40)
    t = it.IndexTable(path)
    t.delete(where="id IN (1, 2, 3, 50, 51, 160, 161, 299)")
    live = t.to_arrow()
    assert live.num_rows == N - 8 and len(t.files()) >= 6
    return path, live


RANGES = [
    "'cheap', NULL, 50.0, 'mid', 50.0, 100.0, 'expensive', 100.0, NULL",
    "'neg', NULL, 0, 'small', 0, 10, 'large', 200, 1e3",  # a gap: [10, 200) is in no range
    "'a', -20.5, -0.0, 'b', 0.0, 0.1",
]


def statements(count: int, seed: int = 1) -> list[tuple[str, bool]]:
    """(statement with `{t}` for the view, ordered?)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        r = rng.random()
        if r < 0.4:
            col = rng.choice(["price", "qty", "big", "score"])
            interval = rng.choice(["50.0", "1", "2.5", "0.1", "10", "1e3", "7"] if col != "big" else ["1e11", "3e9"])
            extra = rng.choice(["", ", 5", ", -2.5", ", offset => 3", ", 0, 1", ", min_doc_count => 0"])
            call = f"indextables_histogram({col}, {interval}{extra})"
        elif r < 0.75:
            interval = rng.choice(["1ms", "30s", "15m", "1h", "6h", "12h", "1d", "7d"])
            extra = rng.choice(["", ", '6h'", ", '-30m'", ", offset => '2h'", ", '1h', 1"])
            call = f"indextables_date_histogram(ts, '{interval}'{extra})"
        else:
            call = f"indextables_range({rng.choice(['price', 'qty'])}, {rng.choice(RANGES)})"
        aggs = rng.sample(
            ["COUNT(*)", "COUNT(qty)", "SUM(qty)", "AVG(price)", "MIN(ts)", "MAX(price)", "SUM(big)", "MIN(score)"],
            rng.randint(1, 3),
        )
        extra_key = rng.choice(["", "", "", "tag", "region"])
        sel = ", ".join([f"{call} AS bucket"] + ([extra_key] if extra_key else []) + aggs)
        group = rng.choice([call, "1", "bucket"]) + (f", {extra_key}" if extra_key else "")
        where = rng.choice(
            ["", "", " WHERE qty > 0", " WHERE tag = 'news'", " WHERE region <> 'us'", " WHERE price IS NOT NULL"]
        )
        ordered = rng.random() < 0.5
        order = " ORDER BY bucket" + (f", {extra_key}" if extra_key else "") if ordered else ""
        out.append((f"SELECT {sel} FROM {{t}}{where} GROUP BY {group}{order}", ordered))
    return out


def _norm(v):
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else (round(v, 9) + 0.0,)
    return (v,)


def _rows_of(df):
    return [tuple(_norm(v) for v in r) for r in df.collect()]


def _differential(session, tables, count: int, seed: int) -> None:
    path, live = tables
    before = session.conf.get("spark.sql.session.timeZone")
    session.conf.set("spark.sql.session.timeZone", TZ)
    try:
        session.sql(f"CREATE OR REPLACE TEMPORARY VIEW bdocs USING indextables OPTIONS (path '{path}')")
        session.createDataFrame(live.select(_schema().names)).createOrReplaceTempView("bmem")
        failures = []
        for text, ordered in statements(count, seed):
            ours = session.sql(text.format(t="bdocs"))
            route = route_of(ours)
            if route is None or route.name != "index aggregate":
                failures.append(f"not answered from the index: {text} {route and route.notes}")
                continue
            spark_df = session.sql(text.format(t="bmem"))
            got, want = _rows_of(ours), _rows_of(spark_df)
            if not ordered:
                got, want = sorted(got, key=repr), sorted(want, key=repr)
            if ours.schema.simpleString() != spark_df.schema.simpleString() or got != want:
                failures.append(f"{text}\n  index {ours.schema.simpleString()} {got[:5]}\n  spark {want[:5]}")
        assert not failures, f"{len(failures)} of {count} differ:\n" + "\n".join(failures[:8])
    finally:
        session.conf.set("spark.sql.session.timeZone", before)


@pytest.mark.spark
def test_generated_statements(spark, tables):
    _differential(spark, tables, 6, seed=1)


@pytest.mark.spark
def test_generated_statements_long(spark, tables):
    _differential(spark, tables, 80, seed=2)


@pytest.mark.spark
def test_generated_statements_connect(connect_spark, tables):
    it.register(connect_spark)
    _differential(connect_spark, tables, 8, seed=3)


@pytest.mark.spark
def test_functions_work_without_the_index(spark):
    """Spark computes the functions anywhere: DataFrame code (`expr`), other formats; misuse fails."""
    from pyspark.sql import functions as sf

    df = spark.createDataFrame([(15.0,), (75.0,), (None,), (150.0,)], "price double")
    got = df.groupBy(sf.expr("indextables_histogram(price, 50.0)").alias("b")).count().orderBy("b").collect()
    assert [tuple(r) for r in got] == [(None, 1), (0.0, 1), (50.0, 1), (150.0, 1)]
    tiers = df.select(sf.expr("indextables_range(price, 'cheap', NULL, 50.0, 'dear', 50.0, NULL)").alias("t"))
    assert [r.t for r in tiers.collect()] == ["cheap", "dear", None, "dear"]
    for bad in ("indextables_histogram(price, 0)", "indextables_histogram(price, 5, 0, 2)"):
        with pytest.raises(Exception, match="indextables_histogram"):
            df.select(sf.expr(bad)).collect()
