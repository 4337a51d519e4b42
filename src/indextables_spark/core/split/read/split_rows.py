"""The split-level pieces of a read that the Spark-free search and the Spark reader share: a
split's matching rows (columns it lacks as NULL), partition values attached, small batches joined,
types conformed, snippets, the global top n."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from indextables_spark.core.schema.partitions import partition_value_array
from indextables_spark.core.split.read.reader import SCORE_COLUMN, SplitReader
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.model import Filter, columns_of

if TYPE_CHECKING:
    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.expr.search_query import SearchQuery


def columns_of_all(f: Filter) -> set[str]:
    return {c.strip("`") for c in columns_of(f)}


def snippet_column(
    split: SplitReader | None, table: pa.Table, query: SearchQuery | None, fields: Sequence[str]
) -> pa.Array:
    """`_snippet` as the Spark reader's snippetFields: one field → its snippet, several → a map
    field → snippet (fields without a match left out)."""
    if query is None or query.text is None:
        raise InvalidOptionError("snippets need a query")
    assert split is not None  # (a read with snippet fields opens its splits)

    def values(c: str) -> pa.Array:
        col = table.column(c)
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col

    snippets = {c: split.snippets(query, c, values(c)) for c in fields}
    if len(fields) == 1:
        return snippets[fields[0]]
    return pa.array(
        [{c: s[i].as_py() for c, s in snippets.items() if s[i].is_valid} for i in range(table.num_rows)],
        pa.map_(pa.string(), pa.string()),
    )


def split_rows(
    split: SplitReader,
    filters: Sequence[Filter],
    query: SearchQuery | None,
    names: Sequence[str],
    types: dict[str, pa.DataType],
    batch_rows: int,
    deletes: SplitDeletes | None = None,
) -> Iterator[pa.RecordBatch]:
    """Rows of one split matching the query and the (data-column) filters exactly, in row order,
    columns `names`. A split written before columns were added to the table (mergeSchema) has them
    NULL in every row (typed from `types`); filters on them are applied after they are attached."""

    stored = set(split.schema.names)
    # index-only columns read as NULL, but their filters are the index's (the split reader's)
    nulls = {n.lower() for n in names if n not in stored}
    absent = nulls - split.index_only
    if not nulls:
        for batch in split.read(filters, query, names, batch_rows, deletes=deletes):
            if batch.num_rows:
                yield batch
        return
    on_absent = [f for f in filters if any(c.strip("`").lower() in absent for c in columns_of(f))]
    others = [f for f in filters if not any(f is g for g in on_absent)]
    present = [n for n in names if n in stored]
    for batch in split.read(others, query, present, batch_rows, deletes=deletes):
        if not batch.num_rows:
            continue
        arrays, fields = [], []
        for n in names:
            if n in stored:
                arrays.append(batch.column(batch.schema.get_field_index(n)))
                fields.append(batch.schema.field(n))
            else:
                arrays.append(pa.nulls(batch.num_rows, types[n]))
                fields.append(pa.field(n, types[n]))
        full = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        if on_absent:
            full = full.filter(arrow_mask(full, on_absent))
        if full.num_rows:
            yield full


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch with `schema`'s types and nullability (a split written with an older type of a
    column, e.g. int before a widening, or a non-nullable field)."""
    cols = [c if c.type.equals(f.type) else c.cast(f.type) for c, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def joined(
    pieces: Iterator[tuple[AddFile, pa.RecordBatch]], rows: int, target: pa.Schema, partition_columns: Sequence[str]
) -> Iterator[pa.RecordBatch]:
    """Batches of `target` from the splits' data batches: small ones joined up to `rows` rows
    (order kept; joined pieces must share one schema), their partition values attached once per
    joined batch. A selective read finds a few rows in each of many splits, and every batch a
    Python data source yields pays its own Arrow serialization and JVM conversion (512 splits:
    ~440 batches of a few rows per query); attaching partition values per split cost as much as
    searching it."""
    pending: list[tuple[AddFile, pa.RecordBatch]] = []
    count = 0
    for add, b in pieces:
        if b.num_rows == 0:
            continue
        if b.num_rows >= rows // 2:  # big enough on its own: no copy
            if pending:
                yield with_partition_values(pending, target, partition_columns)
                pending, count = [], 0
            yield with_partition_values([(add, b)], target, partition_columns)
            continue
        pending.append((add, b))
        count += b.num_rows
        if count >= rows:
            yield with_partition_values(pending, target, partition_columns)
            pending, count = [], 0
    if pending:
        yield with_partition_values(pending, target, partition_columns)


def with_partition_values(
    pieces: Sequence[tuple[AddFile, Any]], target: pa.Schema, partition_columns: Sequence[str]
) -> Any:
    """The pieces' rows (RecordBatches sharing a schema, or one Table) as `target`: each row with
    its split's partition values, the data columns cast to the target's types where a split
    stored another (an older type), and target columns the data lacks NULL (`_indexall`, columns
    added after the split was written). A RecordBatch for batches, a Table for a Table."""

    data = pieces[0][1] if len(pieces) == 1 else pa.concat_batches([b for _, b in pieces])
    n = data.num_rows
    names = data.schema.names
    parts = set(partition_columns)
    cols = []
    for f in target:
        if f.name in parts:
            values = [add.partition_values.get(f.name) for add, _ in pieces]
            distinct = list(dict.fromkeys(values))
            if len(distinct) == 1:
                cols.append(partition_value_array(distinct[0], f.type, n))
            else:
                at = {v: i for i, v in enumerate(distinct)}
                each = pa.concat_arrays([partition_value_array(v, f.type, 1) for v in distinct])
                which = np.repeat([at[v] for v in values], [b.num_rows for _, b in pieces])
                cols.append(each.take(pa.array(which)))
        elif f.name in names:
            col = data.column(names.index(f.name))
            cols.append(col if col.type.equals(f.type) else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    if isinstance(data, pa.Table):
        return pa.Table.from_arrays(cols, schema=target)
    return pa.RecordBatch.from_arrays(cols, schema=target)


def top_n(table: pa.Table, limit: int) -> pa.Table:
    """The `limit` best rows of per-split top-n results, by `_score` descending."""
    return table.sort_by([(SCORE_COLUMN, "descending")]).slice(0, limit)
