"""The deletion vector of each live file of a Delta table at one version, from its `_delta_log/`
(deltalake's add actions do not carry the descriptors): the newest checkpoint at or before the
version, then the JSON commits after it. Each file also gets the version of its current add action,
so that a sync can tell which vectors changed since it last ran.

Checkpoints: classic (`n.checkpoint.parquet`, or multi-part `n.checkpoint.i.k.parquet`) and V2
(`n.checkpoint.<uuid>.json` or `.parquet`, table feature `v2Checkpoint`, Databricks' default
`delta.checkpointPolicy=v2`), whose add actions are in the file itself or in the sidecar files it
names (`_delta_log/_sidecars/`)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import unquote

from indextables_spark.errors import CompanionSourceError, FileNotFoundInStorageError
from indextables_spark.ops.companion.sources.deletion_vectors import DeletionVector

if TYPE_CHECKING:
    from indextables_spark.core.storage import Storage

_COMMIT = re.compile(r"_delta_log/(\d{20})\.json")
_CHECKPOINT = re.compile(r"_delta_log/(\d{20})\.checkpoint(?:\.(\d+)\.(\d+))?\.parquet")
_V2_CHECKPOINT = re.compile(r"_delta_log/(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)")
SIDECARS = "_delta_log/_sidecars/"


@dataclass(frozen=True)
class LiveFile:
    deletion_vector: DeletionVector | None
    version: int  # the version of its current add action (the checkpoint's for files from it)


def live_files(storage: Storage, version: int, where: str) -> dict[str, LiveFile]:
    """{file key (the logged path, URL-decoded): LiveFile} at `version`."""
    keys = [i.key for i in storage.list("_delta_log/")]
    start, files = _from_checkpoint(storage, keys, version, where)
    commits = {int(m.group(1)) for k in keys if (m := _COMMIT.fullmatch(k))}
    for v in range(start + 1, version + 1):
        if v not in commits:
            raise CompanionSourceError(
                f"Delta table {where}: commit {v} is missing from _delta_log/ (no checkpoint covers it), so "
                "the deletion vectors of version {version} cannot be read"
            )
        for action in _commit_actions(storage, v, where):
            if "add" in action:
                add = action["add"]
                files[unquote(add["path"])] = LiveFile(_descriptor(add, where), v)
            elif "remove" in action:
                files.pop(unquote(action["remove"]["path"]), None)
    return files


def _from_checkpoint(storage: Storage, keys: list[str], version: int, where: str) -> tuple[int, dict[str, LiveFile]]:
    """(checkpoint version or -1, its live files): the newest complete checkpoint at or before
    `version`, classic or V2."""
    parts: dict[tuple[int, int], list[str]] = {}
    v2: dict[int, str] = {}
    for k in keys:
        if (m := _CHECKPOINT.fullmatch(k)) and int(m.group(1)) <= version:
            parts.setdefault((int(m.group(1)), int(m.group(3) or 1)), []).append(k)
        elif (m := _V2_CHECKPOINT.fullmatch(k)) and int(m.group(1)) <= version:
            v2[int(m.group(1))] = k
    complete = {v: sorted(ks) for (v, n), ks in parts.items() if len(ks) == n}
    complete.update({v: [k] for v, k in v2.items()})  # a V2 checkpoint is whole (its sidecars are named in it)
    if not complete:
        return -1, {}
    cp = max(complete)
    files: dict[str, LiveFile] = {}
    for key in complete[cp]:
        for add in _checkpoint_adds(storage, key, where):
            files[unquote(add["path"])] = LiveFile(_descriptor(add, where), cp)
    return cp, files


def _checkpoint_adds(storage: Storage, key: str, where: str) -> Iterator[dict[str, Any]]:
    """The add actions of a checkpoint file, and of the sidecar files a V2 checkpoint names."""
    for action in _checkpoint_actions(storage, key, where):
        add, sidecar = action.get("add"), action.get("sidecar")
        if add is not None and add.get("path") is not None:
            yield add
        elif sidecar is not None and sidecar.get("path") is not None:
            yield from _sidecar_adds(storage, sidecar["path"], key, where)


def _sidecar_adds(storage: Storage, path: str, checkpoint: str, where: str) -> Iterator[dict[str, Any]]:
    name = unquote(path)
    if "/" in name:  # an absolute URI or a path elsewhere: Delta writers put sidecars in _sidecars/
        raise CompanionSourceError(
            f"Delta table {where}: checkpoint {checkpoint} names sidecar {path} outside {SIDECARS}, which is not read"
        )
    key = SIDECARS + name
    try:
        for action in _checkpoint_actions(storage, key, where):
            add = action.get("add")
            if add is not None and add.get("path") is not None:
                yield add
    except FileNotFoundInStorageError:
        raise CompanionSourceError(
            f"Delta table {where}: sidecar {key} of checkpoint {checkpoint} is missing"
        ) from None


def _checkpoint_actions(storage: Storage, key: str, where: str) -> Iterator[dict[str, Any]]:
    """The actions of a checkpoint or sidecar file (Parquet: its add and sidecar columns; JSON lines)."""
    if key.endswith(".json"):
        try:
            actions = [json.loads(line) for line in storage.read(key).decode("utf-8").splitlines() if line.strip()]
        except ValueError as e:
            raise CompanionSourceError(f"Delta table {where}: checkpoint {key} is not readable ({e})") from None
        yield from actions
        return
    import pyarrow.parquet as pq  # lazy: checkpoints are read only for tables with deletion vectors

    try:
        pf = pq.ParquetFile(io.BytesIO(storage.read(key)))
        columns = [c for c in ("add", "sidecar") if c in pf.schema_arrow.names]
        table = pf.read(columns=columns)
    except (OSError, ValueError) as e:
        raise CompanionSourceError(f"Delta table {where}: checkpoint {key} is not readable ({e})") from None
    yield from table.to_pylist()


def _commit_actions(storage: Storage, v: int, where: str) -> Iterator[dict[str, Any]]:
    key = f"_delta_log/{v:020d}.json"
    try:
        text = storage.read(key).decode("utf-8")
    except FileNotFoundInStorageError:
        raise CompanionSourceError(f"Delta table {where}: commit {key} disappeared while reading the log") from None
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def _descriptor(add: dict[str, Any], where: str) -> DeletionVector | None:
    dv = add.get("deletionVector")
    return None if dv is None else DeletionVector.from_json(dv, f"Delta table {where}, file {add['path']}")
