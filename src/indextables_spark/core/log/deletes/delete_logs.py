"""Row-level deletes: delete log files, which logs apply to a split, and applying them to rows.

A delete log is `_delete_logs/<uuid>.dlog` under the table root: a sidecar frame (sidecar.py; magic
b"ITDL", format version 1) with the header {"kind", "numEntries", "splitPath"?, "columns"?} and an
Arrow IPC stream as payload:

    POSITIONAL   one int64 column `row`: sorted, distinct row ids of one split (positions in its row store)
    EQUALITY     the log's columns, typed as in the table: distinct value tuples, no nulls
    PRIMARY_KEY  the declared key column: distinct key values, no nulls

A log is referenced by a `deleteLog` action (actions.DeleteLog) and applies to the rows of the
splits added before it (split addedAtVersion < log addedAtVersion); a POSITIONAL log only to its
own split, also when committed in the same version (addedAtVersion <=: a companion split and the
rows its source deleted, ops/companion/deletes.py; split paths are never reused). So rows appended
later with deleted values stay visible, and a split rewritten by a merge (a new split, written
without the deleted rows) gets none of the old logs.
"""

from __future__ import annotations

import bisect
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.model.actions import DELETE_LOG_KINDS, POSITIONAL, AddFile, DeleteLog
from indextables_spark.core.log.deletes.sidecar import decode_frame, encode_frame
from indextables_spark.core.schema.arrow_types import cast_or_fail
from indextables_spark.core.storage import open_storage
from indextables_spark.errors import (
    CorruptStateError,
    FileNotFoundInStorageError,
    IndexTablesError,
    SchemaMismatchError,
)
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    from indextables_spark.core.storage import Storage

DELETE_LOG_DIR = "_delete_logs"
MAGIC = b"ITDL"
FORMAT_VERSION = 1
ROW_COLUMN = "row"
_CACHE_ENTRIES = 512


class DeleteLogError(IndexTablesError):
    """A delete that cannot be expressed as asked (null key values, wrong column, ...)."""


# ---- writing -------------------------------------------------------------------------------------


def positional_table(row_ids: Iterable[int] | np.ndarray) -> pa.Table:
    ids = np.unique(np.asarray(list(row_ids) if not isinstance(row_ids, np.ndarray) else row_ids, dtype=np.int64))
    return pa.table({ROW_COLUMN: pa.array(ids, pa.int64())})


def encode_delete_log(kind: str, table: pa.Table, split_path: str | None = None) -> bytes:
    header = {
        "kind": kind,
        "numEntries": table.num_rows,
        "splitPath": split_path,
        "columns": None if kind == POSITIONAL else table.column_names,
    }
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(table)
    return encode_frame(MAGIC, FORMAT_VERSION, header, sink.getvalue().to_pybytes())


def write_delete_log(storage: Storage, kind: str, table: pa.Table, split_path: str | None = None) -> DeleteLog:
    """Write a new delete log file (put-if-absent) and return its (uncommitted) action."""
    if kind not in DELETE_LOG_KINDS:
        raise DeleteLogError(f"unknown delete log kind {kind!r} (expected one of {sorted(DELETE_LOG_KINDS)})")
    table = _normalised(kind, table)
    data = encode_delete_log(kind, table, split_path)
    key = f"{DELETE_LOG_DIR}/{uuid.uuid4()}.dlog"
    if not storage.put_if_absent(key, data):
        raise CorruptStateError(f"delete log {storage.full_uri(key)} already exists")
    return DeleteLog(
        path=key,
        kind=kind,
        num_entries=table.num_rows,
        size=len(data),
        split_path=split_path,
        columns=None if kind == POSITIONAL else list(table.column_names),
    )


