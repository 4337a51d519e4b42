"""Struct fields in the Spark-free `where` grammar (issue 16, criterion 3): `user.name = 'alice' AND
user.age > 50` over struct columns, exact with Spark's semantics (a NULL struct makes its fields
NULL), compared with Spark on the same rows; the same paths in DELETE predicates."""

from __future__ import annotations

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.expr.where import parse_where

USER = pa.struct(
    [("name", pa.string()), ("age", pa.int64()), ("address", pa.struct([("city", pa.string()), ("zip", pa.int32())]))]
)


def data() -> pa.Table:
    users = [
        {"name": "alice", "age": 61, "address": {"city": "Paris", "zip": 75001}},
        {"name": "bob", "age": 42, "address": None},
        None,
        {"name": None, "age": 70, "address": {"city": None, "zip": 10115}},
        {"name": "alice", "age": 30, "address": {"city": "Berlin", "zip": None}},
        {"name": "carol", "age": None, "address": {"city": "Paris", "zip": 75002}},
    ]
    return pa.table({"id": pa.array(range(len(users)), pa.int64()), "user": pa.array(users, USER)})


WHERES = [
    "user.name = 'alice' AND user.age > 50",
    "user.age > 50",
    "user.address.city = 'Paris'",
    "user.name IS NULL",
    "user.address.zip IS NOT NULL",
    "user.name IN ('bob', 'carol')",
    "NOT user.name = 'alice'",
    "user.address.city != 'Paris' OR user.age < 40",
    "user.age BETWEEN 40 AND 65",
    "user IS NULL",
]


@pytest.fixture
def table(tmp_path) -> it.IndexTable:
    path = str(tmp_path / "t")
    it.write_table(path, data())
    return it.IndexTable(path)


def python_ids(where: str) -> list[int]:
    """Spark's answer, spelled out per condition (NULL comparisons drop the row)."""
    rows = data().to_pylist()

    def f(u, *path):
        for p in path:
            if u is None:
                return None
            u = u.get(p)
        return u

    def cmp(v, fn):
        return None if v is None else fn(v)

    def and_(a, b):
        return False if a is False or b is False else (None if a is None or b is None else True)

    def or_(a, b):
        return True if a is True or b is True else (None if a is None or b is None else False)

    def not_(a):
        return None if a is None else not a

    preds = {
        WHERES[0]: lambda u: and_(cmp(f(u, "name"), lambda v: v == "alice"), cmp(f(u, "age"), lambda v: v > 50)),
        WHERES[1]: lambda u: cmp(f(u, "age"), lambda v: v > 50),
        WHERES[2]: lambda u: cmp(f(u, "address", "city"), lambda v: v == "Paris"),
        WHERES[3]: lambda u: f(u, "name") is None,
        WHERES[4]: lambda u: f(u, "address", "zip") is not None,
        WHERES[5]: lambda u: cmp(f(u, "name"), lambda v: v in ("bob", "carol")),
        WHERES[6]: lambda u: not_(cmp(f(u, "name"), lambda v: v == "alice")),
        WHERES[7]: lambda u: or_(
            cmp(f(u, "address", "city"), lambda v: v != "Paris"), cmp(f(u, "age"), lambda v: v < 40)
        ),
        WHERES[8]: lambda u: cmp(f(u, "age"), lambda v: 40 <= v <= 65),
        WHERES[9]: lambda u: u is None,
    }
    return [r["id"] for r in rows if preds[where](r["user"]) is True]


@pytest.mark.parametrize("where", WHERES)
def test_struct_paths_in_where(table, where):
    got = sorted(table.to_arrow(where=where, columns=["id"]).column("id").to_pylist())
    assert got == python_ids(where)


@pytest.mark.spark
def test_same_answers_as_spark(spark, table):
    df = spark.createDataFrame(data())
    for where in WHERES:
        expected = sorted(r.id for r in df.filter(where).select("id").collect())
        assert sorted(table.to_arrow(where=where, columns=["id"]).column("id").to_pylist()) == expected, where
        assert expected == python_ids(where), where


def test_struct_paths_in_delete_and_errors(table):
    table.delete("user.address.city = 'Paris' AND user.age > 60")
    assert sorted(table.to_arrow(columns=["id"]).column("id").to_pylist()) == [1, 2, 3, 4, 5]
    with pytest.raises(it.IndexTablesError, match="user.nosuch"):
        table.to_arrow(where="user.nosuch = 1")


def test_equality_narrows_through_the_json_field(table):
    from indextables_spark.expr.struct_narrowing import where_narrowing
    from indextables_spark.core.split.read.scan import table_layout

    conj = parse_where(
        "user.name IN ('alice', 'Bob Smith') AND user.age = 61 AND user.age > 1", table.snapshot().schema_json
    )
    specs = {s.name: s for s in table_layout(table.snapshot(), table.options)[2]}
    names = ["id", "user"]
    assert [where_narrowing(f, specs, names) for f in conj] == [
        '(user.name:alice OR user.name:"bob smith")',
        "user.age:61",
        "user.age:>1",
    ]
    assert sorted(table.to_arrow(where="user.name = 'alice'", columns=["id"]).column("id").to_pylist()) == [0, 4]
    assert table.search("user.name:alice", columns=["id"]).num_rows == 2  # the query syntax on them


def test_ranges_narrow_through_the_fast_json_field(tmp_path):
    from indextables_spark.expr.struct_narrowing import where_narrowing, with_narrowing
    from indextables_spark.core.split.read.scan import table_layout

    path = str(tmp_path / "fast")
    it.write_table(path, data())  # struct columns' json fields are fast by default
    t = it.IndexTable(path)
    specs = table_layout(t.snapshot(), t.options)[2]
    by_name = {s.name: s for s in specs}
    conj = parse_where("user.age > 50 AND user.address.zip <= 75001 AND user.age = -3", t.snapshot().schema_json)
    got = [where_narrowing(f, by_name, ["id", "user"]) for f in conj]
    assert got == ["user.age:>50", "user.address.zip:<=75001", 'user.age:"-3"']
    for where in WHERES:
        assert sorted(t.to_arrow(where=where, columns=["id"]).column("id").to_pylist()) == python_ids(where), where
    # a split whose json field is not fast (written before fastfields named it) gets no range narrowing
    import dataclasses

    slow = [
        dataclasses.replace(s, indexed_fields=tuple(dataclasses.replace(f, fast=False) for f in s.indexed_fields))
        for s in specs
    ]
    assert with_narrowing(None, got, slow) == 'user.age:"-3"'
    assert (
        with_narrowing("body:x", got, specs)
        == '(body:x) AND (user.age:>50) AND (user.address.zip:<=75001) AND (user.age:"-3")'
    )


@pytest.mark.spark
def test_spark_struct_ranges_narrowed(spark, tmp_path):
    path = str(tmp_path / "fast")
    it.write_table(path, data())
    df = spark.read.format("indextables").load(path)
    for where in WHERES:
        assert sorted(r.id for r in df.filter(where).select("id").collect()) == python_ids(where), where
    records = it.explain(df.filter("user.age > 50 AND user.name = 'alice'"))
    assert any("user.age:>50" in q for r in records for q in r.get("struct_field_narrowing", []))
