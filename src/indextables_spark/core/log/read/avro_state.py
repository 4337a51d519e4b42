"""The V4 Avro state (docs/reference/table-format.md, "Avro state"): reading a state into Arrow,
writing incremental and compacted states, compaction policy, schema renormalization.

A state `state-v<N>/_manifest.avro` represents table version N exactly. It is written at a
checkpoint (every `checkpoint.interval` versions, or on request) from the newest Avro state below
N plus the version files after it: the new state references every existing manifest, adds one
manifest holding only the files added since, and appends tombstones for the files removed since.
Bytes written are O(changed files). When the tombstone ratio, the manifest count or a forced
request says so, the state is compacted instead: all live files sorted by partition values,
chunked by `entriesPerManifest`, with partition bounds per manifest and no tombstones.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from indextables_spark.core.log.model.actions import DeleteLog, Metadata, Protocol, SkipAction
from indextables_spark.core.log.read.base_state import BaseState
from indextables_spark.core.log.state.manifest import (
    ManifestPlan,
    decode_unit_batches,
    finish_unit,
    load_decoder,
    plan_manifest,
)
from indextables_spark.core.log.model.protocol_gate import check_readable
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.state.state_manifest import (
    FORMAT_AVRO_STATE,
    StateManifest,
    decode_state_manifest,
    resolve_manifest_key,
)
from indextables_spark.errors import CorruptStateError, FileNotFoundInStorageError

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.core.log.read.base_state import LogReader, ScanStats
    from indextables_spark.core.log.read.listing import LogListing
    from indextables_spark.core.storage import Storage
    from indextables_spark.expr.partition_filter import PartitionPredicate

log = logging.getLogger(__name__)

AVRO_FEATURES = ("avroState", "schemaDeduplication")


# ---- reading ------------------------------------------------------------------------------------------


def read_state_manifest(storage: Storage, key: str) -> StateManifest:
    where = storage.full_uri(key)
    try:
        data = storage.read(key)
    except FileNotFoundInStorageError:
        raise CorruptStateError(f"state manifest {where} is missing") from None
    if not data:
        raise CorruptStateError(f"{where}: state manifest is empty (0 bytes)")
    return decode_state_manifest(data, where)


def state_protocol(sm: StateManifest, where: str) -> Protocol:
    if sm.protocol:
        try:
            obj = json.loads(sm.protocol)
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: protocol field is not valid JSON ({e.msg})") from None
        return Protocol.from_json(obj.get("protocol", obj) if isinstance(obj, dict) else obj)
    pv = sm.protocol_version
    return Protocol(pv, pv, list(AVRO_FEATURES) if pv >= 4 else None, list(AVRO_FEATURES) if pv >= 4 else None)


def state_metadata(sm: StateManifest, where: str) -> Metadata | None:
    if not sm.metadata:
        return None
    try:
        obj = json.loads(sm.metadata)
    except json.JSONDecodeError as e:
        raise CorruptStateError(f"{where}: metadata field is not valid JSON ({e.msg})") from None
    if isinstance(obj, dict) and "metaData" in obj:
        obj = obj["metaData"]
    return Metadata.from_json(obj)


def load_avro_state(log_: "LogReader", version: int, key: str, listing: "LogListing | None" = None) -> "BaseState":
    """The state at `version` (light: the state manifest only; manifests decode on demand).
    listing: the log's listing the reader already took (a state without metadata needs one)."""
    storage = log_.storage
    where = storage.full_uri(key)
    sm = read_state_manifest(storage, key)
    if sm.state_version != version:
        raise CorruptStateError(f"{where}: state manifest says stateVersion {sm.state_version}, expected {version}")
    protocol = state_protocol(sm, where)
    check_readable(protocol, where)  # before decoding any manifest
    metadata = state_metadata(sm, where)
    registry = dict(sm.schema_registry)
    if metadata is not None:
        for k, v in metadata.doc_mappings.items():
            registry.setdefault(k, v)
    skips: dict[str, SkipAction] = {}
    for s in sm.skip_actions:
        try:
            sk = SkipAction.from_json(json.loads(s))
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: skip action is not valid JSON ({e.msg})") from None
        skips[sk.path] = sk
    delete_logs: list[DeleteLog] = []
    for d in sm.delete_logs:
        try:
            delete_logs.append(DeleteLog.from_json(json.loads(d)))
        except json.JSONDecodeError as e:
            raise CorruptStateError(f"{where}: delete log entry is not valid JSON ({e.msg})") from None
    cfg = StateConfig.from_options(log_.options)

    def loader(
        predicate: PartitionPredicate | None, min_added_version: int | None, stats: ScanStats | None
    ) -> pa.Table:
        return read_state_files(log_, sm, predicate, min_added_version, stats, cfg.read_parallelism)

    base_protocol: Protocol | None = protocol
    if metadata is None:
        # A state without embedded metadata (older writers): take it from the version files.
        protocol_v, metadata = _metadata_from_log(log_, version, where, listing)
        base_protocol = protocol if sm.protocol or protocol_v is None else protocol_v
    return BaseState(
        version=version,
        protocol=base_protocol,
        metadata=metadata,
        files_table=None,
        skips=skips,
        schema_registry=registry,
        source=FORMAT_AVRO_STATE,
        state_manifest=sm,
        state_key=key,
        loader=loader,
        timestamp=sm.created_at,
        delete_logs=delete_logs,
        stats_files={k: list(v) for k, v in sm.stats_files.items()},
    )


