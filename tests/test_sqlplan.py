"""SQL statements planned for the index, without Spark: the operator rewrite, the statement planner
(sqlplan/), the search operators (expr/operators.py) and the SQL aggregates (core/split/aggregate/group_aggregate.py)."""

from __future__ import annotations

import json
import math
import random

import pyarrow as pa
import pytest

from indextables_spark.config.options import Options
from indextables_spark.core.split.aggregate import group_aggregate as ga
from indextables_spark.expr import operators as ops
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.frontends.sqlplan import operators as lex
from indextables_spark.frontends.sqlplan import plans
from indextables_spark.frontends.sqlplan import statement as st

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in [
            ("id", "long"),
            ("body", "string"),
            ("title", "string"),
            ("n", "integer"),
            ("f", "double"),
            ("price", "decimal(10,2)"),
            ("ts", "timestamp"),
            ("region", "string"),
        ]
    ],
}
SPECS = column_specs(SCHEMA, ["region"], Options.of({"indexing.typemap.body": "text"}))
TYPES = {f["name"]: f["type"] for f in SCHEMA["fields"]}


class FakeCatalog:
    def __init__(self, views=("docs", "other_docs")):
        self.views = set(views)

    def view(self, name):
        return (
            plans.Source(f"/t/{name.lower()}", (("path", f"/t/{name.lower()}"),))
            if name.lower() in self.views
            else None
        )

    def info(self, source):
        names = [f["name"] for f in SCHEMA["fields"]] + ["_indexall"]
        return plans.TableInfo(names, dict(TYPES), ["region"], SPECS)

    def check_query(self, source, query):
        from indextables_spark.core.split.read.query_parsing import query_for_specs
        from indextables_spark.expr.search_query import SearchQuery

        query_for_specs(SPECS, SearchQuery(query))

    def other_columns(self, parts):
        return ["id", "label"] if parts[-1].lower() == "mem" else None


def plan(text, views=("docs", "other_docs")):
    cat = FakeCatalog(views)
    return st.plan(text, cat, set(views))


def decoded_filters(text):
    """The search conditions of a planned text, decoded from the `_indexall = '…'` literals."""
    out = []
    marker = "_indexall = '"
    i = text.find(marker)
    while i >= 0:
        j = i + len(marker)
        k = j
        while text[k] != "'" or text[k - 1] == "\\":
            k += 1
        raw = text[j:k].replace("\\'", "'").replace("\\\\", "\\")
        out.append(json.loads(raw.split(":", 1)[1]))
        i = text.find(marker, k)
    return out


# ---- the operator rewrite ------------------------------------------------------------------------


def test_rewrite_operators_keeps_the_rest_of_the_text():
    text = "SELECT 'a TEXTSEARCH b' AS s FROM docs d WHERE d.body TEXTSEARCH 'it''s' -- body TEXTSEARCH 'x'\n"
    rw = lex.rewrite(text)
    assert rw.operators == 1
    assert rw.text.startswith(
        "SELECT 'a TEXTSEARCH b' AS s FROM docs d WHERE indextables_search_op('textsearch', d.body, "
    )
    assert rw.text.endswith("-- body TEXTSEARCH 'x'\n")


def test_rewrite_star_forms_and_case():
    rw = lex.rewrite("SELECT * FROM docs t WHERE * fieldmatch 'a' AND t.* TextSearch 'b' AND `body` indexquery 'c'")
    assert "indextables_search_op('fieldmatch', _indexall, 'a')" in rw.text
    assert "indextables_search_op('textsearch', t._indexall, 'b')" in rw.text
    assert "indextables_search_op('indexquery', `body`, 'c')" in rw.text


def test_rewrite_ignores_words_that_are_not_operators():
    text = "SELECT textsearch FROM t WHERE fieldmatch = 'x'"
    assert lex.rewrite(text).text == text


# ---- which tables, which columns ---------------------------------------------------------------------


def test_statements_without_our_tables_pass_through():
    assert plan("SELECT * FROM mem WHERE id > 1") is None
    assert plan("SELECT 1") is None
    assert plan("CREATE TABLE x (a INT)") is None


def test_projection_from_the_statement():
    p = plan("SELECT id, upper(title) FROM docs WHERE n > 3 ORDER BY f")
    assert [s.columns for s in p.scans] == [["id", "title", "n", "f"]]
    assert p.text.startswith(f"SELECT id, upper(title) FROM `{p.scans[0].view}` AS docs WHERE")


def test_star_reads_every_column_and_count_reads_none():
    assert plan("SELECT * FROM docs").scans[0].columns == [f["name"] for f in SCHEMA["fields"]]
    assert plan("SELECT count(*) FROM docs").scans[0].columns == []


