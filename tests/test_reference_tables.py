"""The 17 tables IndexTables4Spark v0.5.4 wrote (tests/data/reference_v0.5.4, see ORIGIN.md), read
in place: every row, a text query, a filter, counts and an aggregation, Spark-free and through
Spark; corrupted copies of their splits fail naming the file.

The expected rows come from the split files themselves, decoded here independently of the
package (Quickwit bundle offsets parsed by hand, documents read with tantivy-py from the
extracted index), with partition values from the log. The package opens each reference split in
place, its SSTable term dictionaries transcoded to FSTs as reads need them (core/split/reference/
native.py), its rows read from the document store (docstore.py): nothing is re-indexed.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import tantivy

import indextables_spark as it
from indextables_spark.errors import IndexTablesError, SplitFormatError
from indextables_spark.expr.model import EqualTo
from indextables_spark.core.split.read.skipping import skip_split
from indextables_spark.core.split.reference.reference import written_by_reference
from indextables_spark.core.split.format.column_specs import column_specs

ROOT = Path(__file__).parent / "data" / "reference_v0.5.4"
TABLES = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name[:2].isdigit())


def test_all_seventeen_tables_are_here() -> None:
    assert len(TABLES) == 17


# ---- the expected side: decoded by hand -----------------------------------------------------------


def _bundle_docs(split: Path, work: Path) -> list[dict[str, Any]]:
    """Documents of a Quickwit split bundle, in document order, as {field: first value}."""
    data = split.read_bytes()
    n = len(data)
    hotcache_len = struct.unpack("<I", data[-4:])[0]
    h = n - 4 - hotcache_len
    m = struct.unpack("<I", data[h - 4 : h])[0]
    f = h - 4 - m
    assert struct.unpack("<II", data[f : f + 8]) == (403881646, 1)
    files = json.loads(data[f + 8 : h - 4])["files"]
    work.mkdir(parents=True)
    for name, span in files.items():
        (work / name).write_bytes(data[span["start"] : span["end"]])
    index = tantivy.Index.open(str(work))
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(searcher.num_docs, 1)).hits
    addrs = sorted((a for _s, a in hits), key=lambda a: (a.segment_ord, a.doc))
    return [{k: v[0] for k, v in searcher.doc(a).to_dict().items()} for a in addrs]


def _expected_rows(name: str, tmp: Path) -> list[dict[str, Any]]:
    table = it.IndexTable(str(ROOT / name))
    snap = table.snapshot()
    fields = json.loads(snap.metadata_action.schema_string)["fields"]
    rows = []
    for i, add in enumerate(snap.files):
        for doc in _bundle_docs(ROOT / name / add.path, tmp / f"split{i}"):
            row = {}
            for fld in fields:
                col = fld["name"]
                v = add.partition_values.get(col) if col in snap.partition_columns else doc.get(col)
                row[col] = v
            rows.append(row)
    return sorted(rows, key=lambda r: r["id"])


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def _text_column(name: str) -> str:
    snap = it.IndexTable(str(ROOT / name)).snapshot()
    parts = set(snap.partition_columns)
    return next(f["name"] for f in snap.schema_json["fields"] if f["type"] == "string" and f["name"] not in parts)


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    base = tmp_path_factory.mktemp("reference-expected")
    return {name: _expected_rows(name, base / name) for name in TABLES}


# ---- Spark-free -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_spark_free_reads(name: str, expected: dict[str, list[dict[str, Any]]]) -> None:
    rows = expected[name]
    assert rows, "every fixture table has rows"
    t = it.IndexTable(str(ROOT / name))
    snap = t.snapshot()
    assert _sorted(t.to_arrow()) == rows
    assert t.count() == len(rows) == snap.num_records

    # a text query on a raw string field: the whole value is the one term
    col = _text_column(name)
    value = rows[len(rows) // 2][col]
    hits = [r for r in rows if r[col] == value]
    assert _sorted(t.search(f'{col}:"{value}"', columns=list(rows[0]))) == hits
    assert t.count(f'{col}:"{value}"') == len(hits)

    # a filter, exact
    mid = sorted(r["id"] for r in rows)[len(rows) // 2]
    assert _sorted(t.to_arrow(where=f"id >= {mid}")) == [r for r in rows if r["id"] >= mid]
    assert _sorted(t.search(f'{col}:"{value}"', where=f"id >= {mid}", columns=list(rows[0]))) == [
        r for r in hits if r["id"] >= mid
    ]

    # an aggregation
    agg = t.aggregate({"s": {"stats": {"field": "id"}}})
    ids = [r["id"] for r in rows]
    assert agg["s"]["count"] == len(ids)
    assert agg["s"]["min"] == min(ids) and agg["s"]["max"] == max(ids) and agg["s"]["sum"] == sum(ids)


def test_partitioned_reads_and_terms(expected: dict[str, list[dict[str, Any]]]) -> None:
    t = it.IndexTable(str(ROOT / "04_partitioned"))
    rows = expected["04_partitioned"]
    assert _sorted(t.to_arrow(where="date = '2024-01-02'")) == [r for r in rows if r["date"] == "2024-01-02"]
    assert t.count(partition_filter="date = '2024-01-01'") == 2
    buckets = t.aggregate({"d": {"terms": {"field": "date"}}})["d"]["buckets"]
    assert {b["key"]: b["doc_count"] for b in buckets} == {"2024-01-01": 2, "2024-01-02": 2, "2024-01-03": 1}
    # top n by score over a partitioned reference table
    top = t.search("text:doc3 OR text:doc4", limit=1)
    assert top.num_rows == 1 and top.column("text")[0].as_py() in ("doc3", "doc4")


def test_time_travel_reads_older_states(expected: dict[str, list[dict[str, Any]]]) -> None:
    """03_with_removes: three appends then an overwrite; version 3 still reads the appended rows."""
    t = it.IndexTable(str(ROOT / "03_with_removes"))
    assert t.snapshot().version == 4
    assert _sorted(t.to_arrow()) == expected["03_with_removes"]
    old = t.to_arrow(version=3)
    assert old.num_rows == t.snapshot(version=3).num_records > 1
    assert 999 not in old.column("id").to_pylist()


def test_reference_string_max_is_a_prefix_bound() -> None:
    """The reference cuts long string stats without raising the max (StatisticsTruncation.scala):
    a value above the cut max must not be skipped."""
    snap = it.IndexTable(str(ROOT / "01_single_write")).snapshot()
    add = next(f for f in snap.files if f.max_values and "text" in f.max_values)
    specs = column_specs(snap.schema_json, snap.partition_columns)
    above = add.max_values["text"] + "zzz"  # starts with the (possibly cut) max, sorts above it
    assert skip_split(add, [EqualTo("text", above)], specs)  # taken as exact: skipped
    assert not skip_split(add, [EqualTo("text", above)], specs, prefix_max=True)
    assert written_by_reference(snap, add)


# ---- corrupted splits ----------------------------------------------------------------------------------


def _copy(tmp_path: Path, name: str = "01_single_write") -> tuple[Path, it.IndexTable, Any]:
    dst = tmp_path / name
    shutil.copytree(ROOT / name, dst)
    table = it.IndexTable(str(dst), options={"spark.indextables.cache.disk.path": str(tmp_path / "cache")})
    return dst, table, table.snapshot().files[0]


def _read_error(table: it.IndexTable) -> IndexTablesError:
    with pytest.raises(IndexTablesError) as e:
        table.to_arrow()
    return e.value


def test_truncated_bundle_names_the_file(tmp_path: Path) -> None:
    dst, table, add = _copy(tmp_path)
    p = dst / add.path
    p.write_bytes(p.read_bytes()[:-100])
    err = _read_error(table)
    assert add.path in str(err)


@pytest.mark.parametrize("digits, message", [(4, "outside the data section"), (3, "Tantivy file footer")])
def test_bad_offsets_name_the_file(tmp_path: Path, digits: int, message: str) -> None:
    """An end offset past the data section; or one inside it but wrong (the file's footer is
    then not where it should be)."""
    import re

    dst, table, add = _copy(tmp_path)
    p = dst / add.path
    data = p.read_bytes()
    f = add.footer_start_offset
    offsets = data[f + 8 :].split(b"}}}", 1)[0]
    m = re.search(rb'"end":(\d{%d})[,}]' % digits, offsets)
    assert m is not None
    value = b"9" * digits if digits == 4 else str(int(m.group(1)) - 1).rjust(digits, "0").encode()
    bad = offsets[: m.start(1)] + value + offsets[m.end(1) :]  # same length: the JSON stays well-formed
    p.write_bytes(data[: f + 8] + bad + data[f + 8 + len(offsets) :])
    err = _read_error(table)
    assert isinstance(err, SplitFormatError)
    assert add.path in str(err) and message in str(err)


def test_flipped_byte_in_an_index_file_fails_its_checksum(tmp_path: Path) -> None:
    dst, table, add = _copy(tmp_path)
    p = dst / add.path
    data = bytearray(p.read_bytes())
    f = add.footer_start_offset
    files = json.loads(bytes(data[f + 8 :]).split(b"}}}", 1)[0] + b"}}}")["files"]
    store = next(span for name, span in files.items() if name.endswith(".store"))
    data[store["start"] + 5] ^= 0xFF
    p.write_bytes(bytes(data))
    err = _read_error(table)
    assert isinstance(err, SplitFormatError)
    assert add.path in str(err) and "checksum" in str(err)


def test_garbage_file_is_not_taken_for_a_split(tmp_path: Path) -> None:
    dst, table, add = _copy(tmp_path)
    p = dst / add.path
    p.write_bytes(os.urandom(p.stat().st_size))
    err = _read_error(table)
    assert add.path in str(err)


# ---- through Spark ------------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_reads_every_reference_table(spark, expected: dict[str, list[dict[str, Any]]]) -> None:
    from pyspark.sql import functions as F

    for name in TABLES:
        rows = expected[name]
        path = str(ROOT / name)
        df = spark.read.format("indextables").load(path)
        got = sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"])
        assert got == rows, name
        col = _text_column(name)
        value = rows[len(rows) // 2][col]
        q = spark.read.format("indextables").option("query", f'{col}:"{value}"').load(path)
        assert sorted(r["id"] for r in q.collect()) == sorted(r["id"] for r in rows if r[col] == value), name
        mid = sorted(r["id"] for r in rows)[len(rows) // 2]
        assert df.filter(F.col("id") >= mid).count() == sum(1 for r in rows if r["id"] >= mid), name
        total = df.agg(F.sum("id").alias("s"), F.count("*").alias("n")).collect()[0]
        assert (total["s"], total["n"]) == (sum(r["id"] for r in rows), len(rows)), name


@pytest.mark.spark
def test_spark_sql_view_and_indexall_on_a_reference_table(spark) -> None:
    path = str(ROOT / "06_schema_dedup")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW ref06 USING indextables OPTIONS (path '{path}')")
    got = spark.sql("SELECT id, rating FROM ref06 WHERE _indexall = 'title:\"Title 3-2\"'").collect()
    assert [(r["id"], r["rating"]) for r in got] == [(302, 3.2)]
    assert spark.sql("SELECT count(*) AS n FROM ref06 WHERE body = 'Body for 5-1'").collect()[0]["n"] == 1


@pytest.mark.spark
def test_spark_stream_reads_a_reference_table(spark, tmp_path: Path, expected) -> None:
    path = str(ROOT / "09_partitioned_multi_append")
    out = tmp_path / "sink"
    q = (
        spark.readStream.format("indextables")
        .load(path)
        .writeStream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(str(out))
    )
    assert q.awaitTermination(300), "the streaming query did not finish in time"
    got = sorted((r.asDict() for r in spark.read.parquet(str(out)).collect()), key=lambda r: r["id"])
    assert got == expected["09_partitioned_multi_append"]


def test_describe_and_explain_a_reference_table() -> None:
    t = it.IndexTable(str(ROOT / "09_partitioned_multi_append"))
    state = t.inspect.state()
    assert (state.version, state.num_files, state.format) == (5, 10, "avro-state")
    plan = t.explain(query="text:doc_3_1", where="date = '2024-03-01' AND id > 30")
    assert plan.version == 5 and plan.splits_total == 10 and plan.splits_after_partition_pruning == 2
    assert "id > 30" in plan.index_answered
    assert sorted(t.search("text:doc_3_1", where="date = '2024-03-01'").column("id").to_pylist()) == [31]


def test_log_only_commits_on_a_reference_table_get_their_state(tmp_path: Path) -> None:
    """IndexTables4Spark v0.5.4 reads a table's version from `_last_checkpoint` and no version file
    after it: a DROP PARTITIONS of ours gets its state at once, and no protocol upgrade version
    (the reference's V4 without features is already Avro state)."""
    from indextables_spark.ops.maintenance.drop_partitions import drop_partitions

    dst = tmp_path / "t"
    shutil.copytree(ROOT / "12_partition_drop", dst)
    t = it.IndexTable(str(dst))
    before = t.snapshot()
    res = drop_partitions(t.log, "date = '2024-01-01'")
    assert res.version == before.version + 1
    last = json.loads((dst / "_transaction_log" / "_last_checkpoint").read_text())
    assert last["version"] == res.version and last["stateDir"] == f"state-v{res.version:020d}"
    assert last["size"] == last["numFiles"] == before.num_files - res.splits_removed
    assert it.IndexTable(str(dst)).snapshot().protocol_action == before.protocol_action
    assert _sorted(it.IndexTable(str(dst)).to_arrow()) == [
        r for r in _sorted(it.IndexTable(str(ROOT / "12_partition_drop")).to_arrow()) if r["date"] != "2024-01-01"
    ]
