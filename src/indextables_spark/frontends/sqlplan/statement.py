"""One SQL statement planned for the index (Spark-free: sqlglot's Spark dialect and a `Catalog`).

`plan(text, catalog)` returns None for a statement that reads no indextables table (it goes to
Spark as written), else a `StatementPlan`:
- every reference to one of our views, or to `indextables.`<path>``, becomes its own scan (a
  temporary view the Spark layer creates) declaring only the columns the statement uses, found by
  sqlglot's column qualification (stars expanded, subqueries and correlated references resolved);
  when the statement cannot be fully resolved, the scan keeps every column;
- each WHERE / JOIN ON conjunct made of search operators (and `_indexall = '…'`) becomes one
  `_indexall = '<encoded condition>'` filter per table (expr/operators.py), checked against the
  table's indexing now, so a misuse fails before any job;
- a `SELECT [keys,] COUNT/SUM/AVG/MIN/MAX … FROM <one table> WHERE … GROUP BY keys
  [ORDER BY outputs] [LIMIT n]` whose every part keeps Spark's semantics is also planned as an
  `AggregatePlan` (answered from the index by core/split/aggregate/group_aggregate.py).
The text given to Spark is the statement as written with only those spans replaced.
"""

from __future__ import annotations

import hashlib
import json

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from indextables_spark.expr import operators as ops
from indextables_spark.expr.sql_condition import Unplannable
from indextables_spark.frontends.sqlplan import operators as lex
from indextables_spark.frontends.sqlplan.aggregate_plan import plan_aggregate
from indextables_spark.frontends.sqlplan.columns_used import inside_search_call, is_search_call, used_columns
from indextables_spark.frontends.sqlplan.plans import (
    PATH_DATABASE,
    VIRTUAL,
    Catalog,
    Ref,
    Scan,
    Source,
    StatementPlan,
    TableInfo,
)
from indextables_spark.frontends.sqlplan.search_conditions import (
    apply_edits,
    condition_root,
    is_raw_indexall,
    search_edits,
)


def plan(text: str, catalog: Catalog, views: set[str]) -> StatementPlan | None:
    """The statement's plan (see the module doc); None when it reads no indextables table."""
    low = text.lower()
    if not (lex.mentions_operators(text) or PATH_DATABASE + "." in low or any(v in low for v in views)):
        return None
    rw = lex.rewrite(text)
    has_search = rw.operators > 0 or lex.ALL_FUNCTION in low or lex.INDEXALL in low
    try:
        parsed = [s for s in sqlglot.parse(rw.text, read="spark") if s is not None]
    except (ParseError, SqlglotError) as e:
        if rw.operators:
            raise ops.SearchOperatorError(f"cannot parse the statement with its search operators: {e}") from None
        return None
    if len(parsed) != 1:
        return None
    stmt = parsed[0]
    tokens = lex.tokenize(rw.text) or []
    refs = _references(stmt, catalog, views)
    search_calls = [n for n in stmt.find_all(exp.Anonymous) if is_search_call(n)]
    if not refs:
        if search_calls:
            raise ops.SearchOperatorError(
                "search operators (TEXTSEARCH, FIELDMATCH, indexquery, indexqueryall) need an indextables table: "
                "a view made by CREATE TEMPORARY VIEW … USING indextables, or indextables.`<path>`"
            )
        return None
    if not isinstance(stmt, exp.Query):
        if search_calls:
            raise ops.SearchOperatorError("search operators are planned in queries (SELECT …) only")
        return None
    infos = [catalog.info(r.source) for r in refs]
    used, resolved, note = used_columns(stmt, refs, infos, catalog)
    edits: list[tuple[int, int, str]] = []
    searches, per_ref_search, scan_search, filtered = (
        search_edits(stmt, refs, infos, resolved, tokens, rw.text, edits, catalog)
        if has_search
        else ([], {}, {}, set())
    )
    explicit_indexall = any(_names_indexall(c) for c in stmt.find_all(exp.Column))
    scans = []
    for k, (ref, info) in enumerate(zip(refs, infos)):
        cols = _scan_columns(used.get(k), info) if used is not None else None
        query = ops.to_query(scan_search[k], info.specs) if k in scan_search else None
        keeps = explicit_indexall or k in filtered
        # each reference its own relation: Spark runs one planned read per relation in a query
        scan = Scan(_view_name(ref.source, cols, k, query, keeps), ref.source, cols, ref.written, query, keeps)
        scans.append(scan)
        alias = "" if ref.alias else (f" AS {ref.written}" if not ref.is_path else "")
        edits.append((ref.start, ref.end + 1, f"`{scan.view}`{alias}"))
    out = StatementPlan(apply_edits(rw.text, edits), scans, searches)
    if note:
        out.notes.append(note)
    try:
        out.aggregate = plan_aggregate(stmt, refs, infos, scans, per_ref_search)
    except Unplannable as e:
        out.notes.append(f"not answered from the index: {e}")
    return out


def _references(stmt: exp.Expr, catalog: Catalog, views: set[str]) -> list[Ref]:
    ctes = {c.alias_or_name.lower() for c in stmt.find_all(exp.CTE)}
    out = []
    for t in stmt.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier) or t.args.get("catalog"):
            continue
        db = t.args.get("db")
        name = t.this.name
        if db is not None and db.name.lower() == PATH_DATABASE:
            source, is_path, first = Source(name), True, db
        elif db is None and name.lower() in views and name.lower() not in ctes:
            found = catalog.view(name)
            if found is None:
                continue
            source, is_path, first = found, False, t.this
        else:
            continue
        start, end = first.meta.get("start"), t.this.meta.get("end")
        if start is None or end is None:
            continue
        alias = t.alias or None
        out.append(Ref(t, source, name, alias, is_path, start, end))
    return out


def _names_indexall(c: exp.Column) -> bool:
    """A reference to `_indexall` the scan must keep (not one the planner turned into a query)."""
    if c.name.lower() != lex.INDEXALL or inside_search_call(c):
        return False
    if is_raw_indexall(c.parent):
        try:
            condition_root(c.parent)
            return False
        except ops.SearchOperatorError:
            return True
    return True


def _view_name(source: Source, columns: list[str] | None, ordinal: int, query: str | None, keeps: bool) -> str:
    key = json.dumps([source.path, sorted(source.options), columns, ordinal, query, keeps], sort_keys=True)
    return "__indextables_scan_" + hashlib.sha1(key.encode()).hexdigest()[:16]


def _scan_columns(used: set[str] | None, info: TableInfo) -> list[str] | None:
    if used is None:
        return None
    by_lower = {n.lower(): n for n in info.names}
    names = [by_lower[u] for u in used if u in by_lower]
    if any(n in ("_score", "_snippet") for n in names):
        return None  # the view's own score/snippet settings: read as the view does
    real = [n for n in info.names if n in names and n not in VIRTUAL]
    return real
