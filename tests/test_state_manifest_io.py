"""FileEntry manifests (docs/reference/table-format.md, "File entries"): the reader and the writer,
without cloud storage (the S3/Azure variants belong to the cloud test issue)."""

from __future__ import annotations

import io
import threading

import fastavro
import pyarrow.compute as pc
import pytest

from indextables_spark.errors import CorruptStateError
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.state.avro_codec import FILE_ENTRY_AVRO_SCHEMA, read_header
from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA, add_files_to_table, table_to_add_files
from indextables_spark.core.log.state.manifest import read_manifest
from indextables_spark.core.log.state.manifest_write import compute_partition_bounds, encode_manifest, write_manifest
from indextables_spark.expr.partition_filter import parse_partition_filter, prune_manifests
from indextables_spark.core.log.commit.synthetic import synthetic_add, synthetic_adds
from indextables_spark.core.storage import LocalStorage


@pytest.fixture
def storage(tmp_path):
    return LocalStorage(str(tmp_path))


def full_entry(i: int) -> AddFile:
    return AddFile(
        path=f"date=2024-01-0{i % 9 + 1}/splits/s{i}.split",
        partition_values={"date": f"2024-01-0{i % 9 + 1}", "region": "eu"},
        size=1000 + i,
        modification_time=1_700_000_000_000 + i,
        data_change=bool(i % 2),
        stats='{"numRecords": 7}',
        min_values={"id": str(i), "title": "a"},
        max_values={"id": str(i + 9), "title": "z"},
        num_records=7 + i,
        footer_start_offset=500 + i,
        footer_end_offset=900 + i,
        split_tags=["hot", f"t{i}"],
        num_merge_ops=i % 4,
        doc_mapping_ref="ref" + str(i % 2),
        uncompressed_size_bytes=5000 + i,
        added_at_version=10 + i,
        added_at_timestamp=1_700_000_001_000 + i,
    )


def write_and_read(storage, files, codec="zstd", pcols=("date",)):
    key, info = write_manifest(storage, add_files_to_table(files), list(pcols), codec)
    return key, info, read_manifest(storage, key, info.num_entries)


def fastavro_records(storage, key):
    with open(storage.local_path(key), "rb") as f:
        return list(fastavro.reader(f))


# ---- §1 reader -------------------------------------------------------------------------------------------


def test_read_empty_manifest(storage):
    key, info, table = write_and_read(storage, [])
    assert table.num_rows == 0 and table.schema == FILE_ENTRY_SCHEMA
    assert info.num_entries == 0 and fastavro_records(storage, key) == []


def test_read_single_entry(storage):
    _, _, table = write_and_read(storage, [full_entry(1)])
    assert table_to_add_files(table) == [full_entry(1)]


def test_read_multiple_entries(storage):
    files = [full_entry(i) for i in range(1500)]
    _, info, table = write_and_read(storage, files)
    assert table.num_rows == 1500 and info.num_entries == 1500
    assert table_to_add_files(table) == files


def test_read_all_fields(storage):
    key, _, table = write_and_read(storage, [full_entry(3)])
    row = table.to_pylist()[0]
    assert set(row) == {f["name"] for f in FILE_ENTRY_AVRO_SCHEMA["fields"]}  # all 18 fields
    assert row["stats"] == '{"numRecords": 7}' and row["splitTags"] == ["hot", "t3"]
    assert row["hasFooterOffsets"] is True and row["footerStartOffset"] == 503
    assert row["addedAtVersion"] == 13 and row["numMergeOps"] == 3
    # an independent Avro implementation reads the same values
    rec = fastavro_records(storage, key)[0]
    assert rec["uncompressedSizeBytes"] == 5003 and rec["minValues"] == {"id": "3", "title": "a"}


def test_read_nullable_fields(storage):
    bare = AddFile(
        path="a.split", partition_values={}, size=1, modification_time=2, added_at_version=0, added_at_timestamp=0
    )
    _, _, table = write_and_read(storage, [bare], pcols=())
    row = table.to_pylist()[0]
    for name in (
        "stats",
        "minValues",
        "maxValues",
        "numRecords",
        "footerStartOffset",
        "footerEndOffset",
        "splitTags",
        "numMergeOps",
        "docMappingRef",
        "uncompressedSizeBytes",
    ):
        assert row[name] is None, name
    assert row["hasFooterOffsets"] is False
    assert table_to_add_files(table) == [bare]


