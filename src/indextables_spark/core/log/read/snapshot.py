"""A snapshot: the table as of one version (protocol, metadata, live files, skips, delete logs,
stats files)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from indextables_spark.core.log.model.actions import AddFile, DeleteLog, Metadata, Protocol, SkipAction

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.core.log.deletes.delete_logs import DeleteIndex

# pyarrow (and file_entries, which needs it) are imported in the methods that use them ("# lazy"):
# this module is part of `import indextables_spark.api.table`, which stays free of pyarrow.


@dataclass(repr=False)  # its repr is a one-line summary (the files table and log can be large)
class Snapshot:
    version: int
    protocol_action: Protocol
    metadata_action: Metadata
    files_table: pa.Table  # one row per live split, FileEntry columns
    skips: dict[str, SkipAction] = field(default_factory=dict)
    timestamp: int = 0  # commit time of `version`, epoch ms
    schema_registry: dict[str, str] = field(default_factory=dict)
    source: str = "log"  # how it was built: "log", "avro-state", "json-checkpoint"
    delete_logs: list[DeleteLog] = field(default_factory=list)  # live delete logs (core/log/deletes/delete_logs.py)
    stats_files: dict[str, list[str]] = field(default_factory=dict)  # e.g. {"bloomfilter": [per-split files]}

    def __repr__(self) -> str:
        rows = self.num_records
        parts = [
            f"version={self.version}",
            f"files={self.num_files:,}",
            f"records={'unknown' if rows is None else format(rows, ',')}",
            f"bytes={self.total_bytes:,}",
        ]
        if self.partition_columns:
            parts.append(f"partition_columns={self.partition_columns}")
        if self.delete_logs:
            parts.append(f"delete_logs={len(self.delete_logs):,}")
        return f"Snapshot({', '.join(parts)}, source={self.source!r})"

    @cached_property
    def delete_index(self) -> DeleteIndex:
        from indextables_spark.core.log.deletes.delete_logs import (
            DeleteIndex,  # lazy: keeps `import indextables_spark.core.log.read.snapshot` free of numpy, pyarrow
        )

        return DeleteIndex.of(self.delete_logs)

    def deletes_for(self, add: AddFile) -> list[DeleteLog]:
        """The delete logs that apply to a live split (empty for most splits)."""
        if not self.delete_logs:
            return []
        return self.delete_index.for_file(add)

    @property
    def num_files(self) -> int:
        return int(self.files_table.num_rows)

    @cached_property
    def files(self) -> list[AddFile]:
        from indextables_spark.core.log.state.file_entries import table_to_add_files  # lazy

        return table_to_add_files(self.files_table)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.metadata_action.to_json()

    @property
    def protocol(self) -> dict[str, Any]:
        return self.protocol_action.to_json()

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata_action.partition_columns)

    @cached_property
    def partition_index(self) -> tuple[list[dict[str, str | None]], pa.Array]:
        """(the distinct partition values of the live files, each file's index into that list):
        planners evaluate a partition filter once per partition, not once per file."""
        import pyarrow as pa  # lazy
        import pyarrow.compute as pc  # lazy

        from indextables_spark.expr.partition_values import map_values  # lazy

        cols = self.partition_columns
        table = self.files_table
        if not cols or table.num_rows == 0:
            return [{}], pa.array([0] * table.num_rows, pa.int32())
        pv = table.column("partitionValues")
        # a key per file: each column's value marked present ("v…") or NULL ("n"), \x00-separated
        parts = [pc.fill_null(pc.binary_join_element_wise("v", map_values(pv, c), ""), "n") for c in cols]
        keys = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "\x00")
        encoded = pc.dictionary_encode(keys)
        values: list[dict[str, str | None]] = []
        for key in encoded.dictionary.to_pylist():
            texts = key.split("\x00") if len(parts) > 1 else [key]
            values.append({c: (t[1:] if t.startswith("v") else None) for c, t in zip(cols, texts)})
        return values, encoded.indices

    @property
    def schema_json(self) -> dict[str, Any]:
        schema: dict[str, Any] = json.loads(self.metadata_action.schema_string)
        return schema

    @property
    def schema(self) -> Any:
        """The table schema as a pyspark StructType (its JSON dict when pyspark is absent)."""
        try:
            from pyspark.sql.types import StructType  # optional dependency: ImportError is handled here
        except ImportError:  # pragma: no cover - pyspark is a dependency, but the core runs without it
            return self.schema_json
        return StructType.fromJson(self.schema_json)

    @property
    def total_bytes(self) -> int:
        if self.files_table.num_rows == 0:
            return 0
        import pyarrow.compute as pc  # lazy

        return int(pc.sum(self.files_table.column("size")).as_py() or 0)

    @property
    def num_records(self) -> int | None:
        """Sum of numRecords, or None when any live file lacks it."""
        col = self.files_table.column("numRecords")
        if col.null_count:
            return None
        import pyarrow.compute as pc  # lazy

        return int(pc.sum(col).as_py() or 0)

    def doc_mapping(self, ref: str | None) -> str | None:
        if ref is None:
            return None
        return self.schema_registry.get(ref) or self.metadata_action.doc_mappings.get(ref)
