"""One exception class per kind of refusal, on every read route that can meet it.

The matrix: KINDS (what is refused, and the one class every route raises for it) × the routes of
ROUTE_TAKES (the Spark-free IndexTable methods, and the Spark routes: a DataFrame read, SQL
statements on a view — the scan route, the index aggregate route, DELETE —, the table functions
as literal calls (rewritten into reads) and as Python UDTFs, it.search_join, a stream
(`spark.readStream`)). A kind applies to a route when the
route takes what the kind is about (a projection, a query, snippet fields, a where predicate, ...:
ROUTE_TAKES); CELLS holds the attempts of every cell that applies, and test_matrix_is_complete
checks that there is one exactly there.

Each attempt must raise the kind's class (or one of ACCEPTED_SUBCLASSES: a route's own wording of
the same refusal), with a message naming the thing at fault, and change nothing (a refused DELETE
commits no version). Spark hands our error to the user wrapped (AnalysisException when planning,
PythonException from a worker): the class is then the one the Python traceback in its text ends
with (`indextables_spark.errors.QueryParseError: ...`), as the Spark tests elsewhere match it.
One small table, written once.
"""

from __future__ import annotations

import importlib
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import (
    IndexTablesError,
    InvalidOptionError,
    PredicateError,
    QueryParseError,
    SchemaMismatchError,
)
from indextables_spark.expr.operators import SearchOperatorError
from indextables_spark.expr.partition_filter import PartitionFilterError
from indextables_spark.expr.values import UnsupportedFilterError
from indextables_spark.ops.write.delete import DeletePredicateError

P = "spark.indextables."
VIEW = "refusals_docs"
V = [1.0, 0.0, 0.0, 0.0]  # a query vector of the table's 4 dimensions
VEC = "1,0,0,0"
AGGS = '{"n": {"value_count": {"field": "views"}}}'


def rows() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "body": ["the quick fox", "lazy dog", "fox again", "dog"],
            "tag": ["a", "b", "a", "c"],
            "views": pa.array([10, 20, 30, 40], pa.int64()),
            "secret": ["s1", "s2", "s3", "s4"],  # index-only
            "note": ["n1", "n2", "n3", "n4"],  # stored only: not in the index
            "emb": pa.array(
                [V, [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]], pa.list_(pa.float32())
            ),
            "region": ["eu", "us", "eu", "us"],  # the partition column
        }
    )


OPTIONS = {
    P + "indexing.typemap.body": "text",
    P + "indexing.indexonlyfields": "secret",
    P + "indexing.storeonly": "note",
    P + "indexing.vector.emb": "4,cosine",
}


# ---- the kinds -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    error: type[IndexTablesError]
    needs: frozenset[str]  # what a route must take for the kind to apply (any of them)


KINDS: dict[str, Kind] = {
    # a column not in the table is a schema mismatch, wherever a projection names it
    "unknown_column": Kind(SchemaMismatchError, frozenset({"columns"})),
    "unparsable_query": Kind(QueryParseError, frozenset({"query"})),
    "query_on_unknown_field": Kind(QueryParseError, frozenset({"query"})),
    "query_on_unindexed_field": Kind(QueryParseError, frozenset({"query"})),
    # a number, a partition column, a name not in the table, an index-only column
    "snippets_without_text": Kind(InvalidOptionError, frozenset({"snippets"})),
    "scored_without_query": Kind(InvalidOptionError, frozenset({"score"})),
    "index_only_filter": Kind(UnsupportedFilterError, frozenset({"where", "filter"})),
    "where_unknown_column": Kind(PartitionFilterError, frozenset({"where"})),
    "where_value_misfit": Kind(PredicateError, frozenset({"where"})),
    "vector_on_non_vector_column": Kind(InvalidOptionError, frozenset({"vector"})),
    "vector_dimensions": Kind(InvalidOptionError, frozenset({"vector"})),
    "snippets_with_vector": Kind(InvalidOptionError, frozenset({"vector_and_snippets"})),
    "limit_not_positive": Kind(InvalidOptionError, frozenset({"limit"})),
    # what has no meaning on rows that arrive without end: a ranking (a top n, `_score`, a vector
    # search) and time travel, refused naming the option (spark/read_options.py stream_read_options)
    "ranked_on_a_stream": Kind(InvalidOptionError, frozenset({"unbounded"})),
    "time_travel_on_a_stream": Kind(InvalidOptionError, frozenset({"unbounded"})),
}

