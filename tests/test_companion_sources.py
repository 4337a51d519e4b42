"""Companion sources: the data files of Delta (deltalake), Iceberg (pyiceberg) and hive-partitioned
Parquet directories at one version, with partition values as text and Spark-style Arrow schemas.

Real libraries on tmp_path; the `cloud` tests use the moto S3 / Azurite emulators."""

from __future__ import annotations

import datetime as dt
import json
import os
import posixpath
import struct
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indextables_spark.ops.companion.sources import delta as cs_delta, iceberg as cs_iceberg, parquet as cs_parquet
from indextables_spark.config.options import Options
from indextables_spark.ops.companion.sources import (
    SourceSnapshot,
    fileio_properties_for_iceberg,
    normalize_schema,
    open_source,
    storage_options_for_deltalake,
)
from indextables_spark.errors import (
    InvalidOptionError,
    SchemaMismatchError,
    TableNotFoundError,
    VersionNotFoundError,
)

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def by_key(snap: SourceSnapshot) -> dict:
    return {f.key: f for f in snap.files}


# ------------------------------------------------------------------------------------------------
# format, schemas
# ------------------------------------------------------------------------------------------------


def test_unknown_format_names_the_value_and_the_valid_ones(tmp_path):
    with pytest.raises(InvalidOptionError) as e:
        open_source("orc", str(tmp_path))
    assert "'orc'" in str(e.value) and "delta, iceberg, parquet" in str(e.value)
    with pytest.raises(InvalidOptionError, match="no versions"):
        open_source("parquet", str(tmp_path), version=3)
    with pytest.raises(InvalidOptionError, match="catalog"):
        open_source("delta", str(tmp_path), catalog="c")


def test_missing_library_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "deltalake", None)  # makes `import deltalake` fail
    with pytest.raises(InvalidOptionError, match=r"pip install 'indextables_spark\[companion\]'"):
        open_source("delta", str(tmp_path))


def test_normalize_schema_gives_spark_types():
    meta = {b"PARQUET:field_id": b"1"}
    src = pa.schema(
        [
            pa.field("s", pa.large_string(), metadata=meta),
            pa.field("sv", pa.string_view()),
            pa.field("b", pa.large_binary(), nullable=False),
            pa.field("ts_ns_tz", pa.timestamp("ns", tz="Europe/Paris")),
            pa.field("ts_ms", pa.timestamp("ms")),
            pa.field("l", pa.large_list(pa.field("element", pa.large_string()))),
            pa.field("st", pa.struct([pa.field("x", pa.timestamp("s", tz="UTC")), pa.field("y", pa.large_binary())])),
            pa.field("m", pa.map_(pa.large_string(), pa.large_list(pa.int32()))),
            pa.field("d", pa.dictionary(pa.int32(), pa.large_string())),
            pa.field("i", pa.int16(), nullable=False),
        ],
        metadata={b"pandas": b"{}"},
    )
    out = normalize_schema(src)
    assert out == pa.schema(
        [
            pa.field("s", pa.string()),
            pa.field("sv", pa.string()),
            pa.field("b", pa.binary(), nullable=False),
            pa.field("ts_ns_tz", pa.timestamp("us", tz="UTC")),
            pa.field("ts_ms", pa.timestamp("us")),
            pa.field("l", pa.list_(pa.field("element", pa.string()))),
            pa.field("st", pa.struct([pa.field("x", pa.timestamp("us", tz="UTC")), pa.field("y", pa.binary())])),
            pa.field("m", pa.map_(pa.string(), pa.list_(pa.int32()))),
            pa.field("d", pa.string()),
            pa.field("i", pa.int16(), nullable=False),
        ]
    )
    assert out.metadata is None and all(f.metadata is None for f in out)


# ------------------------------------------------------------------------------------------------
# Delta
# ------------------------------------------------------------------------------------------------


def _rows(ids, **extra):
    return pa.table({"id": pa.array(ids, pa.int64()), "txt": [f"t{i}" for i in ids], **extra})


