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
  `AggregatePlan` (answered from the index by core/split/group_aggregate.py).
The text given to Spark is the statement as written with only those spans replaced.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from indextables_spark.expr import model as P
from indextables_spark.expr import operators as ops
from indextables_spark.core.split.group_aggregate import GroupRequest, SqlAgg
from indextables_spark.core.split.types import ColumnSpec
from indextables_spark.frontends.sqlplan import operators as lex
from indextables_spark.expr.sql_condition import Converter, Unplannable

PATH_DATABASE = "indextables"  # `indextables.`/path``
VIRTUAL = ("_indexall", "_indexguard")


@dataclass(frozen=True)
class Source:
    """A table the statement reads: its path and the read options of the view (if any)."""

    path: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def option_dict(self) -> dict[str, str]:
        return dict(self.options)


@dataclass(frozen=True)
class TableInfo:
    names: list[str]  # columns as the scan shows them (data + partition + visible virtual ones)
    types: dict[str, str]  # Spark type names of data and partition columns
    partition_columns: list[str]
    specs: list[ColumnSpec]


class Catalog(Protocol):
    def view(self, name: str) -> Source | None: ...

    def info(self, source: Source) -> TableInfo: ...

    def other_columns(self, parts: tuple[str, ...]) -> list[str] | None: ...

    def check_query(self, source: Source, query: str) -> None: ...


@dataclass
class Scan:
    view: str  # the temporary view name the text refers to
    source: Source
    columns: list[str] | None  # None: every column
    written: str  # the reference as written (messages)
    query: str | None = None  # the search conditions that filter this table's rows (read option)
    keeps_indexall: bool = True  # the statement refers to `_indexall` (else the scan hides it from `*`)


@dataclass
class AggregatePlan:
    scan: Scan
    request: GroupRequest
    outputs: list[int]  # per output column: its index in the (keys..., aggs...) row
    search: ops.Search | None
    conjuncts: list[P.Filter]
    order: list[tuple[int, bool, bool]]  # (output index, descending, nulls first)
    limit: int | None


@dataclass
class StatementPlan:
    text: str
    scans: list[Scan]
    searches: list[str] = field(default_factory=list)  # described conditions, per table
    aggregate: AggregatePlan | None = None
    notes: list[str] = field(default_factory=list)  # why a route was not taken


