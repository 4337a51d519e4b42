"""`IndexTable.inspect`: read-only views of a table's log (as pyiceberg's `Table.inspect`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.ops.inspect import describe
from indextables_spark.ops.inspect.component_sizes import DescribeComponentSizes
from indextables_spark.ops.inspect.describe_table import describe_table
from indextables_spark.ops.command import Context
from indextables_spark.ops.inspect.history import history
from indextables_spark.results.inspect import DescribeTableResult, HistoryEntry
from indextables_spark.results.state import DescribeStateResult, SkippedFile


class InspectTable:
    """Description, history, state, transaction log, skipped files and component sizes of one
    table (its live files: IndexTable.files, or snapshot().files_table)."""

    def __init__(self, log: TransactionLog):
        self.log = log

    def describe(self) -> DescribeTableResult:
        """DESCRIBE INDEXTABLES TABLE: rows, splits, bytes, partitions, versions (latest, oldest
        readable, the last commit's time and operation), columns and how each is indexed, the
        recorded settings and a companion index's source."""
        return describe_table(self.log)

    def history(self, *, limit: int | None = None) -> list[HistoryEntry]:
        """One entry per retained version, newest first (the `limit` newest)."""
        return history(self.log, limit=limit)

    def state(self) -> DescribeStateResult:
        """DESCRIBE INDEXTABLES STATE: the checkpoint or Avro state reads start from (format,
        version, counts, tombstones, whether it needs compaction) and the SkipActions in force."""
        return describe.describe_state(self.log)

    def transaction_log(self, *, include_all: bool = False) -> pa.Table:
        """DESCRIBE INDEXTABLES TRANSACTION LOG: one row per action (results.TransactionLogRow)."""
        return describe.describe_transaction_log(self.log, include_all)

    def skipped_files(self) -> list[SkippedFile]:
        """The SkipActions (splits a merge left out, and until when) in force at the latest version."""
        return [SkippedFile.of(s) for s in describe.current_skips(self.log)]

    def component_sizes(self, where: str | None = None, *, spark: Any = None) -> pa.Table:
        """DESCRIBE INDEXTABLES COMPONENT SIZES: one row per index component of each live split
        (of the partitions matching `where`), per field (results.ComponentSizeRow), read from the
        splits' footers and a few small ranges; as a Spark job when `spark` is given."""
        cmd = DescribeComponentSizes(self.log.storage.uri, where)
        return cmd.run(Context(self.log.options, spark, table=self.log))
