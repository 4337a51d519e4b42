"""Version file encoding: newline-delimited JSON actions, GZIP by default, detected by header."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any, Iterable

from ..errors import CorruptStateError
from .actions import Action, action_from_json, action_to_json

GZIP_MAGIC = b"\x1f\x8b"


def encode_actions(actions: Iterable[Action], compress: bool = True) -> bytes:
    text = "".join(json.dumps(action_to_json(a), separators=(",", ":"), ensure_ascii=False) + "\n" for a in actions)
    data = text.encode("utf-8")
    # mtime=0 keeps the bytes deterministic for the same actions.
    return gzip.compress(data, compresslevel=6, mtime=0) if compress else data


def decode_text(data: bytes, where: str) -> str:
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CorruptStateError(f"{where}: corrupt gzip data ({e})") from None
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
