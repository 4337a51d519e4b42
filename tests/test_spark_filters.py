"""Differential test: pushed filters through the connector equal Spark's own evaluation."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pytest

pytestmark = pytest.mark.spark

N_ROWS = 10_000
WORDS = ["alpha", "beta", "gamma", "delta", "Spark", "search", "émoji🚀", "zeta", ""]

FILTERS = [
    # string (exact, raw)
    "s = 'alpha'",
    "s <> 'beta'",
    "s > 'delta'",
    "s >= 'delta'",
    "s < 'beta'",
    "s <= 'beta'",
    "s in ('alpha', 'zeta', 'nope')",
    "s is null",
    "s is not null",
    "s like 'al%'",
    "s like '%ta'",
    "s like '%mm%'",
    "not (s like 'b%')",
    "s = ''",
    "s <=> null",
    "s <=> 'gamma'",
    "s not in ('alpha', 'beta')",
    "s = 'émoji🚀'",
    # text (tokenized)
    "t = 'alpha beta'",
    "t like '%Spark%'",
    "t like 'gamma%'",
    "t like '%delta'",
    "t is null",
    "t in ('alpha beta', 'zeta')",
    "t > 'm'",
    # integers
    "n = 42",
    "n <> 42",
    "n > 900",
    "n >= 990",
    "n < 5",
    "n <= 5",
    "n in (1, 2, 3, 999)",
    "n is null",
    "not (n > 10)",
    "n between 100 and 120",
    "n <=> null",
    "n >= 500 and n < 510 and s = 'alpha'",
    # doubles with NaN and infinities
    "x = 0.5",
    "x > 0.9",
    "x < 0.1",
    "x >= 1.0",
    "x = double('NaN')",
    "x > 100",
    "x <= double('-inf')",
    "x is null",
    "not (x < 0.5)",
    "x in (0.25, 0.5)",
    # dates and timestamps
    "day = date'2024-02-29'",
    "day > date'2024-12-01'",
    "day between date'2024-03-01' and date'2024-03-05'",
    "ts > timestamp'2024-06-01 00:00:00'",
    "ts <= timestamp'2024-01-02 00:00:00'",
    "ts = timestamp'2024-01-01 00:00:00'",
    "ts is null",
    # booleans
    "flag",
    "not flag",
    "flag = false",
    "flag is null",
    # decimals
    "dec = 1.25",
    "dec > 50",
    "dec < -50.5",
    "dec in (0.00, 1.25)",
    # partition column, and mixes
    "part = 'p1'",
    "part in ('p0', 'p2')",
    "part <> 'p1' and n < 100",
    "part is null",
    "s = 'alpha' and part = 'p2' and flag",
]


def make_rows():
    rng = random.Random(7)
    base_ts = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for i in range(N_ROWS):

        def maybe(v, p=0.05):
            return None if rng.random() < p else v

        x = rng.choice([rng.random(), 0.5, 0.25, float("nan"), float("inf"), float("-inf"), 1.0])
        rows.append(
            (
                i,
                maybe(rng.choice(WORDS)),
                maybe(" ".join(rng.choice(WORDS[:6]) for _ in range(rng.randint(1, 2)))),
                maybe(rng.randint(0, 1000)),
                maybe(x),
                maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 365))),
                maybe(
                    base_ts + dt.timedelta(seconds=rng.randint(0, 365 * 86400), microseconds=rng.randint(0, 999999))
                    if rng.random() > 0.01
                    else base_ts
                ),
                maybe(rng.random() < 0.5),
                maybe(
                    decimal.Decimal(rng.randint(-10000, 10000)) / 100 if rng.random() > 0.1 else decimal.Decimal("1.25")
                ),
                maybe(rng.choice(["p0", "p1", "p2"]), 0.02),
            )
        )
    return rows


SCHEMA = (
    "id long, s string, t string, n int, x double, day date, ts timestamp, flag boolean, dec decimal(10,2), part string"
)


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("diff") / "t")
    df = spark.createDataFrame(make_rows(), SCHEMA).repartition(4)
    (
        df.write.format("indextables")
        .mode("append")
        .option("partitionBy", "part")
        .option("spark.indextables.indexing.typemap.t", "text")
        .save(path)
    )
    # Not cached: Spark's in-memory cache drops NaN rows for `x = double('NaN')`.
    mem = spark.createDataFrame(make_rows(), SCHEMA)
    ours = spark.read.format("indextables").load(path)
    return ours, mem


def test_enough_filters():
    assert len(FILTERS) >= 40


@pytest.mark.parametrize("expr", FILTERS)
def test_filter_matches_spark(tables, expr):
    ours, mem = tables
    got = sorted(r.id for r in ours.filter(expr).select("id").collect())
    want = sorted(r.id for r in mem.filter(expr).select("id").collect())
    assert got == want, f"{expr}: {len(got)} rows vs {len(want)} expected"


def test_full_rows_equal(tables):
    ours, mem = tables

    def norm(rows):
        return sorted(
            (tuple("NaN" if isinstance(v, float) and v != v else v for v in r) for r in rows), key=lambda t: t[0]
        )

    assert norm(ours.collect()) == norm(mem.collect())


def mismatches(ours, mem, exprs) -> list[str]:
    """The filter texts whose ids differ between our read and Spark's own over the same rows."""
    wrong = []
    for expr in exprs:
        got = sorted(r.id for r in ours.filter(expr).select("id").collect())
        want = sorted(r.id for r in mem.filter(expr).select("id").collect())
        if got != want:
            wrong.append(f"{expr}: {len(got)} rows vs {len(want)}")
    return wrong


