"""Replaying version files onto a base state: what the versions after a checkpoint change
(`collect_changes` → `Delta`), fetched together (`read_versions`), or fetched while the base
itself loads (`Prefetch`)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Container, Iterable, Iterator, Mapping

from indextables_spark.core.log.model.actions import (
    Action,
    AddFile,
    DeleteLog,
    Metadata,
    Protocol,
    RemoveFile,
    SkipAction,
    StatsFiles,
    split_of_stats_file,
)
from indextables_spark.core.log.model.paths import version_key
from indextables_spark.core.log.model.protocol_gate import check_readable
from indextables_spark.core.log.state.state_config import read_parallelism
from indextables_spark.errors import CorruptStateError, VersionNotFoundError

if TYPE_CHECKING:
    from indextables_spark.core.log.read.base_state import BaseState, LogReader


@dataclass
class Delta:
    """What the version files after a base change."""

    protocol: Protocol
    metadata: Metadata
    added: dict[str, AddFile]
    removed: dict[str, RemoveFile]  # paths whose last action after the base is a remove
    skips: dict[str, SkipAction]
    registry: dict[str, str]
    timestamp: int
    readded: set[str] = field(default_factory=set)  # removed, then added again after the base
    created: set[str] = field(default_factory=set)  # first seen as an add after the base (new files)
    delete_logs: list[DeleteLog] = field(default_factory=list)  # every live delete log at the version
    stats_files: dict[str, list[str]] = field(default_factory=dict)  # every stats file at the version

    @property
    def base_removes(self) -> dict[str, RemoveFile]:
        """Removes of files that existed at the base (tombstones for an incremental state)."""
        return {p: r for p, r in self.removed.items() if p not in self.created}


def read_versions(
    versions: Iterable[int], read: Callable[[int], list[Action]], parallelism: int, inline: Container[int] = ()
) -> Iterator[tuple[int, list[Action]]]:
    """(v, read(v)) for each version, in order. The files are fetched `parallelism` (the option
    state.read.parallelism) at a time: replaying the versions after a checkpoint costs about one
    round trip on object stores, not one per version. inline: versions read(v) answers without a
    request of its own (fetched already, Prefetch), called on this thread. A failure surfaces when
    its version is reached."""
    versions = list(versions)
    rest = [v for v in versions if v not in inline]
    workers = min(len(rest), parallelism)
    if workers <= 1:
        yield from ((v, read(v)) for v in versions)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="itx-versions") as pool:
        futures = {v: pool.submit(read, v) for v in rest}
        try:
            for v in versions:
                yield v, (futures[v].result() if v in futures else read(v))
        finally:
            for f in futures.values():
                f.cancel()


class Prefetch:
    """Version files being fetched in the background, `parallelism` at a time (`with` it: the pool
    ends with the block); a reader starts them while it loads the base they apply to.
    `futures[v]` holds read(v)'s outcome; `read(v)` waits for it, or reads a version not fetched."""

    def __init__(self, versions: list[int], read: Callable[[int], list[Action]], parallelism: int):
        self._read = read
        self._pool = (
            ThreadPoolExecutor(max_workers=min(len(versions), parallelism), thread_name_prefix="itx-versions")
            if versions and parallelism > 1
            else None  # read on demand, in the reader's thread
        )
        self.futures: dict[int, Future[list[Action]]] = {}
        if self._pool is not None:
            self.futures = {v: self._pool.submit(read, v) for v in versions}

    def read(self, version: int) -> list[Action]:
        f = self.futures.get(version)
        return f.result() if f is not None else self._read(version)

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def collect_changes(
    log_: LogReader, base: BaseState | None, version: int, fetched: Mapping[int, Future[list[Action]]] | None = None
) -> Delta:
    """What the version files after `base` (from 0 without one) up to `version` change.
    fetched: version files already being read (log_.read_actions) by a Prefetch."""
    start = base.version + 1 if base else 0
    protocol = base.protocol if base else None
    metadata = base.metadata if base else None
    skips = dict(base.skips) if base else {}
    registry = dict(base.schema_registry) if base else {}
    added: dict[str, AddFile] = {}
    removed: dict[str, RemoveFile] = {}
    readded: set[str] = set()
    created: set[str] = set()
    seen: set[str] = set()
    timestamp = base.timestamp if base else 0
    delete_logs: list[DeleteLog] = list(base.delete_logs) if base else []
    stats: dict[str, dict[str, None]] = {k: dict.fromkeys(v) for k, v in (base.stats_files if base else {}).items()}

    def read(v: int) -> list[Action]:
        try:
            f = fetched.get(v) if fetched else None
            return f.result() if f is not None else log_.read_actions(v)
        except VersionNotFoundError:
            raise VersionNotFoundError(
                f"version {version} of {log_.storage.uri} cannot be reconstructed: version file {v} "
                f"is missing and no checkpoint covers it (it may have been removed by retention)"
            ) from None

    for v, actions in read_versions(range(start, version + 1), read, read_parallelism(log_.options), fetched or ()):
        timestamp = log_.commit_timestamp(v, actions)
        for a in actions:
            if isinstance(a, AddFile):
                if a.added_at_version is None:
                    a.added_at_version = v
                if a.added_at_timestamp is None:
                    a.added_at_timestamp = timestamp
                if a.doc_mapping_json and not a.doc_mapping_ref:
                    from indextables_spark.core.log.model.doc_mapping import (
                        doc_mapping_hash,
                    )  # lazy: hashlib, for legacy adds only

                    ref = doc_mapping_hash(a.doc_mapping_json)
                    registry.setdefault(ref, a.doc_mapping_json)
                    a.doc_mapping_ref = ref
                if a.path not in seen:
                    seen.add(a.path)
                    created.add(a.path)
                added[a.path] = a
                if removed.pop(a.path, None) is not None:
                    readded.add(a.path)
                skips.pop(a.path, None)
            elif isinstance(a, RemoveFile):
                seen.add(a.path)
                added.pop(a.path, None)
                removed[a.path] = a
                skips.pop(a.path, None)
            elif isinstance(a, Metadata):
                metadata = a
                registry.update(a.doc_mappings)
            elif isinstance(a, Protocol):
                check_readable(a, f"{log_.storage.full_uri(version_key(v))}")
                protocol = a
            elif isinstance(a, SkipAction):
                skips[a.path] = a
            elif isinstance(a, DeleteLog):
                if a.added_at_version is None:
                    a.added_at_version = v
                if a.added_at_timestamp is None:
                    a.added_at_timestamp = timestamp
                delete_logs.append(a)
            elif isinstance(a, StatsFiles):
                stats.setdefault(a.key, {}).update(dict.fromkeys(a.files))
    if removed:
        from indextables_spark.core.log.deletes.delete_logs import (
            drop_for_removed,  # lazy: keeps `import indextables_spark.core.log.read.table_log` free of numpy, pyarrow
        )

        # Logs and stats files of splits removed since the base can no longer apply.
        delete_logs = drop_for_removed(delete_logs, set(removed))
        stats = {k: {f: None for f in fs if split_of_stats_file(f) not in removed} for k, fs in stats.items()}
    if protocol is None or metadata is None:
        raise CorruptStateError(
            f"table {log_.storage.uri} at version {version} has no "
            f"{'protocol' if protocol is None else 'metaData'} action"
        )
    check_readable(protocol, f"table {log_.storage.uri}")
    return Delta(
        protocol,
        metadata,
        added,
        removed,
        skips,
        registry,
        timestamp,
        readded,
        created,
        delete_logs,
        {k: list(fs) for k, fs in stats.items() if fs},
    )