# a route's own subclass of a kind's class: the same refusal, worded for it
ACCEPTED_SUBCLASSES: dict[type[IndexTablesError], tuple[type[IndexTablesError], ...]] = {
    QueryParseError: (SearchOperatorError,),
    PredicateError: (DeletePredicateError,),  # DELETE's predicates
}

# ---- the routes, and what each takes -----------------------------------------------------------------

# columns: a projection; query: a full-text query; snippets: snippet fields; score: a ranked read;
# where: a predicate in our grammar (expr/where.py, DELETE's); filter: conditions Spark hands the
# reader (a DataFrame filter, SQL WHERE: Spark's analyzer refuses an unknown column there, and casts
# values); vector: a vector search; vector_and_snippets: both in one call; limit: a number of rows;
# unbounded: rows that arrive without end (a stream takes the query, `where`, the projection and
# snippets, row by row, and refuses the rest: spark/streaming.py; Spark filters a stream's rows itself).
# SQL statements take no projection, score or limit of ours: Spark resolves their columns (an unknown
# one is its UNRESOLVED_COLUMN), a view's `_score` is NULL without a query (docs/guide/sql.md) and
# LIMIT is Spark's. search_join's text and vectors are data (refused in the task that searches them);
# a row with neither finds no rows (spark/search_join.py), so it takes no `score`.
ROUTE_TAKES: dict[str, frozenset[str]] = {
    "search": frozenset({"columns", "query", "snippets", "score", "where", "vector", "vector_and_snippets", "limit"}),
    "search_many": frozenset({"columns", "query", "where", "vector", "limit"}),
    "to_arrow": frozenset({"columns", "where"}),
    "to_batches": frozenset({"columns", "query", "where"}),
    "count": frozenset({"query"}),
    "aggregate": frozenset({"query"}),
    "explain": frozenset({"query", "where", "vector", "limit"}),
    "delete": frozenset({"query", "where"}),
    "spark_read": frozenset(
        {"columns", "query", "snippets", "score", "where", "filter", "vector", "vector_and_snippets", "limit"}
    ),
    "sql": frozenset({"query", "filter"}),
    "sql_aggregate": frozenset({"query", "filter"}),
    "sql_delete": frozenset({"query", "where"}),
    "table_function": frozenset({"columns", "query", "snippets", "score", "where", "vector", "limit"}),
    "udtf": frozenset({"columns", "query", "snippets", "score", "where", "vector", "limit"}),
    "search_join": frozenset({"query", "where", "vector", "limit"}),
    "stream": frozenset({"columns", "query", "snippets", "where", "unbounded"}),
}
# The fast tier's Spark routes: the DataFrame read (an attempt refused by load() or planning costs a
# fresh Python worker: Spark does not reuse one that raised, a second or more each), the statements the
# driver refuses before Spark runs anything, and the stream (refused by readStream.load(), or by its
# first call to the source: ~13 s for its cells on 2 loaded cores). The others (the SQL scan route and the table functions
# through the same reader, the UDTFs and search_join in Python workers, a few seconds per attempt)
# are the integration tier's (tests/tiers.py).
FAST_SPARK_ROUTES = frozenset({"spark_read", "sql_aggregate", "sql_delete", "stream"})
MORE_SPARK_ROUTES = frozenset({"sql", "table_function", "udtf", "search_join"})
SPARK_ROUTES = FAST_SPARK_ROUTES | MORE_SPARK_ROUTES


@dataclass
class Ctx:
    """What an attempt reaches the table through."""

    path: str
    table: it.IndexTable
    spark: Any = None

    def read(self, **options: Any) -> Any:
        return self.spark.read.format("indextables").options(**options).load(self.path).collect()

    def filtered(self, condition: str) -> Any:
        return self.spark.read.format("indextables").load(self.path).filter(condition).collect()

    def sql(self, statement: str) -> Any:
        return self.spark.sql(statement.replace("{path}", self.path).replace("{view}", VIEW)).collect()

    def call(self, function: str, *args: str) -> Any:
        """A table function called with literal arguments (the path first)."""
        return self.sql(f"SELECT * FROM {function}('{{path}}', {', '.join(args)})")

    def udtf(self, function: str, *args: str) -> Any:
        """The same call as its Python UDTF (a path that is no literal)."""
        return self.sql(f"SELECT * FROM {function}(concat('{{path}}', ''), {', '.join(args)})")

    def stream(self, **options: Any) -> Any:
        """A stream of the table with these options, run to its end (availableNow) into a memory sink."""
        name = f"refusals_stream_{uuid.uuid4().hex[:8]}"
        reader = self.spark.readStream.format("indextables").options(**options)
        q = reader.load(self.path).writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
        try:
            assert q.awaitTermination(300), "the streaming query did not finish in time"
            if q.exception():
                raise q.exception()
        finally:
            q.stop()
        return self.spark.table(name).collect()

    def join(self, text: str | None, vec: list[float] | None, **kwargs: Any) -> Any:
        queries = self.spark.createDataFrame([(1, text, vec)], "qid int, text string, vec array<float>")
        cols = {"text_col": "text"} if text is not None else {"vector_col": "vec"}
        return it.search_join(queries, self.path, **cols, **kwargs).collect()


