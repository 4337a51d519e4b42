"""Avro object container files, the part a state read needs (pure Python: no numpy, no pyarrow):
the state's schemas, codec names, block (de)compression, header parsing and block framing.

The column-wise encoder that writes FileEntry manifests from Arrow tables is in avro_codec.py
(numpy/pyarrow), which re-exports these names. Keeping this module free of numpy and pyarrow lets
`import indextables_spark.api.table` and the first steps of a snapshot (state manifest, manifest
framing) run before pyarrow is imported (see avro_state.read_state_files).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Iterator

from indextables_spark.errors import CorruptStateError, InvalidOptionError

MAGIC = b"Obj\x01"
NAMESPACE = "io.indextables.state"

# ---------------------------------------------------------------------------------------------
# Schemas (docs/reference/table-format.md, "State manifest", "Manifest entries" and "File entries").
# ---------------------------------------------------------------------------------------------

_STR_MAP = {"type": "map", "values": "string"}

FILE_ENTRY_AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "FileEntry",
    "namespace": NAMESPACE,
    "doc": "A file entry representing a split in the table state",
    "fields": [
        {"name": "path", "type": "string", "field-id": 100},
        {"name": "partitionValues", "type": _STR_MAP, "field-id": 101},
        {"name": "size", "type": "long", "field-id": 102},
        {"name": "modificationTime", "type": "long", "field-id": 103},
        {"name": "dataChange", "type": "boolean", "field-id": 104},
        {"name": "stats", "type": ["null", "string"], "default": None, "field-id": 110},
        {"name": "minValues", "type": ["null", _STR_MAP], "default": None, "field-id": 111},
        {"name": "maxValues", "type": ["null", _STR_MAP], "default": None, "field-id": 112},
        {"name": "numRecords", "type": ["null", "long"], "default": None, "field-id": 113},
        {"name": "footerStartOffset", "type": ["null", "long"], "default": None, "field-id": 120},
        {"name": "footerEndOffset", "type": ["null", "long"], "default": None, "field-id": 121},
        {"name": "hasFooterOffsets", "type": "boolean", "default": False, "field-id": 124},
        {"name": "splitTags", "type": ["null", {"type": "array", "items": "string"}], "default": None, "field-id": 132},
        {"name": "numMergeOps", "type": ["null", "int"], "default": None, "field-id": 134},
        {"name": "docMappingRef", "type": ["null", "string"], "default": None, "field-id": 135},
        {"name": "uncompressedSizeBytes", "type": ["null", "long"], "default": None, "field-id": 136},
        {"name": "addedAtVersion", "type": "long", "field-id": 140},
        {"name": "addedAtTimestamp", "type": "long", "field-id": 141},
        # companion splits (field ids as the reference implementation's companion mode)
        {
            "name": "companionSourceFiles",
            "type": ["null", {"type": "array", "items": "string"}],
            "default": None,
            "field-id": 150,
        },
        {"name": "companionDeltaVersion", "type": ["null", "long"], "default": None, "field-id": 151},
        # Up to here the record is field for field the reference's v0.5.4 schema
        # (transaction/avro/AvroSchemas.scala FILE_ENTRY_SCHEMA). Appended, with defaults (new optional
        # fields go at the end: docs/reference/table-format.md, "Backward compatibility"), so that every
        # field of a reference add / FileEntry survives our state writes: fields of the current
        # reference's schema (tantivy4java txlog/avro/schemas.rs, which has them mid-record; Avro
        # readers resolve by name), with its field ids ...
        {"name": "companionFastFieldMode", "type": ["null", "string"], "default": None, "field-id": 152},
        {"name": "deleteOpstamp", "type": ["null", "long"], "default": None, "field-id": 123},
        {"name": "timeRangeStart", "type": ["null", "string"], "default": None, "field-id": 137},
        {"name": "timeRangeEnd", "type": ["null", "string"], "default": None, "field-id": 138},
        # ... and the reference AddAction's hotcache offsets, which no reference Avro schema has:
        # ids from the unused part of the reference's "120-129: footer offsets" range.
        {"name": "hotcacheStartOffset", "type": ["null", "long"], "default": None, "field-id": 125},
        {"name": "hotcacheLength", "type": ["null", "long"], "default": None, "field-id": 126},
    ],
}

FILE_ENTRY_FIELD_IDS: dict[int, str] = {f["field-id"]: f["name"] for f in FILE_ENTRY_AVRO_SCHEMA["fields"]}

_PARTITION_BOUNDS_ITEM = {
    "type": "record",
    "name": "PartitionBoundsItem",
    "fields": [
        {"name": "min", "type": ["null", "string"], "default": None},
        {"name": "max", "type": ["null", "string"], "default": None},
    ],
}

STATE_MANIFEST_AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "StateManifest",
    "namespace": NAMESPACE,
    "doc": "The state manifest that describes the complete table state",
    "fields": [
        {"name": "formatVersion", "type": "int"},
        {"name": "stateVersion", "type": "long"},
        {"name": "createdAt", "type": "long"},
        {"name": "numFiles", "type": "long"},
        {"name": "totalBytes", "type": "long"},
        {
            "name": "manifests",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "ManifestInfoItem",
                    "fields": [
                        {"name": "path", "type": "string"},
                        {"name": "numEntries", "type": "long"},
                        {"name": "minAddedAtVersion", "type": "long"},
                        {"name": "maxAddedAtVersion", "type": "long"},
                        {
                            "name": "partitionBounds",
                            "type": ["null", {"type": "map", "values": _PARTITION_BOUNDS_ITEM}],
                            "default": None,
                        },
                        {"name": "tombstoneCount", "type": "long", "default": 0},
                        {"name": "liveEntryCount", "type": "long", "default": -1},
                    ],
                },
            },
        },
        {"name": "tombstones", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "schemaRegistry", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "protocolVersion", "type": "int", "default": 4},
        {"name": "metadata", "type": ["null", "string"], "default": None},
        # Our additions (new optional fields go at the end, with defaults: docs/reference/table-format.md,
        # "Backward compatibility").
        # The JSON-encoded protocol action, so a reader gets reader/writer features without
        # replaying the log; and the live SkipActions (JSON-encoded, one per file).
        {"name": "protocol", "type": ["null", "string"], "default": None},
        {"name": "skipActions", "type": {"type": "array", "items": "string"}, "default": []},
        # The first N manifests were written together by one compaction: their paths are
        # distinct, so readers only check later manifests for re-added paths.
        {"name": "distinctPrefixManifests", "type": "int", "default": 0},
        # The live delete logs (JSON-encoded deleteLog actions) and the stats file lists by key
        # (e.g. "bloomfilter": per-split Bloom filter files); see core/log/deletes/delete_logs.py,
        # core/split/format/bloom.py.
        {"name": "deleteLogs", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "statsFiles", "type": {"type": "map", "values": {"type": "array", "items": "string"}}, "default": {}},
    ],
}

CODECS = ("zstd", "snappy", "none")
_AVRO_CODEC_NAME = {"zstd": "zstandard", "snappy": "snappy", "none": "null"}


def avro_codec_name(codec: str) -> str:
    c = (codec or "zstd").strip().lower()
    if c in ("zstandard",):
        c = "zstd"
    if c in ("null", "uncompressed"):
        c = "none"
    if c not in _AVRO_CODEC_NAME:
        raise InvalidOptionError(
            f"option 'spark.indextables.state.compression': expected one of {list(CODECS)}, got {codec!r}"
        )
    return _AVRO_CODEC_NAME[c]


def encode_long_scalar(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    u &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


# ---------------------------------------------------------------------------------------------
# Container framing.
# ---------------------------------------------------------------------------------------------


def _compress(codec: str, data: bytes, level: int) -> bytes:
    if codec == "null":
        return data
    if codec == "zstandard":
        import zstandard  # lazy: keeps `import indextables_spark.core.log.state.avro_container` free of zstandard

        # With the frame's content checksum (xxHash64, 4 bytes a block): zstd then detects a
        # corrupted block, which Avro's framing does not (sync markers only); any zstd decoder
        # verifies it. The reference's Avro writer (CodecFactory.zstandardCodec(level)) writes none.
        return zstandard.ZstdCompressor(level=level, write_checksum=True).compress(data)
    if codec == "snappy":
        import cramjam  # lazy: keeps `import indextables_spark.core.log.state.avro_container` free of cramjam

        return bytes(cramjam.snappy.compress_raw(data)) + struct.pack(">I", zlib.crc32(data) & 0xFFFFFFFF)
    if codec == "deflate":
        c = zlib.compressobj(level if 0 <= level <= 9 else 6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    raise InvalidOptionError(f"unsupported Avro codec {codec!r}")


def _decompress(codec: str, data: bytes, where: str) -> bytes:
    try:
        if codec == "null":
            return data
        if codec == "zstandard":
            import zstandard  # lazy: keeps `import indextables_spark.core.log.state.avro_container` free of zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
        if codec == "snappy":
            import cramjam  # lazy: keeps `import indextables_spark.core.log.state.avro_container` free of cramjam

            return bytes(cramjam.snappy.decompress_raw(data[:-4]))
        if codec == "deflate":
            return zlib.decompress(data, -15)
    except Exception as e:  # noqa: BLE001 - every codec library raises its own types
        raise CorruptStateError(f"{where}: cannot decompress an Avro block ({codec}): {e}") from None
    raise CorruptStateError(f"{where}: unsupported Avro codec {codec!r}")


def _header(schema: dict[str, Any], codec: str, sync: bytes, extra_meta: dict[str, bytes] | None) -> bytes:
    meta = {"avro.schema": json.dumps(schema, separators=(",", ":")).encode(), "avro.codec": codec.encode()}
    if extra_meta:
        meta.update(extra_meta)
    out = bytearray(MAGIC)
    out += encode_long_scalar(len(meta))
    for k, v in meta.items():
        kb = k.encode()
        out += encode_long_scalar(len(kb)) + kb + encode_long_scalar(len(v)) + v
    out += b"\x00"
    out += sync
    return bytes(out)


@dataclass
class BlockInfo:
    """Where one data block sits in a container (for readers that skip blocks)."""

    offset: int  # byte offset of the block (its record count)
    length: int  # bytes up to and including the sync marker
    first_row: int
    num_rows: int


# ---------------------------------------------------------------------------------------------
# Reading headers (and blocks, for tests and block-level skipping).
# ---------------------------------------------------------------------------------------------


class _Cursor:
    def __init__(self, data: bytes, where: str):
        self.data = data
        self.pos = 0
        self.where = where

    def long(self) -> int:
        shift = 0
        acc = 0
        while True:
            if self.pos >= len(self.data):
                raise CorruptStateError(f"{self.where}: truncated Avro file (unexpected end of data)")
            b = self.data[self.pos]
            self.pos += 1
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise CorruptStateError(f"{self.where}: corrupt Avro file (bad variable-length integer)")
        return (acc >> 1) ^ -(acc & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptStateError(f"{self.where}: truncated Avro file (unexpected end of data)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)


@dataclass
class ContainerHeader:
    schema: dict[str, Any]
    codec: str
    metadata: dict[str, bytes]
    sync: bytes
    length: int


def read_header(data: bytes, where: str) -> ContainerHeader:
    if len(data) < 4 or data[:4] != MAGIC:
        raise CorruptStateError(
            f"{where}: not an Avro object container file (bad magic {bytes(data[:4])!r}, expected {MAGIC!r})"
        )
    cur = _Cursor(data, where)
    cur.pos = 4
    meta: dict[str, bytes] = {}
    while True:
        count = cur.long()
        if count == 0:
            break
        if count < 0:
            count = -count
            cur.long()
        for _ in range(count):
            k = cur.take(cur.long()).decode("utf-8", "replace")
            meta[k] = cur.take(cur.long())
    sync = cur.take(16)
    try:
        schema = json.loads(meta["avro.schema"])
    except (KeyError, ValueError) as e:
        raise CorruptStateError(f"{where}: Avro header has no valid schema ({e})") from None
    codec = meta.get("avro.codec", b"null").decode("ascii", "replace")
    return ContainerHeader(schema, codec, meta, sync, cur.pos)


def count_rows(data: bytes, header: ContainerHeader, where: str) -> int:
    return sum(b[2] for b in list_blocks(data, header, where))


def list_blocks(data: bytes, header: ContainerHeader, where: str) -> list[tuple[int, int, int]]:
    """Walk the block framing without decompressing: (start, end, records) of every block, after
    checking that each is complete and ends with the file's sync marker (detects truncation)."""
    cur = _Cursor(data, where)
    cur.pos = header.length
    out = []
    n = len(data)
    while cur.pos < n:
        start = cur.pos
        count = cur.long()
        size = cur.long()
        if count < 0 or size < 0:
            raise CorruptStateError(f"{where}: corrupt Avro file (negative block header at byte {cur.pos})")
        end = cur.pos + size + 16
        if end > n:
            raise CorruptStateError(
                f"{where}: truncated Avro file (a block of {size} bytes at byte {cur.pos} runs past the end, "
                f"file is {n} bytes)"
            )
        if data[end - 16 : end] != header.sync:
            raise CorruptStateError(f"{where}: corrupt Avro file (sync marker mismatch at byte {end - 16})")
        cur.pos = end
        out.append((start, end, count))
    return out


