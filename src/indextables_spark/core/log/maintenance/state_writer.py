"""Writing the table state: V4 Avro states, incremental and compacted (when, and what compaction
does to the files: core/log/state/state_compaction.py; `_last_checkpoint` and legacy JSON checkpoints:
last_checkpoint.py). The maintenance layer: reads through TransactionLog, never called by a commit
(core/log/maintenance/maintenance.py runs it after commits)."""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.commit.policy import CommitPolicy, Lost, retry
from indextables_spark.core.log.model.actions import DeleteLog, Metadata, Protocol, RemoveFile, SkipAction
from indextables_spark.core.log.read.avro_state import read_state_manifest
from indextables_spark.core.log.state.file_entries import add_files_to_table
from indextables_spark.core.log.maintenance.last_checkpoint import last_checkpoint_for, update_last_checkpoint
from indextables_spark.core.log.read.listing import list_log
from indextables_spark.core.log.state.manifest_write import encode_manifest, manifest_info, new_manifest_key
from indextables_spark.core.log.model.paths import state_dir_name
from indextables_spark.core.log.state.state_compaction import (
    live_extras,
    needs_compaction,
    renormalize,
    sort_for_locality,
)
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.read.state_loader import load_base_state
from indextables_spark.core.log.state.state_manifest import (
    ManifestInfo,
    StateManifest,
    encode_state_manifest,
    normalize_manifest_path,
    state_manifest_key,
)
from indextables_spark.errors import CorruptStateError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.base_state import BaseState
    from indextables_spark.core.log.read.listing import LogListing
    from indextables_spark.core.log.read.table_log import TransactionLog
    from indextables_spark.core.storage import Storage


log = logging.getLogger(__name__)


@dataclass
class StateWriteResult:
    version: int
    state_dir: str
    compacted: bool
    reason: str = ""
    num_files: int = 0
    total_bytes: int = 0
    num_manifests: int = 0
    num_tombstones: int = 0
    manifests_written: int = 0
    entries_written: int = 0
    bytes_written: int = 0
    attempts: int = 1
    already_existed: bool = False
    base_version: int | None = None
    written_keys: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "stateDir": self.state_dir,
            "compacted": self.compacted,
            "reason": self.reason,
            "numFiles": self.num_files,
            "totalBytes": self.total_bytes,
            "numManifests": self.num_manifests,
            "numTombstones": self.num_tombstones,
            "manifestsWritten": self.manifests_written,
            "entriesWritten": self.entries_written,
            "bytesWritten": self.bytes_written,
            "attempts": self.attempts,
            "alreadyExisted": self.already_existed,
            "baseVersion": self.base_version,
        }


def newest_state_at_or_below(listing: "LogListing", version: int) -> int | None:
    vs = [v for v in listing.state_manifests if v <= version]
    return max(vs) if vs else None


class _Writer:
    """Writes manifests and tracks what was written (to delete them if the state loses a race)."""

    def __init__(self, storage: Storage, cfg: StateConfig, partition_columns: list[str]):
        self.storage = storage
        self.cfg = cfg
        self.partition_columns = partition_columns
        self.keys: list[str] = []
        self.bytes = 0
        self.entries = 0

    def write(self, files: pa.Table, sorted_by_partition: bool = False) -> ManifestInfo:
        key = new_manifest_key()
        data = encode_manifest(
            files,
            self.cfg.compression,
            self.cfg.compression_level,
            self.partition_columns if sorted_by_partition else None,
        )
        if not self.storage.put_if_absent(key, data):
            raise CorruptStateError(f"manifest {self.storage.full_uri(key)} already exists")
        self.keys.append(key)
        self.bytes += len(data)
        self.entries += files.num_rows
        return manifest_info(key, files, self.partition_columns)

    def write_chunks(self, files: pa.Table) -> list[ManifestInfo]:
        n = files.num_rows
        epm = self.cfg.entries_per_manifest
        chunks = [files.slice(i, epm) for i in range(0, n, epm)] or [files]
        if len(chunks) > 1:
            with ThreadPoolExecutor(max_workers=min(2, len(chunks)), thread_name_prefix="itx-compact") as ex:
                return list(ex.map(lambda c: self.write(c, True), chunks))
        return [self.write(c, True) for c in chunks]

    def discard(self) -> None:
        if self.keys:
            self.storage.delete(self.keys)
            self.keys = []