@dataclass
class _Ref:
    node: exp.Table
    source: Source
    written: str
    alias: str | None
    is_path: bool
    start: int
    end: int  # inclusive

    @property
    def qualifier(self) -> str:
        """How the statement names this table's columns (`d.x`); '' for an unaliased path."""
        if self.alias:
            return self.alias
        return "" if self.is_path else self.written


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
    search_calls = [n for n in stmt.find_all(exp.Anonymous) if _is_search_call(n)]
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
    used, resolved, note = _used_columns(stmt, refs, infos, catalog)
    edits: list[tuple[int, int, str]] = []
    searches, per_ref_search, scan_search, filtered = (
        _search_edits(stmt, refs, infos, resolved, tokens, rw.text, edits, catalog)
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
    out = StatementPlan(_apply(rw.text, edits), scans, searches)
    if note:
        out.notes.append(note)
    try:
        out.aggregate = _aggregate(stmt, refs, infos, scans, per_ref_search)
    except Unplannable as e:
        out.notes.append(f"not answered from the index: {e}")
    return out


# ---- table references ------------------------------------------------------------------------


def _references(stmt: exp.Expression, catalog: Catalog, views: set[str]) -> list[_Ref]:
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
        out.append(_Ref(t, source, name, alias, is_path, start, end))
    return out


def _names_indexall(c: exp.Column) -> bool:
    """A reference to `_indexall` the scan must keep (not one the planner turned into a query)."""
    if c.name.lower() != lex.INDEXALL or _inside_search_call(c):
        return False
    if _is_raw_indexall(c.parent):
        try:
            _condition_root(c.parent)
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


# ---- columns used, per reference ---------------------------------------------------------------


def _used_columns(
    stmt: exp.Expression, refs: list[_Ref], infos: list[TableInfo], catalog: Catalog
) -> tuple[dict[int, set[str]] | None, dict[int, int], str | None]:
    """({ref index: lower-case column names the statement uses outside search operators} or None
    when it could not be resolved, {id of a search call's column in the ORIGINAL tree: ref index},
    a note)."""
    copy = stmt.copy()
    orig_tables = list(stmt.find_all(exp.Table))
    copy_tables = list(copy.find_all(exp.Table))
    orig_calls = [n for n in stmt.find_all(exp.Anonymous) if _is_search_call(n)]
    copy_calls = [n for n in copy.find_all(exp.Anonymous) if _is_search_call(n)]
    index_of = {id(r.node): k for k, r in enumerate(refs)}
    schema: dict[str, dict[str, str]] = {}
    ctes = {c.alias_or_name.lower() for c in stmt.find_all(exp.CTE)}
    other = 0
    try:
        for o, c in zip(orig_tables, copy_tables):
            k = index_of.get(id(o))
            if k is not None:
                name = f"__itref_{k}"
                schema[name] = {n: "string" for n in infos[k].names}
                _rename(c, name, refs[k].alias or (name if refs[k].is_path else refs[k].written))
                continue
            if not isinstance(c.this, exp.Identifier):
                raise Unplannable("a table function or unknown source")
            if not c.args.get("db") and c.name.lower() in ctes:
                continue
            parts = tuple(p.name for p in (c.args.get("catalog"), c.args.get("db"), c.this) if p is not None)
            cols = catalog.other_columns(parts)
            if cols is None:
                raise Unplannable(f"table {'.'.join(parts)} is unknown")
            name = f"__other_{other}"
            other += 1
            schema[name] = {n: "string" for n in cols}
            _rename(c, name, c.alias or c.name)
        qualified = qualify(
            copy,
            schema=schema,
            dialect="spark",
            validate_qualify_columns=True,
            quote_identifiers=False,
            identify=False,
        )
        source_of: dict[int, exp.Expression] = {}
        used: dict[int, set[str]] = {}
        scope_of: dict[int, Any] = {}
        for scope in traverse_scope(qualified):
            for col in scope.columns:
                scope_of[id(col)] = scope
                src = _source(scope, col.table)
                if not isinstance(src, exp.Table) or not src.name.startswith("__itref_"):
                    continue
                k = int(src.name.removeprefix("__itref_"))
                source_of[id(col)] = src
                if not _inside_search_call(col):
                    used.setdefault(k, set()).add(col.name.lower())
        resolved = {}
        for o, c in zip(orig_calls, copy_calls):
            col = c.expressions[1] if len(c.expressions) > 1 else None
            src = source_of.get(id(col))
            if src is None and col is not None and id(col) in scope_of:
                src = _origin(_source(scope_of[id(col)], col.table), col.name)
            if src is not None:
                resolved[id(o)] = int(src.name.removeprefix("__itref_"))
        return {k: used.get(k, set()) for k in range(len(refs))}, resolved, None
    except (Unplannable, SqlglotError, KeyError, ValueError) as e:
        return None, {}, f"columns: every column read (the statement could not be resolved: {e})"


def _origin(source: Any, name: str, depth: int = 0) -> exp.Table | None:
    """Our table a derived table's output column comes from (`(SELECT * FROM docs) t` → docs)."""
    if isinstance(source, exp.Table):
        return source if source.name.startswith("__itref_") else None
    if source is None or depth > 8 or not isinstance(getattr(source, "expression", None), exp.Select):
        return None
    for p in source.expression.expressions:
        if p.alias_or_name.lower() == name.lower():
            inner = p.unalias()
            if isinstance(inner, exp.Column):
                return _origin(_source(source, inner.table), inner.name, depth + 1)
    return None


def _rename(table: exp.Table, name: str, alias: str) -> None:
    table.set("this", exp.to_identifier(name))
    table.set("db", None)
    table.set("catalog", None)
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))


def _source(scope: Any, table: str) -> Any:
    while scope is not None:
        if table in scope.sources:
            return scope.sources[table]
        scope = scope.parent
    return None


def _is_search_call(n: exp.Expression) -> bool:
    return isinstance(n, exp.Anonymous) and str(n.this).lower() in (lex.OP_FUNCTION, lex.ALL_FUNCTION)


def _inside_search_call(n: exp.Expression) -> bool:
    p = n.parent
    while p is not None:
        if _is_search_call(p):
            return True
        p = p.parent
    return False


# ---- search conditions -------------------------------------------------------------------------


def _search_of_call(n: exp.Anonymous) -> tuple[ops.Op, exp.Expression | None]:
    """The operator of a search call, and its column node (None for indexqueryall)."""
    args = n.expressions
    if str(n.this).lower() == lex.ALL_FUNCTION:
        if len(args) != 1 or not (isinstance(args[0], exp.Literal) and args[0].is_string):
            raise ops.SearchOperatorError("indexqueryall takes one string literal: indexqueryall('<query>')")
        return ops.Op("indexquery", ops.ALL_FIELDS, args[0].this), None
    kind, col, q = args[0].this, args[1], args[2]
    if not isinstance(col, exp.Column):
        raise ops.SearchOperatorError(f"{kind.upper()} needs a column on its left, got {col.sql(dialect='spark')}")
    if not (isinstance(q, exp.Literal) and q.is_string):
        raise ops.SearchOperatorError(f"{kind.upper()} needs a string literal on its right")
    column = ops.ALL_FIELDS if col.name.lower() == lex.INDEXALL else col.name
    return ops.Op(kind, column, q.this), col


def _is_raw_indexall(n: exp.Expression) -> bool:
    return (
        isinstance(n, exp.EQ)
        and isinstance(n.this, exp.Column)
        and n.this.name.lower() == lex.INDEXALL
        and isinstance(n.expression, exp.Literal)
        and n.expression.is_string
    )


def conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return conjuncts(node.this)
    return [node]


