"""The transaction log of one table: version files, snapshots, time travel.

Snapshots start from the newest usable checkpoint/state at or below the wanted version (see
`state_loader`) and replay the version files after it.
"""

from __future__ import annotations

import json as _json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.log.action_wire import action_from_json, derive_added_at
from indextables_spark.core.log.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeleteLog,
    Metadata,
    Protocol,
    RemoveFile,
    SkipAction,
    StatsFiles,
    split_of_stats_file,
)
from indextables_spark.core.log.base_state import BaseState, ScanStats
from indextables_spark.core.log.codec import decode_actions, decode_text, encode_actions
from indextables_spark.core.log.listing import list_log
from indextables_spark.core.log.paths import LOG_DIR, version_key
from indextables_spark.core.log.protocol_gate import check_readable
from indextables_spark.core.log.snapshot import Snapshot
from indextables_spark.core.log.state_config import read_parallelism
from indextables_spark.core.log.state_loader import latest_checkpoint_version, load_base_state
from indextables_spark.core.storage import Storage
from indextables_spark.errors import (
    CorruptStateError,
    FileNotFoundInStorageError,
    InvalidOptionError,
    TableNotFoundError,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.core.log.listing import LogListing
    from indextables_spark.expr.partition_filter import PartitionPredicate

log = logging.getLogger(__name__)


@dataclass
class Delta:
    """What the version files after a base change."""

    protocol: Protocol
    metadata: Metadata
    added: dict[str, AddFile]
    removed: dict[str, RemoveFile]  # paths whose last action after the base is a remove
    skips: dict[str, SkipAction]
    registry: dict[str, str]
    timestamp: int
    readded: set[str] = field(default_factory=set)  # removed, then added again after the base
    created: set[str] = field(default_factory=set)  # first seen as an add after the base (new files)
    delete_logs: list[DeleteLog] = field(default_factory=list)  # every live delete log at the version
    stats_files: dict[str, list[str]] = field(default_factory=dict)  # every stats file at the version

    @property
    def base_removes(self) -> dict[str, RemoveFile]:
        """Removes of files that existed at the base (tombstones for an incremental state)."""
        return {p: r for p, r in self.removed.items() if p not in self.created}


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
        return self.storage.put_if_absent(version_key(version), encode_actions(actions, compress, version))

    def commit_timestamp(self, version: int, actions: list[Action] | None = None) -> int:
        acts = actions if actions is not None else self.read_actions(version)
        for a in acts:
            if isinstance(a, CommitInfo) and a.timestamp:
                return a.timestamp
        info = self.storage.stat(version_key(version))
        return info.modified_ms if info else 0

    # ---- listing ---------------------------------------------------------------------------
    def listing(self) -> LogListing:
        return list_log(self.storage)

    # ---- snapshots -------------------------------------------------------------------------
    def resolve_version(self, version: int | None, listing: LogListing) -> int:
        """`version`, checked to exist; None: the latest (TableNotFoundError without any)."""
        latest = listing.latest_version
        if latest < 0:
            cp = latest_checkpoint_version(self, listing)
            latest = cp if cp is not None else -1
        if latest < 0:
            raise TableNotFoundError(f"no indextables table at {self.storage.uri} (no {LOG_DIR}/ versions)")
        if version is None:
            return latest
        if version < 0 or version > latest:
            raise VersionNotFoundError(f"version {version} of {self.storage.uri} does not exist (latest is {latest})")
        return version

    def snapshot(self, version: int | None = None) -> Snapshot:
        listing = self.listing()
        version = self.resolve_version(version, listing)
        last = self._last_snapshot
        if last is not None and last[1].version == version and last[0] == listing:
            return last[1]
        base = load_base_state(self, version, listing)
        delta = self.collect_changes(base, version)
        base, delta, files = self.files_or_fallback(base, delta, version, listing)
        snap = self._snapshot(base, delta, version, files)
        self._last_snapshot = (listing, snap)
        return snap

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
        self, partition_filter: str | PartitionPredicate | None = None, version: int | None = None
    ) -> tuple[Snapshot, ScanStats]:
        """Live files matching a partition filter, decoding only the manifests whose partition
        bounds may match. Returns (snapshot with the matching files only, ScanStats)."""
        from indextables_spark.expr.partition_filter import (  # lazy: keeps `import indextables_spark.core.log.table_log` free of pyarrow
            filter_files_table,
            parse_partition_filter,
        )

        listing = self.listing()
        version = self.resolve_version(version, listing)
        base = load_base_state(self, version, listing)
        delta = self.collect_changes(base, version)
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
        self, partition_filter: str | PartitionPredicate | None = None, version: int | None = None
    ) -> Snapshot:
        """The snapshot holding the files of the partitions matching `partition_filter` (scan's
        manifest pruning), or, without a filter, the whole snapshot (reused while the log is
        unchanged, see snapshot())."""
        if partition_filter is None or partition_filter == "":
            return self.snapshot(version)
        return self.scan(partition_filter, version)[0]

    def header(
        self, version: int | None = None, listing: LogListing | None = None
    ) -> tuple[Protocol, Metadata, dict[str, str]]:
        """Protocol, metadata and schema registry at a version without decoding any manifest."""

        listing = listing or self.listing()
        version = self.resolve_version(version, listing)
        base = load_base_state(self, version, listing)
        protocol = base.protocol if base else None
        metadata = base.metadata if base else None
        registry = dict(base.schema_registry) if base else {}
        for _v, actions in self._read_versions(
            range(base.version + 1 if base else 0, version + 1), self._read_header_actions
        ):
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

    def _read_versions(
        self, versions: Iterable[int], read: Callable[[int], list[Action]]
    ) -> Iterator[tuple[int, list[Action]]]:
        """(v, read(v)) for each version, in order. The files are fetched state.read.parallelism at a
        time: replaying the versions after a checkpoint costs about one round trip on object stores,
        not one per version. A failure surfaces when its version is reached."""
        versions = list(versions)
        workers = min(len(versions), read_parallelism(self.options))
        if workers <= 1:
            yield from ((v, read(v)) for v in versions)
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="itx-versions") as pool:
            futures = [pool.submit(read, v) for v in versions]
            try:
                for v, f in zip(versions, futures):
                    yield v, f.result()
            finally:
                for f in futures:
                    f.cancel()

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

    def collect_changes(self, base: BaseState | None, version: int) -> Delta:
        """What the version files after `base` (from 0 without one) up to `version` change."""
        start = base.version + 1 if base else 0
        protocol = base.protocol if base else None
        metadata = base.metadata if base else None
        skips = dict(base.skips) if base else {}
        registry = dict(base.schema_registry) if base else {}
        added: dict[str, AddFile] = {}
        removed: dict[str, RemoveFile] = {}
        readded: set[str] = set()
        created: set[str] = set()
        seen: set[str] = set()
        timestamp = base.timestamp if base else 0
        delete_logs: list[DeleteLog] = list(base.delete_logs) if base else []
        stats: dict[str, dict[str, None]] = {k: dict.fromkeys(v) for k, v in (base.stats_files if base else {}).items()}

        def read(v: int) -> list[Action]:
            try:
                return self.read_actions(v)
            except VersionNotFoundError:
                raise VersionNotFoundError(
                    f"version {version} of {self.storage.uri} cannot be reconstructed: version file {v} "
                    f"is missing and no checkpoint covers it (it may have been removed by retention)"
                ) from None

        for v, actions in self._read_versions(range(start, version + 1), read):
            timestamp = self.commit_timestamp(v, actions)
            for a in actions:
                if isinstance(a, AddFile):
                    if a.added_at_version is None:
                        a.added_at_version = v
                    if a.added_at_timestamp is None:
                        a.added_at_timestamp = timestamp
                    if a.doc_mapping_json and not a.doc_mapping_ref:
                        from indextables_spark.core.log.doc_mapping import (
                            doc_mapping_hash,
                        )  # lazy: hashlib, for legacy adds only

                        ref = doc_mapping_hash(a.doc_mapping_json)
                        registry.setdefault(ref, a.doc_mapping_json)
                        a.doc_mapping_ref = ref
                    if a.path not in seen:
                        seen.add(a.path)
                        created.add(a.path)
                    added[a.path] = a
                    if removed.pop(a.path, None) is not None:
                        readded.add(a.path)
                    skips.pop(a.path, None)
                elif isinstance(a, RemoveFile):
                    seen.add(a.path)
                    added.pop(a.path, None)
                    removed[a.path] = a
                    skips.pop(a.path, None)
                elif isinstance(a, Metadata):
                    metadata = a
                    registry.update(a.doc_mappings)
                elif isinstance(a, Protocol):
                    check_readable(a, f"{self.storage.full_uri(version_key(v))}")
                    protocol = a
                elif isinstance(a, SkipAction):
                    skips[a.path] = a
                elif isinstance(a, DeleteLog):
                    if a.added_at_version is None:
                        a.added_at_version = v
                    if a.added_at_timestamp is None:
                        a.added_at_timestamp = timestamp
                    delete_logs.append(a)
                elif isinstance(a, StatsFiles):
                    stats.setdefault(a.key, {}).update(dict.fromkeys(a.files))
        if removed:
            from indextables_spark.core.log.delete_logs import (
                drop_for_removed,  # lazy: keeps `import indextables_spark.core.log.table_log` free of numpy, pyarrow
            )

            # Logs and stats files of splits removed since the base can no longer apply.
            delete_logs = drop_for_removed(delete_logs, set(removed))
            stats = {k: {f: None for f in fs if split_of_stats_file(f) not in removed} for k, fs in stats.items()}
        if protocol is None or metadata is None:
            raise CorruptStateError(
                f"table {self.storage.uri} at version {version} has no "
                f"{'protocol' if protocol is None else 'metaData'} action"
            )
        check_readable(protocol, f"table {self.storage.uri}")
        return Delta(
            protocol,
            metadata,
            added,
            removed,
            skips,
            registry,
            timestamp,
            readded,
            created,
            delete_logs,
            {k: list(fs) for k, fs in stats.items() if fs},
        )

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
            from indextables_spark.core.log.file_entries import FILE_ENTRY_SCHEMA  # lazy

            files = FILE_ENTRY_SCHEMA.empty_table()
        drop = set(delta.removed) | set(delta.added)
        if drop and files.num_rows:
            import pyarrow as pa  # lazy
            import pyarrow.compute as pc  # lazy

            keep = pc.invert(pc.is_in(files.column("path"), value_set=pa.array(list(drop), pa.string())))
            files = files.filter(keep)
        if delta.added:
            import pyarrow as pa  # lazy

            from indextables_spark.core.log.file_entries import add_files_to_table  # lazy

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