def _normalised(kind: str, table: pa.Table) -> pa.Table:
    if kind == POSITIONAL:
        if table.column_names != [ROW_COLUMN]:
            raise DeleteLogError(f"a POSITIONAL delete log holds one column {ROW_COLUMN!r}, got {table.column_names}")
        return positional_table(table.column(0).to_numpy())
    if table.num_columns == 0:
        raise DeleteLogError(f"a {kind} delete log needs at least one column")
    for name in table.column_names:
        if table.column(name).null_count:
            raise DeleteLogError(
                f"{kind} delete values of column {name!r} include NULL, which never equals a "
                f"row value; delete NULL rows with a predicate (IS NULL) instead"
            )
    return table.group_by(table.column_names, use_threads=False).aggregate([]).select(table.column_names)


# ---- reading (validated, cached: delete log files never change) ---------------------------------------

_cache: LruCache[pa.Table] = LruCache(_CACHE_ENTRIES)


def read_delete_log(storage: Storage, log: DeleteLog) -> pa.Table:
    where = storage.full_uri(log.path)
    hit = _cache.get(where)
    if hit is not None:
        return hit
    try:
        data = storage.read(log.path)
    except FileNotFoundInStorageError:
        raise CorruptStateError(f"delete log {where} is missing (referenced by the table log)") from None
    table = decode_delete_log(data, log, where)
    _cache.put(where, table)
    return table


def decode_delete_log(data: bytes, log: DeleteLog, where: str) -> pa.Table:
    """Validate a delete log file against its action and return its rows."""
    if log.format_version != FORMAT_VERSION:
        raise CorruptStateError(
            f"{where}: the log records delete log format version {log.format_version}; "
            f"this indextables_spark reads version {FORMAT_VERSION}"
        )
    header, payload = decode_frame(data, MAGIC, FORMAT_VERSION, "delete log", where)
    for name, expected in (("kind", log.kind), ("splitPath", log.split_path), ("numEntries", log.num_entries)):
        if header.get(name) != expected:
            raise CorruptStateError(
                f"{where}: header {name} is {header.get(name)!r}, the deleteLog action says {expected!r}"
            )
    try:
        table = pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
    except pa.ArrowException as e:
        raise CorruptStateError(f"{where}: corrupt delete log payload ({e})") from None
    if table.num_rows != log.num_entries:
        raise CorruptStateError(f"{where}: holds {table.num_rows} entries, the deleteLog action says {log.num_entries}")
    if log.kind == POSITIONAL:
        if table.schema != pa.schema([pa.field(ROW_COLUMN, pa.int64())]) or table.column(0).null_count:
            raise CorruptStateError(
                f"{where}: a POSITIONAL log must hold one non-null int64 column {ROW_COLUMN!r}, found {table.schema}"
            )
    elif table.column_names != list(log.columns or []):
        raise CorruptStateError(f"{where}: holds columns {table.column_names}, the deleteLog action says {log.columns}")
    return table


# ---- which logs apply to which split -----------------------------------------------------------------


def applies_to(log: DeleteLog, add: AddFile) -> bool:
    added = add.added_at_version if add.added_at_version is not None else -1
    if log.kind == POSITIONAL:
        # it names its split (a split path is never added twice): it also applies when committed
        # with the split itself (a companion build logs the rows its source already deleted)
        return log.split_path == add.path and (log.added_at_version is None or added <= log.added_at_version)
    return log.added_at_version is None or added < log.added_at_version