def _metadata_from_log(
    log_: LogReader, version: int, where: str, listing: "LogListing | None" = None
) -> tuple[Protocol | None, Metadata]:
    """The table metadata (and protocol) in force at `version` for a state that does not embed it.

    As the reference reader does (its `getMetadata()` fallback, which its Rust port
    `txlog/distributed.rs` `snapshot_from_checkpoint` mirrors): the newest metaData found walking
    back from `version` through the older state manifests and the version files that remain. The
    reference leaves tables whose version files after 0 are gone while `state-vN/` holds the rest,
    so a missing version file is skipped, not an error; a present but unreadable one still is."""
    listing = listing or log_.listing()
    protocol: Protocol | None = None
    for v in range(version, -1, -1):
        if v < version and v in listing.state_manifests:
            key = listing.state_manifests[v]
            try:
                older = read_state_manifest(log_.storage, key)
                md = state_metadata(older, log_.storage.full_uri(key))
            except CorruptStateError as e:
                log.warning("%s; looking further back for the table metadata", e)
                md = None
            if md is not None:
                return (protocol or state_protocol(older, key)), md
        if v in listing.version_info:
            metadata: Metadata | None = None
            for a in log_.read_actions(v):
                if isinstance(a, Metadata):
                    metadata = a
                elif isinstance(a, Protocol) and protocol is None:
                    protocol = a
            if metadata is not None:
                return protocol, metadata
    raise CorruptStateError(
        f"{where}: state has no metadata, and neither an older state nor a remaining version file "
        f"(versions {listing.versions or 'none'}) has a metaData action"
    )


