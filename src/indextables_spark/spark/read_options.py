"""A read's options validated once (ReadOptions), the columns they declare (`columns`, `_score`,
`_snippet`), the query checked against the table's splits before a task runs, and the load
wrapper that copies the session's batch size and adds the top-n sort (see reader.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pyspark.sql.types import DoubleType, FloatType, MapType, StringType, StructField

from indextables_spark.config.options import Options
from indextables_spark.config.sessions import default_parallelism
from indextables_spark.core.schema.types import check_snippet_fields
from indextables_spark.core.split.read.vector.fusion_spec import DEFAULT_FUSION, Fusion, parse_fusion
from indextables_spark.errors import InvalidOptionError, SchemaMismatchError
from indextables_spark.spark.guard import INDEXALL

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.expr.model import Filter
    from indextables_spark.core.schema.types import ColumnSpec
    from indextables_spark.core.split.read.vector.query import NearestQuery


SCORE = "_score"
SNIPPET = "_snippet"
DISTANCE = "_distance"  # a vector search's distance (core/split/read/vector/nearest.py)
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


@dataclass(frozen=True)
class ReadOptions:
    """What the options ask of a read, validated once."""

    query: str | None
    order_by_score: bool
    limit: int | None
    with_score: bool  # a `_score` column is part of the schema
    snippet_fields: tuple[str, ...]
    batch_rows: int
    columns: tuple[str, ...] | None = None  # the `columns` option: the declared columns (None: all)
    vector: tuple[float, ...] | None = None  # the `vector` option: a vector search (limit: its k)
    vector_column: str | None = None
    fusion: Fusion | None = None  # with `query` and `vector`: the hybrid search (fusion_spec.parse_fusion)

    @property
    def top_n(self) -> bool:
        """Rows are ranked: each task returns only its best `limit` rows."""
        return self.limit is not None and (self.query is not None or self.vector is not None)

    @property
    def hybrid(self) -> bool:
        return self.fusion is not None


def read_options(opts: Options) -> ReadOptions:
    query = opts.get_str("query")
    order = (opts.get_str("orderBy") or "").strip()
    order_by_score = False
    if order:
        parts = order.split()
        if parts[0] != SCORE or len(parts) > 2 or (len(parts) == 2 and parts[1].lower() != "desc"):
            raise InvalidOptionError(
                f"option orderBy={order!r}: only '_score' (best first) is supported; for other orders use "
                f"DataFrame.orderBy(...) on the result"
            )
        order_by_score = True
        if query is None:
            raise InvalidOptionError("option orderBy='_score' needs option 'query' (scores rank query matches)")
    limit = None
    raw_limit = opts.get_str("limit")
    if raw_limit is not None:
        limit = opts.get_int("limit")
        if limit <= 0:
            raise InvalidOptionError(f"option limit={raw_limit!r}: expected a positive number of rows")
    raw_columns = opts.get_str("columns")
    columns = None if raw_columns is None else tuple(c.strip() for c in raw_columns.split(",") if c.strip())
    if columns is not None and len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise InvalidOptionError(f"option columns={raw_columns!r}: {dup} named more than once")
    named_score = columns is not None and SCORE in columns
    if named_score and query is None:
        raise InvalidOptionError(
            f"option columns={raw_columns!r}: '{SCORE}' needs option 'query' (scores rank query matches)"
        )
    with_score = (
        order_by_score or (limit is not None and query is not None) or opts.get_bool("withScore") or named_score
    )
    fields = tuple(f.strip() for f in (opts.get_str("snippetFields") or "").split(",") if f.strip())
    if columns is not None and SNIPPET in columns and not fields:
        raise InvalidOptionError(f"option columns={raw_columns!r}: '{SNIPPET}' needs option snippetFields")
    batch_rows = opts.get_int("read.batchSize")
    if batch_rows <= 0:
        raise InvalidOptionError(f"option read.batchSize={batch_rows}: expected a positive number of rows")
    vector, fusion = _vector_options(opts, query)
    if vector is not None:
        if fields:  # (as the Spark-free search: core/split/read/search.py's SearchPlan)
            raise InvalidOptionError(
                f"option snippetFields={opts.get_str('snippetFields')!r}: a vector search returns no snippets"
            )
        if order_by_score:
            raise InvalidOptionError("option orderBy: a vector search orders by `_distance` (or its fused `_score`)")
        limit = 10 if limit is None else limit
        with_score = fusion is not None  # the fused score
    return ReadOptions(
        query,
        order_by_score,
        limit,
        with_score,
        fields,
        batch_rows,
        columns,
        vector,
        opts.get_str("vectorColumn"),
        fusion,
    )


# what a stream refuses, and why (stream_read_options); each refusal names its option
_UNBOUNDED = "a stream's rows arrive micro-batch by micro-batch, without end"
_INSTEAD = "rank each micro-batch in foreachBatch, or read the table as a batch (spark.read)"
_UNSCORED = (
    "a stream returns no `_score`: BM25 weighs a match against the statistics of one table version, and "
    "a stream reads its versions one micro-batch at a time"
)


def stream_read_options(opts: Options) -> ReadOptions:
    """A stream's read options (spark/streaming.py): those of a batch read that each micro-batch
    answers row by row — `query` (its matches, unscored), `where`, `columns`, `snippetFields` —
    and the others refused naming the option (InvalidOptionError, as every route refuses an
    option): a ranking (`limit`, `orderBy`, a vector search) has no end of the rows to rank, a
    `_score` no one table version to weigh matches against, time travel is `startingVersion`'s."""
    vector = [k for k in ("vector", "vectorColumn", "fusion") if opts.get_str(k) is not None]
    if vector:
        raise InvalidOptionError(
            f"option{'s' if len(vector) > 1 else ''} {', '.join(vector)}: a stream runs no vector search "
            f"(the k nearest rows of a table version: {_UNBOUNDED}); {_INSTEAD}"
        )
    for key in ("versionAsOf", "timestampAsOf"):
        if opts.get_str(key) is not None:
            raise InvalidOptionError(
                f"option {key}: a stream reads the table's versions as they are committed; "
                f"start it at a version with option startingVersion"
            )
    if opts.get_str("limit") is not None:
        raise InvalidOptionError(
            f"option limit={opts.get_str('limit')!r}: a stream has no top n ({_UNBOUNDED}); {_INSTEAD}"
        )
    if opts.get_str("orderBy") is not None:
        raise InvalidOptionError(
            f"option orderBy={opts.get_str('orderBy')!r}: a stream returns rows as their splits are committed, "
            f"not ranked ({_UNBOUNDED}); {_INSTEAD}"
        )
    if opts.get_bool("withScore"):
        raise InvalidOptionError(f"option withScore: {_UNSCORED}")
    ro = read_options(opts)
    if ro.columns is not None and SCORE in ro.columns:
        raise InvalidOptionError(f"option columns={opts.get_str('columns')!r}: '{SCORE}': {_UNSCORED}")
    assert not ro.with_score and ro.vector is None and ro.limit is None  # (refused above)
    return ro


