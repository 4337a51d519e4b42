"""Reading a source Parquet file's rows for a companion split: its non-empty row groups in order,
the table's columns found by Iceberg field id when the file names them otherwise (renames), and
the check that the file has the rows its source says (deleted positions are placed by them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from indextables_spark.errors import CompanionSourceError
from indextables_spark.ops.companion.sources.iceberg_files import renamed_columns

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from indextables_spark.ops.companion.sources import SourceFile

__all__ = ["check_row_count", "renamed_columns", "row_groups"]


def row_groups(
    pf: pq.ParquetFile, columns: Sequence[str], names: Mapping[str, str | None] | None = None
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(index, rows) of each non-empty row group of a Parquet file, only the columns it has of these;
    `names`: the file's names of renamed columns (None: the file lacks it)."""
    in_file = {c: (names or {}).get(c, c) for c in columns}
    present = [c for c in columns if in_file[c] in pf.schema_arrow.names]
    for g in range(pf.num_row_groups):
        if pf.metadata.row_group(g).num_rows:
            # (a table of no columns still has the row group's rows: missing columns become NULL)
            batch = pf.read_row_group(g, columns=[in_file[c] for c in present]).combine_chunks().to_batches()[0]
            yield g, batch.rename_columns(present) if names else batch


def check_row_count(f: SourceFile, rows: int, what: str) -> None:
    """Positions are placed by the source's row counts: the file must have the rows the source says."""
    if f.num_records is not None and f.num_records != rows and (f.deleted or f.field_ids):
        raise CompanionSourceError(
            f"{what}: source file {f.uri} has {rows} rows, its metadata says {f.num_records}; "
            "rows it deletes by position cannot be placed"
        )
