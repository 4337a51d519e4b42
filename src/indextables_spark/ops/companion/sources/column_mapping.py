"""Delta column mapping (`delta.columnMapping.mode` `name` or `id`): the data files name columns by
their physical names (`delta.columnMapping.physicalName`), or in `id` mode are matched by Parquet
field id (`delta.columnMapping.id`); the companion's schema uses the logical names. Each companion
split records per file which Parquet column holds each logical column (CompanionFile.columns,
resolved by ops/companion/rows.py), so reads and merges fetch the right one; a rename or drop
changes the mapping and the next sync indexes the files again under the new names."""

from __future__ import annotations

import json
from typing import Any, Mapping

from indextables_spark.config.options import PREFIX
from indextables_spark.errors import ProtocolVersionError

PHYSICAL = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
# The companion table's record of the mapping its splits were built with: {logical: physical}.
CONFIG_COLUMN_MAPPING = PREFIX + "companion.columnMapping"


def delta_column_mapping(schema: Mapping[str, Any], mode: str, where: str) -> tuple[dict[str, str], dict[str, int]]:
    """({logical: physical}, {logical: field id} in `id` mode) of a Delta schema's top-level fields.
    Nested fields renamed physically are refused (their structs would not read back by name)."""
    mode = mode.strip().lower()
    if mode == "none":
        return {}, {}
    if mode not in ("name", "id"):
        raise ProtocolVersionError(f"Delta table {where}: unknown column mapping mode {mode!r}")
    names: dict[str, str] = {}
    ids: dict[str, int] = {}
    for f in schema.get("fields", []):
        meta = f.get("metadata") or {}
        names[f["name"]] = str(meta.get(PHYSICAL, f["name"]))
        if mode == "id" and FIELD_ID in meta:
            ids[f["name"]] = int(meta[FIELD_ID])
        nested = _renamed_nested(f.get("type"))
        if nested:
            raise ProtocolVersionError(
                f"Delta table {where} maps the nested field {f['name']}.{nested} to another physical name "
                "(column mapping): a companion index maps top-level columns only"
            )
    return names, ids


def _renamed_nested(t: Any) -> str | None:
    if not isinstance(t, dict):
        return None
    fields = t.get("fields") if t.get("type") == "struct" else None
    for f in fields or []:
        meta = f.get("metadata") or {}
        if meta.get(PHYSICAL, f["name"]) != f["name"]:
            return str(f["name"])
        inner = _renamed_nested(f.get("type"))
        if inner:
            return f"{f['name']}.{inner}"
    for key in ("elementType", "keyType", "valueType"):
        inner = _renamed_nested(t.get(key))
        if inner:
            return inner
    return None


def mapping_config(physical_names: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(physical_names.items())), separators=(",", ":"))


def mapping_changed(recorded: str | None, physical_names: Mapping[str, str]) -> bool:
    """A column the splits were built with is renamed or dropped since (added columns are not a
    change: older files read them as nulls, as without column mapping)."""
    old: dict[str, str] = json.loads(recorded) if recorded else {}
    return any(physical_names.get(logical) != physical for logical, physical in old.items())
