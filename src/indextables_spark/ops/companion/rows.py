"""Reading a source Parquet file's rows for a companion split: which Parquet column holds each of
the table's columns (Delta column mapping: physical names; Iceberg, and Delta column mapping mode
`id`: Parquet field ids, so a column renamed after the file was written is still read), its
non-empty row groups in order under the table's names, and the check that the file has the rows
its source says; where a file's deleted positions fall in a split (`placed_rows`), the rows of a
split the source no longer has (`deleted_split_rows`: removed files whole, deleted positions of
the others) and the rows a split's delete logs already delete (`logged_rows`).

Each companion split records per file the names that differ (CompanionFile.columns, "" for a
column the file lacks), so reads (core/split/cache/companion_rows.py) and merges
(ops/maintenance/merge_rewrite.py) fetch the same columns the build indexed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import numpy as np

from indextables_spark.core.split.format.nested_names import file_field_ids, matched_name
from indextables_spark.errors import CompanionSourceError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from indextables_spark.config.options import Options
    from indextables_spark.core.log.model.actions import AddFile, DeleteLog
    from indextables_spark.core.split.format.companion import CompanionInfo
    from indextables_spark.core.storage import Storage
    from indextables_spark.ops.companion.sources.snapshot import SourceFile


def file_columns(
    parquet_schema: pa.Schema, physical_names: Mapping[str, str], field_ids: Mapping[str, int]
) -> dict[str, str]:
    """{column: the file's column for it, or ABSENT} for the columns whose name in the file differs.
    A column with a field id is matched by id in a file that carries field ids (a file without any
    is read by name); otherwise by its physical name (`physical_names`, else its own name)."""
    columns = {**{c: c for c in field_ids}, **physical_names}
    if not columns:
        return {}
    by_id = file_field_ids(parquet_schema)
    present = set(parquet_schema.names)
    out: dict[str, str] = {}
    for column, physical in columns.items():
        name = matched_name(field_ids.get(column), physical, by_id, present)
        if name != column:
            out[column] = name
    return out


def row_groups(
    pf: pq.ParquetFile, columns: Sequence[str], in_file: Mapping[str, str] | None = None
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(index, rows) of each non-empty row group of a Parquet file, only the columns it has of
    these; `in_file`: {column: its name in the file} where they differ (file_columns)."""
    names = {c: (in_file or {}).get(c, c) for c in columns}
    present = [c for c in columns if names[c] in pf.schema_arrow.names]
    for g in range(pf.num_row_groups):
        if pf.metadata.row_group(g).num_rows:
            # (a table of no columns still has the row group's rows: missing columns become NULL)
            rows = pf.read_row_group(g, columns=[names[c] for c in present]).rename_columns(present)
            yield g, rows.combine_chunks().to_batches()[0]


def check_row_count(f: SourceFile, rows: int, what: str, always: bool = False) -> None:
    """Positions are placed by the source's row counts: a file with deleted positions (or any file,
    `always`: a source whose later deletes are placed by them, Iceberg) must have the rows the
    source says."""
    if f.num_records is not None and f.num_records != rows and (f.deleted or always):
        raise CompanionSourceError(
            f"{what}: source file {f.uri} has {rows} rows, its metadata says {f.num_records}; "
            "rows it deletes by position cannot be placed"
        )


def placed_rows(deleted: Sequence[Sequence[int] | np.ndarray | None], counts: Sequence[int]) -> np.ndarray:
    """A split's row ids (sorted, distinct) of its files' deleted positions: the split holds its
    files' rows in order, each file contiguous, so position p of file i is row
    counts[0] + … + counts[i-1] + p."""
    offsets = np.cumsum([0, *counts[:-1]], dtype=np.int64) if counts else np.empty(0, np.int64)
    parts = [np.asarray(d, np.int64) + o for d, o in zip(deleted, offsets) if d is not None and len(d)]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def logged_rows(storage: Storage, logs: Sequence[DeleteLog], add: AddFile) -> np.ndarray:
    """The row ids of a split its delete logs delete by position (sorted, distinct)."""
    from indextables_spark.core.log.deletes.delete_logs import load_split_deletes  # lazy: numpy, pyarrow

    deletes = load_split_deletes(storage, logs, add.num_records, add.path)
    return deletes.positions if deletes is not None else np.empty(0, dtype=np.int64)


def split_info(storage: Storage, opts: Options, add: AddFile) -> CompanionInfo:
    """The companion section of a split's footer (its files and row groups, in `__row` order)."""
    from indextables_spark.core.split.cache.cache import get_cache  # lazy: the split cache loads numpy, Tantivy
    from indextables_spark.core.split.format.bundle import load_extracted_footer  # lazy: as above
    from indextables_spark.core.split.format.companion import companion_info  # lazy: as above

    info = companion_info(load_extracted_footer(get_cache(opts).local_dir(storage, add)).raw, add.path)
    if info is None:
        raise CompanionSourceError(f"split {add.path} of the companion index has no companion section")
    return info


def deleted_split_rows(
    info: CompanionInfo, by_key: Mapping[str, SourceFile], positions: Callable[[SourceFile], np.ndarray | None]
) -> np.ndarray:
    """The split's row ids (sorted) the source no longer has: every row of a file it removed (a
    copy-on-write delete or OPTIMIZE rewrote it; the split's other files stay indexed) and the
    `positions` it deleted in the others (Delta deletion vectors, Iceberg delete files), placed by
    the row groups the split indexed."""
    counts = [sum(n for _, n in f.row_groups) for f in info.files]
    deleted: list[np.ndarray | None] = []
    for f, rows in zip(info.files, counts):
        src = by_key.get(f.key)
        found = positions(src) if src is not None else np.arange(rows, dtype=np.int64)
        if src is not None and found is not None and found.size:
            check_row_count(src, rows, "its indexed row groups", always=True)
            if int(found.max()) >= rows:
                raise CompanionSourceError(f"source file {f.uri} deletes row {int(found.max())} of its {rows} rows")
        deleted.append(found)
    return placed_rows(deleted, counts)


def newly_removed_files(info: CompanionInfo, by_key: Mapping[str, SourceFile], logged: np.ndarray) -> int:
    """How many of the split's files the source removed whose rows its logs do not all delete yet."""
    start, count = 0, 0
    for f in info.files:
        rows = sum(n for _, n in f.row_groups)
        inside = int(np.count_nonzero((logged >= start) & (logged < start + rows)))
        count += f.key not in by_key and inside < rows
        start += rows
    return count


@dataclass(frozen=True)
class DeletedRowsSource:
    """How a source format tells which rows of its files it deleted (ops/companion/deletes.py
    plans every format's changes with it)."""

    # the file positions it deleted (None: none); a file the source removed is deleted whole
    positions: Callable[[SourceFile], np.ndarray | None]
    # whether the deleted rows of a split holding these files (all still in the source) may differ
    # from its delete logs (`has_logs`): a cheap test that spares reading the split's footer
    may_have_changed: Callable[[Sequence[SourceFile], bool], bool] = lambda files, has_logs: True
    # the source's own row counts place positions (Iceberg manifests), no split footer read
    counted: bool = False
    renamed: bool = False  # columns renamed since the recorded build: every split is indexed again
    configuration: dict[str, str] = field(default_factory=dict)  # recorded in the companion's metadata