def read_state_files(
    log_: "LogReader",
    sm: StateManifest,
    predicate: PartitionPredicate | None = None,
    min_added_version: int | None = None,
    stats: "ScanStats | None" = None,
    parallelism: int = 8,
) -> pa.Table:
    """Decode the state's manifests (pruned by partition bounds / version bounds) in parallel,
    apply tombstones, drop duplicate paths (the later entry wins).

    The decoding runs in worker threads (DataFusion releases the GIL) while this thread imports
    pyarrow if the process has not yet: in a fresh process the two overlap, so the first snapshot
    costs about the import alone (everything before this point runs without pyarrow)."""
    if predicate is None:
        manifests = list(sm.manifests)
    else:
        from indextables_spark.expr.partition_filter import prune_manifests  # lazy: only a filtered read needs it

        manifests = prune_manifests(sm.manifests, predicate)
    if min_added_version is not None:
        manifests = [m for m in manifests if m.max_added_at_version > min_added_version]
    if stats is not None:
        stats.manifests_total += len(sm.manifests)
        stats.manifests_read += len(manifests)
    storage = log_.storage
    keys = [resolve_manifest_key(m.path, sm.state_version) for m in manifests]
    workers = max(1, min(parallelism, len(manifests)))

    def plan(i: int) -> ManifestPlan:
        return plan_manifest(storage, keys[i], manifests[i].num_entries, predicate)

    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="itx-manifest") as ex:
            plans = list(ex.map(plan, range(len(manifests))))
    else:
        plans = [plan(i) for i in range(len(manifests))]
    units = [u for p in plans for u in p.units]
    # Decode units are CPU-bound (DataFusion releases the GIL): one thread per core is enough.
    # Always in workers, even a single unit: this thread meanwhile imports pyarrow (below). The
    # workers leave the batches DataFusion's; this thread makes the Arrow tables (finish_unit).
    # The first read of a process (pyarrow not imported yet) starts every unit at once (up to
    # `parallelism`): none should queue behind another while the import runs.
    first_read = "pyarrow" not in sys.modules
    dworkers = max(1, min(parallelism, len(units), len(units) if first_read else os.cpu_count() or 2))
    tables: list[pa.Table] = []
    if units:
        load_decoder()  # before the threads: see load_decoder
        with ThreadPoolExecutor(max_workers=dworkers, thread_name_prefix="itx-decode") as ex:
            # largest first for balance; results kept in manifest order (later entries win)
            order = sorted(range(len(units)), key=lambda i: -units[i].rows)
            futures = {i: ex.submit(decode_unit_batches, units[i]) for i in order}
            # lazy: in a fresh process pyarrow's import (~90 ms) runs here, while the workers decode
            import pyarrow  # noqa: F401

            tables = [finish_unit(futures[i].result()) for i in range(len(units))]
    if stats is not None:
        stats.entries_decoded += sum(t.num_rows for t in tables)
        stats.blocks_skipped_entries += sum(p.rows_total - p.rows_selected for p in plans)
    if not tables:
        from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA  # lazy: pyarrow

        return FILE_ENTRY_SCHEMA.empty_table()
    import pyarrow as pa  # lazy: keeps `import indextables_spark.api.table` free of pyarrow

    # rows of the leading manifests written by one compaction (distinct paths)
    prefix_rows = 0
    index = {id(m): i for i, m in enumerate(sm.manifests)}
    for m, p in zip(manifests, plans):
        if index[id(m)] < sm.distinct_prefix_manifests:
            prefix_rows += p.rows_selected
        else:
            break
    files = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if files.num_rows > prefix_rows and len(manifests) > 1:
        files = drop_duplicate_paths(files, prefix_rows)
    if sm.tombstones and files.num_rows:
        import pyarrow.compute as pc  # lazy: only states with tombstones need it

        dead = pc.is_in(files.column("path"), value_set=pa.array(sm.tombstones, pa.string()))
        files = files.filter(pc.invert(dead))
    if min_added_version is not None and files.num_rows:
        import pyarrow.compute as pc  # lazy: only the change feed needs it

        files = files.filter(pc.greater(files.column("addedAtVersion"), min_added_version))
    return files


def drop_duplicate_paths(files: pa.Table, distinct_prefix_rows: int = 0) -> pa.Table:
    """Keep the last row of each path (manifests are in write order, so the newest entry).
    The first distinct_prefix_rows rows are known to hold distinct paths."""
    import numpy as np  # lazy: keeps `import indextables_spark.api.table` free of numpy/pyarrow
    import pyarrow as pa  # lazy
    import pyarrow.compute as pc  # lazy

    paths = files.column("path")
    n = files.num_rows
    if distinct_prefix_rows > 0:
        rest = paths.slice(distinct_prefix_rows)
        if (
            pc.count_distinct(rest).as_py() == len(rest)
            and not pc.any(pc.is_in(paths.slice(0, distinct_prefix_rows), value_set=rest.combine_chunks())).as_py()
        ):
            return files
    elif pc.count_distinct(paths).as_py() == n:
        return files
    idx = pa.table({"path": paths, "i": pa.array(np.arange(n))})
    last = idx.group_by("path", use_threads=False).aggregate([("i", "max")]).column("i_max")
    return files.take(pa.array(np.sort(last.to_numpy())))