def test_delta_unpartitioned_versions_and_time_travel(tmp_path):
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, _rows([1, 2, 3], ts=pa.array([1, 2, 3], pa.timestamp("us", tz="UTC"))))
    deltalake.write_deltalake(path, _rows([4, 5], ts=pa.array([4, 5], pa.timestamp("us", tz="UTC"))), mode="append")

    latest = open_source("DELTA", path)  # format is case-insensitive
    assert latest.format == "delta" and latest.version == 1 and latest.root == os.path.abspath(path)
    assert latest.partition_columns == []
    assert latest.schema == pa.schema([("id", pa.int64()), ("txt", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
    assert sorted(f.num_records for f in latest.files) == [2, 3]
    for f in latest.files:
        assert "/" not in f.key and f.uri == os.path.join(os.path.abspath(path), f.key)
        assert os.path.getsize(f.uri) == f.size and f.partition_values == {}

    first = open_source("delta", path, version=0)
    assert first.version == 0 and [f.num_records for f in first.files] == [3]
    assert first.files[0].key in by_key(latest)

    with pytest.raises(VersionNotFoundError) as e:
        open_source("delta", path, version=7)
    assert "version 7" in str(e.value) and "latest is 1" in str(e.value) and path in str(e.value)


def test_delta_partitioned_keys_are_real_paths(tmp_path):
    path = str(tmp_path / "p")
    data = _rows(
        [1, 2, 3, 4, 5],
        p=["x y", "a/b", "é%", None, "x y"],
        n=pa.array([1, -2, 3, 4, None], pa.int32()),
        d=[dt.date(2024, 1, 1), None, dt.date(2024, 1, 3), dt.date(2024, 1, 4), dt.date(2024, 1, 1)],
    )
    deltalake.write_deltalake(path, data, partition_by=["p", "n", "d"])
    snap = open_source("delta", path)
    assert snap.partition_columns == ["p", "n", "d"]
    assert snap.schema.field("n").type == pa.int32() and snap.schema.field("d").type == pa.date32()
    values = sorted((tuple(f.partition_values.values()) for f in snap.files), key=str)
    assert values == sorted(
        [
            ("x y", "1", "2024-01-01"),
            ("a/b", "-2", None),
            ("é%", "3", "2024-01-03"),
            (None, "4", "2024-01-04"),
            ("x y", None, "2024-01-01"),
        ],
        key=str,
    )
    for f in snap.files:
        assert os.path.isfile(f.uri), f.uri  # decoded once: the directory on disk
        assert os.path.getsize(f.uri) == f.size
        assert f.uri == os.path.join(snap.root, *f.key.split("/"))
    _assert_readable(snap, {})
    space = next(f for f in snap.files if f.partition_values["p"] == "x y" and f.partition_values["n"] == "1")
    assert space.key.startswith("p=x%20y/n=1/d=2024-01-01/")  # what Delta's writer names the directory


def test_delta_delete_lists_the_rewritten_files(tmp_path):
    path = str(tmp_path / "del")
    deltalake.write_deltalake(path, _rows([1, 2, 3, 4], p=["a", "a", "b", "b"]), partition_by=["p"])
    before = by_key(open_source("delta", path))
    deltalake.DeltaTable(path).delete("id = 2")
    after = open_source("delta", path)
    assert after.version == 1
    now = by_key(after)
    b_file = next(k for k in before if k.startswith("p=b/"))
    assert b_file in now  # untouched partition keeps its file
    a_old = next(k for k in before if k.startswith("p=a/"))
    a_new = [k for k in now if k.startswith("p=a/")]
    assert a_old not in now and len(a_new) == 1 and now[a_new[0]].num_records == 1
    assert os.path.isfile(now[a_new[0]].uri)


def test_delta_missing_table(tmp_path):
    with pytest.raises(TableNotFoundError) as e:
        open_source("delta", str(tmp_path / "nope"))
    assert str(tmp_path / "nope") in str(e.value)


def test_delta_column_mapping_is_read(tmp_path):
    # (issue 48: column mapping was refused) deltalake writes physical names; the companion reads
    # them under the logical ones
    import indextables_spark as it

    path = str(tmp_path / "cm")
    deltalake.write_deltalake(path, _rows([1, 2]), configuration={"delta.columnMapping.mode": "name"})
    snap = open_source("delta", path)
    assert set(snap.physical_names) == set(snap.schema.names)
    it.build_companion(path, str(tmp_path / "idx"), format="delta")
    got = it.IndexTable(str(tmp_path / "idx")).to_arrow()
    assert (
        got.sort_by("id").select(snap.schema.names).to_pylist() == _rows([1, 2]).select(snap.schema.names).to_pylist()
    )


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    data += bytes(-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        v = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            chunk.append(_Z85[v % 85])
            v //= 85
        out.extend(reversed(chunk))
    return "".join(out)


def _inline_deletion_vector(rows: list[int]) -> bytes:
    """Delta's deletion vector bytes: magic, then a RoaringBitmapArray of one 32-bit roaring bitmap
    (portable format, one array container)."""
    rows = sorted(rows)
    bitmap = (
        struct.pack("<II", 12346, 1)
        + struct.pack("<HH", 0, len(rows) - 1)
        + struct.pack("<I", 16)
        + b"".join(struct.pack("<H", r) for r in rows)
    )
    return struct.pack("<i", 1681511377) + struct.pack("<q", 1) + struct.pack("<i", 0) + bitmap


def test_delta_deletion_vectors_are_read(tmp_path):
    # delta-rs 1.6 never writes deletion vectors (its DELETE rewrites files even with
    # delta.enableDeletionVectors=true), so the commit Spark would write is written by hand: the
    # same file re-added with an inline vector deleting row 1. delta-rs reads it back (checked below).
    path = str(tmp_path / "dv")
    deltalake.write_deltalake(path, _rows([1, 2, 3, 4]), configuration={"delta.enableDeletionVectors": "true"})
    assert open_source("delta", path).files[0].num_records == 4  # the feature alone is fine
    add = pa.table(deltalake.DeltaTable(path).get_add_actions()).to_pylist()[0]
    dv = _inline_deletion_vector([1])
    actions = [
        {"remove": {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}},
        {
            "add": {
                "path": add["path"],
                "size": add["size_bytes"],
                "modificationTime": add["modification_time"],
                "dataChange": True,
                "partitionValues": {},
                "stats": json.dumps({"numRecords": 4}),
                "deletionVector": {
                    "storageType": "i",
                    "pathOrInlineDv": _z85(dv),
                    "sizeInBytes": len(dv),
                    "cardinality": 1,
                },
            }
        },
        {"commitInfo": {"operation": "DELETE"}},
    ]
    with open(os.path.join(path, "_delta_log", "00000000000000000001.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    assert pa.table(deltalake.DeltaTable(path).scan()).column("id").to_pylist() == [1, 3, 4]

    # (issue 48: deletion vectors were refused) the descriptor comes with the file, the companion
    # never returns the deleted row
    import indextables_spark as it

    assert open_source("delta", path).files[0].deletion_vector.cardinality == 1
    assert open_source("delta", path, version=0).files[0].deletion_vector is None  # before the vector
    it.build_companion(path, str(tmp_path / "idx"), format="delta")
    assert sorted(it.IndexTable(str(tmp_path / "idx")).to_arrow().column("id").to_pylist()) == [1, 3, 4]


# ------------------------------------------------------------------------------------------------
# Iceberg
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def iceberg(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    uri, warehouse = f"sqlite:///{tmp_path}/cat.db", f"file://{tmp_path}/wh"
    catalog = SqlCatalog("c", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    options = {
        "spark.indextables.iceberg.catalog.c.uri": uri,
        "spark.indextables.iceberg.catalog.c.warehouse": warehouse,
    }
    return catalog, options


def _iceberg_partitioned(catalog, name="db.parts", day=False):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import DateType, IntegerType, LongType, NestedField, StringType, TimestamptzType

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "txt", StringType(), required=False),
        NestedField(3, "d", DateType(), required=False),
        NestedField(4, "p", StringType(), required=False),
        NestedField(5, "n", IntegerType(), required=False),
        NestedField(6, "ts", TimestamptzType(), required=False),
    )
    fields = [
        PartitionField(3, 1000, IdentityTransform(), "d"),
        PartitionField(4, 1001, IdentityTransform(), "p"),
        PartitionField(5, 1002, IdentityTransform(), "n"),
    ]
    if day:  # writing through a day transform needs pyiceberg-core (not installed): empty tables only
        fields.insert(1, PartitionField(6, 1003, DayTransform(), "ts_day"))
    return catalog.create_table(name, schema=schema, partition_spec=PartitionSpec(*fields))


def _parts_rows(ids, d, p, n):
    return pa.Table.from_pylist(
        [
            {"id": i, "txt": f"t{i}", "d": dd, "p": pp, "n": nn, "ts": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)}
            for i, dd, pp, nn in zip(ids, d, p, n)
        ],
        schema=pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                ("txt", pa.string()),
                ("d", pa.date32()),
                ("p", pa.string()),
                ("n", pa.int32()),
                ("ts", pa.timestamp("us", tz="UTC")),
            ]
        ),
    )


def test_iceberg_partitioned_through_catalog_metadata_file_and_directory(iceberg):
    catalog, options = iceberg
    table = _iceberg_partitioned(catalog)
    table.append(
        _parts_rows([1, 2, 3], [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None], ["x y", "a/b", None], [1, -2, None])
    )
    first_snapshot = table.current_snapshot().snapshot_id
    table.append(_parts_rows([4], [dt.date(2024, 1, 1)], ["x y"], [1]))
    table = catalog.load_table("db.parts")

    via_catalog = open_source("iceberg", "db.parts", options=options, catalog="c", catalog_type="sql")
    via_file = open_source("iceberg", table.metadata_location)
    table_dir = table.location()[len("file://") :]
    via_dir = open_source("iceberg", table_dir)
    for snap in (via_catalog, via_file, via_dir):
        assert snap.format == "iceberg" and snap.version == table.current_snapshot().snapshot_id
        assert snap.root == table.location()
        assert snap.partition_columns == ["d", "p", "n"]
        assert snap.schema == pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                ("txt", pa.string()),
                ("d", pa.date32()),
                ("p", pa.string()),
                ("n", pa.int32()),
                ("ts", pa.timestamp("us", tz="UTC")),
            ]
        )
        assert all(f.metadata is None for f in snap.schema)
        assert len(snap.files) == 4 and sum(f.num_records for f in snap.files) == 4
        assert sorted((tuple(f.partition_values.values()) for f in snap.files), key=str) == sorted(
            [("2024-01-01", "x y", "1"), ("2024-01-02", "a/b", "-2"), (None, None, None), ("2024-01-01", "x y", "1")],
            key=str,
        )
        for f in snap.files:
            # the key is Iceberg's location; the uri a plain path (the directory 'p=a%2Fb' is literal)
            assert f.key.startswith("file:///") and f.uri == f.key[len("file://") :]
            assert os.path.getsize(f.uri) == f.size
        _assert_readable(snap, {})
    assert via_catalog.source == "db.parts" and via_file.source == table.metadata_location
    assert [f.key for f in via_catalog.files] == [f.key for f in via_file.files] == [f.key for f in via_dir.files]

    old = open_source("iceberg", "db.parts", options=options, catalog="c", version=first_snapshot)
    assert old.version == first_snapshot and len(old.files) == 3
    assert {f.key for f in old.files} < {f.key for f in via_catalog.files}

    with pytest.raises(VersionNotFoundError, match="no snapshot 12345"):
        open_source("iceberg", table.metadata_location, version=12345)


def test_iceberg_unpartitioned_and_empty(iceberg):
    catalog, options = iceberg
    table = catalog.create_table("db.plain", schema=pa.schema([("id", pa.int64()), ("txt", pa.large_string())]))
    empty = open_source("iceberg", "db.plain", options=options, catalog="c")
    assert empty.version is None and empty.files == [] and empty.partition_columns == []
    assert empty.schema == pa.schema([("id", pa.int64()), ("txt", pa.string())])

    table.append(pa.table({"id": [1, 2], "txt": ["a", "b"]}))
    table = catalog.load_table("db.plain")
    for snap in (
        open_source("iceberg", "db.plain", options=options, catalog="c"),
        open_source("iceberg", table.metadata_location),
    ):
        assert snap.partition_columns == [] and len(snap.files) == 1
        assert snap.files[0].num_records == 2 and snap.files[0].partition_values == {}

    day = _iceberg_partitioned(catalog, "db.day", day=True)
    snap = open_source("iceberg", day.metadata_location)
    assert snap.files == [] and snap.partition_columns == ["d", "p", "n"]  # a day transform is no column

    with pytest.raises(TableNotFoundError, match="db.nope"):
        open_source("iceberg", "db.nope", options=options, catalog="c")


def test_iceberg_partition_column_needs_every_file(iceberg):
    from pyiceberg.transforms import IdentityTransform

    catalog, options = iceberg
    table = catalog.create_table("db.evolve", schema=pa.schema([("id", pa.int64()), ("p", pa.string())]))
    table.append(pa.table({"id": [1], "p": ["a"]}))
    with table.update_spec() as update:
        update.add_field("p", IdentityTransform(), "p")
    table = catalog.load_table("db.evolve")
    table.append(pa.table({"id": [2], "p": ["b"]}))
    snap = open_source("iceberg", "db.evolve", options=options, catalog="c")
    assert len(snap.files) == 2 and snap.partition_columns == []  # the first file has no partition value
    assert all(f.partition_values == {} for f in snap.files)


def test_iceberg_delete_files_become_deleted_positions(iceberg, tmp_path):
    # pyiceberg 0.12 writes deletes copy-on-write only; a position delete file is committed by hand
    # (the companion logs the positions as deletes of its splits: tests/test_companion_iceberg.py)
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    catalog, options = iceberg
    table = catalog.create_table(
        "db.deletes", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "2"}
    )
    table.append(pa.table({"id": [1, 2, 3]}))
    data_path = next(iter(table.scan().plan_files())).file.file_path
    delete_path = str(tmp_path / "pos-deletes.parquet")
    pq.write_table(pa.table({"file_path": [data_path], "pos": pa.array([1], pa.int64())}), delete_path)
    delete = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"file://{delete_path}",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=1,
        file_size_in_bytes=os.path.getsize(delete_path),
    )
    delete.spec_id = 0
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            append.append_data_file(delete)
    table = catalog.load_table("db.deletes")
    assert table.scan().to_arrow().column("id").to_pylist() == [1, 3]  # a real positional delete

    (f,) = open_source("iceberg", "db.deletes", options=options, catalog="c").files
    assert f.key == data_path and f.deleted == (1,) and f.num_records == 3


