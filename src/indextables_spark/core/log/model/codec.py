"""Version file encoding: newline-delimited JSON actions, GZIP by default, detected by header.

Framing, as the reference implementation writes and reads it (IndexTables4Spark
`transaction/compression/CompressionUtils.scala`: `writeTransactionFile` / `readTransactionFile`):
a compressed file starts with the magic byte 0x01 and a codec byte (0x01 = GZIP), then the
compressed stream; a file whose first byte is not 0x01 is plain JSON. Its reader takes any other
first byte as plain text, so a bare gzip stream (what this package wrote before 0.1.1, and what
the reference's Rust port `txlog/version_file.rs` writes) is unreadable to it: we write the
framed form and read all three.
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any, Iterable

from indextables_spark.core.log.model.action_wire import action_from_json, wire_actions
from indextables_spark.core.log.model.actions import Action
from indextables_spark.errors import CorruptStateError

GZIP_MAGIC = b"\x1f\x8b"
FRAME_MAGIC = 0x01  # first byte of a compressed version file (reference CompressionUtils.MAGIC_BYTE)
CODEC_GZIP = 0x01  # its codec byte for GZIP; the reference knows no other codec


def encode_actions(actions: Iterable[Action], compress: bool = True, version: int | None = None) -> bytes:
    """A version file (`version`: its version, so that adds omit what readers derive from it, as
    the reference needs: see core/log/model/actions.py) or a JSON checkpoint (no version: adds keep theirs)."""
    text = "".join(
        json.dumps(w, separators=(",", ":"), ensure_ascii=False) + "\n" for w in wire_actions(actions, version)
    )
    data = text.encode("utf-8")
    if not compress:
        return data
    # mtime=0 keeps the bytes deterministic for the same actions.
    return bytes((FRAME_MAGIC, CODEC_GZIP)) + gzip.compress(data, compresslevel=6, mtime=0)


def _gunzip(data: bytes, where: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise CorruptStateError(f"{where}: corrupt gzip data ({e})") from None


def decode_text(data: bytes, where: str) -> str:
    """The text of a version or checkpoint file: framed (0x01 codec + stream), bare gzip or plain."""
    if data[:1] == bytes((FRAME_MAGIC,)):
        if len(data) < 2:
            raise CorruptStateError(f"{where}: compressed file too short (no codec byte after the 0x01 marker)")
        if data[1] != CODEC_GZIP:
            raise CorruptStateError(
                f"{where}: unknown compression codec 0x{data[1]:02x} (known: 0x{CODEC_GZIP:02x} gzip)"
            )
        data = _gunzip(data[2:], where)
    elif data[:2] == GZIP_MAGIC:
        data = _gunzip(data, where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptStateError(f"{where}: not UTF-8 text ({e})") from None


def decode_json_lines(data: bytes, where: str) -> list[Any]:
    """Each non-blank line's JSON value (not necessarily an object: callers check)."""
    text = decode_text(data, where)
    out: list[Any] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: line {n} is not valid JSON ({e.msg} at column {e.colno})") from None
    return out


def decode_actions(data: bytes, where: str) -> list[Action]:
    out: list[Action] = []
    for obj in decode_json_lines(data, where):
        a = action_from_json(obj, where)
        if a is not None:
            out.append(a)
    return out
