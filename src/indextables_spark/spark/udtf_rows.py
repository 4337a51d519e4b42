"""Arrow results as the rows a plain (not Arrow) Python UDTF yields: one tuple per row, a value per
column in order, None kept, structs as tuples of their fields, lists and large lists as lists,
maps as dicts (values converted the same way, nested to any depth). The table functions of
table_functions.py, vector_functions.py and maintenance_functions.py yield through it."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa


def spark_value(v: Any, t: pa.DataType) -> Any:
    """Arrow's Python value (`to_pylist`) of type `t` → what a plain UDTF may yield."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(spark_value(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [spark_value(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: spark_value(x, t.item_type) for k, x in v}
    return v


def row_tuple(row: Mapping[str, Any], fields: Sequence[pa.Field]) -> tuple[Any, ...]:
    """One row (a dict of `to_pylist`): the values of `fields`, in their order."""
    return tuple(spark_value(row[f.name], f.type) for f in fields)


def table_rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    """Every row of `table`, its columns in order."""
    fields = list(table.schema)
    for row in table.to_pylist():
        yield row_tuple(row, fields)
