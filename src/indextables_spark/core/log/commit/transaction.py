"""Optimistic transactions: read a version, stage actions, write the next version file
put-if-absent; on a lost race re-read what was committed meanwhile, let the resolver decide, and
try the next version, for as long as the commit policy allows (policy.py: a time budget).

Resolvers:
- "merge": rebase onto the newer version unless a file this transaction removes was removed
  concurrently, or the table's metadata/protocol changed concurrently. With delete logs, also a
  conflict: a split this transaction's POSITIONAL delete log targets was removed concurrently
  (its rows may live in another split now), or a concurrent delete log applies to a split this
  transaction rewrites (removes with dataChange=false, e.g. MERGE SPLITS: the rewrite would bring
  the deleted rows back). A concurrent protocol change is merged when this transaction only adds
  reader/writer features itself (the first delete log adds `deletionLogs`) or sets none.
- "fail": any concurrent commit raises ConcurrentModificationError (for destructive operations).

Splits or delete logs of ours never go into a table holding splits the reference implementation
wrote (ReferenceTableError, core/log/commit/reference_splits.py), nor rebase over a concurrent commit adding
such splits; the one exception is the CONVERT operation, which replaces them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from types import TracebackType
from typing import Any, Iterable

from indextables_spark.core.log.model.actions import (
    POSITIONAL,
    Action,
    AddFile,
    CommitInfo,
    DeleteLog,
    Metadata,
    Protocol,
    RemoveFile,
    SkipAction,
    StatsFiles,
    split_of_stats_file,
)
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash, is_reference_doc_mapping, registry_key
from indextables_spark.core.log.state.state_config import read_parallelism
from indextables_spark.core.log.model.protocol_gate import DELETION_LOGS, check_writable, with_features
from indextables_spark.core.log.commit.reference_splits import (
    CONVERT_OPERATION,
    REFERENCE_NAME,
    may_hold_reference_splits,
    refuse_reference_writes,
)
from indextables_spark.core.log.commit.policy import CommitPolicy, Lost, retry
from indextables_spark.core.log.read.replay import read_versions
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.storage.base import check_key
from indextables_spark.errors import (
    ConcurrentModificationError,
    IndexTablesError,
    PathEscapeError,
    ReferenceTableError,
    TableNotFoundError,
)

log = logging.getLogger(__name__)

RESOLVERS = ("merge", "fail")


def now_ms() -> int:
    return int(time.time() * 1000)


class Transaction:
    def __init__(
        self,
        log_: TransactionLog,
        resolver: str = "merge",
        read_version: int | None = None,
        operation: str = "WRITE",
        operation_parameters: dict[str, Any] | None = None,
    ):
        if resolver not in RESOLVERS:
            raise IndexTablesError(f"unknown resolver {resolver!r}; expected one of {RESOLVERS}")
        self.log = log_
        self.resolver = resolver
        self.read_version = log_.latest_version() if read_version is None else read_version
        self.operation = operation
        self.operation_parameters = dict(operation_parameters or {})
        self.txn_id: str | None = None
        self._adds: list[AddFile] = []
        self._removes: list[RemoveFile] = []
        self._skips: list[SkipAction] = []
        self._metadata: Metadata | None = None
        self._protocol: Protocol | None = None
        self._extra: list[Action] = []
        self._delete_logs: list[DeleteLog] = []
        self._stats: dict[str, list[str]] = {}
        self._added_features: tuple[str, ...] = ()  # features this transaction adds to the read protocol
        self.committed_version: int | None = None
        self.attempts = 0  # of the commit: 1 when it won its first race for a version
        self.commit_s = 0.0  # seconds the commit took, retries included
        self._snapshot: Snapshot | None = None
        self._header: tuple[Protocol, Metadata, dict[str, str]] | None = None
        self.skip_post_commit = False  # internal: commits made by the state layer itself
        self._registry_only = False  # the staged metadata only adds schema-registry entries
        self._added_registry: dict[str, str] = {}

    # ---- reading -----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot | None:
        """The snapshot at the read version (None for a new table)."""
        if self._snapshot is None and self.read_version >= 0:
            self._snapshot = self.log.snapshot(self.read_version)
        return self._snapshot

    def header(self) -> tuple[Protocol, Metadata, dict[str, str]] | None:
        """(protocol, metadata, schema registry) at the read version, without decoding manifests
        (None for a new table)."""
        if self._header is None and self.read_version >= 0:
            snap = self._snapshot
            if snap is not None:
                self._header = (snap.protocol_action, snap.metadata_action, dict(snap.schema_registry))
            else:
                self._header = self.log.header(self.read_version)
        return self._header

    # ---- staging (fluent) ----------------------------------------------------------------------
    def add_files(self, files: Iterable[AddFile]) -> "Transaction":
        self._adds.extend(files)
        return self

    def remove_files(self, paths: Iterable[str | RemoveFile], data_change: bool = True) -> "Transaction":
        ts = now_ms()
        for p in paths:
            if isinstance(p, RemoveFile):
                self._removes.append(p)
            else:
                self._removes.append(RemoveFile(path=p, deletion_timestamp=ts, data_change=data_change))
        return self

    def add_delete_log(self, log_: DeleteLog) -> "Transaction":
        """Stage a delete log (written with log.delete_logs.write_delete_log)."""
        if log_.added_at_version is not None:
            raise IndexTablesError(f"delete log {log_.path} is already committed (version {log_.added_at_version})")
        self._delete_logs.append(log_)
        return self

    def update_stat(self, key: str, files: Iterable[str]) -> "Transaction":
        """List per-split stats files under `key` (e.g. "bloomfilter"); each is named after its split."""
        files = list(files)
        for f in files:
            split_of_stats_file(f)  # validates the name
        if not key or not isinstance(key, str):
            raise IndexTablesError(f"stats key must be a non-empty string, got {key!r}")
        self._stats.setdefault(key, []).extend(f for f in files if f not in self._stats.get(key, []))
        return self

    def add_skips(self, skips: Iterable[SkipAction]) -> "Transaction":
        self._skips.extend(skips)
        return self

    def set_metadata(self, metadata: Metadata) -> "Transaction":
        self._metadata = metadata
        return self

    def set_protocol(self, protocol: Protocol) -> "Transaction":
        self._protocol = protocol
        return self

    def add_actions(self, actions: Iterable[Action]) -> "Transaction":
        self._extra.extend(actions)
        return self

    def with_operation(self, operation: str, parameters: dict[str, Any] | None = None) -> "Transaction":
        self.operation = operation
        if parameters:
            self.operation_parameters.update(parameters)
        return self

    # ---- commit ---------------------------------------------------------------------------------
    def _actions(self, version: int) -> list[Action]:
        ts = now_ms()
        params = {**self.operation_parameters, "numAddedFiles": len(self._adds), "numRemovedFiles": len(self._removes)}
        if self._delete_logs:
            params["numDeleteLogs"] = len(self._delete_logs)
        info = CommitInfo(timestamp=ts, operation=self.operation, operation_parameters=params, txn_id=self.txn_id)
        acts: list[Action] = [info]
        if self._protocol is not None:
            acts.append(self._protocol)
        if self._metadata is not None:
            acts.append(self._metadata)
        for a in self._adds:
            a.added_at_version = version
            a.added_at_timestamp = ts
            if a.doc_mapping_json and not a.doc_mapping_ref:
                raise IndexTablesError("internal: doc mappings must be deduplicated before commit")
        acts.extend(self._removes)
        acts.extend(self._adds)
        acts.extend(self._skips)
        for d in self._delete_logs:
            d.added_at_version = version
            d.added_at_timestamp = ts
        acts.extend(self._delete_logs)
        acts.extend(StatsFiles(k, v) for k, v in self._stats.items() if v)
        acts.extend(self._extra)
        return acts

    def _check_paths(self) -> None:
        """Every path this transaction records must stay inside the table root (no `..`, no
        absolute paths, no other bucket/account URIs): a crafted path would make later readers,
        merges or purges reach outside the table. Readers refuse such paths again on I/O."""

        paths = [("add", a.path) for a in self._adds] + [("remove", r.path) for r in self._removes]
        paths += [("skip", s.path) for s in self._skips]
        paths += [("deleteLog", d.path) for d in self._delete_logs]
        paths += [("deleteLog split", d.split_path) for d in self._delete_logs if d.split_path is not None]
        paths += [("stats file", f) for files in self._stats.values() for f in files]
        for kind, p in paths:
            try:
                norm = check_key(p) if isinstance(p, str) else None
            except PathEscapeError as e:
                raise PathEscapeError(
                    f"{self.operation} on {self.log.storage.uri}: {kind} path {p!r} refused: {e}"
                ) from None
            if norm != p:
                raise PathEscapeError(
                    f"{self.operation} on {self.log.storage.uri}: {kind} path {p!r} is not a "
                    f"normalized relative path inside the table"
                )

    def _stage_features(self) -> None:
        """The first delete log of a table adds the `deletionLogs` reader/writer feature."""
        if not self._delete_logs:
            return
        base = self._protocol
        if base is None:
            hdr = self.header()  # None exactly when read_version < 0 (a new table)
            base = hdr[0] if hdr is not None else None
        if base is None:
            raise IndexTablesError(f"cannot add delete logs to {self.log.storage.uri}: the new table has no protocol")
        upgraded = with_features(base, DELETION_LOGS)
        if upgraded is not base:
            if self._protocol is None:
                self._added_features = (DELETION_LOGS,)
            self._protocol = upgraded

    def _rebase_protocol(self, concurrent: Protocol, version: int) -> None:
        """A concurrent protocol change is merged unless this transaction sets a protocol of its own."""
        if self._protocol is not None and not self._added_features:
            raise self._conflict(f"the table protocol changed concurrently in version {version}")
        check_writable(concurrent, f"table {self.log.storage.uri} (version {version})")
        if self._added_features:
            upgraded = with_features(concurrent, *self._added_features)
            self._protocol = None if upgraded is concurrent else upgraded

    def _writes_our_files(self, registry: dict[str, str] | None = None) -> bool:
        """Does this commit put our splits or delete logs into the table (CONVERT aside, which
        replaces the reference's splits)? Adding splits the reference wrote (their doc mapping
        inline, or a ref `registry` resolves to a reference mapping) is what the reference does
        itself, not a mix."""
        if self.operation == CONVERT_OPERATION:
            return False
        reg = registry or {}

        def ours(a: AddFile) -> bool:
            mapping = a.doc_mapping_json or (reg.get(a.doc_mapping_ref) if a.doc_mapping_ref else None)
            return not is_reference_doc_mapping(mapping)

        return bool(self._delete_logs) or any(ours(a) for a in self._adds)

    def _refuse_reference_base(self) -> None:
        """The safety net behind every write route (core/log/commit/reference_splits.py): no splits or delete
        logs of ours go into a table holding splits the reference implementation wrote. Only the
        header is read unless the table knows a reference doc mapping at all."""
        if self.read_version < 0 or not self._writes_our_files():
            return
        hdr = self.header()
        assert hdr is not None  # read_version >= 0
        registry = {**hdr[1].doc_mappings, **hdr[2]}
        if not may_hold_reference_splits(registry) or not self._writes_our_files(registry):
            return
        refuse_reference_writes(self.snapshot(), self.log.storage.uri, self.operation)

    def _conflict(self, what: str, note: str = "") -> ConcurrentModificationError:
        """The error for a concurrent commit this transaction cannot merge with (`what` happened)."""
        return ConcurrentModificationError(
            f"{self.operation} on {self.log.storage.uri}: {what} (transaction read version {self.read_version}{note})"
        )

    def _check_conflicts(self, since: int, upto: int) -> None:
        """Versions (since, upto] were committed by others while we worked."""
        my_removes = {r.path for r in self._removes}
        registry: dict[str, str] | None = None  # doc mappings known, to judge concurrent adds
        rewritten = {r.path for r in self._removes if not r.data_change}  # rewrites (merge): rows kept elsewhere
        targets = {d.split_path for d in self._delete_logs if d.kind == POSITIONAL}
        if self.resolver == "fail" and upto > since:
            raise self._conflict(f"version {since + 1} was committed concurrently", "; resolver 'fail'")
        # fetched together (one round trip, not one per version): a loser that reads the versions
        # committed meanwhile one by one loses the next race too
        for v, actions in read_versions(
            range(since + 1, upto + 1), self.log.read_actions, read_parallelism(self.log.options)
        ):
            if self._writes_our_files() and any(isinstance(a, AddFile) for a in actions):
                registry = self._refuse_reference_adds(v, actions, registry)
            for a in actions:
                if isinstance(a, Metadata) and self._registry_only_change(a):
                    self._rebase_metadata(a)
                    continue
                if isinstance(a, Protocol):
                    self._rebase_protocol(a, v)
                    continue
                if isinstance(a, Metadata):
                    raise self._conflict(f"the table metadata changed concurrently in version {v}")
                if isinstance(a, RemoveFile) and a.path in targets:
                    raise self._conflict(
                        f"split {a.path}, whose rows this transaction deletes, was removed concurrently in version {v}"
                    )
                if isinstance(a, DeleteLog) and rewritten and (a.kind != POSITIONAL or a.split_path in rewritten):
                    what = f"split {a.split_path}" if a.kind == POSITIONAL else "every split added before it"
                    raise self._conflict(
                        f"rows were deleted concurrently in version {v} "
                        f"({a.kind} delete log {a.path}, applying to {what}) from splits this transaction rewrites"
                    )
                if isinstance(a, RemoveFile) and a.path in my_removes:
                    raise self._conflict(f"file {a.path} was removed concurrently in version {v}")
                if isinstance(a, CommitInfo) and self.txn_id and a.txn_id == self.txn_id:
                    raise ConcurrentModificationError(
                        f"{self.operation} on {self.log.storage.uri}: transaction {self.txn_id} was already "
                        f"committed as version {v}"
                    )

    def _refuse_reference_adds(
        self, version: int, actions: list[Action], registry: dict[str, str] | None
    ) -> dict[str, str]:
        """A concurrent commit added splits the reference wrote: ours must not join them."""
        if registry is None:
            hdr = self.header()
            registry = {**hdr[1].doc_mappings, **hdr[2]} if hdr is not None else {}
        for a in actions:
            if isinstance(a, Metadata):
                registry.update(a.doc_mappings)
        found = [
            a.path
            for a in actions
            if isinstance(a, AddFile)
            and is_reference_doc_mapping(
                a.doc_mapping_json or (registry.get(a.doc_mapping_ref) if a.doc_mapping_ref else None)
            )
        ]
        if found:
            raise ReferenceTableError(
                f"{self.operation} on {self.log.storage.uri}: version {version}, committed concurrently, added "
                f"{len(found)} splits written by the reference implementation ({REFERENCE_NAME}, e.g. {found[0]}); "
                f"our splits and delete logs do not go into such a table: run CONVERT INDEXTABLES TABLE "
                f"'{self.log.storage.uri}' and retry",
                table_path=self.log.storage.uri,
                reference_splits=len(found),
            )
        return registry

    # ---- schema deduplication, write path (docs/reference/table-format.md, "Schema deduplication") ----
    def _deduplicate_doc_mappings(self) -> None:
        """Inline docMappingJson → docMappingRef (canonical hash); new schemas go into the
        metadata's registry (`docMappingSchema.<hash>`), so a metadata action is staged."""
        inline = [(a, mapping) for a in self._adds if (mapping := a.doc_mapping_json)]
        if not inline:
            return

        created_here = self._metadata is None
        if self._metadata is not None:
            base_meta, registry = self._metadata, dict(self._metadata.doc_mappings)
        else:
            hdr = self.header()
            if hdr is None:
                raise IndexTablesError("cannot add files with doc mappings before the table has metadata")
            base_meta, registry = hdr[1], dict(hdr[2])
            registry.update(base_meta.doc_mappings)
        new: dict[str, str] = {}
        for a, mapping in inline:
            ref = doc_mapping_hash(mapping)
            if ref not in registry and ref not in new:
                new[ref] = mapping
            a.doc_mapping_ref = ref
            a.doc_mapping_json = None
        if new:
            conf = dict(base_meta.configuration)
            conf.update({registry_key(k): v for k, v in new.items()})
            self._metadata = dataclasses.replace(base_meta, configuration=conf)
            if created_here:
                self._registry_only = True
            self._added_registry.update(new)

    @staticmethod
    def _without_registry(m: Metadata) -> dict[str, Any]:
        d = m.to_json()
        d["configuration"] = {
            k: v for k, v in (d.get("configuration") or {}).items() if not k.startswith("docMappingSchema.")
        }
        return d

    def _registry_only_change(self, concurrent: Metadata) -> bool:
        """A concurrent metadata action that only added schema-registry entries is mergeable,
        unless this transaction changes the metadata itself (beyond registry entries)."""
        hdr = self.header()
        if hdr is None:
            return False
        if self._without_registry(concurrent) != self._without_registry(hdr[1]):
            return False
        if self._metadata is not None and not self._registry_only:
            return False
        return True

    def _rebase_metadata(self, concurrent: Metadata) -> None:
        if self._metadata is None:
            return

        conf = dict(concurrent.configuration)
        conf.update({registry_key(k): v for k, v in self._added_registry.items()})
        self._metadata = dataclasses.replace(concurrent, configuration=conf)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """`with t.transaction() as tx:` commits on a clean exit (unless committed inside the
        block) and commits nothing when the block raises (nothing staged reaches the log)."""
        if exc_type is None and self.committed_version is None:
            self.commit()

    def commit(self) -> int:
        """Commit what is staged as the next version: a lost race for a version is tried again on
        the version after the newest, under the commit policy (policy.py), once the versions
        committed meanwhile pass the conflict rules (_check_conflicts); a conflict is raised at once."""
        if self.committed_version is not None:
            raise IndexTablesError(f"transaction already committed as version {self.committed_version}")
        policy = CommitPolicy.from_options(self.log.options)
        if self.read_version >= 0:
            hdr = self.header()
            assert hdr is not None  # read_version >= 0
            # The table's current protocol first: a transaction must not "downgrade" a table it
            # may not write by staging a protocol of its own.
            check_writable(hdr[0], f"table {self.log.storage.uri}")
            if self._protocol is not None:
                check_writable(self._protocol, f"table {self.log.storage.uri} (new protocol)")
        elif self._metadata is None:
            raise TableNotFoundError(f"cannot commit to {self.log.storage.uri}: no table exists there (no metadata)")
        self._check_paths()
        self._refuse_reference_base()
        self._stage_features()
        self._deduplicate_doc_mappings()
        checked_upto = self.read_version

        def attempt(n: int) -> int | Lost:
            nonlocal checked_upto
            if n > 1:  # someone else committed the version we tried: look at everything new first
                latest = self.log.latest_version()
                self._check_conflicts(checked_upto, latest)
                checked_upto = latest
            version = checked_upto + 1
            if self.log.write_version(version, self._actions(version)):
                return version
            return Lost(f"version {version} was committed concurrently")

        tried = retry(policy, attempt, self.log.storage.uri, self.operation)
        version = self.committed_version = tried.value
        self.attempts, self.commit_s = tried.attempts, tried.elapsed_s
        log.info(
            "committed %s as version %d of %s (attempt %d)",
            self.operation,
            version,
            self.log.storage.uri,
            tried.attempts,
        )
        if not self.skip_post_commit:
            for hook in self.log.post_commit:
                hook(self.log, version, self.operation)
        return version


def new_table_id() -> str:
    return str(uuid.uuid4())
