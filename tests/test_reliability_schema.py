"""Schema evolution: appends with mergeSchema=true add nullable columns; splits written before
read them as NULL (filters on them applied exactly); incompatible changes are refused naming the
column; the doc mapping registry records each schema once."""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import SchemaMismatchError
from indextables_spark.config.options import Options
from indextables_spark.expr.model import EqualNullSafe, EqualTo, GreaterThan, IsNotNull, IsNull, LessThan, Not

sys.path.insert(0, os.path.dirname(__file__))

TEXT = {"spark.indextables.indexing.typemap.body": "text"}


def _write(path: str, data: pa.Table, merge: bool = False, partition_by=("day",)) -> int:
    from pyspark.sql.types import StructType

    from indextables_spark.core.schema.arrow_types import spark_schema_json

    from indextables_spark.ops.write.write import commit_write
    from indextables_spark.spark.writer import plan_write, write_splits

    opts = Options.of(TEXT, {"partitionBy": ",".join(partition_by)}, {"mergeSchema": "true"} if merge else None)
    plan, read_version, _ = plan_write(path, opts, StructType.fromJson(spark_schema_json(data.schema)), False)
    msg = write_splits(path, opts, plan, iter(data.to_batches()))
    return commit_write(
        it.IndexTable(path, opts).log,
        plan,
        read_version,
        False,
        [it.AddFile.from_json(d) for d in msg.adds],
        stats_files=msg.stats,
    )


def _base(ids):
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": pa.array([f"alpha w{i}" for i in ids]),
            "day": pa.array(["d1" if i % 2 else "d2" for i in ids]),
        }
    )


def _evolved(ids):
    t = _base(ids)
    return t.append_column("score", pa.array([float(i) if i % 3 else None for i in ids], pa.float64())).append_column(
        "tag", pa.array([f"t{i % 2}" for i in ids])
    )


def _read(path: str, filters=(), version=None) -> list[dict]:
    from pyspark.sql.types import StructType

    from indextables_spark.spark.guard import SnapshotPin
    from indextables_spark.spark.reader import IndexTablesReader, SplitGroup
    from indextables_spark.spark.task_read import task_json

    snap = it.IndexTable(path).snapshot(version)
    schema = StructType.fromJson(snap.schema_json)
    reader = IndexTablesReader(path, Options.of(TEXT), schema, SnapshotPin("test", snap.version, True))
    reader._bind(snap)
    reader.rechecked = list(filters)
    rows = [
        r
        for b in reader.read(SplitGroup([task_json(f) for f in snap.files], None, reader._scan().read))
        for r in b.to_pylist()
    ]
    return sorted(rows, key=lambda r: r["id"])


def _expected(rows: list[dict], pred=lambda r: True) -> list[dict]:
    return sorted((r for r in rows if pred(r)), key=lambda r: r["id"])


def test_merge_schema_adds_nullable_columns_old_splits_read_nulls(tmp_path):
    path = str(tmp_path / "t")
    _write(path, _base(range(0, 10)))
    _write(path, _base(range(10, 20)))
    with pytest.raises(SchemaMismatchError, match=r"columns not in the table \['score', 'tag'\]"):
        _write(path, _evolved(range(20, 30)))  # without mergeSchema: refused
    v = _write(path, _evolved(range(20, 30)), merge=True)
    _write(path, _evolved(range(30, 40)), merge=True)  # same evolved schema again
    t = it.IndexTable(path)
    snap = t.snapshot()
    assert [f["name"] for f in snap.schema_json["fields"]] == ["id", "body", "day", "score", "tag"]
    assert all(f["nullable"] for f in snap.schema_json["fields"])
    # The registry holds each doc mapping once: the original and the evolved one.
    refs = {f.doc_mapping_ref for f in snap.files}
    assert len(refs) == 2 and set(snap.schema_registry) == refs
    registry_keys = [k for k in snap.metadata_action.configuration if k.startswith("docMappingSchema.")]
    assert len(registry_keys) == 2
    metadata_versions = [h["version"] for h in t.inspect.history() if h["metadataChanged"]]
    assert sorted(metadata_versions) == [0, v]  # one schema change, recorded once

    old = [{**r, "score": None, "tag": None} for r in _base(range(0, 20)).to_pylist()]
    new = _evolved(range(20, 40)).to_pylist()
    everything = old + new
    assert _read(path) == _expected(everything)
    # Filters on the new columns, exact over old (NULL) and new splits.
    cases = [
        ([IsNull("score")], lambda r: r["score"] is None),
        ([IsNotNull("tag")], lambda r: r["tag"] is not None),
        ([EqualTo("tag", "t1")], lambda r: r["tag"] == "t1"),
        (
            [GreaterThan("score", 25.0), LessThan("id", 35)],
            lambda r: r["score"] is not None and r["score"] > 25 and r["id"] < 35,
        ),
        ([Not(EqualTo("tag", "t0"))], lambda r: r["tag"] is not None and r["tag"] != "t0"),
        ([EqualNullSafe("tag", None)], lambda r: r["tag"] is None),
        ([LessThan("id", 5)], lambda r: r["id"] < 5),
    ]
    for filters, pred in cases:
        assert _read(path, filters) == _expected(everything, pred), filters
    # Time travel before the change: the old schema, no new columns.
    before = _read(path, version=v - 1)
    assert set(before[0]) == {"id", "body", "day"} and len(before) == 20


def test_incompatible_schema_changes_are_refused(tmp_path):
    path = str(tmp_path / "t")
    _write(path, _base(range(0, 6)))
    version = it.IndexTable(path).version()
    changed_type = _base(range(6, 9)).set_column(0, "id", pa.array(["a", "b", "c"]))
    with pytest.raises(SchemaMismatchError, match=r"column 'id' has type string in the data but bigint"):
        _write(path, changed_type, merge=True)
    dropped = _base(range(6, 9)).drop_columns(["body"])
    with pytest.raises(SchemaMismatchError, match=r"no columns \['body'\]"):
        _write(path, dropped, merge=True)
    case_clash = _base(range(6, 9)).append_column("ID", pa.array([1, 2, 3], pa.int64()))
    with pytest.raises(SchemaMismatchError, match="only in case"):
        _write(path, case_clash, merge=True)
    assert it.IndexTable(path).version() == version  # nothing committed


@pytest.mark.spark
def test_merge_schema_through_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, body string").write.format("indextables").mode("append").save(
        path
    )
    df2 = spark.createDataFrame([(3, "c", 7)], "id long, body string, extra int")
    with pytest.raises(Exception, match="extra"):
        df2.write.format("indextables").mode("append").save(path)
    df2.write.format("indextables").mode("append").option("mergeSchema", "true").save(path)
    got = spark.read.format("indextables").load(path)
    assert got.columns == ["id", "body", "extra"]
    assert sorted(tuple(r) for r in got.collect()) == [(1, "a", None), (2, "b", None), (3, "c", 7)]
    assert [r.id for r in got.filter("extra IS NULL").collect()] in ([1, 2], [2, 1])
    assert [r.id for r in got.filter("extra = 7").collect()] == [3]
