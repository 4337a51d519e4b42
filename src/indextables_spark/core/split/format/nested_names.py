"""How a source Parquet file names a column's nested struct fields where they differ from the
table's names (Delta column mapping's nested physical names; Iceberg and Delta `id` mode nested
fields matched by Parquet field id, renamed after the file was written), and a column read from
such a file renamed to the table's names; how a field is matched in a file at any level
(`matched_name`: by Parquet field id where that level carries ids, else by physical name), for
top-level columns (ops/companion/rows.py) and nested fields (ops/companion/nested_fields.py) alike.

Arrow casts a struct to a struct by child name (a name it does not find becomes NULL), so a
file's children are renamed first — struct children at any depth, through list elements and map
keys and values — keeping every level's validity and offsets; `conform_source_column`
(format/companion.py) then casts the types. Each companion split records these per file
(CompanionFile.nested; resolved when building, ops/companion/nested_fields.py), so reads, merges
and the build fetch the same values.

In the footer (only the nodes that rename something):

```
{"fields": [["city", "col-9a1…", null], ["geo", "col-77c…", {"fields": [["lat", "", null]]}]],
 "element": {...}, "key": {...}, "value": {...}}
```

a struct's children as (table's name, file's name or "" when the file has none, their own node),
a list's element, a map's key and value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping

import pyarrow as pa

ABSENT = ""  # the file has no child for this field: read as nulls (a field added later)
PARQUET_FIELD_ID = b"PARQUET:field_id"  # a Parquet field's id, in its Arrow field's metadata


@dataclass(frozen=True)
class NestedNames:
    """The file's names of one type's nested struct fields, where any differs (at any depth)."""

    fields: tuple[tuple[str, str, NestedNames | None], ...] = ()  # struct: (table's name, file's, nested)
    element: NestedNames | None = None  # a list's element
    key: NestedNames | None = None  # a map's key
    value: NestedNames | None = None  # a map's value

    def __bool__(self) -> bool:
        return bool(self.fields) or any(n is not None for n in (self.element, self.key, self.value))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.fields:
            out["fields"] = [[t, f, n.to_json() if n is not None else None] for t, f, n in self.fields]
        for name in ("element", "key", "value"):
            node = getattr(self, name)
            if node is not None:
                out[name] = node.to_json()
        return out

    @classmethod
    def from_json(cls, d: Any) -> NestedNames:
        """Raises KeyError/TypeError/ValueError on a malformed node (the footer reader reports it)."""
        if not isinstance(d, dict):
            raise TypeError(f"nested names: expected an object, got {d!r}")

        def node(v: Any) -> NestedNames | None:
            return None if v is None else cls.from_json(v)

        fields = tuple((str(t), str(f), node(n)) for t, f, n in d.get("fields", ()))
        return cls(fields, node(d.get("element")), node(d.get("key")), node(d.get("value")))


def rename_nested(col: pa.Array, target: pa.DataType, names: NestedNames | None) -> pa.Array:
    """`col` (as read from the file) with its nested struct children named as `target` (the
    table's type) names them: each of target's struct children taken from the file's child that
    `names` gives (else the one of the same name), in target's order, a child the file lacks as
    nulls, the file's other children left out. Types are not changed (the caller casts)."""
    if not names:
        return col
    if pa.types.is_struct(col.type) and pa.types.is_struct(target):
        return _struct(col, target, names)
    if (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)) and _is_list(target):
        if names.element is None:
            return col
        offsets, values = _children(col)
        values = rename_nested(values, target.value_type, names.element)
        element = col.type.value_field.with_type(values.type)
        list_type = pa.large_list(element) if pa.types.is_large_list(col.type) else pa.list_(element)
        cls = pa.LargeListArray if pa.types.is_large_list(col.type) else pa.ListArray
        return cls.from_arrays(offsets, values, type=list_type, mask=_mask(col))
    if pa.types.is_map(col.type) and pa.types.is_map(target):
        offsets, entries = _children(col)
        keys = rename_nested(entries.field(0), target.key_type, names.key)
        items = rename_nested(entries.field(1), target.item_type, names.value)
        map_type = pa.map_(
            col.type.key_field.with_type(keys.type),
            col.type.item_field.with_type(items.type),
            keys_sorted=col.type.keys_sorted,
        )
        return pa.MapArray.from_arrays(offsets, keys, items, type=map_type, mask=_mask(col))
    return col  # another shape than the table's: left to the cast, which names the column


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def _children(col: pa.Array) -> tuple[pa.Array, pa.Array]:
    """A list's (or map's) offsets from 0 and the part of its child they index: `values` is the
    whole child of a sliced array, and Arrow builds no list of sliced offsets with a null bitmap."""
    import pyarrow.compute as pc  # lazy: only columns with renamed nested fields need it

    start, end = col.offsets[0].as_py(), col.offsets[-1].as_py()
    return pc.subtract(col.offsets, start), col.values.slice(start, end - start)


def _mask(col: pa.Array) -> pa.Array | None:
    return col.is_null() if col.null_count else None


def _struct(col: pa.StructArray, target: pa.StructType, names: NestedNames) -> pa.Array:
    in_file = {t: (f, n) for t, f, n in names.fields}
    present = {col.type.field(i).name: i for i in range(col.type.num_fields)}
    children, fields = [], []
    for i in range(target.num_fields):
        want = target.field(i)
        name, inner = in_file.get(want.name, (want.name, None))
        if name != ABSENT and name in present:
            child = rename_nested(col.field(present[name]), want.type, inner)  # field(): sliced as col
            # (the file's nullability: a required field renamed casts as it did unrenamed)
            fields.append(pa.field(want.name, child.type, nullable=col.type.field(present[name]).nullable))
        else:
            child = pa.nulls(len(col), want.type)
            fields.append(pa.field(want.name, want.type, nullable=True))
        children.append(child)
    return pa.StructArray.from_arrays(children, fields=fields, mask=_mask(col))


def file_field_ids(fields: Iterable[pa.Field]) -> dict[int, str]:
    """{field id: name} of the fields that carry a Parquet field id: a file's top-level columns
    (its schema) or one struct's children (its type)."""
    out = {}
    for f in fields:
        raw = (f.metadata or {}).get(PARQUET_FIELD_ID)
        if raw is not None:
            out[int(raw)] = f.name
    return out


def matched_name(field_id: int | None, physical: str, by_id: Mapping[int, str], present: Collection[str]) -> str:
    """The file's name for a field (a column, or a nested struct field at its level): by field id
    where that level of the file carries ids, else by its physical name; ABSENT when it has none."""
    name = by_id.get(field_id, ABSENT) if field_id is not None and by_id else physical
    return name if name in present else ABSENT