Attempt = Callable[[Ctx], Any]
# (kind, route) -> [(attempt, a text the message must hold: the thing at fault)]
CELLS: dict[tuple[str, str], list[tuple[Attempt, str]]] = {
    # -- a projected column that is not in the table
    ("unknown_column", "search"): [(lambda c: c.table.search("body:fox", columns=["id", "nope"]), "'nope'")],
    ("unknown_column", "search_many"): [(lambda c: c.table.search_many(["body:fox"], columns=["nope"]), "'nope'")],
    ("unknown_column", "to_arrow"): [(lambda c: c.table.to_arrow(columns=["id", "nope"]), "'nope'")],
    ("unknown_column", "to_batches"): [(lambda c: c.table.to_batches(columns=["nope"]).read_all(), "'nope'")],
    ("unknown_column", "spark_read"): [(lambda c: c.read(columns="id,nope"), "'nope'")],
    ("unknown_column", "table_function"): [
        (lambda c: c.call("indextables_search", "'body:fox'", "3", "NULL", "'id,nope'"), "'nope'")
    ],
    ("unknown_column", "udtf"): [
        (lambda c: c.udtf("indextables_search", "'body:fox'", "3", "NULL", "'id,nope'"), "'nope'")
    ],
    ("unknown_column", "stream"): [(lambda c: c.stream(columns="id,nope"), "'nope'")],
    # -- a query Tantivy cannot parse
    **{
        ("unparsable_query", route): [(attempt, "'body:(fox AND' at position 10")]
        for route, attempt in {
            "search": lambda c: c.table.search("body:(fox AND"),
            "search_many": lambda c: c.table.search_many(["body:fox", "body:(fox AND"]),
            "to_batches": lambda c: c.table.to_batches("body:(fox AND").read_all(),
            "count": lambda c: c.table.count("body:(fox AND"),
            "aggregate": lambda c: c.table.aggregate(AGGS, query="body:(fox AND"),
            "explain": lambda c: c.table.explain("body:(fox AND"),
            "delete": lambda c: c.table.delete(query="body:(fox AND"),
            "spark_read": lambda c: c.read(query="body:(fox AND"),
            "sql": lambda c: c.sql("SELECT id FROM {view} WHERE _indexall = 'body:(fox AND'"),
            "sql_aggregate": lambda c: c.sql("SELECT count(*) FROM {view} WHERE _indexall = 'body:(fox AND'"),
            "sql_delete": lambda c: c.sql("DELETE FROM INDEXTABLES '{path}' WHERE _indexall = 'body:(fox AND'"),
            "search_join": lambda c: c.join("body:(fox AND", None),
            "stream": lambda c: c.stream(query="body:(fox AND"),
        }.items()
    },
    ("unparsable_query", "table_function"): [
        (lambda c: c.call("indextables_search", "'body:(fox AND'", "3"), "'body:(fox AND'"),
        (lambda c: c.call("indextables_count", "'body:(fox AND'"), "'body:(fox AND'"),
        (lambda c: c.call("indextables_aggregate", f"'{AGGS}'", "'body:(fox AND'"), "'body:(fox AND'"),
        (lambda c: c.call("indextables_hybrid_search", "'body:(fox AND'", "'emb'", f"'{VEC}'", "3"), "'body:(fox AND'"),
    ],
    ("unparsable_query", "udtf"): [
        (lambda c: c.udtf("indextables_search", "'body:(fox AND'", "3"), "'body:(fox AND'"),
        (lambda c: c.udtf("indextables_count", "'body:(fox AND'"), "'body:(fox AND'"),
    ],
    # -- a query on a field the table does not have / does not index (stored only)
    **{
        (kind, route): [(lambda c, q=q, attempt=attempt: attempt(c, q), f"'{q.split(':')[0]}'")]
        for kind, q in (("query_on_unknown_field", "nosuch:x"), ("query_on_unindexed_field", "note:n1"))
        for route, attempt in {
            "search": lambda c, q: c.table.search(q),
            "search_many": lambda c, q: c.table.search_many([q]),
            "to_batches": lambda c, q: c.table.to_batches(q).read_all(),
            "count": lambda c, q: c.table.count(q),
            "aggregate": lambda c, q: c.table.aggregate(AGGS, query=q),
            "explain": lambda c, q: c.table.explain(q),
            "delete": lambda c, q: c.table.delete(query=q),
            "spark_read": lambda c, q: c.read(query=q),
            "sql": lambda c, q: c.sql(f"SELECT id FROM {{view}} WHERE _indexall = '{q}'"),
            "sql_aggregate": lambda c, q: c.sql(f"SELECT count(*) FROM {{view}} WHERE _indexall = '{q}'"),
            "sql_delete": lambda c, q: c.sql(f"DELETE FROM INDEXTABLES '{{path}}' WHERE _indexall = '{q}'"),
            "table_function": lambda c, q: c.call("indextables_search", f"'{q}'"),
            "udtf": lambda c, q: c.udtf("indextables_count", f"'{q}'"),
            "search_join": lambda c, q: c.join(q, None),
            "stream": lambda c, q: c.stream(query=q),
        }.items()
    },
    # -- snippets of a column without text: a number, a partition column, no column, an index-only one
    ("snippets_without_text", "search"): [
        (lambda c, f=f: c.table.search("body:fox", snippets=[f]), f"['{f}']")
        for f in ("views", "region", "nope", "secret")
    ],
    ("snippets_without_text", "spark_read"): [(lambda c: c.read(query="body:fox", snippetFields="views"), "['views']")],
    ("snippets_without_text", "table_function"): [
        (lambda c: c.call("indextables_search", "'body:fox'", "3", "'views'"), "['views']")
    ],
    ("snippets_without_text", "udtf"): [
        (lambda c: c.udtf("indextables_search", "'body:fox'", "3", "'nope'"), "['nope']")
    ],
    ("snippets_without_text", "stream"): [(lambda c: c.stream(query="body:fox", snippetFields="views"), "['views']")],
    # -- a ranked read without a query
    ("scored_without_query", "search"): [(lambda c: c.table.search(None, limit=3), "query")],
    ("scored_without_query", "spark_read"): [(lambda c: c.read(orderBy="_score"), "option 'query'")],
    ("scored_without_query", "table_function"): [(lambda c: c.call("indextables_search", "NULL", "3"), "'query'")],
    ("scored_without_query", "udtf"): [(lambda c: c.udtf("indextables_search", "NULL", "3"), "'query'")],
    # -- a filter on an index-only column that the index answers only approximately
    **{
        ("index_only_filter", route): [(attempt, "index-only column 'secret'")]
        for route, attempt in {
            "search": lambda c: c.table.search("body:fox", where="secret > 's'"),
            "search_many": lambda c: c.table.search_many(vectors=[V], where="secret > 's'"),
            "to_arrow": lambda c: c.table.to_arrow(where="secret > 's'"),
            "to_batches": lambda c: c.table.to_batches(where="secret > 's'").read_all(),
            "explain": lambda c: c.table.explain(where="secret > 's'"),
            "delete": lambda c: c.table.delete("secret > 's'"),
            "sql": lambda c: c.sql("SELECT id FROM {view} WHERE secret > 's'"),
            "sql_aggregate": lambda c: c.sql("SELECT count(*) FROM {view} WHERE secret > 's'"),
            "sql_delete": lambda c: c.sql("DELETE FROM INDEXTABLES '{path}' WHERE secret > 's'"),
            "table_function": lambda c: c.call(
                "indextables_vector_search", "'emb'", f"'{VEC}'", "3", "\"secret > 's'\""
            ),
            "udtf": lambda c: c.udtf("indextables_vector_search", "'emb'", f"'{VEC}'", "3", "\"secret > 's'\""),
            "search_join": lambda c: c.join(None, V, where="secret > 's'"),
            "stream": lambda c: c.stream(where="secret > 's'"),
        }.items()
    },
    ("index_only_filter", "spark_read"): [
        (lambda c: c.filtered("secret > 's'"), "index-only column 'secret'"),
        (lambda c: c.read(where="secret > 's'"), "index-only column 'secret'"),
    ],
    # -- a where predicate naming a column the table does not have / a value that does not fit its column
    **{
        (kind, route): [(lambda c, w=w, attempt=attempt: attempt(c, w), fault)]
        for kind, w, fault in (
            ("where_unknown_column", "nope = 1", "'nope'"),
            ("where_value_misfit", "views = 'abc'", "'abc' does not fit column 'views'"),
        )
        for route, attempt in {
            "search": lambda c, w: c.table.search("body:fox", where=w),
            "search_many": lambda c, w: c.table.search_many(["body:fox"], where=w),
            "to_arrow": lambda c, w: c.table.to_arrow(where=w),
            "to_batches": lambda c, w: c.table.to_batches(where=w).read_all(),
            "explain": lambda c, w: c.table.explain(where=w),
            "delete": lambda c, w: c.table.delete(w),
            "spark_read": lambda c, w: c.read(where=w),
            "sql_delete": lambda c, w: c.sql(f"DELETE FROM INDEXTABLES '{{path}}' WHERE {w}"),
            "table_function": lambda c, w: c.call("indextables_vector_search", "'emb'", f"'{VEC}'", "3", f'"{w}"'),
            "udtf": lambda c, w: c.udtf("indextables_vector_search", "'emb'", f"'{VEC}'", "3", f'"{w}"'),
            "search_join": lambda c, w: c.join(None, V, where=w),
            "stream": lambda c, w: c.stream(where=w),
        }.items()
    },
    # -- a vector search of a column that is not a vector column / with a vector of other dimensions
    **{
        ("vector_on_non_vector_column", route): [(attempt, "'body' is not a vector column")]
        for route, attempt in {
            "search": lambda c: c.table.search(vector=V, vector_column="body"),
            "search_many": lambda c: c.table.search_many(vectors=[V], vector_column="body"),
            "explain": lambda c: c.table.explain(vector=V, vector_column="body"),
            "spark_read": lambda c: c.read(vector=VEC, vectorColumn="body"),
            "table_function": lambda c: c.call("indextables_vector_search", "'body'", f"'{VEC}'", "3"),
            "udtf": lambda c: c.udtf("indextables_vector_search", "'body'", f"'{VEC}'", "3"),
            "search_join": lambda c: c.join(None, V, vector_column="body"),
        }.items()
    },
    **{
        ("vector_dimensions", route): [(attempt, "2 dimensions, column 'emb' 4")]
        for route, attempt in {
            "search": lambda c: c.table.search(vector=[1.0, 2.0]),
            "search_many": lambda c: c.table.search_many(vectors=[[1.0, 2.0]]),
            "explain": lambda c: c.table.explain(vector=[1.0, 2.0]),
            "spark_read": lambda c: c.read(vector="1,2"),
            "table_function": lambda c: c.call("indextables_vector_search", "'emb'", "'1,2'", "3"),
            "udtf": lambda c: c.udtf("indextables_vector_search", "'emb'", "'1,2'", "3"),
            "search_join": lambda c: c.join(None, [1.0, 2.0]),
        }.items()
    },
    # -- snippets asked of a vector search (plain or hybrid)
    ("snippets_with_vector", "search"): [
        (lambda c: c.table.search(vector=V, snippets=["body"]), "no snippets"),
        (lambda c: c.table.search("body:fox", vector=V, fusion="rrf", snippets=["body"]), "no snippets"),
    ],
    ("snippets_with_vector", "spark_read"): [  # (hybrid: the plain vector search is the same check)
        (
            lambda c: c.read(vector=VEC, query="body:fox", fusion="rrf", snippetFields="body"),
            "snippetFields='body': a vector search returns no snippets",
        )
    ],
    # -- a limit that is not a positive number of rows
    **{
        ("limit_not_positive", route): [(attempt, "-1")]
        for route, attempt in {
            "search_many": lambda c: c.table.search_many(["body:fox"], limit=-1),
            "explain": lambda c: c.table.explain("body:fox", limit=-1),
            "spark_read": lambda c: c.read(query="body:fox", limit=-1),
            "table_function": lambda c: c.call("indextables_search", "'body:fox'", "-1"),
            "udtf": lambda c: c.udtf("indextables_search", "'body:fox'", "-1"),
            "search_join": lambda c: c.join("body:fox", None, k=-1),
        }.items()
    },
    ("limit_not_positive", "search"): [
        (lambda c, n=n: c.table.search("body:fox", limit=n), f"got {n!r}") for n in (-1, 0, 2.5)
    ]
    + [(lambda c: c.table.search(vector=V, limit=0), "got 0")],
    # -- what a stream cannot answer
    ("ranked_on_a_stream", "stream"): [
        (lambda c: c.stream(query="body:fox", limit=3), "option limit='3'"),
        (lambda c: c.stream(query="body:fox", orderBy="_score"), "option orderBy='_score'"),
        (lambda c: c.stream(query="body:fox", withScore=True), "option withScore"),
        (lambda c: c.stream(query="body:fox", columns="id,_score"), "option columns='id,_score'"),
        (lambda c: c.stream(vector=VEC), "option vector"),
        (lambda c: c.stream(vector=VEC, query="body:fox", fusion="rrf"), "options vector, fusion"),
    ],
    ("time_travel_on_a_stream", "stream"): [
        (lambda c: c.stream(versionAsOf=0), "option versionAsOf"),
        (lambda c: c.stream(timestampAsOf="2020-01-01T00:00:00Z"), "option timestampAsOf"),
    ],
}