def _state_manifest(
    version: int,
    files_count: int,
    total_bytes: int,
    manifests: list[ManifestInfo],
    tombstones: list[str],
    registry: dict[str, str],
    protocol: Protocol,
    metadata: Metadata,
    skips: Mapping[str, SkipAction],
    delete_logs: Iterable[DeleteLog],
    stats_files: Mapping[str, list[str]],
    distinct_prefix: int = 0,
) -> StateManifest:
    return StateManifest(
        distinct_prefix_manifests=distinct_prefix,
        state_version=version,
        created_at=int(time.time() * 1000),
        num_files=int(files_count),
        total_bytes=int(total_bytes),
        manifests=manifests,
        tombstones=tombstones,
        schema_registry=registry,
        protocol_version=max(4, protocol.min_reader_version),
        metadata=json.dumps({"metaData": metadata.to_json()}, separators=(",", ":")),
        protocol=json.dumps(protocol.to_json(), separators=(",", ":")),
        skip_actions=[json.dumps(s.to_json(), separators=(",", ":")) for s in skips.values()],
        delete_logs=[json.dumps(d.to_json(), separators=(",", ":")) for d in delete_logs],
        stats_files={k: list(v) for k, v in stats_files.items() if v},
    )


def _registry_for(
    delta_registry: dict[str, str], metadata: Metadata, base_registry: dict[str, str] | None = None
) -> dict[str, str]:
    reg = dict(base_registry or {})
    reg.update(metadata.doc_mappings)
    reg.update(delta_registry)
    return reg


def write_state(
    log_: "TransactionLog",
    version: int,
    force_compaction: bool = False,
    overwrite: bool = False,
    listing: "LogListing | None" = None,
) -> StateWriteResult:
    """Write the Avro state for table version `version` (put-if-absent, re-reading the base
    state on every attempt). With force_compaction the state is a clean compacted rewrite; with
    overwrite an existing state of the same version is replaced (compaction of the current
    state: both describe the same table version)."""

    storage = log_.storage
    cfg = StateConfig.from_options(log_.options)
    policy = CommitPolicy.from_options(log_.options, "state.retry")
    first_listing = listing

    def attempt(n: int) -> StateWriteResult | Lost:
        listing = first_listing if n == 1 and first_listing is not None else list_log(storage)  # re-read on retry
        base_v = newest_state_at_or_below(listing, version)
        if base_v == version and not overwrite:
            sm = read_state_manifest(storage, listing.state_manifests[version])
            update_last_checkpoint(log_, last_checkpoint_for(sm))
            return StateWriteResult(
                version=version,
                state_dir=state_dir_name(version),
                compacted=False,
                reason="already written",
                num_files=sm.num_files,
                total_bytes=sm.total_bytes,
                num_manifests=len(sm.manifests),
                num_tombstones=len(sm.tombstones),
                attempts=n,
                already_existed=True,
                base_version=version,
            )
        base = None
        if base_v is not None and base_v < version:
            try:
                base = load_base_state(log_, base_v, listing, avro_only=True)
            except CorruptStateError as e:
                log.warning(
                    "state at version %d of %s is not usable as a base (%s); writing a full state",
                    base_v,
                    storage.uri,
                    e,
                )
                base = None
        writer = None
        try:
            if base is None and not force_compaction:
                result, sm, writer = _build_compacted(log_, version, cfg, "no previous Avro state", None)
            else:
                result, sm, writer = _build_state(log_, version, base, cfg, force_compaction, listing)
            key = state_manifest_key(version)
            data = encode_state_manifest(sm, cfg.compression, cfg.compression_level)
            if overwrite and base_v == version:
                storage.put(key, data)
                ok = True
            else:
                ok = storage.put_if_absent(key, data)
        except BaseException:
            if writer is not None:
                writer.discard()
            raise
        if not ok and _is_ours(storage, key, writer):
            ok = True  # the write landed although it was reported lost (unknown outcome)
        if not ok:  # another writer created this state: drop what we wrote, re-read, retry
            writer.discard()
            return Lost(f"state v{version} was written concurrently")
        result.bytes_written += len(data)
        result.attempts = n
        result.bytes_written += update_last_checkpoint(log_, last_checkpoint_for(sm))
        log.info(
            "wrote %s state v%d of %s (%d files, %d manifests, %d tombstones, %d bytes)",
            "compacted" if result.compacted else "incremental",
            version,
            storage.uri,
            sm.num_files,
            len(sm.manifests),
            len(sm.tombstones),
            result.bytes_written,
        )
        return result

    return retry(policy, attempt, storage.uri, f"writing state v{version}").value


def _is_ours(storage: Storage, key: str, writer: _Writer) -> bool:
    """After a failed put-if-absent: is the state manifest there the one we just wrote?"""
    if not writer.keys:
        return False
    try:
        existing = read_state_manifest(storage, key)
    except CorruptStateError:
        return False
    ours = {k.split("/")[-1] for k in writer.keys}
    return any(m.path.split("/")[-1] in ours for m in existing.manifests)


