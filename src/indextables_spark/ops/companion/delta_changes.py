"""What a Delta source's deletion vectors and column mapping change in its companion index:
`delta_rows` tells ops/companion/deletes.py (the one planning loop) how to read them.

Deletion vectors: a file's vector lists the row positions the source deleted in it. A companion
split holds whole files in `__row` order (format/companion.py: each file's non-empty row groups),
so file position p of a file whose rows start at row r of the split is split row r + p; the
positions become POSITIONAL delete logs (core/log/deletes/delete_logs.py) of the split, committed
with it, which every read route applies. A sync takes up vectors changed since the version the
companion holds without indexing the file again: only the positions not deleted yet get a new log
(delete logs of a split add up); a vector that lost positions (RESTORE) indexes the split again.
A file the source removed (a copy-on-write delete, OPTIMIZE) has all its rows logged the same way:
the split's other files are not indexed again.

Column mapping: the companion records the mapping its splits were built with, nested struct fields
included (ops/companion/nested_fields.py); a column or nested field renamed or dropped since
indexes every split again, under the source's current names.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from indextables_spark.config.options import Options
from indextables_spark.core.split.format.companion import CONFIG_VERSION
from indextables_spark.errors import CompanionSourceError, FileNotFoundInStorageError
from indextables_spark.ops.companion.nested_fields import nesting_config, nesting_moved
from indextables_spark.ops.companion.rows import DeletedRowsSource, deleted_split_rows, split_info
from indextables_spark.ops.companion.sources.column_mapping import (
    CONFIG_COLUMN_MAPPING,
    mapping_changed,
    mapping_config,
)
from indextables_spark.ops.companion.sources.deletion_vectors import deleted_positions
from indextables_spark.ops.companion.sources.locations import is_local, local_path

if TYPE_CHECKING:
    from indextables_spark.core.storage import Storage
    from indextables_spark.ops.companion.sources import SourceFile, SourceSnapshot


def new_split_rows(
    storage: Storage, opts: Options, snapshot: SourceSnapshot, adds_json: Sequence[Mapping[str, Any]]
) -> dict[str, np.ndarray]:
    """{split path: row ids} the deletion vectors of its files delete, for the new splits holding
    a file with a vector (placed by the row groups in the split's footer)."""
    from indextables_spark.core.log.model.actions import AddFile  # lazy: as the log modules

    rows: dict[str, np.ndarray] = {}
    by_key = {f.key: f for f in snapshot.files}
    read = _dv_reader(snapshot, opts)
    for a in (AddFile.from_json(dict(d)) for d in adds_json):
        if any(by_key[k].deletion_vector is not None for k in a.companion_source_files or () if k in by_key):
            rows[a.path] = deleted_split_rows(split_info(storage, opts, a), by_key, read)
    return rows


def delta_rows(opts: Options, snapshot: SourceSnapshot, stored: Mapping[str, str] | None) -> DeletedRowsSource:
    """A Delta source's deleted rows: its deletion vectors, read only for splits holding a file
    whose add action is newer than the version the companion holds; a renamed or dropped column
    (column mapping) indexes every split again, under the source's current names."""
    config = {}
    if snapshot.physical_names:
        config = {CONFIG_COLUMN_MAPPING: mapping_config(snapshot.physical_names), **nesting_config(snapshot.nested)}
    recorded = (stored or {}).get(CONFIG_VERSION)
    since = int(recorded) if recorded else None
    return DeletedRowsSource(
        positions=_dv_reader(snapshot, opts),
        may_have_changed=lambda files, has_logs: _may_have_changed(files, has_logs, since, snapshot.version),
        renamed=mapping_changed((stored or {}).get(CONFIG_COLUMN_MAPPING), snapshot.physical_names)
        or bool(nesting_moved(stored, snapshot.nested, CONFIG_COLUMN_MAPPING)),
        configuration=config,
    )


def _may_have_changed(files: Sequence[SourceFile], has_logs: bool, since: int | None, version: int | None) -> bool:
    """Can the split's deleted rows differ from its logs? Only when a file's add action is newer
    than the version the companion holds (or that version is unknown or not behind)."""
    if not has_logs and all(f.deletion_vector is None for f in files):
        return False
    if since is None or version is None or since > version:
        return True
    return any(f.log_version is None or f.log_version > since for f in files)


def _dv_reader(snapshot: SourceSnapshot, opts: Options) -> Callable[[SourceFile], np.ndarray | None]:
    from indextables_spark.core.storage import open_storage  # lazy: as the source readers

    root = local_path(snapshot.root) if is_local(snapshot.root) else snapshot.root

    def read_range(path: str, start: int, length: int) -> bytes:
        absolute = "://" in path or path.startswith("/")
        parent, name = posixpath.split(path if absolute else posixpath.join(root, path))
        store = open_storage(parent, opts)
        try:
            return store.read_range(name, start, start + length)
        except (FileNotFoundInStorageError, FileNotFoundError):
            raise CompanionSourceError(
                f"deletion vector file {store.full_uri(name)} of Delta table {snapshot.source} is missing"
            ) from None

    def read(f: SourceFile) -> np.ndarray | None:
        if f.deletion_vector is None:
            return None
        return deleted_positions(f.deletion_vector, read_range, f"source file {f.uri}")

    return read
