"""SplitWriter → storage → cache → SplitReader: every type, partitions, rolling, stats, errors."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import time

import pyarrow as pa

from indextables_spark.core.split.format.row_layout import ROW_BATCH_BYTES
import pytest

from indextables_spark.errors import IndexTablesError, SchemaMismatchError
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.config.options import Options
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.format.bundle import read_footer
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.split.format.doc_mapping import doc_mapping_json
from indextables_spark.core.storage.local import LocalStorage

UTC = dt.timezone.utc
D = decimal.Decimal


def field(name, t, nullable=True):
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}


SCHEMA = {
    "type": "struct",
    "fields": [
        field("id", "long", False),
        field("b", "byte"),
        field("sh", "short"),
        field("i", "integer"),
        field("f", "float"),
        field("d", "double"),
        field("dec", "decimal(38,18)"),
        field("dec2", "decimal(10,2)"),
        field("flag", "boolean"),
        field("s", "string"),
        field("t", "string"),
        field("bin", "binary"),
        field("day", "date"),
        field("ts", "timestamp"),
        field("ntz", "timestamp_ntz"),
        field("tags", {"type": "array", "elementType": "string", "containsNull": True}),
        field("attrs", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
        field(
            "nested",
            {
                "type": "struct",
                "fields": [
                    field("x", "long"),
                    field("y", "string"),
                    field(
                        "zs",
                        {
                            "type": "array",
                            "elementType": {"type": "struct", "fields": [field("q", "double")]},
                            "containsNull": True,
                        },
                    ),
                ],
            },
        ),
    ],
}

ROWS = [
    dict(
        id=1,
        b=1,
        sh=300,
        i=70000,
        f=1.5,
        d=2.25,
        dec=D("12345678901234567890.123456789012345678"),
        dec2=D("12.34"),
        flag=True,
        s="hello world",
        t="The quick brown fox",
        bin=b"\x00\x01\xff",
        day=dt.date(2024, 1, 31),
        ts=dt.datetime(2024, 1, 31, 12, 30, 45, 123456, tzinfo=UTC),
        ntz=dt.datetime(2024, 1, 31, 12, 30, 45, 1),
        tags=["a", "b"],
        attrs=[("k", 1)],
        nested={"x": 1, "y": "one", "zs": [{"q": 1.5}, None]},
    ),
    dict(
        id=2,
        b=-128,
        sh=-32768,
        i=-2147483648,
        f=float("nan"),
        d=float("-inf"),
        dec=D("-0.000000000000000001"),
        dec2=D("-99999999.99"),
        flag=False,
        s='héllo wörld 🚀 emoji ✨ "quoted" back\\slash\ttab\nnl\x01',
        t="",
        bin=b"",
        day=dt.date(1969, 12, 31),
        ts=dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        ntz=dt.datetime(1, 1, 1),
        tags=[],
        attrs=[],
        nested={"x": None, "y": None, "zs": []},
    ),
    {"id": 3},  # every other column null
    dict(
        id=4,
        b=127,
        sh=32767,
        i=2147483647,
        f=float("inf"),
        d=1e308,
        dec=D("0E-18"),
        dec2=D("0.01"),
        flag=True,
        s="",
        t="x",
        bin=b"bytes",
        day=dt.date(9999, 12, 31),
        ts=dt.datetime(2262, 4, 11, 0, 0, 0, 1, tzinfo=UTC),
        ntz=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        tags=["x", None],
        attrs=[("a", None)],
        nested={"x": 9223372036854775807, "y": "max", "zs": None},
    ),
    dict(id=5, f=-0.0, d=float("nan"), dec2=D("-0.50"), s="a" * 70000, t="long " * 10, tags=[None]),
]


def rows_table(rows=ROWS) -> pa.Table:
    sch = arrow_schema(SCHEMA)
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in sch} for r in rows], schema=sch)


def norm(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(norm(x) for x in v)
    return v


@pytest.fixture
def storage(tmp_path):
    return LocalStorage(str(tmp_path / "table"))


@pytest.fixture
def cache(tmp_path):
    return get_cache({"cache.disk.path": str(tmp_path / "cache")})


def read_all(cache, storage, adds, **kw) -> list[dict]:
    out = []
    for a in adds:
        r = SplitReader(cache.local_dir(storage, a))
        for b in r.read(**kw):
            out.extend(b.to_pylist())
    return out


def test_every_type_round_trips(storage, cache):
    opts = Options.of({"indexing.typemap.t": "text"})
    w = SplitWriter(storage, SCHEMA, [], opts)
    table = rows_table()
    w.write_batch(table.to_batches()[0].slice(0, 2))
    w.write_batch(table.slice(2))  # a Table is accepted too
    adds = w.finish()
    assert len(adds) == 1
    a = adds[0]
    assert a.path.startswith("splits/split-") and a.path.endswith(".split")
    assert a.num_records == 5 and a.partition_values == {} and a.data_change
    assert a.size == os.path.getsize(storage.local_path(a.path)) == a.footer_end_offset
    assert 0 < a.footer_start_offset < a.size
    assert a.doc_mapping_ref == doc_mapping_hash(doc_mapping_json(SCHEMA, [], opts)) == w.doc_mapping_ref
    assert abs(a.modification_time - time.time() * 1000) < 60_000
    assert a.uncompressed_size_bytes > 70000
    r = SplitReader(cache.local_dir(storage, a))
    assert r.schema == arrow_schema(SCHEMA)  # exact types and nullability
    got = [b for b in r.read(batch_size=2)]
    assert [b.num_rows for b in got] == [2, 2, 1]
    assert all(b.schema == r.schema for b in got)
    assert norm(pa.Table.from_batches(got).to_pylist()) == norm(table.to_pylist())
    # -0.0 keeps its sign in the row store
    assert math.copysign(1, pa.Table.from_batches(got).column("f")[4].as_py()) == -1
    # projection
    proj = list(r.read(columns=["s", "id"]))
    assert proj[0].schema.names == ["s", "id"] and proj[0].column("id").to_pylist() == [1, 2, 3, 4, 5]
    with pytest.raises(SchemaMismatchError, match="nope"):
        r.read(columns=["nope"])


def test_values_beyond_tantivy_term_limit(storage, cache):
    """A 70,000-byte raw string: Tantivy drops such terms, so it is indexed cut and flagged."""
    from indextables_spark.expr.model import EqualTo, In, StringContains, StringEndsWith, StringStartsWith

    w = SplitWriter(storage, SCHEMA, [], Options())
    w.write_batch(rows_table())
    (a,) = w.finish()
    assert read_footer(storage.local_path(a.path), a.path).truncated_terms == ["s"]
    r = SplitReader(cache.local_dir(storage, a))
    assert {s.name: s.terms_truncated for s in r.specs}["s"] is True
    long = "a" * 70000
    cases = [
        ([EqualTo("s", long)], [5]),
        ([In("s", (long, "x"))], [5]),
        ([StringEndsWith("s", "aaa")], [5]),
        ([StringStartsWith("s", "aaa")], [5]),
        ([StringContains("s", "aa")], [5]),
        ([EqualTo("s", "a" * 16000)], []),  # the indexed (cut) term is not the value
        ([EqualTo("s", "")], [4]),
    ]
    for filters, want in cases:
        got = [v for b in r.read(filters, columns=["id"]) for v in b.column("id").to_pylist()]
        assert got == want, filters
        assert r.count(filters) == len(want), filters


def test_stats(storage):
    w = SplitWriter(storage, SCHEMA, [], Options.of({"stats.truncation.maxLength": "4"}))
    w.write_batch(rows_table())
    (a,) = w.finish()
    mins, maxs = a.min_values, a.max_values
    assert (mins["id"], maxs["id"]) == ("1", "5")
    assert (mins["b"], maxs["b"]) == ("-128", "127")
    assert (mins["f"], maxs["f"]) == ("-0.0", "NaN")  # NaN is the largest double
    assert (mins["d"], maxs["d"]) == ("-Infinity", "NaN")
    assert (mins["dec2"], maxs["dec2"]) == ("-99999999.99", "12.34")
    assert mins["dec"] == "-0.000000000000000001"
    assert (mins["flag"], maxs["flag"]) == ("false", "true")
    assert (mins["day"], maxs["day"]) == ("1969-12-31", "9999-12-31")
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert mins["ts"] == "-1"  # microseconds since the epoch
    assert maxs["ts"] == str((dt.datetime(2262, 4, 11, 0, 0, 0, 1, tzinfo=UTC) - epoch) // dt.timedelta(microseconds=1))
    # strings cut to 4 characters; a cut max is incremented so it stays an upper bound
    assert mins["s"] == "" and maxs["s"] == "hélm"  # "héllo…" → "héll" → "hélm"
    assert "bin" not in mins and "tags" not in mins
    stats = json.loads(a.stats)
    assert stats["numRecords"] == 5 and stats["nullCount"]["b"] == 2 and stats["nullCount"]["id"] == 0


def test_stats_column_limit(storage):
    w = SplitWriter(storage, SCHEMA, [], Options.of({"dataSkippingNumIndexedCols": "2"}))
    w.write_batch(rows_table())
    (a,) = w.finish()
    assert set(a.min_values) == {"id", "b"}


def test_partitioned_writes(storage, cache):
    sch = {
        "type": "struct",
        "fields": [field("id", "long"), field("body", "string"), field("region", "string"), field("day", "date")],
    }
    regions = ["eu", "us", None, "a/b"]
    rows = [
        {"id": i, "body": f"doc {i}", "region": regions[i % 4], "day": dt.date(2024, 1, 1 + (i // 4) % 2)}
        for i in range(40)
    ]
    w = SplitWriter(storage, sch, ["region", "day"], Options())
    t = pa.Table.from_pylist(rows, schema=arrow_schema(sch))
    for b in t.to_batches(max_chunksize=7):
        w.write_batch(b)
    adds = w.finish()
    assert len(adds) == 8
    by_key = {(a.partition_values["region"], a.partition_values["day"]): a for a in adds}
    assert set(by_key) == {(r, d) for r in regions for d in ("2024-01-01", "2024-01-02")}
    a = by_key[(None, "2024-01-02")]
    assert a.path.startswith("region=__HIVE_DEFAULT_PARTITION__/day=2024-01-02/splits/split-")
    assert by_key[("a/b", "2024-01-01")].path.startswith("region=a%2Fb/day=2024-01-01/splits/")
    for (region, day), a in by_key.items():
        got = read_all(cache, storage, [a])
        want = [
            {"id": r["id"], "body": r["body"]} for r in rows if r["region"] == region and r["day"].isoformat() == day
        ]
        assert got == want  # partition columns are not stored
        assert a.num_records == len(want)


def test_split_rolling_by_target_size(storage, cache):
    sch = {"type": "struct", "fields": [field("id", "long"), field("body", "string")]}
    t = pa.Table.from_pylist([{"id": i, "body": "x" * 100} for i in range(5000)], schema=arrow_schema(sch))
    w = SplitWriter(storage, sch, [], Options(), target_split_bytes=100_000)
    for b in t.to_batches(max_chunksize=1000):
        w.write_batch(b)
    adds = w.finish()
    assert len(adds) >= 5
    assert all(a.uncompressed_size_bytes <= 100_000 + 200 for a in adds)
    assert sum(a.num_records for a in adds) == 5000
    assert sorted(r["id"] for r in read_all(cache, storage, adds)) == list(range(5000))
    assert len({a.path for a in adds}) == len(adds)
    # the option works as well as the argument
    w = SplitWriter(storage, sch, [], Options.of({"indexing.split.targetSize": "100k"}))
    w.write_batch(t)
    assert len(w.finish()) >= 5


def test_big_split_cuts_record_batches_by_size(storage, cache):
    """Record batches of about ROW_BATCH_BYTES whatever the input's chunks (8-byte rows: 32,768),
    with a layout of every batch's columns."""
    sch = {"type": "struct", "fields": [field("id", "long")]}
    t = pa.table({"id": pa.array(range(150_000), pa.int64())})
    w = SplitWriter(storage, sch, [], Options())
    for b in t.to_batches(max_chunksize=10_000):
        w.write_batch(b)
    (a,) = w.finish()
    footer = read_footer(storage.local_path(a.path), a.path)
    per = ROW_BATCH_BYTES // 8
    assert footer.batch_rows == [per] * (150_000 // per) + [150_000 % per]
    assert "rows.layout" in [f.name for f in footer.files]
    r = SplitReader(cache.local_dir(storage, a))
    assert sum(b.num_rows for b in r.read(batch_size=50_000)) == 150_000


def test_empty_input_and_errors(storage):
    sch = {"type": "struct", "fields": [field("id", "long", False), field("s", "string")]}
    w = SplitWriter(storage, sch, [], Options())
    w.write_batch(pa.record_batch({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    assert w.finish() == []
    assert storage.list("") == []
    w = SplitWriter(storage, sch, [], Options())
    with pytest.raises(SchemaMismatchError, match="'s'"):
        w.write_batch(pa.record_batch({"id": pa.array([1], pa.int64())}))
    with pytest.raises(SchemaMismatchError, match="'id' is not nullable"):
        w.write_batch(pa.record_batch({"id": pa.array([None], pa.int64()), "s": ["a"]}))
    with pytest.raises(SchemaMismatchError, match="column 's'"):
        w.write_batch(pa.record_batch({"id": pa.array([1], pa.int64()), "s": pa.array([[1]])}))
    # large_string and other compatible Arrow types are converted
    w.write_batch(pa.record_batch({"s": pa.array(["x"], pa.large_string()), "id": pa.array([1], pa.int32())}))
    (a,) = w.finish()
    assert a.num_records == 1
    with pytest.raises(IndexTablesError, match="finish"):
        w.write_batch(pa.record_batch({"id": pa.array([1], pa.int64()), "s": ["a"]}))


def test_abort_leaves_no_temp_files(storage, tmp_path):
    sch = {"type": "struct", "fields": [field("id", "long")]}
    tmp_root = tmp_path / "tmp"
    tmp_root.mkdir()
    w = SplitWriter(storage, sch, [], Options.of({"indexWriter.tempDirectoryPath": str(tmp_root)}))
    w.write_batch(pa.record_batch({"id": pa.array([1, 2], pa.int64())}))
    assert os.listdir(tmp_root)
    w.abort()
    assert os.listdir(tmp_root) == []


def test_indexing_speed_small_docs(storage):
    """100k small documents index in well under a few seconds (measured ~0.8 s on 2 cores)."""
    sch = {
        "type": "struct",
        "fields": [
            field("id", "long"),
            field("name", "string"),
            field("score", "double"),
            field("flag", "boolean"),
            field("msg", "string"),
        ],
    }
    n = 100_000
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "name": pa.array([f"user{i % 1000}" for i in range(n)]),
            "score": pa.array([i / 7 for i in range(n)]),
            "flag": pa.array([i % 2 == 0 for i in range(n)]),
            "msg": pa.array([f"w{i % 97} w{i % 89} w{i % 83} w{i % 79}" for i in range(n)]),
        }
    )
    w = SplitWriter(storage, sch, [], Options.of({"indexing.typemap.msg": "text"}))
    start = time.perf_counter()
    for b in t.to_batches(max_chunksize=10_000):
        w.write_batch(b)
    (a,) = w.finish()
    elapsed = time.perf_counter() - start
    assert a.num_records == n
    assert elapsed < 5.0, f"indexing 100k small docs took {elapsed:.2f}s"
