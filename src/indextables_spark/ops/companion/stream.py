"""A companion index that follows its source: `BUILD INDEXTABLES COMPANION … AT LOCATION '…'
WITH STREAMING POLL INTERVAL n SECONDS|MINUTES [MAX ITERATIONS n]` and `it.start_companion_sync`.

The loop runs in a thread of the process that starts it (the Spark driver of a classic session, the
client of a Connect session, any Python process without Spark); with a session the indexing of each
sync is a Spark job, as for one BUILD. Each poll:

1. probes the source's newest version (Delta: its log only, no file list; Iceberg and Parquet have no
   cheap probe and go to step 2 every poll), and does nothing when it is the version synced last;
2. otherwise runs build_companion (ops/companion/build.py), the incremental sync: the files added since
   are indexed, splits holding a file the source removed go (appends, overwrites, deletes, OPTIMIZE),
   in one commit that records the source version — or no commit when no file changed.

Resuming: the companion's metadata records the source version it holds
(`spark.indextables.companion.sourceVersion`); a sync started again reads it and continues from
there (a probe that finds that version commits nothing). Stopping (`stop()`, MAX ITERATIONS, Ctrl+C
during the SQL form) happens between polls: a sync under way finishes, committed or not at all.
Errors stop the sync, raised by `await_termination()` (the SQL form raises it) naming the source,
its version and the companion; transient storage errors are retried first, with IndexTables4Spark's
backoff, up to `spark.indextables.companion.stream.maxConsecutiveErrors` (10) in a row
(StreamingCompanionManager.scala). A commit conflict is not retried here: the build plans the sync
again itself, under the commit policy (core/log/commit/policy.py), and a conflict that reaches the
loop has spent that budget.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from indextables_spark.config.options import Options
from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import (
    CompanionSourceError,
    InvalidOptionError,
    StorageError,
)

if TYPE_CHECKING:
    from indextables_spark.ops.companion.arguments import CompanionArguments
    from indextables_spark.ops.command import CommandParser, Context
    from indextables_spark.results.maintenance import CompanionBuildResult

log = logging.getLogger(__name__)

MAX_ERRORS_KEY = "companion.stream.maxConsecutiveErrors"
_UNITS = {"MILLISECOND": 0.001, "MILLISECONDS": 0.001, "SECOND": 1.0, "SECONDS": 1.0, "MINUTE": 60.0, "MINUTES": 60.0}
_RECENT = 100  # results kept by a handle (recent_progress)


def parse_streaming(p: CommandParser) -> dict[str, Any]:
    """After WITH: `STREAMING POLL INTERVAL n SECONDS|MINUTES` (the reference's clause; here also
    fractions and MILLISECONDS) and our `MAX ITERATIONS n` (stop after n polls)."""
    p.expect("STREAMING")
    p.expect("POLL")
    p.expect("INTERVAL")
    t = p.next()
    n = float(t.text) if t.kind == "num" and t.text.replace(".", "", 1).isdigit() else None
    if n is None:
        raise p.error(f"expected a number after WITH STREAMING POLL INTERVAL, found {t.describe()}", t)
    u = p.next()
    scale = _UNITS.get(u.value) if u.kind == "word" else None
    if scale is None:
        raise p.error(
            f"expected SECONDS, MINUTES or MILLISECONDS after POLL INTERVAL {t.text}, found {u.describe()}", u
        )
    if n <= 0:
        raise p.error("WITH STREAMING POLL INTERVAL must be positive", t)
    out: dict[str, Any] = {"streaming_poll_interval": n * scale}
    if p.accept("MAX"):
        p.expect("ITERATIONS")
        out["max_iterations"] = p.positive_int("MAX ITERATIONS")
    return out


@dataclass(frozen=True)
class CompanionSyncStatus:
    """What a streaming sync is doing (`CompanionSync.status`)."""

    table_path: str
    source_format: str
    source: str
    active: bool
    message: str  # starting | waiting | syncing | stopped | failed
    polls: int  # polls run, those that found nothing new included
    syncs: int  # polls that committed a version
    source_version: int | None  # the newest source version a poll saw (Delta, Iceberg)
    synced_version: int | None  # the source version the companion holds
    files_indexed: int = 0  # over all syncs of this run
    splits_added: int = 0
    splits_removed: int = 0
    consecutive_errors: int = 0
    error: str | None = None


class CompanionSync:
    """A running streaming sync, shaped like a Spark StreamingQuery: `stop()`,
    `await_termination(timeout)`, `is_active`, `status`, `last_progress` / `recent_progress` (the
    CompanionBuildResult of each poll that ran a sync), `exception()`; a context manager that stops
    it on exit."""

    def __init__(
        self,
        *,
        location: str,
        fmt: str,
        source: str,
        build: Callable[[], CompanionBuildResult],
        probe: Callable[[], int | None],
        recorded: Callable[[], int | None],
        interval: float,
        max_iterations: int | None = None,
        max_errors: int = 10,
    ) -> None:
        self.location, self.format, self.source = location, fmt, source
        self._build, self._probe, self._recorded = build, probe, recorded
        self._interval, self._max_iterations, self._max_errors = interval, max_iterations, max(1, max_errors)
        self._stop = threading.Event()
        self._done = threading.Event()
        self._recent: deque[CompanionBuildResult] = deque(maxlen=_RECENT)
        self._lock = threading.Lock()
        self._polls = self._syncs = self._errors = 0
        self._files = self._added = self._removed = 0
        self._seen: int | None = None  # the source version the last sync (or the companion) holds
        self._synced: int | None = None
        self._awaited = False  # await_termination was called: it raises the error, no log needed
        self._latest: int | None = None
        self._message = "starting"
        self._error: BaseException | None = None
        self._wait = interval
        self._thread = threading.Thread(target=self._run, name=f"companion-sync {redact_uri(location)}", daemon=True)

    def start(self) -> CompanionSync:
        self._thread.start()
        return self

    # -- the handle -------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return not self._done.is_set()

    @property
    def status(self) -> CompanionSyncStatus:
        with self._lock:
            return CompanionSyncStatus(
                self.location,
                self.format,
                self.source,
                self.is_active,
                self._message,
                self._polls,
                self._syncs,
                self._latest,
                self._synced,
                self._files,
                self._added,
                self._removed,
                self._errors,
                None if self._error is None else str(self._error),
            )

    @property
    def synced_version(self) -> int | None:
        """The source version the companion holds (recorded in its metadata)."""
        return self._synced

    @property
    def last_progress(self) -> CompanionBuildResult | None:
        with self._lock:
            return self._recent[-1] if self._recent else None

    @property
    def recent_progress(self) -> list[CompanionBuildResult]:
        with self._lock:
            return list(self._recent)

    def exception(self) -> BaseException | None:
        return self._error

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the poll under way (its sync commits or writes nothing); waits for it unless
        called from the sync's own thread."""
        self._stop.set()
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout)

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the sync stops (stop(), MAX ITERATIONS, an error); True when it has. Raises
        the error that stopped it."""
        self._awaited = True
        done = self._done.wait(timeout)
        if done and self._error is not None:
            raise self._error
        return done

    def __enter__(self) -> CompanionSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        s = self.status
        return f"CompanionSync({s.source_format} {redact_uri(s.source)} -> {redact_uri(s.table_path)}: {s.message})"

    # -- the loop ---------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._seen = self._synced = self._recorded()
            if self._seen is not None:
                log.info("companion sync of %s resumes from source version %s", redact_uri(self.location), self._seen)
            while not self._stop.is_set():
                self._poll()
                if self._max_iterations is not None and self._polls >= self._max_iterations:
                    break
                self._message = "waiting"
                if self._stop.wait(self._wait):
                    break
        except BaseException as e:  # handed to await_termination
            self._error = e
            if not self._awaited:  # nobody waits to be told (await_termination raises it)
                log.error("%s", e)
        finally:
            self._message = "failed" if self._error is not None else "stopped"
            self._done.set()

    def _poll(self) -> None:
        with self._lock:
            self._polls += 1
        try:
            latest = self._probe()
            self._latest = latest if latest is not None else self._latest
            if latest is not None and latest == self._seen:
                self._errors, self._wait = 0, self._interval
                log.debug("companion sync of %s: source version %s, nothing new", redact_uri(self.location), latest)
                return  # nothing new: no sync, no commit
            self._message = "syncing"
            result = self._build()
        except Exception as e:
            if not _transient(e) or self._errors + 1 >= self._max_errors:
                raise self._stopped_by(e) from e
            self._errors += 1
            # IndexTables4Spark's backoff: interval * 2^errors, at most 10 intervals
            self._wait = min(self._interval * 2.0**self._errors, self._interval * 10)
            log.warning(
                "companion sync of %s: poll %d failed (%d/%d in a row), retrying in %.1f s: %s",
                redact_uri(self.location),
                self._polls,
                self._errors,
                self._max_errors,
                self._wait,
                e,
            )
            return
        self._errors, self._wait = 0, self._interval
        with self._lock:
            self._seen = result.source_version
            if result.source_version is not None:  # the version the build opened (Iceberg: a snapshot id)
                self._latest = result.source_version
            if result.version is not None:  # committed
                self._synced = result.source_version
                self._syncs += 1
                self._files += result.files_indexed
                self._added += result.splits_added
                self._removed += result.splits_removed
            self._recent.append(result)
        if result.version is not None:
            log.info(
                "companion sync of %s: %s table %s synced at version %s (%d files indexed, %d splits added, %d removed)",
                redact_uri(self.location),
                self.format,
                redact_uri(self.source),
                result.source_version,
                result.files_indexed,
                result.splits_added,
                result.splits_removed,
            )

    def _stopped_by(self, e: BaseException) -> CompanionSourceError:
        at = "its newest version" if self._latest is None else f"version {self._latest}"
        held = "nothing of this source yet" if self._synced is None else f"source version {self._synced}"
        return CompanionSourceError(
            f"streaming sync of the companion index at {redact_uri(self.location)} stopped on {self.format} table "
            f"{redact_uri(self.source)} at {at} (the companion holds {held}) after {self._polls} polls: "
            f"{type(e).__name__}: {e}"
        )


def _transient(e: BaseException) -> bool:
    """Errors a later poll may not meet again: storage I/O (conflicts were retried by the build)."""
    return isinstance(e, StorageError) or (
        isinstance(e, OSError) and not isinstance(e, (FileNotFoundError, PermissionError))
    )


def start_sync(
    build: Callable[[CompanionArguments], CompanionBuildResult],
    args: CompanionArguments,
    *,
    poll_interval: float = 5.0,
    max_iterations: int | None = None,
) -> CompanionSync:
    """it.start_companion_sync (ops/companion/build.py passes its build): keep the companion index
    at `args.location` of `args.source` in sync, polling every `poll_interval` seconds in a
    background thread, until `stop()` (or `max_iterations` polls, or an error); each sync is
    `build(args)`. Returns the running CompanionSync; block with `.await_termination()`."""
    import functools  # lazy, as every import below: a sync loads what it needs when it starts

    from indextables_spark.config.sessions import with_session_options  # lazy: see above
    from indextables_spark.core.storage import normalize_uri  # lazy: see above
    from indextables_spark.ops.companion.sources import FORMATS, latest_version  # lazy: see above

    fmt = str(args.format).lower()
    if fmt not in FORMATS:
        raise InvalidOptionError(f"companion source format {args.format!r} is not one of {', '.join(FORMATS)}")
    if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)) or poll_interval <= 0:
        raise InvalidOptionError(f"the poll interval must be a positive number of seconds, got {poll_interval!r}")
    if max_iterations is not None and (not isinstance(max_iterations, int) or max_iterations < 1):
        raise InvalidOptionError(f"max_iterations must be a whole number of at least 1, got {max_iterations!r}")
    source, location = args.source, args.location
    if fmt != "iceberg" or args.catalog is None:
        source = normalize_uri(source)
    opts = Options.of(with_session_options(args.spark, args.options))
    return CompanionSync(
        location=location,
        fmt=fmt,
        source=source,
        build=functools.partial(build, args),
        probe=lambda: latest_version(fmt, source, options=opts),
        recorded=lambda: recorded_version(location, opts, fmt, source, args.catalog is not None),
        interval=float(poll_interval),
        max_iterations=max_iterations,
        max_errors=opts.get_int(MAX_ERRORS_KEY, 10),
    ).start()


def recorded_version(location: str, opts: Options, fmt: str, source: str, named: bool) -> int | None:
    """The source version the companion at `location` records, when it is this source's companion
    (`named`: an Iceberg table named in a catalog)."""
    from indextables_spark.core.log.maintenance.shared_logs import log_with_maintenance  # lazy: see start_sync
    from indextables_spark.core.split.format.companion import CONFIG_VERSION, companion_of  # lazy: see above
    from indextables_spark.core.storage import open_storage  # lazy: see above
    from indextables_spark.ops.companion.sources.locations import is_companion_of  # lazy: see above

    table_log = log_with_maintenance(open_storage(location, opts), opts)
    v = table_log.latest_version()
    if v < 0:
        return None
    config = table_log.snapshot(v).metadata_action.configuration
    text = config.get(CONFIG_VERSION)
    return int(text) if text and is_companion_of(companion_of(config), fmt, source, named) else None


class StreamingCommand(Protocol):
    """What run_streaming reads of ops/companion/build.py's BuildCompanion (which imports this module)."""

    @property
    def dry_run(self) -> bool: ...
    @property
    def from_version(self) -> int | None: ...
    @property
    def from_snapshot(self) -> int | None: ...
    @property
    def streaming_poll_interval(self) -> float | None: ...
    @property
    def max_iterations(self) -> int | None: ...
    def arguments(self, ctx: Context) -> CompanionArguments: ...


