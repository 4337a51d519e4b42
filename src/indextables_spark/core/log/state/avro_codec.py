"""Avro object container files: a column-wise (vectorised) encoder for Arrow tables, and the
container writer. The state's schemas, codec names, header parsing and block framing are in
avro_container.py (pure Python: what a state read needs), re-exported here.

Why our own encoder: the FileEntry manifests must carry the format's exact schema (record name,
namespace, field order, nullability: docs/reference/table-format.md, "File entries"), and writing
70,000 records one Python dict at a time with fastavro takes over a second. Avro's binary encoding
is simple enough to build column by column with numpy/Arrow compute: every field is encoded for all
rows at once into a binary array, the per-row pieces are joined element-wise, and the rows are
framed into blocks. fastavro is used to check the output in the tests (an independent
implementation) and for small records (the state manifest).
"""

from __future__ import annotations

import io
import os
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.state.avro_container import (
    CODECS as CODECS,
)
from indextables_spark.core.log.state.avro_container import (
    FILE_ENTRY_AVRO_SCHEMA as FILE_ENTRY_AVRO_SCHEMA,
)
from indextables_spark.core.log.state.avro_container import (
    FILE_ENTRY_FIELD_IDS as FILE_ENTRY_FIELD_IDS,
)
from indextables_spark.core.log.state.avro_container import (
    MAGIC as MAGIC,
)
from indextables_spark.core.log.state.avro_container import (
    NAMESPACE as NAMESPACE,
)
from indextables_spark.core.log.state.avro_container import (
    STATE_MANIFEST_AVRO_SCHEMA as STATE_MANIFEST_AVRO_SCHEMA,
)
from indextables_spark.core.log.state.avro_container import (
    BlockInfo as BlockInfo,
)
from indextables_spark.core.log.state.avro_container import (
    ContainerHeader as ContainerHeader,
)
from indextables_spark.core.log.state.avro_container import (
    _compress,
    _header,
)
from indextables_spark.core.log.state.avro_container import (
    avro_codec_name as avro_codec_name,
)
from indextables_spark.core.log.state.avro_container import (
    count_rows as count_rows,
)
from indextables_spark.core.log.state.avro_container import (
    encode_long_scalar as encode_long_scalar,
)
from indextables_spark.core.log.state.avro_container import (
    iter_blocks as iter_blocks,
)
from indextables_spark.core.log.state.avro_container import (
    list_blocks as list_blocks,
)
from indextables_spark.core.log.state.avro_container import (
    read_header as read_header,
)
from indextables_spark.errors import CorruptStateError

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


def _join(*parts: pa.Array | pa.Scalar) -> pa.Array:
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


def _encode_nested(arr: pa.Array, encode_entries: Callable[[pa.Array, int, int], pa.Array]) -> pa.Array:
    """A list or map per row (nulls stay null): encode_entries(array, lo, n) encodes the n child
    entries from lo on, the ones the rows use."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if a.offset:
        a = pa.concat_arrays([a])
    offsets = a.offsets.to_numpy().astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    entries = encode_entries(a, lo, hi - lo)
    validity = a.is_valid() if a.null_count else None
    return _collection(offsets - lo, entries, validity)


def encode_string_map(arr: pa.Array) -> pa.Array:
    """map<string,string> per row (nulls stay null)."""
    return _encode_nested(
        arr,
        lambda a, lo, n: _join(encode_strings(a.keys.slice(lo, n)), encode_strings(a.items.slice(lo, n).fill_null(""))),
    )


def encode_string_list(arr: pa.Array) -> pa.Array:
    return _encode_nested(arr, lambda a, lo, n: encode_strings(a.values.slice(lo, n).fill_null("")))


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