def _vector_options(opts: Options, query: str | None) -> tuple[tuple[float, ...] | None, Fusion | None]:
    """The `vector` option (a JSON array or comma list of numbers) and the `fusion.*` options: with
    option `query` too, a hybrid search fused by `fusion` (default rrf; `none`: the query only
    selects the rows), parsed as every route's fusion argument (fusion_spec.parse_fusion)."""
    raw = opts.get_str("vector")
    method = (opts.get_str("fusion") or "").strip().lower() or None
    if raw is None:
        if method is not None or opts.get_str("vectorColumn") is not None:
            raise InvalidOptionError("options fusion / vectorColumn need option 'vector' (the query vector)")
        return None, None
    text = raw.strip().removeprefix("[").removesuffix("]")
    try:
        vector = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InvalidOptionError(
            f"option vector={raw[:80]!r}: expected numbers (a JSON array or a comma list)"
        ) from None
    if not vector or not all(math.isfinite(v) for v in vector):
        raise InvalidOptionError(f"option vector={raw[:80]!r}: expected finite numbers")
    given = None
    if method is not None or query is not None:  # (the default method takes the fusion.* options too)
        window = opts.get_str("fusion.window")
        given = {
            "method": method or DEFAULT_FUSION,
            "rrf_k": opts.get_int("fusion.rrfK"),
            "text_weight": opts.get_float("fusion.textWeight"),
            "window": int(window) if window else None,
        }
    return vector, parse_fusion(given, with_query=query is not None, where="option fusion")


def declared_fields(
    ro: ReadOptions, table_fields: list[StructField], extra: list[StructField]
) -> tuple[list[StructField], list[StructField]]:
    """(data fields, extra fields) a read declares: every column, or those the `columns` option
    names in its order (unknown names: SchemaMismatchError naming them and the table's columns, as
    every read route refuses a column not in the table).
    The `_score` column stays while a top-n read orders by it (the load wrapper sorts on it)."""
    if ro.columns is None:
        return table_fields, extra
    by_name = {f.name: f for f in table_fields}
    virtual = {f.name: f for f in extra}
    unknown = [c for c in ro.columns if c not in by_name and c not in virtual]
    if unknown:
        raise SchemaMismatchError(
            f"option columns: {unknown} are not columns of the table (columns: {list(by_name)}"
            + (f"; with these options also {list(virtual)}" if virtual else "")
            + ")"
        )
    keep_score = ro.order_by_score or ro.top_n
    kept = {SCORE} if keep_score else set()
    if ro.vector is not None:  # the load wrapper ranks on it
        kept.add(DISTANCE)
    wanted_extra = [f for f in extra if f.name in ro.columns or f.name in kept]
    return [by_name[c] for c in ro.columns if c in by_name], wanted_extra


