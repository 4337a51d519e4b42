"""BUILD INDEXTABLES COMPANION: a search index over a Delta, Iceberg or Parquet table's own files.

1. Plan (driver): list the source's data files at the version asked for (sources/),
   keep those the WHERE partition predicate selects, and compare with the companion table's live
   splits (sync.py): files not indexed yet are indexed; splits holding a file the source
   no longer has (Delta remove/OPTIMIZE/VACUUM, Iceberg overwrite/expire, a deleted Parquet file)
   are removed and their still-valid files indexed again.
2. Index: the files are grouped per partition into groups of about `TARGET INPUT SIZE` source
   bytes; each group becomes one companion split (core/split/format/companion.py: the index, no rows) written
   by one task — a Spark job when a session is given, else local processes (tasks.py).
3. Commit: one version with the metadata (schema, partitioning, the source's format, location and
   version), the new splits, the removes (sync.py) and the delete logs of the rows the source
   deleted without rewriting its files (deletes.py). Splits written by a failed build
   are deleted.

The companion table refuses writes of rows (ops/write/write.py); MERGE SPLITS re-indexes the source
files of the splits it merges (ops/maintenance/merge_splits.py, with ops/companion/rows.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import KW_ONLY, dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from indextables_spark.config.options import PREFIX, Options, parse_size
from indextables_spark.config.registry import registered_default
from indextables_spark.config.sessions import with_session_options
from indextables_spark.core.split.format.companion import companion_of
from indextables_spark.core.storage import normalize_uri, open_storage
from indextables_spark.errors import CompanionSourceError, InvalidOptionError
from indextables_spark.ops.companion.arguments import CompanionArguments, signature_of
from indextables_spark.ops.companion.columns import (
    CONFIG_EXCLUDE,
    CONFIG_INCLUDE,
    ColumnSelection,
    indexing_modes,
    string_list,
)
from indextables_spark.ops.companion.columns import resolve as resolve_columns
from indextables_spark.ops.companion.sources.locations import is_companion_of
from indextables_spark.ops.companion.tasks import delete_written, run_local, run_spark
from indextables_spark.ops.companion.stream import CompanionSync, parse_streaming, run_streaming, start_sync
from indextables_spark.ops.companion.sync import (
    IndexJob,
    commit_build,
    indexing_options,
    plan_groups,
    plan_sync,
)
from indextables_spark.ops.command import CommandParser, Context, size
from indextables_spark.results.maintenance import CompanionBuildResult
from indextables_spark.results.record import ProgressCallback

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile, DeleteLog
    from indextables_spark.core.log.read.table_log import TransactionLog

STORE_ONLY = "indexing.storeonly"
BLOOM_COLUMNS = "indexing.bloomfilter.columns"


@dataclass(frozen=True)
class BuildCompanion:
    """BUILD INDEXTABLES COMPANION FOR DELTA|ICEBERG|PARQUET <source> [CATALOG <name> [TYPE <type>]]
    [INCLUDE COLUMNS ('a', …) | EXCLUDE COLUMNS ('a', …)] [INDEXING MODES ('col':'mode', ...)]
    [HASHED FASTFIELDS INCLUDE|EXCLUDE ('a', …)] [WHERE …] [FROM VERSION n | FROM SNAPSHOT id]
    [TARGET INPUT SIZE …] [DRY RUN] AT LOCATION <path>
    [WITH STREAMING POLL INTERVAL n SECONDS|MINUTES [MAX ITERATIONS n]] (ops/companion/stream.py)."""

    result: ClassVar[type[CompanionBuildResult]] = CompanionBuildResult
    format: str  # delta | iceberg | parquet
    source: str  # path, or Iceberg table identifier with CATALOG
    location: str
    _: KW_ONLY
    catalog: str | None = None
    catalog_type: str | None = None
    indexing: tuple[tuple[str, str], ...] = ()  # INDEXING MODES, in order
    include_columns: tuple[str, ...] = ()
    exclude_columns: tuple[str, ...] = ()
    hashed_fastfields_include: tuple[str, ...] = ()
    hashed_fastfields_exclude: tuple[str, ...] = ()
    where: str | None = None
    from_version: int | None = None
    from_snapshot: int | None = None
    target_input_size: int | None = size()
    dry_run: bool = False
    streaming_poll_interval: float | None = None  # seconds: WITH STREAMING POLL INTERVAL
    max_iterations: int | None = None  # MAX ITERATIONS: polls of a streaming sync

    @classmethod
    def parse(cls, p: CommandParser) -> BuildCompanion:
        p.expect("FOR")
        fmt = p.expect("DELTA", "ICEBERG", "PARQUET", what="DELTA, ICEBERG or PARQUET").value.lower()
        source = p.path("the quoted source table path" + (" or identifier" if fmt == "iceberg" else ""))
        seen: set[str] = set()
        args: dict[str, Any] = {}
        stops = (
            ("FROM", "VERSION"),
            ("FROM", "SNAPSHOT"),
            ("TARGET", "INPUT"),
            ("DRY", "RUN"),
            ("AT", "LOCATION"),
            ("INDEXING", "MODES"),
            ("INCLUDE", "COLUMNS"),
            ("EXCLUDE", "COLUMNS"),
            ("HASHED", "FASTFIELDS"),
            ("CATALOG",),
            ("WITH", "STREAMING"),
        )
        location = None
        while p.peek().kind == "word":
            t = p.next()
            if t.is_word("CATALOG"):
                p.once(seen, "CATALOG", t)
                args["catalog"] = p.path("a quoted catalog name")
                if p.accept("TYPE"):
                    args["catalog_type"] = p.path("a quoted catalog type")
            elif t.is_word("INDEXING"):
                p.once(seen, "INDEXING MODES", t)
                p.expect("MODES")
                args["indexing"] = indexing_modes(p)
            elif t.is_word("INCLUDE", "EXCLUDE"):
                clause = f"{t.value} COLUMNS"
                p.once(seen, clause, t)
                p.expect("COLUMNS")
                args[f"{t.value.lower()}_columns"] = string_list(p, clause)
            elif t.is_word("HASHED"):
                p.once(seen, "HASHED FASTFIELDS", t)
                p.expect("FASTFIELDS")
                which = p.expect("INCLUDE", "EXCLUDE", what="INCLUDE or EXCLUDE after HASHED FASTFIELDS").value
                args[f"hashed_fastfields_{which.lower()}"] = string_list(p, f"HASHED FASTFIELDS {which}")
            elif t.is_word("WHERE"):
                p.once(seen, "WHERE", t)
                args["where"] = p.predicate(stops)
            elif t.is_word("FROM"):
                p.once(seen, "FROM VERSION/SNAPSHOT", t)
                kind = p.expect("VERSION", "SNAPSHOT", what="VERSION or SNAPSHOT after FROM")
                n = p.whole_number(f"FROM {kind.value}")
                args["from_version" if kind.value == "VERSION" else "from_snapshot"] = n
            elif t.is_word("TARGET"):
                p.once(seen, "TARGET INPUT SIZE", t)
                p.expect("INPUT")
                p.expect("SIZE")
                args["target_input_size"] = p.size("TARGET INPUT SIZE")
            elif t.is_word("DRY"):
                p.once(seen, "DRY RUN", t)
                p.expect("RUN")
                args["dry_run"] = True
            elif t.is_word("WITH"):
                p.once(seen, "WITH STREAMING", t)
                args.update(parse_streaming(p))
            elif t.is_word("AT"):
                p.once(seen, "AT LOCATION", t)
                p.expect("LOCATION")
                location = p.path("the quoted location of the companion index")
            else:
                raise p.error(
                    f"expected CATALOG, INCLUDE COLUMNS, EXCLUDE COLUMNS, INDEXING MODES, HASHED FASTFIELDS, "
                    f"WHERE, FROM VERSION, FROM SNAPSHOT, TARGET INPUT SIZE, DRY RUN, AT LOCATION or WITH STREAMING, found "
                    f"{t.describe()}",
                    t,
                )
        if location is None:
            raise p.error("BUILD INDEXTABLES COMPANION needs AT LOCATION '<index path>'")
        if "catalog" in args and fmt != "iceberg":
            raise p.error("CATALOG is for ICEBERG sources")
        if "include_columns" in args and "exclude_columns" in args:
            raise p.error("INCLUDE COLUMNS and EXCLUDE COLUMNS are mutually exclusive")
        return cls(fmt, source, location, **args)

    def run(self, ctx: Context) -> CompanionBuildResult | list[CompanionBuildResult]:
        if self.streaming_poll_interval is not None or self.max_iterations is not None:
            return run_streaming(self, ctx, build)
        return build(self.arguments(ctx), self.from_version, self.from_snapshot, self.dry_run, ctx.progress)

    def arguments(self, ctx: Context) -> CompanionArguments:
        """The arguments a one-off build and a streaming sync (start_sync) share: this command's
        fields of their names, the context's session and options."""
        return CompanionArguments.of(self, indexing=dict(self.indexing) or None, spark=ctx.spark, options=ctx.options)


