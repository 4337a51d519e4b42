"""A small Delta writer for tests: Parquet files plus a hand-written `_delta_log/` with deletion
vectors (protocol reader/writer feature `deletionVectors`: inline `i`, file-backed `u` with several
vectors per file, absolute `p`) and column mapping (`name` / `id`: physical names and Parquet field
ids). It writes the formats from the Delta protocol, independently of the decoder under test;
deltalake's `deletion_vectors()` reads its tables as a second, independent reader. Nested struct
fields (in structs, list elements, map keys and values) get physical names and ids of their own
under column mapping, as Delta gives every field of a table created with it."""

from __future__ import annotations

import json
import os
import struct
import uuid
import zlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
SPARK_TYPES: dict[pa.DataType, object] = {
    pa.int64(): "long",
    pa.int32(): "integer",
    pa.string(): "string",
    pa.float64(): "double",
    pa.float32(): "float",
}


def nested_fields(t: pa.DataType, path: tuple[str, ...]):
    """(logical path, field) of each nested struct field of a type; a list's element is the path
    segment "element", a map's key and value "key" and "value" (as Delta's nested ids name them)."""
    if pa.types.is_struct(t):
        for f in t:
            yield (*path, f.name), f
            yield from nested_fields(f.type, (*path, f.name))
    elif pa.types.is_list(t):
        yield from nested_fields(t.value_type, (*path, "element"))
    elif pa.types.is_map(t):
        yield from nested_fields(t.key_type, (*path, "key"))
        yield from nested_fields(t.item_type, (*path, "value"))


def _edited_type(t: pa.DataType, path: tuple[str, ...], edit) -> pa.DataType:
    """`t` with the struct at `path` (below t; () is t itself) replaced by `edit(that struct)`."""
    if not path:
        return edit(t)
    head, rest = path[0], path[1:]
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_edited_type(f.type, rest, edit)) if f.name == head else f for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_edited_type(t.value_type, rest, edit)))
    key, item = t.key_field, t.item_field
    if head == "key":
        key = key.with_type(_edited_type(key.type, rest, edit))
    else:
        item = item.with_type(_edited_type(item.type, rest, edit))
    return pa.map_(key, item)


def _renamed_type(t: pa.DataType, path: tuple[str, ...], new: str) -> pa.DataType:
    """`t` with the nested struct field at `path` (below t) named `new`."""
    *parent, name = path
    return _edited_type(t, tuple(parent), lambda s: pa.struct([f.with_name(new) if f.name == name else f for f in s]))


def _added_type(t: pa.DataType, path: tuple[str, ...], new: pa.Field) -> pa.DataType:
    """`t` with `new` appended to the struct at `path` (below t; () is t itself)."""
    return _edited_type(t, path, lambda s: pa.struct([*s, new]))