def test_each_reference_gets_its_own_scan():
    p = plan("SELECT a.id FROM docs a JOIN docs b ON a.id = b.n WHERE b.title = 'x'")
    assert [s.columns for s in p.scans] == [["id"], ["title", "n"]]
    assert p.scans[0].view != p.scans[1].view


def test_subqueries_correlated_columns_and_ctes():
    p = plan("SELECT id FROM docs d WHERE EXISTS (SELECT 1 FROM mem m WHERE m.id = d.n)")
    assert p.scans[0].columns == ["id", "n"]
    p = plan("WITH c AS (SELECT id, title FROM docs) SELECT title FROM c")
    assert p.scans[0].columns == ["id", "title"]
    # a CTE named like a view shadows it
    assert plan("WITH docs AS (SELECT 1 AS id) SELECT id FROM docs") is None


def test_path_references():
    p = plan("SELECT id FROM indextables.`/data/t` WHERE body TEXTSEARCH 'x'")
    assert p.scans[0].source.path == "/data/t"
    assert p.scans[0].columns == ["id"]
    assert p.scans[0].query == "body:(x)"
    assert p.text == f"SELECT id FROM `{p.scans[0].view}` WHERE TRUE"


def test_unresolvable_statement_reads_every_column():
    p = plan("SELECT id FROM docs JOIN unknown_table u ON docs.id = u.x")
    assert p.scans[0].columns is None
    assert any("every column" in n for n in p.notes)


# ---- search conditions ---------------------------------------------------------------------------------


def test_search_conjuncts_become_the_scans_query():
    p = plan("SELECT id FROM docs WHERE body TEXTSEARCH 'a b' AND n > 1 AND title FIELDMATCH 'x'")
    assert p.scans[0].query == "body:(a b) AND title:(x)"
    assert p.text.endswith("WHERE TRUE AND n > 1 AND TRUE")
    assert p.scans[0].columns == ["id", "n"]  # the searched columns are not read
    assert not p.scans[0].keeps_indexall  # `SELECT *` would show the table's columns only


def test_or_and_not_of_searches():
    p = plan("SELECT id FROM docs WHERE NOT (body TEXTSEARCH 'a' OR indexqueryall('b')) AND id < 5")
    assert p.scans[0].query == "* AND NOT (body:(a) OR (b))"
    assert p.text.rstrip().endswith("WHERE TRUE AND id < 5")


def test_raw_indexall_joins_the_operators_condition():
    p = plan("SELECT id FROM docs WHERE _indexall = 'title:x' AND body TEXTSEARCH 'a'")
    assert p.scans[0].query == "(title:x) AND body:(a)"
    assert plan("SELECT id FROM docs WHERE _indexall = 'title:x'").scans[0].query == "title:x"


def test_searches_on_two_tables_of_a_join():
    p = plan(
        "SELECT a.id FROM docs a JOIN other_docs b ON a.id = b.id WHERE a.body TEXTSEARCH 'x' AND b.title FIELDMATCH 'y'"
    )
    assert [s.query for s in p.scans] == ["body:(x)", "title:(y)"]


def test_outer_joins_keep_searches_as_filters_where_they_must():
    # WHERE on the NULL-supplying side of a LEFT JOIN: a filter after the join (Spark makes it inner)
    p = plan("SELECT a.id FROM docs a LEFT JOIN other_docs b ON a.id = b.id WHERE b.body TEXTSEARCH 'x'")
    assert [s.query for s in p.scans] == [None, None]
    assert decoded_filters(p.text) == [{"op": "textsearch", "column": "body", "query": "x"}]
    assert "b._indexall = '" in p.text and p.scans[1].keeps_indexall
    # ON of a LEFT JOIN on its own table: a filter before the join
    p = plan("SELECT a.id FROM docs a LEFT JOIN other_docs b ON a.id = b.id AND b.body TEXTSEARCH 'x'")
    assert [s.query for s in p.scans] == [None, "body:(x)"]
    # ON of a LEFT JOIN on the preserved table: stays in ON
    p = plan("SELECT a.id FROM docs a LEFT JOIN other_docs b ON a.id = b.id AND a.body TEXTSEARCH 'x'")
    assert [s.query for s in p.scans] == [None, None] and "a._indexall = '" in p.text
    # WHERE on the preserved side, and below a RIGHT JOIN
    p = plan("SELECT a.id FROM docs a LEFT JOIN other_docs b ON a.id = b.id WHERE a.body TEXTSEARCH 'x'")
    assert [s.query for s in p.scans] == ["body:(x)", None]
    p = plan("SELECT a.id FROM docs a RIGHT JOIN other_docs b ON a.id = b.id WHERE a.body TEXTSEARCH 'x'")
    assert [s.query for s in p.scans] == [None, None]
    # a search on a derived table's column: a filter over the subquery
    p = plan("SELECT t.id FROM (SELECT * FROM docs) t WHERE t.body TEXTSEARCH 'x'")
    assert p.scans[0].query is None and "t._indexall = '" in p.text