# ------------------------------------------------------------------------------------------------
# Parquet directories
# ------------------------------------------------------------------------------------------------


def _write(path, table):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)


def _hive_dir(root):
    def rows(ids):
        return pa.table({"id": pa.array(ids, pa.int64()), "txt": pa.array([f"t{i}" for i in ids], pa.large_string())})

    _write(f"{root}/n=1/s=x%20y/d=2024-01-01/part-0.parquet", rows([1, 2]))
    _write(f"{root}/n=-2/s=__HIVE_DEFAULT_PARTITION__/d=2024-01-02/part-0.snappy.PARQUET", rows([3]))
    _write(f"{root}/n=3/s=a%2Fb/d=__HIVE_DEFAULT_PARTITION__/part-1.parquet", rows([4, 5, 6]))
    open(f"{root}/_SUCCESS", "w").close()
    _write(f"{root}/_tmp/n=9/s=z/d=2024-01-09/stray.parquet", rows([9]))  # hidden directory
    open(f"{root}/n=1/s=x%20y/d=2024-01-01/.part-0.parquet.crc", "w").close()
    open(f"{root}/n=1/s=x%20y/d=2024-01-01/notes.txt", "w").close()


def test_parquet_hive_directory(tmp_path):
    root = str(tmp_path / "pq")
    _hive_dir(root)
    snap = open_source("parquet", f"file://{root}")
    assert snap.format == "parquet" and snap.version is None and snap.root == root
    assert snap.partition_columns == ["n", "s", "d"]
    assert snap.schema == pa.schema(
        [("id", pa.int64()), ("txt", pa.string()), ("n", pa.int32()), ("s", pa.string()), ("d", pa.date32())]
    )
    files = by_key(snap)
    assert sorted(files) == [
        "n=-2/s=__HIVE_DEFAULT_PARTITION__/d=2024-01-02/part-0.snappy.PARQUET",
        "n=1/s=x%20y/d=2024-01-01/part-0.parquet",
        "n=3/s=a%2Fb/d=__HIVE_DEFAULT_PARTITION__/part-1.parquet",
    ]
    first = files["n=1/s=x%20y/d=2024-01-01/part-0.parquet"]
    assert first.partition_values == {"n": "1", "s": "x y", "d": "2024-01-01"}
    assert first.num_records == 2 and first.uri == os.path.join(
        root, "n=1", "s=x%20y", "d=2024-01-01", "part-0.parquet"
    )
    assert os.path.getsize(first.uri) == first.size
    assert files["n=3/s=a%2Fb/d=__HIVE_DEFAULT_PARTITION__/part-1.parquet"].partition_values == {
        "n": "3",
        "s": "a/b",
        "d": None,
    }
    assert files["n=-2/s=__HIVE_DEFAULT_PARTITION__/d=2024-01-02/part-0.snappy.PARQUET"].partition_values["s"] is None
    _assert_readable(snap, {})


