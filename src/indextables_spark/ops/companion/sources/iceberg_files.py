"""An Iceberg snapshot's live data files, each with the positions its delete files remove.

pyiceberg 0.12 plans position deletes (and v3 deletion vectors) but refuses to plan equality
deletes, so the manifests are read here, with Iceberg's rules:

- a position delete file or deletion vector applies to a data file of its partition whose data
  sequence number is not above its own (pyiceberg's DeleteFileIndex, which also uses the delete
  file's path bounds); its rows name the data file by path;
- an equality delete file applies to the data files whose data sequence number is strictly below
  its own, in its partition (any partition when its spec is unpartitioned); a row is deleted when
  its equality columns (by field id) equal one of the file's tuples, NULL matching NULL.

Equality deletes are resolved to positions by reading the data file's equality columns: exact for
the snapshot, and the companion stores one kind of delete only (positions of its splits' rows).
A delete file that is missing or unreadable fails the planning, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import CompanionSourceError, StorageError
from indextables_spark.core.split.format.nested_names import file_field_ids
from indextables_spark.ops.companion.sources.libraries import describe_error

if TYPE_CHECKING:
    import pyarrow.parquet as pq


@dataclass(frozen=True)
class PlannedFile:
    """One live data file of the snapshot and the positions deleted from it (sorted, distinct)."""

    data_file: Any  # pyiceberg DataFile
    deleted: tuple[int, ...]


def plan_data_files(table: Any, snapshot: Any, schema: Any, name: str) -> list[PlannedFile]:
    """The snapshot's live data files with their deleted positions (the module doc's rules);
    `schema`: the snapshot's (types of equality columns a file lacks)."""
    from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFileContent  # lazy: an optional dependency
    from pyiceberg.table.delete_file_index import DeleteFileIndex  # lazy: an optional dependency

    io = table.io
    data: list[Any] = []
    equality: list[Any] = []
    positions = DeleteFileIndex()
    try:
        for manifest in snapshot.manifests(io):
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                content = entry.data_file.content
                if content == DataFileContent.DATA:
                    data.append(entry)
                elif content == DataFileContent.POSITION_DELETES:
                    positions.add_delete_file(entry, partition_key=entry.data_file.partition)
                elif content == DataFileContent.EQUALITY_DELETES:
                    equality.append(entry)
                else:
                    raise CompanionSourceError(
                        f"Iceberg table {name}: manifest entry of unknown content {content} ({entry.data_file.file_path})"
                    )
    except (OSError, ValueError) as e:
        raise StorageError(f"cannot list the files of Iceberg table {name}: {describe_error(e)}") from None
    specs = table.specs()
    reader = _DeleteReader(io, name, schema)
    out = []
    for entry in data:
        f = entry.data_file
        seq = entry.sequence_number if entry.sequence_number is not None else INITIAL_SEQUENCE_NUMBER
        deleted = [reader.positions(d, f) for d in positions.for_data_file(seq, f, partition_key=f.partition)]
        eq = [e.data_file for e in equality if _equality_applies(e, entry, seq, specs)]
        if eq:
            deleted.append(reader.equality_positions(f, eq))
        rows = np.unique(np.concatenate(deleted)) if deleted else np.empty(0, np.int64)
        if rows.size and (rows[0] < 0 or (f.record_count is not None and rows[-1] >= f.record_count)):
            raise CompanionSourceError(
                f"Iceberg table {name}: a delete file deletes position {int(rows[-1] if rows[0] >= 0 else rows[0])} "
                f"of data file {redact_uri(f.file_path)}, which has {f.record_count} rows"
            )
        out.append(PlannedFile(f, tuple(int(r) for r in rows)))
    return out


def _equality_applies(delete: Any, data: Any, data_seq: int, specs: Mapping[int, Any]) -> bool:
    d = delete.data_file
    if delete.sequence_number is None or delete.sequence_number <= data_seq:
        return False
    spec = specs.get(d.spec_id)
    if spec is None or spec.is_unpartitioned():
        return True
    return bool(d.spec_id == data.data_file.spec_id and _record(d.partition) == _record(data.data_file.partition))


def _record(partition: Any) -> tuple[Any, ...]:
    return tuple(partition[i] for i in range(len(partition))) if partition is not None else ()


def partition_cluster(data_file: Any) -> str:
    """The spec and partition tuple of a data file, as text (transform values included)."""
    return f"{data_file.spec_id}:{_record(data_file.partition)!r}"


