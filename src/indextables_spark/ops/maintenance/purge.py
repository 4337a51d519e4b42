"""PURGE INDEXTABLE: delete what no retained version of the table needs (docs/reference/table-format.md,
"Garbage collection" and "Retention").

Order, chosen so that a crash at any point leaves a readable table:
1. Old state directories and orphan manifests (`log/gc.gc_state`: `state.retention.*`,
   `state.gc.minManifestAgeHours`; the newest and the current state are never removed).
2. Which version files go: the retained history must start at a checkpoint (Avro state or JSON
   checkpoint) that survives step 1, so that every remaining version can still be read. The cut is
   the newest such checkpoint `c` below which every version file is older than the transaction log
   retention; versions < c go (never the latest version, never without a checkpoint). JSON
   checkpoints older than c and older than the retention go too.
3. Which split files are referenced: the adds of every retained version file plus the live files of
   every retained state/checkpoint, and again the adds of versions committed while we worked.
4. Orphans = data files not referenced and older than the split retention: `*.split` files outside
   `_transaction_log/`, delete logs (`_delete_logs/*.dlog`) and per-split stats files next to the
   splits (`splits/split-*.<ext>`, e.g. Bloom filters). They are deleted first; version files and
   checkpoints after. Other files are never touched.

Safety: nothing referenced by a retained version is ever deleted; an orphan younger than the
retention may belong to a write still in progress (its commit comes later), which is why the
retention must be at least `purge.minRetentionHours` (24) unless
`spark.indextables.purge.retentionCheckEnabled=false`. A failure while computing the referenced
set (unreadable state or version) aborts before any split or version file is deleted.
"""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from typing import ClassVar, Iterable

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import Action, AddFile, DeleteLog, StatsFiles
from indextables_spark.core.log.maintenance.gc import gc_state
from indextables_spark.core.log.read.listing import LogListing
from indextables_spark.core.log.model.paths import LOG_DIR
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.read.state_loader import load_base_state
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.errors import InvalidOptionError
from indextables_spark.ops.command import CommandParser, Context, Target
from indextables_spark.results.maintenance import PurgeResult
from indextables_spark.results.record import ProgressCallback, elapsed_ms, report

log = logging.getLogger(__name__)

HOUR_MS = 3600 * 1000
SPLIT_SUFFIX = ".split"
DELETE_BATCH = 1000


@dataclass(frozen=True)
class PurgeConfig:
    retention_hours: float  # OLDER THAN / purge.defaultRetentionHours (168)
    tx_log_retention_hours: float  # TRANSACTION LOG RETENTION / purge.txLogRetentionHours (720)
    min_retention_hours: float  # purge.minRetentionHours (24)
    retention_check: bool  # purge.retentionCheckEnabled (true)

    @classmethod
    def from_options(
        cls, opts: Options, older_than_hours: float | None = None, tx_log_retention_hours: float | None = None
    ) -> "PurgeConfig":
        cfg = cls(
            retention_hours=float(
                older_than_hours if older_than_hours is not None else opts.get_float("purge.defaultRetentionHours")
            ),
            tx_log_retention_hours=float(
                tx_log_retention_hours
                if tx_log_retention_hours is not None
                else opts.get_float("purge.txLogRetentionHours")
            ),
            min_retention_hours=opts.get_float("purge.minRetentionHours"),
            retention_check=opts.get_bool("purge.retentionCheckEnabled"),
        )
        for what, hours in (
            ("split retention (OLDER THAN)", cfg.retention_hours),
            ("transaction log retention (TRANSACTION LOG RETENTION)", cfg.tx_log_retention_hours),
        ):
            if hours < 0:
                raise InvalidOptionError(f"PURGE: {what} must not be negative, got {hours} hours")
            if cfg.retention_check and hours < cfg.min_retention_hours:
                raise InvalidOptionError(
                    f"PURGE: {what} of {hours:g} hours is below the minimum of {cfg.min_retention_hours:g} hours "
                    f"(spark.indextables.purge.minRetentionHours): younger files may belong to writes still in "
                    f"progress. To purge anyway, set spark.indextables.purge.retentionCheckEnabled=false"
                )
        return cfg


_STATS_FILE = re.compile(r"(?:^|/)splits/split-[^/]+\.[A-Za-z0-9]+$")
_DELETE_LOG = re.compile(r"^_delete_logs/[^/]+\.dlog$")


def is_data_key(key: str) -> bool:
    """A file PURGE may delete when nothing references it: splits, delete logs, per-split stats files."""
    if key.startswith(LOG_DIR + "/"):
        return False
    return key.endswith(SPLIT_SUFFIX) or bool(_DELETE_LOG.match(key)) or bool(_STATS_FILE.search(key))


