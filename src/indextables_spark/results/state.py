"""Results about the table's state: CHECKPOINT / COMPACT, DESCRIBE INDEXTABLES STATE, the state's
garbage collection, TRUNCATE INDEXTABLES TIME TRAVEL (core/log/maintenance/maintenance.py,
core/log/maintenance/gc.py, ops/inspect/describe.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY
from typing import Any, ClassVar, Protocol

from indextables_spark.results.record import OperationResult, Record, empty_list, int32, json_text, result, timestamp


class SkipRecord(Protocol):
    """What SkippedFile reads of a log SkipAction (core/log/model/actions.py, a layer above)."""

    @property
    def path(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def operation(self) -> str | None: ...
    @property
    def skip_timestamp(self) -> int | None: ...
    @property
    def retry_after(self) -> int | None: ...
    @property
    def skip_count(self) -> int | None: ...


@dataclasses.dataclass(frozen=True)
class SkippedFile(Record):
    """A SkipAction in force: a split a merge left out, and until when."""

    path: str
    reason: str | None = None
    operation: str | None = None
    skip_timestamp: int | None = timestamp()
    retry_after: int | None = timestamp()
    skip_count: int | None = int32()

    @classmethod
    def of(cls, skip: SkipRecord) -> SkippedFile:
        """From a log SkipAction (core/log/model/actions.py)."""
        return cls(skip.path, skip.reason, skip.operation, skip.skip_timestamp, skip.retry_after, skip.skip_count)


@result
class CheckpointResult(OperationResult):
    """CHECKPOINT / COMPACT."""

    table_path: str
    status: str  # SUCCESS | SKIPPED (COMPACT of an already clean state)
    version: int
    previous_format: str | None = None
    new_format: str | None = None
    state_dir: str | None = None
    compacted: bool = False
    reason: str | None = None
    num_files: int | None = None
    total_bytes: int | None = None
    num_manifests: int | None = None
    num_tombstones: int | None = None
    manifests_written: int | None = None
    entries_written: int | None = None
    bytes_written: int | None = None
    attempts: int | None = None  # put-if-absent attempts of the state manifest
    already_existed: bool | None = None  # the state was there already (written by a concurrent writer)
    base_version: int | None = None  # the state an incremental write built on
    duration_ms: float = 0.0
    upgraded_from_protocol: dict[str, Any] | None = json_text()  # the protocol before a V4 upgrade


@result
class DescribeStateResult(OperationResult):
    """DESCRIBE INDEXTABLES STATE."""

    repr_fields: ClassVar[tuple[str, ...]] = (
        "table_path",
        "table_version",
        "format",
        "version",
        "num_files",
        "total_bytes",
        "num_manifests",
        "num_tombstones",
        "needs_compaction",
        "num_skipped_files",
    )

    table_path: str
    table_version: int
    format: str  # none (no checkpoint yet) | json | avro-state | …
    version: int | None = None  # the version of the state / checkpoint described
    state_dir: str | None = None
    num_files: int | None = None  # the state's live splits (format none: the table version's)
    total_bytes: int | None = None
    num_manifests: int = 0
    num_tombstones: int = 0
    tombstone_ratio: float = 0.0
    needs_compaction: bool = False
    compaction_reason: str | None = None
    created_at: int | None = timestamp()
    protocol_version: int | None = int32()
    reader_features: list[str] = empty_list()
    versions_since_checkpoint: int | None = None  # version files a read replays after it (none: all)
    last_checkpoint_status: str = "absent"
    partition_columns: list[str] = empty_list()
    num_skipped_files: int = 0
    num_skips_cooling_down: int = 0
    skipped_files: list[SkippedFile] = empty_list()
    num_entries: int | None = None
    state_protocol_version: int | None = int32()
    schema_registry_size: int | None = None


@result
class StateCleanupResult(OperationResult):
    """Old state directories removed (beyond retention)."""

    state_dirs_removed: int = 0
    state_versions_removed: list[int] = empty_list()
    files_removed: int = 0
    state_dirs_retained: int = 0
    dry_run: bool = False


@result
class ManifestGcResult(OperationResult):
    """Orphan manifests (referenced by no state) removed."""

    manifests_total: int = 0
    manifests_reachable: int = 0
    orphaned_manifests: int = 0
    deleted_manifests: int = 0
    would_delete_manifests: int = 0
    young_orphans_kept: int = 0
    dry_run: bool = False


@result
class GcStateResult(ManifestGcResult, StateCleanupResult):
    """The state part of PURGE: old states (StateCleanupResult), then orphan manifests
    (ManifestGcResult), one flat row of the fields of both, and the table."""

    _: KW_ONLY
    table_path: str

    @classmethod
    def of(cls, table_path: str, states: StateCleanupResult, manifests: ManifestGcResult) -> GcStateResult:
        return cls(**{**dataclasses.asdict(manifests), **dataclasses.asdict(states)}, table_path=table_path)


@result
class TruncateTimeTravelResult(OperationResult):
    """TRUNCATE INDEXTABLES TIME TRAVEL."""

    table_path: str
    status: str  # SUCCESS | DRY_RUN
    dry_run: bool
    version: int
    version_files_removed: int = 0
    checkpoints_removed: int = 0
    state_dirs_removed: int = 0
    files_removed: int = 0
    orphaned_manifests: int = 0
    deleted_manifests: int = 0
    checkpoint: CheckpointResult | None = json_text()  # the checkpoint written first (not in a dry run)
