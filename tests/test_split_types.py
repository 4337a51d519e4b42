"""Schema mapping: kinds, options, unsupported types, doc mapping, Arrow types, partition values."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from indextables_spark.errors import IndexTablesError, InvalidOptionError, SchemaMismatchError, UnsupportedTypeError
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.config.options import Options
from indextables_spark.core.schema import partitions as P
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.split.format.column_specs import column_specs, validate_schema
from indextables_spark.core.split.format.doc_mapping import doc_mapping_json, specs_from_doc_mapping, tantivy_schema
from indextables_spark.core.schema.types import ROW_FIELD


def field(name, t, nullable=True):
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}


def schema(*fields):
    return {"type": "struct", "fields": list(fields)}


ALL = schema(
    field("b", "byte"),
    field("sh", "short"),
    field("i", "integer"),
    field("l", "long"),
    field("f", "float"),
    field("d", "double"),
    field("dec", "decimal(38,18)"),
    field("flag", "boolean"),
    field("s", "string"),
    field("bin", "binary"),
    field("day", "date"),
    field("ts", "timestamp"),
    field("ntz", "timestamp_ntz"),
    field("cv", "varchar(10)"),
    field("tags", {"type": "array", "elementType": "string", "containsNull": True}),
    field("m", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
    field("st", {"type": "struct", "fields": [field("x", "long"), field("y", "string", False)]}),
)


def test_kinds_of_every_type():
    specs = {s.name: s for s in validate_schema(ALL, [], Options())}
    kinds = {n: s.kind for n, s in specs.items()}
    assert kinds == {
        "b": "i64",
        "sh": "i64",
        "i": "i64",
        "l": "i64",
        "f": "f64",
        "d": "f64",
        "dec": "decimal",
        "flag": "bool",
        "s": "string",
        "bin": "binary",
        "day": "date",
        "ts": "timestamp",
        "ntz": "timestamp",
        "cv": "string",
        "tags": "json",
        "m": "json",
        "st": "json",
    }
    s = specs["s"].indexed_fields[0]
    assert (s.type, s.tokenizer, s.fast, s.exact) == ("text", "raw", True, True)
    assert specs["bin"].indexed_fields == ()
    assert specs["day"].indexed_fields[0].type == "i64"
    assert specs["dec"].indexed_fields[0].type == "f64"


def test_typemap_tokenizer_record_and_fast_options():
    sc = schema(field("Body", "string"), field("title", "string"), field("raw", "string"), field("n", "long"))
    opts = Options.of(
        {
            "spark.indextables.indexing.typemap.body": "text",  # keys arrive lower-cased
            "indexing.typemap.title": "text_and_string",
            "indexing.tokenizer.title": "en_stem",
            "indexing.indexrecordoption.body": "freq",
            "indexing.fastfields": "body",
            "indexing.typemap.not_a_column": "text",  # ignored (global conf may carry it)
        }
    )
    specs = {s.name: s for s in validate_schema(sc, [], opts)}
    body = specs["Body"]
    assert body.kind == "text"
    assert body.indexed_fields[0].tokenizer == "default" and body.indexed_fields[0].record == "freq"
    assert body.indexed_fields[0].fast
    title = specs["title"]
    assert title.kind == "text_and_string"
    assert [f.name for f in title.indexed_fields] == ["title", "title__exact"]
    assert title.indexed_fields[0].tokenizer == "en_stem" and title.exact_field.name == "title__exact"
    assert specs["raw"].kind == "string"


@pytest.mark.parametrize(
    "opts, match",
    [
        ({"indexing.typemap.n": "text"}, "indexing.typemap.n"),
        ({"indexing.typemap.s": "fulltext"}, "indexing.typemap.s"),
        ({"indexing.typemap.s": "text", "indexing.tokenizer.s": "klingon"}, "klingon"),
        ({"indexing.typemap.s": "text", "indexing.indexrecordoption.s": "everything"}, "indexrecordoption"),
    ],
)
def test_bad_options_name_the_option(opts, match):
    with pytest.raises(InvalidOptionError, match=match):
        validate_schema(schema(field("s", "string"), field("n", "long")), [], Options.of(opts))


@pytest.mark.parametrize(
    "t, shown",
    [
        ("interval day", "interval day"),
        ("interval year to month", "interval year to month"),
        ("variant", "variant"),
        ("void", "void"),
        ("calendarinterval", "calendarinterval"),
        ({"type": "array", "elementType": "interval day", "containsNull": True}, "interval day"),
        ({"type": "udt", "class": "x.Y", "sqlType": "string"}, "udt"),
        ("string collate UTF8_LCASE", "UTF8_LCASE"),
    ],
)
def test_unsupported_types_name_column_and_type(t, shown):
    with pytest.raises(UnsupportedTypeError) as e:
        validate_schema(schema(field("id", "long"), field("weird", t)), [], Options())
    assert "weird" in str(e.value) and shown in str(e.value)
    assert isinstance(e.value, IndexTablesError)


def test_partition_columns_checked():
    sc = schema(field("id", "long"), field("bin", "binary"), field("day", "date"))
    with pytest.raises(SchemaMismatchError, match="nope"):
        validate_schema(sc, ["nope"], Options())
    with pytest.raises(UnsupportedTypeError, match="bin"):
        validate_schema(sc, ["bin"], Options())
    specs = {s.name: s for s in column_specs(sc, ["day"], Options())}
    assert specs["day"].partition and not specs["day"].indexed_fields
    with pytest.raises(SchemaMismatchError, match="duplicate"):
        validate_schema(schema(field("a", "long"), field("A", "long")), [], Options())


def test_odd_column_names_get_safe_field_names():
    sc = schema(
        field("my col", "string"),
        field("a.b", "long"),
        field("__row", "long"),
        field("x__exact", "string"),
        field("x", "string"),
        field("1st", "long"),
    )
    specs = validate_schema(sc, [], Options.of({"indexing.typemap.x": "text_and_string"}))
    names = [f.name for s in specs for f in s.indexed_fields]
    assert len(set(names)) == len(names) and ROW_FIELD not in names
    tantivy_schema(specs)  # builds: names are valid and unique


def test_doc_mapping_round_trips_and_hashes_stably():
    opts = Options.of({"indexing.typemap.s": "text_and_string"})
    text = doc_mapping_json(ALL, ["day"], opts)
    items = json.loads(text)
    assert items[-1]["name"] == ROW_FIELD and items[-1]["type"] == "u64"
    assert all(not d["stored"] for d in items)
    assert "day" not in {d.get("column") for d in items}
    back = specs_from_doc_mapping(text)
    want = [s for s in validate_schema(ALL, ["day"], opts) if not s.partition]
    assert back == want
    assert doc_mapping_hash(text) == doc_mapping_hash(doc_mapping_json(ALL, ["day"], opts))
    assert doc_mapping_hash(text) != doc_mapping_hash(doc_mapping_json(ALL, ["day"], Options()))


def test_arrow_schema():
    s = arrow_schema(ALL)
    t = {f.name: f.type for f in s}
    assert t["b"] == pa.int8() and t["sh"] == pa.int16() and t["i"] == pa.int32() and t["l"] == pa.int64()
    assert t["f"] == pa.float32() and t["d"] == pa.float64() and t["dec"] == pa.decimal128(38, 18)
    assert t["s"] == pa.string() and t["cv"] == pa.string() and t["bin"] == pa.binary()
    assert t["day"] == pa.date32() and t["ts"] == pa.timestamp("us", tz="UTC") and t["ntz"] == pa.timestamp("us")
    assert t["tags"] == pa.list_(pa.field("element", pa.string()))
    assert t["m"] == pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int64()))
    assert t["st"] == pa.struct([pa.field("x", pa.int64()), pa.field("y", pa.string(), nullable=False)])
    assert not arrow_schema(schema(field("a", "long", False))).field("a").nullable
    assert arrow_schema(ALL, ["s", "b"]).names == ["s", "b"]
    with pytest.raises(SchemaMismatchError, match="zzz"):
        arrow_schema(ALL, ["zzz"])


@pytest.mark.parametrize(
    "value, t, text",
    [
        ("a/b=c", "string", "a/b=c"),
        (42, "integer", "42"),
        (-7, "long", "-7"),
        (True, "boolean", "true"),
        (1.5, "double", "1.5"),
        (float("nan"), "double", "NaN"),
        (float("-inf"), "double", "-Infinity"),
        (decimal.Decimal("12.50"), "decimal(10,2)", "12.50"),
        (dt.date(2024, 2, 29), "date", "2024-02-29"),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc), "timestamp", "2024-01-02 03:04:05.000006"),
        (dt.datetime(2024, 1, 2, 3, 4, 5), "timestamp_ntz", "2024-01-02 03:04:05"),
        ("", "string", ""),
    ],
)
def test_partition_values_round_trip(value, t, text):
    assert P.format_partition_value(value, t) == text
    back = P.parse_partition_value(text, t)
    if isinstance(value, float) and value != value:
        assert back != back
    else:
        assert back == value
    assert P.format_partition_value(None, t) is None and P.parse_partition_value(None, t) is None


def test_partition_paths_and_arrays():
    assert P.partition_path(["a", "b"], {"a": "x/y:z", "b": None}) == "a=x%2Fy%3Az/b=__HIVE_DEFAULT_PARTITION__"
    assert P.unescape_path_name(P.escape_path_name("100% =/?#")) == "100% =/?#"
    assert P.partition_path([], {}) == ""
    arr = P.partition_value_array("2024-01-02", pa.date32(), 3)
    assert arr.to_pylist() == [dt.date(2024, 1, 2)] * 3
    assert P.partition_value_array(None, pa.int32(), 2).to_pylist() == [None, None]
    ts = P.partition_value_array("2024-01-02 03:04:05.000006", pa.timestamp("us", tz="UTC"), 1)
    assert ts.to_pylist()[0] == dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
    with pytest.raises(SchemaMismatchError, match="not a valid integer"):
        P.parse_partition_value("x1", "integer")


def test_tantivy_panics_become_index_tables_errors():
    import tantivy

    from indextables_spark.core.split.format._tantivy import TantivyError, tantivy_call

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("a")
    with pytest.raises(TantivyError, match="building the schema of split X: tantivy panicked") as e:
        with tantivy_call("building the schema of split X"):
            sb.add_text_field("a")  # duplicate field: a pyo3 PanicException (BaseException)
    assert isinstance(e.value, IndexTablesError)
    with pytest.raises(KeyboardInterrupt):  # other BaseExceptions pass through untouched
        with tantivy_call("x"):
            raise KeyboardInterrupt


def test_scalar_lists_become_the_same_json_as_per_row_python():
    """documents._scalar_list_text (Arrow compute) = the per-row json.dumps of _jsonable, for
    lists of strings/integers/booleans with nulls, empty lists, escapes and sliced arrays."""
    import json
    import random

    import pyarrow as pa

    from indextables_spark.core.split.write import documents as D

    rng = random.Random(1)

    def per_row(a):
        return [None if v is None else {"": D._jsonable(v, a.type)} for v in a.to_pylist()]

    words = ["a", 'q"uote', "back\\slash", "new\nline", "tab\t", "ünï", "", "\x01ctl"]
    cases = [
        (pa.list_(pa.string()), words + [None]),
        (pa.large_list(pa.string()), words + [None]),
        (pa.list_(pa.int64()), [1, -5, None, 2**62]),
        (pa.list_(pa.int8()), [1, -5, None]),
        (pa.list_(pa.bool_()), [True, False, None]),
    ]
    for typ, pool in cases:
        rows = [
            None if rng.random() < 0.1 else [rng.choice(pool) for _ in range(rng.randint(0, 4))] for _ in range(300)
        ]
        arr = pa.array(rows, typ)
        for part in (arr, arr.slice(37, 200), arr.slice(0, 0)):
            fast = [None if x is None else json.loads(x) for x in D._nested_text(part).to_pylist()]
            assert fast == per_row(part), typ
    assert D._scalar_list_text(pa.array([[1.5]], pa.list_(pa.float64()))) is None  # NaN/inf: per row