# ---- the table and the checks --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("refusals") / "t")
    it.write_table(path, rows(), partition_by=["region"], options=OPTIONS)
    return path


@pytest.fixture(scope="module")
def spark_view(spark: Any, table_path: str) -> str:
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {VIEW} USING indextables OPTIONS (path '{table_path}')")
    return VIEW


_OUR_ERROR = re.compile(r"\b(indextables_spark(?:\.\w+)+)\.(\w+): ")


def refused_class(e: BaseException) -> type[BaseException]:
    """The class of our error behind `e`: its own, or, when Spark wrapped it, the last of our classes
    its text names (a Python traceback ends with `module.Class: message`)."""
    if isinstance(e, IndexTablesError):
        return type(e)
    named = _OUR_ERROR.findall(str(e))
    assert named, f"no indextables_spark error behind {type(e).__name__}: {str(e)[:600]}"
    module, name = named[-1]
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, BaseException)
    return cls


def check_cell(kind: str, route: str, ctx: Ctx) -> None:
    want = KINDS[kind].error
    accepted = (want, *ACCEPTED_SUBCLASSES.get(want, ()))
    version = ctx.table.version()
    for attempt, fault in CELLS[(kind, route)]:
        with pytest.raises(Exception) as caught:
            attempt(ctx)
        got = refused_class(caught.value)
        assert got in accepted, f"{kind} on {route}: {got.__name__}, not {want.__name__}: {caught.value}"
        assert fault in str(caught.value), f"{kind} on {route}: the message does not name {fault!r}: {caught.value}"
    assert ctx.table.version() == version  # a refusal commits nothing