def build_companion(
    *args: Any,
    from_version: int | None = None,
    from_snapshot: int | None = None,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
    **kwargs: Any,
) -> CompanionBuildResult:
    """`it.build_companion(source, location, format="delta", indexing=None, where=None, spark=None,
    options=None, *, catalog=None, catalog_type=None, target_input_size=None, include_columns=(),
    exclude_columns=(), hashed_fastfields_include=(), hashed_fastfields_exclude=(),
    from_version=None, from_snapshot=None, dry_run=False, progress=None)`, BUILD INDEXTABLES
    COMPANION: build or sync the companion index at `location` of the `format` table `source`,
    pointing at its Parquet files instead of copying its rows (see the module doc). The arguments
    but the last four are CompanionArguments' (ops/companion/arguments.py); from_version (Delta) /
    from_snapshot (Iceberg): the source version to index; progress: a callback hearing of the
    source files indexed (`Progress("indexing", done, total, "files")`; `it.build_companion`,
    api/companion.py, also draws a bar by default). Returns what was (or, with dry_run, would be)
    done."""
    return build(CompanionArguments(*args, **kwargs), from_version, from_snapshot, dry_run, progress)


def build(
    args: CompanionArguments,
    from_version: int | None = None,
    from_snapshot: int | None = None,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
) -> CompanionBuildResult:
    """One build or sync (build_companion's): also each poll of a streaming sync. A concurrent commit
    to the companion (the build's commit rebases over none: resolver "fail") plans the sync again
    from the companion's new version, under the commit policy (core/log/commit/policy.py)."""
    # lazy: the log's modules load when a build runs (see _build_once)
    from indextables_spark.core.log.commit.policy import CommitPolicy, replan

    policy = CommitPolicy.from_options(Options.of(with_session_options(args.spark, args.options)))
    return replan(
        policy,
        lambda n: _build_once(args, from_version, from_snapshot, dry_run, progress),
        args.location,
        "BUILD COMPANION",
    )