def test_parquet_partition_type_inference():
    infer = cs_parquet._infer_partition_type
    assert infer(["1", "-7", None]) == pa.int32()
    assert infer(["1", str(1 << 40)]) == pa.int64()
    assert infer(["2024-01-01", None, "2023-12-31"]) == pa.date32()
    assert infer(["2024-02-30"]) == pa.string()  # not a date
    assert infer(["1", "2024-01-01"]) == pa.string()
    assert infer([None, None]) == pa.string()


def test_parquet_unpartitioned_reads_only_footers(tmp_path, monkeypatch):
    import indextables_spark.core.storage as storage_mod

    root = tmp_path / "flat"
    big = pa.table({"id": pa.array(range(200_000), pa.int64()), "txt": pa.array([str(i) * 3 for i in range(200_000)])})
    _write(str(root / "a.parquet"), big)
    _write(str(root / "sub" / "b.parquet"), big.slice(0, 10))
    reads: list[tuple[str, int]] = []
    real_open = storage_mod.open_storage

    def spying_open(uri, options=None):
        storage = real_open(uri, options)
        inner_range = storage.read_range

        def read_range(key, start, end):
            reads.append((key, end - start))
            return inner_range(key, start, end)

        storage.read_range = read_range
        storage.read = lambda key: pytest.fail(f"whole read of {key}")
        return storage

    monkeypatch.setattr(storage_mod, "open_storage", spying_open)
    snap = open_source("parquet", str(root))
    assert snap.partition_columns == [] and [f.key for f in snap.files] == ["a.parquet", "sub/b.parquet"]
    assert [f.num_records for f in snap.files] == [200_000, 10]
    size_a = os.path.getsize(root / "a.parquet")
    assert sum(n for k, n in reads if k == "a.parquet") <= 64 << 10 < size_a


