"""DROP INDEXTABLES PARTITIONS FROM '<path>' WHERE <partition predicate>: logical removes.

The predicate may name partition columns only (the parser of `log.partition_filter` refuses other
columns, naming them and their position). The matching live splits get remove actions in one
version (dataChange=true); their files stay until PURGE deletes them after the retention. The
transaction rebases over concurrent appends (splits added concurrently stay) and fails when one of
the removed splits was removed concurrently.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar

from indextables_spark.core.log.model.actions import RemoveFile
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.transaction import Transaction
from indextables_spark.core.schema.partitions import partition_path
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.partition_filter import parse_partition_filter
from indextables_spark.results.maintenance import DropPartitionsResult
from indextables_spark.ops.command import CommandParser, Context, Target
from indextables_spark.ops.table_commands import table_and_where

OPERATION = "DROP PARTITIONS"


def drop_partitions(log_: TransactionLog, where: str) -> DropPartitionsResult:
    if where is None or not str(where).strip():
        raise InvalidOptionError(
            "DROP INDEXTABLES PARTITIONS needs a WHERE predicate on partition columns (it never drops a whole table)"
        )
    protocol, metadata, _ = log_.header()
    check_writable(protocol, f"table {log_.storage.uri}")
    parts = list(metadata.partition_columns)
    if not parts:
        raise InvalidOptionError(f"DROP INDEXTABLES PARTITIONS: table {log_.storage.uri} has no partition columns")
    predicate = parse_partition_filter(where, metadata.partition_column_types())
    snap, _stats = log_.scan(predicate)
    files = snap.files
    dropped = sorted({partition_path(parts, f.partition_values) for f in files})
    out = DropPartitionsResult(
        table_path=log_.storage.uri,
        status="NO_ACTION",
        version=None,
        predicate=where,
        partitions_dropped=len(dropped),
        splits_removed=len(files),
        bytes_removed=sum(f.size for f in files),
        records_removed=sum(f.num_records or 0 for f in files),
        partitions=dropped,
    )
    if not files:
        return out
    now = int(time.time() * 1000)
    txn = Transaction(
        log_,
        resolver="merge",
        read_version=snap.version,
        operation=OPERATION,
        operation_parameters={"predicate": where, "partitions": dropped},
    )
    txn.remove_files([RemoveFile(f.path, now, True, dict(f.partition_values or {}), f.size) for f in files])
    return replace(out, status="SUCCESS", version=txn.commit())


@dataclass(frozen=True)
class DropPartitions:
    """DROP INDEXTABLES PARTITIONS FROM <table> WHERE <partition predicate>: remove (logically)
    every split of the partitions matching `where`."""

    result: ClassVar[type[DropPartitionsResult]] = DropPartitionsResult
    path: Target
    where: str

    @classmethod
    def parse(cls, p: CommandParser) -> DropPartitions:
        return cls(
            *table_and_where(p, "DROP INDEXTABLES PARTITIONS needs a WHERE clause naming the partitions to drop")
        )

    def run(self, ctx: Context) -> DropPartitionsResult:
        return drop_partitions(ctx.log(self.path), self.where)
