"""Iceberg tables with what pyiceberg 0.12 cannot write itself: data files of transform partitions
(its writer needs pyiceberg-core for them), position and equality delete files (it deletes
copy-on-write only). Files are written here with the table's field ids and committed through
pyiceberg's snapshot producer, a delete manifest for delete files."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq


def _field_id_schema(schema) -> pa.Schema:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(schema, include_field_ids=True)


def _stats(table, path: str, schema):
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )

    return data_file_statistics_from_parquet_metadata(
        parquet_metadata=pq.read_metadata(path),
        stats_columns=compute_statistics_plan(schema, table.metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )


def _path(table, kind: str) -> str:
    loc = table.location().removeprefix("file://")
    import os

    os.makedirs(f"{loc}/data", exist_ok=True)
    return f"{loc}/data/{kind}-{uuid.uuid4()}.parquet"


def data_file(table, rows: pa.Table, partition: tuple = (), row_group_size: int | None = None):
    """A data file of `rows` (the table's columns) in `partition` (the current spec's values)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    schema = table.schema()
    path = _path(table, "data")
    arrow = _field_id_schema(schema)
    pq.write_table(rows.select(arrow.names).cast(arrow), path, row_group_size=row_group_size)
    stats = _stats(table, path, schema)
    import os

    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        file_size_in_bytes=os.path.getsize(path),
        spec_id=table.spec().spec_id,
        **stats.to_serialized_dict(),
    )


def append_files(table, files) -> None:
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as fa:
            for f in files:
                fa.append_data_file(f)


def position_delete_file(table, deletes: list[tuple[str, int]], partition: tuple = (), path: str | None = None):
    """A position delete file of (data file path, position) pairs."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    path = path or _path(table, "pos-deletes")
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": b"2147483546"}),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"2147483545"}),
        ]
    )
    ordered = sorted(deletes)
    pq.write_table(pa.Table.from_pylist([{"file_path": p, "pos": n} for p, n in ordered], schema=schema), path)
    import os

    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=len(deletes),
        file_size_in_bytes=os.path.getsize(path),
        spec_id=table.spec().spec_id,
    )


def equality_delete_file(table, columns: list[str], values: pa.Table, partition: tuple = (), spec_id=None):
    """An equality delete file on `columns` holding the tuples of `values`."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    schema = table.schema()
    ids = [schema.find_field(c).field_id for c in columns]
    arrow = _field_id_schema(schema)
    path = _path(table, "eq-deletes")
    fields = [arrow.field(c).with_nullable(True) for c in columns]
    pq.write_table(values.select(columns).cast(pa.schema(fields)), path)
    import os

    return DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=values.num_rows,
        file_size_in_bytes=os.path.getsize(path),
        equality_ids=ids,
        spec_id=table.spec().spec_id if spec_id is None else spec_id,
    )


def commit_deletes(table, delete_files) -> None:
    """A snapshot adding delete files (a delete manifest), as a merge-on-read engine commits them."""
    from pyiceberg.manifest import ManifestContent, ManifestWriterV2
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.table.update.snapshot import _FastAppendFiles

    class _DeleteManifestWriter(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes"}

    class _AddDeletes(_FastAppendFiles):
        def new_manifest_writer(self, spec):
            return _DeleteManifestWriter(
                spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
            )

    with table.transaction() as tx:
        producer = _AddDeletes(operation=Operation.OVERWRITE, transaction=tx, io=table.io)
        for f in delete_files:
            producer.append_data_file(f)
        producer.commit()
