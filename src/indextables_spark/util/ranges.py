"""Byte ranges merged into fewer reads: THE coalescing rule of every ranged fetch (a split's index
pieces: core/split/cache/sparse.py; its row store's (batch, column) pieces: cache/lazy_rows.py);
and SeekableFile, the position of a read-only file over a range of bytes."""

from __future__ import annotations

import io
from typing import Iterable

Range = tuple[int, int]  # [start, end) in bytes


def coalesce(ranges: Iterable[Range], gap: int, *, bounded: bool = False) -> list[Range]:
    """Sorted non-empty ranges merged where they touch or lie at most `gap` bytes apart; with
    `bounded`, a gap is also at most the bytes merged so far (a small metadata read does not take
    along a big column it skips)."""
    out: list[list[int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s - out[-1][1] <= (min(gap, out[-1][1] - out[-1][0]) if bounded else gap):
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


class SeekableFile(io.RawIOBase):
    """A read-only file of `size` bytes whose reads start at `pos`: the seeking that pyarrow's
    PythonFile and quickwit.read_bundle ask of it, written once; a subclass reads (`readinto`
    or `read`) and moves `pos`."""

    size: int
    pos: int = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos
