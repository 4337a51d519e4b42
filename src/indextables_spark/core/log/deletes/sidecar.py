"""The binary frame of our auxiliary files (delete logs, Bloom filters).

    [magic: 4 bytes][formatVersion: u32 LE][header length: u32 LE][header: JSON, UTF-8][payload][CRC-32: u32 LE]

Readers check the magic, then the format version, before anything else (docs/reference/table-format.md,
"Sidecar frame": a wrong file or a newer format fails with an error naming the file and the
version found, never a crash or a half-read file). The CRC-32 covers every byte before it, so a
truncated or damaged file is recognised as such.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from indextables_spark.errors import CorruptStateError

_PREFIX = struct.Struct("<4sII")  # magic, formatVersion, header length
_CRC = struct.Struct("<I")
MIN_SIZE = _PREFIX.size + _CRC.size


def encode_frame(magic: bytes, format_version: int, header: dict[str, Any], payload: bytes) -> bytes:
    if len(magic) != 4:
        raise ValueError(f"magic must be 4 bytes, got {magic!r}")
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    body = _PREFIX.pack(magic, format_version, len(head)) + head + payload
    return body + _CRC.pack(zlib.crc32(body))


def decode_frame(
    data: bytes, magic: bytes, supported_version: int, what: str, where: str
) -> tuple[dict[str, Any], bytes]:
    """(header, payload) of a framed file; `what` names the kind of file in errors ("delete log")."""
    if len(data) < 4 or data[:4] != magic:
        raise CorruptStateError(f"{where}: not a {what} file (magic {bytes(data[:4])!r} found, expected {magic!r})")
    if len(data) < MIN_SIZE:
        raise CorruptStateError(f"{where}: truncated {what} file ({len(data)} bytes)")
    _, version, head_len = _PREFIX.unpack_from(data)
    if version != supported_version:
        raise CorruptStateError(
            f"{where}: {what} format version {version} found; this indextables_spark reads version {supported_version}"
        )
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    if zlib.crc32(memoryview(data)[: len(data) - _CRC.size]) != crc:
        raise CorruptStateError(f"{where}: truncated or corrupt {what} file (checksum mismatch, {len(data)} bytes)")
    start = _PREFIX.size
    if start + head_len > len(data) - _CRC.size:
        raise CorruptStateError(f"{where}: corrupt {what} file (header length {head_len} exceeds the file)")
    try:
        header = json.loads(bytes(data[start : start + head_len]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptStateError(f"{where}: corrupt {what} header ({e})") from None
    if not isinstance(header, dict):
        raise CorruptStateError(f"{where}: corrupt {what} header (not a JSON object)")
    return header, bytes(data[start + head_len : len(data) - _CRC.size])
