"""CONVERT INDEXTABLES TABLE '<path>' [DRY RUN]: rewrite the splits the reference implementation
(IndexTables4Spark) wrote into our split format, so the table takes writes again.

A table holding reference splits is read (core/split/reference/native.py opens each one in place in
the split cache) but not written: our splits and delete logs would make it a table neither
implementation reads fully (core/log/commit/reference_splits.py refuses such writes). CONVERT:

1. Plan (driver): the live splits whose recorded doc mapping is a reference one. Splits we wrote
   are left alone (a table may hold both, e.g. after a partial DROP PARTITIONS + append).
2. Rewrite, per reference split (threads of this process), without re-indexing
   (core/split/reference/rewrite.py): the reference's Tantivy index is kept — its term
   dictionaries transcoded from SSTable to FST, a `__row` fast column added, its document store
   emptied — and its rows move into our row store; the doc mapping describes its fields as a read
   of the reference split does (its tokenizers, its index-only fields, its record options), so
   every query answers after CONVERT what it answered before. The row count must equal what the
   log records; any error fails the command naming the split (nothing is committed; the new splits
   are deleted). A split that delete logs apply to is refused (no writer of ours makes one).
3. Commit (one version, operation "CONVERT", resolver "fail": any concurrent commit fails it, as
   for the other destructive operations): removes (dataChange=false) of the reference splits, adds
   (dataChange=false) of ours, and a metaData action recording our indexing settings closest to
   the reference's (`indexing.typemap.<col>` / `.tokenizer.<col>` / `.tokenLength.<col>` per string
   column: `raw` → `string`, another tokenizer → `text` with it, `ip` → `ip`; reference.writer_options;
   `indexing.indexonlyfields` for the columns it indexed without storing; settings the table
   already records win) and the new doc mappings in the schema registry. Later appends are
   indexed by us with those settings; MERGE SPLITS re-indexes converted splits with them too.
   If the commit is not made (a concurrent commit) the new splits are deleted; after an error of
   unknown outcome (storage) they are left for PURGE.

Nothing is deleted: the reference splits stay in storage for time travel (`versionAsOf` a version
before CONVERT reads them as before) until PURGE removes them after the retention. A second
CONVERT finds nothing to do (NO_ACTION).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import pyarrow as pa

from indextables_spark.config.options import PREFIX, Options
from indextables_spark.core.log.model.actions import AddFile, RemoveFile
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash, registry_key
from indextables_spark.core.log.model.protocol_gate import check_writable
from indextables_spark.core.log.commit.reference_splits import (
    CONVERT_OPERATION,
    REFERENCE_NAME,
    reference_split_paths,
    snapshot_registry,
)
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.transaction import Transaction, now_ms
from indextables_spark.core.schema.partitions import partition_path
from indextables_spark.core.split.format.column_specs import table_options
from indextables_spark.core.split.format.indexing import TOKEN_LENGTH_KEY
from indextables_spark.core.split.reference.native import mapping_fields
from indextables_spark.core.split.reference.reference import mapping_options
from indextables_spark.core.storage import Storage
from indextables_spark.errors import SplitFormatError, StorageError, TableNotFoundError
from indextables_spark.results.maintenance import ConvertResult
from indextables_spark.results.record import ProgressCallback, elapsed_ms, report
from indextables_spark.ops.command import Context
from indextables_spark.ops.table_commands import DryRunCommand

log = logging.getLogger(__name__)

OPERATION = CONVERT_OPERATION
MAX_THREADS = 2  # reference splits rewritten at once (Tantivy and Arrow release the GIL)


# ---- the reference's indexing settings ----------------------------------------------------------


def split_settings(
    doc_mapping: str, schema_json: Mapping[str, Any], partition_columns: Sequence[str]
) -> dict[str, str]:
    """Our indexing options (short keys) reproducing a reference doc mapping's string fields."""

    return mapping_options(doc_mapping, schema_json, partition_columns)


def _column_of(key: str) -> str | None:
    """`indexing.typemap.<col>` / `indexing.tokenizer.<col>` → the column (lower-cased, as Options keeps it)."""
    k = key.lower()
    for prefix in ("indexing.typemap.", "indexing.tokenizer.", "indexing.tokenlength."):
        if k.startswith(prefix):
            return k[len(prefix) :]
    return None


