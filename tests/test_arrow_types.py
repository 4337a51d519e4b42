"""Our Spark type ↔ Arrow mapping (core/schema/types.py) against PySpark's own converters.

Spark checks the first Arrow batch a Python data source returns against
`to_arrow_schema(schema, timezone="UTC")` (types and nullability); the package builds that schema
itself (`arrow_schema(..., field_metadata=True)`) because PySpark's helper is private and changed
between versions. No SparkSession is needed.
"""

from __future__ import annotations

import copy

import pyarrow as pa
import pyspark
import pytest
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from indextables_spark.frontends.execute import spark_schema
from indextables_spark.ops.registry import OPERATIONS
from indextables_spark.errors import UnsupportedTypeError
from indextables_spark.core.schema.arrow_types import (
    SPARK_METADATA_KEY,
    arrow_schema,
    arrow_type,
    spark_schema_json,
    spark_type_json,
)

# The reference is PySpark 4.3 (what the package's mapping reproduces on every version): 4.1's
# converters differ (no field metadata, no `timezone` keyword, naive Arrow timestamps -> timestamp).
if tuple(int(x) for x in pyspark.__version__.split(".")[:2]) < (4, 3):
    pytest.skip(
        f"compares with pyspark 4.3's converters; this is pyspark {pyspark.__version__}", allow_module_level=True
    )


def _field(name, t, nullable=True, metadata=None):
    return {"name": name, "type": t, "nullable": nullable, "metadata": metadata or {}}


