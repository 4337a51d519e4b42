"""Companion indexes over sources whose nested struct fields are named otherwise in the files:
Delta column mapping (`name`, `id`: every nested field of a table created with it has a `col-…`
physical name and an id) in structs, list elements and map values, and Iceberg nested fields
renamed after files were written (read by field id). Every read is checked row for row against
the source's logical rows (our test writer's account, pyiceberg's own scan), after renames, added
fields, syncs and MERGE SPLITS."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import indextables_spark as it
from delta_dv_writer import DeltaWriter
from indextables_spark.core.split.format.companion import CompanionFile, CompanionInfo, conform_source_column
from indextables_spark.core.split.format.nested_names import NestedNames, rename_nested
from indextables_spark.errors import CompanionSourceError, ProtocolVersionError
from indextables_spark.ops.companion.nested_fields import (
    CONFIG_NESTED_FIELDS,
    SourceField,
    SourceNesting,
    nesting_config,
    nesting_moved,
)
from indextables_spark.ops.companion.sources.column_mapping import delta_column_mapping

GEO = pa.struct([("lat", pa.float64()), ("lon", pa.float64())])
CITY = pa.struct([("city", pa.string()), ("geo", GEO)])
TAGS = pa.list_(pa.struct([("k", pa.string()), ("n", pa.int64())]))
ATTRS = pa.map_(pa.string(), pa.struct([("v", pa.int64())]))
SCHEMA = pa.schema([("id", pa.int64()), ("body", pa.string()), ("s", CITY), ("tags", TAGS), ("attrs", ATTRS)])
CITIES = ["paris", "rome", None, "oslo"]


def _rows(ids) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": ids,
            "body": [f"w{i % 3} doc{i}" for i in ids],
            "s": [
                None
                if i % 7 == 6
                else {"city": CITIES[i % 4], "geo": None if i % 5 == 4 else {"lat": i / 2, "lon": -i}}
                for i in ids
            ],
            "tags": [
                None if i % 6 == 5 else [{"k": f"k{i % 3}", "n": i}, {"k": "all", "n": None}][: 1 + i % 2] for i in ids
            ],
            "attrs": [None if i % 8 == 7 else [(f"a{i % 2}", None if i % 3 == 2 else {"v": i})] for i in ids],
        },
        schema=SCHEMA,
    )


def _by_id(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def _check(w: DeltaWriter, loc: str) -> None:
    want = w.live_rows()
    t = it.IndexTable(loc)
    assert _by_id(t.to_arrow(columns=want.column_names)) == _by_id(want)
    assert t.count() == want.num_rows


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


# -- the renaming of arrays, the footer ---------------------------------------------------------------


def test_rename_nested_keeps_validity_offsets_and_slices():
    file_type = pa.struct([("c-2", pa.int64()), ("c-1", pa.struct([("c-3", pa.string())])), ("extra", pa.int8())])
    col = pa.array(
        [{"c-1": {"c-3": "a"}, "c-2": 1, "extra": 0}, None, {"c-1": None, "c-2": 3, "extra": 0}, {"c-2": 4}],
        file_type,
    ).slice(1)
    target = pa.struct([("x", pa.struct([("y", pa.string())])), ("z", pa.int64()), ("added", pa.string())])
    names = NestedNames((("x", "c-1", NestedNames((("y", "c-3", None),))), ("z", "c-2", None), ("added", "", None)))
    got = conform_source_column(rename_nested(col, target, names), pa.field("s", target), 3)
    assert got.to_pylist() == [None, {"x": None, "z": 3, "added": None}, {"x": None, "z": 4, "added": None}]
    # a required field renamed (Iceberg `required`) stays required: the cast to the table's type works
    required = pa.array([{"c": 1}, None], pa.struct([pa.field("c", pa.int64(), nullable=False)]))
    req_target = pa.struct([pa.field("a", pa.int64(), nullable=False)])
    req_names = NestedNames((("a", "c", None),))
    assert conform_source_column(required, pa.field("s", req_target), 2, req_names).to_pylist() == [{"a": 1}, None]
    # without the renaming Arrow's cast matches children by name: every value would be NULL
    assert pa.array([{"p": 1}]).cast(pa.struct([("a", pa.int64())])).to_pylist() == [{"a": None}]
    # through list elements and map values (sliced: offsets index the whole child)
    lists = pa.array([[{"c": 1}], None, [{"c": 2}, {"c": 3}], []], pa.list_(pa.struct([("c", pa.int64())]))).slice(1)
    list_target = pa.list_(pa.struct([("a", pa.int64())]))
    renamed = rename_nested(lists, list_target, NestedNames(element=NestedNames((("a", "c", None),))))
    assert renamed.cast(list_target).to_pylist() == [None, [{"a": 2}, {"a": 3}], []]
    maps = pa.array(
        [[("k", {"c": 1})], [("j", None), ("q", {"c": 2})], None], pa.map_(pa.string(), pa.struct([("c", pa.int64())]))
    )
    map_target = pa.map_(pa.string(), pa.struct([("a", pa.int64())]))
    renamed = rename_nested(maps.slice(1), map_target, NestedNames(value=NestedNames((("a", "c", None),))))
    assert renamed.cast(map_target).to_pylist() == [[("j", None), ("q", {"a": 2})], None]


def test_footer_records_nested_names_and_reads_old_footers():
    nested = NestedNames((("geo", "col-1", NestedNames((("lat", "", None),))),), element=None)
    info = CompanionInfo(
        "delta",
        "/src",
        3,
        pa.schema([("s", CITY)]),
        (CompanionFile("a.parquet", "/src/a.parquet", 10, ((0, 5),), (), (("s", nested),)),),
    )
    d = info.to_json()
    assert d["files"][0]["nested"] == {"s": {"fields": [["geo", "col-1", {"fields": [["lat", "", None]]}]]}}
    assert CompanionInfo.from_json(d, "x") == info
    del d["files"][0]["nested"]  # a footer written before nested names were recorded
    assert CompanionInfo.from_json(d, "x").files[0].nested == ()
    # nothing recorded and nothing nested: no change
    assert nesting_moved({}, {}, "m") == [] and nesting_moved({CONFIG_NESTED_FIELDS: "{}"}, {}, "m") == []
    # a companion built before nested fields were mapped (its top-level mapping alone recorded)
    # read them by name: every nested column counts as moved, once
    shape = {"s": SourceNesting((SourceField("x", "col-1", 3),))}
    assert nesting_moved({"m": "{}"}, shape, "m") == ["s"]
    assert nesting_moved({"m": "{}", **nesting_config(shape)}, shape, "m") == []
    assert nesting_moved({}, shape, "m") == []  # a first build


# -- Delta column mapping ------------------------------------------------------------------------------


def _delta(tmp_path, mode: str) -> DeltaWriter:
    w = DeltaWriter(str(tmp_path / "src"))
    w.create(SCHEMA, mapping=mode)
    w.add_file(_rows(range(0, 24)), row_group_size=10)
    w.ids_only = mode == "id"  # `id` mode matches by Parquet field id whatever the file's names
    w.add_file(_rows(range(24, 40)))
    w.ids_only = False
    return w


def _build(w: DeltaWriter, loc: str):
    return it.build_companion(w.root, loc, format="delta", indexing={"body": "text"})


@pytest.mark.parametrize("mode", ["name", "id"])
def test_delta_nested_physical_names_renames_added_fields_and_merges(mode, tmp_path):
    from indextables_spark.frontends.execute import execute
    from indextables_spark.frontends.sql_parser import parse_command

    w = _delta(tmp_path, mode)
    assert all(p.startswith("col-") for p, _ in w.nested.values())
    loc = str(tmp_path / "index")
    assert _build(w, loc)["status"] == "SUCCESS"
    _check(w, loc)
    t = it.IndexTable(loc)
    want = w.live_rows().to_pylist()
    rome = [r["id"] for r in want if r["s"] and r["s"]["city"] == "rome"]
    assert _ids(t.to_arrow(where="s.city = 'rome'", columns=["id"])) == sorted(rome)
    assert _ids(t.search("s.city:paris", columns=["id"])) == sorted(
        r["id"] for r in want if r["s"] and r["s"]["city"] == "paris"
    )
    assert _ids(t.search("tags.k:k1", columns=["id"])) == sorted(
        r["id"] for r in want if r["tags"] and any(x["k"] == "k1" for x in r["tags"])
    )

    # a nested field renamed: the next sync indexes every split again, under the new name
    w.rename_nested(("s", "city"), "town")
    w.rename_nested(("tags", "element", "k"), "key")
    res = _build(w, loc)
    assert res["splitsRemoved"] == 1 and res["filesIndexed"] == 2
    _check(w, loc)
    t = it.IndexTable(loc)
    assert _ids(t.to_arrow(where="s.town = 'rome'", columns=["id"])) == sorted(rome)

    # a nested field added: no re-index, the older files read it as NULL
    w.add_nested(("s",), pa.field("zip", pa.string()))
    new = _rows(range(40, 48)).to_pylist()
    for r in new:
        r["s"] = r["s"] and {"town": r["s"]["city"], "geo": r["s"]["geo"], "zip": f"z{r['id']}"}
        r["tags"] = r["tags"] and [{"key": x["k"], "n": x["n"]} for x in r["tags"]]
    w.add_file(pa.Table.from_pylist(new, schema=w.schema))
    res = _build(w, loc)
    assert (res["splitsRemoved"], res["filesIndexed"]) == (0, 1)
    _check(w, loc)
    t = it.IndexTable(loc)
    assert _ids(t.to_arrow(where="s.zip = 'z42'", columns=["id"])) == [42]
    assert t.to_arrow(where="id = 1", columns=["s"]).column("s").to_pylist()[0]["zip"] is None

    # MERGE SPLITS indexes the source files again with the names each split recorded
    before = _by_id(t.to_arrow())
    assert len(t.snapshot().files) == 2
    execute(parse_command(f"MERGE SPLITS '{loc}' TARGET SIZE 100M"))
    t = it.IndexTable(loc)
    (merged,) = t.snapshot().files
    assert len(merged.companion_source_files) == 3
    assert _by_id(t.to_arrow()) == before
    rome = [r["id"] for r in w.live_rows().to_pylist() if r["s"] and r["s"]["town"] == "rome"]
    assert _ids(t.to_arrow(where="s.town = 'rome'", columns=["id"])) == sorted(rome)
    assert _build(w, loc)["filesIndexed"] == 0


def test_delta_nested_fields_that_cannot_be_mapped_are_refused(tmp_path):
    w = _delta(tmp_path, "name")
    # two fields of one struct under one physical name: refused naming the table, column and fields
    # (deltalake refuses such a schema first; our own check stands behind it)
    schema = json.loads(w._schema_string())
    s_type = next(f for f in schema["fields"] if f["name"] == "s")["type"]
    s_type["fields"][0]["metadata"] = dict(s_type["fields"][1]["metadata"])
    with pytest.raises(ProtocolVersionError, match=r"Delta table T: column 's': nested fields s\.city and s\.geo"):
        delta_column_mapping(schema, "name", "T")
    # a file holding another shape where the table has a struct: refused naming the file and field
    path = f"{w.root}/part-bad.parquet"
    body = _rows(range(3))
    columns = {w.physical[c]: body.column(c) for c in ("id", "body")}
    columns[w.physical["s"]] = pa.array(["not a struct"] * 3)
    pq.write_table(pa.table(columns), path)
    add = {"path": "part-bad.parquet", "partitionValues": {}, "size": os.path.getsize(path), "modificationTime": 0}
    w.commit([{"add": {**add, "dataChange": True, "stats": json.dumps({"numRecords": 3})}}])
    with pytest.raises(CompanionSourceError, match=r"delta table .*src: source file .*part-bad.parquet: s is a struct"):
        _build(w, str(tmp_path / "index"))


# -- Iceberg: nested fields renamed after files were written ---------------------------------------------


def _iceberg(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import ListType, LongType, NestedField, StringType, StructType

    pytest.importorskip("pyiceberg")
    wh = tmp_path / "wh"
    wh.mkdir()
    uri = f"sqlite:///{tmp_path}/cat.db"
    cat = SqlCatalog("c", uri=uri, warehouse=f"file://{wh}")
    cat.create_namespace_if_not_exists("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "body", StringType(), required=False),
        NestedField(
            3,
            "s",
            StructType(
                NestedField(4, "x", LongType(), required=False), NestedField(5, "name", StringType(), required=False)
            ),
            required=False,
        ),
        NestedField(
            6,
            "tags",
            ListType(7, StructType(NestedField(8, "k", StringType(), required=False)), element_required=False),
            required=False,
        ),
    )
    cat.create_table("db.t", schema=schema)
    return cat, {
        "iceberg.catalog.c.uri": uri,
        "iceberg.catalog.c.warehouse": f"file://{wh}",
        "companion.parallelism": "1",
    }


def _iceberg_rows(ids, x: str = "x", k: str = "k") -> pa.Table:
    ids = list(ids)
    s = pa.struct([(x, pa.int64()), ("name", pa.string())])
    tags = pa.list_(pa.struct([(k, pa.string())]))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": [f"w{i % 3}" for i in ids],
            "s": pa.array([None if i % 5 == 4 else {x: i * 10, "name": f"n{i % 2}"} for i in ids], s),
            "tags": pa.array([[{k: f"t{i % 3}"}] if i % 4 else None for i in ids], tags),
        }
    )


def _scan(table) -> pa.Table:
    return table.scan().to_arrow()


def _scan_like(t: pa.Table) -> pa.Table:
    """Our rows as pyiceberg 0.12's scan returns them: a NULL list as an empty one (its reading of
    the file's NULL lists, with or without renames; Spark reads NULL, as we do)."""
    i = t.column_names.index("tags")
    return t.set_column(i, "tags", pc.fill_null(t.column(i), pa.scalar([], t.schema.field(i).type)))


