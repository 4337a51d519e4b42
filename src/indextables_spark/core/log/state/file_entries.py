"""FileEntry records (docs/reference/table-format.md, "File entries") as Arrow tables and as AddFile
objects.

Snapshots keep their live files as an Arrow table with these columns, so large file lists are
pruned and joined with Arrow compute; AddFile objects are built only for the rows asked for.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, TypeVar

import pyarrow as pa

from indextables_spark.core.log.model.actions import AddFile

_STR_MAP = pa.map_(pa.string(), pa.string())

FILE_ENTRY_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("partitionValues", _STR_MAP),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("modificationTime", pa.int64(), nullable=False),
        pa.field("dataChange", pa.bool_(), nullable=False),
        pa.field("stats", pa.string()),
        pa.field("minValues", _STR_MAP),
        pa.field("maxValues", _STR_MAP),
        pa.field("numRecords", pa.int64()),
        pa.field("footerStartOffset", pa.int64()),
        pa.field("footerEndOffset", pa.int64()),
        pa.field("hasFooterOffsets", pa.bool_()),
        pa.field("splitTags", pa.list_(pa.string())),
        pa.field("numMergeOps", pa.int32()),
        pa.field("docMappingRef", pa.string()),
        pa.field("uncompressedSizeBytes", pa.int64()),
        pa.field("addedAtVersion", pa.int64()),
        pa.field("addedAtTimestamp", pa.int64()),
        pa.field("companionSourceFiles", pa.list_(pa.string())),
        pa.field("companionDeltaVersion", pa.int64()),
        # reference fields this package keeps but does not use (core/log/state/avro_codec.py)
        pa.field("companionFastFieldMode", pa.string()),
        pa.field("deleteOpstamp", pa.int64()),
        pa.field("timeRangeStart", pa.string()),
        pa.field("timeRangeEnd", pa.string()),
        pa.field("hotcacheStartOffset", pa.int64()),
        pa.field("hotcacheLength", pa.int64()),
    ]
)


V = TypeVar("V")


def _map_items(d: Mapping[str, str | None] | None) -> list[tuple[str, str | None]] | None:
    return None if d is None else list(d.items())


def add_files_to_table(files: Iterable[AddFile]) -> pa.Table:
    cols: dict[str, list[Any]] = {f.name: [] for f in FILE_ENTRY_SCHEMA}
    for a in files:
        cols["path"].append(a.path)
        cols["partitionValues"].append(_map_items(a.partition_values or {}))
        cols["size"].append(a.size)
        cols["modificationTime"].append(a.modification_time)
        cols["dataChange"].append(a.data_change)
        cols["stats"].append(a.stats)
        cols["minValues"].append(_map_items(a.min_values))
        cols["maxValues"].append(_map_items(a.max_values))
        cols["numRecords"].append(a.num_records)
        cols["footerStartOffset"].append(a.footer_start_offset)
        cols["footerEndOffset"].append(a.footer_end_offset)
        cols["hasFooterOffsets"].append(a.has_footer_offsets)
        cols["splitTags"].append(a.split_tags)
        cols["numMergeOps"].append(a.num_merge_ops)
        cols["docMappingRef"].append(a.doc_mapping_ref)
        cols["uncompressedSizeBytes"].append(a.uncompressed_size_bytes)
        cols["addedAtVersion"].append(a.added_at_version if a.added_at_version is not None else -1)
        cols["addedAtTimestamp"].append(a.added_at_timestamp if a.added_at_timestamp is not None else 0)
        cols["companionSourceFiles"].append(a.companion_source_files)
        cols["companionDeltaVersion"].append(a.companion_source_version)
        cols["companionFastFieldMode"].append(a.companion_fast_field_mode)
        cols["deleteOpstamp"].append(a.delete_opstamp)
        cols["timeRangeStart"].append(a.time_range_start)
        cols["timeRangeEnd"].append(a.time_range_end)
        cols["hotcacheStartOffset"].append(a.hotcache_start_offset)
        cols["hotcacheLength"].append(a.hotcache_length)
    return pa.Table.from_pydict(cols, schema=FILE_ENTRY_SCHEMA)


def _as_dict(items: Iterable[tuple[str, V]] | None) -> dict[str, V] | None:
    if items is None:
        return None
    return dict(items)


def table_to_add_files(table: pa.Table) -> list[AddFile]:
    """Build AddFile objects for every row of a FileEntry table."""
    if table.num_rows == 0:
        return []
    cols = {name: table.column(name).to_pylist() for name in table.column_names if name in FILE_ENTRY_SCHEMA.names}
    n = table.num_rows

    def get(name: str) -> list[Any]:
        return cols.get(name) or [None] * n

    path, pv, size, mt, dc = (
        get("path"),
        get("partitionValues"),
        get("size"),
        get("modificationTime"),
        get("dataChange"),
    )
    stats, mn, mx, nr = get("stats"), get("minValues"), get("maxValues"), get("numRecords")
    fs, fe, tags, nmo = get("footerStartOffset"), get("footerEndOffset"), get("splitTags"), get("numMergeOps")
    ref, usz, aav, aat = (
        get("docMappingRef"),
        get("uncompressedSizeBytes"),
        get("addedAtVersion"),
        get("addedAtTimestamp"),
    )
    csf, csv = get("companionSourceFiles"), get("companionDeltaVersion")
    cffm, dop = get("companionFastFieldMode"), get("deleteOpstamp")
    trs, tre, hcs, hcl = get("timeRangeStart"), get("timeRangeEnd"), get("hotcacheStartOffset"), get("hotcacheLength")
    out: list[AddFile] = []
    for i in range(n):
        out.append(
            AddFile(
                path=path[i],
                partition_values=_as_dict(pv[i]) or {},
                size=size[i],
                modification_time=mt[i] or 0,
                data_change=True if dc[i] is None else dc[i],
                stats=stats[i],
                min_values=_as_dict(mn[i]),
                max_values=_as_dict(mx[i]),
                num_records=nr[i],
                footer_start_offset=fs[i],
                footer_end_offset=fe[i],
                split_tags=tags[i],
                num_merge_ops=nmo[i],
                doc_mapping_ref=ref[i],
                uncompressed_size_bytes=usz[i],
                added_at_version=aav[i],
                added_at_timestamp=aat[i],
                companion_source_files=csf[i],
                companion_source_version=csv[i],
                companion_fast_field_mode=cffm[i],
                delete_opstamp=dop[i],
                time_range_start=trs[i],
                time_range_end=tre[i],
                hotcache_start_offset=hcs[i],
                hotcache_length=hcl[i],
            )
        )
    return out