@dataclass
class DeleteIndex:
    """The live delete logs of a snapshot, indexed for per-split lookups."""

    positional: dict[str, list[DeleteLog]] = field(default_factory=dict)
    keyed: list[DeleteLog] = field(default_factory=list)  # EQUALITY / PRIMARY_KEY, by version
    keyed_versions: list[int] = field(default_factory=list)  # _version_of each keyed log (bisected)

    @classmethod
    def of(cls, logs: Iterable[DeleteLog]) -> "DeleteIndex":
        idx = cls()
        for log in logs:
            if log.split_path is not None:  # POSITIONAL (DeleteLog checks only those name a split)
                idx.positional.setdefault(log.split_path, []).append(log)
            else:
                idx.keyed.append(log)
        idx.keyed.sort(key=_version_of)
        idx.keyed_versions = [_version_of(x) for x in idx.keyed]
        return idx

    def __bool__(self) -> bool:
        return bool(self.positional or self.keyed)

    def for_file(self, add: AddFile) -> list[DeleteLog]:
        added = add.added_at_version if add.added_at_version is not None else -1
        own = [x for x in self.positional.get(add.path, ()) if applies_to(x, add)]
        later = self.keyed[bisect.bisect_right(self.keyed_versions, added) :]
        return own + later


def _version_of(log: DeleteLog) -> int:
    # Uncommitted logs (no version yet) apply to everything that exists.
    return log.added_at_version if log.added_at_version is not None else 1 << 62


# ---- applying ---------------------------------------------------------------------------------------


@dataclass
class SplitDeletes:
    """The deletes of one split: deleted row ids and deleted value tuples (by column set)."""

    positions: np.ndarray  # sorted distinct int64 row ids
    equalities: list[tuple[str, pa.Table]] = field(default_factory=list)  # (log paths for errors, values)

    @property
    def only_positions(self) -> bool:
        return not self.equalities

    def _dead(self, ids: np.ndarray) -> np.ndarray:
        pos = self.positions
        if not pos.size or not ids.size:
            return np.zeros(ids.shape, dtype=bool)
        i = np.searchsorted(pos, ids)
        dead: np.ndarray = pos[np.minimum(i, pos.size - 1)] == ids
        return dead

    def without_positions(self, rows: Sequence[int]) -> list[int]:
        """Sorted row ids minus the deleted positions."""
        arr = np.asarray(rows, dtype=np.int64)
        kept: list[int] = arr[~self._dead(arr)].tolist()
        return kept

    def keep_mask(self, batch: pa.RecordBatch, row_ids: pa.Array) -> pa.BooleanArray | None:
        """Rows of `batch` (whose row ids are `row_ids`) that are not deleted; None keeps all."""
        keep = None
        if self.positions.size:
            dead = self._dead(row_ids.to_numpy(zero_copy_only=False).astype(np.int64, copy=False))
            if dead.any():
                keep = pa.array(~dead)
        for where, values in self.equalities:
            hit = equality_hits(batch, values, where)
            if hit is not None:
                keep = pc.invert(hit) if keep is None else pc.and_(keep, pc.invert(hit))
        return keep


def equality_hits(batch: pa.RecordBatch | pa.Table, values: pa.Table, where: str) -> pa.BooleanArray | None:
    """Rows whose values in `values`' columns equal one of its tuples (None when no row does)."""
    names = batch.schema.names
    cols = []
    for c in values.column_names:
        if c not in names:
            raise SchemaMismatchError(f"delete log {where}: column {c!r} is not stored in the split (columns: {names})")
        want = batch.schema.field(c).type
        got = values.column(c)
        if not got.type.equals(want):
            message = f"delete log {where}: values of column {c!r} ({got.type}) do not fit the split's type {want}"
            got = cast_or_fail(got, want, SchemaMismatchError, message)
        cols.append(got)
    if len(cols) == 1:
        hit = pc.is_in(
            batch.column(values.column_names[0]),
            value_set=cols[0].combine_chunks() if isinstance(cols[0], pa.ChunkedArray) else cols[0],
        )
    else:
        left = pa.table(
            {
                **{c: batch.column(c) for c in values.column_names},
                "__i": pa.array(np.arange(batch.num_rows, dtype=np.int64)),
            }
        )
        right = pa.table(dict(zip(values.column_names, cols)))
        matched = left.join(right, keys=values.column_names, join_type="left semi", use_threads=False)
        mask = np.zeros(batch.num_rows, dtype=bool)
        mask[matched.column("__i").to_numpy()] = True
        hit = pa.array(mask)
    if isinstance(hit, pa.ChunkedArray):
        hit = hit.combine_chunks()
    return hit if pc.any(hit).as_py() else None


