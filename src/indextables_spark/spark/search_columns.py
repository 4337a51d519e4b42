"""DataFrame forms of the search operators: `df.filter(it.textsearch("body", "spark"))`.

Each helper returns a Column — `NOT (_indexall <=> '<encoded condition>')`, a filter Spark pushes
to the reader (which decodes and type-checks it, expr/operators.py), and which does not collide
with another one on the same column (Spark folds two `_indexall = …` equalities into a
contradiction; it leaves negations alone). `_indexall` is not in a loaded DataFrame's columns;
Spark resolves it from the read below.

Combining: `&`, `|` and `~` between search columns make one condition (one index query); `&` with
any other Column is a plain AND (both pushed). `|` with a non-search Column is refused: Spark
pushes no OR, so the search would be left to Spark, which cannot run it. The Column class is
pyspark's own (classic or Connect); the returned object is an instance of a subclass made here
(pyspark's classes are not changed).
"""

from __future__ import annotations

from typing import Any

from indextables_spark.expr import operators as ops

_SUBCLASSES: dict[type, type] = {}


class _SearchOps:
    """Mixed into a subclass of the session's Column class (see `_column`)."""

    _indextables_search: ops.Search

    def __and__(self, other: Any) -> Any:
        if isinstance(other, _SearchOps):
            return _column(ops.AndS((self._indextables_search, other._indextables_search)))
        return super().__and__(other)  # type: ignore[misc]

    def __rand__(self, other: Any) -> Any:
        return super().__rand__(other)  # type: ignore[misc]

    def __or__(self, other: Any) -> Any:
        if isinstance(other, _SearchOps):
            return _column(ops.OrS((self._indextables_search, other._indextables_search)))
        raise _or_error(self)

    def __ror__(self, other: Any) -> Any:
        raise _or_error(self)

    def __invert__(self) -> Any:
        return _column(ops.NotS(self._indextables_search))


def _or_error(col: _SearchOps) -> ops.SearchOperatorError:
    return ops.SearchOperatorError(
        f"{ops.describe(col._indextables_search)} OR a condition that is not a search cannot be one index query: "
        f"Spark pushes no OR to a data source. Put both in the query (it.indexquery('body', 'a OR b')), or OR "
        f"search columns with each other"
    )


def _column(search: ops.Search) -> Any:
    from pyspark.sql import functions as sf  # lazy: pyspark is imported only when a Spark session runs this

    base: Any = ~sf.col("_indexall").eqNullSafe(ops.encode(search))  # gets a new class below
    cls = type(base)
    sub = _SUBCLASSES.get(cls)
    if sub is None:
        sub = type(f"Search{cls.__name__}", (_SearchOps, cls), {"__module__": __name__})
        _SUBCLASSES[cls] = sub
    base.__class__ = sub
    base._indextables_search = search
    return base


def _check(column: str, query: str) -> None:
    if not isinstance(column, str) or not column:
        raise ops.SearchOperatorError(f"the column must be a column name, got {column!r}")
    if not isinstance(query, str) or not query.strip():
        raise ops.SearchOperatorError(f"the query must be a non-empty string, got {query!r}")


def textsearch(column: str, query: str) -> Any:
    """`column TEXTSEARCH 'query'`: the query on a tokenized text column ("*": every text column)."""
    _check(column, query)
    return _column(ops.Op("textsearch", column, query))


def fieldmatch(column: str, query: str) -> Any:
    """`column FIELDMATCH 'query'`: the query on a column indexed whole (raw strings, numbers, dates)."""
    _check(column, query)
    return _column(ops.Op("fieldmatch", column, query))


def indexquery(column: str, query: str) -> Any:
    """`column indexquery 'query'`: the query with `column` as its default field, no type check."""
    _check(column, query)
    return _column(ops.Op("indexquery", column, query))


def indexqueryall(query: str) -> Any:
    """`indexqueryall('query')`: the query over every default field."""
    _check("*", query)
    return _column(ops.Op("indexquery", ops.ALL_FIELDS, query))