def version_cut_candidates(
    listing: LogListing, checkpoint_versions: set[int], now_ms: int, tx_retention_hours: float
) -> list[int]:
    """Checkpoint versions the retained history may start at, best (newest) first: every version
    file below one of them is older than the retention, and it is above the oldest version file."""
    if not listing.versions:
        return []
    cutoff = now_ms - tx_retention_hours * HOUR_MS
    old_upto = None  # every retained version file <= old_upto is older than the retention
    prev = None
    for v in listing.versions:
        if (prev is not None and v != prev + 1) or listing.version_info[v].modified_ms >= cutoff:
            break
        old_upto = prev = v
    if old_upto is None:
        return []
    first, latest = listing.versions[0], listing.latest_version
    return sorted((c for c in checkpoint_versions if first < c <= min(latest, old_upto + 1)), reverse=True)


def usable_cut(log_: TransactionLog, listing: LogListing, candidates: list[int]) -> int | None:
    """The newest candidate whose checkpoint really loads (files decoded): the versions below it
    are deleted, so the table must never depend on them afterwards."""

    for c in candidates:
        base = load_base_state(log_, c, listing)
        if base is not None and base.version == c:
            base.load_files()
            return c
        log.warning(
            "PURGE %s: the checkpoint of version %d is not usable; keeping the version files below it",
            log_.storage.uri,
            c,
        )
    return None


def _files_of_actions(actions: Iterable[Action]) -> list[str]:
    """Data files an action list references: added splits, delete logs, stats files."""
    out: list[str] = []
    for a in actions:
        if isinstance(a, (AddFile, DeleteLog)):
            out.append(a.path)
        elif isinstance(a, StatsFiles):
            out.extend(a.files)
    return out


def _adds_of_versions(log_: TransactionLog, versions: list[int]) -> set[str]:
    def adds(v: int) -> list[str]:
        return _files_of_actions(log_.read_actions(v))

    out: set[str] = set()
    with ThreadPoolExecutor(max_workers=8) as pool:
        for paths in pool.map(adds, versions):
            out.update(paths)
    return out


def referenced_files(log_: TransactionLog, retained_versions: list[int], checkpoint_versions: set[int]) -> set[str]:
    """Every data file (split, delete log, stats file) a retained version or state/checkpoint references."""
    refs = _adds_of_versions(log_, retained_versions)
    for c in sorted(checkpoint_versions):
        snap = log_.snapshot(c)
        refs.update(snap.files_table.column("path").to_pylist())
        refs.update(d.path for d in snap.delete_logs)
        refs.update(f for files in snap.stats_files.values() for f in files)
    return refs


