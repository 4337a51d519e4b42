"""DESCRIBE INDEXTABLES TABLE <table> (`indextables describe PATH`, `t.inspect.describe()`): what a
table is and holds at its latest version — rows, splits, bytes, partitions, its versions (latest,
oldest readable, the last commit), its columns and how each is indexed, its recorded settings, and
the source of a companion index.

Read from the log, except the rows of splits with key or equality deletes: those splits are
counted (as `IndexTable.count()` does), since the log cannot tell how many rows such a delete hit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from indextables_spark.core.log.model.actions import CommitInfo
from indextables_spark.core.log.read.listing import LogListing
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.schema.types import ColumnSpec, spark_type_text
from indextables_spark.core.split.format.column_specs import column_specs, table_options
from indextables_spark.core.split.format.companion import CONFIG_FORMAT, CONFIG_SOURCE, companion_of
from indextables_spark.core.split.read.search import count_matches
from indextables_spark.ops.command import Context
from indextables_spark.ops.table_commands import TableCommand
from indextables_spark.results.inspect import ColumnRow, DescribeTableResult

_HIDDEN_SETTINGS = ("docMappingSchema.",)  # the doc mappings: large JSON, described by `columns`


def describe_table(log_: TransactionLog) -> DescribeTableResult:
    """The table at its latest version (TableNotFoundError when there is none)."""
    listing = log_.listing()
    latest = log_.resolve_version(None, listing)
    snap = log_.snapshot(latest)
    config = snap.metadata_action.configuration
    companion = companion_of(config)
    records = snap.num_records
    rows = live_rows(log_, snap, records)
    return DescribeTableResult(
        table_path=log_.storage.uri,
        version=latest,
        oldest_version=oldest_readable(listing, latest),
        last_commit_time=snap.timestamp or None,
        last_operation=_operation(log_, listing, latest),
        created_at=snap.metadata_action.created_time,
        num_rows=rows,
        num_deleted_rows=None if records is None else records - rows,
        num_splits=snap.num_files,
        total_bytes=snap.total_bytes,
        partition_columns=snap.partition_columns,
        num_partitions=len(snap.partition_index[0]) if snap.partition_columns and snap.num_files else 0,
        delete_logs=len(snap.delete_logs),
        checkpoint_version=max(_bases(listing, latest), default=None),
        protocol_version=snap.protocol_action.min_reader_version,
        companion_format=companion[0] if companion else None,
        companion_source=companion[1] if companion else None,
        columns=[
            column_row(s) for s in column_specs(snap.schema_json, snap.partition_columns, table_options(snap, None))
        ],
        settings={
            k: v
            for k, v in sorted(config.items())
            if not k.startswith(_HIDDEN_SETTINGS) and k not in (CONFIG_FORMAT, CONFIG_SOURCE)
        },
    )


def live_rows(log_: TransactionLog, snap: Snapshot, records: int | None) -> int:
    """The rows a read returns: the log's counts when no delete log applies and every split has
    one; else the splits counted, opening only those with key or equality deletes."""
    if records is not None and not snap.delete_logs:
        return records
    return count_matches(log_.storage, snap, snap.files, None, log_.options)


def oldest_readable(listing: LogListing, latest: int) -> int:
    """The oldest version a read can open: version 0 while its file is kept, else the oldest
    checkpoint or state (a read starts from one and replays the version files after it)."""
    return min(_bases(listing, latest) + ([0] if 0 in listing.version_info else []), default=latest)


def _bases(listing: LogListing, latest: int) -> list[int]:
    """The versions of the checkpoints and states a read of `latest` or before may start from."""
    kinds = (listing.state_manifests, listing.json_checkpoints, listing.checkpoint_parts)
    return sorted({v for d in kinds for v in d if v <= latest})


def _operation(log_: TransactionLog, listing: LogListing, version: int) -> str | None:
    """The operation of a version's commit; None when its version file is gone (a table whose
    newest versions exist only as states, as the reference leaves them)."""
    if version not in listing.version_info:
        return None
    info = next((a for a in log_.read_actions(version) if isinstance(a, CommitInfo)), None)
    return info.operation if info is not None else None


def column_row(spec: ColumnSpec) -> ColumnRow:
    return ColumnRow(
        spec.name, spark_type_text(spec.spark_type, simple_names=False), spec.nullable, indexing_text(spec)
    )


def indexing_text(spec: ColumnSpec) -> str:
    """How the splits index a column, in the words of the indexing options."""
    if spec.partition:
        return "partition"
    if spec.vector is not None:
        return f"vector ({spec.vector.dims} dims, {spec.vector.metric})"
    if not spec.indexed_fields:
        return "stored only"
    value = spec.value_field
    words = [spec.kind]
    if value is not None and value.tokenizer and not value.exact and spec.kind != "json":
        words[0] += f" (tokenizer {value.tokenizer})"
    if spec.string_mode:
        words.append(spec.string_mode)
    if any(f.fast for f in spec.indexed_fields):
        words.append("fast")
    if spec.index_only:
        words.append("index only")
    return ", ".join(words)


@dataclass(frozen=True)
class DescribeTable(TableCommand):
    """DESCRIBE INDEXTABLES TABLE <table>."""

    result: ClassVar[type[DescribeTableResult]] = DescribeTableResult

    def run(self, ctx: Context) -> DescribeTableResult:
        return describe_table(ctx.log(self.path))
