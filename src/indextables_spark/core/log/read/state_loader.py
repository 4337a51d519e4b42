"""Finding the base state of a snapshot: the newest checkpoint or Avro state at or below a version
(writing them: core/log/maintenance/state_writer.py and maintenance.py).

Reading: candidates are every Avro state directory and JSON checkpoint found by listing the log
(plus what `_last_checkpoint` points at), newest first, keeping only those whose later version
files are all present. The first that loads wins. When one is missing, truncated or corrupt, the
reader logs a warning naming the file and falls back to an older candidate or to replaying the
version files from 0; when nothing covers the version, the error names the bad file.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from indextables_spark.core.log.read.avro_state import load_avro_state
from indextables_spark.core.log.read.json_checkpoint import checkpoint_key, load_json_checkpoint
from indextables_spark.core.log.model.paths import LAST_CHECKPOINT, state_dir_name
from indextables_spark.core.log.state.state_manifest import FORMAT_AVRO_STATE, LastCheckpoint
from indextables_spark.errors import (
    CorruptStateError,
    FileNotFoundInStorageError,
    ProtocolVersionError,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    from indextables_spark.core.log.read.base_state import BaseState, LogReader
    from indextables_spark.core.log.read.listing import LogListing

log = logging.getLogger(__name__)


# ---- _last_checkpoint ------------------------------------------------------------------------------------


def read_last_checkpoint(log_: "LogReader") -> LastCheckpoint | None:
    """The parsed `_last_checkpoint`, None when absent. Raises CorruptStateError naming it."""
    try:
        data = log_.storage.read(LAST_CHECKPOINT)
    except FileNotFoundInStorageError:
        return None
    return LastCheckpoint.parse(data, log_.storage.full_uri(LAST_CHECKPOINT))


# `_last_checkpoint` as read: (its content or None when absent, the CorruptStateError when unreadable).
LastCheckpointRead = tuple["LastCheckpoint | None", "CorruptStateError | None"]


def try_read_last_checkpoint(log_: "LogReader") -> LastCheckpointRead:
    """`_last_checkpoint` read without raising on a corrupt file (readers fall back to the listing).
    TransactionLog reads it while it lists the log: the two requests take one round trip."""
    try:
        return read_last_checkpoint(log_), None
    except CorruptStateError as e:
        return None, e


def latest_checkpoint_version(
    log_: "LogReader", listing: "LogListing | None" = None, last_checkpoint: LastCheckpointRead | None = None
) -> int | None:
    """Newest version covered by an Avro state or JSON checkpoint (used when no version files remain).
    last_checkpoint: `_last_checkpoint` as already read (try_read_last_checkpoint), else it is read."""
    if listing is None:
        listing = log_.listing()
    vs = list(listing.state_manifests) + list(listing.json_checkpoints)
    lc, _error = last_checkpoint if last_checkpoint is not None else try_read_last_checkpoint(log_)
    if lc is not None:
        vs.append(lc.version)
    return max(vs) if vs else None


# ---- reading the base ---------------------------------------------------------------------------------


def _candidates(listing: "LogListing", version: int, lc: LastCheckpoint | None) -> list[tuple[int, str, str]]:
    """(version, kind, key) newest first; an Avro state before a JSON checkpoint of the same version."""
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
                raise CorruptStateError(f"{LAST_CHECKPOINT}: stateDir {sd!r} does not match its version {lc.version}")
        else:
            out.setdefault((lc.version, "json"), checkpoint_key(lc.version))
    order = sorted(out, key=lambda k: (k[0], 1 if k[1] == "avro" else 0), reverse=True)
    return [(v, kind, out[(v, kind)]) for v, kind in order]


def first_base(listing: "LogListing", version: int, last_checkpoint: LastCheckpointRead) -> tuple[int, str]:
    """(version, "avro"|"json") of the base load_base_state tries first for `version` ((-1, "log"):
    none, replay from version 0): readers start fetching the version files after it while the base
    loads. Only a guess when that base turns out unusable (load_base_state then falls back)."""
    try:
        candidates = _candidates(listing, version, last_checkpoint[0])
    except CorruptStateError:
        return -1, "log"
    return next(((v, kind) for v, kind, _key in candidates if listing.has_versions(v + 1, version)), (-1, "log"))


def load_base_state(
    log_: "LogReader",
    version: int,
    listing: "LogListing | None" = None,
    avro_only: bool = False,
    exclude: set[tuple[int, str]] | None = None,
    failure: CorruptStateError | None = None,
    last_checkpoint: LastCheckpointRead | None = None,
    timestamp_of: Callable[[int], int] | None = None,
) -> "BaseState | None":
    """The newest usable base at or below `version` (None: replay from version 0).
    exclude: (version, "avro"|"json") candidates already found unusable; failure: the error that
    made them unusable, raised when nothing else covers the version; last_checkpoint:
    `_last_checkpoint` as already read (try_read_last_checkpoint), else it is read here;
    timestamp_of: a version's commit time for a base that does not record it (default: read from
    its version file, log_.commit_timestamp)."""
    if listing is None:
        listing = log_.listing()
    lc, lc_error = last_checkpoint if last_checkpoint is not None else try_read_last_checkpoint(log_)
    if lc_error is not None:
        log.warning("%s; looking for checkpoints by listing the log instead", lc_error)
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
                base = load_avro_state(log_, v, key, listing)
            else:
                base = load_json_checkpoint(log_, v, lc if lc and lc.version == v else None, listing)
            if base.timestamp == 0 and v in listing.version_info:
                base.timestamp = (timestamp_of or log_.commit_timestamp)(v)
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
                log_.storage.uri,
                version,
                version,
                errors[0] if errors else lc_error,
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
        from indextables_spark.core.log.model.paths import version_key

        raise VersionNotFoundError(
            f"version {version} of {log_.storage.uri} cannot be read: version file "
            f"{log_.storage.full_uri(version_key(gaps[0]))} is missing"
            + (f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else "")
            + f" while versions {first}..{listing.versions[-1]} are otherwise present"
        )
    raise VersionNotFoundError(
        f"version {version} of {log_.storage.uri} can no longer be reconstructed: "
        + (f"the oldest retained version file is {first}" if first is not None else "no version files remain")
        + (
            f" and the retained checkpoints/states are at versions {states}"
            if states
            else " and no checkpoint covers it"
        )
    )
