"""REPAIR INDEXFILES TRANSACTION LOG '<table>/_transaction_log' AT LOCATION '<dir>'.

Reads the source table at its latest readable version (with the usual fallbacks over missing or
corrupt checkpoints), checks every live split against one listing of the table (present, same
size as the log says) and writes a clean log into the target directory: one version file
`00000000000000000000.json` with the protocol, the metadata (its schema registry reduced to the
doc mappings the kept splits use), an add for every split that exists, and the live delete logs and
stats files of those splits. Adds and delete logs keep their `addedAtVersion`, which decides which
splits an equality delete applies to. A split one of whose delete logs is missing is left out too
(its deleted rows would come back); a missing stats file is only dropped. The source is only read.

The target must be empty. The repaired log lists split paths relative to the source table, so it
is meant to replace `<table>/_transaction_log` (rename the old directory away, the new one in).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import Action, CommitInfo, StatsFiles, split_of_stats_file
from indextables_spark.core.log.model.codec import encode_actions
from indextables_spark.core.log.deletes.delete_logs import live_delete_logs
from indextables_spark.core.log.model.doc_mapping import registry_key
from indextables_spark.core.log.state.file_entries import add_files_to_table
from indextables_spark.core.log.maintenance.shared_logs import log_with_maintenance
from indextables_spark.core.log.model.paths import LOG_DIR
from indextables_spark.core.storage import normalize_uri, open_storage
from indextables_spark.errors import InvalidOptionError, TableExistsError
from indextables_spark.ops.command import CommandParser, Context
from indextables_spark.results.maintenance import RepairResult
from indextables_spark.results.record import ProgressCallback, elapsed_ms, report

if TYPE_CHECKING:
    from indextables_spark.core.log.read.table_log import TransactionLog

OPERATION = "REPAIR TRANSACTION LOG"


def source_table_root(source_log: str) -> str:
    src = normalize_uri(source_log)
    if not src.endswith("/" + LOG_DIR) and src != LOG_DIR:
        raise InvalidOptionError(
            f"REPAIR INDEXFILES TRANSACTION LOG: the source {source_log!r} must be a table's "
            f"{LOG_DIR} directory (a path ending in /{LOG_DIR})"
        )
    root = src[: -len(LOG_DIR)].rstrip("/")
    if not root:
        raise InvalidOptionError(f"REPAIR INDEXFILES TRANSACTION LOG: {source_log!r} names no table directory")
    return root


def repair_transaction_log(
    source_log: str,
    target: str,
    options: Options | Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> RepairResult:
    started = time.perf_counter()
    opts = Options.of(options)
    root = source_table_root(source_log)
    if normalize_uri(target) == normalize_uri(source_log):
        raise InvalidOptionError(
            f"REPAIR INDEXFILES TRANSACTION LOG: the target {target!r} is the source; "
            f"the repaired log must go to a new location"
        )
    dst = open_storage(target, opts)
    existing = dst.list("")
    if existing:
        raise TableExistsError(
            f"REPAIR INDEXFILES TRANSACTION LOG: the target {target!r} is not empty "
            f"({len(existing)} files, e.g. {dst.full_uri(existing[0].key)}); give a new location"
        )
    table_log = log_with_maintenance(open_storage(root, opts), opts)
    snap = table_log.snapshot()
    files = snap.files
    report(progress, "checking splits", 0, len(files), "splits")
    present = {f.key: f.size for f in table_log.storage.list("") if not f.key.startswith(LOG_DIR + "/")}
    lost_logs = {d.path for d in snap.delete_logs if d.path not in present}
    valid = [
        f for f in files if present.get(f.path) == f.size and not any(d.path in lost_logs for d in snap.deletes_for(f))
    ]
    kept = {f.path for f in valid}
    missing = [f.path for f in files if f.path not in kept]
    delete_logs = [d for d in live_delete_logs(snap.delete_logs, add_files_to_table(valid)) if d.path not in lost_logs]
    stats = [
        StatsFiles(k, [x for x in names if x in present and split_of_stats_file(x) in kept])
        for k, names in sorted(snap.stats_files.items())
    ]
    report(progress, "checking splits", len(files), len(files), "splits")
    meta = snap.metadata_action
    refs = {f.doc_mapping_ref for f in valid if f.doc_mapping_ref}
    conf = {k: v for k, v in meta.configuration.items() if not k.startswith("docMappingSchema.")}
    for ref in sorted(refs):
        mapping = snap.doc_mapping(ref)
        if mapping is None:
            raise InvalidOptionError(
                f"REPAIR INDEXFILES TRANSACTION LOG: doc mapping {ref} used by the source's "
                f"splits is in neither the metadata nor the schema registry"
            )
        conf[registry_key(ref)] = mapping
    now = int(time.time() * 1000)
    adds = [
        dataclasses.replace(
            f,
            added_at_version=f.added_at_version or 0,
            added_at_timestamp=f.added_at_timestamp or now,
            doc_mapping_json=None,
        )
        for f in valid
    ]
    info = CommitInfo(
        now,
        OPERATION,
        {
            "source": normalize_uri(source_log),
            "sourceVersion": snap.version,
            "validSplits": len(valid),
            "missingSplits": len(missing),
            "missingDeleteLogs": sorted(lost_logs),
        },
    )
    actions: list[Action] = [
        info,
        snap.protocol_action,
        dataclasses.replace(meta, configuration=conf),
        *adds,
        *delete_logs,
        *(st for st in stats if st.files),
    ]
    compress = opts.get_bool("transaction.compression.enabled")
    key = f"{0:020d}.json"
    if not dst.put_if_absent(key, encode_actions(actions, compress)):
        raise TableExistsError(f"REPAIR INDEXFILES TRANSACTION LOG: {dst.full_uri(key)} appeared while repairing")
    return RepairResult(
        source_path=normalize_uri(source_log),
        target_path=normalize_uri(target),
        status="SUCCESS",
        source_version=snap.version,
        total_splits=len(files),
        valid_splits=len(valid),
        missing_splits=len(missing),
        missing_paths=missing,
        delete_logs=len(delete_logs),
        missing_delete_logs=sorted(lost_logs),
        duration_ms=elapsed_ms(started),
    )


@dataclass(frozen=True)
class RepairTransactionLog:
    """REPAIR INDEXFILES TRANSACTION LOG <path>/_transaction_log AT LOCATION <path>: write a clean
    log of the table's existing splits into the empty directory `target` (the table is only read)."""

    result: ClassVar[type[RepairResult]] = RepairResult
    source: str
    target: str

    @classmethod
    def parse(cls, p: CommandParser) -> RepairTransactionLog:
        source = p.path("the quoted path of the source _transaction_log directory")
        p.expect("AT")
        p.expect("LOCATION")
        return cls(source, p.path("the quoted target location"))

    @classmethod
    def for_table(cls, log_: TransactionLog, target: str) -> RepairTransactionLog:
        """IndexTable.maintenance: the table's own log is the source."""
        return cls(log_.storage.full_uri(LOG_DIR), target)

    def run(self, ctx: Context) -> RepairResult:
        return repair_transaction_log(self.source, self.target, ctx.options, ctx.progress)
