"""DESCRIBE INDEXTABLES STATE (with the current SkipAction state) and DESCRIBE INDEXTABLES
TRANSACTION LOG (one typed row per action)."""

from __future__ import annotations

import json
import time
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Iterable

import pyarrow as pa

from indextables_spark.core.log.model.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeleteLog,
    Metadata,
    Protocol,
    RemoveFile,
    SkipAction,
    StatsFiles,
)
from indextables_spark.core.log.read.avro_state import read_state_manifest
from indextables_spark.core.log.read.base_state import BaseState
from indextables_spark.core.log.state.file_entries import table_to_add_files
from indextables_spark.core.log.model.paths import version_key
from indextables_spark.core.log.state.state_compaction import needs_compaction
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.read.state_loader import load_base_state, read_last_checkpoint
from indextables_spark.core.log.state.state_manifest import FORMAT_AVRO_STATE
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.errors import CorruptStateError
from indextables_spark.results.inspect import TransactionLogRow
from indextables_spark.results.state import DescribeStateResult, SkippedFile
from indextables_spark.ops.command import CommandParser, Context, Target
from indextables_spark.ops.table_commands import TableCommand


def current_skips(log_: TransactionLog) -> list[SkipAction]:
    """The SkipActions in force at the latest version, without decoding any manifest: the base
    state's `skipActions` plus the version files after it (a later add/remove of a path clears it)."""

    listing = log_.listing()
    latest = log_.resolve_version(None, listing)
    base = load_base_state(log_, latest, listing)
    delta = log_.collect_changes(base, latest)
    return sorted(delta.skips.values(), key=lambda s: s.path)


def describe_state(log_: TransactionLog, now_ms: int | None = None) -> DescribeStateResult:
    """DESCRIBE INDEXTABLES STATE: the state or checkpoint the latest snapshot starts from (format,
    version, counts, tombstones, whether it needs compaction), and the SkipActions in force
    (numSkippedFiles, numSkipsCoolingDown: retryAfter still ahead, skippedFiles). Without any
    (format `none`), the counts are the latest version's, read from the version files."""
    cfg = StateConfig.from_options(log_.options)
    listing = log_.listing()
    latest = log_.resolve_version(None, listing)
    protocol, metadata, _ = log_.header(latest)
    try:
        lc = read_last_checkpoint(log_)
        last_checkpoint_status = "absent" if lc is None else "ok"
    except CorruptStateError as e:
        lc = None
        last_checkpoint_status = f"corrupt: {e}"
    described: dict[str, Any] = {"format": "none"}
    avro_versions = sorted(v for v in listing.state_manifests if v <= latest)
    json_versions = sorted(v for v in listing.json_checkpoints if v <= latest)
    if avro_versions and (not json_versions or avro_versions[-1] >= json_versions[-1]):
        v = avro_versions[-1]
        sm = read_state_manifest(log_.storage, listing.state_manifests[v])
        whether, why = needs_compaction(sm, 0, cfg)
        described = dict(
            format=FORMAT_AVRO_STATE,
            version=v,
            state_dir=listing.state_manifests[v].split("/")[-2],
            num_files=sm.num_files,
            total_bytes=sm.total_bytes,
            num_manifests=len(sm.manifests),
            num_entries=sm.num_entries,
            num_tombstones=len(sm.tombstones),
            tombstone_ratio=(len(sm.tombstones) / sm.num_files) if sm.num_files else 0.0,
            created_at=sm.created_at,
            state_protocol_version=sm.protocol_version,
            needs_compaction=whether,
            compaction_reason=why or None,
            schema_registry_size=len(sm.schema_registry),
            versions_since_checkpoint=latest - v,
        )
    elif json_versions:
        v = json_versions[-1]
        same = lc is not None and lc.version == v
        described = dict(
            format=lc.effective_format if lc is not None and same else "json",
            version=v,
            num_files=lc.num_files if lc is not None and same else None,
            total_bytes=lc.size_in_bytes if lc is not None and same else None,
            created_at=lc.created_time if lc is not None and same else None,
            versions_since_checkpoint=latest - v,
        )
    else:  # no state yet: reads replay the version files, which hold the counts
        snap = log_.snapshot(latest)
        described.update(num_files=snap.num_files, total_bytes=snap.total_bytes, versions_since_checkpoint=latest + 1)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    skips = current_skips(log_)
    return DescribeStateResult(
        table_path=log_.storage.uri,
        table_version=latest,
        protocol_version=protocol.min_reader_version,
        reader_features=sorted(protocol.reader_features or []),
        last_checkpoint_status=last_checkpoint_status,
        partition_columns=list(metadata.partition_columns),
        num_skipped_files=len(skips),
        num_skips_cooling_down=sum(1 for s in skips if s.retry_after is not None and s.retry_after > now),
        skipped_files=[SkippedFile.of(s) for s in skips],
        **described,
    )


# ---- DESCRIBE INDEXTABLES TRANSACTION LOG ------------------------------------------------------


def _same(*names: str) -> dict[str, str]:
    return {n: n for n in names}