def test_parquet_schema_mismatch_names_both_files(tmp_path):
    root = tmp_path / "mix"
    _write(str(root / "a.parquet"), pa.table({"id": pa.array([1], pa.int64()), "txt": ["a"]}))
    _write(str(root / "b.parquet"), pa.table({"id": pa.array([1], pa.int32()), "txt": ["a"]}))
    with pytest.raises(SchemaMismatchError) as e:
        open_source("parquet", str(root))
    assert "a.parquet" in str(e.value) and "b.parquet" in str(e.value) and "'id'" in str(e.value)

    # large_string in one file, string in the other: the same column as Spark reads it
    ok = tmp_path / "ok"
    _write(str(ok / "a.parquet"), pa.table({"txt": pa.array(["a"], pa.large_string())}))
    _write(str(ok / "b.parquet"), pa.table({"txt": pa.array(["b"], pa.string())}))
    assert open_source("parquet", str(ok)).schema == pa.schema([("txt", pa.string())])


def test_parquet_partition_keys_must_agree(tmp_path):
    root = tmp_path / "keys"
    t = pa.table({"id": [1]})
    _write(str(root / "a=1" / "b=2" / "f.parquet"), t)
    _write(str(root / "b=2" / "a=1" / "g.parquet"), t)
    with pytest.raises(SchemaMismatchError) as e:
        open_source("parquet", str(root))
    assert "a=1/b=2/f.parquet" in str(e.value) and "b=2/a=1/g.parquet" in str(e.value)

    with pytest.raises(TableNotFoundError, match="no Parquet data files"):
        open_source("parquet", str(tmp_path / "missing"))


