"""The split's hotcache: what opening it on object storage reads, stored once more as one block
right before the split's footer, so the first request of a cold read (the split's last bytes: the
footer, usually with the hotcache) is all that opening costs, as Quickwit's hotcache does.

What opening reads (tantivy 0.27, and our row store): meta.json and the other small files whole
(rows.layout, .del), the end of each segment file that opening reads (`open_need`: a composite
file's offset table, the fast field file's column dictionary, the doc store's skip index, with
tantivy's footer), and the row store's Arrow IPC footer. Vector index files are read only by a
vector search: not in it.

Footer key `hotcache`: {"offset": o, "length": n, "pieces": [[file, start, end], ...]}: the pieces'
bytes (file-relative [start, end) of the bundled file, or of `rows.arrow`) one after another at
[o, o + n) of the split. Readers that do not know the key ignore it (the bytes stay where they are too).
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from indextables_spark.core.split.format.composite import TAIL_BYTES, columnar_tail, needed_tail, store_tail
from indextables_spark.errors import SplitFormatError

HOTCACHE_KEY = "hotcache"
OPENED_BY_END = ("term", "idx", "pos", "fieldnorm", "fast", "store")  # opening reads their ends only
WHOLE_MAX = 1 << 20  # other files up to this size are in the hotcache whole (meta.json, rows.layout)
ROWS_FILE = "rows.arrow"
ARROW_MAGIC = b"ARROW1"
TOKEN_COUNT_BYTES = 8  # a field's .idx section starts with its token count (u64): tantivy reads it when it
# opens the field's inverted index, for any query of the field


def _ext(name: str) -> str:
    return name.rsplit(".", 1)[-1] if "." in name else ""


def open_need(name: str, length: int, tail: bytes) -> int:
    """How many last bytes of a segment file opening the index reads (ValueError: not told from
    `tail`, the file's last len(tail) bytes; more than len(tail) when its end starts before)."""
    ext = _ext(name)
    if ext == "fast":
        return columnar_tail(length, tail)
    if ext == "store":
        return store_tail(length, tail)
    return needed_tail(length, tail)  # a composite file: its offset table


def ipc_footer_need(length: int, tail: bytes) -> int:
    """How many last bytes of an Arrow IPC file hold its footer (ValueError: not an IPC file end)."""
    if len(tail) < 10 or tail[-6:] != ARROW_MAGIC:
        raise ValueError("not an Arrow IPC file end")
    need = int.from_bytes(tail[-10:-6], "little", signed=True) + 10
    if not 10 <= need <= length:
        raise ValueError("Arrow IPC footer longer than the file")
    return need


Piece = tuple[str, int, int]  # (file, start, end)


def _end_piece(name: str, path: str, length: int, need_of: Callable[[int, bytes], int]) -> Piece | None:
    with open(path, "rb") as f:
        size = min(length, TAIL_BYTES)
        while True:
            f.seek(length - size)
            tail = f.read(size)
            try:
                need = int(need_of(length, tail))
            except (ValueError, struct.error):
                return None  # not a file we know: a reader fetches it as it would without the hotcache
            if need <= size or size >= length:
                return (name, length - min(need, length), length)
            size = min(length, need)


def open_pieces(
    files: Sequence[tuple[str, str]],
    rows_path: str | None,
    vector_prefix: str,
    sections: dict[str, Any] | None = None,
) -> list[Piece]:
    """The pieces of the hotcache of a split bundling `files` ((name, local path), in bundle order)
    and the row store at rows_path (None: none). With the split's indexSections (composite.py),
    also the token count at the start of each field's postings section, which every scored query
    of the field reads (TOKEN_COUNT_BYTES)."""
    out: list[Piece] = []
    known = (sections or {}).get("files") or {}
    for name, _path in files:
        if _ext(name) == "idx" and name in known:
            for s, e in sorted(tuple(r) for r in known[name]["sections"].values()):
                out.append((name, s, min(e, s + TOKEN_COUNT_BYTES)))
    for name, path in files:
        length = os.path.getsize(path)
        if name.startswith(vector_prefix) or not length:
            continue
        if _ext(name) in OPENED_BY_END:
            piece = _end_piece(name, path, length, functools.partial(open_need, name))
            if piece is not None:
                out.append(piece)
        elif length <= WHOLE_MAX:
            out.append((name, 0, length))
    if rows_path is not None and os.path.getsize(rows_path):
        piece = _end_piece(ROWS_FILE, rows_path, os.path.getsize(rows_path), ipc_footer_need)
        if piece is not None:
            out.append(piece)
    return out


def write_hotcache(out: BinaryIO, pieces: Sequence[Piece], paths: dict[str, str], offset: int) -> dict[str, Any]:
    """Append the pieces' bytes (read from `paths`: file name -> local path) to `out`, which is at
    split offset `offset`; returns the footer entry."""
    n = 0
    for name, start, end in pieces:
        with open(paths[name], "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        out.write(data)
        n += len(data)
    return {"offset": offset, "length": n, "pieces": [list(p) for p in pieces]}


@dataclass(frozen=True)
class Hotcache:
    """A split's hotcache read back: file -> [(start, bytes)]."""

    pieces: dict[str, list[tuple[int, bytes]]]


def hotcache_range(raw: dict[str, Any]) -> tuple[int, int] | None:
    """[offset, offset + length) of the split's hotcache per its footer JSON (None: it has none)."""
    entry = raw.get(HOTCACHE_KEY)
    if not isinstance(entry, dict):
        return None
    off, n = entry.get("offset"), entry.get("length")
    if not isinstance(off, int) or not isinstance(n, int) or off < 0 or n < 0:
        return None
    return off, off + n


def parse_hotcache(raw: dict[str, Any], data: bytes, lengths: dict[str, int], where: str) -> Hotcache:
    """The hotcache whose bytes are `data`, per the footer JSON `raw` (lengths: each bundled file's
    length, and rows.arrow's); SplitFormatError naming the split when they disagree."""
    entry = raw[HOTCACHE_KEY]
    pieces: dict[str, list[tuple[int, bytes]]] = {}
    pos = 0
    for p in entry.get("pieces") or []:
        if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str)):
            raise SplitFormatError(f"split {where}: a hotcache piece is not [file, start, end]: {str(p)[:80]}")
        name, start, end = p[0], int(p[1]), int(p[2])
        if name not in lengths or not 0 <= start <= end <= lengths[name]:
            raise SplitFormatError(f"split {where}: hotcache piece {p} is outside its file")
        pieces.setdefault(name, []).append((start, data[pos : pos + end - start]))
        pos += end - start
    if pos != len(data):
        raise SplitFormatError(f"split {where}: the hotcache holds {len(data)} bytes, its pieces {pos}")
    return Hotcache(pieces)
