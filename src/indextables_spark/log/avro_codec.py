"""Avro object container files: the spec's schemas, a column-wise (vectorised) encoder for Arrow
tables, container framing and header parsing.

Why our own encoder: the FileEntry manifests must carry the spec's exact schema (record name,
namespace, field order, nullability), and writing 70,000 records one Python dict at a time with
fastavro takes over a second. Avro's binary encoding is simple enough to build column by column
with numpy/Arrow compute: every field is encoded for all rows at once into a binary array, the
per-row pieces are joined element-wise, and the rows are framed into blocks. fastavro is used to
check the output in the tests (an independent implementation) and for small records (the state
manifest).
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStateError, InvalidOptionError

MAGIC = b"Obj\x01"
NAMESPACE = "io.indextables.state"

# ---------------------------------------------------------------------------------------------
# Schemas (avro-state-file.md "Appendix: Full Avro Schema"; spec README "Wire facts").
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
        # (transaction/avro/AvroSchemas.scala FILE_ENTRY_SCHEMA). Appended, with defaults (spec
        # README: "New optional fields ... at the end of the record with defaults"), so that every
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
        # Our additions (spec README: new optional fields go at the end, with defaults).
        # The JSON-encoded protocol action, so a reader gets reader/writer features without
        # replaying the log; and the live SkipActions (JSON-encoded, one per file).
        {"name": "protocol", "type": ["null", "string"], "default": None},
        {"name": "skipActions", "type": {"type": "array", "items": "string"}, "default": []},
        # The first N manifests were written together by one compaction: their paths are
        # distinct, so readers only check later manifests for re-added paths.
        {"name": "distinctPrefixManifests", "type": "int", "default": 0},
        # The live delete logs (JSON-encoded deleteLog actions) and the stats file lists by key
        # (e.g. "bloomfilter": per-split Bloom filter files); see log/delete_logs.py, split/bloom.py.
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


# ---------------------------------------------------------------------------------------------
# Column encoders. Each returns a pa.BinaryArray (or LargeBinary) with one value per row: the
# Avro binary encoding of that field for that row.
# ---------------------------------------------------------------------------------------------

_BIN = pa.binary()


def _binary_from_parts(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def varints(u: np.ndarray) -> pa.Array:
    """Avro variable-length encoding of already zig-zagged unsigned values, one binary per value."""
    u = np.asarray(u, dtype=np.uint64)
    n = len(u)
    if n == 0:
        return pa.array([], pa.large_binary())
    nbytes = np.ones(n, dtype=np.int64)
    rest = u >> np.uint64(7)
    while True:
        nz = rest != 0
        if not nz.any():
            break
        nbytes += nz
        rest >>= np.uint64(7)
    width = int(nbytes.max())
    if width == 1:
        return _binary_from_parts(nbytes, u.astype(np.uint8))
    shifts = (np.arange(width, dtype=np.uint64) * np.uint64(7))[None, :]
    mat = ((u[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    cols = np.arange(width)[None, :]
    mat |= np.where(cols < (nbytes[:, None] - 1), np.uint8(0x80), np.uint8(0))
    data = mat[cols < nbytes[:, None]]
    return _binary_from_parts(nbytes, data)


def encode_long_values(values: np.ndarray) -> pa.Array:
    return varints(zigzag(np.asarray(values, dtype=np.int64)))


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


def _join(*parts: Any) -> pa.Array:
    """Element-wise concatenation of binary arrays / scalars (nulls propagate)."""
    return pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.large_binary()))


def _as_large_binary(arr: pa.Array) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_binary(arr.type):
        return arr
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_binary(arr.type):
        return arr.cast(pa.large_binary())
    raise TypeError(f"cannot encode {arr.type} as an Avro string")


def encode_strings(arr: pa.Array) -> pa.Array:
    """Avro string: long byte length, then UTF-8 bytes. Nulls stay null."""
    b = _as_large_binary(arr)
    lengths = pc.binary_length(b).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    enc = _join(encode_long_values(lengths), b)
    return enc


def encode_bool(arr: pa.Array) -> pa.Array:
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    vals = a.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
    out = _binary_from_parts(np.ones(len(vals), dtype=np.int64), vals)
    if a.null_count:
        out = pc.if_else(a.is_null(), pa.scalar(None, pa.large_binary()), out)
    return out


def encode_ints(arr: pa.Array) -> pa.Array:
    """int or long (same binary encoding). Nulls stay null."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    vals = a.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    out = encode_long_values(vals)
    if a.null_count:
        out = pc.if_else(a.is_null(), pa.scalar(None, pa.large_binary()), out)
    return out