def _build_once(
    args: CompanionArguments,
    from_version: int | None,
    from_snapshot: int | None,
    dry_run: bool,
    progress: ProgressCallback | None,
) -> CompanionBuildResult:
    """One plan, index and commit of build()."""
    # lazy, as every import below: the source readers, the log and the split schema modules load
    # when a build runs, not with the command class (ops/registry.py loads it to parse SQL)
    from indextables_spark.core.log.maintenance.shared_logs import log_with_maintenance
    from indextables_spark.core.schema.arrow_types import spark_schema_json  # lazy: see above
    from indextables_spark.core.split.format.column_specs import validate_schema  # lazy: see above
    from indextables_spark.ops.companion.sources import FORMATS, open_source  # lazy: see above

    t0 = time.perf_counter()
    fmt = str(args.format).lower()
    if fmt not in FORMATS:
        raise InvalidOptionError(f"companion source format {args.format!r} is not one of {', '.join(FORMATS)}")
    source, location, indexing, spark = args.source, args.location, args.indexing, args.spark
    if fmt != "iceberg" or args.catalog is None:
        source = normalize_uri(source)  # the same table whatever trailing slashes it is named with
    if from_version is not None and from_snapshot is not None:
        raise InvalidOptionError("give FROM VERSION (Delta) or FROM SNAPSHOT (Iceberg), not both")
    columns = ColumnSelection(
        tuple(args.include_columns),
        tuple(args.exclude_columns),
        tuple(args.hashed_fastfields_include),
        tuple(args.hashed_fastfields_exclude),
    )
    opts = Options.of(with_session_options(spark, args.options), indexing_options(indexing))
    size_given = args.target_input_size
    target = (
        parse_size(size_given)
        if isinstance(size_given, str)
        else int(size_given)
        if size_given is not None
        else opts.get_size("companion.targetInputSize")
    )
    if target <= 0:
        raise InvalidOptionError(f"TARGET INPUT SIZE must be positive, got {size_given!r}")

    snapshot = open_source(
        fmt,
        source,
        options=opts,
        version=from_version if from_version is not None else from_snapshot,
        catalog=args.catalog,
        catalog_type=args.catalog_type,
    )
    schema_json = spark_schema_json(snapshot.schema)
    table_log = log_with_maintenance(open_storage(location, opts), opts)
    read_version = table_log.latest_version()
    settings, live, stored = _table_settings(
        table_log, read_version, opts, location, fmt, source, snapshot.partition_columns, args.catalog is not None
    )
    selection = resolve_columns(columns, schema_json, snapshot.partition_columns, indexing, stored)
    recorded = dict(selection.configuration)
    if selection.skipped or (stored and any(stored.get(k) for k in (CONFIG_INCLUDE, CONFIG_EXCLUDE))):
        # columns left out of the index are stored only (read from the source's files)
        own = [c for c in (opts.get_str(STORE_ONLY) or "").split(",") if c.strip()]
        store_only = ",".join(dict.fromkeys([*selection.skipped, *own]))
        settings = Options.of(settings, {STORE_ONLY: store_only})
        recorded[PREFIX + STORE_ONLY] = store_only
    if snapshot.bloom_columns and not settings.get_str(BLOOM_COLUMNS):  # Iceberg bucket partitions
        settings = Options.of(settings, {BLOOM_COLUMNS: ",".join(snapshot.bloom_columns)})
    validate_schema(schema_json, snapshot.partition_columns, settings)

    from indextables_spark.ops.companion.deletes import plan_changes  # lazy: see above

    table = table_log.snapshot(read_version) if read_version >= 0 else None
    # rows the source deleted in place, renames (Iceberg field ids, Delta column mapping)
    changes = plan_changes(
        table_log.storage, opts, snapshot, plan_sync(snapshot, live, args.where), live, table, stored
    )
    sync, recorded = changes.sync, {**recorded, **changes.configuration}
    groups = plan_groups(sync.todo, snapshot.partition_columns, target)
    planned = CompanionBuildResult(
        table_path=location,
        source_format=fmt,
        source=source,
        source_version=snapshot.version,
        source_files=len(snapshot.files),
        files_indexed=len(sync.todo),
        files_removed=sync.files_removed,
        bytes_indexed=sum(f.size for f in sync.todo),
        splits_removed=len(sync.stale),
        dry_run=bool(dry_run),
    )
    if dry_run:
        return replace(planned, status="DRY_RUN", splits_added=len(groups), duration_ms=_ms_since(t0))
    if not groups and not sync.stale and not changes.pending and read_version >= 0:
        return replace(planned, status="NO_ACTION", duration_ms=_ms_since(t0))

    job = IndexJob(
        location,
        dict(settings.items()),
        schema_json,
        list(snapshot.partition_columns),
        fmt,
        source,
        snapshot.version,
        snapshot.physical_names,
        snapshot.field_ids,
        snapshot.nested,
    )
    workers = max(1, opts.get_int("companion.parallelism", os.cpu_count() or 1))
    if spark is not None and groups:
        written = run_spark(spark, job, groups, progress)
    else:
        written = run_local(job, groups, workers, progress)
    adds_json = [a for w in written for a in w["adds"]]
    stats: dict[str, list[str]] = {}
    for w in written:
        for key, files in w["stats"].items():
            stats.setdefault(key, []).extend(files)
    removes = sorted({a.path for a in sync.stale})
    logs: list[DeleteLog] = []
    try:
        logs = changes.write_logs(table_log.storage, opts, snapshot, written)
        version = commit_build(
            table_log, read_version, job, settings, snapshot, adds_json, removes, stats, recorded, logs
        )
    except BaseException:
        delete_written(job, written, [x.path for x in logs])
        raise
    return replace(
        planned,
        splits_added=len(adds_json),
        rows_indexed=sum(int(a.get("numRecords") or 0) for a in adds_json),
        version=version,
        duration_ms=_ms_since(t0),
    )


