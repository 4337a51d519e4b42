"""FileEntry manifests (`manifests/manifest-<id>.avro`) written from Arrow: values normalized for
Avro, partition bounds, the block index of partition-sorted files (the reading side: manifest.py).

pyarrow and numpy are imported inside the functions that use them ("# lazy"), as in manifest.py."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Callable, Sequence

from indextables_spark.core.log.state.avro_container import FILE_ENTRY_AVRO_SCHEMA, avro_codec_name
from indextables_spark.core.log.state.manifest import BLOCK_INDEX_KEY, conform
from indextables_spark.core.log.model.paths import MANIFESTS_DIR
from indextables_spark.core.log.state.state_manifest import ManifestInfo
from indextables_spark.core.storage import Storage
from indextables_spark.errors import CorruptStateError

if TYPE_CHECKING:
    import pyarrow as pa

    from indextables_spark.core.log.state.avro_container import BlockInfo


def new_manifest_key() -> str:
    return f"{MANIFESTS_DIR}/manifest-{uuid.uuid4().hex}.avro"


def partition_value_column(files: pa.Table, column: str) -> pa.ChunkedArray:
    import pyarrow as pa  # lazy (see the module docstring)
    import pyarrow.compute as pc  # lazy

    return pc.map_lookup(files.column("partitionValues"), pa.scalar(column, pa.string()), "first")


def compute_partition_bounds(
    files: pa.Table, partition_columns: Sequence[str]
) -> dict[str, tuple[str | None, str | None]] | None:
    """Lexicographic min/max of each partition column; (None, None) when all values are null.
    None (no bounds) for an unpartitioned table."""
    if not partition_columns:
        return None
    import pyarrow.compute as pc  # lazy (see the module docstring)

    out: dict[str, tuple[str | None, str | None]] = {}
    for col in partition_columns:
        if files.num_rows == 0:
            out[col] = (None, None)
            continue
        mm = pc.min_max(partition_value_column(files, col))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        out[col] = (lo, hi) if lo is not None else (None, None)
    return out


def _normalize_for_avro(files: pa.Table) -> pa.Table:
    """Values Avro cannot hold as-is: null map values (Avro map values are non-null strings) are
    dropped from partitionValues / minValues / maxValues; hasFooterOffsets is derived when null."""
    import pyarrow as pa  # lazy (see the module docstring)
    import pyarrow.compute as pc  # lazy

    cols = {}
    for name in ("partitionValues", "minValues", "maxValues"):
        col = files.column(name).combine_chunks()
        if len(col) and col.items.null_count:
            rows = col.to_pylist()
            fixed = [None if r is None else [(k, v) for k, v in r if v is not None] for r in rows]
            cols[name] = pa.array(fixed, col.type)
    hf = files.column("hasFooterOffsets")
    if hf.null_count:
        derived = pc.and_(pc.is_valid(files.column("footerStartOffset")), pc.is_valid(files.column("footerEndOffset")))
        cols["hasFooterOffsets"] = pc.coalesce(hf, derived)
    if "partitionValues" not in cols and files.column("partitionValues").null_count:
        cols["partitionValues"] = pc.fill_null(
            files.column("partitionValues"), pa.scalar([], files.schema.field("partitionValues").type)
        )
    for name, arr in cols.items():
        files = files.set_column(files.schema.get_field_index(name), name, arr)
    return files


MIN_INDEXED_BLOCK_ROWS = 256


def _partition_blocks(
    files: pa.Table, partition_columns: Sequence[str]
) -> tuple[list[int], Callable[[list[BlockInfo]], dict[str, bytes]]]:
    """Block starts at partition changes (rows sorted by partition), merging small partitions
    into blocks of at least MIN_INDEXED_BLOCK_ROWS rows; and a function computing the block index."""
    import numpy as np  # lazy (see the module docstring)
    import pyarrow.compute as pc  # lazy

    cols = sorted(partition_columns)
    values = [pc.fill_null(partition_value_column(files, c), "").combine_chunks() for c in cols]
    key = values[0] if len(values) == 1 else pc.binary_join_element_wise(*values, "\x1f")
    n = files.num_rows
    if n < 2:
        changes = np.array([], dtype=np.int64)
    else:
        diff = pc.not_equal(key.slice(1), key.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        changes = np.nonzero(diff)[0] + 1
    starts: list[int] = []
    last = 0
    for c in changes.tolist():
        if c - last >= MIN_INDEXED_BLOCK_ROWS:
            starts.append(c)
            last = c
    raw = [partition_value_column(files, c).combine_chunks() for c in cols]

    def index(blocks: list[BlockInfo]) -> dict[str, bytes]:
        entries: list[list[Any]] = []
        for b in blocks:
            bounds: list[list[Any]] = []
            for arr in raw:
                mm = pc.min_max(arr.slice(b.first_row, b.num_rows))
                bounds.append([mm["min"].as_py(), mm["max"].as_py()])
            entries.append([b.offset, b.num_rows, bounds])
        doc = {"version": 1, "columns": cols, "blocks": entries}
        return {BLOCK_INDEX_KEY: json.dumps(doc, separators=(",", ":")).encode()}

    return starts, index


def encode_manifest(
    files: pa.Table, codec: str = "zstd", level: int = 3, partition_columns: Sequence[str] | None = None
) -> bytes:
    """Avro container of FileEntry records. With partition_columns (rows sorted by partition, as
    compaction writes them) blocks start at partition changes and the header carries each block's
    partition bounds (`io.indextables.blockIndex`), so readers can skip blocks; other Avro readers
    ignore that metadata."""
    from indextables_spark.core.log.state.avro_codec import (
        encode_rows,
        write_container,
    )  # lazy: numpy/pyarrow (see the module docstring)

    files = _normalize_for_avro(conform(files))
    rows = encode_rows(files, FILE_ENTRY_AVRO_SCHEMA)
    starts: list[int] | None = None
    index: Callable[[list[BlockInfo]], dict[str, bytes]] | None = None
    if partition_columns and files.num_rows:
        starts, index = _partition_blocks(files, partition_columns)
    data, _ = write_container(rows, FILE_ENTRY_AVRO_SCHEMA, avro_codec_name(codec), level, starts, extra_meta_fn=index)
    return data


def write_manifest(
    storage: Storage,
    files: pa.Table,
    partition_columns: Sequence[str],
    codec: str = "zstd",
    level: int = 3,
) -> tuple[str, ManifestInfo]:
    """Write one manifest to the shared directory. Returns (storage key, ManifestInfo)."""
    key = new_manifest_key()
    data = encode_manifest(files, codec, level)
    if not storage.put_if_absent(key, data):  # a random 128-bit name: never expected
        raise CorruptStateError(f"manifest {storage.full_uri(key)} already exists")
    return key, manifest_info(key, files, partition_columns)


def manifest_info(key: str, files: pa.Table, partition_columns: Sequence[str]) -> ManifestInfo:
    rel = key[len(MANIFESTS_DIR) - len("manifests") :]
    if files.num_rows:
        import pyarrow.compute as pc  # lazy (see the module docstring)

        mm = pc.min_max(files.column("addedAtVersion"))
        lo, hi = int(mm["min"].as_py()), int(mm["max"].as_py())
    else:
        lo = hi = -1
    return ManifestInfo(
        path=rel,
        num_entries=files.num_rows,
        min_added_at_version=lo,
        max_added_at_version=hi,
        partition_bounds=compute_partition_bounds(files, partition_columns),
        tombstone_count=0,
        live_entry_count=files.num_rows,
    )