def _build_state(
    log_: TransactionLog,
    version: int,
    base: BaseState | None,
    cfg: StateConfig,
    compact: bool,
    listing: LogListing,
) -> tuple[StateWriteResult, StateManifest, _Writer]:
    """Write the manifests of a new state; return (result, state manifest, writer)."""
    storage = log_.storage
    if compact or base is None:  # without a base (write_state: only when forced), a full state
        return _build_compacted(log_, version, cfg, "forced" if compact else "no previous Avro state", base)
    reason = ""
    if not listing.has_versions(base.version + 1, version):
        missing = listing.missing_versions(base.version + 1, version)
        log.info("version files %s are gone; writing a full state for v%d", missing[:5], version)
        compact = True
        reason = "version files after the base state are gone"
    if not compact:
        delta = log_.collect_changes(base, version)
        sm0: StateManifest = base.state_manifest
        base_removes = delta.base_removes
        tomb_set = set(sm0.tombstones)
        new_tombs = [p for p in base_removes if p not in tomb_set]
        whether, why = needs_compaction(sm0, len(new_tombs), cfg)
        conflict = any(p in tomb_set for p in delta.added) or bool(delta.readded)
        if whether or conflict:
            compact = True
            reason = why or "a removed file was added again"
    if compact:
        return _build_compacted(log_, version, cfg, reason or "forced", base)
    metadata, protocol = delta.metadata, delta.protocol
    writer = _Writer(storage, cfg, list(metadata.partition_columns))
    result = StateWriteResult(
        version=version,
        state_dir=state_dir_name(version),
        compacted=False,
        reason="incremental",
        base_version=base.version,
    )
    manifests = [
        ManifestInfo(
            normalize_manifest_path(m.path, sm0.state_version),
            m.num_entries,
            m.min_added_at_version,
            m.max_added_at_version,
            m.partition_bounds,
            m.tombstone_count,
            m.live_entry_count,
        )
        for m in sm0.manifests
    ]
    added_bytes = 0
    if delta.added:
        new_files = add_files_to_table(delta.added.values())
        manifests.append(writer.write(new_files))
        added_bytes = int(pc.sum(new_files.column("size")).as_py() or 0)
    # Removed files: counts and bytes from the remove actions; look sizes up in the base
    # manifests only when some remove does not carry its size.
    removed_count, removed_bytes = _removed_totals(log_, base, {p: base_removes[p] for p in new_tombs}, cfg)
    tombstones = list(sm0.tombstones) + new_tombs
    registry = _registry_for(delta.registry, metadata, sm0.schema_registry)
    sm = _state_manifest(
        version,
        sm0.num_files + len(delta.added) - removed_count,
        sm0.total_bytes + added_bytes - removed_bytes,
        manifests,
        tombstones,
        registry,
        protocol,
        metadata,
        delta.skips,
        delta.delete_logs,
        delta.stats_files,
        distinct_prefix=min(sm0.distinct_prefix_manifests, len(sm0.manifests)),
    )
    result.num_files, result.total_bytes = sm.num_files, sm.total_bytes
    result.num_manifests, result.num_tombstones = len(manifests), len(tombstones)
    result.manifests_written, result.entries_written, result.bytes_written = (
        len(writer.keys),
        writer.entries,
        writer.bytes,
    )
    result.written_keys = list(writer.keys)
    return result, sm, writer


def _removed_totals(
    log_: TransactionLog, base: BaseState, removes: dict[str, RemoveFile], cfg: StateConfig
) -> tuple[int, int]:
    if not removes:
        return 0, 0
    sizes = [r.size for r in removes.values() if r.size is not None]
    if len(sizes) == len(removes):
        return len(removes), sum(int(s) for s in sizes)
    files = base.load_files()
    hit = files.filter(pc.is_in(files.column("path"), value_set=pa.array(list(removes), pa.string())))
    return hit.num_rows, int(pc.sum(hit.column("size")).as_py() or 0)


def _build_compacted(
    log_: TransactionLog, version: int, cfg: StateConfig, reason: str, base: BaseState | None
) -> tuple[StateWriteResult, StateManifest, _Writer]:
    snap = log_.snapshot(version)
    files = snap.files_table
    metadata, protocol = snap.metadata_action, snap.protocol_action
    registry = _registry_for(snap.schema_registry, metadata)
    files, registry, _changed = renormalize(files, registry, cfg)
    files = sort_for_locality(files, list(metadata.partition_columns))
    writer = _Writer(log_.storage, cfg, list(metadata.partition_columns))
    manifests = writer.write_chunks(files) if files.num_rows else []
    total = int(pc.sum(files.column("size")).as_py() or 0) if files.num_rows else 0
    delete_logs, stats_files = live_extras(snap.delete_logs, snap.stats_files, files)
    sm = _state_manifest(
        version,
        files.num_rows,
        total,
        manifests,
        [],
        registry,
        protocol,
        metadata,
        snap.skips,
        delete_logs,
        stats_files,
        distinct_prefix=len(manifests),
    )
    result = StateWriteResult(
        version=version,
        state_dir=state_dir_name(version),
        compacted=True,
        reason=reason,
        num_files=files.num_rows,
        total_bytes=total,
        num_manifests=len(manifests),
        num_tombstones=0,
        manifests_written=len(writer.keys),
        entries_written=writer.entries,
        bytes_written=writer.bytes,
        base_version=base.version if base is not None else None,
        written_keys=list(writer.keys),
    )
    return result, sm, writer