def start_companion_sync(
    *args: Any, poll_interval: float = 5.0, max_iterations: int | None = None, **kwargs: Any
) -> CompanionSync:
    """`it.start_companion_sync(source, location, format="delta", indexing=None, where=None,
    spark=None, options=None, *, poll_interval=5.0, max_iterations=None, catalog=None, …)`: keep the
    companion index at `location` in sync with `source`, polling every `poll_interval` seconds in a
    background thread (at most `max_iterations` polls); the other arguments are CompanionArguments'
    (build_companion's but from_version, from_snapshot and dry_run): ops/companion/stream.py's
    start_sync."""
    return start_sync(
        build, CompanionArguments(*args, **kwargs), poll_interval=poll_interval, max_iterations=max_iterations
    )


# help() and inspect show the real parameters: CompanionArguments' fields, then each one's own
build_companion.__signature__ = signature_of(build_companion)  # type: ignore[attr-defined]
start_companion_sync.__signature__ = signature_of(start_companion_sync)  # type: ignore[attr-defined]


def _table_settings(
    table_log: TransactionLog,
    read_version: int,
    opts: Options,
    location: str,
    fmt: str,
    source: str,
    partition_columns: Sequence[str],
    named: bool,
) -> tuple[Options, list[AddFile], dict[str, str] | None]:
    """The indexing settings of the build, the companion table's live splits and its metadata
    configuration (None: a new table): a new table's settings from the options (with the token
    length it records, as a new table does); an existing one's recorded settings win (as for
    appends), after checking it is this source's companion (the same location however spelled;
    `named`: an Iceberg table named in a catalog, compared by its name)."""
    # lazy: see build_companion
    from indextables_spark.core.split.format.indexing import TOKEN_LENGTH_KEY, recorded_settings

    if read_version < 0:
        return Options.of({TOKEN_LENGTH_KEY: str(registered_default(TOKEN_LENGTH_KEY))}, opts), [], None
    snap = table_log.snapshot(read_version)
    config = snap.metadata_action.configuration
    of = companion_of(config)
    if of is None:
        raise CompanionSourceError(
            f"{location} holds an indextables table that is not a companion index; "
            f"choose another location for the companion of {fmt} table {source}"
        )
    if not is_companion_of(of, fmt, source, named):
        raise CompanionSourceError(
            f"{location} is the companion index of {of[0]} table {of[1]}, not of {fmt} table {source}"
        )
    if [c.lower() for c in snap.partition_columns] != [c.lower() for c in partition_columns]:
        raise CompanionSourceError(
            f"{fmt} table {source} is now partitioned by {list(partition_columns)}, its companion index at "
            f"{location} by {snap.partition_columns}: build a new companion index at another location"
        )
    recorded = recorded_settings(config)
    settings = Options.of(opts, {k: v for k, v in recorded.items() if k.startswith(PREFIX + "indexing.")})
    return settings, list(snap.files), dict(config)


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
