"""Nested struct fields of a companion's source columns, named as the source names them (Delta
column mapping: each nested field's physical name, in `id` mode its field id; Iceberg: each
nested field's id), and per source file the names the file gives them where they differ
(format/nested_names.py NestedNames, recorded per file in the split, so reads, merges and the
build fetch the same values). A nested child is matched by Parquet field id in a file whose
struct carries ids, else by its physical name (Delta) or its name; one the file lacks (added
later) reads as nulls, as Spark reads it.

The build records the sources' nested fields (CONFIG_NESTED_FIELDS); a nested field renamed or
dropped since, or whose name another field took, makes the next sync index every split again
(`nesting_moved`), as a top-level rename does. A companion built before nested fields were
mapped has no such record and its splits read nested fields by name: when its source has nested
fields, the next sync indexes every split again, once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from indextables_spark.config.options import PREFIX
from indextables_spark.core.split.format.nested_names import ABSENT, NestedNames, file_field_ids, matched_name
from indextables_spark.errors import CompanionSourceError, ProtocolVersionError

# {column: its SourceNesting JSON} the splits were built with
CONFIG_NESTED_FIELDS = PREFIX + "companion.nestedFields"
_PARTS = ("element", "key", "value")


@dataclass(frozen=True)
class SourceField:
    """A nested struct field as the source names it."""

    name: str  # the table's (logical) name
    physical: str  # its name in the files (Delta column mapping), else `name`
    field_id: int | None  # Parquet field id (Iceberg, Delta mode `id`)
    nested: SourceNesting | None = None  # its own type's nested struct fields


@dataclass(frozen=True)
class SourceNesting:
    """The nested struct fields of a type: a struct's fields, a list's element, a map's key and value."""

    fields: tuple[SourceField, ...] = ()
    element: SourceNesting | None = None
    key: SourceNesting | None = None
    value: SourceNesting | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.fields:
            out["fields"] = [
                [f.name, f.physical, f.field_id, f.nested.to_json() if f.nested else None] for f in self.fields
            ]
        out.update({p: n.to_json() for p in _PARTS if (n := getattr(self, p)) is not None})
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SourceNesting:
        def node(v: Any) -> SourceNesting | None:
            return None if v is None else cls.from_json(v)

        fields = tuple(
            SourceField(str(n), str(p), None if i is None else int(i), node(sub))
            for n, p, i, sub in d.get("fields", ())
        )
        return cls(fields, node(d.get("element")), node(d.get("key")), node(d.get("value")))


def check_nesting(nesting: SourceNesting, where: str, path: str) -> None:
    """Refuse what cannot be mapped: two fields of one struct under one physical name or field id."""
    for attr in ("physical", "field_id"):
        seen: dict[Any, str] = {}
        for f in nesting.fields:
            v = getattr(f, attr)
            if v is not None and seen.setdefault(v, f.name) != f.name:
                raise ProtocolVersionError(
                    f"{where}: column {path.split('.')[0]!r}: nested fields {path}.{seen[v]} and {path}.{f.name} have "
                    f"the same {'physical name' if attr == 'physical' else 'field id'} {v!r}; they cannot be mapped"
                )
    for f in nesting.fields:
        if f.nested is not None:
            check_nesting(f.nested, where, f"{path}.{f.name}")
    for p in _PARTS:
        if (n := getattr(nesting, p)) is not None:
            check_nesting(n, where, f"{path}.{p}")


def file_nested(
    schema: pa.Schema, in_file: Mapping[str, str], nesting: Mapping[str, SourceNesting], where: str
) -> dict[str, NestedNames]:
    """{column: the file's names of its nested fields} for the columns where any differs;
    `in_file`: {column: the file's column for it} where that differs (rows.file_columns)."""
    out: dict[str, NestedNames] = {}
    for column, shape in nesting.items():
        name = in_file.get(column, column)
        if name != ABSENT and name in schema.names:
            names = _resolve(schema.field(name).type, shape, where, column)
            if names:
                out[column] = names
    return out


def _resolve(t: pa.DataType, shape: SourceNesting, where: str, path: str) -> NestedNames | None:
    if shape.fields:
        if not pa.types.is_struct(t):
            raise CompanionSourceError(
                f"{where}: {path} is a struct in the table, {t} in the file: it cannot be mapped"
            )
        children = {t.field(i).name: t.field(i) for i in range(t.num_fields)}
        by_id = file_field_ids(children.values())
        entries = []
        for f in shape.fields:
            name = matched_name(f.field_id, f.physical, by_id, children)
            inner = None
            if f.nested is not None and name != ABSENT:
                inner = _resolve(children[name].type, f.nested, where, f"{path}.{f.name}")
            if name != f.name or inner:
                entries.append((f.name, name, inner))
        return NestedNames(tuple(entries)) if entries else None
    if shape.element is not None:
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
            raise CompanionSourceError(
                f"{where}: {path} is an array in the table, {t} in the file: it cannot be mapped"
            )
        element = _resolve(t.value_type, shape.element, where, f"{path}.element")
        return NestedNames(element=element) if element else None
    if shape.key is not None or shape.value is not None:
        if not pa.types.is_map(t):
            raise CompanionSourceError(f"{where}: {path} is a map in the table, {t} in the file: it cannot be mapped")
        key = _resolve(t.key_type, shape.key, where, f"{path}.key") if shape.key else None
        value = _resolve(t.item_type, shape.value, where, f"{path}.value") if shape.value else None
        return NestedNames(key=key, value=value) if key or value else None
    return None


def nesting_config(nesting: Mapping[str, SourceNesting]) -> dict[str, str]:
    """What a build records of its source's nested fields (in the companion's configuration)."""
    body = {c: n.to_json() for c, n in sorted(nesting.items())}
    return {CONFIG_NESTED_FIELDS: json.dumps(body, separators=(",", ":"), sort_keys=True)}


def nesting_moved(stored: Mapping[str, str] | None, nesting: Mapping[str, SourceNesting], mapped_key: str) -> list[str]:
    """Nested fields the splits were built with that are renamed or dropped since, or whose name is
    another field's now (another physical name or field id). Added fields are no change (older
    files read them as nulls); columns gone at the top level are the top-level mapping's concern.
    `mapped_key`: the configuration key of the top-level mapping, which a build before nested
    fields were mapped recorded alone: every nested column of such a build counts as moved."""
    if stored and stored.get(mapped_key) and CONFIG_NESTED_FIELDS not in stored and nesting:
        return sorted(nesting)
    recorded = json.loads((stored or {}).get(CONFIG_NESTED_FIELDS) or "{}")
    moved: list[str] = []
    for column, d in sorted(recorded.items()):
        if column in nesting:
            moved += _moved(SourceNesting.from_json(d), nesting[column], column)
    return moved


def _moved(old: SourceNesting, new: SourceNesting, path: str) -> list[str]:
    now = {f.name: f for f in new.fields}
    out = []
    for f in old.fields:
        g = now.get(f.name)
        if g is None or (g.physical, g.field_id) != (f.physical, f.field_id):
            out.append(f"{path}.{f.name}")
        elif f.nested is not None and g.nested is not None:
            out += _moved(f.nested, g.nested, f"{path}.{f.name}")
    for p in _PARTS:
        a, b = getattr(old, p), getattr(new, p)
        if a is not None and b is not None:
            out += _moved(a, b, f"{path}.{p}")
    return out
