"""Local disk cache of extracted splits (Tantivy needs a writable local directory to open one).
(Over 500 lines on purpose: fetching, publishing, flushing and evicting are one job sharing one
set of locks and bookkeeping; split apart, each piece would reach into the others' state.)

Layout: `<root>/<sha256(uri, path, size)[:40]>/` holding the index files, rows.arrow and
footer.json. A split is extracted into `<root>/.tmp-<uuid>` and renamed into place: rename is
atomic, so threads and processes racing on the same split either win or find the winner's
complete directory (the loser deletes its copy). Local storages are extracted straight from the
split file with ranged copies; remote ones are downloaded once, extracted, and the download
deleted.

Once per machine: threads of a process wait on a per-split lock, and processes sharing the root
(the Python workers of an executor) on an advisory file lock (`fcntl.flock`, one of
LOCK_STRIPES files under `<root>/.locks/` chosen by the split's key), so the first one downloads
and the others find the directory. A process that dies releases its lock; where flock is not
available the rename race above still keeps the cache correct (a split may then be fetched twice).

Size bound: option `cache.disk.maxSize` (default 10G), lowered so that the cache's file system
keeps `cache.disk.minFreeSpace` (default 2G) free for everything else on the disk (spill, other
tables, other caches); least recently used directories (by modification time, refreshed on each
use) are evicted, never one this process has open (cached
handles, live SplitReader objects, or handed out by local_dir in the last GRACE_SECONDS).
Root: option `cache.disk.path`, else `$TMPDIR/indextables-cache`.
A split the reference implementation wrote is extracted as it is (reference/native.py), with the
term dictionaries the first read needs transcoded to FSTs; a later read that needs more completes
the directory the way a sparse one is completed (`_complete`, `_present`).
The row store is kept uncompressed in the cache (option `cache.rows.uncompressed`, default true):
reads memory-map it and take rows without decompressing whole batches.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from typing import Any, Iterator

from indextables_spark.config.options import Options
from indextables_spark.config.registry import registered_default
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.split.cache import open_splits
from indextables_spark.core.split.cache import sparse as _sparse
from indextables_spark.core.split.cache.fetch_plan import IndexQuery, IndexRead
from indextables_spark.expr.search_query import SearchQuery
from indextables_spark.core.split.cache.lazy_rows import RowSource
from indextables_spark.core.split.cache.lazy_rows import register as register_rows
from indextables_spark.core.split.format.bundle import (
    FOOTER_FILE,
    ROWS_NAME,
    RangeSource,
    SplitFooter,
    extract,
    load_extracted_footer,
    uncompress_rows,
)
from indextables_spark.core.split.reference import native, quickwit
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import FileNotFoundInStorageError, InvalidOptionError, SplitFormatError

DEFAULT_MAX_BYTES = registered_default("cache.disk.maxSize")
DEFAULT_MIN_FREE_BYTES = registered_default("cache.disk.minFreeSpace")
DEFAULT_LAZY_MIN_BYTES = registered_default("cache.rows.lazyMinSplitSize")
DEFAULT_PARTIAL_MIN_BYTES = registered_default("cache.index.partialMinSplitSize")
GRACE_SECONDS = 300.0  # a directory handed out recently counts as in use
# A split whose index this process has open and whose directory was checked (and its mtime
# refreshed) less than this ago is handed out without touching the disk again: a search of a
# table of many splits otherwise pays a hash, two stats and a utime per split and query.
RECHECK_SECONDS = 10.0
MAX_KNOWN = 100_000  # (uri, path, size) -> directory entries kept for that fast path
STALE_TMP_SECONDS = 3600.0  # temp extractions older than this are leftovers of dead processes
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
_LOCK_DIR = ".locks"  # lock files of the cross-process fetch lock (never evicted)
LOCK_STRIPES = 256

# What a read asks of a split's index besides a `query` promise (local_dir): its query (with the
# struct-field narrowing) and the columns whose filters or snippets it answers (ReadPlan.index_reads). Only a reference split
# uses it (the term dictionaries it transcodes, reference/native.py); None: anything.
Reads = native.Reads

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]


def _dir_size(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total


def cache_key(storage: Storage, add_file: Any) -> str:
    ident = f"{storage.uri}\0{add_file.path}\0{add_file.size}".encode("utf-8")
    return hashlib.sha256(ident).hexdigest()[:40]


def _stat_size(storage: Storage, key: str, where: str) -> int:
    info = storage.stat(key)
    if info is None:
        raise FileNotFoundInStorageError(f"split file not found: {where}")
    return info.size


class SplitCache:
    def __init__(self, root: str, max_bytes: int = DEFAULT_MAX_BYTES):
        self.root = os.path.abspath(root)
        self.max_bytes = max_bytes
        self.min_free_bytes = DEFAULT_MIN_FREE_BYTES  # option cache.disk.minFreeSpace
        os.makedirs(self.root, exist_ok=True)
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._sizes: dict[str, int] = {}
        self._decoded: set[str] = set()  # directories counted with their decoded rows (native.DECODED_ROWS)
        self._recent: dict[str, float] = {}
        self.grace_seconds = GRACE_SECONDS
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
        self.evictions = 0  # directories this process evicted
        self._known: dict[tuple[str, str, Any], str] = {}  # (uri, path, size) -> directory
        self._checked: dict[str, float] = {}  # directory -> time of its last full check (local_dir)
        # directory with index bytes left out (sparse.py) -> (query, postings) it was checked to answer
        self._partial: dict[str, set[tuple[IndexQuery | None, bool, Reads | None]]] = {}
        self._inodes: dict[str, tuple[int, int]] = {}  # directory -> which extraction of it was last seen

    # -- public --------------------------------------------------------------------------------

    def local_dir(
        self,
        storage: Storage,
        add_file: Any,
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
        final = self._open_dir(storage, add_file, query, postings, reads)
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
        self._present(storage, add_file, key, final, query, postings, reads)
        if not self._registered(storage, add_file, final):
            # evicted by another process between the check and now: fetch it again
            self._present(storage, add_file, key, final, query, postings, reads)
            self._register_rows(storage, add_file, final)
        partial = not _complete(final, None)
        ino = _generation(final)
        with self._lock:
            if self._inodes.get(final, ino) != ino:
                # made anew by another process since this one opened it (possibly with other
                # parts of the index files): drop the handles open on the old files
                open_splits.forget(final)
                self._partial.pop(final, None)
            self._inodes[final] = ino
            if partial:
                self._partial.setdefault(final, set()).add((query, postings, reads))
            else:
                self._partial.pop(final, None)
            if len(self._known) >= MAX_KNOWN:
                self._known.clear()
            self._known[(storage.uri, add_file.path, add_file.size)] = final
            self._checked[final] = time.time()
        return final

    def _open_dir(
        self,
        storage: Storage,
        add_file: Any,
        query: IndexQuery | None = None,
        postings: bool = True,
        reads: Reads | None = None,
    ) -> str | None:
        """The directory of a split this process has open (cached index handles) and checked
        less than RECHECK_SECONDS ago, marked used now; else None (local_dir checks the disk).
        The open handles read the split even if another process evicted the directory since."""
        final = self._known.get((storage.uri, add_file.path, add_file.size))
        if final is None or not open_splits.is_open(final):
            return None
        answers = self._partial.get(final)  # partly fetched: only for the queries checked
        # (checked for a query's search, it answers that query's term lookups too)
        if answers is not None and (query, True, reads) not in answers and (query, postings, reads) not in answers:
            return None
        now = time.time()
        with self._lock:
            if now - self._checked.get(final, 0.0) >= RECHECK_SECONDS:
                return None
            self._recent[final] = now
        return final

    def _registered(self, storage: Storage, add_file: Any, final: str) -> bool:
        """_register_rows; False when the directory is gone (another process evicted it)."""
        try:
            self._register_rows(storage, add_file, final)
        except SplitFormatError:
            if self._ready(final):
                raise
            return False
        return self._ready(final)

    def _present(
        self,
        storage: Storage,
        add_file: Any,
        key: str,
        final: str,
        query: IndexQuery | None = None,
        postings: bool = True,
        reads: Reads | None = None,
    ) -> None:
        """Make sure `final` holds the extracted split, or what `query` reads of its index (its
        term lookups with `postings` False), fetching at most once across threads and processes,
        and mark it used now."""
        if self._ready(final) and _complete(final, query, postings, reads):
            self.hits += 1
        else:
            self.misses += 1
            with self._key_lock(key), self._process_lock(key):
                if not self._ready(final):
                    self._fetch(storage, add_file, key, final, query, postings, reads)
                else:  # partly fetched for other queries: fetch the rest this one reads
                    read = lambda s, e: storage.read_range(add_file.path, s, e)  # noqa: E731
                    _sparse.ensure(final, read, query, postings)
                    # (a reference split: the dictionaries it reads transcoded; the new
                    # reference.json tells every process to reopen the index: local_dir)
                    text, native_reads = _native_read(query, reads)
                    native.ensure(final, text, postings, native_reads)
        self._touch(key, final)

    def _register_rows(self, storage: Storage, add_file: Any, final: str) -> None:
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

    def is_cached(
        self,
        storage: Storage,
        add_file: Any,
        query: IndexQuery | None = None,
        *,
        postings: bool = True,
        reads: Reads | None = None,
    ) -> bool:
        """Whether the split's directory is there, holding what `query` (and `reads`) read of the
        index (every index file without a query; its term lookups with `postings` False)."""
        if self._open_dir(storage, add_file, query, postings, reads) is not None:
            return True
        path = os.path.join(self.root, cache_key(storage, add_file))
        return self._ready(path) and _complete(path, query, postings, reads)

    def describe(self) -> dict[str, Any]:
        """Entries and bytes on disk (every process sharing the root), the limit, and this
        process's hits, misses and evictions."""
        with self._lock:
            self._rescan()
            entries, used = len(self._sizes), sum(self._sizes.values())
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
        removed = removed_bytes = kept = 0
        with self._lock:
            self._rescan()
            in_use = open_splits.dirs_being_read()
            for key in list(self._sizes):
                path = os.path.join(self.root, key)
                if path in in_use:
                    kept += 1
                    continue
                trash = os.path.join(self.root, f"{_TRASH_PREFIX}{uuid.uuid4().hex}")
                try:
                    os.rename(path, trash)
                except FileNotFoundError:
                    continue
                open_splits.forget(path)
                shutil.rmtree(trash, ignore_errors=True)
                removed += 1
                removed_bytes += self._sizes.pop(key, 0)
                self._row_sources.pop(path, None)
        return {"cachePath": self.root, "entriesRemoved": removed, "bytesRemoved": removed_bytes, "inUseKept": kept}

    def usage_bytes(self) -> int:
        with self._lock:
            self._rescan()
            return sum(self._sizes.values())

    # -- internals -----------------------------------------------------------------------------

    @staticmethod
    def _ready(final: str) -> bool:
        return os.path.isdir(final)

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    @contextlib.contextmanager
    def _process_lock(self, key: str) -> Iterator[None]:
        """Exclusive against other processes fetching a split of the same lock stripe."""
        if fcntl is None:
            yield
            return
        lock_dir = os.path.join(self.root, _LOCK_DIR)
        os.makedirs(lock_dir, exist_ok=True)
        fd = os.open(os.path.join(lock_dir, f"{int(key[:8], 16) % LOCK_STRIPES:03d}"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _touch(self, key: str, final: str) -> None:
        now = time.time()
        try:
            os.utime(final, (now, now))
        except FileNotFoundError:
            pass  # evicted by another process right now; the caller's open handles still work
        with self._lock:
            self._recent[final] = now

    def _fetch(
        self,
        storage: Storage,
        add_file: Any,
        key: str,
        final: str,
        query: IndexQuery | None = None,
        postings: bool = True,
        reads: Reads | None = None,
    ) -> None:
        tmp = os.path.join(self.root, f"{_TMP_PREFIX}{uuid.uuid4().hex}")
        os.makedirs(tmp)
        try:
            where = storage.full_uri(add_file.path)
            local = storage.local_path(add_file.path)
            lazy = self.lazy_rows == "true" or (
                self.lazy_rows == "auto" and local is None and (add_file.size or 0) >= self.lazy_min_bytes
            )
            download = os.path.join(tmp, ".download")
            footer: SplitFooter | None
            partial = (
                query is not None
                and local is None
                and (
                    self.lazy_rows == "true"
                    or (self.lazy_rows == "auto" and (add_file.size or 0) >= self.partial_min_bytes)
                )
            )
            try:
                if partial and query is not None:
                    # what the query reads of the index files, the row store later by ranges
                    size = add_file.size if add_file.size is not None else _stat_size(storage, add_file.path, where)
                    read = lambda s, e: storage.read_range(add_file.path, s, e)  # noqa: E731
                    footer = _sparse.fetch_for_query(read, size, tmp, where, query, postings)
                    lazy = True
                elif lazy:
                    # the index files whole, the row store later by ranges (lazy_rows.py)
                    size = add_file.size if add_file.size is not None else _stat_size(storage, add_file.path, where)
                    source = RangeSource(size, lambda s, e: storage.read_range(add_file.path, s, e))
                    footer = extract(source, tmp, where, rows=False)
                elif local is not None:
                    if not os.path.exists(local):
                        raise FileNotFoundInStorageError(f"split file not found: {where}")
                    footer = extract(local, tmp, where)
                else:
                    storage.download_file(add_file.path, download)
                    footer = extract(download, tmp, where)
                    os.unlink(download)
                self._check(footer, add_file, where)
            except SplitFormatError as e:
                # Not one of ours: a split the reference implementation wrote is extracted as it
                # is (reference/native.py); found only after our own trailer check failed, so
                # reading our splits costs nothing more.
                self._extract_reference(storage, add_file, where, local, download, tmp, e, query, postings, reads)
                footer = None
            if footer is not None and self.uncompressed_rows and not lazy and not footer.is_companion:
                uncompress_rows(tmp)
            self.downloads += 1
            self._publish(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        with self._lock:
            self._sizes[key] = _dir_size(final)
        self._evict(protect=final)

    def _extract_reference(
        self,
        storage: Storage,
        add_file: Any,
        where: str,
        local: str | None,
        download: str,
        tmp: str,
        error: SplitFormatError,
        query: IndexQuery | None,
        postings: bool,
        reads: Reads | None,
    ) -> None:
        """The reference split at add_file extracted into `tmp` with the term dictionaries `query`
        and `reads` read transcoded (native.extract); `error` (our format's) is raised again when
        the file is not a Quickwit bundle either."""

        path = local if local is not None else download
        if local is None and not os.path.exists(download):
            storage.download_file(add_file.path, download)
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(max(0, size - 64))
            tail = f.read()
        if not quickwit.looks_like_bundle(tail, size):
            raise error
        schema_json, partition_columns = table_schema(storage)
        # (our extract failed at the trailer check, before writing anything into tmp)
        text, native_reads = _native_read(query, reads)
        native.extract(
            path,
            tmp,
            where,
            schema_json,
            partition_columns,
            footer_start=getattr(add_file, "footer_start_offset", None),
            size=add_file.size,
            query=text,
            postings=postings,
            reads=native_reads,
        )
        if os.path.exists(download):
            os.unlink(download)

    @staticmethod
    def _publish(tmp: str, final: str) -> None:
        try:
            os.rename(tmp, final)
        except OSError as e:
            # Lost the race: another thread/process put the same split in place first.
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY) and os.path.isdir(final):
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                raise

    @staticmethod
    def _check(footer: SplitFooter, add_file: Any, where: str) -> None:
        if add_file.size is not None and footer.footer_end != add_file.size:
            raise SplitFormatError(
                f"split {where}: the log records {add_file.size} bytes but the file has "
                f"{footer.footer_end} (replaced or truncated?)"
            )
        start = getattr(add_file, "footer_start_offset", None)
        if start is not None and start != footer.footer_start:
            raise SplitFormatError(
                f"split {where}: the log records footerStartOffset {start} but the file's "
                f"footer starts at {footer.footer_start}"
            )

    def _rescan(self) -> None:
        """Sizes of every cached directory (others may be written by other processes)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            os.makedirs(self.root, exist_ok=True)
            names = []
        present = set()
        now = time.time()
        for n in names:
            path = os.path.join(self.root, n)
            if n == _LOCK_DIR:
                continue
            if n.startswith((_TMP_PREFIX, _TRASH_PREFIX)):
                try:
                    if now - os.stat(path).st_mtime > STALE_TMP_SECONDS:
                        shutil.rmtree(path, ignore_errors=True)
                except FileNotFoundError:
                    pass
                continue
            present.add(n)
            if n not in self._sizes:
                self._sizes[n] = _dir_size(path)
                if os.path.exists(os.path.join(path, native.DECODED_ROWS)):
                    self._decoded.add(n)
            elif n not in self._decoded and os.path.exists(os.path.join(path, native.DECODED_ROWS)):
                # a reference split whose document store a read decoded since (docstore.py)
                self._sizes[n] = _dir_size(path)
                self._decoded.add(n)
        for gone in set(self._sizes) - present:
            del self._sizes[gone]
        self._decoded &= present

    def limit_bytes(self, used: int) -> int:
        """The size the cache may have now: `max_bytes`, or less where the file system would keep
        under `min_free_bytes` free (`used` is what the cache holds; evicting frees it)."""
        free = shutil.disk_usage(self.root).free
        return int(max(0, min(self.max_bytes, used + free - self.min_free_bytes)))

    def _evict(self, protect: str) -> None:
        with self._lock:
            self._rescan()
            total = sum(self._sizes.values())
            limit = self.limit_bytes(total)
            if total <= limit:
                return
            now = time.time()
            in_use = open_splits.dirs_in_use() | {protect}
            in_use |= {d for d, t in self._recent.items() if now - t < self.grace_seconds}
            candidates = []
            for key in self._sizes:
                path = os.path.join(self.root, key)
                if path in in_use:
                    continue
                try:  # last use: the mtime, or this process's own later use (see _open_dir)
                    candidates.append((max(os.stat(path).st_mtime, self._recent.get(path, 0.0)), key, path))
                except FileNotFoundError:
                    continue
            for _mtime, key, path in sorted(candidates):
                if total <= limit:
                    break
                trash = os.path.join(self.root, f"{_TRASH_PREFIX}{uuid.uuid4().hex}")
                try:
                    os.rename(path, trash)  # atomic: nobody sees a half-deleted split
                except FileNotFoundError:
                    pass  # another process evicted it first
                else:
                    open_splits.forget(path)
                    shutil.rmtree(trash, ignore_errors=True)
                    self.evictions += 1
                total -= self._sizes.pop(key, 0)
                self._recent.pop(path, None)


def _complete(final: str, query: IndexQuery | None, postings: bool = True, reads: Reads | None = None) -> bool:
    """Whether an extracted directory holds what a read of `query` (and `reads`) needs (None:
    everything): the index bytes (sparse.py) and, for a reference split, FST term dictionaries
    (native.py)."""
    text, native_reads = _native_read(query, reads)
    return _sparse.satisfies(final, query, postings) and native.satisfies(final, text, postings, native_reads)


def _native_read(query: IndexQuery | None, reads: Reads | None) -> tuple[SearchQuery | None, Reads | None]:
    """(query, reads) of a read for a reference split (native.py): an IndexRead's filter columns
    join the columns of `reads`."""
    if not isinstance(query, IndexRead):
        return query, reads
    asked, columns = reads if reads is not None else (query.query, ())
    return query.query, (asked, tuple(sorted({*columns, *query.columns})))


def _generation(final: str) -> tuple[int, int]:
    """Which state of the directory this is: the inode of its footer.json (written once per
    extraction) or of a reference split's reference.json (written anew at each transcoding);
    (0, 0) when gone."""
    for name in (FOOTER_FILE, native.REFERENCE_FILE):
        try:
            st = os.stat(os.path.join(final, name))
            return (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            continue
    return (0, 0)


_caches: dict[str, SplitCache] = {}
_caches_lock = threading.Lock()


_schemas: dict[str, tuple[dict[str, Any], list[str]]] = {}
_schemas_lock = threading.Lock()


def table_schema(storage: Storage) -> tuple[dict[str, Any], list[str]]:
    """(Spark schema JSON, partition columns) of the table at the storage's root, read from its
    log's header once per process and table: a reference split's rows are typed by it.
    Columns are only ever added to a table, so the newest schema types every older split."""
    with _schemas_lock:
        hit = _schemas.get(storage.uri)
    if hit is not None:
        return hit

    _protocol, metadata, _registry = TransactionLog(storage, getattr(storage, "options", None)).header()
    out = (json.loads(metadata.schema_string), list(metadata.partition_columns))
    with _schemas_lock:
        _schemas[storage.uri] = out
    return out


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