def recorded_settings(configuration: Mapping[str, str], derived: Mapping[str, str]) -> dict[str, str]:
    """The configuration entries to add: the derived settings of the columns for which the table
    records no typemap/tokenizer yet (what the table records wins: its splits of ours use it)."""
    table = Options.of({k: v for k, v in configuration.items() if not k.startswith("docMappingSchema.")})
    taken = {c for k in table for c in [_column_of(k)] if c is not None}
    return {PREFIX + k: v for k, v in sorted(derived.items()) if _column_of(k) not in taken}


# ---- planning -----------------------------------------------------------------------------------


@dataclass
class ConvertPlan:
    log: TransactionLog
    snapshot: Snapshot
    sources: list[AddFile]  # the live reference splits, oldest first
    split_options: dict[str, dict[str, str]]  # source path -> its derived settings (short keys)
    settings: dict[str, str]  # configuration entries to add (prefixed keys)
    base_options: Options  # table settings under the user's options


def _age_key(f: AddFile) -> tuple[int, int, str]:
    return (f.added_at_version if f.added_at_version is not None else -1, f.modification_time, f.path)


def plan_convert(log_: TransactionLog) -> ConvertPlan:
    if log_.latest_version() < 0:
        raise TableNotFoundError(f"CONVERT: no indextables table at {log_.storage.uri}")
    snap = log_.snapshot()
    check_writable(snap.protocol_action, f"CONVERT on table {log_.storage.uri}")
    paths = set(reference_split_paths(snap))
    sources = sorted((f for f in snap.files if f.path in paths), key=_age_key)
    registry = snapshot_registry(snap)
    per_split: dict[str, dict[str, str]] = {}
    derived: dict[str, str] = {}
    mappings: dict[str, dict[str, str]] = {}  # per doc mapping ref, computed once
    unstored: set[str] = set()  # columns a reference split indexes without storing
    data_columns = {c["name"] for c in snap.schema_json.get("fields", [])} - set(snap.partition_columns)
    for f in sources:
        ref = f.doc_mapping_ref or ""
        if ref not in mappings:
            mapping = registry.get(ref) or f.doc_mapping_json
            if not mapping:
                raise SplitFormatError(f"CONVERT on {log_.storage.uri}: split {f.path} has no doc mapping")
            mappings[ref] = split_settings(mapping, snap.schema_json, snap.partition_columns)
            unstored |= {m.name for m in mapping_fields(mapping) if m.indexed and not m.stored} & data_columns
        per_split[f.path] = mappings[ref]
        derived.update(mappings[ref])  # oldest first: the newest split's settings win
    settings = recorded_settings(snap.metadata_action.configuration, derived)
    index_only_key = PREFIX + "indexing.indexonlyfields"
    if unstored and not any(k.lower() == index_only_key for k in snap.metadata_action.configuration):
        # its index-only columns stay index-only: appends after CONVERT index them without storing
        settings[index_only_key] = ",".join(sorted(unstored))
    base = table_options(snap, log_.options)
    if not any(k.lower() == (PREFIX + TOKEN_LENGTH_KEY).lower() for k in snap.metadata_action.configuration):
        # the reference indexed with a 255-byte token length (its default): record it, so the
        # rewritten splits and later appends keep the reference's meaning
        settings[PREFIX + TOKEN_LENGTH_KEY] = "default"
        base = Options.of(base, {TOKEN_LENGTH_KEY: "default"}, log_.options)
    return ConvertPlan(log_, snap, sources, per_split, settings, base)


# ---- rewriting one split ------------------------------------------------------------------------


@dataclass
class Converted:
    source: AddFile
    adds: list[AddFile] = field(default_factory=list)
    stats_files: dict[str, list[str]] = field(default_factory=dict)
    doc_mappings: dict[str, str] = field(default_factory=dict)  # ref -> mapping of the new splits
    rows: int = 0


def _tmp_root(options: Options) -> str | None:
    return options.get_str("indexWriter.tempDirectoryPath") or options.get_str("indexing.tempDirectoryPath") or None