def test_iceberg_nested_fields_renamed_after_files_were_written(tmp_path):
    from iceberg_helpers import append_files, data_file

    cat, options = _iceberg(tmp_path)
    table = cat.load_table("db.t")
    append_files(table, [data_file(table, _iceberg_rows(range(20)))])
    loc = str(tmp_path / "index")

    def build(where):
        return it.build_companion(
            "db.t", where, format="iceberg", catalog="c", options=options, indexing={"body": "text"}
        )

    build(loc)
    with cat.load_table("db.t").update_schema() as u:
        u.rename_column("s.x", "y")
        u.rename_column("tags.element.k", "key")
    table = cat.load_table("db.t")
    append_files(table, [data_file(table, _iceberg_rows(range(20, 30), x="y", k="key"))])
    table = cat.load_table("db.t")
    res = build(loc)
    assert res.splits_removed == 1 and res.files_indexed == 2  # the old split named the field "x"
    want = _scan(table)
    assert want.filter(pc.equal(want.column("id"), 3)).column("s").to_pylist() == [{"y": 30, "name": "n1"}]
    t = it.IndexTable(loc)
    got = t.to_arrow(columns=want.column_names)
    assert got.filter(pc.equal(got.column("id"), 0)).column("tags").to_pylist() == [None]  # as in the file
    assert _by_id(_scan_like(got)) == _by_id(want)
    assert _ids(t.to_arrow(where="s.y >= 250", columns=["id"])) == [25, 26, 27, 28]
    assert _ids(t.search("tags.key:t1", columns=["id"])) == [i for i in range(30) if i % 4 and i % 3 == 1]
    # a fresh build over the files written before the rename reads them by field id too
    loc2 = str(tmp_path / "index2")
    build(loc2)
    assert _by_id(_scan_like(it.IndexTable(loc2).to_arrow(columns=want.column_names))) == _by_id(want)
    # nothing renamed since: a sync indexes nothing
    assert build(loc).files_indexed == 0
