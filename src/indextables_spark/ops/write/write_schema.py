"""The schema rules of a write: an append must bring exactly the table's columns and types;
mergeSchema adds new columns; every column a table records is nullable (ops/write/write.py plans with
these)."""

from __future__ import annotations

import logging
from typing import Any

from indextables_spark.core.schema.types import spark_type_text
from indextables_spark.errors import SchemaMismatchError

log = logging.getLogger(__name__)


def _field_types(schema_json: dict[str, Any]) -> dict[str, Any]:
    return {f["name"]: f["type"] for f in schema_json["fields"]}


def nullable_json(t: Any) -> Any:
    """A schema JSON type with every nested field, element and value nullable."""
    if isinstance(t, dict):
        out = dict(t)
        if out.get("type") == "struct":
            out["fields"] = [{**nullable_json(f), "nullable": True} for f in out["fields"]]
        elif out.get("type") == "array":
            out["elementType"] = nullable_json(out["elementType"])
            out["containsNull"] = True
        elif out.get("type") == "map":
            out["keyType"] = nullable_json(out["keyType"])
            out["valueType"] = nullable_json(out["valueType"])
            out["valueContainsNull"] = True
        elif "type" in out and isinstance(out["type"], dict):
            out["type"] = nullable_json(out["type"])
        return out
    return t


def check_append_schema(path: str, table_schema: dict[str, Any], incoming: dict[str, Any]) -> None:
    """The data must have exactly the table's columns with the same types (any order)."""
    tbl = _field_types(table_schema)
    inc = _field_types(incoming)
    missing = [c for c in tbl if c not in inc]
    extra = [c for c in inc if c not in tbl]
    if missing or extra:
        parts: list[str] = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"columns not in the table {extra}")
        raise SchemaMismatchError(f"cannot write to table {path}: the data has {', '.join(parts)}")
    for name, t in tbl.items():
        if nullable_json(t) != nullable_json(inc[name]):
            raise SchemaMismatchError(
                f"cannot write to table {path}: column {name!r} has type {spark_type_text(inc[name])} in the data "
                f"but {spark_type_text(t)} in the table"
            )


def merge_append_schema(path: str, table_schema: dict[str, Any], incoming: dict[str, Any]) -> dict[str, Any]:
    """Schema evolution for an append with mergeSchema=true: columns of the data that the table
    lacks are added at the end, nullable (splits written before read them as NULL). Every table
    column must still be in the data with its type; any other change is refused."""
    tbl = _field_types(table_schema)
    inc = _field_types(incoming)
    lower = {c.lower(): c for c in tbl}
    missing = [c for c in tbl if c not in inc]
    if missing:
        raise SchemaMismatchError(
            f"cannot write to table {path} with mergeSchema: the data has no columns {missing} (schema evolution "
            f"only adds columns; to drop or redefine columns use mode('overwrite') with overwriteSchema=true)"
        )
    for name, t in tbl.items():
        if nullable_json(t) != nullable_json(inc[name]):
            raise SchemaMismatchError(
                f"cannot write to table {path} with mergeSchema: column {name!r} has type {spark_type_text(inc[name])} in "
                f"the data but {spark_type_text(t)} in the table (incompatible change: types are never changed by "
                f"schema evolution)"
            )
    clash = [c for c in inc if c not in tbl and c.lower() in lower]
    if clash:
        raise SchemaMismatchError(
            f"cannot write to table {path} with mergeSchema: columns {clash} differ from table columns "
            f"{[lower[c.lower()] for c in clash]} only in case"
        )
    added = [f for f in incoming["fields"] if f["name"] not in tbl]
    if not added:
        return table_schema
    log.info("indextables: mergeSchema adds columns %s to %s", [f["name"] for f in added], path)
    return {
        **table_schema,
        "fields": list(table_schema["fields"]) + [{**nullable_json(f), "nullable": True} for f in added],
    }