def convert_split(plan: ConvertPlan, src: AddFile) -> Converted:
    """Rewrite one reference split as one of ours (uploaded, not committed): its index as it is,
    the dictionaries transcoded, its rows in our row store (core/split/reference/rewrite.py)."""
    from indextables_spark.core.split.format.bloom import (  # lazy: keeps `import indextables_spark.ops.maintenance.convert` free of numpy
        STATS_KEY as BLOOM_STATS_KEY,
        bloom_file_for,
    )
    from indextables_spark.core.split.reference.rewrite import (
        rewrite_split,  # lazy: keeps `import indextables_spark.ops.maintenance.convert` free of numpy
    )

    snap, storage = plan.snapshot, plan.log.storage
    where = f"CONVERT on {storage.uri}: reference split {src.path}"
    logs = snap.deletes_for(src)
    if logs:
        # (unreachable through this package: DELETE refuses tables holding reference splits)
        raise SplitFormatError(
            f"{where}: {len(logs)} delete logs apply to it; its index cannot drop those rows without re-indexing"
        )
    tmp = tempfile.mkdtemp(prefix="indextables-convert-", dir=_tmp_root(plan.base_options))
    out = Converted(src)
    key = None
    try:
        local = storage.local_path(src.path)
        if local is None:
            local = os.path.join(tmp, "source.split")
            storage.download_file(src.path, local)
        try:
            split = rewrite_split(
                local,
                os.path.join(tmp, "work"),
                storage.full_uri(src.path),
                snap.schema_json,
                snap.partition_columns,
                plan.base_options,
            )
        except SplitFormatError as e:
            raise SplitFormatError(f"{where}: {e}") from e
        except (pa.ArrowException, OSError) as e:
            raise SplitFormatError(f"{where} cannot be rewritten ({type(e).__name__}: {e})") from e
        if src.num_records is not None and src.num_records != split.num_rows:
            raise SplitFormatError(f"{where}: the log records {src.num_records} rows, the split holds {split.num_rows}")
        prefix = partition_path(snap.partition_columns, dict(src.partition_values or {}))
        key = (prefix + "/" if prefix else "") + f"splits/split-{uuid.uuid4()}.split"
        storage.upload_file(key, split.path)
        out.adds = [
            AddFile(
                path=key,
                partition_values=dict(src.partition_values or {}),  # the source's exact strings
                size=os.path.getsize(split.path),
                modification_time=int(time.time() * 1000),
                data_change=False,
                stats=split.stats.stats_json(),
                min_values=split.stats.min_max_values()[0] or None,
                max_values=split.stats.min_max_values()[1] or None,
                num_records=split.num_rows,
                footer_start_offset=split.footer_start,
                footer_end_offset=split.footer_end,
                doc_mapping_ref=doc_mapping_hash(split.doc_mapping),
                uncompressed_size_bytes=split.uncompressed,
                num_merge_ops=src.num_merge_ops,
                split_tags=list(src.split_tags) if src.split_tags else None,
            )
        ]
        if split.bloom is not None:
            bloom_key = bloom_file_for(key)
            storage.put(bloom_key, split.bloom.encode(key))
            out.stats_files.setdefault(BLOOM_STATS_KEY, []).append(bloom_key)
        out.doc_mappings = {doc_mapping_hash(split.doc_mapping): split.doc_mapping}
        out.rows = split.num_rows
    except BaseException:
        _delete(storage, ([key] if key else []) + [f for fs in out.stats_files.values() for f in fs])
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _written(adds: Sequence[AddFile], stats_files: Mapping[str, Sequence[str]]) -> list[str]:
    return [a.path for a in adds] + [f for fs in stats_files.values() for f in fs]


def _delete(storage: Storage, keys: Sequence[str]) -> None:
    if not keys:
        return
    try:
        storage.delete(keys)
    except Exception:  # noqa: BLE001 - the original error matters more; PURGE removes orphans later
        log.warning("CONVERT on %s: could not delete %d uncommitted files", storage.uri, len(keys), exc_info=True)


# ---- the command --------------------------------------------------------------------------------


def _result(plan: ConvertPlan, **fields: Any) -> ConvertResult:
    return ConvertResult(
        table_path=plan.log.storage.uri,
        read_version=plan.snapshot.version,
        live_splits=plan.snapshot.num_files,
        reference_splits=len(plan.sources),
        bytes_read=sum(f.size or 0 for f in plan.sources),
        settings=dict(plan.settings),
        converted_splits=[f.path for f in plan.sources],
        **fields,
    )