def iter_blocks(data: bytes, header: ContainerHeader, where: str) -> Iterator[tuple[int, bytes]]:
    """Yield (row count, decompressed bytes) for each data block, checking sync markers."""
    cur = _Cursor(data, where)
    cur.pos = header.length
    while cur.pos < len(data):
        count = cur.long()
        size = cur.long()
        payload = cur.take(size)
        if cur.take(16) != header.sync:
            raise CorruptStateError(f"{where}: corrupt Avro file (sync marker mismatch at byte {cur.pos - 16})")
        yield count, _decompress(header.codec, payload, where)


# ---------------------------------------------------------------------------------------------
# Decoding records with the writer's schema (small files: the state manifest). fastavro decodes
# them too (its import costs ~20 ms, a tenth of a fresh process's first snapshot): this reader
# covers plain schemas (primitives, records, arrays, maps, unions; no logical types, enums, fixed
# or named-type references) and the null/deflate/zstandard codecs, and returns what fastavro
# returns for them; read_records() answers None for anything else, and callers use fastavro.
# ---------------------------------------------------------------------------------------------

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PLAIN_CODECS = frozenset({"null", "deflate", "zstandard"})


def _plain_schema(schema: Any) -> bool:
    if isinstance(schema, str):
        return schema in _PRIMITIVES
    if isinstance(schema, list):
        return bool(schema) and all(_plain_schema(s) and not isinstance(s, list) for s in schema)
    if not isinstance(schema, dict) or "logicalType" in schema:
        return False
    t = schema.get("type")
    if isinstance(t, str) and t in _PRIMITIVES:
        return True
    if t == "array":
        return _plain_schema(schema.get("items"))
    if t == "map":
        return _plain_schema(schema.get("values"))
    if t == "record":
        fields = schema.get("fields")
        return isinstance(fields, list) and all(
            isinstance(f, dict) and isinstance(f.get("name"), str) and _plain_schema(f.get("type")) for f in fields
        )
    return False