def test_read_with_partition_values(storage):
    files = [synthetic_add(i, partition_columns=("date", "region"), num_partitions=5) for i in range(20)]
    _, _, table = write_and_read(storage, files, pcols=("date", "region"))
    assert [dict(r) for r in table.column("partitionValues").to_pylist()] == [f.partition_values for f in files]


def test_read_with_empty_partition_values(storage):
    files = synthetic_adds(0, 5, partition_columns=())
    key, info, table = write_and_read(storage, files, pcols=())
    assert all(r == [] for r in table.column("partitionValues").to_pylist())
    assert info.partition_bounds is None
    assert all(r["partitionValues"] == {} for r in fastavro_records(storage, key))


@pytest.mark.slow
def test_read_large_manifest(storage):
    files = synthetic_adds(0, 100_000, num_partitions=100)
    _, info, table = write_and_read(storage, files)
    assert table.num_rows == 100_000
    assert table.column("path")[99_999].as_py() == files[-1].path
    assert pc.sum(table.column("size")).as_py() == sum(f.size for f in files)


def test_read_corrupted_manifest(storage):
    key, info = write_manifest(storage, add_files_to_table([full_entry(i) for i in range(200)]), ["date"])
    data = bytearray(storage.read(key))
    data[len(data) // 2] ^= 0xFF
    storage.put(key, bytes(data))
    with pytest.raises(CorruptStateError, match=key.split("/")[-1]):
        read_manifest(storage, key, info.num_entries)
    storage.put(key, b"not avro at all")
    with pytest.raises(CorruptStateError, match="not an Avro object container"):
        read_manifest(storage, key, info.num_entries)


def test_read_truncated_manifest(storage):
    key, info = write_manifest(storage, add_files_to_table([full_entry(i) for i in range(3000)]), ["date"])
    data = storage.read(key)
    for cut in (len(data) - 1, len(data) - 16, len(data) // 2, read_header(data, "x").length + 3):
        storage.put(key, data[:cut])
        with pytest.raises(CorruptStateError, match="truncated|holds"):
            read_manifest(storage, key, info.num_entries)


def test_read_missing_manifest_names_it(storage):
    with pytest.raises(CorruptStateError, match="manifest-gone.avro is missing"):
        read_manifest(storage, "_transaction_log/manifests/manifest-gone.avro", 3)


def test_parallel_manifest_read(storage):
    keys = [write_manifest(storage, add_files_to_table(synthetic_adds(k * 500, 500)), ["date"]) for k in range(6)]
    results = {}

    def read(i):
        results[i] = read_manifest(storage, keys[i][0], 500)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [results[i].column("path")[0].as_py() for i in range(6)] == [synthetic_add(k * 500).path for k in range(6)]


def test_filter_by_added_at_version_and_timestamp(storage):
    files = [full_entry(i) for i in range(50)]
    _, _, table = write_and_read(storage, files)
    newer = table.filter(pc.greater(table.column("addedAtVersion"), 40))
    assert sorted(newer.column("addedAtVersion").to_pylist()) == list(range(41, 60))
    later = table.filter(pc.greater(table.column("addedAtTimestamp"), 1_700_000_001_045))
    assert later.num_rows == 4


def test_filter_by_partition_skips_manifests(storage):
    infos = []
    for d in ("2024-01-01", "2024-01-02", "2024-01-03"):
        files = [
            AddFile(f"date={d}/{i}.split", {"date": d}, 1, 1, added_at_version=1, added_at_timestamp=1)
            for i in range(3)
        ]
        infos.append(write_manifest(storage, add_files_to_table(files), ["date"])[1])
    pred = parse_partition_filter("date = '2024-01-02'", ["date"])
    kept = prune_manifests(infos, pred)
    assert [m.partition_bounds["date"] for m in kept] == [("2024-01-02", "2024-01-02")]


# ---- §2 writer -------------------------------------------------------------------------------------------


def test_written_manifest_has_the_spec_schema(storage):
    key, _ = write_manifest(storage, add_files_to_table([full_entry(0)]), ["date"])
    header = read_header(storage.read(key), key)
    assert header.schema["name"] == "FileEntry" and header.schema["namespace"] == "io.indextables.state"
    assert [f["name"] for f in header.schema["fields"]] == [f.name for f in FILE_ENTRY_SCHEMA]
    ids = {f["name"]: f["field-id"] for f in header.schema["fields"]}
    assert ids["hasFooterOffsets"] == 124 and ids["splitTags"] == 132 and ids["uncompressedSizeBytes"] == 136
    assert header.codec == "zstandard"
    # fastavro resolves it against the format's schema by name: the record must match exactly
    parsed = fastavro.parse_schema(FILE_ENTRY_AVRO_SCHEMA)
    with open(storage.local_path(key), "rb") as f:
        assert len(list(fastavro.reader(f, reader_schema=parsed))) == 1


def test_write_empty_single_and_multiple(storage):
    for n in (0, 1, 1200):
        files = [full_entry(i) for i in range(n)]
        key, info, table = write_and_read(storage, files)
        assert info.num_entries == n and table_to_add_files(table) == files
        assert len(fastavro_records(storage, key)) == n


def test_write_all_and_nullable_fields_round_trip_through_fastavro(storage):
    bare = AddFile("b.split", {"date": "2024-01-01"}, 5, 6, added_at_version=2, added_at_timestamp=3)
    files = [full_entry(0), bare]
    key, _, _ = write_and_read(storage, files)
    recs = fastavro_records(storage, key)
    assert recs[0]["splitTags"] == ["hot", "t0"] and recs[0]["stats"] == '{"numRecords": 7}'
    assert recs[1]["stats"] is None and recs[1]["splitTags"] is None and recs[1]["numRecords"] is None
    assert recs[1]["hasFooterOffsets"] is False and recs[1]["addedAtVersion"] == 2


@pytest.mark.parametrize("codec,avro_name", [("zstd", "zstandard"), ("snappy", "snappy"), ("none", "null")])
def test_write_with_each_codec(storage, codec, avro_name):
    files = [full_entry(i) for i in range(300)]
    key, info, table = write_and_read(storage, files, codec=codec)
    assert read_header(storage.read(key), key).codec == avro_name
    assert table_to_add_files(table) == files
    assert len(fastavro_records(storage, key)) == 300


def test_zstd_compresses(storage):
    files = synthetic_adds(0, 2000)
    big = encode_manifest(add_files_to_table(files), "none")
    small = encode_manifest(add_files_to_table(files), "zstd", 3)
    assert len(small) < len(big) / 3


def test_write_null_map_values_are_dropped_not_invented(storage):
    a = AddFile("n.split", {"date": None, "region": "eu"}, 1, 1, added_at_version=0, added_at_timestamp=0)
    key, _, table = write_and_read(storage, [a], pcols=("date", "region"))
    assert fastavro_records(storage, key)[0]["partitionValues"] == {"region": "eu"}
    assert dict(table.column("partitionValues")[0].as_py()) == {"region": "eu"}


@pytest.mark.slow
def test_write_large_manifest(storage):
    table = add_files_to_table(synthetic_adds(0, 100_000, num_partitions=1000))
    key, info = write_manifest(storage, table, ["date"])
    assert info.num_entries == 100_000
    assert info.partition_bounds["date"][0] == "2024-01-01"
    with open(storage.local_path(key), "rb") as f:
        n = sum(1 for _ in fastavro.reader(f))
    assert n == 100_000


def test_write_in_slices_equals_write_whole(storage):
    """The encoder works on any slice of a table (chunked compaction writes slices)."""
    table = add_files_to_table([full_entry(i) for i in range(100)])
    parts = [table.slice(0, 37), table.slice(37, 40), table.slice(77)]
    rows = []
    for p in parts:
        rows += list(fastavro.reader(io.BytesIO(encode_manifest(p))))
    assert rows == list(fastavro.reader(io.BytesIO(encode_manifest(table))))


def test_concurrent_manifest_writes(storage):
    out = []
    lock = threading.Lock()

    def w(k):
        r = write_manifest(storage, add_files_to_table(synthetic_adds(k * 100, 100)), ["date"])
        with lock:
            out.append(r)

    threads = [threading.Thread(target=w, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({k for k, _ in out}) == 8
    assert sum(read_manifest(storage, k, i.num_entries).num_rows for k, i in out) == 800


def test_partition_bounds_and_version_bounds_in_info(storage):
    files = [
        AddFile(f"p{i}", {"date": d}, 1, 1, added_at_version=v, added_at_timestamp=0)
        for i, (d, v) in enumerate([("2024-03-01", 5), ("2024-01-15", 9), ("2024-02-01", 7)])
    ]
    _, info = write_manifest(storage, add_files_to_table(files), ["date"])
    assert info.partition_bounds == {"date": ("2024-01-15", "2024-03-01")}
    assert (info.min_added_at_version, info.max_added_at_version) == (5, 9)
    assert compute_partition_bounds(add_files_to_table(files), ["region"]) == {"region": (None, None)}