def convert_table(
    log_: TransactionLog, dry_run: bool = False, progress: ProgressCallback | None = None
) -> ConvertResult:
    """CONVERT INDEXTABLES TABLE '<path>' [DRY RUN] (see the module doc)."""
    started = time.perf_counter()
    plan = plan_convert(log_)
    if not plan.sources:
        return _result(plan, status="NO_ACTION", dry_run=dry_run, duration_ms=elapsed_ms(started))
    if dry_run:
        records = sum(f.num_records or 0 for f in plan.sources)
        return _result(plan, status="DRY_RUN", dry_run=True, records_converted=records, duration_ms=elapsed_ms(started))
    done: list[Converted] = []
    total = len(plan.sources)
    report(progress, "converting", 0, total, "splits")
    workers = max(1, min(MAX_THREADS, os.cpu_count() or 1, total))
    futures: list[Future[Converted]] = []
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="indextables-convert") as pool:
            futures = [pool.submit(convert_split, plan, f) for f in plan.sources]
            try:
                for fut in as_completed(futures):
                    done.append(fut.result())
                    report(progress, "converting", len(done), total, "splits")
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    except BaseException:
        # the pool has waited for the running conversions: delete what the finished ones wrote
        for f in futures:
            if f.done() and not f.cancelled() and f.exception() is None:
                c = f.result()
                _delete(log_.storage, _written(c.adds, c.stats_files))
        raise
    done.sort(key=lambda c: _age_key(c.source))
    version = _commit(plan, done)
    return _result(
        plan,
        status="SUCCESS",
        version=version,
        splits_created=sum(len(c.adds) for c in done),
        records_converted=sum(c.rows for c in done),
        bytes_written=sum(a.size for c in done for a in c.adds),
        duration_ms=elapsed_ms(started),
    )


def _commit(plan: ConvertPlan, done: list[Converted]) -> int:
    snap = plan.snapshot
    ts = now_ms()
    removes = [RemoveFile(c.source.path, ts, False, dict(c.source.partition_values or {}), c.source.size) for c in done]
    adds = [a for c in done for a in c.adds]
    stats: dict[str, list[str]] = {}
    mappings: dict[str, str] = {}
    for c in done:
        for key, files in c.stats_files.items():
            stats.setdefault(key, []).extend(files)
        mappings.update(c.doc_mappings)
    txn = Transaction(
        plan.log,
        resolver="fail",
        read_version=snap.version,
        operation=OPERATION,
        operation_parameters={"source": REFERENCE_NAME, "convertedSplits": len(done), "settings": plan.settings},
    )
    txn.remove_files(removes).add_files(adds)
    meta = snap.metadata_action
    conf = dict(meta.configuration)
    conf.update(plan.settings)
    registry = snapshot_registry(snap)
    for ref, mapping in mappings.items():
        if registry.get(ref) != mapping:
            conf[registry_key(ref)] = mapping
    if conf != meta.configuration:
        txn.set_metadata(dataclasses.replace(meta, configuration=conf))
    for key, files in stats.items():
        txn.update_stat(key, files)
    try:
        version = txn.commit()
    except (StorageError, OSError):
        # the version file may or may not have been written: the new splits are left for PURGE
        raise
    except BaseException:
        _delete(plan.log.storage, _written(adds, stats))
        raise
    log.info(
        "CONVERT on %s: version %d, %d reference splits rewritten as %d splits",
        plan.log.storage.uri,
        version,
        len(done),
        len(adds),
    )
    return version


@dataclass(frozen=True)
class Convert(DryRunCommand):
    """CONVERT INDEXTABLES TABLE <table> [DRY RUN]: rewrite the splits the reference implementation
    (IndexTables4Spark) wrote into ours, in one commit (history and time travel kept), so the
    table takes writes again; dry_run reports what would be converted. Splits of ours are left
    alone; a table without reference splits gives NO_ACTION."""

    result: ClassVar[type[ConvertResult]] = ConvertResult

    def run(self, ctx: Context) -> ConvertResult:
        return convert_table(ctx.log(self.path), dry_run=self.dry_run, progress=ctx.progress)
