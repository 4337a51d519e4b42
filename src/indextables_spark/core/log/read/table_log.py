"""The transaction log of one table: version files, snapshots, time travel.

Snapshots start from the newest usable checkpoint/state at or below the wanted version (see
`state_loader`) and replay the version files after it.

Round trips: opening a table lists `_transaction_log/` while it reads `_last_checkpoint` (one round
trip), then reads the state manifest (or JSON checkpoint) while it reads the version files after
it (one more), then the state's manifests: three dependent rounds for a table with a state, two
without one.

Freshness: a read of the latest version normally lists the log. Reads that accept it (`stale_ok`:
IndexTable's) reuse this log's last listing while it is younger than `read.stalenessLimit`, on
object stores only (a local listing costs less than the bookkeeping) and only while no commit of
this process went to the table since (any TransactionLog of the same location: freshness.py).
Explicit versions always list.
"""

from __future__ import annotations

import json as _json
import logging
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence, TypeVar

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.action_wire import action_from_json, derive_added_at
from indextables_spark.core.log.model.actions import Action, CommitInfo, Metadata, Protocol
from indextables_spark.core.log.read.absent import missing_table_error
from indextables_spark.core.log.read.base_state import BaseState, ScanStats
from indextables_spark.core.log.model.codec import decode_actions, decode_text, encode_actions
from indextables_spark.core.log.read.freshness import Listed, note_commit, staleness_limit_ms
from indextables_spark.core.log.read.listing import list_log
from indextables_spark.core.log.model.paths import LOG_DIR, version_key
from indextables_spark.core.log.model.protocol_gate import check_readable
from indextables_spark.core.log.read.replay import Delta, Prefetch, collect_changes, read_versions
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.log.state.state_config import read_parallelism
from indextables_spark.core.log.read.state_loader import (
    LastCheckpointRead,
    first_base,
    latest_checkpoint_version,
    load_base_state,
    try_read_last_checkpoint,
)
from indextables_spark.core.storage import Storage
from indextables_spark.util.pools import shared_pool
from indextables_spark.errors import (
    CorruptStateError,
    FileNotFoundInStorageError,
    InvalidOptionError,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.core.log.read.listing import LogListing
    from indextables_spark.expr.partition_filter import PartitionPredicate

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class TransactionLog:
    def __init__(
        self,
        storage: Storage,
        options: Options | None = None,
        post_commit: Sequence[Callable[["TransactionLog", int, str | None], None]] = (),
    ):
        self.storage = storage
        self.options = options or Options()
        # Run by Transaction.commit after each commit of this log, with (log, version, operation):
        # maintenance the layers above install (shared_logs.log_with_maintenance); a commit itself runs none.
        self.post_commit = tuple(post_commit)
        # The last snapshot built and the log listing it was built from: asking for the same version
        # again while the log's files are unchanged (a service searching the table per request)
        # costs one listing, not a state decode.
        self._last_snapshot: tuple[LogListing, Snapshot] | None = None
        # The last listing taken; reads within read.stalenessLimit reuse it (see the module).
        self._listed: Listed | None = None
        self._staleness_ms: int | None = None

    # ---- version files -------------------------------------------------------------------
    def list_versions(self) -> list[int]:
        """Retained version numbers, ascending (holes left by a racing listing are re-checked)."""
        return list(self.listing().versions)

    def latest_version(self) -> int:
        listing = self.listing()
        if listing.latest_version >= 0:
            return listing.latest_version

        cp = latest_checkpoint_version(self, listing)
        return cp if cp is not None else -1

    def exists(self) -> bool:
        return self.latest_version() >= 0

    def _version_file(self, version: int) -> tuple[bytes, str]:
        """(bytes, full URI) of a version file; VersionNotFoundError when it is missing."""
        key = version_key(version)
        try:
            data = self.storage.read(key)
        except FileNotFoundInStorageError:
            raise VersionNotFoundError(
                f"version {version} of {self.storage.uri} is not available ({self.storage.full_uri(key)} is missing)"
            ) from None
        return data, self.storage.full_uri(key)

    def read_actions(self, version: int) -> list[Action]:
        data, where = self._version_file(version)
        if not data:
            # A committed version file is never empty (it holds at least its commitInfo): reading
            # it as "no actions" would silently drop that version's changes.
            raise CorruptStateError(f"{where}: version file {version} is empty")
        actions = derive_added_at(decode_actions(data, where), version)
        if not actions:
            if not decode_text(data, where).strip():
                raise CorruptStateError(f"{where}: version file {version} holds no actions")
        return actions

    def write_version(self, version: int, actions: Iterable[Action]) -> bool:
        """Write a version file if no file exists for that version. False on conflict."""
        compress = self.options.get_bool("transaction.compression.enabled")
        written = self.storage.put_if_absent(version_key(version), encode_actions(actions, compress, version))
        if written:
            note_commit(self.storage)
        return written

    def commit_timestamp(self, version: int, actions: list[Action] | None = None) -> int:
        acts = actions if actions is not None else self.read_actions(version)
        for a in acts:
            if isinstance(a, CommitInfo) and a.timestamp:
                return a.timestamp
        info = self.storage.stat(version_key(version))
        return info.modified_ms if info else 0

    # ---- listing ---------------------------------------------------------------------------
    def listing(self) -> LogListing:
        """A fresh listing of the log (remembered for reads within read.stalenessLimit)."""
        started, commits = Listed.start(self.storage)
        listing = list_log(self.storage)
        if self._listed is None or started >= self._listed.started:  # not a slower listing started before
            self._listed = Listed(listing, started, commits)
        return listing

    def refresh(self) -> int:
        """List the log now (reads within read.stalenessLimit then start from this listing);
        returns the latest version."""
        return self.resolve_version(None, self.listing(), allow_missing=True)

    @property
    def staleness_limit_ms(self) -> int:
        """`read.stalenessLimit` in milliseconds (0: reads of the latest version always list)."""
        if self._staleness_ms is None:
            self._staleness_ms = staleness_limit_ms(self.options)
        return self._staleness_ms

    def _recent_listing(self) -> LogListing | None:
        """The last listing when a read of the latest version may reuse it (freshness.Listed)."""
        listed = self._listed
        return listed.listing if listed is not None and listed.reusable(self.storage, self.staleness_limit_ms) else None

    def _open_listing(self) -> tuple[LogListing, LastCheckpointRead]:
        """A fresh listing and `_last_checkpoint` (read whether or not listed, as the loader would),
        together on object stores (one round trip); on a local disk a thread costs more than both."""
        if self.storage.local_path(LOG_DIR) is not None:
            return self.listing(), try_read_last_checkpoint(self)
        lc = shared_pool("log-open", 4).submit(try_read_last_checkpoint, self)
        return self.listing(), lc.result()

    def _read_latest(
        self, version: int | None, stale_ok: bool, build: Callable[[LogListing, LastCheckpointRead | None], _T]
    ) -> _T:
        """build(listing, `_last_checkpoint` when read with it) on a fresh listing, or, for a read of
        the latest version that accepts it, on the last listing while it is recent enough. A build
        on a reused listing that fails (its files gone since: retention) is done again on a fresh one."""
        if stale_ok and version is None:
            recent = self._recent_listing()
            if recent is not None:
                try:
                    return build(recent, None)
                except (VersionNotFoundError, CorruptStateError, FileNotFoundInStorageError) as e:
                    log.info("%s changed since its last listing (%s); listing again", self.storage.uri, e)
        listing, lc = self._open_listing()
        return build(listing, lc)

    # ---- snapshots -------------------------------------------------------------------------
    def resolve_version(
        self,
        version: int | None,
        listing: LogListing,
        last_checkpoint: LastCheckpointRead | None = None,
        allow_missing: bool = False,
    ) -> int:
        """`version`, checked to exist; None: the latest (TableNotFoundError without any, or -1
        with allow_missing)."""
        latest = listing.latest_version
        if latest < 0:
            cp = latest_checkpoint_version(self, listing, last_checkpoint)
            latest = cp if cp is not None else -1
        if latest < 0 and allow_missing and version is None:
            return -1
        if latest < 0:
            raise missing_table_error(self.storage)
        if version is None:
            return latest
        if version < 0 or version > latest:
            raise VersionNotFoundError(f"version {version} of {self.storage.uri} does not exist (latest is {latest})")
        return version

    def snapshot(self, version: int | None = None, *, stale_ok: bool = False) -> Snapshot:
        """The table at `version` (latest by default). stale_ok: a read of the latest version may
        reuse a listing younger than read.stalenessLimit (see the module)."""
        return self._read_latest(version, stale_ok, lambda listing, lc: self._snapshot_of(version, listing, lc))

    def _snapshot_of(self, version: int | None, listing: LogListing, lc: LastCheckpointRead | None) -> Snapshot:
        version = self.resolve_version(version, listing, lc)
        last = self._last_snapshot
        if last is not None and last[1].version == version and last[0] == listing:
            return last[1]
        base, delta = self._base_and_changes(version, listing, lc)
        base, delta, files = self.files_or_fallback(base, delta, version, listing)
        snap = self._snapshot(base, delta, version, files)
        self._last_snapshot = (listing, snap)
        return snap

    def _base_and_changes(
        self, version: int, listing: LogListing, lc: LastCheckpointRead | None
    ) -> tuple[BaseState | None, Delta]:
        """The base of `version` and the changes after it, the version files after the likely base
        fetched while the base loads (one round trip for both)."""
        if lc is None:
            lc = try_read_last_checkpoint(self)
        first, kind = first_base(listing, version, lc)
        # a JSON checkpoint does not record its commit time: its version file is read for it
        start = first if kind == "json" and first in listing.version_info else first + 1
        with self._prefetch(range(start, version + 1), self.read_actions) as reads:

            def timestamp_of(v: int) -> int:
                return self.commit_timestamp(v, reads.read(v))

            base = load_base_state(self, version, listing, last_checkpoint=lc, timestamp_of=timestamp_of)
            return base, self.collect_changes(base, version, reads.futures)

    def files_or_fallback(
        self,
        base: BaseState | None,
        delta: Delta,
        version: int,
        listing: LogListing,
        predicate: PartitionPredicate | None = None,
        stats: ScanStats | None = None,
        min_added_version: int | None = None,
    ) -> tuple[BaseState | None, Delta, pa.Table]:
        """(base, delta, the live files at `version`: base's files updated by delta). When a manifest
        of the base state turns out missing or corrupt, fall back to an older base or to replaying
        the version files (logged), or raise naming the file."""

        excluded: set[tuple[int, str]] = set()
        while True:
            try:
                return base, delta, self._files(base, delta, predicate, stats, min_added_version)
            except CorruptStateError as e:
                if base is None or base.files_table is not None:
                    raise
                excluded.add((base.version, "avro"))
                log.warning(
                    "cannot read the state of version %d of %s: %s; falling back", base.version, self.storage.uri, e
                )
                base = load_base_state(self, version, listing, exclude=excluded, failure=e)
                delta = self.collect_changes(base, version)
                if stats is not None:
                    stats.source = base.source if base else "log"

    def scan(
        self,
        partition_filter: str | PartitionPredicate | None = None,
        version: int | None = None,
        *,
        stale_ok: bool = False,
    ) -> tuple[Snapshot, ScanStats]:
        """Live files matching a partition filter, decoding only the manifests whose partition
        bounds may match. Returns (snapshot with the matching files only, ScanStats).
        stale_ok: as snapshot()'s."""
        return self._read_latest(
            version, stale_ok, lambda listing, lc: self._scan_of(partition_filter, version, listing, lc)
        )

    def _scan_of(
        self,
        partition_filter: str | PartitionPredicate | None,
        version: int | None,
        listing: LogListing,
        lc: LastCheckpointRead | None,
    ) -> tuple[Snapshot, ScanStats]:
        from indextables_spark.expr.partition_filter import (  # lazy: keeps `import indextables_spark.core.log.read.table_log` free of pyarrow
            filter_files_table,
            parse_partition_filter,
        )

        version = self.resolve_version(version, listing, lc)
        base, delta = self._base_and_changes(version, listing, lc)
        stats = ScanStats(
            source=base.source if base else "log", version_files_read=version - (base.version if base else -1)
        )
        pred = None
        if partition_filter is not None and partition_filter != "":
            pred = parse_partition_filter(partition_filter, delta.metadata.partition_column_types())
        base, delta, files = self.files_or_fallback(base, delta, version, listing, pred, stats)
        if pred is not None:
            files = filter_files_table(files, pred)
        return self._snapshot(base, delta, version, files), stats

    def pruned_snapshot(
        self,
        partition_filter: str | PartitionPredicate | None = None,
        version: int | None = None,
        *,
        stale_ok: bool = False,
    ) -> Snapshot:
        """The snapshot holding the files of the partitions matching `partition_filter` (scan's
        manifest pruning), or, without a filter, the whole snapshot (reused while the log is
        unchanged, see snapshot()). stale_ok: as snapshot()'s."""
        if partition_filter is None or partition_filter == "":
            return self.snapshot(version, stale_ok=stale_ok)
        return self.scan(partition_filter, version, stale_ok=stale_ok)[0]

    def header(
        self, version: int | None = None, listing: LogListing | None = None, *, stale_ok: bool = False
    ) -> tuple[Protocol, Metadata, dict[str, str]]:
        """Protocol, metadata and schema registry at a version without decoding any manifest.
        stale_ok: as snapshot()'s (without a listing given)."""
        if listing is not None:
            return self._header_of(version, listing, None)
        return self._read_latest(version, stale_ok, lambda listing_, lc: self._header_of(version, listing_, lc))

    def _header_of(
        self, version: int | None, listing: LogListing, lc: LastCheckpointRead | None
    ) -> tuple[Protocol, Metadata, dict[str, str]]:
        version = self.resolve_version(version, listing, lc)
        last = self._last_snapshot
        if last is not None and last[1].version == version and last[0] == listing:
            snap = last[1]
            return snap.protocol_action, snap.metadata_action, dict(snap.schema_registry)
        if lc is None:
            lc = try_read_last_checkpoint(self)
        first = first_base(listing, version, lc)[0] + 1
        with self._prefetch(range(first, version + 1), self._read_header_actions) as reads:
            # the header needs no commit time: a JSON checkpoint's version file is not read for it
            base = load_base_state(self, version, listing, last_checkpoint=lc, timestamp_of=lambda _v: 0)
            protocol = base.protocol if base else None
            metadata = base.metadata if base else None
            registry = dict(base.schema_registry) if base else {}
            after = range(base.version + 1 if base else 0, version + 1)
            versions = read_versions(after, reads.read, read_parallelism(self.options), reads.futures)
            return self._apply_header(version, protocol, metadata, registry, versions)

    def _apply_header(
        self,
        version: int,
        protocol: Protocol | None,
        metadata: Metadata | None,
        registry: dict[str, str],
        versions: Iterable[tuple[int, list[Action]]],
    ) -> tuple[Protocol, Metadata, dict[str, str]]:
        for _v, actions in versions:
            for a in actions:
                if isinstance(a, Metadata):
                    metadata = a
                    registry.update(a.doc_mappings)
                elif isinstance(a, Protocol):
                    protocol = a
        if protocol is None or metadata is None:
            raise CorruptStateError(
                f"table {self.storage.uri} at version {version} has no "
                f"{'protocol' if protocol is None else 'metaData'} action"
            )
        check_readable(protocol, f"table {self.storage.uri}")
        return protocol, metadata, registry

    def _prefetch(self, versions: Iterable[int], read: Callable[[int], list[Action]]) -> Prefetch:
        """Start fetching version files (read(v)) in the background, state.read.parallelism at a time."""
        local = self.storage.local_path(LOG_DIR) is not None  # (no round trips to overlap)
        return Prefetch(list(versions), read, 1 if local else read_parallelism(self.options))

    _SKIP_PREFIXES = ('{"add":', '{"remove":', '{"commitInfo":', '{"mergeskip":', '{"deleteLog":', '{"statsFiles":')

    def _read_header_actions(self, version: int) -> list[Action]:
        """The protocol/metaData actions of a version file, without parsing add/remove lines
        (lines in our compact encoding start with their action key)."""

        data, where = self._version_file(version)
        text = decode_text(data, where)
        if not text.strip():
            raise CorruptStateError(f"{where}: version file {version} is empty")
        out: list[Action] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith(self._SKIP_PREFIXES):
                continue
            try:
                obj = _json.loads(line)
            except _json.JSONDecodeError as e:
                raise CorruptStateError(f"{where}: line {n} is not valid JSON ({e.msg} at column {e.colno})") from None
            a = action_from_json(obj, where)
            if isinstance(a, (Metadata, Protocol)):
                out.append(a)
        return out

    def collect_changes(
        self, base: BaseState | None, version: int, fetched: Mapping[int, Future[list[Action]]] | None = None
    ) -> Delta:
        """What the version files after `base` (from 0 without one) up to `version` change (replay.py).
        fetched: version files already being read (read_actions) by _prefetch."""
        return collect_changes(self, base, version, fetched)

    def _files(
        self,
        base: BaseState | None,
        delta: Delta,
        predicate: PartitionPredicate | None = None,
        stats: ScanStats | None = None,
        min_added_version: int | None = None,
    ) -> pa.Table:
        # pyarrow is imported by the first read that needs it, not by `import indextables_spark.api.table`
        # (lazy imports below); an Avro state's decoding overlaps that import (avro_state.read_state_files)
        if base:
            files = base.load_files(predicate, min_added_version, stats)
        else:
            from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA  # lazy

            files = FILE_ENTRY_SCHEMA.empty_table()
        drop = set(delta.removed) | set(delta.added)
        if drop and files.num_rows:
            import pyarrow as pa  # lazy
            import pyarrow.compute as pc  # lazy

            keep = pc.invert(pc.is_in(files.column("path"), value_set=pa.array(list(drop), pa.string())))
            files = files.filter(keep)
        if delta.added:
            import pyarrow as pa  # lazy

            from indextables_spark.core.log.state.file_entries import add_files_to_table  # lazy

            new = add_files_to_table(delta.added.values())
            files = pa.concat_tables([files, new]) if files.num_rows else new
        return files

    def _snapshot(self, base: BaseState | None, delta: Delta, version: int, files: pa.Table) -> Snapshot:
        return Snapshot(
            version=version,
            protocol_action=delta.protocol,
            metadata_action=delta.metadata,
            files_table=files,
            skips=delta.skips,
            timestamp=delta.timestamp,
            schema_registry=delta.registry,
            source=base.source if base else "log",
            delete_logs=delta.delete_logs,
            stats_files=delta.stats_files,
        )

    # ---- time travel -----------------------------------------------------------------------
    def version_at_timestamp(self, timestamp_ms: int) -> int:
        """The newest version committed at or before timestamp_ms."""
        versions = self.list_versions()
        best = None
        for v in versions:
            ts = self.commit_timestamp(v)
            if ts <= timestamp_ms:
                best = v
            else:
                break
        if best is None:
            when = datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc).isoformat()
            first = versions[0] if versions else None
            raise VersionNotFoundError(
                f"no version of {self.storage.uri} was committed at or before {when}"
                + (f" (the oldest retained version is {first})" if first is not None else "")
            )
        return best


def parse_timestamp(value: str | int | float) -> int:
    """Epoch ms from a number (ms) or an ISO-8601 text (UTC when no zone is given)."""
    if isinstance(value, (int, float)):
        return int(value)
    s = str(value).strip()
    if s.isascii() and s.isdigit():  # not str.isdigit alone: '²' is a "digit" int() refuses
        return int(s)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOptionError(f"option 'timestampAsOf': cannot parse {value!r} as a timestamp") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)
