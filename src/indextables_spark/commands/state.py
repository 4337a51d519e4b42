"""State maintenance operations behind CHECKPOINT / COMPACT / DESCRIBE INDEXTABLES STATE /
TRUNCATE INDEXTABLES TIME TRAVEL and the state part of PURGE. Each returns a plain dict (one row of
output for the SQL/CLI front ends)."""

from __future__ import annotations

from ..errors import CorruptStateError
from ..log import gc, maintenance, state_loader
from ..log.avro_state import read_state_manifest
from ..log.state_writer import needs_compaction
from ..log.state_config import StateConfig
from ..log.state_manifest import FORMAT_AVRO_STATE
from ..log.table_log import TransactionLog


def checkpoint(log: TransactionLog) -> dict:
    """CHECKPOINT INDEXTABLES: a state at the latest version (upgrades V1–V3 tables to V4)."""
    return maintenance.checkpoint(log)


def compact(log: TransactionLog) -> dict:
    """COMPACT INDEXTABLES: a clean, partition-sorted rewrite of the state."""
    return maintenance.compact(log)


def describe_state(log: TransactionLog) -> dict:
    """DESCRIBE INDEXTABLES STATE."""
    cfg = StateConfig.from_options(log.options)
    listing = log.listing()
    latest = log._resolve_version(None, listing)
    protocol, metadata, _ = log.header(latest)
    out: dict = {
        "tablePath": log.storage.uri,
        "tableVersion": latest,
        "format": "none",
        "version": None,
        "stateDir": None,
        "numFiles": None,
        "totalBytes": None,
        "numManifests": 0,
        "numTombstones": 0,
        "tombstoneRatio": 0.0,
        "createdAt": None,
        "protocolVersion": protocol.min_reader_version,
        "readerFeatures": sorted(protocol.reader_features or []),
        "needsCompaction": False,
        "versionsSinceCheckpoint": None,
        "lastCheckpointStatus": "absent",
    }
    try:
        lc = state_loader.read_last_checkpoint(log)
        if lc is not None:
            out["lastCheckpointStatus"] = "ok"
    except CorruptStateError as e:
        lc = None
        out["lastCheckpointStatus"] = f"corrupt: {e}"
    avro_versions = sorted(v for v in listing.state_manifests if v <= latest)
    json_versions = sorted(v for v in listing.json_checkpoints if v <= latest)
    if avro_versions and (not json_versions or avro_versions[-1] >= json_versions[-1]):
        v = avro_versions[-1]
        sm = read_state_manifest(log.storage, listing.state_manifests[v])
        whether, why = needs_compaction(sm, 0, cfg)
        out.update(
            format=FORMAT_AVRO_STATE,
            version=v,
            stateDir=listing.state_manifests[v].split("/")[-2],
            numFiles=sm.num_files,
            totalBytes=sm.total_bytes,
            numManifests=len(sm.manifests),
            numEntries=sm.num_entries,
            numTombstones=len(sm.tombstones),
            tombstoneRatio=(len(sm.tombstones) / sm.num_files) if sm.num_files else 0.0,
            createdAt=sm.created_at,
            stateProtocolVersion=sm.protocol_version,
            needsCompaction=whether,
            compactionReason=why or None,
            schemaRegistrySize=len(sm.schema_registry),
            versionsSinceCheckpoint=latest - v,
        )
    elif json_versions:
        v = json_versions[-1]
        fmt = lc.effective_format if lc is not None and lc.version == v else "json"
        out.update(
            format=fmt,
            version=v,
            numFiles=lc.num_files if lc is not None and lc.version == v else None,
            totalBytes=lc.size_in_bytes if lc is not None and lc.version == v else None,
            createdAt=lc.created_time if lc is not None and lc.version == v else None,
            versionsSinceCheckpoint=latest - v,
            needsCompaction=False,
        )
    out["partitionColumns"] = list(metadata.partition_columns)
    return out


def truncate_time_travel(log: TransactionLog, dry_run: bool = False) -> dict:
    return maintenance.truncate_time_travel(log, dry_run=dry_run)


def gc_state(log: TransactionLog, dry_run: bool = False) -> dict:
    return gc.gc_state(log, dry_run=dry_run)