@pytest.mark.parametrize(
    "text, message",
    [
        ("SELECT id FROM docs WHERE body TEXTSEARCH 'a' OR n > 1", "only AND can join"),
        ("SELECT id FROM docs WHERE title TEXTSEARCH 'a'", "cannot use TEXTSEARCH on column 'title'"),
        ("SELECT id FROM docs WHERE body FIELDMATCH 'a'", "cannot use FIELDMATCH on column 'body'"),
        ("SELECT id FROM docs WHERE * TEXTSEARCH 'a'", "are not tokenized"),
        ("SELECT id FROM docs WHERE region TEXTSEARCH 'a'", "partition column"),
        ("SELECT id FROM docs WHERE nope TEXTSEARCH 'a'", "no such column"),
        ("SELECT body TEXTSEARCH 'a' FROM docs", "only in WHERE and JOIN ON"),
        ("SELECT id FROM mem WHERE label TEXTSEARCH 'a'", "need an indextables table"),
        (
            "SELECT a.id FROM docs a JOIN other_docs b ON a.id = b.id WHERE a.body TEXTSEARCH 'x' OR b.body TEXTSEARCH 'y'",
            "searches two tables",
        ),
    ],
)
def test_search_misuse_is_refused_naming_the_fault(text, message):
    with pytest.raises(ops.SearchOperatorError, match=message):
        plan(text)


def test_operator_queries_and_encoding():
    s = ops.AndS((ops.Op("textsearch", "body", "a OR b"), ops.NotS(ops.Op("fieldmatch", "n", "3"))))
    assert ops.to_query(s, SPECS) == "body:(a OR b) AND (* AND NOT n:(3))"
    assert ops.decode(ops.encode(s), SPECS) == ops.to_query(s, SPECS)
    assert ops.decode("body:spark", SPECS) == "body:spark"  # a query as written
    with pytest.raises(ops.SearchOperatorError, match="malformed"):
        ops.decode(ops.encode(s)[:-3], SPECS)


# ---- aggregates planned for the index -------------------------------------------------------------


def test_aggregate_plan():
    p = plan(
        "SELECT region, count(*) AS c, avg(n), max(f) FROM docs WHERE body TEXTSEARCH 'k' AND n >= 2 "
        "GROUP BY region ORDER BY c DESC, 1 LIMIT 3"
    )
    a = p.aggregate
    assert a.request.keys == ("region",)
    assert [(x.function, x.column) for x in a.request.aggs] == [("count_star", None), ("avg", "n"), ("max", "f")]
    assert a.outputs == [0, 1, 2, 3]
    assert a.order == [(1, True, False), (0, False, True)]
    assert a.limit == 3
    assert a.search == ops.Op("textsearch", "body", "k")
    assert len(a.conjuncts) == 1
    assert p.scans[0].columns == ["n", "f", "region"]


def test_aggregate_without_group_by_and_repeated_aggregates():
    a = plan("SELECT count(*), count(1), sum(n), sum(n) FROM docs").aggregate
    assert [(x.function, x.column) for x in a.request.aggs] == [("count_star", None), ("sum", "n")]
    assert a.outputs == [0, 0, 1, 1]


@pytest.mark.parametrize(
    "text",
    [
        "SELECT region, count(*) FROM docs GROUP BY region HAVING count(*) > 1",
        "SELECT DISTINCT region, count(*) FROM docs GROUP BY region",
        "SELECT sum(price) FROM docs",
        "SELECT sum(title) FROM docs",
        "SELECT count(DISTINCT n) FROM docs",
        "SELECT count(*) + 1 FROM docs",
        "SELECT n + 1, count(*) FROM docs GROUP BY n + 1",
        "SELECT count(*) FROM docs WHERE ts > '2024-01-01'",
        "SELECT count(*) FROM docs WHERE n > 1.5",
        "SELECT count(*) FROM docs WHERE title LIKE 'a_c%'",
        "SELECT count(*) FROM docs WHERE upper(title) = 'A'",
        "SELECT count(*) FROM docs d JOIN mem m ON d.id = m.id",
        "SELECT region, count(*) FROM docs GROUP BY ROLLUP(region)",
        "SELECT region, count(*) c FROM docs GROUP BY region ORDER BY max(n)",
    ],
)
def test_aggregates_left_to_spark(text):
    p = plan(text)
    assert p is not None and p.aggregate is None
    assert any(n.startswith("not answered from the index") for n in p.notes)