# ------------------------------------------------------------------------------------------------
# credentials
# ------------------------------------------------------------------------------------------------


def test_credentials_for_s3():
    opts = {
        "spark.indextables.aws.accessKey": "AK",
        "spark.indextables.aws.secretKey": "SK",
        "spark.indextables.aws.sessionToken": "TOK",
        "spark.indextables.s3.endpoint": "http://127.0.0.1:9000",
        "spark.indextables.s3.pathStyleAccess": "true",
    }
    assert storage_options_for_deltalake("s3://b/t", opts) == {
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
        "AWS_SESSION_TOKEN": "TOK",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }
    assert fileio_properties_for_iceberg("s3://b/t", opts) == {
        "s3.access-key-id": "AK",
        "s3.secret-access-key": "SK",
        "s3.session-token": "TOK",
        "s3.region": "us-east-1",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.force-virtual-addressing": "false",
    }
    assert storage_options_for_deltalake("s3://b/t", {"aws.region": "eu-west-1"}) == {"AWS_REGION": "eu-west-1"}
    assert storage_options_for_deltalake("/local/t", opts) == {}
    assert fileio_properties_for_iceberg(None, {}) == {}


def test_credentials_for_azure():
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
    )
    opts = {"spark.indextables.azure.connectionString": conn}
    assert storage_options_for_deltalake("az://c/t", opts) == {
        "azure_storage_account_name": "devstoreaccount1",
        "azure_storage_account_key": AZURITE_KEY,
        "azure_storage_endpoint": "http://127.0.0.1:10000/devstoreaccount1",
        "allow_http": "true",
    }
    assert fileio_properties_for_iceberg("az://c/t", opts) == {
        "adls.account-name": "devstoreaccount1",
        "adls.account-key": AZURITE_KEY,
        "adls.connection-string": conn,
        "adls.blob-storage-authority": "127.0.0.1:10000",
        "adls.dfs-storage-authority": "127.0.0.1:10000",
        "adls.blob-storage-scheme": "http",
        "adls.dfs-storage-scheme": "http",
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",  # adlfs (the companion extra)
    }
    # account from the URI, SAS token, default endpoint: nothing else
    sas = {"azure.sasToken": "?sv=1&sig=abc"}
    assert storage_options_for_deltalake("abfss://c@acct.dfs.core.windows.net/t", sas) == {
        "azure_storage_account_name": "acct",
        "azure_storage_sas_key": "sv=1&sig=abc",
    }
    assert fileio_properties_for_iceberg("abfss://c@acct.dfs.core.windows.net/t", sas) == {
        "adls.account-name": "acct",
        "adls.sas-token": "sv=1&sig=abc",
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    }
    # delta-rs knows no wasbs://; pyiceberg no az://
    assert (
        cs_delta.deltalake_uri("wasbs://c@acct.blob.core.windows.net/x/t", Options.of({}))
        == "abfss://c@acct.dfs.core.windows.net/x/t"
    )
    assert (
        cs_iceberg.iceberg_uri("az://c/x/m.metadata.json", Options.of({"azure.accountName": "acct"}))
        == "abfss://c@acct.dfs.core.windows.net/x/m.metadata.json"
    )


# ------------------------------------------------------------------------------------------------
# cloud (emulators)
# ------------------------------------------------------------------------------------------------


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _assert_readable(snap: SourceSnapshot, options: dict) -> None:
    """Each uri leads our storage layer to the file: opened on its directory, read by its name."""
    from indextables_spark.core.storage import open_storage

    for f in snap.files:
        parent, name = posixpath.split(f.uri)
        info = open_storage(parent, options).stat(name)
        assert info is not None and info.size == f.size, f.uri


def _cloud_delta_and_parquet(root: str, options: dict) -> None:
    from indextables_spark.core.storage import open_storage

    delta_uri = f"{root}/delta"
    so = storage_options_for_deltalake(delta_uri, options)
    deltalake.write_deltalake(delta_uri, _rows([1, 2], p=["x y", "b"]), partition_by=["p"], storage_options=so)
    deltalake.write_deltalake(delta_uri, _rows([3], p=["b"]), partition_by=["p"], mode="append", storage_options=so)
    snap = open_source("delta", delta_uri, options=options)
    assert snap.version == 1 and snap.root == delta_uri and snap.partition_columns == ["p"]
    assert sorted(f.partition_values["p"] for f in snap.files) == ["b", "b", "x y"]
    storage = open_storage(delta_uri, options)
    for f in snap.files:
        assert storage.stat(f.key).size == f.size and f.uri.startswith(f"{delta_uri}/p=")
    assert any(f.key.startswith("p=x%20y/") for f in snap.files)  # the directory Delta's writer names
    _assert_readable(snap, options)
    assert len(open_source("delta", delta_uri, options=options, version=0).files) == 2

    pq_uri = f"{root}/pq"
    storage = open_storage(pq_uri, options)
    storage.put("k=1/a.parquet", _parquet_bytes(pa.table({"id": [1, 2]})))
    storage.put("k=x%20y/b.parquet", _parquet_bytes(pa.table({"id": [3]})))
    storage.put("_SUCCESS", b"")
    snap = open_source("parquet", pq_uri, options=options)
    assert [(f.key, f.partition_values, f.num_records) for f in snap.files] == [
        ("k=1/a.parquet", {"k": "1"}, 2),
        ("k=x%20y/b.parquet", {"k": "x y"}, 1),
    ]
    assert snap.files[0].uri == f"{pq_uri}/k=1/a.parquet"
    assert snap.schema == pa.schema([("id", pa.int64()), ("k", pa.string())])
    _assert_readable(snap, options)