def _cells(routes: frozenset[str], marks: list[Any]) -> list[Any]:
    return [pytest.param(kind, route, marks=marks, id=f"{kind}-{route}") for kind, route in CELLS if route in routes]


@pytest.mark.parametrize("kind,route", _cells(frozenset(ROUTE_TAKES) - SPARK_ROUTES, []))
def test_spark_free_refusals(kind: str, route: str, table_path: str) -> None:
    check_cell(kind, route, Ctx(table_path, it.IndexTable(table_path)))


@pytest.mark.parametrize("kind,route", _cells(FAST_SPARK_ROUTES, [pytest.mark.spark]))
def test_spark_refusals(kind: str, route: str, table_path: str, spark: Any, spark_view: str) -> None:
    check_cell(kind, route, Ctx(table_path, it.IndexTable(table_path), spark))


@pytest.mark.parametrize("kind,route", _cells(MORE_SPARK_ROUTES, [pytest.mark.spark]))
def test_spark_refusals_more_routes(kind: str, route: str, table_path: str, spark: Any, spark_view: str) -> None:
    check_cell(kind, route, Ctx(table_path, it.IndexTable(table_path), spark))


def test_matrix_is_complete() -> None:
    """A cell wherever the route takes what the kind is about, and nowhere else."""
    for kind, k in KINDS.items():
        for route, takes in ROUTE_TAKES.items():
            applies = bool(k.needs & takes)
            assert ((kind, route) in CELLS) == applies, f"{kind} on {route}: applies={applies}"
    assert {r for _, r in CELLS} <= set(ROUTE_TAKES) and SPARK_ROUTES <= set(ROUTE_TAKES)
    assert all(CELLS.values())