def test_where_conditions_converted_exactly():
    a = plan(
        "SELECT count(*) FROM docs WHERE n BETWEEN 1 AND 4 AND title IN ('a', 'b') AND f IS NOT NULL "
        "AND title LIKE 'ab%' AND NOT (n <=> 3) AND 2 < n AND title <> 'z'"
    ).aggregate
    from indextables_spark.expr import model as P

    assert P.And(P.GreaterThanOrEqual("n", 1), P.LessThanOrEqual("n", 4)) in a.conjuncts
    assert P.In("title", ("a", "b")) in a.conjuncts
    assert P.IsNotNull("f") in a.conjuncts
    assert P.StringStartsWith("title", "ab") in a.conjuncts
    assert P.Not(P.EqualNullSafe("n", 3)) in a.conjuncts
    assert P.GreaterThan("n", 2) in a.conjuncts
    assert P.Not(P.EqualTo("title", "z")) in a.conjuncts


# ---- SQL aggregates with Spark's semantics -------------------------------------------------------------


def _spark_like(rows, keys, aggs):
    """What Spark computes (pure Python): groups with NULL and NaN keys, -0.0 == 0.0."""

    def norm(v):
        if isinstance(v, float) and math.isnan(v):
            return ("nan",)
        if isinstance(v, float) and v == 0.0:
            return 0.0
        return v

    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(norm(r[k]) for k in keys), []).append(r)
    if not keys and not groups:
        groups[()] = []
    out = {}
    for g, rs in groups.items():
        vals = []
        for a in aggs:
            col = [r[a.column] for r in rs if a.column is not None and r[a.column] is not None]
            if a.function == "count_star":
                vals.append(len(rs))
            elif a.function == "count":
                vals.append(len(col))
            elif not col:
                vals.append(None)
            elif a.function == "sum":
                vals.append(sum(col))
            elif a.function == "avg":
                vals.append(sum(col) / len(col))
            elif a.function in ("min", "max"):
                nans = [v for v in col if isinstance(v, float) and math.isnan(v)]
                rest = [v for v in col if not (isinstance(v, float) and math.isnan(v))]
                if a.function == "max":
                    vals.append(math.nan if nans else max(rest))
                else:
                    vals.append(min(rest) if rest else math.nan)
        out[g] = vals
    return out


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


@pytest.mark.parametrize("seed", range(6))
def test_group_aggregate_matches_spark_semantics(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 200])
    floats = [0.0, -0.0, math.nan, 1.5, -2.25, None, 3.0]
    rows = [
        {
            "k": rng.choice(["a", "b", None]),
            "fk": rng.choice(floats),
            "i": rng.choice([None, rng.randint(-(2**40), 2**40)]),
            "x": rng.choice(floats),
            "s": rng.choice([None, "x", "y", "ä"]),
        }
        for _ in range(n)
    ]
    table = pa.table(
        {
            "k": pa.array([r["k"] for r in rows], pa.string()),
            "fk": pa.array([r["fk"] for r in rows], pa.float64()),
            "i": pa.array([r["i"] for r in rows], pa.int64()),
            "x": pa.array([r["x"] for r in rows], pa.float64()),
            "s": pa.array([r["s"] for r in rows], pa.string()),
        }
    )
    aggs = (
        ga.SqlAgg("count_star", None),
        ga.SqlAgg("count", "x", "double"),
        ga.SqlAgg("sum", "i", "long"),
        ga.SqlAgg("avg", "i", "long"),
        ga.SqlAgg("sum", "x", "double"),
        ga.SqlAgg("min", "x", "double"),
        ga.SqlAgg("max", "x", "double"),
        ga.SqlAgg("min", "s", "string"),
        ga.SqlAgg("max", "i", "long"),
    )
    for keys, key_types in [((), ()), (("k",), ("string",)), (("k", "fk"), ("string", "double"))]:
        request = ga.GroupRequest(keys, aggs, key_types)
        # partials over an arbitrary split of the rows merge to the same result
        cuts = sorted(rng.sample(range(n + 1), min(3, n + 1)))
        pieces = [table.slice(a, b - a) for a, b in zip([0] + cuts, cuts + [n])]
        merged = ga.merge([ga.partial([p], request) for p in pieces], request)
        got = {}
        for row in ga.finish(merged, request):
            key = tuple(("nan",) if isinstance(v, float) and math.isnan(v) else v for v in row[: len(keys)])
            got[key] = list(row[len(keys) :])
        want = _spark_like(rows, keys, aggs)
        assert set(got) == set(want)
        for g in want:
            assert all(_same(a, b) for a, b in zip(got[g], want[g])), (g, got[g], want[g])


def test_integer_sum_overflow_is_reported():
    t = pa.table({"i": pa.array([2**62, 2**62], pa.int64())})
    request = ga.GroupRequest((), (ga.SqlAgg("sum", "i", "long"),))
    with pytest.raises(ga.SumOverflow, match="outside the long range"):
        ga.finish(ga.merge([ga.partial([t], request)], request), request)
