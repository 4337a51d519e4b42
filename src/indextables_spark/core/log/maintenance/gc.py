"""Retention and garbage collection of the state layer (docs/reference/table-format.md, "Garbage
collection").

- `cleanup_old_states`: old `state-v*` directories beyond `state.retention.versions` and older
  than `state.retention.hours` are removed; the current state (what `_last_checkpoint` points
  at) and the newest state are never removed, nor any file a retained state still references
  (legacy manifests inside a state directory).
- `gc_manifests`: files in `manifests/` that no retained state references and that are older
  than `state.gc.minManifestAgeHours` are removed (the age protects in-flight writers).
- `truncate_time_travel`: checkpoint at the latest version, then remove every older version
  file, JSON checkpoint and state that is no longer needed, then collect orphan manifests.

Every function has a dry run that reports without deleting.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterable

from indextables_spark.core.log.read.avro_state import read_state_manifest
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.read.state_loader import read_last_checkpoint
from indextables_spark.core.log.state.state_manifest import FORMAT_AVRO_STATE, resolve_manifest_key
from indextables_spark.errors import CorruptStateError
from indextables_spark.results.state import GcStateResult, ManifestGcResult, StateCleanupResult

if TYPE_CHECKING:
    from indextables_spark.core.log.read.listing import LogListing
    from indextables_spark.core.log.read.table_log import TransactionLog

log = logging.getLogger(__name__)

HOUR_MS = 3600 * 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _current_state_version(log_: "TransactionLog", listing: "LogListing") -> int | None:
    try:
        lc = read_last_checkpoint(log_)
    except CorruptStateError:
        lc = None
    if lc is not None and lc.effective_format == FORMAT_AVRO_STATE:
        return lc.version
    return None


def reachable_manifests(log_: "TransactionLog", listing: "LogListing", versions: Iterable[int]) -> set[str]:
    """Storage keys of every manifest referenced by the given states. A state whose manifest
    cannot be parsed is skipped with a warning (it cannot be read anyway)."""

    keys: set[str] = set()
    for v in versions:
        key = listing.state_manifests.get(v)
        if key is None:
            continue
        try:
            sm = read_state_manifest(log_.storage, key)
        except CorruptStateError as e:
            log.warning("manifest GC: skipping unreadable state %s: %s", key, e)
            continue
        for m in sm.manifests:
            keys.add(resolve_manifest_key(m.path, sm.state_version))
    return keys


def cleanup_old_states(
    log_: "TransactionLog", dry_run: bool = False, now_ms: int | None = None, listing: "LogListing | None" = None
) -> StateCleanupResult:
    listing = listing or log_.listing()
    cfg = StateConfig.from_options(log_.options)
    now = _now_ms() if now_ms is None else now_ms
    cutoff = now - int(cfg.retention_hours * HOUR_MS)
    versions = sorted(listing.state_files, reverse=True)  # newest first
    protected = {versions[0]} if versions else set()
    current = _current_state_version(log_, listing)
    if current is not None:
        protected.add(current)
    old = []
    for v in versions:
        if v in protected:
            continue
        info = listing.state_dir_info(v)
        created = info.modified_ms if info else max((f.modified_ms for f in listing.state_files[v]), default=0)
        if created < cutoff:
            old.append(v)
    doomed = old[max(0, cfg.retention_versions) :]
    retained = [v for v in versions if v not in doomed]
    still_needed = reachable_manifests(log_, listing, retained) if doomed else set()
    keys = [f.key for v in doomed for f in listing.state_files[v] if f.key not in still_needed]
    if keys and not dry_run:
        log_.storage.delete(keys)
    return StateCleanupResult(
        state_dirs_removed=len(doomed),
        state_versions_removed=sorted(doomed),
        files_removed=len(keys),
        state_dirs_retained=len(retained),
        dry_run=dry_run,
    )


def gc_manifests(
    log_: "TransactionLog", dry_run: bool = False, now_ms: int | None = None, min_age_hours: float | None = None
) -> ManifestGcResult:
    listing = log_.listing()
    cfg = StateConfig.from_options(log_.options)
    now = _now_ms() if now_ms is None else now_ms
    age_h = cfg.gc_min_manifest_age_hours if min_age_hours is None else min_age_hours
    cutoff = now - int(age_h * HOUR_MS)
    reachable = reachable_manifests(log_, listing, listing.state_manifests)
    orphans = [f for f in listing.manifests if f.key not in reachable and f.key.endswith(".avro")]
    doomed = [f for f in orphans if f.modified_ms <= cutoff]
    if doomed and not dry_run:
        log_.storage.delete([f.key for f in doomed])
    return ManifestGcResult(
        manifests_total=len(listing.manifests),
        manifests_reachable=len([f for f in listing.manifests if f.key in reachable]),
        orphaned_manifests=len(orphans),
        deleted_manifests=0 if dry_run else len(doomed),
        would_delete_manifests=len(doomed),
        young_orphans_kept=len(orphans) - len(doomed),
        dry_run=dry_run,
    )


def gc_state(log_: "TransactionLog", dry_run: bool = False, now_ms: int | None = None) -> GcStateResult:
    """Old state directories, then orphan manifests (what PURGE runs for the state layer)."""

    protocol, _, _ = log_.header()
    check_writable(protocol, f"table {log_.storage.uri}")
    states = cleanup_old_states(log_, dry_run, now_ms)
    manifests = gc_manifests(log_, dry_run, now_ms)
    return GcStateResult.of(log_.storage.uri, states, manifests)
