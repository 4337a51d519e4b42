"""When a V4 state is compacted (tombstones, manifest sizes, schema references) and what
compaction does to the live files: schema references renormalized to canonical hashes, rows
sorted by partition for locality, delete logs and stats files of dead splits dropped."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.model.actions import DeleteLog, split_of_stats_file
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA
from indextables_spark.core.log.state.manifest_write import partition_value_column
from indextables_spark.core.log.state.state_config import StateConfig
from indextables_spark.core.log.state.state_manifest import StateManifest


def needs_compaction(sm: StateManifest, new_removes: int, cfg: StateConfig, force: bool = False) -> tuple[bool, str]:
    """(whether, why) — docs/reference/table-format.md, "When to compact"."""
    if force:
        return True, "forced"
    if sm.num_files <= 0:
        return True, "empty state"
    ratio = (len(sm.tombstones) + new_removes) / sm.num_files
    if ratio > cfg.tombstone_threshold:
        return True, f"tombstone ratio {ratio:.1%} > {cfg.tombstone_threshold:.0%}"
    if len(sm.manifests) > cfg.max_manifests:
        return True, f"{len(sm.manifests)} manifests > {cfg.max_manifests}"
    if new_removes > cfg.large_remove_threshold:
        return True, f"{new_removes} removes > {cfg.large_remove_threshold}"
    if needs_renormalization(sm.schema_registry, cfg):
        return True, "schema registry needs renormalization"
    return False, ""


def needs_renormalization(registry: dict[str, str], cfg: StateConfig) -> bool:
    """More than `renormalizeThreshold` schema refs and some of them not canonical hashes."""
    if len(registry) <= cfg.renormalize_threshold:
        return False
    return any(_canonical_ref(k, v) != k for k, v in registry.items())


def _canonical_ref(ref: str, doc_mapping_json: str) -> str:
    try:
        return doc_mapping_hash(doc_mapping_json)
    except (ValueError, TypeError):
        return ref  # not JSON: leave it alone


def renormalize(files: pa.Table, registry: dict[str, str], cfg: StateConfig) -> tuple[pa.Table, dict[str, str], int]:
    """docs/reference/table-format.md, "Renormalization": when the live files use more than the
    threshold of unique docMappingRefs, recompute every ref with canonical hashing so equal schemas
    share one ref.
    Returns (files, registry, number of refs changed)."""
    refs_col = files.column("docMappingRef")
    unique = [r for r in pc.unique(refs_col).to_pylist() if r is not None]
    if len(unique) <= cfg.renormalize_threshold and not needs_renormalization(registry, cfg):
        return files, registry, 0
    mapping = {}
    for r in unique:
        js = registry.get(r)
        if js is None:
            continue
        canon = _canonical_ref(r, js)
        if canon != r:
            mapping[r] = canon
    new_registry = {}
    for k, v in registry.items():
        new_registry[_canonical_ref(k, v)] = v
    if not mapping:
        return files, new_registry, 0
    old = pa.array(list(mapping.keys()), pa.string())
    new = pa.array(list(mapping.values()), pa.string())
    pos = pc.index_in(refs_col, value_set=old)
    replaced = pc.if_else(pc.is_valid(pos), pc.take(new, pc.fill_null(pos, 0)), refs_col)
    i = files.schema.get_field_index("docMappingRef")
    files = files.set_column(i, FILE_ENTRY_SCHEMA.field(i), replaced)
    return files, new_registry, len(mapping)


def _sort_key(files: pa.Table, partition_columns: list[str]) -> pa.Array:
    """Compaction's sort key (docs/reference/table-format.md, "Compaction"): partition values
    sorted by column name, joined with '|'."""
    cols = sorted(partition_columns)
    parts = [pc.fill_null(partition_value_column(files, c), "") for c in cols]
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "|")


def sort_for_locality(files: pa.Table, partition_columns: list[str]) -> pa.Table:
    if files.num_rows <= 1:
        return files
    if partition_columns:
        key = _sort_key(files, partition_columns)
        t = pa.table({"k": key, "p": files.column("path")})
        order = pc.sort_indices(t, sort_keys=[("k", "ascending"), ("p", "ascending")])
    else:
        order = pc.sort_indices(files.column("path"))
    return files.take(order)


def live_extras(
    delete_logs: list[DeleteLog], stats_files: dict[str, list[str]], files: pa.Table
) -> tuple[list[DeleteLog], dict[str, list[str]]]:
    """The delete logs and stats files that still concern a live split (compaction drops the rest)."""
    from indextables_spark.core.log.deletes.delete_logs import (
        live_delete_logs,  # lazy: keeps `import indextables_spark.core.log.state.state_compaction` free of numpy
    )

    logs = live_delete_logs(delete_logs, files)
    stats: dict[str, list[str]] = {}
    for key, names in stats_files.items():
        if not names:
            continue
        owners = pa.array([split_of_stats_file(f) for f in names], pa.string())
        live = pc.is_in(owners, value_set=files.column("path")).to_pylist() if files.num_rows else [False] * len(names)
        kept = [f for f, ok in zip(names, live) if ok]
        if kept:
            stats[key] = kept
    return logs, stats


def is_clean(sm: StateManifest, cfg: StateConfig, partition_columns: list[str]) -> bool:
    """Already what a compaction would write: no tombstones, full manifests, partition-sorted."""
    if sm.tombstones:
        return False
    expected = max(1, math.ceil(sm.num_files / cfg.entries_per_manifest)) if sm.num_files else 0
    if len(sm.manifests) != expected:
        return False
    if any(m.num_entries != cfg.entries_per_manifest for m in sm.manifests[:-1]):
        return False
    if needs_renormalization(sm.schema_registry, cfg):
        return False
    if partition_columns and len(sm.manifests) > 1:
        first = sorted(partition_columns)[0]
        prev_hi = None
        for m in sm.manifests:
            b = (m.partition_bounds or {}).get(first)
            if b is None or b[0] is None:
                return False
            if prev_hi is not None and b[0] < prev_hi:
                return False
            prev_hi = b[1]
    return True
