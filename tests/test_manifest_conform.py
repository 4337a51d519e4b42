"""log/manifest.conform: nested types that differ from FILE_ENTRY_SCHEMA only by their children's
nullability (DataFusion reads Avro map values and array items as non-null) are re-typed by a
zero-copy view, without pyarrow.compute; the result equals the cast's."""

from __future__ import annotations

import pyarrow as pa

from indextables_spark.core.log.state.file_entries import FILE_ENTRY_SCHEMA
from indextables_spark.core.log.state.manifest import _nullability_widened, conform

S = pa.string()


def _nn(name, t):
    return pa.field(name, t, nullable=False)


def test_only_nullability_widening_is_a_view():
    assert _nullability_widened(pa.list_(_nn("item", S)), pa.list_(S))
    assert _nullability_widened(pa.map_(S, _nn("value", S)), pa.map_(S, S))
    assert _nullability_widened(pa.struct([_nn("a", S)]), pa.struct([pa.field("a", S)]))
    assert not _nullability_widened(pa.list_(S), pa.list_(_nn("item", S)))  # narrowing
    assert not _nullability_widened(pa.list_(_nn("item", pa.int32())), pa.list_(pa.int64()))  # a real cast
    assert not _nullability_widened(pa.map_(S, S, keys_sorted=True), pa.map_(S, S))
    assert not _nullability_widened(pa.struct([pa.field("a", S)]), pa.struct([pa.field("b", S)]))
    assert not _nullability_widened(pa.int32(), pa.int64())


def test_conform_views_equal_casts():
    n = 5
    strict_map = pa.map_(S, _nn("value", S))
    strict_list = pa.list_(_nn("item", S))
    cols = {
        "path": pa.array([f"p{i}.split" for i in range(n)]),
        "partitionValues": pa.array([[("day", f"d{i}")] for i in range(n)], strict_map),
        "size": pa.array(range(n), pa.int64()),
        "minValues": pa.array([None, [("id", "1")], [], None, [("a", "b"), ("c", "d")]], strict_map),
        "splitTags": pa.array([None, ["x"], [], ["y", "z"], None], strict_list),
        "numMergeOps": pa.array([1, None, 3, None, 5], pa.int16()),  # a real cast (widening)
    }
    table = pa.table(cols)
    out = conform(table)
    assert out.schema == FILE_ENTRY_SCHEMA
    for name, col in cols.items():
        target = FILE_ENTRY_SCHEMA.field(name).type
        assert out.column(name).combine_chunks().equals(col.cast(target)), name