def test_filters_on_stored_only_columns_match_spark(spark, tables, tmp_path):
    """indexing.storeonly columns have no index: every filter on them is exact through the rows."""
    _, mem = tables
    path = str(tmp_path / "stored")
    (
        spark.createDataFrame(make_rows(), SCHEMA)
        .repartition(2)
        .write.format("indextables")
        .option("partitionBy", "part")
        .option("spark.indextables.indexing.typemap.t", "text")
        .option("spark.indextables.indexing.storeonly", "s,n,x,day,ts,flag,dec")
        .save(path)
    )
    ours = spark.read.format("indextables").load(path)
    wrong = mismatches(ours, mem, FILTERS)
    assert not wrong, wrong
    assert ours.filter("t like '%Spark%'").count() == mem.filter("t like '%Spark%'").count()


def test_struct_field_filters_match_spark(spark, tmp_path):
    """Filters on struct fields (`user.name = 'alice'`, `IN`, integers, booleans) narrow the search
    through the column's json field and stay exact (Spark re-checks), over NULL structs, NULL
    fields, case and multi-word values, and splits written before the column existed."""
    rng = random.Random(11)
    names = ["alice", "Alice", "bob smith", "Bob", "carol-ann", "", None, "éloïse", "alice smith"]

    def row(i):
        user = (
            None
            if rng.random() < 0.1
            else (rng.choice(names), rng.choice([None, 30, 51, 0, 7]), rng.choice([None, True, False]))
        )
        return (i, user)

    schema = "id long, user struct<name:string, age:int, vip:boolean>"
    rows = [row(i) for i in range(600)]
    path = str(tmp_path / "s")
    spark.createDataFrame([(i,) for i in range(600, 650)], "id long").write.format("indextables").save(path)
    spark.createDataFrame(rows, schema).repartition(3).write.format("indextables").mode("append").option(
        "mergeSchema", "true"
    ).save(path)
    mem = spark.createDataFrame(rows + [(i, None) for i in range(600, 650)], schema)
    ours = spark.read.format("indextables").load(path)
    exprs = [
        "user.name = 'alice'",
        "user.name = 'Alice'",
        "user.name = 'bob smith'",
        "user.name = ''",
        "user.name = 'carol-ann'",
        "user.name = 'éloïse'",
        "user.age = 51",
        "user.age = 0",
        "user.vip = true",
        "user.vip = false",
        "user.name in ('Bob', 'alice smith', 'nobody')",
        "user.age in (7, 30)",
        "user.name = 'alice' and user.age = 51",
        "user.name = 'alice' or user.vip = false",
        "user.name is null",
        "user is null",
        "not (user.name = 'alice')",
    ]
    wrong = mismatches(ours, mem, exprs)
    assert not wrong, wrong
    import indextables_spark as it

    (e,) = [x for x in it.explain(ours.filter("user.name = 'bob smith' and user.age in (7, 30)")) if x["path"] == path]
    assert e["struct_field_narrowing"] == ['user.name:"bob smith"', "(user.age:7 OR user.age:30)"]


def test_explain_keeps_only_its_own_tables(spark, tmp_path):
    """it.explain(df) returns the reads of df's tables, not those another session of the machine
    planned at the same moment (a second pytest worker, another notebook): here a record another
    process wrote with a later time, as it would while df is being planned."""
    import json
    import os
    import time

    import indextables_spark as it
    from indextables_spark.spark import guard

    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a b")], "id long, body string").write.format("indextables").save(path)
    other = os.path.join(guard._scans_dir(), f"explain-{time.time() + 30:.6f}-1-1.json")
    with open(other, "w", encoding="utf-8") as fh:
        json.dump({"path": str(tmp_path / "elsewhere"), "tasks": 1}, fh)
    try:
        df = spark.read.format("indextables").option("query", "body:a").load(path)
        assert [e["path"] for e in it.explain(df)] == [path]
    finally:
        os.remove(other)
