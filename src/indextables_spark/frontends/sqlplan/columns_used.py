"""The columns a statement uses of each indextables table it reads (sqlglot's column qualification:
stars expanded, subqueries and correlated references resolved)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from indextables_spark.expr.sql_condition import Unplannable
from indextables_spark.frontends.sqlplan import operators as lex
from indextables_spark.frontends.sqlplan.plans import Catalog, Ref, TableInfo

if TYPE_CHECKING:
    from sqlglot.optimizer.scope import Scope


def used_columns(
    stmt: exp.Expr, refs: list[Ref], infos: list[TableInfo], catalog: Catalog
) -> tuple[dict[int, set[str]] | None, dict[int, int], str | None]:
    """({ref index: lower-case column names the statement uses outside search operators} or None
    when it could not be resolved, {id of a search call's column in the ORIGINAL tree: ref index},
    a note)."""
    copy = stmt.copy()
    orig_tables = list(stmt.find_all(exp.Table))
    copy_tables = list(copy.find_all(exp.Table))
    orig_calls = [n for n in stmt.find_all(exp.Anonymous) if is_search_call(n)]
    copy_calls = [n for n in copy.find_all(exp.Anonymous) if is_search_call(n)]
    index_of = {id(r.node): k for k, r in enumerate(refs)}
    schema: dict[str, object] = {}
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
        source_of: dict[int, exp.Table] = {}
        used: dict[int, set[str]] = {}
        scope_of: dict[int, Scope] = {}
        for scope in traverse_scope(qualified):
            for col in scope.columns:
                scope_of[id(col)] = scope
                src = _source(scope, col.table)
                if not isinstance(src, exp.Table) or not src.name.startswith("__itref_"):
                    continue
                k = int(src.name.removeprefix("__itref_"))
                source_of[id(col)] = src
                if not inside_search_call(col):
                    used.setdefault(k, set()).add(col.name.lower())
        resolved: dict[int, int] = {}
        for o_call, c_call in zip(orig_calls, copy_calls):
            arg = c_call.expressions[1] if len(c_call.expressions) > 1 else None
            origin = source_of.get(id(arg))
            if origin is None and arg is not None and id(arg) in scope_of:
                origin = _origin(_source(scope_of[id(arg)], arg.table), arg.name)
            if origin is not None:
                resolved[id(o_call)] = int(origin.name.removeprefix("__itref_"))
        return {k: used.get(k, set()) for k in range(len(refs))}, resolved, None
    except (Unplannable, SqlglotError, KeyError, ValueError) as e:
        return None, {}, f"columns: every column read (the statement could not be resolved: {e})"


def _origin(source: exp.Table | Scope | None, name: str, depth: int = 0) -> exp.Table | None:
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


def _source(scope: Scope | None, table: str) -> exp.Table | Scope | None:
    while scope is not None:
        if table in scope.sources:
            return scope.sources[table]
        scope = scope.parent
    return None


def is_search_call(n: exp.Expr) -> TypeGuard[exp.Anonymous]:
    return isinstance(n, exp.Anonymous) and str(n.this).lower() in (lex.OP_FUNCTION, lex.ALL_FUNCTION)


def inside_search_call(n: exp.Expr) -> bool:
    p = n.parent
    while p is not None:
        if is_search_call(p):
            return True
        p = p.parent
    return False
