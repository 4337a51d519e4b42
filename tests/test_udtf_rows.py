"""spark/udtf_rows.py: Arrow rows as the tuples a plain Python UDTF yields."""

from __future__ import annotations

import pyarrow as pa

from indextables_spark.spark.udtf_rows import row_tuple, table_rows


def test_nested_values_none_and_column_order():
    point = pa.struct([("x", pa.int64()), ("tags", pa.list_(pa.string()))])
    table = pa.table(
        {
            "id": pa.array([1, None], pa.int64()),
            "p": pa.array([{"x": 1, "tags": ["a"]}, None], point),
            "ps": pa.array([[{"x": 2, "tags": None}], []], pa.large_list(point)),
            "m": pa.array([[("k", {"x": 3, "tags": []})], None], pa.map_(pa.string(), point)),
        }
    )
    assert list(table_rows(table)) == [
        (1, (1, ["a"]), [(2, None)], {"k": (3, [])}),
        (None, None, [], None),
    ]


def test_row_tuple_takes_the_given_fields_in_their_order():
    table = pa.table({"a": [1], "_score": [0.5], "b": [{"c": None}]})
    fields = [table.schema.field("b"), table.schema.field("a")]
    assert row_tuple(table.to_pylist()[0], fields) == ((None,), 1)