class _DeleteReader:
    """Delete files read once per planning (a delete file applies to many data files)."""

    def __init__(self, io: Any, name: str, schema: Any):
        self.io, self.name, self.schema = io, name, schema
        self._positions: dict[str, dict[str, np.ndarray]] = {}
        self._equality: dict[str, pa.Table] = {}

    def _failed(self, path: str, what: str, e: BaseException) -> CompanionSourceError:
        return CompanionSourceError(
            f"Iceberg table {self.name}: {what} {redact_uri(path)} cannot be read ({describe_error(e)}); "
            "the companion index cannot apply the rows it deletes"
        )

    def positions(self, delete_file: Any, data_file: Any) -> np.ndarray:
        from pyiceberg.io.pyarrow import _read_deletes  # lazy: reads Parquet position deletes and Puffin DVs

        path = delete_file.file_path
        by_file = self._positions.get(path)
        if by_file is None:
            try:
                read = _read_deletes(self.io, delete_file)
            except (OSError, ValueError, pa.ArrowException) as e:
                raise self._failed(path, "position delete file", e) from None
            by_file = {k: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, np.int64) for k, v in read.items()}
            self._positions[path] = by_file
        return by_file.get(data_file.file_path, np.empty(0, np.int64))

    def _parquet(self, path: str, what: str) -> pq.ParquetFile:
        import pyarrow.parquet as pq  # lazy: only tables with equality deletes read Parquet here

        try:
            return pq.ParquetFile(pa.BufferReader(self.io.new_input(path).open().read()))
        except (OSError, ValueError, pa.ArrowException) as e:
            raise self._failed(path, what, e) from None

    def _by_ids(self, pf: pq.ParquetFile, ids: Sequence[int], path: str, what: str) -> pa.Table:
        """The columns of field ids `ids` (named by id; a missing column is NULL, typed from the schema)."""
        from pyiceberg.io.pyarrow import schema_to_pyarrow  # lazy: an optional dependency

        in_file = file_field_ids(pf.schema_arrow)
        try:
            table = pf.read(columns=[in_file[i] for i in ids if i in in_file])
        except (OSError, pa.ArrowException) as e:
            raise self._failed(path, what, e) from None
        cols = []
        for i in ids:
            if i in in_file:
                cols.append(table.column(in_file[i]))
            else:
                field = self.schema.find_field(i)
                cols.append(pa.nulls(table.num_rows, schema_to_pyarrow(field.field_type, include_field_ids=False)))
        return pa.table(cols, names=[str(i) for i in ids])

    def _equality_values(self, delete_file: Any) -> pa.Table:
        path = delete_file.file_path
        hit = self._equality.get(path)
        if hit is None:
            ids = list(delete_file.equality_ids or ())
            if not ids:
                raise CompanionSourceError(
                    f"Iceberg table {self.name}: equality delete file {redact_uri(path)} names no equality field ids"
                )
            hit = self._by_ids(self._parquet(path, "equality delete file"), ids, path, "equality delete file")
            self._equality[path] = hit
        return hit

    def equality_positions(self, data_file: Any, deletes: Iterable[Any]) -> np.ndarray:
        """Positions of the data file's rows that one of the equality delete files deletes."""
        groups: dict[tuple[int, ...], list[pa.Table]] = {}
        for d in deletes:
            groups.setdefault(tuple(d.equality_ids or ()), []).append(self._equality_values(d))
        ids = sorted({i for key in groups for i in key})
        path = data_file.file_path
        keys = self._by_ids(self._parquet(path, "data file"), ids, path, "data file")
        hits = [_matching_rows(keys.select([str(i) for i in key]), tables) for key, tables in groups.items()]
        return np.unique(np.concatenate(hits)) if hits else np.empty(0, np.int64)


def _matching_rows(rows: pa.Table, deletes: Sequence[pa.Table]) -> np.ndarray:
    """Positions of `rows` equal to one of the tuples of `deletes` (same column names), NULL
    matching NULL: one hash group-by over both sides (group-by puts NULLs in one group)."""
    import pyarrow.compute as pc  # lazy: only tables with equality deletes need it

    names = rows.column_names
    values = []
    for t in deletes:
        t = t.select(names)
        values.append(pa.table([t.column(n).cast(rows.schema.field(n).type) for n in names], names=names))
    side = "__delete"
    left = rows.append_column(side, pa.array(np.zeros(rows.num_rows, np.int8)))
    left = left.append_column("__pos", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    right = [
        v.append_column(side, pa.array(np.ones(v.num_rows, np.int8))).append_column(
            "__pos", pa.array(np.full(v.num_rows, -1, np.int64))
        )
        for v in values
    ]
    both = pa.concat_tables([left, *right])
    grouped = both.group_by(names, use_threads=False).aggregate([(side, "max"), ("__pos", "list")])
    hit = grouped.filter(pc.equal(grouped.column(f"{side}_max"), 1))
    flat = pc.list_flatten(hit.column("__pos_list")).to_numpy()
    return np.asarray(flat[flat >= 0], np.int64)
