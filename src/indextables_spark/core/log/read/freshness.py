"""How fresh a reader's view of a table's log must be: `read.stalenessLimit`, and the commits this
process made per table location (a listing older than the latest of them is never reused, so the
process sees its own writes at once, through any TransactionLog of the table)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from indextables_spark.config.options import Options
from indextables_spark.core.log.read.listing import LogListing
from indextables_spark.core.log.model.paths import LOG_DIR
from indextables_spark.core.storage import Storage
from indextables_spark.errors import InvalidOptionError

_COMMITS: dict[str, int] = {}
_COMMITS_LOCK = threading.Lock()


def _location(storage: Storage) -> str:
    return storage.uri.rstrip("/")


def note_commit(storage: Storage) -> None:
    """A commit of this process to the table at storage's location."""
    with _COMMITS_LOCK:
        key = _location(storage)
        _COMMITS[key] = _COMMITS.get(key, 0) + 1


def commits(storage: Storage) -> int:
    """How many commits this process made to the table at storage's location."""
    return _COMMITS.get(_location(storage), 0)


def staleness_limit_ms(options: Options) -> int:
    """`read.stalenessLimit` in milliseconds (0: reads of the latest version always list)."""
    ms = options.get_duration_ms("read.stalenessLimit")
    if ms < 0:
        raise InvalidOptionError(f"option 'spark.indextables.read.stalenessLimit': must be >= 0, got {ms}ms")
    return ms


@dataclass(frozen=True)
class Listed:
    """A listing of a table's log, with when it started (time.monotonic()) and this process's
    commits to the table by then."""

    listing: LogListing
    started: float
    commits: int

    @classmethod
    def start(cls, storage: Storage) -> tuple[float, int]:
        return time.monotonic(), commits(storage)

    def reusable(self, storage: Storage, limit_ms: int) -> bool:
        """May a read of the latest version reuse it? While younger than limit_ms, with no commit of
        this process since, and on object stores only (a local listing costs less than this)."""
        if limit_ms <= 0 or (time.monotonic() - self.started) * 1000 >= limit_ms:
            return False
        return self.commits == commits(storage) and storage.local_path(LOG_DIR) is None