def _collection(row_offsets: np.ndarray, item_bytes: pa.Array, validity: pa.Array | None) -> pa.Array:
    """Avro array/map blocks: [count, items..., 0] (or just 0 when empty), one per row.

    row_offsets (starting at 0) index into item_bytes, whose values lie in row order in one data
    buffer, so each row's items are one slice of that buffer: only offsets are computed.
    """
    n = len(row_offsets) - 1
    counts = np.diff(row_offsets).astype(np.int64)
    zero = pa.scalar(b"\x00", pa.large_binary())
    if len(item_bytes):
        ib = item_bytes if item_bytes.offset == 0 else pa.concat_arrays([item_bytes])
        item_offs = np.frombuffer(ib.buffers()[1], dtype=np.int64, count=len(ib) + 1)
        base = int(item_offs[0])
        offs = item_offs[row_offsets] - base
        data = ib.buffers()[2].slice(base, int(item_offs[-1]) - base)
        bodies = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offs), data])
        out = pc.if_else(pa.array(counts > 0), _join(encode_long_values(counts), bodies, zero), zero)
    else:
        out = _binary_from_parts(np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.uint8))
    if validity is not None:
        out = pc.if_else(validity, out, pa.scalar(None, pa.large_binary()))
    return out


def encode_string_map(arr: pa.Array) -> pa.Array:
    """map<string,string> per row (nulls stay null)."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if a.offset:
        a = pa.concat_arrays([a])
    offsets = a.offsets.to_numpy().astype(np.int64)
    keys = a.keys
    items = a.items
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = keys.slice(lo, hi - lo)
    items = items.slice(lo, hi - lo)
    entries = _join(encode_strings(keys), encode_strings(items.fill_null("")))
    validity = a.is_valid() if a.null_count else None
    return _collection(offsets - lo, entries, validity)


def encode_string_list(arr: pa.Array) -> pa.Array:
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if a.offset:
        a = pa.concat_arrays([a])
    offsets = a.offsets.to_numpy().astype(np.int64)
    values = a.values
    lo, hi = int(offsets[0]), int(offsets[-1])
    values = values.slice(lo, hi - lo)
    items = encode_strings(values.fill_null(""))
    validity = a.is_valid() if a.null_count else None
    return _collection(offsets - lo, items, validity)


def nullable_union(enc: pa.Array) -> pa.Array:
    """["null", T]: branch 0 (byte 0x00) for null, branch 1 (0x02) then the value."""
    if enc.null_count == 0:
        return _join(pa.scalar(b"\x02", pa.large_binary()), enc)
    joined = _join(pa.scalar(b"\x02", pa.large_binary()), enc)
    return joined.fill_null(pa.scalar(b"\x00", pa.large_binary()))


def encode_field(arr: pa.Array, avro_type: Any) -> pa.Array:
    """Encode one column for the given Avro type (the subset used by our schemas)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(avro_type, list):  # ["null", T]
        if avro_type[0] != "null" or len(avro_type) != 2:
            raise TypeError(f"unsupported union {avro_type}")
        return nullable_union(encode_field(arr, avro_type[1]))
    if isinstance(avro_type, dict):
        t = avro_type["type"]
        if t == "map" and avro_type["values"] == "string":
            return encode_string_map(arr)
        if t == "array" and avro_type["items"] == "string":
            return encode_string_list(arr)
        raise TypeError(f"unsupported Avro type {avro_type}")
    if avro_type == "string":
        return encode_strings(arr)
    if avro_type in ("long", "int"):
        return encode_ints(arr)
    if avro_type == "boolean":
        return encode_bool(arr)
    raise TypeError(f"unsupported Avro type {avro_type}")


