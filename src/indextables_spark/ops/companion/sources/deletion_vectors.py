"""Delta deletion vectors: the descriptor of an add action's `deletionVector` and the row positions
it deletes, decoded here (Delta's RoaringBitmapArray format) rather than trusted to a library that
only hands out keep masks.

Descriptor storage types: `u` (a file `deletion_vector_<uuid>.bin` under the table root, the uuid
Z85-encoded in the last 20 characters, an optional directory prefix before them), `i` (the
bitmap itself, Z85-encoded in the log), `p` (an absolute path). A DV file is one version byte
(1), then at `offset`: a big-endian int32 size, the bitmap, a big-endian CRC32 of the bitmap.

The bitmap: magic 1681511377 (little-endian int32), the number of 32-bit buckets (int64), then per
bucket its key (int32, the high 32 bits of the positions) and a portable 32-bit Roaring bitmap.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from indextables_spark.errors import CompanionSourceError

MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_SERIAL_COOKIE_NO_RUN = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4  # run-container bitmaps of fewer containers have no offset header


@dataclass(frozen=True)
class DeletionVector:
    """An add action's `deletionVector` (equal descriptors: the same deleted rows)."""

    storage_type: str  # "u" | "i" | "p"
    path_or_inline: str
    offset: int | None
    size: int  # bytes of the bitmap
    cardinality: int  # rows deleted

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str) -> DeletionVector:
        try:
            offset = d.get("offset")
            return cls(
                str(d["storageType"]),
                str(d["pathOrInlineDv"]),
                None if offset is None else int(offset),
                int(d["sizeInBytes"]),
                int(d["cardinality"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CompanionSourceError(f"{where}: invalid deletionVector descriptor {dict(d)!r} ({e!r})") from None


def z85_decode(text: str, where: str) -> bytes:
    if len(text) % 5:
        raise CompanionSourceError(f"{where}: Z85 text of {len(text)} characters (not a multiple of 5)")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            if c not in _Z85_VALUE:
                raise CompanionSourceError(f"{where}: {c!r} is not a Z85 character")
            value = value * 85 + _Z85_VALUE[c]
        if value >= 1 << 32:
            raise CompanionSourceError(f"{where}: Z85 group {text[i : i + 5]!r} is out of range")
        out += value.to_bytes(4, "big")
    return bytes(out)


def dv_file_path(dv: DeletionVector, where: str) -> str:
    """A file-backed vector's path: relative to the table root (`u`) or absolute (`p`)."""
    if dv.storage_type == "p":
        return dv.path_or_inline
    if dv.storage_type != "u":
        raise CompanionSourceError(f"{where}: deletion vector storage type {dv.storage_type!r} has no file")
    if len(dv.path_or_inline) < 20:
        raise CompanionSourceError(f"{where}: deletion vector path {dv.path_or_inline!r} is too short")
    prefix, encoded = dv.path_or_inline[:-20], dv.path_or_inline[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded, where))}.bin"
    return f"{prefix}/{name}" if prefix else name


def deleted_positions(dv: DeletionVector, read_range: Callable[[str, int, int], bytes], where: str) -> np.ndarray:
    """The sorted row positions `dv` deletes (`read_range(path, start, length)` reads a DV file;
    `where` names the data file). A vector that cannot be read or does not check out fails."""
    if dv.storage_type == "i":
        raw = z85_decode(dv.path_or_inline, f"{where}: inline deletion vector")
        if len(raw) < dv.size:
            raise CompanionSourceError(f"{where}: inline deletion vector holds {len(raw)} bytes, not {dv.size}")
        bitmap = raw[: dv.size]
        what = f"{where}: inline deletion vector"
    else:
        path = dv_file_path(dv, where)
        what = f"deletion vector file {path} (of {where})"
        start = dv.offset if dv.offset is not None else 1
        data = read_range(path, start, dv.size + 8)
        if len(data) != dv.size + 8:
            raise CompanionSourceError(f"{what}: {len(data)} bytes at offset {start}, {dv.size + 8} expected")
        (size,) = struct.unpack(">i", data[:4])
        if size != dv.size:
            raise CompanionSourceError(f"{what}: the vector at offset {start} has {size} bytes, the log says {dv.size}")
        bitmap = data[4 : 4 + size]
        (crc,) = struct.unpack(">I", data[4 + size :])
        if zlib.crc32(bitmap) != crc:
            raise CompanionSourceError(f"{what}: checksum mismatch at offset {start} (damaged file)")
    positions = decode_bitmap_array(bitmap, what)
    if positions.size != dv.cardinality:
        raise CompanionSourceError(f"{what}: holds {positions.size} positions, the log says {dv.cardinality}")
    return positions


def decode_bitmap_array(data: bytes, what: str) -> np.ndarray:
    """Delta's RoaringBitmapArray: sorted uint64 positions as int64."""
    reader = _Reader(data, what)
    if reader.unpack("<i") != MAGIC:
        raise CompanionSourceError(f"{what}: not a deletion vector (bad magic number)")
    buckets = reader.unpack("<q")
    if buckets < 0:
        raise CompanionSourceError(f"{what}: negative bucket count {buckets}")
    parts = []
    for _ in range(buckets):
        key = reader.unpack("<I")
        parts.append((np.int64(key) << 32) | decode_roaring32(reader).astype(np.int64))
    if reader.pos != len(data):
        raise CompanionSourceError(f"{what}: {len(data) - reader.pos} trailing bytes after the bitmap")
    out = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    if out.size > 1 and not bool(np.all(out[1:] > out[:-1])):
        raise CompanionSourceError(f"{what}: positions are not strictly increasing (damaged bitmap)")
    return out


class _Reader:
    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 0, what

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CompanionSourceError(f"{self.what}: truncated bitmap ({len(self.data)} bytes)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return int(value)

    def array(self, dtype: str, count: int) -> np.ndarray:
        return np.frombuffer(self.take(np.dtype(dtype).itemsize * count), dtype=dtype)


def decode_roaring32(reader: _Reader) -> np.ndarray:
    """One portable 32-bit Roaring bitmap (array, bitmap and run containers): sorted uint32 values."""
    cookie = reader.unpack("<I")
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        runs = np.unpackbits(reader.array("u1", (count + 7) // 8), bitorder="little")[:count].astype(bool)
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        count = reader.unpack("<I")
        runs = np.zeros(count, dtype=bool)
    else:
        raise CompanionSourceError(f"{reader.what}: unknown Roaring cookie {cookie}")
    header = reader.array("<u2", 2 * count).reshape(count, 2) if count else np.empty((0, 2), dtype="<u2")
    if cookie == _SERIAL_COOKIE_NO_RUN or count >= _NO_OFFSET_THRESHOLD:
        reader.take(4 * count)  # offsets of the containers: they follow each other anyway
    values = []
    for i in range(count):
        high = np.uint32(int(header[i, 0]) << 16)
        card = int(header[i, 1]) + 1
        if runs[i]:
            n = reader.unpack("<H")
            pairs = reader.array("<u2", 2 * n).reshape(n, 2).astype(np.uint32)
            spans = [np.arange(s, s + length + 1, dtype=np.uint32) for s, length in pairs]
            low = np.concatenate(spans) if spans else np.empty(0, dtype=np.uint32)
        elif card > 4096:
            bits = np.unpackbits(reader.array("u1", 8192), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
        else:
            low = reader.array("<u2", card).astype(np.uint32)
        if low.size != card:
            raise CompanionSourceError(f"{reader.what}: a container holds {low.size} values, its header says {card}")
        values.append(high | low)
    return np.concatenate(values).astype(np.uint32) if values else np.empty(0, dtype=np.uint32)
