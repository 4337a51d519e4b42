"""Query text narrowing a read by a condition on a struct field (`user.name = 'x'` → a term of the
column's json field); the rows are still checked."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from indextables_spark.core.schema.types import ColumnSpec, IndexedField, SparkType
from indextables_spark.expr.model import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)
from indextables_spark.expr.text import analyzer, token_limit
from indextables_spark.expr.values import (
    struct_column,
    unquote_column,
)

_INTEGER_TYPES = ("byte", "short", "integer", "long")
_RANGE_NARROWING = re.compile(r"^[^:\s]+:[<>]")
_RANGE_OPS = {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


def struct_narrowing(
    path: Sequence[str], values: Sequence[Any], specs: Mapping[str, ColumnSpec], op: str = "="
) -> str | None:
    """A Tantivy query (text) matching a superset of the rows where the struct field at `path`
    (column, field, …) equals one of `values` (op "=") or compares with the one value (op ">",
    ">=", "<", "<=") — `user.name = 'Bob Smith'` → `user.name:"bob smith"`, `user.age > 50` →
    `user.age:>50` in the column's json field — or None.

    Equality on string, integer and boolean fields of struct columns indexed with the default
    tokenizer: a string's tokens as a phrase (every token indexed, none cut for length), an integer
    or boolean as a term of its JSON type (a negative one quoted: `-5` alone reads as a negation).
    Ranges on integer fields, when the column's json field is fast (`indexing.fastfields`: Tantivy
    searches json ranges only in fast fields). The caller still checks the filter on the rows."""
    if len(path) < 2 or not values or (op != "=" and len(values) != 1):
        return None
    spec = specs.get(path[0])
    if spec is None or spec.kind != "json" or spec.partition or not spec.indexed_fields:
        return None
    field_type = _struct_field_type(spec.spark_type, list(path[1:]))
    field = spec.indexed_fields[0]
    if field.tokenizer not in (None, "default") or field.record != "position":
        return None
    if not all(str(p).replace("_", "").isalnum() for p in path[1:]):
        return None  # a path the query syntax would need to escape
    qpath = ".".join([field.name, *path[1:]])
    if op != "=":
        v = values[0]
        if field_type not in _INTEGER_TYPES or not field.fast or not isinstance(v, int) or isinstance(v, bool):
            return None
        return f"{qpath}:{op}{v}"
    parts = []
    for v in values:
        if field_type == "string" and isinstance(v, str):
            limit = token_limit("default", field.token_limit)
            tokens = analyzer("default", field.token_limit).analyze(v)
            if not tokens or any(len(t.encode()) >= limit for t in v.split()) or len(tokens) > 16:
                return None
            parts.append(f'{qpath}:"{" ".join(tokens)}"' if len(tokens) > 1 else f"{qpath}:{tokens[0]}")
        elif field_type in _INTEGER_TYPES and isinstance(v, int) and not isinstance(v, bool):
            parts.append(f"{qpath}:{v}" if v >= 0 else f'{qpath}:"{v}"')
        elif field_type == "boolean" and isinstance(v, bool):
            parts.append(f"{qpath}:{'true' if v else 'false'}")
        else:
            return None
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def _struct_field_type(spark_type: SparkType, path: list[str]) -> str | None:
    t = spark_type
    for name in path:
        if not isinstance(t, dict) or t.get("type") != "struct":
            return None
        match = next((x for x in t.get("fields", []) if x.get("name") == name), None)
        if match is None:
            return None
        t = match.get("type")
    return t if isinstance(t, str) else None


def where_narrowing(f: Filter, specs: Mapping[str, ColumnSpec], names: Sequence[str]) -> str | None:
    """struct_narrowing of a parsed `user.name = 'x'`, `user.name IN (…)` or `user.age > 5`
    condition, or None."""
    if not isinstance(f, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):  # _RANGE_OPS
        return None
    head = struct_column(unquote_column(f.column), names)
    if head is None:
        return None
    path = [head, *unquote_column(f.column)[len(head) + 1 :].split(".")]
    if isinstance(f, In):
        return struct_narrowing(path, list(f.values), specs)
    return struct_narrowing(path, [f.value], specs, _RANGE_OPS.get(type(f), "="))


def with_narrowing(query: str | None, narrowing: Sequence[str], split_specs: Iterable[ColumnSpec]) -> str | None:
    """An unscored read's query AND the struct-field narrowing the split can search (narrowed)."""
    return narrowed(query, narrowing, [f for s in split_specs for f in s.indexed_fields])


def narrowed(query: str | None, narrowing: Sequence[str], fields: Iterable[IndexedField]) -> str | None:
    """An unscored read's query AND the struct-field narrowing splits with these indexed fields can
    search: its json field exists (a split written before the column existed has none) and, for a
    range, is fast (one written before `indexing.fastfields` named the column is not)."""
    by_name = {f.name: f for f in fields}

    def usable(q: str) -> bool:
        f = by_name.get(q.split(".", 1)[0])
        return f is not None and (f.fast or not _RANGE_NARROWING.match(q))

    parts = ([query] if query is not None else []) + [q for q in narrowing if usable(q)]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " AND ".join(f"({p})" for p in parts)