def encode_rows(table: pa.Table, schema: dict[str, Any]) -> pa.Array:
    """One binary value per row: the record's Avro binary encoding."""
    parts = []
    for f in schema["fields"]:
        name = f["name"]
        col = table.column(name)
        if col.null_count and not (isinstance(f["type"], list) and f["type"][0] == "null"):
            if "default" in f and f["default"] is not None:
                col = pc.fill_null(col, f["default"])
            else:
                raise CorruptStateError(f"field {name!r} is required by the Avro schema but has null values")
        parts.append(encode_field(col, f["type"]))
    if table.num_rows == 0:
        return pa.array([], pa.large_binary())
    return _join(*parts)


# ---------------------------------------------------------------------------------------------
# Container framing.
# ---------------------------------------------------------------------------------------------


def _compress(codec: str, data: bytes, level: int) -> bytes:
    if codec == "null":
        return data
    if codec == "zstandard":
        import zstandard

        # With the frame's content checksum (xxHash64, 4 bytes a block): zstd then detects a
        # corrupted block, which Avro's framing does not (sync markers only); any zstd decoder
        # verifies it. The reference's Avro writer (CodecFactory.zstandardCodec(level)) writes none.
        return zstandard.ZstdCompressor(level=level, write_checksum=True).compress(data)
    if codec == "snappy":
        import cramjam

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
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
        if codec == "snappy":
            import cramjam

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


def write_container(
    rows: pa.Array,
    schema: dict[str, Any],
    codec: str = "zstandard",
    level: int = 3,
    block_boundaries: Iterable[int] | None = None,
    max_block_bytes: int = 1 << 20,
    extra_meta_fn: Callable[[list[BlockInfo]], dict[str, bytes]] | None = None,
) -> tuple[bytes, list[BlockInfo]]:
    """Frame encoded rows into an Avro object container file.

    block_boundaries: row indexes where a new block must start (e.g. partition changes);
    blocks are also cut when they exceed max_block_bytes of uncompressed data.
    extra_meta_fn(blocks) may return extra header metadata computed from the block layout; the
    header is then built after the blocks (block offsets are relative to the end of the header
    and are shifted when it is known).
    """
    sync = os.urandom(16)
    n = len(rows)
    if n:
        if rows.offset:
            rows = pa.concat_arrays([rows])
        offs = np.frombuffer(rows.buffers()[1], dtype=np.int64, count=n + 1)
        data = rows.buffers()[2]
        base = int(offs[0])
    cuts = sorted({0, *(b for b in (block_boundaries or ()) if 0 < b < n)}) if n else []
    # Split further by size.
    starts: list[int] = []
    for i, s in enumerate(cuts):
        e = cuts[i + 1] if i + 1 < len(cuts) else n
        while s < e:
            starts.append(s)
            if offs[e] - offs[s] <= max_block_bytes:
                break
            limit = offs[s] + max_block_bytes
            nxt = int(np.searchsorted(offs[s : e + 1], limit, side="right")) + s - 1
            s = max(nxt, s + 1)
    body = io.BytesIO()
    blocks: list[BlockInfo] = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else n
        raw = data.slice(int(offs[s]) - base + base, int(offs[e] - offs[s])).to_pybytes() if n else b""
        comp = _compress(codec, raw, level)
        pos = body.tell()
        body.write(encode_long_scalar(e - s))
        body.write(encode_long_scalar(len(comp)))
        body.write(comp)
        body.write(sync)
        blocks.append(BlockInfo(pos, body.tell() - pos, s, e - s))
    extra = extra_meta_fn(blocks) if extra_meta_fn else None
    header = _header(schema, codec, sync, extra)
    for b in blocks:
        b.offset += len(header)
    return header + body.getvalue(), blocks


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
