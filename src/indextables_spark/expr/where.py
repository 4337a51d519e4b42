"""SQL-like row predicates over any column (`IndexTable.search/to_arrow(where=…)`, `delete(where=…)`).

The text uses the partition-filter grammar (expr/partition_filter.py): comparisons, IN, BETWEEN,
IS [NOT] NULL, AND/OR/NOT. Literals become values of the column types, as Spark casts them (dates
and timestamps from ISO text; timestamps without a zone are UTC); struct fields are named by
dotted paths (`user.address.city`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import replace
from typing import Any, Mapping

from indextables_spark.errors import PredicateError
from indextables_spark.expr.model import (
    And,
    Comparison,
    Filter,
    FilterRewriter,
    In,
    IsNotNull,
    IsNull,
    StringMatch,
)
from indextables_spark.expr.partition_filter import parse_predicate

INDEXALL = "_indexall"  # `_indexall = '<query>'`: a full-text condition (a top-level AND conjunct)


def column_types(schema_json: Mapping[str, Any]) -> dict[str, str]:
    """{column: Spark type name} (complex types by their kind: struct, array, map), plus the
    dotted paths of struct fields (`user.name`, `user.address.city`) that no column is named."""
    out: dict[str, str] = {}
    nested: dict[str, str] = {}

    def walk(prefix: str, t: Mapping[str, Any]) -> None:
        for f in t.get("fields", []):
            ft = f.get("type")
            path = f"{prefix}.{f['name']}"
            nested[path] = ft if isinstance(ft, str) else str(ft.get("type"))
            if isinstance(ft, dict) and ft.get("type") == "struct":
                walk(path, ft)

    for f in schema_json.get("fields", []):
        t = f.get("type")
        out[f["name"]] = t if isinstance(t, str) else str(t.get("type"))
        if isinstance(t, dict) and t.get("type") == "struct":
            walk(f["name"], t)
    return {**{k: v for k, v in nested.items() if k not in out}, **out}


_INT_TYPES = frozenset({"byte", "short", "integer", "long"})


def coerce(column: str, spark_type: str, v: Any, what: str = "where predicate") -> Any:
    """A parsed literal as the Python value of the column's type (what the filter model expects)."""
    t = spark_type.lower()
    try:
        if t in _INT_TYPES:
            if isinstance(v, bool):
                raise ValueError
            if isinstance(v, int):
                return v
            if isinstance(v, float) and v.is_integer():
                return int(v)
            if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
                return int(v)
        elif t in ("float", "double"):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            if isinstance(v, str):
                return float(v)
        elif t.startswith("decimal"):
            if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                return decimal.Decimal(str(v).strip())
        elif t == "string":
            if isinstance(v, str):
                return v
        elif t == "boolean":
            if isinstance(v, bool):
                return v
            if isinstance(v, str) and v.strip().lower() in ("true", "false"):
                return v.strip().lower() == "true"
        elif t == "date":
            if isinstance(v, str):
                return dt.date.fromisoformat(v.strip())
        elif t in ("timestamp", "timestamp_ntz"):
            if isinstance(v, str):
                ts = dt.datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
                if t == "timestamp_ntz":
                    return ts.replace(tzinfo=None)
                return ts if ts.tzinfo is not None else ts.replace(tzinfo=dt.timezone.utc)
        elif t == "binary":
            if isinstance(v, str):
                return v.encode("utf-8")
    except (ValueError, decimal.InvalidOperation):
        pass
    raise PredicateError(f"{what}: value {v!r} does not fit column {column!r} of type {spark_type}")


class _Typed(FilterRewriter):
    """A parsed predicate with its literals as values of the column types (what filters.arrow_mask expects)."""

    def __init__(self, types: Mapping[str, str], what: str):
        self.types = types
        self.what = what

    def visit_in(self, f: In) -> Filter:
        return In(f.column, tuple(coerce(f.column, self.types[f.column], v, self.what) for v in f.values))

    def visit_is_null(self, f: IsNull) -> Filter:
        return f

    def visit_is_not_null(self, f: IsNotNull) -> Filter:
        return f

    def visit_comparison(self, f: Comparison) -> Filter:
        return replace(f, value=self._value(f.column, f.value))

    def visit_string_match(self, f: StringMatch) -> Filter:
        return replace(f, value=self._value(f.column, f.value))

    def _value(self, column: str, value: Any) -> Any:
        if column == INDEXALL:
            raise PredicateError(f"{self.what}: {INDEXALL} = '<query>' must be a top-level AND condition")
        return coerce(column, self.types[column], value, self.what)


def typed(f: Filter, types: Mapping[str, str], what: str = "where predicate") -> Filter:
    """f with its literals converted to the column types (PredicateError when one does not fit)."""
    return _Typed(types, what).visit(f)


def and_parts(f: Filter) -> list[Filter]:
    """The AND-ed parts of f (f itself when it is no AND)."""
    return and_parts(f.left) + and_parts(f.right) if isinstance(f, And) else [f]


def parse_where(where: str, schema_json: Mapping[str, Any]) -> list[Filter]:
    """The AND-ed conditions of a search/read predicate over the table's columns, literals typed."""
    if not isinstance(where, str) or not where.strip():
        raise PredicateError("where: the predicate is empty")
    types = column_types(schema_json)
    expr = parse_predicate(where, types, what="where predicate")
    return [typed(c, types) for c in and_parts(expr)]
