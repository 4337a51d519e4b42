"""Tables holding splits the reference implementation (IndexTables4Spark) wrote: which live splits
those are, and the refusal of writes that would mix our splits or delete logs into such a table.

We read the reference's splits (core/split/reference/native.py opens them in place in the split
cache), but the reference cannot open our split format nor apply our delete logs: a table holding
both would be read fully by neither implementation. So every write route (ops/write/write.py, ops/write/delete.py,
MERGE SPLITS, the Spark writers) refuses such a table before it writes anything, and
`Transaction.commit` refuses it again as a safety net; CONVERT INDEXTABLES TABLE
(ops/maintenance/convert.py, operation "CONVERT") rewrites the reference splits into ours first.

Which splits the reference wrote is told by the doc mapping the log records for them
(docMappingRef through the schema registry, or an inline docMappingJson):
`doc_mapping.is_reference_doc_mapping`.
"""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.log.model.doc_mapping import is_reference_doc_mapping
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.errors import ReferenceTableError

REFERENCE_NAME = "IndexTables4Spark"
CONVERT_OPERATION = "CONVERT"


def reference_refs(registry: Mapping[str, str]) -> set[str]:
    """The doc mapping refs of a schema registry whose mapping the reference wrote."""
    return {ref for ref, mapping in registry.items() if is_reference_doc_mapping(mapping)}


def may_hold_reference_splits(registry: Mapping[str, str]) -> bool:
    """False when no doc mapping the table knows is a reference one (then no split of it can be):
    the cheap check before any manifest is decoded."""
    return any(is_reference_doc_mapping(m) for m in registry.values())


def snapshot_registry(snapshot: Snapshot) -> dict[str, str]:
    registry = dict(snapshot.schema_registry)
    for ref, mapping in snapshot.metadata_action.doc_mappings.items():
        registry.setdefault(ref, mapping)
    return registry


def reference_split_paths(snapshot: Snapshot) -> list[str]:
    """The live splits of the snapshot the reference wrote (by their recorded doc mapping)."""
    table = snapshot.files_table
    if table.num_rows == 0:
        return []
    refs = reference_refs(snapshot_registry(snapshot))
    if not refs:
        return []
    mask = pc.is_in(table.column("docMappingRef"), value_set=pa.array(sorted(refs), pa.string()))
    return [str(p) for p in table.filter(pc.fill_null(mask, False)).column("path").to_pylist()]


def refusal(table_uri: str, operation: str, reference_splits: int, live_splits: int) -> ReferenceTableError:
    """The error of a write refused on a table holding `reference_splits` splits of the reference."""
    return ReferenceTableError(
        f"{operation} on table {table_uri} refused: {reference_splits} of its {live_splits} live splits were "
        f"written by the reference implementation ({REFERENCE_NAME}). The reference cannot open our split format "
        f"nor apply our delete logs, and a table mixing both would be read fully by neither implementation. "
        f"Convert the table first (one commit; history and time travel are kept): "
        f"CONVERT INDEXTABLES TABLE '{table_uri}' (SQL), IndexTable(path).maintenance.convert() (Python) or "
        f"`indextables convert {table_uri}` (command line); then retry",
        table_path=table_uri,
        reference_splits=reference_splits,
        live_splits=live_splits,
    )


def refuse_reference_writes(snapshot: Snapshot | None, table_uri: str, operation: str) -> None:
    """Raise ReferenceTableError when the snapshot (None: no table yet) holds reference splits."""
    if snapshot is None:
        return
    found = reference_split_paths(snapshot)
    if found:
        raise refusal(table_uri, operation, len(found), snapshot.num_files)