# Every type the package stores (README "Types"), nested types included, with non-nullable
# fields and elements, field metadata at the top level and inside structs.
INNER = {
    "type": "struct",
    "fields": [
        _field("n", "integer", nullable=False),
        _field("s", "string", metadata={"comment": "inner"}),
        _field("when", "timestamp"),
        _field("tags", {"type": "array", "elementType": "string", "containsNull": False}),
    ],
}
EVERY_TYPE = {
    "type": "struct",
    "fields": [
        _field("b", "byte"),
        _field("sh", "short"),
        _field("i", "integer", nullable=False),
        _field("l", "long"),
        _field("f", "float"),
        _field("d", "double"),
        _field("dec", "decimal(10,2)"),
        _field("dec_wide", "decimal(38,18)"),
        _field("dec_default", "decimal"),
        _field("s", "string", metadata={"comment": "a column comment", "n": 3}),
        # Collations: in the JSON metadata, moved into the type by PySpark, never in Arrow.
        _field("s_collated", "string", metadata={"__COLLATIONS": {"s_collated": "spark.UTF8_LCASE"}}),
        _field(
            "s_collated_comment",
            "string",
            metadata={"__COLLATIONS": {"s_collated_comment": "spark.UTF8_LCASE"}, "comment": "kept"},
        ),
        _field("bin", "binary"),
        _field("ok", "boolean"),
        _field("day", "date"),
        _field("ts", "timestamp"),
        _field("ts_ntz", "timestamp_ntz"),
        _field("arr", {"type": "array", "elementType": "long", "containsNull": True}),
        _field("arr_not_null", {"type": "array", "elementType": "double", "containsNull": False}),
        _field(
            "arr_of_arr",
            {
                "type": "array",
                "elementType": {"type": "array", "elementType": "date", "containsNull": True},
                "containsNull": True,
            },
        ),
        _field("m", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
        _field(
            "m_not_null",
            {"type": "map", "keyType": "integer", "valueType": "timestamp_ntz", "valueContainsNull": False},
        ),
        _field(
            "m_nested",
            {
                "type": "map",
                "keyType": "string",
                "valueType": {"type": "array", "elementType": INNER, "containsNull": True},
                "valueContainsNull": True,
            },
        ),
        _field("st", INNER, nullable=False, metadata={"comment": "a struct"}),
        _field(
            "st_deep",
            {
                "type": "struct",
                "fields": [
                    _field("inner", INNER),
                    _field(
                        "m",
                        {"type": "map", "keyType": "string", "valueType": "decimal(5,1)", "valueContainsNull": True},
                    ),
                    _field("raw", "binary", nullable=False),
                ],
            },
        ),
    ],
}


def spark(schema_json: dict) -> StructType:
    """StructType.fromJson on a copy (it rewrites the collation entries of the dict it is given)."""
    return StructType.fromJson(copy.deepcopy(schema_json))


def spark_to_arrow(schema: StructType) -> pa.Schema:
    """PySpark 4.3's conversion, as its data source worker calls it."""
    return to_arrow_schema(schema, timezone="UTC")


def test_every_type_matches_pyspark_exactly():
    ours = arrow_schema(EVERY_TYPE, field_metadata=True)
    theirs = spark_to_arrow(spark(EVERY_TYPE))
    assert ours.equals(theirs, check_metadata=True), f"\nours:   {ours}\ntheirs: {theirs}"
    # Field by field too (a readable failure), metadata included, nested fields included.
    for a, b in zip(ours, theirs):
        assert a.equals(b, check_metadata=True), (a, b)
        assert a.type == b.type and a.nullable == b.nullable and a.metadata == b.metadata
    # What Spark's check compares: types and nullability.
    assert ours.equals(theirs)
    assert ours.field("st").type.field("s").metadata == {SPARK_METADATA_KEY: b'{"comment": "inner"}'}
    assert ours.field("ts").type == pa.timestamp("us", tz="UTC")
    assert ours.field("ts_ntz").type == pa.timestamp("us")
    assert ours.field("day").type == pa.date32()
    assert ours.field("dec").type == pa.decimal128(10, 2)
    assert ours.field("dec_default").type == pa.decimal128(10, 0)
    assert not ours.field("st").nullable and not ours.field("st").type.field("n").nullable
    assert not ours.field("m_not_null").type.item_field.nullable
    assert not ours.field("m").type.key_field.nullable


def test_without_field_metadata_only_the_metadata_differs():
    plain = arrow_schema(EVERY_TYPE)
    theirs = spark_to_arrow(spark(EVERY_TYPE))
    assert plain.equals(theirs)  # types, names, nullability
    assert not plain.equals(theirs, check_metadata=True)

    def metadata_free(t: pa.DataType) -> bool:
        if pa.types.is_struct(t):
            return all(not t.field(i).metadata and metadata_free(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_list(t):
            return metadata_free(t.value_type)
        if pa.types.is_map(t):
            return metadata_free(t.key_type) and metadata_free(t.item_type)
        return True

    assert all(not f.metadata and metadata_free(f.type) for f in plain)


def test_columns_subset_and_read_extras():
    # The reader's schema: table columns plus `_score` (float) and `_snippet` (map<string,string>).
    from pyspark.sql.types import FloatType, MapType, StringType, StructField

    schema = spark(EVERY_TYPE)
    read = StructType(
        list(schema.fields)
        + [StructField("_score", FloatType(), True), StructField("_snippet", MapType(StringType(), StringType()), True)]
    )
    assert arrow_schema(read.jsonValue(), field_metadata=True).equals(spark_to_arrow(read), check_metadata=True)
    sub = arrow_schema(EVERY_TYPE, ["ts", "i", "m_nested"], field_metadata=True)
    full = spark_to_arrow(schema)
    assert sub.names == ["ts", "i", "m_nested"]
    assert all(sub.field(n).equals(full.field(n), check_metadata=True) for n in sub.names)


@pytest.mark.parametrize(
    "t",
    [
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "decimal(7,3)",
        "string",
        "binary",
        "boolean",
        "date",
        "timestamp",
        "timestamp_ntz",
        {"type": "array", "elementType": "string", "containsNull": False},
        {"type": "map", "keyType": "long", "valueType": "boolean", "valueContainsNull": True},
        INNER,
    ],
)
def test_each_type_alone(t):
    schema = {"type": "struct", "fields": [_field("c", t)]}
    assert arrow_schema(schema, field_metadata=True).equals(spark_to_arrow(spark(schema)), check_metadata=True)
    assert arrow_type(t) == spark_to_arrow(spark(schema)).field("c").type


def test_round_trip_spark_arrow_spark():
    # Arrow keeps no collation: the round trip is the identity on the schema without them.
    no_collation = {
        "type": "struct",
        "fields": [f for f in EVERY_TYPE["fields"] if "__COLLATIONS" not in f["metadata"]],
    }
    canonical = spark(no_collation).jsonValue()  # "decimal" -> "decimal(10,0)", ...
    back = spark_schema_json(arrow_schema(no_collation, field_metadata=True))
    assert back == canonical
    assert StructType.fromJson(back) == spark(no_collation)
    # With collations: the same schema minus the collations, other metadata kept.
    back_all = StructType.fromJson(spark_schema_json(arrow_schema(EVERY_TYPE, field_metadata=True)))
    assert back_all["s_collated"].metadata == {} and back_all["s_collated_comment"].metadata == {"comment": "kept"}
    assert back_all["s_collated"].dataType == back_all["s"].dataType
    # And Arrow -> Spark -> Arrow is the identity on the schemas Spark produces.
    a = spark_to_arrow(spark(EVERY_TYPE))
    assert arrow_schema(spark_schema_json(a), field_metadata=True).equals(a, check_metadata=True)


# Arrow types Spark's from_arrow_type accepts beyond the ones the package writes.
ARROW_INPUTS = pa.schema(
    [
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16(), nullable=False),
        pa.field("i32", pa.int32()),
        pa.field("i64", pa.int64()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("dec", pa.decimal128(20, 4)),
        pa.field("s", pa.string()),
        pa.field("ls", pa.large_string()),
        pa.field("bin", pa.binary()),
        pa.field("lbin", pa.large_binary()),
        pa.field("fbin", pa.binary(4)),
        pa.field("ok", pa.bool_()),
        pa.field("day", pa.date32()),
        pa.field("ts_ms_utc", pa.timestamp("ms", tz="UTC")),
        pa.field("ts_ns_tz", pa.timestamp("ns", tz="Europe/Paris")),
        pa.field("ts_us", pa.timestamp("us")),
        pa.field("ts_s", pa.timestamp("s")),
        pa.field("lst", pa.list_(pa.int64())),
        pa.field("llst", pa.large_list(pa.field("x", pa.string(), nullable=False))),
        pa.field("flst", pa.list_(pa.float64(), 3)),
        pa.field("mp", pa.map_(pa.string(), pa.string())),
        pa.field(
            "st",
            pa.struct(
                [
                    pa.field("a", pa.int32(), nullable=False),
                    pa.field(
                        "b", pa.list_(pa.timestamp("ms", tz="UTC")), metadata={SPARK_METADATA_KEY: b'{"comment": "x"}'}
                    ),
                ]
            ),
        ),
        pa.field("dict", pa.dictionary(pa.int32(), pa.string())),
        pa.field("nothing", pa.null()),
    ],
    metadata=None,
)


def test_arrow_to_spark_matches_pyspark():
    ours = StructType.fromJson(spark_schema_json(ARROW_INPUTS))
    theirs = from_arrow_schema(ARROW_INPUTS)
    assert ours == theirs
    assert ours.jsonValue() == theirs.jsonValue()
    for f in ARROW_INPUTS:
        assert (
            StructType.fromJson(
                {
                    "type": "struct",
                    "fields": [{"name": f.name, "type": spark_type_json(f.type), "nullable": True, "metadata": {}}],
                }
            )
            .fields[0]
            .dataType
            == theirs[f.name].dataType
        )


def test_result_specs_spark_schemas_match_pyspark():
    results = [op.load().result for op in OPERATIONS]
    assert len(results) >= 8
    for result in results:
        assert spark_schema(result) == from_arrow_schema(result.arrow_schema()), result.__name__


def test_unsupported_types_are_refused():
    with pytest.raises(UnsupportedTypeError):
        spark_type_json(pa.uint32())
    with pytest.raises(UnsupportedTypeError):
        arrow_schema({"type": "struct", "fields": [_field("v", "variant")]})
    with pytest.raises(UnsupportedTypeError):
        arrow_schema(
            {
                "type": "struct",
                "fields": [_field("a", {"type": "array", "elementType": "interval day", "containsNull": True})],
            }
        )
