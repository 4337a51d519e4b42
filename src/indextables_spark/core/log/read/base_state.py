"""What loading a checkpoint or Avro state yields (the base a snapshot replays version files onto),
and the part of a transaction log the loaders need (`LogReader`), so that the loaders sit below
`TransactionLog` in the layering."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable
from typing import Protocol as TypingProtocol

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import Action, DeleteLog, Metadata, Protocol, SkipAction
from indextables_spark.core.log.read.listing import LogListing
from indextables_spark.core.storage import Storage

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.expr.partition_filter import PartitionPredicate


class LogReader(TypingProtocol):
    """What checkpoint and state loading read of a table's log (TransactionLog implements it)."""

    storage: Storage
    options: Options

    def listing(self) -> LogListing: ...

    def commit_timestamp(self, version: int, actions: list[Action] | None = None) -> int: ...

    def read_actions(self, version: int) -> list[Action]: ...


@dataclass
class ScanStats:
    """What a read decoded (for observability and the pruning tests/bench)."""

    source: str = "log"
    manifests_total: int = 0
    manifests_read: int = 0
    entries_decoded: int = 0
    blocks_skipped_entries: int = 0  # entries in manifests read but in blocks skipped by the block index
    version_files_read: int = 0


@dataclass
class BaseState:
    """The table at some version as read from a checkpoint or Avro state.

    `files_table` is either given (JSON checkpoints) or loaded lazily through `loader`
    (Avro state: manifests are decoded only when asked for, optionally pruned)."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    files_table: pa.Table | None = None
    skips: dict[str, SkipAction] = field(default_factory=dict)
    schema_registry: dict[str, str] = field(default_factory=dict)
    source: str = "checkpoint"
    state_manifest: Any = None  # StateManifest for Avro states
    state_key: str | None = None  # the storage key it was read from
    loader: Callable[..., pa.Table] | None = None
    timestamp: int = 0
    delete_logs: list[DeleteLog] = field(default_factory=list)  # live delete logs
    stats_files: dict[str, list[str]] = field(default_factory=dict)  # stats key -> per-split files

    def load_files(
        self,
        predicate: PartitionPredicate | None = None,
        min_added_version: int | None = None,
        stats: ScanStats | None = None,
    ) -> pa.Table:
        """Live files of this base; with a predicate/min_added_version, manifests that cannot
        match are skipped (the result is then a superset of the matching rows, not exact)."""
        if self.files_table is not None:
            if stats is not None:
                stats.entries_decoded += self.files_table.num_rows
            return self.files_table
        if self.loader is None:
            from indextables_spark.core.log.state.file_entries import (
                FILE_ENTRY_SCHEMA,
            )  # lazy: keeps `import indextables_spark.api.table` free of pyarrow

            return FILE_ENTRY_SCHEMA.empty_table()
        table = self.loader(predicate, min_added_version, stats)
        if predicate is None and min_added_version is None:
            self.files_table = table
        return table
