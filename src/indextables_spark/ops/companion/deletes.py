"""Rows a source deleted, as POSITIONAL delete logs of the companion splits
(core/log/deletes/delete_logs.py), which every read route applies; and the splits a source's
changes index again. `plan_changes` is the one call of a build, for every source:

- every source: a file it removed (a copy-on-write delete or OPTIMIZE rewrote it, a Parquet file
  deleted from the directory) has all its rows logged, placed by the split's footer; the split's
  other files are not indexed again, and a split none of whose files is left goes;
- Iceberg: delete files resolved to file positions when planning (SourceFile.deleted,
  sources/iceberg_files.py); field ids recorded, a rename re-indexes (below);
- Delta: deletion vectors read when needed, only for files whose add action changed since the
  version the companion holds (ops/companion/delta_changes.py); column mapping recorded, a rename
  or drop re-indexes.

A split's rows are its files' rows in order, each file contiguous (empty row groups hold no rows),
so a file position p is row `offset(file) + p` of the split. A build logs the deleted rows of the
splits it writes in its own commit (`SourceChanges.write_logs`: Iceberg's placed by the index task
from the Parquet footers' row counts, `task_deletes`; Delta's from the split's footer). Each sync
compares the source's deleted positions of the live splits with those their logs hold: new ones
are logged, and a split whose logs delete a row the source has again (a rollback, RESTORE) is
indexed again, as is a split whose files' row counts do not add up to its own. An Iceberg rename
(or a column name taken by another field id), of a top-level column or a nested field
(ops/companion/nested_fields.py), re-indexes every split: splits name their fields as the source did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from indextables_spark.config.options import PREFIX, Options
from indextables_spark.ops.companion.delta_changes import delta_rows, new_split_rows
from indextables_spark.ops.companion.nested_fields import nesting_config, nesting_moved
from indextables_spark.ops.companion.rows import (
    DeletedRowsSource,
    deleted_split_rows,
    logged_rows,
    newly_removed_files,
    placed_rows,
    split_info,
)
from indextables_spark.ops.companion.sync import reindexing

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile, DeleteLog
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.storage import Storage
    from indextables_spark.ops.companion.sources import SourceFile, SourceSnapshot
    from indextables_spark.ops.companion.sync import IndexGroup, SyncPlan

CONFIG_FIELD_IDS = PREFIX + "companion.sourceFieldIds"  # Iceberg: {column: field id} indexed


@dataclass(frozen=True)
class SourceChanges:
    """The sync plan with the splits to index again, what the build records, and the deleted rows
    of the live splits kept (not indexed again) whose deletes are not logged yet."""

    sync: SyncPlan
    configuration: dict[str, str] = field(default_factory=dict)  # recorded in the companion's metadata
    pending: dict[str, np.ndarray] = field(default_factory=dict)  # kept split path -> sorted row ids

    def write_logs(
        self, storage: Storage, opts: Options, snapshot: SourceSnapshot, written: Sequence[Mapping[str, Any]]
    ) -> list[DeleteLog]:
        """POSITIONAL delete logs of the kept splits (`pending`) and of the splits the tasks wrote
        (`written`: their results), written before the commit that lists them; returns their
        (uncommitted) DeleteLog actions."""
        from indextables_spark.core.log.deletes.delete_logs import (  # lazy: numpy-heavy log module
            positional_table,
            write_delete_log,
        )
        from indextables_spark.core.log.model.actions import POSITIONAL  # lazy: see above

        rows: dict[str, Any] = dict(self.pending)
        for w in written:
            rows.update(w.get("deletes") or {})  # Iceberg: placed by the tasks
        rows.update(new_split_rows(storage, opts, snapshot, [a for w in written for a in w["adds"]]))  # Delta
        logs: list[DeleteLog] = []
        try:
            for path, ids in sorted(rows.items()):
                if len(ids):
                    logs.append(write_delete_log(storage, POSITIONAL, positional_table(ids), path))
        except BaseException:
            storage.delete([x.path for x in logs])
            raise
        return logs


def plan_changes(
    storage: Storage,
    opts: Options,
    snapshot: SourceSnapshot,
    sync: SyncPlan,
    live: Sequence[AddFile],
    table_snapshot: Snapshot | None,
    stored: Mapping[str, str] | None,
) -> SourceChanges:
    """Extend `sync` (ops/companion/sync.py) with the splits the source's changes index again
    (renames, rows that came back), and find the newly deleted rows of the splits kept
    (`table_snapshot`: the companion at its read version), for every source format alike."""
    source = delta_rows(opts, snapshot, stored) if snapshot.format == "delta" else source_rows(snapshot, stored)
    stale = {a.path for a in sync.stale}
    kept = [a for a in live if a.path not in stale]
    if source.renamed:  # the splits name the columns as the source did
        return SourceChanges(reindexing(sync, snapshot, kept), source.configuration)
    by_key = {f.key: f for f in snapshot.files}
    again: list[AddFile] = []
    rows: dict[str, np.ndarray] = {}
    removed = 0
    for add in kept:
        assert table_snapshot is not None  # live splits: the companion exists
        keys = add.companion_source_files or ()
        files = [by_key[k] for k in keys if k in by_key]
        logs = [x for x in table_snapshot.deletes_for(add) if x.kind == "POSITIONAL"]
        if len(files) == len(keys) and not source.may_have_changed(files, bool(logs)):
            continue
        info = split_info(storage, opts, add) if len(files) < len(keys) or not source.counted else None
        want = deleted_split_rows(info, by_key, source.positions) if info else counted_rows(add, files)
        logged = logged_rows(storage, logs, add)
        if want is None or np.setdiff1d(logged, want).size:
            again.append(add)  # rows came back (RESTORE, a rollback), or positions cannot be placed
            continue
        new = np.setdiff1d(want, logged)
        if new.size:
            rows[add.path] = new
            removed += newly_removed_files(info, by_key, logged) if info is not None else 0
    sync = replace(sync, files_removed=sync.files_removed + removed)
    return SourceChanges(reindexing(sync, snapshot, again) if again else sync, source.configuration, rows)


def source_rows(snapshot: SourceSnapshot, stored: Mapping[str, str] | None) -> DeletedRowsSource:
    """Sources listing deleted positions per file (SourceFile.deleted: Iceberg's delete files,
    resolved when planning) or none (a Parquet directory): placed by the source's row counts; an
    Iceberg rename (a field id under another name) indexes every split again."""
    config = {}
    if snapshot.format == "iceberg":
        config = {CONFIG_FIELD_IDS: json.dumps(snapshot.field_ids, separators=(",", ":"), sort_keys=True)}
        config.update(nesting_config(snapshot.nested))
    return DeletedRowsSource(
        positions=lambda f: np.asarray(f.deleted, np.int64) if f.deleted else None,
        counted=True,
        renamed=bool(columns_moved(snapshot, stored) or nesting_moved(stored, snapshot.nested, CONFIG_FIELD_IDS)),
        configuration=config,
    )


def columns_moved(snapshot: SourceSnapshot, stored: Mapping[str, str] | None) -> list[str]:
    """Columns whose field id changed since the recorded build (renamed, or a name given to
    another field): the splits know them by their old names."""
    recorded = json.loads((stored or {}).get(CONFIG_FIELD_IDS) or "{}")
    now = snapshot.field_ids or {}
    names = {fid: n for n, fid in now.items()}
    moved = [n for n, fid in recorded.items() if (n in now and now[n] != fid) or names.get(fid, n) != n]
    return sorted(moved)


def counted_rows(add: AddFile, files: Sequence[SourceFile]) -> np.ndarray | None:
    """The split's deleted row ids placed by the source's row counts, no footer read (None: the
    counts are unknown or do not add up to the split's rows)."""
    if not any(f.deleted for f in files):
        return np.empty(0, np.int64)
    counts = [f.num_records for f in files]
    known = [n for n in counts if n is not None]
    if len(known) != len(counts) or (add.num_records is not None and sum(known) != add.num_records):
        return None
    return placed_rows([f.deleted for f in files], known)


def task_deletes(group: IndexGroup, adds: Sequence[AddFile], rows: Mapping[str, int]) -> dict[str, list[int]]:
    """Task side: {split path: deleted row ids} of the splits one index task wrote, from the
    files' deleted positions and their row counts (`rows`: file key -> rows in its Parquet file)."""
    by_key = {f.key: f for f in group.files}
    out = {}
    for add in adds:
        keys = list(add.companion_source_files or ())
        ids = placed_rows([by_key[k].deleted for k in keys], [rows[k] for k in keys])
        if ids.size:
            out[add.path] = ids.tolist()
    return out
