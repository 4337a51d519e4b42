"""The vector files of a split fetched from object storage page by page, as a vector search reads them.

A text query's fetch (sparse.py) leaves a split's vector files out: holes of their full length in
the split's cache directory. A vector search then reads from them only the compressed index
(whole, when first searched), the file's row ids, and the vectors of its candidates (a few hundred
of a split's vectors): `FilePages.ensure` fetches the PAGE-sized pages holding the ranges asked
for that the directory lacks (in parallel requests, close ones merged: sparse.write_pieces),
writes them in place and records them in `<file>.pages`, a bitmap of the pages present (one bit a
page, replaced atomically after the bytes are written: a reader that sees a page as present finds
its bytes). The bitmap, not sparse.json's list of missing ranges, says what is there: a search
touches scattered pages, which as ranges would make that list grow with every query and its
checks slower; a process keeps the bitmap it read and asks the file again only for pages it has
not seen. Fetching the split whole (sparse.ensure with no query) writes the same bytes over them.
"""

from __future__ import annotations

import os
import threading
import uuid

import numpy as np

from indextables_spark.core.split.cache import sparse
from indextables_spark.core.split.cache.locks import process_lock
from indextables_spark.core.split.format.bundle import load_extracted_footer
from indextables_spark.core.split.format.vector_index import RangeFetch, VectorIndexInfo
from indextables_spark.errors import SplitFormatError
from indextables_spark.util.ranges import Range

PAGE = 4096  # bytes: the unit fetched (a 128-d float32 vector is 512 bytes; an OS page)
PAGES_SUFFIX = ".pages"


class FilePages:
    """One file of a split cache directory, its pages fetched as reads ask for them (see the
    module docstring); `whole` when the directory held it whole when opened (nothing to fetch)."""

    def __init__(self, local_dir: str, name: str) -> None:
        self.local_dir = local_dir
        self.name = name
        self.length = os.path.getsize(os.path.join(local_dir, name))
        self.whole = not sparse.missing_ranges(local_dir, name)
        self._present: np.ndarray | None = None  # this process's copy of the bitmap
        self._lock = threading.Lock()

    def lacks(self, wanted: list[Range]) -> bool:
        """Whether some of the byte ranges may be missing: not known present by this process
        (which reads the bitmap again when it fetches)."""
        if self.whole or not wanted:
            return False
        known = self._present
        return known is None or not _covered(known, wanted, self.length)

    def ensure(self, wanted: list[Range]) -> int:
        """Make the byte ranges `wanted` present; returns the number of ranged reads made."""
        if not self.lacks(wanted):
            return 0
        pages = _pages_of(wanted, self.length)
        with self._lock:
            root, key = os.path.split(os.path.normpath(self.local_dir))
            with process_lock(root, key):  # against other threads and processes fetching this split
                present = self._read_bitmap()
                lacking = pages[~present[pages]]
                reads = self._fetch(lacking) if len(lacking) else 0
                if len(lacking):
                    present[lacking] = True
                    self._write_bitmap(present)
                self._present = present
                self.whole = bool(present.all())
        return reads

    def _fetch(self, pages: np.ndarray) -> int:
        from indextables_spark.core.split.cache.lazy_rows import source_for  # lazy: keeps this module free of pyarrow

        source = source_for(self.local_dir)
        if source is None:
            raise SplitFormatError(
                f"split {self.local_dir}: {self.name} is held in part and no storage is registered to read the rest "
                "from (open the split through the split cache)"
            )
        runs = _runs(pages, self.length)
        footer = load_extracted_footer(self.local_dir)
        return sparse.write_pieces(
            self.local_dir, footer, lambda s, e: source.storage.read_range(source.key, s, e), {self.name: runs}
        )

    def _bitmap_path(self) -> str:
        return os.path.join(self.local_dir, self.name + PAGES_SUFFIX)

    def _read_bitmap(self) -> np.ndarray:
        n = -(-self.length // PAGE)
        try:
            with open(self._bitmap_path(), "rb") as f:
                bits = np.unpackbits(np.frombuffer(f.read(), np.uint8), count=n, bitorder="little")
            if len(bits) == n:
                return bits.astype(bool)
        except FileNotFoundError:
            pass
        return np.zeros(n, bool)

    def _write_bitmap(self, present: np.ndarray) -> None:
        path = self._bitmap_path()
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            f.write(np.packbits(present, bitorder="little").tobytes())
        os.replace(tmp, path)


def _covered(present: np.ndarray, wanted: list[Range], length: int) -> bool:
    """Whether every page the byte ranges touch is present (without listing the pages)."""
    bounds = np.asarray([(s, min(e, length)) for s, e in wanted if e > s], np.int64).reshape(-1, 2)
    first, last = bounds[:, 0] // PAGE, (bounds[:, 1] - 1) // PAGE
    single = first == last
    if not bool(present[first[single]].all()):
        return False
    return all(bool(present[a : b + 1].all()) for a, b in zip(first[~single].tolist(), last[~single].tolist()))


def _pages_of(wanted: list[Range], length: int) -> np.ndarray:
    """The distinct pages (sorted) that the byte ranges touch."""
    starts = np.asarray([s for s, e in wanted if e > s], np.int64)
    ends = np.asarray([min(e, length) for s, e in wanted if e > s], np.int64)
    if not len(starts):
        return np.empty(0, np.int64)
    first, last = starts // PAGE, (ends - 1) // PAGE
    if bool((first == last).all()):
        return np.unique(first)
    return np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first.tolist(), last.tolist())]))


def _runs(pages: np.ndarray, length: int) -> list[Range]:
    """Byte ranges of these sorted pages, consecutive pages one range."""
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    out = []
    for run in np.split(pages, breaks):
        out.append((int(run[0]) * PAGE, min(length, (int(run[-1]) + 1) * PAGE)))
    return out


def page_fetch(local_dir: str, info: VectorIndexInfo) -> RangeFetch | None:
    """What a vector index of a partly fetched directory fetches its files' ranges with
    (VectorIndex.open); None when the directory holds them whole."""
    files = {n: FilePages(local_dir, n) for n in (info.file, info.vectors_file) if n}
    if all(f.whole for f in files.values()):
        return None
    return lambda name, wanted: files[name].ensure(wanted)