def _condition_root(call: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
    """(the WHERE / JOIN ON condition holding a search call, its container)."""
    node = call
    while isinstance(node.parent, (exp.And, exp.Or, exp.Not, exp.Paren)):
        node = node.parent
    parent = node.parent
    if isinstance(parent, exp.Where) or (isinstance(parent, exp.Join) and parent.args.get("on") is node):
        return node, parent
    where = "the SELECT list" if isinstance(parent, (exp.Select, exp.Alias)) else f"a {type(parent).__name__}"
    raise ops.SearchOperatorError(
        f"search operators may appear only in WHERE and JOIN ON conditions, found one in {where}: "
        f"{call.sql(dialect='spark')}"
    )


def _to_search(node: exp.Expression, refs_of: list[int], resolve) -> ops.Search:
    if isinstance(node, exp.Paren):
        return _to_search(node.this, refs_of, resolve)
    if isinstance(node, exp.And):
        return ops.AndS((_to_search(node.left, refs_of, resolve), _to_search(node.right, refs_of, resolve)))
    if isinstance(node, exp.Or):
        return ops.OrS((_to_search(node.left, refs_of, resolve), _to_search(node.right, refs_of, resolve)))
    if isinstance(node, exp.Not):
        return ops.NotS(_to_search(node.this, refs_of, resolve))
    if _is_search_call(node):
        op, col = _search_of_call(node)
        refs_of.append(resolve(node, col))
        return op
    if _is_raw_indexall(node):
        refs_of.append(resolve(node, node.this))
        return ops.Op("indexquery", ops.ALL_FIELDS, node.expression.this)
    raise ops.SearchOperatorError(
        f"a search operator is combined with {node.sql(dialect='spark')!r} by OR/NOT: only AND can join a "
        f"search to other conditions (write the whole OR as one query, e.g. body indexquery 'a OR b')"
    )


def _search_edits(stmt, refs, infos, resolved, tokens, text, edits, catalog):
    """Replace each search conjunct by one `_indexall` filter per (condition, table)."""
    calls = [n for n in stmt.find_all(exp.Anonymous) if _is_search_call(n)]
    groups: dict[tuple[int, int], list[tuple[exp.Expression, ops.Search]]] = {}
    roots: dict[int, exp.Expression] = {}

    def resolve(node: exp.Expression, col: exp.Expression | None) -> int:
        k = resolved.get(id(node))
        if k is None and col is not None and isinstance(col, exp.Column) and col.table:
            matches = [i for i, r in enumerate(refs) if (r.alias or r.written).lower() == col.table.lower()]
            k = matches[0] if len(matches) == 1 else None
        if k is None:
            k = _only_ref_in_select(node, refs)
        if k is None:
            raise ops.SearchOperatorError(
                f"cannot tell which indextables table {node.sql(dialect='spark')} searches: qualify its column "
                f"with the table's alias (d.body TEXTSEARCH '…')"
            )
        return k

    containers: dict[int, exp.Expression] = {}
    for call in calls:
        root, container = _condition_root(call)
        roots[id(container)] = root
        containers[id(container)] = container
    for eq in [n for n in stmt.find_all(exp.EQ) if _is_raw_indexall(n)]:
        try:
            root, container = _condition_root(eq)
        except ops.SearchOperatorError:
            continue  # `_indexall = '…'` outside a condition: Spark evaluates it (always NULL)
        roots[id(container)] = root
        containers[id(container)] = container
    for cid, root in roots.items():
        for conj in conjuncts(root):
            if not any(_is_search_call(n) or _is_raw_indexall(n) for n in conj.walk()):
                continue
            refs_of: list[int] = []
            search = _to_search(conj, refs_of, resolve)
            if len(set(refs_of)) != 1:
                raise ops.SearchOperatorError(
                    f"one condition searches two tables ({conj.sql(dialect='spark')}): split it into conditions "
                    f"joined by AND, one per table"
                )
            groups.setdefault((cid, refs_of[0]), []).append((conj, search))
    described = []
    per_ref: dict[int, ops.Search] = {}  # every search condition of a table (the aggregate route)
    in_scan: dict[int, ops.Search] = {}  # the ones its scan applies (read option `query`)
    filtered: set[int] = set()  # tables keeping an `_indexall = '…'` filter
    for (cid, k), items in groups.items():
        search = items[0][1] if len(items) == 1 else ops.AndS(tuple(s for _, s in items))
        query = ops.to_query(search, infos[k].specs)  # misuse fails now, naming the column
        catalog.check_query(refs[k].source, query)  # and a query the splits cannot parse
        movable = _filters_scan(containers[cid], refs[k].node)
        q = _qualifier(items, refs[k], containers[cid])
        value = ops.encode(search).replace("\\", "\\\\").replace("'", "\\'")
        first = True
        for conj, _ in items:
            start, end = _span(conj, tokens)
            if first and not movable:
                edits.append((start, end + 1, f"{q + '.' if q else ''}_indexall = '{value}'"))
            else:
                edits.append((start, end + 1, "TRUE"))
            first = False
        if movable:
            in_scan[k] = ops.AndS((in_scan[k], search)) if k in in_scan else search
        else:
            filtered.add(k)
        described.append(f"{refs[k].written}: {ops.describe(search)}{'' if movable else ' (as a filter)'}")
        per_ref[k] = ops.AndS((per_ref[k], search)) if k in per_ref else search
    return described, per_ref, in_scan, filtered


def _qualifier(items: list, ref: _Ref, container: exp.Expression) -> str:
    """How the filter names the table: as the condition's columns do, else as the SELECT reads it."""
    for conj, _ in items:
        for n in conj.walk():
            if isinstance(n, exp.Column) and n.table:
                return n.table
    return ref.qualifier if _only_ref_in_select(container, [ref]) == 0 else ""


def _filters_scan(container: exp.Expression, table: exp.Table) -> bool:
    """Whether a condition (WHERE or JOIN ON) on `table` may filter its rows before any join: the
    table is read directly by that SELECT and no outer join makes it the NULL-supplying side (for
    ON: the join's own table, joined inner, LEFT, SEMI or ANTI). Else the condition stays a filter
    in the statement, where Spark's outer-join rules apply to it."""
    if isinstance(container, exp.Join):
        if container.this is not table:
            return False
        side, kind = (container.side or "").upper(), (container.kind or "").upper()
        return kind in ("SEMI", "ANTI") or (side in ("", "LEFT") and kind != "FULL")
    select = container.parent
    if not isinstance(select, exp.Select):
        return False
    joins = list(select.args.get("joins") or [])
    tables = _direct_tables(select)
    if not any(t is table for t in tables):
        return False
    for i, j in enumerate(joins):
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        if side == "FULL" or kind == "FULL":
            return False
        if side == "LEFT" and kind not in ("SEMI", "ANTI") and j.this is table:
            return False
        if side == "RIGHT" and any(t is table for t in tables[: i + 1]):
            return False
    return True


def _only_ref_in_select(node: exp.Expression, refs: list[_Ref]) -> int | None:
    """The one indextables table the SELECT around `node` reads directly (FROM and JOINs), if one."""
    select = node.find_ancestor(exp.Select)
    if select is None:
        return 0 if len(refs) == 1 else None
    direct = _direct_tables(select)
    found = [k for k, r in enumerate(refs) if any(r.node is t for t in direct)]
    return found[0] if len(found) == 1 else None


def _direct_tables(select: exp.Select) -> list[exp.Expression]:
    """What a SELECT reads directly: its FROM, then each JOIN's table, in order."""
    frm = select.args.get("from") or select.args.get("from_")
    return ([frm.this] if frm is not None else []) + [j.this for j in select.args.get("joins") or []]


def _span(node: exp.Expression, tokens: list[Any]) -> tuple[int, int]:
    """(first, last) character of a condition made of search calls, literals, columns, AND/OR/NOT
    and parentheses, in the text the tokens came from."""
    starts = {t.start: i for i, t in enumerate(tokens)}
    ends = {t.end: i for i, t in enumerate(tokens)}

    def rec(n: exp.Expression) -> tuple[int, int]:
        if isinstance(n, (exp.Identifier, exp.Literal)) or (isinstance(n, exp.Anonymous) and not n.expressions):
            return n.meta["start"], n.meta["end"]
        if isinstance(n, exp.Anonymous):
            s = n.meta["start"]
            i = ends[rec(n.expressions[-1])[1]] + 1
            while tokens[i].text != ")":
                i += 1
            return s, tokens[i].end
        if isinstance(n, exp.Column):
            parts = [rec(p) for p in n.parts]
            return parts[0][0], parts[-1][1]
        if isinstance(n, exp.Paren):
            s, e = rec(n.this)
            i, j = starts[s] - 1, ends[e] + 1
            return tokens[i].start, tokens[j].end
        if isinstance(n, exp.Not):
            s, e = rec(n.this)
            return tokens[starts[s] - 1].start, e
        if isinstance(n, exp.Binary):
            return rec(n.left)[0], rec(n.right)[1]
        raise KeyError(type(n).__name__)

    return rec(node)


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, repl in sorted(edits):
        if start < last:
            raise ops.SearchOperatorError("overlapping rewrites of the statement (a search inside a table name?)")
        out.append(text[last:start])
        out.append(repl)
        last = end
    out.append(text[last:])
    return "".join(out)


# ---- aggregates answered from the index -------------------------------------------------------

_AGG_TYPES = {
    "count": None,  # any type
    "sum": ("byte", "short", "integer", "long", "float", "double"),
    "avg": ("byte", "short", "integer", "long", "float", "double"),
    "min": ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date", "timestamp"),
    "max": ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date", "timestamp"),
}
_KEY_TYPES = ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date", "timestamp")
_AGG_NODES = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


def _aggregate(stmt, refs, infos, scans, per_ref_search) -> AggregatePlan | None:
    if not isinstance(stmt, exp.Select):
        raise Unplannable("not a single SELECT")
    group = stmt.args.get("group")
    has_agg = any(isinstance(n, (exp.AggFunc,)) for p in stmt.expressions for n in p.walk())
    if group is None and not has_agg:
        return None
    for key in (
        "with_",
        "with",
        "joins",
        "laterals",
        "having",
        "qualify",
        "windows",
        "distinct",
        "offset",
        "sort",
        "cluster",
        "distribute",
        "pivots",
        "into",
        "kind",
    ):
        if stmt.args.get(key):
            raise Unplannable(f"the statement has {key.rstrip('_').upper()}")
    frm = stmt.args.get("from") or stmt.args.get("from_")
    if frm is None or not isinstance(frm.this, exp.Table) or len(refs) != 1 or frm.this is not refs[0].node:
        raise Unplannable("it does not read exactly one indextables table")
    ref, info, scan = refs[0], infos[0], scans[0]
    types = info.types
    by_lower = {n.lower(): n for n in types}
    qualifiers = {(ref.alias or ref.written).lower(), ref.written.lower()}

    def column_of(c: exp.Column) -> str | None:
        if c.table and c.table.lower() not in qualifiers:
            return None
        return by_lower.get(c.name.lower())

    projections = list(stmt.expressions)
    # GROUP BY keys: columns of the table (or ordinals of column projections)
    keys: list[str] = []
    if group is not None:
        if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals", "all")):
            raise Unplannable("ROLLUP/CUBE/GROUPING SETS/GROUP BY ALL")
        for g in group.expressions:
            if isinstance(g, exp.Literal) and not g.is_string:
                i = int(g.this) - 1
                if not 0 <= i < len(projections):
                    raise Unplannable("GROUP BY ordinal out of range")
                g = projections[i].unalias()
            if not isinstance(g, exp.Column) or column_of(g) is None:
                raise Unplannable(f"GROUP BY {g.sql(dialect='spark')}")
            name = column_of(g)
            if types[name] not in _KEY_TYPES:
                raise Unplannable(f"GROUP BY a {types[name]} column")
            if name not in keys:
                keys.append(name)
    aggs: list[SqlAgg] = []
    outputs: list[int] = []
    for p in projections:
        e = p.unalias()
        if isinstance(e, exp.Column):
            name = column_of(e)
            if name is None or name not in keys:
                raise Unplannable(f"projection {e.sql(dialect='spark')} is not a GROUP BY key")
            outputs.append(keys.index(name))
            continue
        agg = _agg(e, column_of, types)
        if agg not in aggs:
            aggs.append(agg)
        outputs.append(len(keys) + aggs.index(agg))
    # WHERE: the search conditions (already planned) and filters the model takes exactly
    filters: list[P.Filter] = []
    where = stmt.args.get("where")
    if where is not None:
        conv = Converter(types, column_of)
        for conj in conjuncts(where.this):
            if any(_is_search_call(n) for n in conj.walk()) or _is_raw_indexall(conj):
                continue
            filters.append(conv.convert(conj))
    order = []
    if stmt.args.get("order") is not None:
        for o in stmt.args["order"].expressions:
            pos = _output_position(o.this, projections)
            desc = bool(o.args.get("desc"))
            nulls_first = o.args.get("nulls_first")
            order.append((pos, desc, (not desc) if nulls_first is None else bool(nulls_first)))
    limit = None
    if stmt.args.get("limit") is not None:
        lim = stmt.args["limit"].expression
        if not (isinstance(lim, exp.Literal) and not lim.is_string):
            raise Unplannable("LIMIT is not a number")
        limit = int(lim.this)
    search = per_ref_search.get(0)
    if where is not None and search is None and any(_is_raw_indexall(c) for c in conjuncts(where.this)):
        raws = [c for c in conjuncts(where.this) if _is_raw_indexall(c)]
        parts = tuple(ops.Op("indexquery", ops.ALL_FIELDS, c.expression.this) for c in raws)
        search = parts[0] if len(parts) == 1 else ops.AndS(parts)
    request = GroupRequest(tuple(keys), tuple(aggs), tuple(types[k] for k in keys))
    return AggregatePlan(scan, request, outputs, search, filters, order, limit)


def _agg(e: exp.Expression, column_of, types: dict[str, str]) -> SqlAgg:
    if isinstance(e, exp.Count):
        arg = e.this
        if isinstance(arg, exp.Star):
            return SqlAgg("count_star", None)
        if isinstance(arg, exp.Literal) and not isinstance(arg, exp.Null):
            return SqlAgg("count_star", None)
        if isinstance(arg, exp.Column) and column_of(arg) is not None:
            name = column_of(arg)
            return SqlAgg("count", name, types[name])
        raise Unplannable(f"{e.sql(dialect='spark')}")
    fn = _AGG_NODES.get(type(e))
    if fn is None or not isinstance(e.this, exp.Column) or column_of(e.this) is None:
        raise Unplannable(f"projection {e.sql(dialect='spark')}")
    name = column_of(e.this)
    allowed = _AGG_TYPES[fn]
    if allowed is not None and types[name] not in allowed:
        raise Unplannable(f"{fn.upper()} of a {types[name]} column")
    return SqlAgg(fn, name, types[name])


def _output_position(node: exp.Expression, projections: list[exp.Expression]) -> int:
    if isinstance(node, exp.Literal) and not node.is_string:
        i = int(node.this) - 1
        if 0 <= i < len(projections):
            return i
        raise Unplannable("ORDER BY ordinal out of range")
    if isinstance(node, exp.Column) and not node.table:
        names = [p.alias_or_name.lower() for p in projections]
        if names.count(node.name.lower()) == 1:
            return names.index(node.name.lower())
    for i, p in enumerate(projections):
        if p.unalias() == node:
            return i
    raise Unplannable(f"ORDER BY {node.sql(dialect='spark')} is not an output column")