def _cloud_iceberg(root: str, options: dict, tmp_path, name: str) -> dict:
    """A 3-row Iceberg table `db.t` in a SQL catalog `name` warehoused at `root`/wh; the options that
    name the catalog (its properties as spark.indextables.iceberg.catalog.<name>.*)."""
    from pyiceberg.catalog.sql import SqlCatalog

    props = fileio_properties_for_iceberg(root, options)
    catalog = SqlCatalog(name, uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"{root}/wh", **props)
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    return {
        **options,
        f"iceberg.catalog.{name}.uri": f"sqlite:///{tmp_path}/cat.db",
        f"iceberg.catalog.{name}.warehouse": f"{root}/wh",
    }


@pytest.mark.cloud
def test_s3_delta_parquet_and_iceberg(s3_bucket, s3_options, tmp_path):
    root = f"s3://{s3_bucket}/companion-{uuid.uuid4().hex[:8]}"
    _cloud_delta_and_parquet(root, s3_options)
    options = _cloud_iceberg(root, s3_options, tmp_path, "s3c")
    for snap in (
        open_source("iceberg", "db.t", options=options, catalog="s3c"),
        open_source("iceberg", f"{root}/wh/db/t", options=s3_options),
    ):
        assert [f.num_records for f in snap.files] == [3]
        assert snap.files[0].uri == snap.files[0].key and snap.files[0].uri.startswith(f"{root}/wh/db/t/data/")
        _assert_readable(snap, s3_options)


@pytest.mark.cloud
def test_azure_delta_and_parquet(azure_container, azure_options):
    _cloud_delta_and_parquet(f"az://{azure_container}/companion-{uuid.uuid4().hex[:8]}", azure_options)


@pytest.mark.cloud
def test_azure_iceberg(azure_container, azure_options, tmp_path):
    """Iceberg on Azure goes through pyiceberg's fsspec FileIO (adlfs), chosen from our Azure options."""
    root = f"abfs://{azure_container}/companion-{uuid.uuid4().hex[:8]}"
    assert fileio_properties_for_iceberg(root, azure_options)["py-io-impl"] == "pyiceberg.io.fsspec.FsspecFileIO"
    options = _cloud_iceberg(root, azure_options, tmp_path, "azc")
    snap = open_source("iceberg", "db.t", options=options, catalog="azc")
    assert [f.num_records for f in snap.files] == [3]
    _assert_readable(snap, azure_options)


# ------------------------------------------------------------------------------------------------
# credentials from a provider, a profile, an assumed role (no static keys)
# ------------------------------------------------------------------------------------------------


def _without_static_keys(options: dict) -> dict:
    return {k: v for k, v in options.items() if not k.endswith(("aws.accessKey", "aws.secretKey", "aws.sessionToken"))}


def _sts_caller(s3_endpoint: str, access_key: str) -> str:
    """What moto's STS says about an access key it issued (moto identifies callers by key id)."""
    import boto3

    sts = boto3.client(
        "sts", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id=access_key,
        aws_secret_access_key="not-checked-by-moto",
    )  # fmt: skip
    return sts.get_caller_identity()["Arn"]