def table_specs(snapshot: Snapshot, opts: Options) -> list[ColumnSpec]:
    """How the table's columns are indexed: its recorded settings (typemap, ...) under these options,
    as the scan lays the table out (core/split/read/scan.py table_layout: a read's scan then finds
    them computed)."""
    from indextables_spark.core.split.read.scan import (
        table_layout,  # lazy: keeps `import indextables_spark.spark.read_options` free of numpy
    )

    return table_layout(snapshot, opts)[2]


def extra_fields(ro: ReadOptions, specs: Sequence[ColumnSpec], path: str) -> list[StructField]:
    """The `_score` / `_snippet` StructFields a read adds to the table's columns (`specs`:
    table_specs; snippet fields are checked against them as every route checks them)."""

    out: list[StructField] = []
    if ro.with_score:
        out.append(StructField(SCORE, FloatType(), True))
    if ro.vector is not None:
        out.append(StructField(DISTANCE, DoubleType(), True))
    if ro.snippet_fields:
        check_snippet_fields(specs, ro.snippet_fields, path)
        if not ro.query:
            raise InvalidOptionError("option snippetFields needs option 'query' (snippets highlight query matches)")
        one = len(ro.snippet_fields) == 1
        out.append(StructField(SNIPPET, StringType() if one else MapType(StringType(), StringType()), True))
    return out


def where_conditions(opts: Options, schema_json: Mapping[str, Any]) -> list[Filter]:
    """The `where` option: a predicate (the Spark-free `where` syntax, expr/where.py) decided
    inside the read, before a top-n or vector read ranks (a DataFrame filter after load()
    comes after the limit): the scan prunes by its partition conditions, pushes the others
    the splits apply exactly and checks the rest on the rows (a batch read, a stream's micro-batch)."""
    text = opts.get_str("where")
    if text is None or not text.strip():
        return []
    from indextables_spark.expr.where import (
        parse_where,  # lazy: keeps `import indextables_spark.spark.read_options` light
    )

    return parse_where(text, schema_json)


def load_options(spark: Any, given: Mapping[str, object]) -> dict[str, str]:
    """Session settings a read needs that the data source cannot see (it gets no Spark conf):
    the Arrow batch size, and the cores (so that a small read is one wave of tasks)."""
    keys = {str(k).lower().removeprefix("spark.indextables.") for k in given}
    out: dict[str, str] = {}
    if "read.batchsize" not in keys:
        size = spark.conf.get(ARROW_BATCH_CONF, None)
        if size:
            out["read.batchSize"] = str(size)
    if "read.minpartitions" not in keys:
        out["read.minPartitions"] = str(default_parallelism(spark))
    return out


def finish_load(df: Any, given: Mapping[str, object]) -> Any:
    """The read as the user sees it: the global top n / score order the options ask for, and
    without the virtual `_indexall` column."""

    ro = read_options(Options.of({str(k): v for k, v in given.items()}))
    df = df.drop(INDEXALL)  # the guard already dropped `_indexguard`
    if ro.vector is not None:
        return _nearest(df, ro)
    if ro.order_by_score or ro.top_n:
        df = df.orderBy(df[SCORE].desc())
    if ro.limit is not None:
        df = df.limit(ro.limit)
    return df


def nearest_query(ro: ReadOptions, specs: Sequence[ColumnSpec], opts: Options, path: str) -> NearestQuery:
    """The vector search of a read's options (NearestQuery.build), checked against the table's
    vector columns (InvalidOptionError naming the column, the dimensions, the vector columns)."""
    from indextables_spark.core.split.read.vector.query import (  # lazy: numpy
        NearestQuery,
        bound_to_table,
        vector_columns,
    )

    assert ro.vector is not None and ro.limit is not None
    nq = NearestQuery.build(
        ro.vector,
        ro.limit,
        ro.fusion,
        opts,
        column=ro.vector_column,
        vector_columns=vector_columns(specs),
        where=path,
        column_option="option vectorColumn",
    )
    return bound_to_table(specs, nq, path)


def _nearest(df: Any, ro: ReadOptions) -> Any:
    """The answer of a vector read: its k nearest rows (each task returns its own k nearest,
    ranked again here), or with fusion the k best of the fused rankings as the read's one task
    returns them, best first (it fused every split's candidates: core/split/read/vector/)."""
    from indextables_spark.config.sessions import functions  # lazy: pyspark with a session only

    assert ro.limit is not None  # a vector read has k
    if ro.fusion is not None:
        return df
    return df.orderBy(functions(df).col(DISTANCE).asc_nulls_last()).limit(ro.limit)
