"""Table maintenance on top of commits: checkpoints (Avro state or JSON), compaction, protocol
upgrade, state GC, and the post-commit hook that runs them (`after_commit`), which upper layers
install on the logs they open (`shared_logs.log_with_maintenance`): a commit itself runs no hooks.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from indextables_spark.core.log.model.actions import Protocol
from indextables_spark.core.log.read.avro_state import read_state_manifest
from indextables_spark.core.log.maintenance.gc import cleanup_old_states, gc_manifests, reachable_manifests
from indextables_spark.core.log.maintenance.last_checkpoint import write_json_checkpoint
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.commit.reference_splits import may_hold_reference_splits, reference_split_paths
from indextables_spark.core.log.state.state_compaction import is_clean
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.read.state_loader import read_last_checkpoint
from indextables_spark.core.log.state.state_manifest import FORMAT_AVRO_STATE, FORMAT_JSON
from indextables_spark.core.log.maintenance.state_writer import StateWriteResult, write_state
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.transaction import Transaction
from indextables_spark.errors import CorruptStateError, IndexTablesError, ProtocolVersionError, TableNotFoundError
from indextables_spark.results.record import elapsed_ms
from indextables_spark.results.state import CheckpointResult, TruncateTimeTravelResult

if TYPE_CHECKING:
    from indextables_spark.core.log.read.listing import LogListing

log = logging.getLogger(__name__)


# ---- writing -------------------------------------------------------------------------------------------


def _needs_upgrade(protocol: Protocol) -> bool:
    """Below V4, or a V4 table whose features omit avroState. A V4 protocol listing no features
    at all is the reference implementation's (its V4 means Avro state: `ProtocolVersion.scala`
    V4_READER_FEATURES), not one to upgrade."""
    if protocol.min_reader_version < 4:
        return True
    return protocol.reader_features is not None and "avroState" not in protocol.reader_features


def upgrade_protocol(log_: TransactionLog) -> int:
    """Commit protocol V4 (avroState, schemaDeduplication) on a V1–V3 table. Returns the version."""
    protocol, _, _ = log_.header()
    feats_r = sorted(set(protocol.reader_features or []) | {"avroState", "schemaDeduplication"})
    feats_w = sorted(set(protocol.writer_features or []) | {"avroState", "schemaDeduplication"})
    new = Protocol(max(4, protocol.min_reader_version), max(4, protocol.min_writer_version), feats_r, feats_w)
    txn = Transaction(log_, resolver="merge", operation="UPGRADE PROTOCOL")
    txn.set_protocol(new)
    txn.operation_parameters.update({"from": protocol.to_json(), "to": new.to_json()})
    txn.skip_post_commit = True
    v = txn.commit()
    log.info("upgraded %s to protocol %s at version %d", log_.storage.uri, new.to_json(), v)
    return v


def checkpoint(
    log_: TransactionLog,
    version: int | None = None,
    force_compaction: bool = False,
    listing: "LogListing | None" = None,
) -> CheckpointResult:
    """Write a checkpoint at `version` (latest by default): an Avro state, or a JSON checkpoint
    when `spark.indextables.state.format=json`."""
    cfg = StateConfig.from_options(log_.options)
    listing = listing or log_.listing()
    latest = listing.latest_version if listing.versions else log_.latest_version()
    if latest < 0:
        raise TableNotFoundError(f"no indextables table at {log_.storage.uri}")
    version = latest if version is None else version
    try:
        previous = read_last_checkpoint(log_)
    except CorruptStateError:
        previous = None
    previous_format = previous.effective_format if previous else "none"
    protocol, _, _ = log_.header(version, listing)
    check_writable(protocol, f"table {log_.storage.uri}")
    started = time.perf_counter()
    if cfg.format == "json":
        snap = log_.snapshot(version)
        lc = write_json_checkpoint(log_, snap)
        return CheckpointResult(
            table_path=log_.storage.uri,
            status="SUCCESS",
            previous_format=previous_format,
            new_format=FORMAT_JSON,
            version=lc.version,
            num_files=lc.num_files,
            compacted=False,
            duration_ms=elapsed_ms(started),
        )
    upgraded_from = None
    if _needs_upgrade(protocol):
        if version != latest:
            raise ProtocolVersionError(
                f"table {log_.storage.uri} is at protocol {protocol.min_reader_version}/{protocol.min_writer_version}; "
                f"an Avro state can only be written at the latest version after upgrading it to V4"
            )
        upgraded_from = protocol.to_json()
        version = upgrade_protocol(log_)
        listing = None
    res = write_state(log_, version, force_compaction=force_compaction, listing=listing)
    return _written(log_, res, started, previous_format=previous_format, upgraded_from_protocol=upgraded_from)


def compact(log_: TransactionLog) -> CheckpointResult:
    """Full clean rewrite of the state at the latest version (no-op when already clean)."""
    cfg = StateConfig.from_options(log_.options)
    latest = log_.latest_version()
    protocol, metadata, _ = log_.header(latest)
    check_writable(protocol, f"table {log_.storage.uri}")
    if cfg.format == "json" or _needs_upgrade(protocol):
        return checkpoint(log_, latest, force_compaction=True)
    listing = log_.listing()
    started = time.perf_counter()
    if latest in listing.state_manifests:
        sm = read_state_manifest(log_.storage, listing.state_manifests[latest])
        if is_clean(sm, cfg, list(metadata.partition_columns)):
            return CheckpointResult(
                table_path=log_.storage.uri,
                status="SKIPPED",
                reason="state is already compacted",
                version=latest,
                compacted=False,
                num_files=sm.num_files,
                num_manifests=len(sm.manifests),
                num_tombstones=0,
                manifests_written=0,
                bytes_written=0,
                duration_ms=elapsed_ms(started),
            )
        res = write_state(log_, latest, force_compaction=True, overwrite=True)
    else:
        res = write_state(log_, latest, force_compaction=True)
    return _written(log_, res, started)


def _written(log_: TransactionLog, res: StateWriteResult, started: float, **more: Any) -> CheckpointResult:
    """The result of a checkpoint / compaction that wrote (or found) the Avro state `res`."""
    return CheckpointResult(
        table_path=log_.storage.uri,
        status="SUCCESS",
        new_format=FORMAT_AVRO_STATE,
        version=res.version,
        state_dir=res.state_dir,
        compacted=res.compacted,
        reason=res.reason,
        num_files=res.num_files,
        total_bytes=res.total_bytes,
        num_manifests=res.num_manifests,
        num_tombstones=res.num_tombstones,
        manifests_written=res.manifests_written,
        entries_written=res.entries_written,
        bytes_written=res.bytes_written,
        attempts=res.attempts,
        already_existed=res.already_existed,
        base_version=res.base_version,
        duration_ms=elapsed_ms(started),
        **more,
    )


MERGE_OPERATIONS = frozenset({"MERGE SPLITS", "MERGE"})


def after_commit(log_: TransactionLog, version: int, operation: str | None = None) -> None:
    """Post-commit work: the automatic checkpoint every `checkpoint.interval` versions, and a
    compacting checkpoint after MERGE SPLITS (`state.compaction.afterMerge`). A failed automatic
    checkpoint never fails the commit (the version file is already durable): it is logged as a
    warning and the next interval tries again."""
    o = log_.options
    if not o.get_bool("checkpoint.enabled") or version <= 0:
        return
    interval = o.get_int("checkpoint.interval")
    after_merge = (operation or "").upper() in MERGE_OPERATIONS and o.get_bool("state.compaction.afterMerge")
    every = (operation or "").upper() not in _DATA_OPERATIONS and _holds_reference_splits(log_, version)
    if not after_merge and not every and (interval <= 0 or version % interval != 0):
        return
    try:
        cfg = StateConfig.from_options(o)
        listing = log_.listing()
        checkpoint(log_, version, force_compaction=after_merge and cfg.format == "avro", listing=listing)
        if cfg.format == "avro":
            # the listing from before the checkpoint: the new state is the newest (protected)
            cleanup_old_states(log_, listing=listing)
    except IndexTablesError as e:
        log.warning("automatic checkpoint of %s at version %d failed: %s", log_.storage.uri, version, e)
    except Exception as e:  # noqa: BLE001 - the commit is durable; report, never fail it
        log.warning("automatic checkpoint of %s at version %d failed: %r", log_.storage.uri, version, e, exc_info=True)


# Commits that put our splits or delete logs into a table: refused on a table holding the
# reference's splits (core/log/commit/reference_splits.py), so they never need the check below (and a plain
# append pays nothing for it). Log-only operations (DROP PARTITIONS, a custom transaction) do.
_DATA_OPERATIONS = frozenset({"WRITE", "STREAMING UPDATE", "DELETE", "MERGE SPLITS", "CONVERT", "BUILD COMPANION"})


def _holds_reference_splits(log_: TransactionLog, version: int) -> bool:
    """Does the table hold splits the reference implementation wrote? Then every commit gets its
    state: IndexTables4Spark v0.5.4 takes a table's version from `_last_checkpoint` and reads no
    version file after it (its `OptimizedTransactionLog`), so a version of ours without a state
    would stay invisible to it, and its next commit would write a state over our version number.
    Only the header is read unless the table knows a reference doc mapping."""
    _protocol, metadata, registry = log_.header(version)
    if not may_hold_reference_splits({**metadata.doc_mappings, **registry}):
        return False
    return bool(reference_split_paths(log_.snapshot(version)))


def truncate_time_travel(log_: TransactionLog, dry_run: bool = False) -> TruncateTimeTravelResult:
    """Collapse the table's history to its latest version."""
    latest = log_.latest_version()
    protocol, _, _ = log_.header(latest)
    check_writable(protocol, f"table {log_.storage.uri}")
    cp = None
    if not dry_run:
        cp = checkpoint(log_, latest)
        latest = cp.version
    listing = log_.listing()
    doomed: list[str] = []
    versions_removed = [v for v in listing.versions if v < latest]
    doomed += [listing.version_info[v].key for v in versions_removed]
    cps_removed = [v for v in listing.json_checkpoints if v < latest]
    doomed += [listing.json_checkpoints[v] for v in cps_removed]
    for v, parts in listing.checkpoint_parts.items():
        if v < latest:
            doomed += parts
    states_removed = [v for v in listing.state_files if v < latest]
    retained_states = [v for v in listing.state_manifests if v >= latest]
    needed = reachable_manifests(log_, listing, retained_states)
    doomed += [f.key for v in states_removed for f in listing.state_files[v] if f.key not in needed]
    if doomed and not dry_run:
        log_.storage.delete(doomed)
    if dry_run:
        orphaned = len([f for f in listing.manifests if f.key not in needed])
        deleted = 0
    else:
        gc = gc_manifests(log_)
        orphaned, deleted = gc.orphaned_manifests, gc.deleted_manifests
    return TruncateTimeTravelResult(
        table_path=log_.storage.uri,
        status="DRY_RUN" if dry_run else "SUCCESS",
        dry_run=dry_run,
        version=latest,
        checkpoint=cp,
        version_files_removed=len(versions_removed),
        checkpoints_removed=len(cps_removed),
        state_dirs_removed=len(states_removed),
        files_removed=len(doomed),
        orphaned_manifests=orphaned,
        deleted_manifests=deleted,
    )