def purge(
    log_: TransactionLog,
    older_than_hours: float | None = None,
    tx_log_retention_hours: float | None = None,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
    now_ms: int | None = None,
) -> PurgeResult:
    """PURGE INDEXTABLE '<path>' [OLDER THAN …] [TRANSACTION LOG RETENTION …] [DRY RUN]."""

    started = time.perf_counter()
    cfg = PurgeConfig.from_options(log_.options, older_than_hours, tx_log_retention_hours)
    protocol, _, _ = log_.header()  # TableNotFoundError for a path without a table
    check_writable(protocol, f"table {log_.storage.uri}")
    now = int(time.time() * 1000) if now_ms is None else now_ms

    # 1. state directories beyond state retention, orphan manifests
    gc = gc_state(log_, dry_run=dry_run)
    removed_states = set(gc.state_versions_removed)

    # 2. version files and JSON checkpoints
    listing = log_.listing()
    checkpoints = (set(listing.state_manifests) - removed_states) | set(listing.json_checkpoints)
    cut = usable_cut(log_, listing, version_cut_candidates(listing, checkpoints, now, cfg.tx_log_retention_hours))
    doomed_versions = [v for v in listing.versions if cut is not None and v < cut]
    tx_cutoff = now - cfg.tx_log_retention_hours * HOUR_MS
    doomed_json: dict[int, list[str]] = {}
    if cut is not None:
        infos = {f.key: f for f in log_.storage.list(f"{LOG_DIR}/") if "/" not in f.key[len(LOG_DIR) + 1 :]}
        for v, key in listing.json_checkpoints.items():
            keys = [key] + listing.checkpoint_parts.get(v, [])
            if v < cut and all(k in infos and infos[k].modified_ms < tx_cutoff for k in keys):
                doomed_json[v] = keys
        for v, parts in listing.checkpoint_parts.items():
            if (
                v < cut
                and v not in listing.json_checkpoints
                and all(k in infos and infos[k].modified_ms < tx_cutoff for k in parts)
            ):
                doomed_json[v] = parts
    retained_versions = [v for v in listing.versions if v not in set(doomed_versions)]
    retained_checkpoints = {c for c in checkpoints if c not in doomed_json}

    # 3. referenced splits, 4. orphans
    report(progress, "finding referenced splits", 0, 1, "steps")
    referenced = referenced_files(log_, retained_versions, retained_checkpoints)
    data_files = [f for f in log_.storage.list("") if is_data_key(f.key)]
    orphans = [f for f in data_files if f.key not in referenced]
    split_cutoff = now - cfg.retention_hours * HOUR_MS
    doomed = [f for f in orphans if f.modified_ms < split_cutoff]
    if doomed:
        # Versions committed while we looked: their adds are referenced too.
        newer = [v for v in log_.list_versions() if v > listing.latest_version]
        if newer:
            late = _adds_of_versions(log_, newer)
            doomed = [f for f in doomed if f.key not in late]
    report(progress, "finding referenced splits", 1, 1, "steps")
    # Temp files of writes killed half way (local storage): never part of the table; a live write
    # renames or links its temp file within moments, so the split retention protects it amply.
    stale_temps = [f for f in log_.storage.list_temporaries() if f.modified_ms < split_cutoff]

    if not dry_run:
        keys = [f.key for f in doomed]
        if keys:
            report(progress, "deleting files", 0, len(keys), "files")
        for i in range(0, len(keys), DELETE_BATCH):
            log_.storage.delete(keys[i : i + DELETE_BATCH])
            report(progress, "deleting files", min(i + DELETE_BATCH, len(keys)), len(keys), "files")
        if stale_temps:
            log_.storage.delete([f.key for f in stale_temps])
        log_keys = [listing.version_info[v].key for v in doomed_versions] + [
            k for ks in doomed_json.values() for k in ks
        ]
        if log_keys:
            log_.storage.delete(log_keys)
        log.info(
            "PURGE %s: deleted %d splits, %d version files, %d checkpoint files",
            log_.storage.uri,
            len(doomed),
            len(doomed_versions),
            sum(len(k) for k in doomed_json.values()),
        )
    return PurgeResult(
        table_path=log_.storage.uri,
        status="DRY_RUN" if dry_run else "SUCCESS",
        dry_run=dry_run,
        retention_hours=cfg.retention_hours,
        tx_log_retention_hours=cfg.tx_log_retention_hours,
        split_files_found=len(data_files),
        orphaned_splits_found=len(orphans),
        splits_deleted=len(doomed),
        bytes_deleted=sum(f.size for f in doomed),
        young_orphans_kept=len(orphans) - len(doomed),
        temp_files_deleted=len(stale_temps),
        version_files_deleted=len(doomed_versions),
        checkpoint_files_deleted=sum(len(k) for k in doomed_json.values()),
        state_dirs_removed=gc.state_dirs_removed,
        manifests_deleted=gc.would_delete_manifests,
        oldest_retained_version=retained_versions[0] if retained_versions else None,
        deleted_splits=[f.key for f in doomed],
        duration_ms=elapsed_ms(started),
    )


@dataclass(frozen=True)
class Purge:
    """PURGE INDEXTABLE <table> [OLDER THAN n DAYS|HOURS] [TRANSACTION LOG RETENTION n DAYS|HOURS] [DRY RUN]:
    delete orphaned splits older than the retention (default 168 h), version files covered by a
    checkpoint and older than the log retention (default 720 h), old states and orphan manifests.
    Retentions under 24 h need purge.retentionCheckEnabled=false."""

    result: ClassVar[type[PurgeResult]] = PurgeResult
    path: Target
    _: KW_ONLY
    older_than_hours: float | None = None
    tx_log_retention_hours: float | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, p: CommandParser) -> Purge:
        path = p.target()
        seen: set[str] = set()
        older = tx = None
        dry = False
        while p.peek().kind == "word":
            t = p.next()
            if t.is_word("OLDER"):
                p.once(seen, "OLDER THAN", t)
                p.expect("THAN")
                older = p.hours("OLDER THAN")
            elif t.is_word("TRANSACTION"):
                p.once(seen, "TRANSACTION LOG RETENTION", t)
                p.expect("LOG")
                p.expect("RETENTION")
                tx = p.hours("TRANSACTION LOG RETENTION")
            elif t.is_word("DRY"):
                p.once(seen, "DRY RUN", t)
                p.expect("RUN")
                dry = True
            else:
                raise p.error(f"expected OLDER THAN, TRANSACTION LOG RETENTION or DRY RUN, found {t.describe()}", t)
        return cls(path, older_than_hours=older, tx_log_retention_hours=tx, dry_run=dry)

    def run(self, ctx: Context) -> PurgeResult:
        return purge(ctx.log(self.path), self.older_than_hours, self.tx_log_retention_hours, self.dry_run, ctx.progress)
