"""WHERE / JOIN ON conjuncts made of search operators (and `_indexall = '…'`) → one encoded
`_indexall` filter per table, and the edits of the statement's text that put them in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeGuard

from sqlglot import exp

from indextables_spark.expr import operators as ops
from indextables_spark.frontends.sqlplan import operators as lex
from indextables_spark.frontends.sqlplan.columns_used import is_search_call
from indextables_spark.frontends.sqlplan.plans import Catalog, Ref, TableInfo

if TYPE_CHECKING:
    from sqlglot.tokenizer_core import Token


def _search_of_call(n: exp.Anonymous) -> tuple[ops.Op, exp.Expr | None]:
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


def is_raw_indexall(n: exp.Expr | None) -> TypeGuard[exp.EQ]:
    return (
        isinstance(n, exp.EQ)
        and isinstance(n.this, exp.Column)
        and n.this.name.lower() == lex.INDEXALL
        and isinstance(n.expression, exp.Literal)
        and n.expression.is_string
    )


def conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return conjuncts(node.this)
    return [node]


def condition_root(call: exp.Expr) -> tuple[exp.Expr, exp.Expr]:
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


def _to_search(node: exp.Expr, refs_of: list[int], resolve: Callable[[exp.Expr, exp.Expr | None], int]) -> ops.Search:
    if isinstance(node, exp.Paren):
        return _to_search(node.this, refs_of, resolve)
    if isinstance(node, exp.And):
        return ops.AndS((_to_search(node.left, refs_of, resolve), _to_search(node.right, refs_of, resolve)))
    if isinstance(node, exp.Or):
        return ops.OrS((_to_search(node.left, refs_of, resolve), _to_search(node.right, refs_of, resolve)))
    if isinstance(node, exp.Not):
        return ops.NotS(_to_search(node.this, refs_of, resolve))
    if is_search_call(node):
        op, col = _search_of_call(node)
        refs_of.append(resolve(node, col))
        return op
    if is_raw_indexall(node):
        refs_of.append(resolve(node, node.this))
        return ops.Op("indexquery", ops.ALL_FIELDS, node.expression.this)
    raise ops.SearchOperatorError(
        f"a search operator is combined with {node.sql(dialect='spark')!r} by OR/NOT: only AND can join a "
        f"search to other conditions (write the whole OR as one query, e.g. body indexquery 'a OR b')"
    )


def search_edits(
    stmt: exp.Expr,
    refs: list[Ref],
    infos: list[TableInfo],
    resolved: dict[int, int],
    tokens: list[Token],
    text: str,
    edits: list[tuple[int, int, str]],
    catalog: Catalog,
) -> tuple[list[str], dict[int, ops.Search], dict[int, ops.Search], set[int]]:
    """Replace each search conjunct by one `_indexall` filter per (condition, table)."""
    calls = [n for n in stmt.find_all(exp.Anonymous) if is_search_call(n)]
    groups: dict[tuple[int, int], list[tuple[exp.Expr, ops.Search]]] = {}
    roots: dict[int, exp.Expr] = {}

    def resolve(node: exp.Expr, col: exp.Expr | None) -> int:
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

    containers: dict[int, exp.Expr] = {}
    for call in calls:
        root, container = condition_root(call)
        roots[id(container)] = root
        containers[id(container)] = container
    for eq in [n for n in stmt.find_all(exp.EQ) if is_raw_indexall(n)]:
        try:
            root, container = condition_root(eq)
        except ops.SearchOperatorError:
            continue  # `_indexall = '…'` outside a condition: Spark evaluates it (always NULL)
        roots[id(container)] = root
        containers[id(container)] = container
    for cid, root in roots.items():
        for conj in conjuncts(root):
            if not any(is_search_call(n) or is_raw_indexall(n) for n in conj.walk()):
                continue
            refs_of: list[int] = []
            search = _to_search(conj, refs_of, resolve)
            if len(set(refs_of)) != 1:
                raise ops.SearchOperatorError(
                    f"one condition searches two tables ({conj.sql(dialect='spark')}): split it into conditions "
                    f"joined by AND, one per table"
                )
            groups.setdefault((cid, refs_of[0]), []).append((conj, search))
    described: list[str] = []
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


def _qualifier(items: list[tuple[exp.Expr, ops.Search]], ref: Ref, container: exp.Expr) -> str:
    """How the filter names the table: as the condition's columns do, else as the SELECT reads it."""
    for conj, _ in items:
        for n in conj.walk():
            if isinstance(n, exp.Column) and n.table:
                return n.table
    return ref.qualifier if _only_ref_in_select(container, [ref]) == 0 else ""


def _filters_scan(container: exp.Expr, table: exp.Table) -> bool:
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


def _only_ref_in_select(node: exp.Expr, refs: list[Ref]) -> int | None:
    """The one indextables table the SELECT around `node` reads directly (FROM and JOINs), if one."""
    select = node.find_ancestor(exp.Select)
    if select is None:
        return 0 if len(refs) == 1 else None
    direct = _direct_tables(select)
    found = [k for k, r in enumerate(refs) if any(r.node is t for t in direct)]
    return found[0] if len(found) == 1 else None


def _direct_tables(select: exp.Select) -> list[exp.Expr]:
    """What a SELECT reads directly: its FROM, then each JOIN's table, in order."""
    frm = select.args.get("from") or select.args.get("from_")
    return ([frm.this] if frm is not None else []) + [j.this for j in select.args.get("joins") or []]


def _span(node: exp.Expr, tokens: list[Token]) -> tuple[int, int]:
    """(first, last) character of a condition made of search calls, literals, columns, AND/OR/NOT
    and parentheses, in the text the tokens came from."""
    starts = {t.start: i for i, t in enumerate(tokens)}
    ends = {t.end: i for i, t in enumerate(tokens)}

    def rec(n: exp.Expr) -> tuple[int, int]:
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


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, repl in sorted(edits):
        if start < last:
            raise ops.SearchOperatorError("overlapping rewrites of the statement (a search inside a table name?)")
        out.append(text[last:start])
        out.append(repl)
        last = end
    out.append(text[last:])
    return "".join(out)
