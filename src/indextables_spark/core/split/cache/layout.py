"""The split cache's directory layout (cache.py runs the cache): what lies where under its root, and
what a directory holds for a read.

`<root>/<sha256(uri, path, size)[:40]>/` holds one extracted split: the index files, rows.arrow and
footer.json. A split is extracted into `<root>/.tmp-<uuid>` and renamed into place: rename is
atomic, so threads and processes racing on the same split either win or find the winner's complete
directory (the loser deletes its copy). A directory leaves the same way: renamed to
`<root>/.trash-<uuid>`, then deleted, so nobody sees a half-deleted split. `<root>/.locks/` holds
the fetch locks (locks.py).

A directory may hold only part of a remote split's index (sparse.py: what a query reads of it) or,
for a split the reference implementation wrote, term dictionaries transcoded only as reads needed
them (reference/native.py); `complete` tells whether it holds what a read needs.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from indextables_spark.core.split.cache import open_splits
from indextables_spark.core.split.cache import sparse as _sparse
from indextables_spark.core.split.cache.fetch_plan import IndexQuery, IndexRead
from indextables_spark.core.split.format.bundle import FOOTER_FILE
from indextables_spark.core.split.reference import native
from indextables_spark.core.storage.base import Storage
from indextables_spark.expr.search_query import SearchQuery

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile

STALE_TMP_SECONDS = 3600.0  # temp extractions older than this are leftovers of dead processes
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"


@dataclass(frozen=True)
class IndexNeed:
    """What a read needs of a split's index (SplitCache.local_dir): only what `query` reads (None:
    everything), only its term lookups with `postings` False, and for a reference split the term
    dictionaries of `reads` (its query and filter columns; None: any)."""

    query: IndexQuery | None = None
    postings: bool = True
    reads: native.Reads | None = None

    def native_read(self) -> tuple[SearchQuery | None, native.Reads | None]:
        """(query, reads) of the read for a reference split (native.py): an IndexRead's filter
        columns join the columns of `reads`."""
        if not isinstance(self.query, IndexRead):
            return self.query, self.reads
        asked, columns = self.reads if self.reads is not None else (self.query.query, ())
        return self.query.query, (asked, tuple(sorted({*columns, *self.query.columns})))


EVERYTHING = IndexNeed()


def cache_key(storage: Storage, add_file: AddFile) -> str:
    """The name of a split's directory: its storage, path and size hashed."""
    ident = f"{storage.uri}\0{add_file.path}\0{add_file.size}".encode("utf-8")
    return hashlib.sha256(ident).hexdigest()[:40]


def is_ready(final: str) -> bool:
    """Whether a split's directory is in place (whole, or partly fetched: `complete`)."""
    return os.path.isdir(final)


def complete(final: str, need: IndexNeed) -> bool:
    """Whether an extracted directory holds what a read needs: the index bytes (sparse.py) and, for
    a reference split, FST term dictionaries (native.py)."""
    text, native_reads = need.native_read()
    return _sparse.satisfies(final, need.query, need.postings) and native.satisfies(
        final, text, need.postings, native_reads
    )


def generation(final: str) -> tuple[int, int]:
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


def dir_size(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total


def is_leftover(name: str) -> bool:
    """A temp extraction or a trashed directory (of this process or another) under the root."""
    return name.startswith((TMP_PREFIX, TRASH_PREFIX))


def new_tmp(root: str) -> str:
    """A new empty directory under the root to extract a split into (then `publish` it)."""
    tmp = os.path.join(root, f"{TMP_PREFIX}{uuid.uuid4().hex}")
    os.makedirs(tmp)
    return tmp


def publish(tmp: str, final: str) -> None:
    """Rename an extraction into place; when another thread or process put the same split there
    first, delete this copy."""
    try:
        os.rename(tmp, final)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY) and os.path.isdir(final):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            raise


def discard(root: str, final: str) -> bool:
    """Remove a split's directory (renamed to the trash first: atomic) and drop this process's
    handles open on it; False when it was gone already (another process removed it first)."""
    trash = os.path.join(root, f"{TRASH_PREFIX}{uuid.uuid4().hex}")
    try:
        os.rename(final, trash)
    except FileNotFoundError:
        return False
    open_splits.forget(final)
    shutil.rmtree(trash, ignore_errors=True)
    return True
