"""Delta column mapping (`delta.columnMapping.mode` `name` or `id`): the data files name columns by
their physical names (`delta.columnMapping.physicalName`), or in `id` mode are matched by Parquet
field id (`delta.columnMapping.id`); the companion's schema uses the logical names. Nested struct
fields have physical names and ids of their own (every one, in a table created with column
mapping). Each companion split records per file which Parquet column holds each logical column
(CompanionFile.columns, resolved by ops/companion/rows.py) and the file's names of nested fields
(CompanionFile.nested, ops/companion/nested_fields.py), so reads and merges fetch the right ones;
a rename or drop changes the mapping and the next sync indexes the files again under the new names."""

from __future__ import annotations

import json
from typing import Any, Mapping

from indextables_spark.config.options import PREFIX
from indextables_spark.core.schema.types import SparkType
from indextables_spark.errors import ProtocolVersionError
from indextables_spark.ops.companion.nested_fields import SourceField, SourceNesting, check_nesting

PHYSICAL = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
# The companion table's record of the mapping its splits were built with: {logical: physical}.
CONFIG_COLUMN_MAPPING = PREFIX + "companion.columnMapping"


def delta_column_mapping(
    schema: Mapping[str, Any], mode: str, where: str
) -> tuple[dict[str, str], dict[str, int], dict[str, SourceNesting]]:
    """({logical: physical}, {logical: field id} in `id` mode) of a Delta schema's top-level
    fields, and {column: its nested struct fields' physical names and ids} of the columns whose
    type holds a struct (ops/companion/nested_fields.py)."""
    mode = mode.strip().lower()
    if mode == "none":
        return {}, {}, {}
    if mode not in ("name", "id"):
        raise ProtocolVersionError(f"Delta table {where}: unknown column mapping mode {mode!r}")
    names: dict[str, str] = {}
    ids: dict[str, int] = {}
    nested: dict[str, SourceNesting] = {}
    for f in schema.get("fields", []):
        meta = f.get("metadata") or {}
        names[f["name"]] = str(meta.get(PHYSICAL, f["name"]))
        if mode == "id" and FIELD_ID in meta:
            ids[f["name"]] = int(meta[FIELD_ID])
        shape = delta_nesting(f.get("type"), mode)
        if shape is not None:
            check_nesting(shape, f"Delta table {where}", f["name"])
            nested[f["name"]] = shape
    return names, ids, nested


def delta_nesting(t: SparkType | None, mode: str) -> SourceNesting | None:
    """The nested struct fields of a Delta schema type (its JSON), None when it holds no struct."""
    if not isinstance(t, dict):
        return None
    kind = t.get("type")
    if kind == "struct":
        fields = []
        for f in t.get("fields", []):
            meta = f.get("metadata") or {}
            fid = int(meta[FIELD_ID]) if mode == "id" and FIELD_ID in meta else None
            fields.append(
                SourceField(f["name"], str(meta.get(PHYSICAL, f["name"])), fid, delta_nesting(f["type"], mode))
            )
        return SourceNesting(tuple(fields))
    if kind == "array":
        element = delta_nesting(t.get("elementType"), mode)
        return SourceNesting(element=element) if element is not None else None
    if kind == "map":
        key, value = delta_nesting(t.get("keyType"), mode), delta_nesting(t.get("valueType"), mode)
        return SourceNesting(key=key, value=value) if key is not None or value is not None else None
    return None


def mapping_config(physical_names: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(physical_names.items())), separators=(",", ":"))


def mapping_changed(recorded: str | None, physical_names: Mapping[str, str]) -> bool:
    """A column the splits were built with is renamed or dropped since (added columns are not a
    change: older files read them as nulls, as without column mapping)."""
    old: dict[str, str] = json.loads(recorded) if recorded else {}
    return any(physical_names.get(logical) != physical for logical, physical in old.items())