@pytest.fixture
def no_ambient_aws_credentials(tmp_path, monkeypatch):
    """No AWS credentials in the environment or config files: without ours, deltalake and pyiceberg
    would find none (object_store then asks the instance metadata service, and fails)."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    config, credentials = tmp_path / "aws-config", tmp_path / "aws-credentials"
    config.write_text("")
    credentials.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    return config, credentials


@pytest.mark.cloud
def test_s3_sources_with_provider_profile_and_assumed_role(
    s3_bucket, s3_options, s3_endpoint, tmp_path, no_ambient_aws_credentials, monkeypatch
):
    """Delta and Iceberg sources on S3 opened with a credentials provider, a profile or an assumed
    role only: deltalake and pyiceberg get the keys those give now, and a companion index is built
    over the Delta table with the provider alone."""
    import credential_providers as cp

    import indextables_spark as it
    from cmd_helpers import rows
    from indextables_spark.core.split.cache.companion_rows import forget_source_files

    config, credentials = no_ambient_aws_credentials
    tag = uuid.uuid4().hex[:8]
    root = f"s3://{s3_bucket}/companion-creds-{tag}"
    data = rows(120)
    deltalake.write_deltalake(
        f"{root}/delta", data, partition_by=["day"], storage_options=storage_options_for_deltalake(root, s3_options)
    )
    iceberg_options = _cloud_iceberg(root, s3_options, tmp_path, "credc")
    # a profile name of this test only: S3 clients are cached per process by profile name
    profile = f"companion-{tag}"
    credentials.write_text(f"[{profile}]\naws_access_key_id = AKIAITPROFILE{tag}\naws_secret_access_key = s{tag}\n")
    role = f"arn:aws:iam::123456789012:role/companion-{tag}"
    provider = {
        "spark.indextables.aws.credentialsProvider": "credential_providers:short_lived",
        "spark.indextables.test.credentials.lifetimeSeconds": "900",
    }
    ways = {
        "provider": provider,
        "profile": {"spark.indextables.aws.profile": profile},
        "provider + role": {**provider, "spark.indextables.aws.roleArn": role},
    }
    for way, extra in ways.items():
        options = {**_without_static_keys(s3_options), **extra}
        so = storage_options_for_deltalake(f"{root}/delta", options)
        props = fileio_properties_for_iceberg(f"{root}/wh", options)
        # (a provider is asked per table path: the two paths may get different keys)
        for key, token in (
            (so["AWS_ACCESS_KEY_ID"], so.get("AWS_SESSION_TOKEN")),
            (props["s3.access-key-id"], props.get("s3.session-token")),
        ):
            if way == "provider":
                assert key.startswith("AKIAITPROVIDER") and token.startswith("providerToken"), way
            elif way == "profile":
                assert key == f"AKIAITPROFILE{tag}" and token is None, way
            else:  # moto's STS issued the key to the role
                arn = f"arn:aws:sts::123456789012:assumed-role/companion-{tag}/indextables-spark"
                assert _sts_caller(s3_endpoint, key) == arn and token, way
        snap = open_source("delta", f"{root}/delta", options=options)
        assert sum(f.num_records for f in snap.files) == 120, way
        by_catalog = {**options, **{k: v for k, v in iceberg_options.items() if k.startswith("iceberg.")}}
        for iceberg in (
            open_source("iceberg", "db.t", options=by_catalog, catalog="credc"),
            open_source("iceberg", f"{root}/wh/db/t", options=options),
        ):
            assert [f.num_records for f in iceberg.files] == [3], way

    # the indexing processes import the provider too (as executors would): tests/ on their path
    path = [os.path.dirname(cp.__file__), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
    call_log = tmp_path / "provider-calls.txt"
    options = {
        **_without_static_keys(s3_options),
        **provider,
        "spark.indextables.test.credentials.callLog": str(call_log),
    }
    res = it.build_companion(
        f"{root}/delta", f"{root}/index", format="delta", indexing={"body": "text"}, options=options
    )
    assert res["rowsIndexed"] == 120
    pids = {int(line.split()[0]) for line in call_log.read_text().splitlines()}
    assert os.getpid() in pids and pids - {os.getpid()}, "the driver and the indexing processes asked the provider"
    forget_source_files()
    got = it.IndexTable(f"{root}/index", options).to_arrow(columns=["id"], where="views > 500")
    assert sorted(got.column("id").to_pylist()) == [
        i for i, v in enumerate(data.column("views").to_pylist()) if v > 500
    ]


def test_azure_token_credentials_reach_deltalake_and_pyiceberg():
    """A provider's token (azure.credentialsProvider) becomes deltalake's `azure_storage_token` and
    pyiceberg's `adls.token`, in place of the identity's ids (the provider runs here; no network)."""
    import credential_providers as cp

    options = {
        "spark.indextables.azure.accountName": "acct",
        "spark.indextables.azure.credentialsProvider": "credential_providers:azure_short_lived",
        "spark.indextables.test.credentials.lifetimeSeconds": "600",
        "spark.indextables.azure.clientId": "ignored-with-a-provider",
    }
    before = len(cp.CALLS)
    so = storage_options_for_deltalake("abfss://c@acct.dfs.core.windows.net/t", options)
    assert set(so) == {"azure_storage_account_name", "azure_storage_token"}
    token = so["azure_storage_token"]
    assert token.count(".") == 2 and json.loads(_jwt_claims(token))["aud"] == "https://storage.azure.com"
    props = fileio_properties_for_iceberg("abfss://c@acct.dfs.core.windows.net/t", options)
    assert props["adls.token"] == token, "the provider's token is shared until its refresh time"
    assert "adls.client-id" not in props and props["adls.account-name"] == "acct"
    assert len(cp.CALLS) - before == 1
    # keys win over a provider, as in our storage layer: no token then
    keyed = {**options, "spark.indextables.azure.accountKey": AZURITE_KEY}
    assert "azure_storage_token" not in storage_options_for_deltalake("az://c/t", keyed)


def _jwt_claims(token: str) -> str:
    import base64

    body = token.split(".")[1]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