def _convert(v, t: pa.DataType, path: tuple[str, ...], name_of):
    """A Python value of type `t` with its struct keys renamed by `name_of(path of the field, name)`
    (None: left out), rebuilt from Python values so no Arrow cast is involved."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        out = {}
        for f in t:
            name = name_of((*path, f.name), f.name)
            if name is not None:
                out[name] = _convert(v.get(f.name), f.type, (*path, f.name), name_of)
        return out
    if pa.types.is_list(t):
        return [_convert(x, t.value_type, (*path, "element"), name_of) for x in v]
    if pa.types.is_map(t):
        return [
            (
                _convert(k, t.key_type, (*path, "key"), name_of),
                _convert(x, t.item_type, (*path, "value"), name_of),
            )
            for k, x in v
        ]
    return v


def _has_struct(t: pa.DataType) -> bool:
    return any(True for _ in nested_fields(t, ()))


def z85_encode(data: bytes) -> str:
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        v = int.from_bytes(data[i : i + 4], "big")
        chars = []
        for _ in range(5):
            v, r = divmod(v, 85)
            chars.append(Z85[r])
        out.append("".join(reversed(chars)))
    return "".join(out)


def roaring32(values: np.ndarray, runs: bool = False) -> bytes:
    """A portable 32-bit Roaring bitmap: array containers (bitmap ones past 4096 values), or with
    `runs` every container as a run container."""
    values = np.unique(values.astype(np.uint32))
    highs = np.unique(values >> 16)
    containers = [(int(h), (values[(values >> 16) == h] & 0xFFFF).astype(np.uint16)) for h in highs]
    n = len(containers)
    out = bytearray()
    if runs:
        out += struct.pack("<I", 12347 | ((n - 1) << 16))
        out += bytes([0xFF] * ((n + 7) // 8))
    else:
        out += struct.pack("<II", 12346, n)
    for h, low in containers:
        out += struct.pack("<HH", h, len(low) - 1)
    bodies = []
    for _, low in containers:
        if runs:
            starts = [int(low[0])]
            ends = []
            for a, b in zip(low[:-1], low[1:]):
                if int(b) != int(a) + 1:
                    ends.append(int(a))
                    starts.append(int(b))
            ends.append(int(low[-1]))
            bodies.append(
                struct.pack("<H", len(starts)) + b"".join(struct.pack("<HH", s, e - s) for s, e in zip(starts, ends))
            )
        elif len(low) > 4096:
            bits = np.zeros(65536, dtype=np.uint8)
            bits[low] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            bodies.append(low.astype("<u2").tobytes())
    if not runs or n >= 4:
        offset = len(out) + 4 * n
        for body in bodies:
            out += struct.pack("<I", offset)
            offset += len(body)
    return bytes(out) + b"".join(bodies)


def bitmap_array(positions, runs: bool = False) -> bytes:
    """Delta's RoaringBitmapArray of row positions."""
    pos = np.unique(np.asarray(positions, dtype=np.int64))
    keys = np.unique(pos >> 32)
    out = struct.pack("<iq", 1681511377, len(keys))
    for k in keys:
        out += struct.pack("<I", int(k)) + roaring32((pos[(pos >> 32) == k] & 0xFFFFFFFF), runs)
    return out