def _read_datum(schema: Any, cur: _Cursor) -> Any:
    t = schema if isinstance(schema, str) else None if isinstance(schema, list) else schema["type"]
    if t is None:  # union: the branch index, then the value
        branch = cur.long()
        if not 0 <= branch < len(schema):
            raise CorruptStateError(f"{cur.where}: corrupt Avro data (union branch {branch} of {len(schema)})")
        return _read_datum(schema[branch], cur)
    if t == "long" or t == "int":
        return cur.long()
    if t == "string":
        return cur.take(cur.long()).decode("utf-8")
    if t == "record":
        return {f["name"]: _read_datum(f["type"], cur) for f in schema["fields"]}
    if t == "array" or t == "map":
        out_list: list[Any] = []
        out_map: dict[str, Any] = {}
        while True:
            count = cur.long()
            if count == 0:
                break
            if count < 0:  # a block with its byte size
                count = -count
                cur.long()
            for _ in range(count):
                if t == "array":
                    out_list.append(_read_datum(schema["items"], cur))
                else:
                    key = cur.take(cur.long()).decode("utf-8")
                    out_map[key] = _read_datum(schema["values"], cur)
        return out_list if t == "array" else out_map
    if t == "null":
        return None
    if t == "boolean":
        return cur.take(1) != b"\x00"
    if t == "bytes":
        return cur.take(cur.long())
    if t == "float":
        return struct.unpack("<f", cur.take(4))[0]
    if t == "double":
        return struct.unpack("<d", cur.take(8))[0]
    raise CorruptStateError(f"{cur.where}: unsupported Avro type {t!r}")  # excluded by _plain_schema


def read_records(data: bytes, header: ContainerHeader, where: str) -> list[Any] | None:
    """Every record of a container, decoded with its writer's schema as fastavro.reader does;
    None when the schema or codec is outside what this reader covers (see above). Raises
    CorruptStateError (or UnicodeDecodeError / struct.error) on damaged data."""
    if header.codec not in _PLAIN_CODECS or not _plain_schema(header.schema):
        return None
    out: list[Any] = []
    for count, block in iter_blocks(data, header, where):
        cur = _Cursor(block, where)
        for _ in range(count):
            out.append(_read_datum(header.schema, cur))
    return out
