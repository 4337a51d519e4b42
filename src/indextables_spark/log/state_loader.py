"""Finding and writing the base state of a snapshot: the newest checkpoint or Avro state at or
below a version, and the checkpoints themselves.

Reading: candidates are every Avro state directory and JSON checkpoint found by listing the log
(plus what `_last_checkpoint` points at), newest first, keeping only those whose later version
files are all present. The first that loads wins. When one is missing, truncated or corrupt, the
reader logs a warning naming the file and falls back to an older candidate or to replaying the
version files from 0; when nothing covers the version, the error names the bad file.

Writing: `checkpoint()` (automatic every `checkpoint.interval` versions from `after_commit`, or on
request) writes an Avro state (or a JSON checkpoint with `state.format=json`), upgrading a V1–V3
table to protocol V4 first by committing a protocol action.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..errors import CorruptStateError, FileNotFoundInStorageError, IndexTablesError, ProtocolVersionError, VersionNotFoundError
from .paths import LAST_CHECKPOINT, state_dir_name
from .state_config import StateConfig
from .state_manifest import FORMAT_AVRO_STATE, FORMAT_JSON, LastCheckpoint

if TYPE_CHECKING:
    from .listing import LogListing
    from .table_log import BaseState, TransactionLog

log = logging.getLogger(__name__)


# ---- _last_checkpoint ------------------------------------------------------------------------------------


def read_last_checkpoint(log_: "TransactionLog") -> LastCheckpoint | None:
    """The parsed `_last_checkpoint`, None when absent. Raises CorruptStateError naming it."""
    try:
        data = log_.storage.read(LAST_CHECKPOINT)
    except FileNotFoundInStorageError:
        return None
    return LastCheckpoint.parse(data, log_.storage.full_uri(LAST_CHECKPOINT))


def update_last_checkpoint(log_: "TransactionLog", lc: LastCheckpoint) -> int:
    """Point `_last_checkpoint` at lc unless it already points at a newer version. Returns bytes written."""
    try:
        current = read_last_checkpoint(log_)
    except CorruptStateError as e:
        log.warning("replacing unreadable %s (%s)", LAST_CHECKPOINT, e)
        current = None
    if current is not None and current.version > lc.version:
        return 0
    if current is not None and current.version == lc.version and current.effective_format == FORMAT_AVRO_STATE \
            and lc.effective_format != FORMAT_AVRO_STATE:
        return 0  # keep pointing at the Avro state of the same version
    data = lc.encode()
    log_.storage.put(LAST_CHECKPOINT, data)
    return len(data)


def latest_checkpoint_version(log_: "TransactionLog", listing: "LogListing | None" = None) -> int | None:
    """Newest version covered by an Avro state or JSON checkpoint (used when no version files remain)."""
    if listing is None:
        listing = log_.listing()
    vs = list(listing.state_manifests) + list(listing.json_checkpoints)
    try:
        lc = read_last_checkpoint(log_)
    except CorruptStateError:
        lc = None
    if lc is not None:
        vs.append(lc.version)
    return max(vs) if vs else None


# ---- reading the base ---------------------------------------------------------------------------------


def _candidates(listing: "LogListing", version: int, lc: LastCheckpoint | None) -> list[tuple[int, str, str]]:
    """(version, kind, key) newest first; an Avro state before a JSON checkpoint of the same version."""
    from .json_checkpoint import checkpoint_key

    out: dict[tuple[int, str], str] = {}
    for v, key in listing.state_manifests.items():
        if v <= version:
            out[(v, "avro")] = key
    for v, key in listing.json_checkpoints.items():
        if v <= version:
            out[(v, "json")] = key
    if lc is not None and lc.version <= version:
        if lc.effective_format == FORMAT_AVRO_STATE:
            sd = lc.state_dir or state_dir_name(lc.version)
            out.setdefault((lc.version, "avro"), f"_transaction_log/{sd}/_manifest.avro")
            if not sd.endswith(f"{lc.version:020d}"):
                raise CorruptStateError(
                    f"{LAST_CHECKPOINT}: stateDir {sd!r} does not match its version {lc.version}"
                )
        else:
            out.setdefault((lc.version, "json"), checkpoint_key(lc.version))
    order = sorted(out, key=lambda k: (k[0], 1 if k[1] == "avro" else 0), reverse=True)
    return [(v, kind, out[(v, kind)]) for v, kind in order]


def load_base_state(
    log_: "TransactionLog",
    version: int,
    listing: "LogListing | None" = None,
    avro_only: bool = False,
    exclude: set | None = None,
    failure: CorruptStateError | None = None,
) -> "BaseState | None":
    """The newest usable base at or below `version` (None: replay from version 0).
    exclude: (version, "avro"|"json") candidates already found unusable; failure: the error that
    made them unusable, raised when nothing else covers the version."""
    from .avro_state import load_avro_state
    from .json_checkpoint import load_json_checkpoint

    if listing is None:
        listing = log_.listing()
    lc_error: CorruptStateError | None = None
    try:
        lc = read_last_checkpoint(log_)
    except CorruptStateError as e:
        lc, lc_error = None, e
        log.warning("%s; looking for checkpoints by listing the log instead", e)
    errors: list[CorruptStateError] = [failure] if failure is not None else []
    for v, kind, key in _candidates(listing, version, lc):
        if avro_only and (kind != "avro" or v != version):
            continue
        if exclude and (v, kind) in exclude:
            continue
        if not listing.has_versions(v + 1, version):
            continue  # cannot replay from there to `version`
        try:
            if kind == "avro":
                base = load_avro_state(log_, v, key)
            else:
                base = load_json_checkpoint(log_, v, lc if lc and lc.version == v else None, listing)
            if base.timestamp == 0 and v in listing.version_info:
                base.timestamp = log_.commit_timestamp(v)
            return base
        except ProtocolVersionError:
            raise
        except CorruptStateError as e:
            errors.append(e)
            if avro_only:
                raise
            log.warning("cannot use the %s checkpoint of version %d: %s; falling back", kind, v, e)
    if listing.has_versions(0, version):
        if errors or lc_error:
            log.warning(
                "reading %s version %d by replaying version files 0..%d (checkpoint unusable: %s)",
                log_.storage.uri, version, version, errors[0] if errors else lc_error,
            )
        return None
    if errors:
        raise errors[0]
    if lc_error is not None:
        raise lc_error
    first = listing.versions[0] if listing.versions else None
    states = sorted(set(listing.state_manifests) | set(listing.json_checkpoints))
    below = [s for s in states if s <= version]
    start = max(below[-1] + 1 if below else 0, first if first is not None else 0)
    gaps = [v for v in range(start, version + 1) if v not in listing.version_info]
    if first is not None and first <= version and gaps:
        # A hole in the middle of the retained history: a version file was lost.
        from .paths import version_key

        raise VersionNotFoundError(
            f"version {version} of {log_.storage.uri} cannot be read: version file "
            f"{log_.storage.full_uri(version_key(gaps[0]))} is missing"
            + (f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else "")
            + f" while versions {first}..{listing.versions[-1]} are otherwise present"
        )
    raise VersionNotFoundError(
        f"version {version} of {log_.storage.uri} can no longer be reconstructed: "
        + (f"the oldest retained version file is {first}" if first is not None else "no version files remain")
        + (f" and the retained checkpoints/states are at versions {states}" if states else " and no checkpoint covers it")
    )


# ---- writing -------------------------------------------------------------------------------------------


def _needs_upgrade(protocol) -> bool:
    feats = set(protocol.reader_features or [])
    return protocol.min_reader_version < 4 or "avroState" not in feats


def upgrade_protocol(log_: "TransactionLog") -> int:
    """Commit protocol V4 (avroState, schemaDeduplication) on a V1–V3 table. Returns the version."""
    from .actions import Protocol
    from .transaction import Transaction

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


def checkpoint(log_: "TransactionLog", version: int | None = None, force_compaction: bool = False,
               listing: "LogListing | None" = None) -> dict:
    """Write a checkpoint at `version` (latest by default): an Avro state, or a JSON checkpoint
    when `spark.indextables.state.format=json`. Returns a summary dict."""
    from .avro_state import write_state
    from .json_checkpoint import write_json_checkpoint
    from .protocol_gate import check_writable

    cfg = StateConfig.from_options(log_.options)
    listing = listing or log_.listing()
    latest = listing.latest_version if listing.versions else log_.latest_version()
    if latest < 0:
        from ..errors import TableNotFoundError

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
        return {
            "tablePath": log_.storage.uri, "status": "SUCCESS", "previousFormat": previous_format,
            "newFormat": FORMAT_JSON, "version": lc.version, "numFiles": lc.num_files,
            "compacted": False, "durationMs": round((time.perf_counter() - started) * 1000, 1),
        }
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
    out = {
        "tablePath": log_.storage.uri, "status": "SUCCESS", "previousFormat": previous_format,
        "newFormat": FORMAT_AVRO_STATE, **res.to_dict(),
        "durationMs": round((time.perf_counter() - started) * 1000, 1),
    }
    if upgraded_from is not None:
        out["upgradedFromProtocol"] = upgraded_from
    return out


def compact(log_: "TransactionLog") -> dict:
    """Full clean rewrite of the state at the latest version (no-op when already clean)."""
    from .avro_state import is_clean, read_state_manifest, write_state
    from .protocol_gate import check_writable

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
            return {
                "tablePath": log_.storage.uri, "status": "SKIPPED", "reason": "state is already compacted",
                "version": latest, "compacted": False, "numFiles": sm.num_files, "numManifests": len(sm.manifests),
                "numTombstones": 0, "manifestsWritten": 0, "bytesWritten": 0,
                "durationMs": round((time.perf_counter() - started) * 1000, 1),
            }
        res = write_state(log_, latest, force_compaction=True, overwrite=True)
    else:
        res = write_state(log_, latest, force_compaction=True)
    return {"tablePath": log_.storage.uri, "status": "SUCCESS", "newFormat": FORMAT_AVRO_STATE, **res.to_dict(),
            "durationMs": round((time.perf_counter() - started) * 1000, 1)}


MERGE_OPERATIONS = frozenset({"MERGE SPLITS", "MERGE"})


def after_commit(log_: "TransactionLog", version: int, operation: str | None = None) -> None:
    """Post-commit work: the automatic checkpoint every `checkpoint.interval` versions, and a
    compacting checkpoint after MERGE SPLITS (`state.compaction.afterMerge`). A failed automatic
    checkpoint never fails the commit (the version file is already durable): it is logged as a
    warning and the next interval tries again."""
    o = log_.options
    if not o.get_bool("checkpoint.enabled", True) or version <= 0:
        return
    interval = o.get_int("checkpoint.interval", 10)
    after_merge = (operation or "").upper() in MERGE_OPERATIONS and o.get_bool("state.compaction.afterMerge", True)
    if not after_merge and (interval <= 0 or version % interval != 0):
        return
    try:
        cfg = StateConfig.from_options(o)
        listing = log_.listing()
        checkpoint(log_, version, force_compaction=after_merge and cfg.format == "avro", listing=listing)
        if cfg.format == "avro":
            from .gc import cleanup_old_states

            # the listing from before the checkpoint: the new state is the newest (protected)
            cleanup_old_states(log_, listing=listing)
    except IndexTablesError as e:
        log.warning("automatic checkpoint of %s at version %d failed: %s", log_.storage.uri, version, e)
    except Exception as e:  # noqa: BLE001 - the commit is durable; report, never fail it
        log.warning("automatic checkpoint of %s at version %d failed: %r", log_.storage.uri, version, e, exc_info=True)