# Each action type's TransactionLogRow columns: (action_type, {column: the action's attribute}).
_ROW_COLUMNS: dict[type[Action], tuple[str, dict[str, str]]] = {
    AddFile: (
        "add",
        _same(
            "path",
            "partition_values",
            "size",
            "modification_time",
            "data_change",
            "num_records",
            "stats",
            "min_values",
            "max_values",
            "has_footer_offsets",
            "footer_start_offset",
            "footer_end_offset",
            "split_tags",
            "tags",
            "num_merge_ops",
            "doc_mapping_ref",
            "uncompressed_size_bytes",
            "added_at_version",
        ),
    ),
    RemoveFile: ("remove", _same("path", "partition_values", "size", "data_change", "deletion_timestamp")),
    SkipAction: (
        "skip",
        {
            "path": "path",
            "skip_timestamp": "skip_timestamp",
            "skip_reason": "reason",
            "skip_operation": "operation",
            "skip_retry_after": "retry_after",
            "skip_count": "skip_count",
        },
    ),
    Protocol: (
        "protocol",
        {
            "protocol_min_reader_version": "min_reader_version",
            "protocol_min_writer_version": "min_writer_version",
            "protocol_reader_features": "reader_features",
            "protocol_writer_features": "writer_features",
        },
    ),
    Metadata: (
        "metadata",
        {
            "metadata_id": "id",
            "metadata_schema_string": "schema_string",
            "metadata_partition_columns": "partition_columns",
            "metadata_configuration": "configuration",
            "metadata_created_time": "created_time",
        },
    ),
    DeleteLog: (
        "delete_log",
        {
            **_same("path", "size", "added_at_version"),
            "delete_log_kind": "kind",
            "delete_log_split_path": "split_path",
            "delete_log_columns": "columns",
            "delete_log_num_entries": "num_entries",
        },
    ),
    StatsFiles: ("stats_files", {"stats_key": "key", "stats_files": "files"}),
}


def _action_row(a: Action, version: int, where: str, is_checkpoint: bool, commit: CommitInfo | None) -> dict[str, Any]:
    row: dict[str, Any] = {"version": version, "log_file_path": where, "is_checkpoint": is_checkpoint}
    if commit is not None:
        row.update(commit_timestamp=commit.timestamp, commit_operation=commit.operation)
    spec = next((s for cls, s in _ROW_COLUMNS.items() if isinstance(a, cls)), None)
    if spec is not None:
        action_type, columns = spec
        row.update(action_type=action_type, **{column: getattr(a, attr) for column, attr in columns.items()})
    elif isinstance(a, CommitInfo):
        row.update(
            action_type="commit_info",
            commit_timestamp=a.timestamp,
            commit_operation=a.operation,
            commit_operation_parameters=json.dumps(a.operation_parameters, sort_keys=True, default=str),
        )
    return row


def _version_rows(log_: TransactionLog, version: int) -> Iterable[dict[str, Any]]:
    actions = log_.read_actions(version)
    commit = next((a for a in actions if isinstance(a, CommitInfo)), None)
    where = log_.storage.full_uri(version_key(version))
    for a in actions:
        yield _action_row(a, version, where, False, commit)


def _base_rows(log_: TransactionLog, base: BaseState) -> Iterable[dict[str, Any]]:
    where = log_.storage.full_uri(base.state_key) if base.state_key else f"{base.source} of version {base.version}"
    header: list[Action] = [a for a in (base.protocol, base.metadata) if a is not None]
    extras: list[Action] = [
        *sorted(base.skips.values(), key=lambda s: s.path),
        *base.delete_logs,
        *(StatsFiles(k, v) for k, v in sorted(base.stats_files.items())),
    ]
    for a in header + table_to_add_files(base.load_files()) + extras:
        yield _action_row(a, base.version, where, True, None)


def describe_transaction_log(log_: TransactionLog, include_all: bool = False) -> pa.Table:
    """Rows of TransactionLogRow columns. Default: the current state, i.e. the checkpoint/state the
    latest snapshot starts from (is_checkpoint=true rows: protocol, metadata, live files, skips,
    delete logs, stats files)
    and every version file after it. INCLUDE ALL: every retained version file, oldest first."""

    listing = log_.listing()
    latest = log_.resolve_version(None, listing)
    rows: list[dict[str, Any]] = []
    if include_all:
        for v in listing.versions:
            rows.extend(_version_rows(log_, v))
    else:
        base = load_base_state(log_, latest, listing)
        if base is not None:
            rows.extend(_base_rows(log_, base))
        for v in range((base.version + 1) if base is not None else 0, latest + 1):
            rows.extend(_version_rows(log_, v))
    return TransactionLogRow.table([TransactionLogRow(**row) for row in rows])


# ---- the commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DescribeState(TableCommand):
    """DESCRIBE INDEXTABLES STATE <table>."""

    result: ClassVar[type[DescribeStateResult]] = DescribeStateResult

    def run(self, ctx: Context) -> DescribeStateResult:
        return describe_state(ctx.log(self.path))


@dataclass(frozen=True)
class DescribeTransactionLog:
    """DESCRIBE INDEXTABLES TRANSACTION LOG <table> [INCLUDE ALL]."""

    result: ClassVar[type[TransactionLogRow]] = TransactionLogRow
    path: Target
    _: KW_ONLY
    include_all: bool = False

    @classmethod
    def parse(cls, p: CommandParser) -> DescribeTransactionLog:
        path = p.target()
        include_all = p.accept("INCLUDE")
        if include_all:
            p.expect("ALL")
        return cls(path, include_all=include_all)

    def run(self, ctx: Context) -> pa.Table:
        return describe_transaction_log(ctx.log(self.path), self.include_all)
