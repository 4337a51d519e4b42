"""SQL planned for the index vs Spark over the same rows in memory: 300 generated statements, in a
classic session and over Spark Connect.

Statements: projections, aggregates with and without GROUP BY (NULL and NaN keys and values, -0.0,
empty groups), partition columns, deleted rows, full-text predicates with the reference's operators
(TEXTSEARCH, FIELDMATCH, indexquery, indexqueryall, AND/OR/NOT), joins of two views, subqueries.
Each statement runs twice: on indextables views, and on in-memory views of the same live rows with
each search operator replaced by the Spark expression that selects the same rows (bodies are
lower-case words separated by one space, so a term is `array_contains(split(body, ' '), 'w')`;
Tantivy's NOT keeps rows whose field is NULL, so a negated search is `NOT coalesce(x, false)`).
Results must be equal: same column names and types, same rows (doubles to 1e-9, NaN = NaN), in
the same order where the statement fixes one.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import math
import os
import pickle
import random

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.spark.sql_routes import route_of
from search_tables import write_table

pytestmark = pytest.mark.spark

N = 400
STATEMENTS = 300
WORDS = ["spark", "lake", "query", "index", "data", "engine", "quasar", "stream"]
TAGS = ["news", "blog", "docs", None]
REGIONS = ["eu", "us", "apac"]
FLOATS = [0.0, -0.0, math.nan, 1.5, -2.25, 3.0, None, math.inf, 10.125]


def _schema():
    from pyspark.sql.types import DateType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("id", LongType()),
            StructField("body", StringType()),
            StructField("tag", StringType()),
            StructField("n", IntegerType()),
            StructField("views", LongType()),
            StructField("f", DoubleType()),
            StructField("day", DateType()),
            StructField("region", StringType()),
        ]
    )


def _label_schema():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("id", LongType()), StructField("label", StringType())])


def _rows(seed: int = 11) -> pa.Table:
    rng = random.Random(seed)

    def maybe(v, p=0.08):
        return None if rng.random() < p else v

    return pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "body": [maybe(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))) for _ in range(N)],
            "tag": [rng.choice(TAGS) for _ in range(N)],
            "n": pa.array([maybe(rng.randint(-3, 9)) for _ in range(N)], pa.int32()),
            "views": pa.array([maybe(rng.randint(0, 10**12)) for _ in range(N)], pa.int64()),
            "f": pa.array([rng.choice(FLOATS) for _ in range(N)], pa.float64()),
            "day": pa.array([maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 9))) for _ in range(N)]),
            "region": [rng.choice(REGIONS) for _ in range(N)],
        }
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """(docs path, labels path, live docs rows, label rows): docs in several splits, partitioned by
    region, with some rows deleted."""
    base = tmp_path_factory.mktemp("sqldiff")
    docs_path, labels_path = str(base / "docs"), str(base / "labels")
    rows = _rows()
    opts = {"partitionBy": "region", "spark.indextables.indexing.typemap.body": "text"}
    write_table(docs_path, rows.slice(0, N // 2), _schema(), opts, batch_rows=60)
    write_table(docs_path, rows.slice(N // 2), _schema(), opts, batch_rows=60)
    t = it.IndexTable(docs_path)
    t.delete(where="id IN (3, 10, 17, 24, 31, 38, 45, 52, 200, 201, 202)")
    t.delete(query="body:quasar AND body:stream")
    live = t.to_arrow()
    assert live.num_rows < N and len(t.files()) >= 6
    rng = random.Random(5)
    labels = pa.table(
        {
            "id": pa.array([i for i in range(0, N, 3)], pa.int64()),
            "label": [rng.choice(["red", "blue", None]) for _ in range(0, N, 3)],
        }
    )
    write_table(labels_path, labels, _label_schema(), {})
    return docs_path, labels_path, live, labels


# ---- statement generator ---------------------------------------------------------------------------


class Gen:
    """Pairs (statement on the indextables views, the same statement for Spark's in-memory views)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def pick(self, xs):
        return self.rng.choice(xs)

    def term(self, q: str = "") -> tuple[str, str]:
        """One search operator and its Spark equivalent (columns qualified with `q`)."""
        r = self.rng.random()
        w, w2 = self.pick(WORDS), self.pick(WORDS)
        body = f"split({q}body, ' ')"
        if r < 0.35:
            return f"{q}body TEXTSEARCH '{w}'", f"array_contains({body}, '{w}')"
        if r < 0.5:
            return (
                f"{q}body TEXTSEARCH '{w} AND {w2}'",
                f"(array_contains({body}, '{w}') AND array_contains({body}, '{w2}'))",
            )
        if r < 0.6:
            return f"{q}body TEXTSEARCH '\"{w} {w2}\"'", f"(concat(' ', {q}body, ' ') LIKE '% {w} {w2} %')"
        if r < 0.75:
            tag = self.pick(["news", "blog", "docs"])
            return f"{q}tag FIELDMATCH '{tag}'", f"({q}tag = '{tag}')"
        if r < 0.85:
            k = self.rng.randint(0, 9)  # '-2' would be Tantivy's "NOT 2"
            return f"{q}n FIELDMATCH '{k}'", f"({q}n = {k})"
        if r < 0.93:
            return (
                f"{q}body indexquery '{w} OR {w2}'",
                f"(array_contains({body}, '{w}') OR array_contains({body}, '{w2}'))",
            )
        if q:
            return f"{q}_indexall indexquery '{w}'", f"array_contains({body}, '{w}')"
        return f"indexqueryall('{w}')", f"array_contains({body}, '{w}')"

    def search(self, q: str = "") -> tuple[str, str]:
        """A search condition: a term, NOT a term, or an OR of two terms."""
        r = self.rng.random()
        a, sa = self.term(q)
        if r < 0.6:
            return a, f"coalesce({sa}, false)"
        if r < 0.8:
            return f"NOT {a}", f"NOT coalesce({sa}, false)"
        b, sb = self.term(q)
        return f"({a} OR {b})", f"(coalesce({sa}, false) OR coalesce({sb}, false))"

    def filter(self, q: str = "") -> str:
        """A plain SQL condition (the same text on both sides)."""
        return self.pick(
            [
                f"{q}n > {self.rng.randint(-2, 6)}",
                f"{q}n IS NULL",
                f"{q}tag IS NOT NULL",
                f"{q}tag IN ('news', 'docs')",
                f"{q}region = '{self.pick(REGIONS)}'",
                f"{q}region <> 'eu'",
                f"{q}f > 0",
                f"{q}f = 0.0",
                f"{q}views BETWEEN 1000 AND {self.rng.randint(10**10, 10**12)}",
                f"{q}day >= '2024-01-0{self.rng.randint(1, 9)}'",
                f"{q}body LIKE '{self.pick(WORDS)}%'",
                f"NOT ({q}n <=> 3)",
                f"({q}n < 2 OR {q}tag = 'blog')",
                f"{q}id % 5 = 1",
            ]
        )

    def where(self, q: str = "", search_p: float = 0.75) -> tuple[str, str]:
        parts, mem = [], []
        if self.rng.random() < search_p:
            s, m = self.search(q)
            parts.append(s)
            mem.append(m)
        for _ in range(self.rng.randint(0, 2)):
            f = self.filter(q)
            parts.append(f)
            mem.append(f)
        if not parts:
            return "", ""
        return " WHERE " + " AND ".join(parts), " WHERE " + " AND ".join(mem)

    def projection(self) -> tuple[str, str, bool]:
        cols = self.rng.sample(["id", "body", "tag", "n", "views", "f", "day", "region"], self.rng.randint(1, 4))
        if "id" not in cols and self.rng.random() < 0.5:
            cols.append("id")
        if self.rng.random() < 0.1:
            cols = ["*"]
        w, mw = self.where()
        sel = ", ".join(cols)
        return f"SELECT {sel} FROM docs{w}", f"SELECT {sel} FROM m_docs{mw}", False

    def aggregate(self) -> tuple[str, str, bool]:
        keys = self.pick([[], [], ["region"], ["tag"], ["n"], ["f"], ["day"], ["region", "tag"], ["tag", "f"]])
        aggs = self.rng.sample(
            [
                "count(*)",
                "count(1) AS c1",
                "count(n)",
                "count(f)",
                "sum(n)",
                "sum(views) AS sv",
                "sum(f)",
                "avg(n)",
                "avg(views)",
                "avg(f)",
                "min(n)",
                "max(n)",
                "min(f)",
                "max(f)",
                "min(tag)",
                "max(tag) AS mt",
                "min(day)",
                "max(views)",
                "count(tag)",
            ],
            self.rng.randint(1, 4),
        )
        w, mw = self.where(search_p=0.6)
        sel = ", ".join(keys + aggs)
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        order, ordered = "", False
        if keys and self.rng.random() < 0.5:
            order = " ORDER BY " + ", ".join(f"{k} {self.pick(['ASC', 'DESC'])}" for k in keys)
            ordered = True
            if self.rng.random() < 0.3:
                order += f" LIMIT {self.rng.randint(1, 4)}"
        return f"SELECT {sel} FROM docs{w}{group}{order}", f"SELECT {sel} FROM m_docs{mw}{group}{order}", ordered

    def join(self) -> tuple[str, str, bool]:
        s, m = self.search("d.")
        extra = self.pick(["", " AND l.label = 'red'", " AND l.label IS NULL", f" AND {self.filter('d.')}"])
        if self.rng.random() < 0.5:
            sel = "d.id, d.tag, l.label"
            tail = ""
        else:
            sel = "l.label, count(*) AS c, sum(d.n) AS s"
            tail = " GROUP BY l.label"
        ours = f"SELECT {sel} FROM docs d JOIN labels l ON d.id = l.id WHERE {s}{extra}{tail}"
        mem = f"SELECT {sel} FROM m_docs d JOIN m_labels l ON d.id = l.id WHERE {m}{extra}{tail}"
        return ours, mem, False

    def subquery(self) -> tuple[str, str, bool]:
        w, mw = self.where()
        if self.rng.random() < 0.5:
            return (
                f"SELECT count(*) AS c FROM (SELECT id, tag FROM docs{w}) t WHERE t.tag IS NOT NULL",
                f"SELECT count(*) AS c FROM (SELECT id, tag FROM m_docs{mw}) t WHERE t.tag IS NOT NULL",
                False,
            )
        s, m = self.search()
        return (
            f"SELECT id, n FROM docs WHERE {s} AND id IN (SELECT id FROM labels WHERE label = 'blue')",
            f"SELECT id, n FROM m_docs WHERE {m} AND id IN (SELECT id FROM m_labels WHERE label = 'blue')",
            False,
        )

    def statement(self) -> tuple[str, str, bool]:
        r = self.rng.random()
        if r < 0.35:
            return self.projection()
        if r < 0.75:
            return self.aggregate()
        if r < 0.9:
            return self.join()
        return self.subquery()


def statements() -> list[tuple[str, str, bool]]:
    g = Gen(2026)
    return [g.statement() for _ in range(STATEMENTS)]


# ---- comparison -----------------------------------------------------------------------------------------


def _norm(v):
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan",)
        return round(v, 6) if abs(v) < 1e12 else float(f"{v:.12e}")
    return v


def _key(row):
    return tuple((0, "") if v is None else (1, repr(type(v)), str(v)) for v in row)


def _same_rows(got: list, want: list, ordered: bool) -> bool:
    g = [tuple(_norm(v) for v in r) for r in got]
    w = [tuple(_norm(v) for v in r) for r in want]
    if not ordered:
        g, w = sorted(g, key=_key), sorted(w, key=_key)
    return g == w


def _run_all(session, tables, expected: dict | None, memory, every: int = 1) -> dict:
    """Each `every`-th statement (Connect runs half: the same planning as classic, behind a server
    whose round trips doubled the suite's longest test) against Spark's answers."""
    docs_path, labels_path, _, _ = tables
    session.sql(f"CREATE OR REPLACE TEMPORARY VIEW docs USING indextables OPTIONS (path '{docs_path}')")
    session.sql(f"CREATE OR REPLACE TEMPORARY VIEW labels USING indextables OPTIONS (path '{labels_path}')")
    routes: dict[str, int] = {}
    failures = []
    out = {}
    for i, (ours, mem, ordered) in enumerate(statements()):
        if i % every:
            continue
        df = session.sql(ours)
        found = route_of(df)
        route = found.name if found is not None else "spark"
        routes[route] = routes.get(route, 0) + 1
        got = [tuple(r) for r in df.collect()]
        got_schema = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        if expected is None:
            want_df = memory.sql(mem)
            want = (
                [tuple(r) for r in want_df.collect()],
                [(f.name, f.dataType.simpleString()) for f in want_df.schema],
            )
        else:
            want = expected[i]
        out[i] = want
        if got_schema != want[1] or not _same_rows(got, want[0], ordered):
            failures.append(f"#{i} {ours}\n   ours {got_schema} {got[:6]}\n   spark {want[1]} {want[0][:6]}")
    assert not failures, f"{len(failures)} of {len(out)} statements differ:\n" + "\n".join(failures[:10])
    # the generated statements exercise both routes
    assert routes.get("index aggregate", 0) >= 60 // every and routes.get("scan", 0) >= 100 // every, routes
    return out


def _spark_answers(spark, live: pa.Table, labels: pa.Table) -> dict:
    """Spark's own answers: every statement's in-memory side over the live rows, in `spark` (classic)."""
    spark.createDataFrame(
        live.select([f.name for f in _schema().fields]).to_pylist(), _schema()
    ).createOrReplaceTempView("m_docs")
    spark.createDataFrame(labels.to_pylist(), _label_schema()).createOrReplaceTempView("m_labels")
    out = {}
    for i, (_, mem, _) in enumerate(statements()):
        df = spark.sql(mem)
        out[i] = ([tuple(r) for r in df.collect()], [(f.name, f.dataType.simpleString()) for f in df.schema.fields])
    return out


def _digest(*tables: pa.Table) -> str:
    """What the answers depend on: the rows (in id order) and the statements."""
    h = hashlib.sha256(repr(statements()).encode())
    for t in tables:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t.sort_by("id"))
        h.update(sink.getvalue().to_pybytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def expected(request, tables, tmp_path_factory):
    """Spark's own answers over the live rows in memory, computed once per test run: the classic
    and the Connect tests run in different pytest-xdist processes (tests/tiers.py groups), so the
    first to get here computes them (in its classic session) under a file lock and leaves them in
    the run's shared temp dir, keyed by a digest of the rows and statements; the other reads them."""
    _, _, live, labels = tables
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # popen-gwN/.. is the run's
    path = shared / f"sql-differential-answers-{_digest(live, labels)}.pickle"
    with open(shared / "sql-differential-answers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                return pickle.loads(path.read_bytes())
            out = _spark_answers(request.getfixturevalue("spark"), live, labels)
            part = path.with_suffix(".part")
            part.write_bytes(pickle.dumps(out))
            part.rename(path)
            return out
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def test_generated_statements_classic(spark, tables, expected):
    _run_all(spark, tables, expected, spark)


def test_generated_statements_connect(connect_spark, tables, expected):
    it.register(connect_spark)
    _run_all(connect_spark, tables, expected, None, every=2)