def load_split_deletes(
    storage: Storage, logs: Sequence[DeleteLog], num_rows: int | None = None, split_path: str | None = None
) -> SplitDeletes | None:
    """The deletes of one split from its applicable logs (None when there are none)."""
    if not logs:
        return None
    positions: list[np.ndarray] = []
    by_columns: dict[tuple[str, ...], list[tuple[str, pa.Table]]] = {}
    for log in logs:
        table = read_delete_log(storage, log)
        if log.kind == POSITIONAL:
            ids = table.column(0).to_numpy()
            if num_rows is not None and ids.size and int(ids[-1]) >= num_rows:
                raise CorruptStateError(
                    f"delete log {storage.full_uri(log.path)}: row id {int(ids[-1])} is beyond "
                    f"the {num_rows} rows of split {split_path or log.split_path}"
                )
            positions.append(ids)
        else:
            by_columns.setdefault(tuple(table.column_names), []).append((log.path, table))
    pos = np.unique(np.concatenate(positions)) if positions else np.empty(0, dtype=np.int64)
    equalities = []
    for group in by_columns.values():
        where = ", ".join(p for p, _ in group)
        tables = [t for _, t in group]
        equalities.append(
            (where, pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0])
        )
    return SplitDeletes(pos, equalities)


# ---- liveness (which logs can still delete something) -------------------------------------------------


def drop_for_removed(logs: Iterable[DeleteLog], removed: set[str]) -> list[DeleteLog]:
    """Logs minus the POSITIONAL ones of removed splits (cheap pruning without the file list)."""
    return [x for x in logs if not (x.kind == POSITIONAL and x.split_path in removed)]


def live_delete_logs(logs: Sequence[DeleteLog], files: pa.Table) -> list[DeleteLog]:
    """The logs that still apply to some live split (`files`: the FileEntry table of every live split)."""
    if not logs:
        return []
    if files.num_rows == 0:
        return []
    positional = [x for x in logs if x.kind == POSITIONAL]
    keep: set[int] = set()
    if positional:
        live = pc.is_in(pa.array([x.split_path for x in positional], pa.string()), value_set=files.column("path"))
        keep |= {id(x) for x, ok in zip(positional, live.to_pylist()) if ok}
    oldest = pc.min(files.column("addedAtVersion")).as_py()
    oldest = -1 if oldest is None else oldest
    keep |= {id(x) for x in logs if x.kind != POSITIONAL and oldest < _version_of(x)}
    return [x for x in logs if id(x) in keep]


# ---- shipping deletes to readers (Spark tasks get the log actions, read the files themselves) --------------


class HasDeletes(Protocol):
    """What shipping deletes reads of a snapshot (snapshot.Snapshot)."""

    @property
    def delete_logs(self) -> list[DeleteLog]: ...

    def deletes_for(self, add: AddFile) -> list[DeleteLog]: ...


def deletes_json(snapshot: HasDeletes, files: Iterable[AddFile]) -> dict[str, list[dict[str, Any]]]:
    """{split path: its applicable deleteLog actions as wire JSON} for the files that have any."""
    if not snapshot.delete_logs:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        logs = snapshot.deletes_for(f)
        if logs:
            out[f.path] = [x.to_json() for x in logs]
    return out


def split_deletes(
    table_path: str, options: Mapping[str, Any] | None, add: AddFile, logs_json: Sequence[dict[str, Any]] | None
) -> SplitDeletes | None:
    """The SplitDeletes of one split from the shipped deleteLog JSON (None when there are none)."""
    if not logs_json:
        return None

    return load_split_deletes(
        open_storage(table_path, options), [DeleteLog.from_json(d) for d in logs_json], add.num_records, add.path
    )
