"""`SELECT [keys,] COUNT/SUM/AVG/MIN/MAX … FROM <one table> … GROUP BY keys [ORDER BY] [LIMIT]`
(keys: columns, or the reference's bucket functions of a column, bucket_calls.py) planned as an AggregatePlan when every part keeps Spark's semantics (answered from the index by
core/split/aggregate/group_aggregate.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from sqlglot import exp

from indextables_spark.core.split.aggregate.group_aggregate import BucketKey, GroupRequest, SqlAgg
from indextables_spark.expr import model as P
from indextables_spark.expr import operators as ops
from indextables_spark.expr.sql_condition import Converter, Unplannable
from indextables_spark.frontends.sqlplan.bucket_calls import bucket_key, is_bucket_call
from indextables_spark.frontends.sqlplan.columns_used import is_search_call
from indextables_spark.frontends.sqlplan.plans import AggregatePlan, Ref, Scan, TableInfo
from indextables_spark.frontends.sqlplan.search_conditions import conjuncts, is_raw_indexall

_AGG_TYPES = {
    "count": None,  # any type
    "sum": ("byte", "short", "integer", "long", "float", "double"),
    "avg": ("byte", "short", "integer", "long", "float", "double"),
    "min": ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date", "timestamp"),
    "max": ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date", "timestamp"),
}
_KEY_TYPES = ("string", "boolean", "byte", "short", "integer", "long", "float", "double", "date", "timestamp")
_AGG_NODES: dict[type[exp.Expr], str] = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


def plan_aggregate(
    stmt: exp.Expr,
    refs: list[Ref],
    infos: list[TableInfo],
    scans: list[Scan],
    per_ref_search: dict[int, ops.Search],
) -> AggregatePlan | None:
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
    # GROUP BY keys: columns of the table, bucket calls of a column (bucket_calls.py), or
    # ordinals / aliases of projections that are one of those
    keys: list[str] = []
    key_types: list[str] = []
    buckets: list[tuple[exp.Expr, BucketKey]] = []
    if group is not None:
        if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals", "all")):
            raise Unplannable("ROLLUP/CUBE/GROUPING SETS/GROUP BY ALL")
        for g in group.expressions:
            g = _projection_of(g, projections, column_of)
            if is_bucket_call(g):
                if any(b[0] == g for b in buckets):
                    continue
                bkey, key_type = bucket_key(g, f"__bucket_{len(buckets)}", column_of, types)
                buckets.append((g, bkey))
                keys.append(bkey.name)
                key_types.append(key_type)
                continue
            if not isinstance(g, exp.Column) or column_of(g) is None:
                raise Unplannable(f"GROUP BY {g.sql(dialect='spark')}")
            name = column_of(g)
            assert name is not None
            if types[name] not in _KEY_TYPES:
                raise Unplannable(f"GROUP BY a {types[name]} column")
            if name not in keys:
                keys.append(name)
                key_types.append(types[name])
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
        if is_bucket_call(e):
            found = [b.name for call, b in buckets if call == e]
            if not found:
                raise Unplannable(f"projection {e.sql(dialect='spark')} is not a GROUP BY key")
            outputs.append(keys.index(found[0]))
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
            if any(is_search_call(n) for n in conj.walk()) or is_raw_indexall(conj):
                continue
            filters.append(conv.convert(cast(exp.Expression, conj)))  # a WHERE conjunct is an Expression
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
    if where is not None and search is None and any(is_raw_indexall(c) for c in conjuncts(where.this)):
        raws = [c for c in conjuncts(where.this) if is_raw_indexall(c)]
        parts = tuple(ops.Op("indexquery", ops.ALL_FIELDS, c.expression.this) for c in raws)
        search = parts[0] if len(parts) == 1 else ops.AndS(parts)
    request = GroupRequest(tuple(keys), tuple(aggs), tuple(key_types), tuple(b for _, b in buckets))
    return AggregatePlan(scan, request, outputs, search, filters, order, limit)


def _agg(e: exp.Expr, column_of: Callable[[exp.Column], str | None], types: dict[str, str]) -> SqlAgg:
    if isinstance(e, exp.Count):
        arg = e.this
        if isinstance(arg, exp.Star):
            return SqlAgg("count_star", None)
        if isinstance(arg, exp.Literal) and not isinstance(arg, exp.Null):
            return SqlAgg("count_star", None)
        if isinstance(arg, exp.Column) and column_of(arg) is not None:
            name = column_of(arg)
            assert name is not None
            return SqlAgg("count", name, types[name])
        raise Unplannable(f"{e.sql(dialect='spark')}")
    fn = _AGG_NODES.get(type(e))
    if fn is None or not isinstance(e.this, exp.Column) or column_of(e.this) is None:
        raise Unplannable(f"projection {e.sql(dialect='spark')}")
    name = column_of(e.this)
    assert name is not None
    allowed = _AGG_TYPES[fn]
    if allowed is not None and types[name] not in allowed:
        raise Unplannable(f"{fn.upper()} of a {types[name]} column")
    return SqlAgg(fn, name, types[name])


def _projection_of(g: exp.Expr, projections: list[exp.Expr], column_of: Callable[[exp.Column], str | None]) -> exp.Expr:
    """A GROUP BY item as Spark resolves it: an ordinal, or a name that is no column of the table
    but a projection's alias, stands for that projection."""
    if isinstance(g, exp.Literal) and not g.is_string:
        i = int(g.this) - 1
        if not 0 <= i < len(projections):
            raise Unplannable("GROUP BY ordinal out of range")
        return projections[i].unalias()
    if isinstance(g, exp.Column) and not g.table and column_of(g) is None:
        named = [p for p in projections if isinstance(p, exp.Alias) and p.alias.lower() == g.name.lower()]
        if len(named) == 1:
            return named[0].unalias()
    return g


def _output_position(node: exp.Expr, projections: list[exp.Expr]) -> int:
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
