"""Synthetic tables for tests and benchmarks: realistic AddFile entries (partition values,
statistics, footer offsets, doc-mapping refs) committed through the real log, with synthetic split
paths (no split files are needed to exercise the transaction log and the state layer)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence
from typing import Protocol as TypingProtocol

from indextables_spark.core.log.model.actions import AddFile, CommitInfo, Metadata, Protocol
from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL
from indextables_spark.core.log.commit.transaction import Transaction, new_table_id
from indextables_spark.errors import ConcurrentModificationError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.table_log import TransactionLog
    from indextables_spark.core.storage import Storage


class TableLike(TypingProtocol):
    """What these helpers use of a table (an IndexTable, api/table.py)."""

    @property
    def log(self) -> TransactionLog: ...

    @property
    def storage(self) -> Storage: ...

    def transaction(self, resolver: str = ..., version: int | None = ..., operation: str = ...) -> Transaction: ...


DEFAULT_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "title", "type": "string", "nullable": True, "metadata": {}},
        {"name": "score", "type": "double", "nullable": True, "metadata": {}},
        {"name": "date", "type": "string", "nullable": True, "metadata": {}},
        {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        {"name": "year", "type": "integer", "nullable": True, "metadata": {}},
    ],
}
DOC_MAPPING_REF = "c2NoZW1hLXJlZi0x"


def partition_value(i: int, num_partitions: int) -> str:
    """Partition i of num_partitions as a date-like value: 2024-01-01, 2024-01-02, ..."""
    day = i % num_partitions
    return f"{2024 + day // 336}-{1 + (day // 28) % 12:02d}-{1 + day % 28:02d}"


def synthetic_add(
    i: int, partition_columns: Sequence[str] = ("date",), num_partitions: int = 10, rich: bool = True
) -> AddFile:
    pv: dict[str, str | None] = {}
    for c in partition_columns:
        if c == "date":
            pv[c] = partition_value(i, num_partitions)
        elif c == "region":
            pv[c] = ("eu", "us", "ap")[i % 3]
        elif c == "year":
            pv[c] = str(2020 + i % 5)
        else:
            pv[c] = f"{c}-{i % num_partitions}"
    prefix = "/".join(f"{k}={v}" for k, v in pv.items())
    path = f"{prefix + '/' if prefix else ''}splits/part-{i:09d}-8f3c2a9e4b7d1c60.split"
    if not rich:
        return AddFile(path=path, partition_values=pv, size=1_000_000 + i, modification_time=1_700_000_000_000 + i)
    return AddFile(
        path=path,
        partition_values=pv,
        size=10_000_000 + (i * 7919) % 5_000_000,
        modification_time=1_700_000_000_000 + i * 1000,
        data_change=True,
        min_values={"id": str(i * 1000), "score": "0.01", "title": "aardvark accounting annual"},
        max_values={"id": str(i * 1000 + 999), "score": "99.9", "title": "zebra zoning zone report 2024 ap"},
        num_records=1000,
        footer_start_offset=9_000_000,
        footer_end_offset=9_500_000,
        num_merge_ops=i % 3,
        doc_mapping_ref=DOC_MAPPING_REF,
        uncompressed_size_bytes=25_000_000 + i,
    )


def synthetic_adds(start: int, count: int, **kw: Any) -> list[AddFile]:
    return [synthetic_add(i, **kw) for i in range(start, start + count)]


def create_table(
    table: TableLike,
    partition_columns: Sequence[str] = ("date",),
    schema: Mapping[str, Any] | None = None,
    configuration: Mapping[str, str] | None = None,
    protocol: Protocol | None = None,
) -> int:
    """Commit version 0 (protocol + metadata) of a new table. `table` is an IndexTable."""
    conf = {
        "docMappingSchema." + DOC_MAPPING_REF: json.dumps(
            [{"name": "title", "type": "text", "column": "title", "kind": "text", "sparkType": "string"}]
        )
    }
    conf.update(configuration or {})
    md = Metadata(
        id=new_table_id(),
        schema_string=json.dumps(dict(schema or DEFAULT_SCHEMA)),
        partition_columns=list(partition_columns),
        configuration=conf,
        created_time=1_700_000_000_000,
    )
    txn = Transaction(table.log, read_version=-1, operation="CREATE TABLE")
    txn.set_protocol(protocol or CURRENT_PROTOCOL).set_metadata(md)
    return txn.commit()


def commit_files(
    table: TableLike, files: Iterable[AddFile], remove: Iterable[str] = (), operation: str = "WRITE"
) -> int:
    txn = table.transaction(operation=operation)
    txn.add_files(list(files))
    rm = list(remove)
    if rm:
        txn.remove_files(rm)
    return txn.commit()


def write_bulk_versions(table: TableLike, n: int, per_version: int, num_partitions: int) -> int:
    """Versions 1, 2, ... holding `per_version` synthetic adds each (`n` in all), written straight
    as version files (what a commit writes, without a commit's checks: fast enough to build
    benchmark tables of 100,000s of files on any storage). Returns the last version written."""
    v = 0
    for start in range(0, n, per_version):
        v += 1
        ts = 1_700_000_000_000 + v
        adds = []
        for i in range(start, min(n, start + per_version)):
            a = synthetic_add(i, num_partitions=num_partitions)
            a.added_at_version, a.added_at_timestamp = v, ts
            adds.append(a)
        if not table.log.write_version(v, [CommitInfo(timestamp=ts, operation="WRITE"), *adds]):
            raise ConcurrentModificationError(f"version {v} of {table.storage.uri} already exists")
    return v