def run_streaming(
    cmd: StreamingCommand, ctx: Context, build: Callable[[CompanionArguments], CompanionBuildResult]
) -> list[CompanionBuildResult]:
    """The SQL form (`cmd`: a BuildCompanion): runs until stopped (MAX ITERATIONS; Ctrl+C / a notebook's interrupt stops it
    after the poll under way, then is raised again); returns the result of each sync that committed
    (the last 100)."""
    if cmd.dry_run:
        raise InvalidOptionError("WITH STREAMING is not compatible with DRY RUN")
    if cmd.from_version is not None or cmd.from_snapshot is not None:
        raise InvalidOptionError(
            "WITH STREAMING follows the source's newest version: FROM VERSION / FROM SNAPSHOT cannot be given with it"
        )
    if cmd.streaming_poll_interval is None:
        raise InvalidOptionError(
            "MAX ITERATIONS (--max-iterations) bounds a streaming sync: give WITH STREAMING POLL INTERVAL "
            "(--streaming-poll-interval) too"
        )
    handle = start_sync(
        build, cmd.arguments(ctx), poll_interval=cmd.streaming_poll_interval, max_iterations=cmd.max_iterations
    )
    try:
        handle.await_termination()
    except KeyboardInterrupt:
        handle.stop()
        raise
    return [r for r in handle.recent_progress if r.version is not None]