@dataclass
class DeltaWriter:
    root: str
    schema: pa.Schema | None = None
    partition_by: tuple[str, ...] = ()
    mapping: str = "none"  # column mapping mode
    physical: dict[str, str] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    # logical path (column, field, ...; see nested_fields) of each nested struct field -> (physical name, id)
    nested: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)
    ids_only: bool = False  # files name nested fields neither logically nor physically: only ids match (mode id)
    version: int = -1
    files: dict[str, dict] = field(default_factory=dict)  # live add actions by path
    deleted: dict[str, set[int]] = field(default_factory=dict)
    rows: dict[str, pa.Table] = field(default_factory=dict)  # logical rows of each file
    protocol: list[str] = field(default_factory=list)  # the table features

    def commit(self, actions: list[dict], operation: str = "WRITE", metrics: dict | None = None) -> int:
        self.version += 1
        os.makedirs(f"{self.root}/_delta_log", exist_ok=True)
        info = {"commitInfo": {"operation": operation, "operationMetrics": metrics or {}}}
        final = f"{self.root}/_delta_log/{self.version:020d}.json"
        temp = f"{self.root}/_delta_log/.{self.version:020d}.json.{uuid.uuid4().hex}.tmp"
        with open(temp, "w") as f:
            for a in [info, *actions]:
                f.write(json.dumps(a) + "\n")
        try:  # a reader in another process never sees a half-written commit; a taken version fails
            os.link(temp, final)
        finally:
            os.unlink(temp)
        return self.version

    def _meta(self, path: tuple[str, ...]) -> dict:
        if self.mapping == "none":
            return {}
        physical, fid = (self.physical[path[0]], self.ids[path[0]]) if len(path) == 1 else self.nested[path]
        return {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": physical}

    def _spark_type(self, t: pa.DataType, path: tuple[str, ...]):
        if pa.types.is_struct(t):
            return {
                "type": "struct",
                "fields": [
                    {
                        "name": f.name,
                        "type": self._spark_type(f.type, (*path, f.name)),
                        "nullable": True,
                        "metadata": self._meta((*path, f.name)),
                    }
                    for f in t
                ],
            }
        if pa.types.is_list(t):
            element = self._spark_type(t.value_type, (*path, "element"))
            return {"type": "array", "elementType": element, "containsNull": True}
        if pa.types.is_map(t):
            key, value = self._spark_type(t.key_type, (*path, "key")), self._spark_type(t.item_type, (*path, "value"))
            return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
        return SPARK_TYPES[t]

    def _schema_string(self) -> str:
        return json.dumps(self._spark_type(pa.struct(list(self.schema)), ()))

    def _name_in_file(self, path: tuple[str, ...], name: str) -> str:
        if self.mapping == "none":
            return name
        physical, fid = self.nested[path]
        return f"other-{fid}" if self.ids_only else physical

    def _physical_type(self, t: pa.DataType, path: tuple[str, ...]) -> pa.DataType:
        """The type as the files hold it: nested struct fields by physical name, with field ids."""

        def field_of(f: pa.Field, p: tuple[str, ...], name: str | None = None) -> pa.Field:
            meta = {b"PARQUET:field_id": str(self.nested[p][1]).encode()} if name is None and p in self.nested else None
            out = pa.field(name or self._name_in_file(p, f.name), self._physical_type(f.type, p), f.nullable)
            return out.with_metadata(meta) if meta else out

        if pa.types.is_struct(t):
            return pa.struct([field_of(f, (*path, f.name)) for f in t])
        if pa.types.is_list(t):
            return pa.list_(field_of(t.value_field, (*path, "element"), "element"))
        if pa.types.is_map(t):
            key = field_of(t.key_field, (*path, "key"), "key")
            return pa.map_(key, field_of(t.item_field, (*path, "value"), "value"))
        return t

    def _assign(self, column: str, t: pa.DataType) -> None:
        """Physical names and ids of the nested struct fields not named yet."""
        for p, _ in nested_fields(t, (column,)):
            if p not in self.nested:
                self.nested[p] = (f"col-{uuid.uuid4()}", self._max_id() + 1)

    def _max_id(self) -> int:
        return max([*self.ids.values(), *(i for _, i in self.nested.values())], default=0)

    def metadata(self) -> dict:
        config = {"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": self.mapping}
        if self.mapping != "none":
            config["delta.columnMapping.maxColumnId"] = str(self._max_id())
        return {
            "metaData": {
                "id": "test-table",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": self._schema_string(),
                "partitionColumns": list(self.partition_by),
                "configuration": config,
                "createdTime": 0,
            }
        }

    def create(self, schema: pa.Schema, partition_by=(), mapping: str = "none", v2_checkpoint: bool = False) -> int:
        self.schema, self.partition_by, self.mapping = schema, tuple(partition_by), mapping
        for i, f in enumerate(schema):
            self.physical[f.name] = f"col-{uuid.uuid4()}" if mapping != "none" else f.name
            self.ids[f.name] = i + 1
        if mapping != "none":
            for f in schema:
                self._assign(f.name, f.type)
        features = ["deletionVectors"] + (["columnMapping"] if mapping != "none" else [])
        features += ["v2Checkpoint"] if v2_checkpoint else []
        self.protocol = features
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": features,
            "writerFeatures": features,
        }
        return self.commit([{"protocol": protocol}, self.metadata()], "CREATE TABLE")

    def add_file(self, data: pa.Table, row_group_size: int | None = None) -> str:
        """One Parquet file of `data` (logical names), physical names and field ids in the file."""
        parts = {c: data.column(c)[0].as_py() for c in self.partition_by}
        body = data.drop_columns(list(self.partition_by))
        fields = [
            pa.field(
                self.physical[f.name],
                self._physical_type(f.type, (f.name,)),
                metadata={b"PARQUET:field_id": str(self.ids[f.name]).encode()},
            )
            for f in body.schema
        ]
        columns = [
            pa.array([_convert(v, f.type, (f.name,), self._name_in_file) for v in col.to_pylist()], field.type)
            if _has_struct(f.type)
            else col
            for f, field, col in zip(body.schema, fields, body.columns)
        ]
        name = f"part-{uuid.uuid4()}.parquet"
        path = "/".join([*(f"{c}={v}" for c, v in parts.items()), name])
        os.makedirs(os.path.dirname(f"{self.root}/{path}"), exist_ok=True)
        pq.write_table(
            pa.Table.from_arrays(columns, schema=pa.schema(fields)),
            f"{self.root}/{path}",
            row_group_size=row_group_size,
        )
        add = {
            "path": path,
            "partitionValues": {self.physical[c]: str(v) for c, v in parts.items()},
            "size": os.path.getsize(f"{self.root}/{path}"),
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps({"numRecords": data.num_rows}),
        }
        self.files[path] = add
        self.rows[path] = data
        self.deleted[path] = set()
        self.commit([{"add": add}], metrics={"numOutputRows": str(data.num_rows)})
        return path

    def delete(self, changes: dict[str, list[int]], storage: str = "u", runs: bool = False, prefix: str = "") -> int:
        """A DELETE commit adding `changes` ({path: positions}) to each file's vector: one remove and
        one add per file; `u` / `p` vectors of the commit share one DV file."""
        blob = bytearray(b"\x01")
        dv_name = f"deletion_vector_{uuid.uuid4()}.bin"
        actions, descriptors, newly = [], {}, 0
        for path, positions in changes.items():
            newly += len(set(positions) - self.deleted[path])
            self.deleted[path] |= set(positions)
            bitmap = bitmap_array(sorted(self.deleted[path]), runs)
            d = {"storageType": storage, "sizeInBytes": len(bitmap), "cardinality": len(self.deleted[path])}
            if storage == "i":
                d["pathOrInlineDv"] = z85_encode(bitmap)
            else:
                d["offset"] = len(blob)
                blob += struct.pack(">i", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))
                u = uuid.UUID(dv_name[len("deletion_vector_") : -4])
                d["pathOrInlineDv"] = (
                    prefix + z85_encode(u.bytes) if storage == "u" else f"file://{self.root}/{dv_name}"
                )
            descriptors[path] = d
        if storage != "i":
            os.makedirs(f"{self.root}/{prefix}", exist_ok=True)
            with open(f"{self.root}/{prefix}{'/' if prefix else ''}{dv_name}", "wb") as f:
                f.write(bytes(blob))
        for path, d in descriptors.items():
            actions.append({"remove": {**self.files[path], "deletionTimestamp": 0}})
            self.files[path] = {**self.files[path], "deletionVector": d}
            actions.append({"add": self.files[path]})
        return self.commit(actions, "DELETE", {"numDeletedRows": str(newly)})

    def restore_vector(self, path: str, descriptor: dict | None, positions: set[int]) -> int:
        """Put back an older vector of `path` (as RESTORE does): rows come back."""
        old = self.files[path]
        self.files[path] = {k: v for k, v in old.items() if k != "deletionVector"}
        if descriptor is not None:
            self.files[path]["deletionVector"] = descriptor
        self.deleted[path] = set(positions)
        return self.commit([{"remove": {**old, "deletionTimestamp": 0}}, {"add": self.files[path]}], "RESTORE")

    def rename(self, old: str, new: str) -> int:
        self.schema = pa.schema([f.with_name(new) if f.name == old else f for f in self.schema])
        self.physical[new], self.ids[new] = self.physical.pop(old), self.ids.pop(old)
        self.nested = {((new, *p[1:]) if p[0] == old else p): v for p, v in self.nested.items()}
        for p, t in self.rows.items():
            self.rows[p] = t.rename_columns([new if c == old else c for c in t.column_names])
        return self.commit([self.metadata()], "RENAME COLUMN")

    def rename_nested(self, path: tuple[str, ...], new: str) -> int:
        """RENAME COLUMN of a nested struct field (`path`: logical, as nested_fields gives it): its
        physical name and id stay."""
        column, old = path[0], path[-1]
        moved = (*path[:-1], new)
        self.nested = {(moved + p[len(path) :] if p[: len(path)] == path else p): v for p, v in self.nested.items()}
        t = _renamed_type(self.schema.field(column).type, path[1:], new)
        self._retype(column, t, lambda p, name: new if p == path and name == old else name)
        return self.commit([self.metadata()], "RENAME COLUMN")

    def add_nested(self, path: tuple[str, ...], new: pa.Field) -> int:
        """ADD COLUMNS of a nested struct field appended to the struct at `path`: older rows read it as NULL."""
        column = path[0]
        t = _added_type(self.schema.field(column).type, path[1:], new)
        if self.mapping != "none":
            self._assign(column, t)
        self._retype(column, t, lambda p, name: name)
        return self.commit([self.metadata()], "ADD COLUMNS")

    def _retype(self, column: str, t: pa.DataType, name_of) -> None:
        old = self.schema.field(column).type
        self.schema = pa.schema([f.with_type(t) if f.name == column else f for f in self.schema])
        for p, table in self.rows.items():
            values = [_convert(v, old, (column,), name_of) for v in table.column(column).to_pylist()]
            i = table.column_names.index(column)
            self.rows[p] = table.set_column(i, column, pa.array(values, t))

    def drop(self, column: str) -> int:
        self.schema = pa.schema([f for f in self.schema if f.name != column])
        for p, t in self.rows.items():
            self.rows[p] = t.drop_columns([column])
        return self.commit([self.metadata()], "DROP COLUMNS")

    def checkpoint_v2(self) -> str:
        """A V2 checkpoint of the current version (as Databricks writes with
        delta.checkpointPolicy=v2): the add actions in a Parquet sidecar under _delta_log/_sidecars/,
        and `n.checkpoint.<uuid>.json` holding checkpointMetadata, protocol, metaData and the
        sidecar action; `_last_checkpoint` points at it. Returns the checkpoint's name."""
        log = f"{self.root}/_delta_log"
        os.makedirs(f"{log}/_sidecars", exist_ok=True)
        sidecar = f"{self.version:020d}.checkpoint.0000000001.0000000001.{uuid.uuid4()}.parquet"
        dv = pa.struct(
            [
                ("storageType", pa.string()),
                ("pathOrInlineDv", pa.string()),
                ("offset", pa.int32()),
                ("sizeInBytes", pa.int32()),
                ("cardinality", pa.int64()),
            ]
        )
        add = pa.struct(
            [
                ("path", pa.string()),
                ("partitionValues", pa.map_(pa.string(), pa.string())),
                ("size", pa.int64()),
                ("modificationTime", pa.int64()),
                ("dataChange", pa.bool_()),
                ("stats", pa.string()),
                ("deletionVector", dv),
            ]
        )
        adds = [
            {**a, "partitionValues": list(a["partitionValues"].items()), "dataChange": False}
            for a in self.files.values()
        ]
        pq.write_table(pa.table({"add": pa.array(adds, add)}), f"{log}/_sidecars/{sidecar}")
        name = f"{self.version:020d}.checkpoint.{uuid.uuid4()}.json"
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": self.protocol,
            "writerFeatures": self.protocol,
        }
        actions = [
            {"checkpointMetadata": {"version": self.version}},
            {"protocol": protocol},
            self.metadata(),
            {
                "sidecar": {
                    "path": sidecar,
                    "sizeInBytes": os.path.getsize(f"{log}/_sidecars/{sidecar}"),
                    "modificationTime": 0,
                }
            },
        ]
        with open(f"{log}/{name}", "w") as f:
            f.writelines(json.dumps(a) + "\n" for a in actions)
        with open(f"{log}/_last_checkpoint", "w") as f:
            json.dump({"version": self.version, "size": len(actions) + len(adds)}, f)
        return name

    def live_rows(self) -> pa.Table:
        """The table's rows: each file's rows minus the positions its vector deletes."""
        parts = []
        for path in sorted(self.files):
            t = self.rows[path]
            keep = np.ones(t.num_rows, dtype=bool)
            keep[sorted(self.deleted[path])] = False
            parts.append(t.filter(pa.array(keep)))
        return pa.concat_tables(parts)
