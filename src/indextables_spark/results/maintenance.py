"""Results of the commands that change the table: a Spark-free write, MERGE SPLITS, PURGE, DROP
PARTITIONS, DELETE, REPAIR, BUILD COMPANION, CONVERT, and the maintenance after a write (api/,
ops/write/, ops/companion/, ops/maintenance/)."""

from __future__ import annotations

import dataclasses

from indextables_spark.results.record import OperationResult, empty_list, json_text, result
from indextables_spark.results.state import SkippedFile


@result
class WriteResult(OperationResult):
    """A Spark-free write (`it.write_table`, `IndexTable.write`, a transaction's `tx.write`): what it
    wrote and the version that holds it."""

    table_path: str
    status: str  # SUCCESS | STAGED (a transaction's step: committed with the transaction)
    version: int  # the committed version (STAGED: the version the transaction read; -1: no table yet)
    read_version: int  # the version the write was planned against (-1: it created the table)
    mode: str  # append | overwrite | error
    operation: str  # CREATE TABLE | WRITE | OVERWRITE
    rows_written: int = 0
    splits_added: int = 0
    bytes_written: int = 0  # the splits' bytes
    partitions_written: int = 0  # distinct partition values among the splits added (0: unpartitioned)
    splits_removed: int = 0  # overwrite: the live splits it replaced
    # the splits' vector index builds, added up (each split's: its add's tag `vectorIndexBuildMs`)
    vector_index_build_ms: int = 0
    duration_ms: float = 0.0


@result
class MergeSplitsResult(OperationResult):
    """MERGE SPLITS."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION | DRY_RUN
    version: int | None = None
    read_version: int | None = None
    predicate: str | None = None
    target_size: int | None = None
    merge_groups: int = 0
    merged_groups: int = 0
    source_splits_merged: int = 0
    splits_created: int = 0
    bytes_merged: int = 0
    bytes_created: int = 0
    records_merged: int = 0
    splits_skipped: int = 0
    splits_cooling_down: int = 0
    splits_other_mapping: int = 0
    splits_index_only: int = 0  # left as they are: index-only columns cannot be rebuilt from rows
    skipped_files: list[SkippedFile] = empty_list()
    duration_ms: float = 0.0


@result
class PurgeResult(OperationResult):
    """PURGE INDEXTABLE."""

    table_path: str
    status: str  # SUCCESS | DRY_RUN
    dry_run: bool
    retention_hours: float
    tx_log_retention_hours: float
    split_files_found: int = 0
    orphaned_splits_found: int = 0
    splits_deleted: int = 0
    bytes_deleted: int = 0
    young_orphans_kept: int = 0
    version_files_deleted: int = 0
    checkpoint_files_deleted: int = 0
    state_dirs_removed: int = 0
    manifests_deleted: int = 0
    oldest_retained_version: int | None = None
    deleted_splits: list[str] = empty_list()
    duration_ms: float = 0.0
    temp_files_deleted: int = 0


@result
class DropPartitionsResult(OperationResult):
    """DROP INDEXTABLES PARTITIONS."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION
    version: int | None
    predicate: str
    partitions_dropped: int = 0
    splits_removed: int = 0
    bytes_removed: int = 0
    records_removed: int = 0
    partitions: list[str] = empty_list()


@result
class DeleteResult(OperationResult):
    """DELETE FROM (row-level delete)."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION (nothing matched: no version committed) | STAGED (in a transaction)
    version: int  # the committed version (the read version for NO_ACTION and STAGED)
    read_version: int
    kind: str | None  # POSITIONAL | EQUALITY | PRIMARY_KEY
    predicate: str | None
    delete_logs: int = 0
    deleted_rows: int | None = 0  # None for key/equality deletes (not computed)
    removed_splits: int = 0  # splits all of whose rows were deleted
    splits_scanned: int = 0
    splits_total: int = 0
    duration_ms: float = 0.0
    query: str | None = None


@result
class RepairResult(OperationResult):
    """REPAIR INDEXFILES TRANSACTION LOG."""

    source_path: str
    target_path: str
    status: str  # SUCCESS | DRY_RUN
    source_version: int
    total_splits: int = 0
    valid_splits: int = 0
    missing_splits: int = 0
    missing_paths: list[str] = empty_list()
    delete_logs: int = 0
    missing_delete_logs: list[str] = empty_list()
    duration_ms: float = 0.0


@result
class CompanionBuildResult(OperationResult):
    """BUILD INDEXTABLES COMPANION."""

    table_path: str
    source_format: str
    source: str
    source_version: int | None = None
    source_files: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    bytes_indexed: int = 0
    splits_added: int = 0
    splits_removed: int = 0
    rows_indexed: int = 0
    version: int | None = None
    dry_run: bool = False
    duration_ms: float = 0.0
    status: str = "SUCCESS"  # SUCCESS | NO_ACTION | DRY_RUN


@result
class ConvertResult(OperationResult):
    """CONVERT INDEXTABLES TABLE: the splits the reference implementation wrote, rewritten as ours."""

    table_path: str
    status: str  # SUCCESS | NO_ACTION (no reference splits) | DRY_RUN
    dry_run: bool = False
    version: int | None = None  # the CONVERT version (None: dry run, nothing to convert)
    read_version: int | None = None
    live_splits: int = 0
    reference_splits: int = 0  # live splits the reference wrote (converted, or to convert in a dry run)
    splits_created: int = 0
    records_converted: int = 0  # rows of the converted splits (a dry run: numRecords of the log)
    bytes_read: int = 0  # sizes of the reference splits
    bytes_written: int = 0
    settings: dict[str, str] = dataclasses.field(default_factory=dict)  # indexing settings recorded in the table
    converted_splits: list[str] = empty_list()  # the reference splits' paths
    duration_ms: float = 0.0


@result
class PostWriteResult(OperationResult):
    """Merge-/purge-on-write after a committed write (ops/maintenance/post_write.py)."""

    table_path: str
    status: str  # DONE | STARTED (in the background) | ALREADY_RUNNING | SKIPPED (the session is stopping) | FAILED
    merge: MergeSplitsResult | None = json_text()
    purge: PurgeResult | None = json_text()
    merge_groups: int | None = None  # the merge groups found, when fewer than the threshold
    merge_threshold: int | None = None  # the groups that trigger a merge-on-write
    error: str | None = None  # FAILED: the error (the write itself succeeded)
