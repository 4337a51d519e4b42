"""`_last_checkpoint`: what it says of a V4 state, moving it forward only (never back, never from an
Avro state to a JSON checkpoint of the same version), and the legacy JSON checkpoints it may point at."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from indextables_spark.core.log.model.actions import Action, StatsFiles
from indextables_spark.core.log.model.codec import encode_actions
from indextables_spark.core.log.read.json_checkpoint import checkpoint_key
from indextables_spark.core.log.model.paths import LAST_CHECKPOINT, state_dir_name
from indextables_spark.core.log.state.state_compaction import live_extras
from indextables_spark.core.log.read.state_loader import read_last_checkpoint
from indextables_spark.core.log.state.state_manifest import (
    FORMAT_AVRO_STATE,
    FORMAT_JSON,
    LastCheckpoint,
    StateManifest,
)
from indextables_spark.errors import CorruptStateError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.log.read.table_log import TransactionLog


log = logging.getLogger(__name__)


def last_checkpoint_for(sm: StateManifest) -> LastCheckpoint:
    return LastCheckpoint(
        version=sm.state_version,
        size=sm.num_files,  # what the reference writes for an Avro state (tantivy4java avro/state_writer.rs)
        size_in_bytes=sm.total_bytes,
        num_files=sm.num_files,
        created_time=sm.created_at,
        format=FORMAT_AVRO_STATE,
        state_dir=state_dir_name(sm.state_version),
        # No protocolVersion (readers accept one: docs/reference/table-format.md,
        # "_last_checkpoint"): the reference's LastCheckpointInfo (v0.5.4
        # transaction/TransactionLogCheckpoint.scala) has no such field and is read with a strict
        # Jackson mapper (util/JsonUtil.scala), which then ignores the whole file. The state
        # manifest carries protocolVersion and the protocol.
    )


def write_json_checkpoint(log_: "TransactionLog", snap: "Snapshot") -> LastCheckpoint:
    """Write `<v>.checkpoint.json` (all live state as actions) and point `_last_checkpoint` at it."""
    storage = log_.storage
    files = snap.files
    delete_logs, stats = live_extras(snap.delete_logs, snap.stats_files, snap.files_table)
    actions: list[Action] = [
        snap.protocol_action,
        snap.metadata_action,
        *files,
        *snap.skips.values(),
        *delete_logs,
        *(StatsFiles(k, v) for k, v in stats.items()),
    ]
    compress = log_.options.get_bool("transaction.compression.enabled")
    key = checkpoint_key(snap.version)
    if not storage.put_if_absent(key, encode_actions(actions, compress)):
        log.info("JSON checkpoint %s already exists", storage.full_uri(key))
    lc = LastCheckpoint(
        version=snap.version,
        size=len(actions),
        size_in_bytes=snap.total_bytes,
        num_files=len(files),
        created_time=int(time.time() * 1000),
        format=FORMAT_JSON,  # no protocolVersion: see last_checkpoint_for
    )
    storage.put(LAST_CHECKPOINT, lc.encode())
    return lc


def update_last_checkpoint(log_: "TransactionLog", lc: LastCheckpoint) -> int:
    """Point `_last_checkpoint` at lc unless it already points at a newer version. Returns bytes written."""
    try:
        current = read_last_checkpoint(log_)
    except CorruptStateError as e:
        log.warning("replacing unreadable %s (%s)", LAST_CHECKPOINT, e)
        current = None
    if current is not None and current.version > lc.version:
        return 0
    if (
        current is not None
        and current.version == lc.version
        and current.effective_format == FORMAT_AVRO_STATE
        and lc.effective_format != FORMAT_AVRO_STATE
    ):
        return 0  # keep pointing at the Avro state of the same version
    data = lc.encode()
    log_.storage.put(LAST_CHECKPOINT, data)
    return len(data)
