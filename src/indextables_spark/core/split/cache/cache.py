"""Local disk cache of extracted splits (Tantivy needs a writable local directory to open one):
`local_dir` hands out a split's directory, fetching it at most once per machine.

Threads of a process wait on a per-split lock, and processes sharing the root (the Python workers
of an executor) on an advisory file lock (layout.py), so the first one fetches (fetch.py) and the
others find the directory. The cache is kept under its size bound by evicting the least recently
used directories (eviction.py), never one this process has open. A remote split's index may be
fetched only as far as a read needs it (sparse.py), a reference split's dictionaries transcoded
only as reads need them (reference/native.py): a later read that needs more completes the
directory. Root: option `cache.disk.path`, else `$TMPDIR/indextables-cache`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

from indextables_spark.config.options import Options
from indextables_spark.config.registry import registered_default
from indextables_spark.core.split.cache import open_splits
from indextables_spark.core.split.cache.eviction import DEFAULT_MAX_BYTES, CacheSpace
from indextables_spark.core.split.cache.fetch import FetchSettings, complete_partial, extract_split
from indextables_spark.core.split.cache.fetch_plan import IndexQuery
from indextables_spark.core.split.cache.locks import process_lock
from indextables_spark.core.split.cache.layout import (
    EVERYTHING,
    IndexNeed,
    cache_key,
    complete,
    generation,
    is_ready,
    new_tmp,
    publish,
)
from indextables_spark.core.split.cache.lazy_rows import RowSource
from indextables_spark.core.split.cache.lazy_rows import register as register_rows
from indextables_spark.core.split.format.bundle import ROWS_NAME, load_extracted_footer
from indextables_spark.core.split.reference import native
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import InvalidOptionError, SplitFormatError

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile

DEFAULT_LAZY_MIN_BYTES = registered_default("cache.rows.lazyMinSplitSize")
DEFAULT_PARTIAL_MIN_BYTES = registered_default("cache.index.partialMinSplitSize")
# A split whose index this process has open and whose directory was checked (and its mtime
# refreshed) less than this ago is handed out without touching the disk again: a search of a
# table of many splits otherwise pays a hash, two stats and a utime per split and query.
RECHECK_SECONDS = 10.0
MAX_KNOWN = 100_000  # (uri, path, size) -> directory entries kept for that fast path

# What a read asks of a split's index besides a `query` promise (local_dir): its query (with the
# struct-field narrowing) and the columns whose filters or snippets it answers (ReadPlan.index_reads). Only a reference split
# uses it (the term dictionaries it transcodes, reference/native.py); None: anything.
Reads = native.Reads


class SplitCache(CacheSpace):
    def __init__(self, root: str, max_bytes: int = DEFAULT_MAX_BYTES):
        super().__init__(root, max_bytes)
        self._key_locks: dict[str, threading.Lock] = {}
        self.uncompressed_rows = True  # option cache.rows.uncompressed (see bundle.uncompress_rows)
        # option cache.rows.lazy: "auto" reads the row store of remote splits by ranges
        # (lazy_rows.py), "true" of every split, "false" of none (extracted whole)
        self.lazy_rows = "auto"
        self.lazy_min_bytes = DEFAULT_LAZY_MIN_BYTES  # option cache.rows.lazyMinSplitSize
        self.partial_min_bytes = DEFAULT_PARTIAL_MIN_BYTES  # option cache.index.partialMinSplitSize
        self._row_sources: dict[str, tuple[int, int] | None] = {}  # final dir -> rows (offset, length)
        self.downloads = 0  # splits this process fetched (observability, tests)
        self.hits = 0  # local_dir calls that found the split cached
        self.misses = 0  # local_dir calls that fetched it (this process or a racing one)
        self._known: dict[tuple[str, str, int], str] = {}  # (uri, path, size) -> directory
        self._checked: dict[str, float] = {}  # directory -> time of its last full check (local_dir)
        # directory with index bytes left out (sparse.py) -> the needs it was checked to answer
        self._partial: dict[str, set[IndexNeed]] = {}
        self._inodes: dict[str, tuple[int, int]] = {}  # directory -> which extraction of it was last seen

    # -- public --------------------------------------------------------------------------------

    def local_dir(
        self,
        storage: Storage,
        add_file: AddFile,
        query: IndexQuery | None = None,
        *,
        postings: bool = True,
        reads: Reads | None = None,
    ) -> str:
        """A local directory holding the extracted split (downloaded and extracted at most once).
        With `query` (a SearchQuery), the caller promises to run only that query against the index
        (an IndexRead: that query, or none, and filters on those columns; nothing else): a remote
        split's index files may then hold only what it reads (sparse.py), and are completed when
        a later caller needs more. With `postings` False,
        only looking up the document frequencies of its scored terms (corpus statistics). With
        `reads`, the caller promises to ask the index only that query (with its narrowing) and those columns'
        filters: a reference split transcodes only their term dictionaries (reference/native.py)."""
        need = IndexNeed(query, postings, reads)
        final = self._open_dir(storage, add_file, need)
        if final is not None:
            self.hits += 1
            return final
        key = cache_key(storage, add_file)
        final = os.path.join(self.root, key)
        # Marked recent before the check: from then on this process's evictions (another thread
        # fetching a split into a full cache) keep it, so it cannot vanish between the check and
        # the caller opening it.
        with self._lock:
            self._recent[final] = time.time()
        self._present(storage, add_file, key, final, need)
        if not self._registered(storage, add_file, final):
            # evicted by another process between the check and now: fetch it again
            self._present(storage, add_file, key, final, need)
            self._register_rows(storage, add_file, final)
        partial = not complete(final, EVERYTHING)
        ino = generation(final)
        with self._lock:
            if self._inodes.get(final, ino) != ino:
                # made anew by another process since this one opened it (possibly with other
                # parts of the index files): drop the handles open on the old files
                open_splits.forget(final)
                self._partial.pop(final, None)
            self._inodes[final] = ino
            if partial:
                self._partial.setdefault(final, set()).add(need)
            else:
                self._partial.pop(final, None)
            if len(self._known) >= MAX_KNOWN:
                self._known.clear()
            self._known[(storage.uri, add_file.path, add_file.size)] = final
            self._checked[final] = time.time()
        return final

    def is_cached(
        self,
        storage: Storage,
        add_file: AddFile,
        query: IndexQuery | None = None,
        *,
        postings: bool = True,
        reads: Reads | None = None,
    ) -> bool:
        """Whether local_dir would hand out the split's directory without fetching: it is there,
        holding what `query` (and `reads`) read of the index (every index file without a query;
        its term lookups with `postings` False)."""
        need = IndexNeed(query, postings, reads)
        if self._open_dir(storage, add_file, need) is not None:
            return True
        path = os.path.join(self.root, cache_key(storage, add_file))
        return is_ready(path) and complete(path, need)

    def describe(self) -> dict[str, Any]:
        """Entries and bytes on disk (every process sharing the root), the limit, and this
        process's hits, misses and evictions."""
        entries, used = self.usage()
        return {
            "cachePath": self.root,
            "entries": entries,
            "bytes": used,
            "limit": self.limit_bytes(used),
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
        }

    def flush(self) -> dict[str, Any]:
        """Remove every cached split no reader of this process reads right now (their cached
        handles are dropped): FLUSH INDEXTABLES DISK CACHE."""
        removed, removed_bytes, kept = self._remove_unread()
        with self._lock:
            for path in removed:
                self._row_sources.pop(path, None)
        return {
            "cachePath": self.root,
            "entriesRemoved": len(removed),
            "bytesRemoved": removed_bytes,
            "inUseKept": kept,
        }

    # -- handing out -----------------------------------------------------------------------------

    def _open_dir(self, storage: Storage, add_file: AddFile, need: IndexNeed) -> str | None:
        """The directory of a split this process has open (cached index handles) and checked
        less than RECHECK_SECONDS ago, marked used now; else None (local_dir checks the disk).
        The open handles read the split even if another process evicted the directory since."""
        final = self._known.get((storage.uri, add_file.path, add_file.size))
        if final is None or not open_splits.is_open(final):
            return None
        answers = self._partial.get(final)  # partly fetched: only for the needs checked
        # (checked for a query's search, it answers that query's term lookups too)
        if answers is not None and IndexNeed(need.query, True, need.reads) not in answers and need not in answers:
            return None
        now = time.time()
        with self._lock:
            if now - self._checked.get(final, 0.0) >= RECHECK_SECONDS:
                return None
            self._recent[final] = now
        return final

    def _present(self, storage: Storage, add_file: AddFile, key: str, final: str, need: IndexNeed) -> None:
        """Make sure `final` holds the extracted split, or what `need` reads of its index,
        fetching at most once across threads and processes, and mark it used now."""
        if is_ready(final) and complete(final, need):
            self.hits += 1
        else:
            self.misses += 1
            with self._key_lock(key), process_lock(self.root, key):
                if not is_ready(final):
                    self._fetch(storage, add_file, key, final, need)
                else:  # partly fetched for other reads: fetch the rest this one reads
                    complete_partial(storage, add_file, final, need)
        self._mark_used(final)

    def _registered(self, storage: Storage, add_file: AddFile, final: str) -> bool:
        """_register_rows; False when the directory is gone (another process evicted it)."""
        try:
            self._register_rows(storage, add_file, final)
        except SplitFormatError:
            if is_ready(final):
                raise
            return False
        return is_ready(final)

    def _register_rows(self, storage: Storage, add_file: AddFile, final: str) -> None:
        """Tell lazy_rows where the row store of a directory extracted without it lies (every
        time: the directory may have been made by another process)."""
        with self._lock:
            known = final in self._row_sources
            rows = self._row_sources.get(final)
        if not known:
            rows = None
            if not os.path.exists(os.path.join(final, ROWS_NAME)) and not native.is_reference_dir(final):
                footer = load_extracted_footer(final)
                rows = (footer.rows.offset, footer.rows.length)
            with self._lock:
                self._row_sources[final] = rows
        if rows is not None:
            register_rows(final, RowSource(storage, add_file.path, rows[0], rows[1]))

    # -- fetching ------------------------------------------------------------------------------

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _fetch(self, storage: Storage, add_file: AddFile, key: str, final: str, need: IndexNeed) -> None:
        tmp = new_tmp(self.root)
        try:
            how = FetchSettings(self.lazy_rows, self.lazy_min_bytes, self.partial_min_bytes, self.uncompressed_rows)
            extract_split(storage, add_file, tmp, how, need)
            self.downloads += 1
            publish(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._count(key, final)
        self._evict(protect=final)


_caches: dict[str, SplitCache] = {}
_caches_lock = threading.Lock()


def cache_root(options: Options | None) -> str:
    opts = options if isinstance(options, Options) else Options.of(options)
    return os.path.abspath(opts.get_str("cache.disk.path") or os.path.join(tempfile.gettempdir(), "indextables-cache"))


def get_cache(options: Options | dict[str, Any] | None = None) -> SplitCache:
    """The process-wide cache for the configured root (max size follows the latest options)."""
    opts = options if isinstance(options, Options) else Options.of(options)
    root = cache_root(opts)
    max_bytes = opts.get_size("cache.disk.maxSize")
    with _caches_lock:
        cache = _caches.get(root)
        if cache is None:
            cache = _caches[root] = SplitCache(root, max_bytes)
        else:
            cache.max_bytes = max_bytes
        cache.min_free_bytes = opts.get_size("cache.disk.minFreeSpace")
        cache.uncompressed_rows = opts.get_bool("cache.rows.uncompressed")
        lazy = (opts.get_str("cache.rows.lazy") or "auto").strip().lower()
        if lazy not in ("auto", "true", "false"):
            raise InvalidOptionError(f"option cache.rows.lazy={lazy!r}: expected auto, true or false")
        cache.lazy_rows = lazy
        cache.lazy_min_bytes = opts.get_size("cache.rows.lazyMinSplitSize")
        cache.partial_min_bytes = opts.get_size("cache.index.partialMinSplitSize")
        return cache
