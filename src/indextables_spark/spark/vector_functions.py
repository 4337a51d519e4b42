"""The vector SQL table functions (see table_functions.py for how literal calls run distributed):

    SELECT * FROM indextables_vector_search('/path', 'emb', '[0.1, 0.2, ...]', 10)      -- rows + _distance
    SELECT * FROM indextables_vector_search('/path', NULL, '0.1,0.2,...', 10, "region = 'eu'", 'body:spark', 'none')
    SELECT * FROM indextables_hybrid_search('/path', 'body:spark', 'emb', '[0.1, ...]', 10, 'rrf')  -- + fused _score
    SELECT * FROM indextables_search_join(TABLE(queries), '/path', 'text', 'vec', 10)  -- it.search_join

With a query and a vector, both functions fuse the two rankings unless `fusion` is 'none' (then
the query only selects the rows): every route's default (fusion_spec.py). The table's vector
column is the argument `vector_column` (snake_case as these functions' other arguments and the
UDTFs' Python parameters; `column =>` is its deprecated old name).

The vector is a string (a JSON array or a comma list): an array literal is no plain literal, and
the literal rewrite of table_functions.py takes plain literals only. Their Python UDTFs run
IndexTable.search in the worker (no session there; options as at `it.register`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Mapping, cast

import pyarrow as pa

from indextables_spark.api.table import IndexTable
from indextables_spark.errors import InvalidOptionError
from indextables_spark.spark.udtf_rows import table_rows
from indextables_spark.util.renamed import renamed

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.split.read.vector.fusion_spec import FusionArg
    from indextables_spark.spark.search_join import JoinSearch

VECTOR_SEARCH = "indextables_vector_search"
HYBRID_SEARCH = "indextables_hybrid_search"
SEARCH_JOIN = "indextables_search_join"  # a TABLE argument: always the UDTF (spark/search_join.py)
JOIN_BATCH = 256  # queries of indextables_search_join searched at once (IndexTable.search_many)
VECTOR_PARAMS = {
    VECTOR_SEARCH: ("path", "vector_column", "vector", "k", "where", "query", "fusion"),
    HYBRID_SEARCH: ("path", "query", "vector_column", "vector", "k", "fusion", "where"),
}
OLD_ARGS = ("column",)  # named arguments still accepted (renamed: vector_column), with a FutureWarning


def vector_options(name: str, args: Mapping[str, Any]) -> dict[str, str]:
    """The read options of a vector (or hybrid) search call's arguments (None ones left out)."""
    vector = args.get("vector")
    if isinstance(vector, (list, tuple)):
        vector = ",".join(str(float(v)) for v in vector)
    if not isinstance(vector, str) or not vector.strip():
        raise InvalidOptionError(
            f"argument 'vector' must be numbers (a string '[0.1, 0.2]' or an array), got {vector!r}"
        )
    k = args.get("k")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k <= 0):
        raise InvalidOptionError(f"argument 'k' must be a positive integer, got {k!r}")
    out = {"vector": vector, "limit": str(k or 10)}
    column = renamed(name, "vector_column", args.get("vector_column"), "column", args.get("column"))
    if column is not None:
        out["vectorColumn"] = str(column)
    for arg in ("where", "query", "fusion"):  # (fusion: the read option's default when NULL)
        if args.get(arg) is not None:
            out[arg] = str(args[arg])
    return out


def _fused(name: str, args: Mapping[str, Any]) -> bool:
    """A UDTF call's rows carry `_score` (the fused score; NULL where a row has none): with a query
    argument (always for hybrid_search) unless `fusion` is 'none'. Decided on the arguments given,
    as analyze sees them (a value that is no constant counts as given)."""
    fusion = args.get("fusion")
    none = isinstance(fusion, str) and fusion.strip().lower() == "none"
    return (name == HYBRID_SEARCH or "query" in args) and not none


def vector_schema(snapshot: Snapshot, hybrid: bool) -> Any:
    """A vector search's rows: every column, (with fusion `_score`,) `_distance`."""
    from pyspark.sql.types import DoubleType, FloatType, StructField, StructType  # lazy: pyspark with a session

    extra = [StructField("_score", FloatType(), True)] if hybrid else []
    return StructType(list(snapshot.schema.fields) + extra + [StructField("_distance", DoubleType(), True)])


def vector_table(name: str, args: Mapping[str, Any], options: Mapping[str, Any]) -> pa.Table:
    """A vector or hybrid search call run in this process (IndexTable.search)."""
    opts = vector_options(name, args)
    table = IndexTable(str(args["path"]), options)
    vector = [float(v) for v in opts["vector"].strip().removeprefix("[").removesuffix("]").split(",") if v.strip()]
    return table.search(
        opts.get("query"),
        vector=vector,
        vector_column=opts.get("vectorColumn"),
        fusion=cast("FusionArg | None", opts.get("fusion")),  # (any text: parse_fusion checks it)
        where=opts.get("where"),
        limit=int(opts["limit"]),
    )


def vector_udtf(name: str, options: dict[str, str]) -> type:
    """The UDTF class of indextables_vector_search / indextables_hybrid_search."""
    from pyspark.sql.udtf import AnalyzeResult  # lazy: pyspark is imported only when a Spark session runs this

    params = VECTOR_PARAMS[name]

    class VectorSearch:
        @staticmethod
        def analyze(*args: Any, **named: Any) -> Any:
            given = {**dict(zip(params, args)), **named}
            snap = IndexTable(given["path"].value, options).snapshot()
            return AnalyzeResult(vector_schema(snap, _fused(name, {k: v.value for k, v in given.items()})))

        def eval(self, *args: Any, **named: Any) -> Iterator[tuple[Any, ...]]:
            given = {**dict(zip(params, args)), **named}
            found = vector_table(name, given, options)
            has = "_score" in found.schema.names
            if _fused(name, given) and not has:  # (a NULL query: no fusion, the column stays)
                found = found.add_column(found.num_columns - 1, "_score", pa.nulls(found.num_rows, pa.float32()))
            elif has and not _fused(name, given):
                found = found.drop_columns(["_score"])
            yield from table_rows(found)

    return VectorSearch


def search_join_udtf(options: dict[str, str]) -> type:
    """The UDTF class of indextables_search_join."""
    from pyspark.sql.udtf import AnalyzeResult  # lazy: pyspark is imported only when a Spark session runs this

    class SearchJoin:
        """indextables_search_join(TABLE(queries), path, text_col, vector_col, k, vector_column,
        fusion, where): it.search_join in SQL (spark/search_join.py's JoinSearch): Spark runs it on the
        queries' partitions, each row searched where it is, JOIN_BATCH rows at once."""

        @staticmethod
        def analyze(
            queries: Any, path: Any, text_col: Any = None, vector_col: Any = None, *rest: Any, **named: Any
        ) -> Any:
            from indextables_spark.spark.search_join import PREFIX, join_schema  # lazy: numpy, with the UDTF only

            table = IndexTable(path.value, options)
            return AnalyzeResult(
                join_schema(
                    queries.dataType,
                    table.snapshot(),
                    text_col.value if text_col else None,
                    vector_col.value if vector_col else None,
                    PREFIX,
                )
            )

        def eval(
            self,
            row: Any,
            path: str,
            text_col: str | None = None,
            vector_col: str | None = None,
            k: int | None = None,
            vector_column: str | None = None,
            fusion: str | None = None,
            where: str | None = None,
            column: str | None = None,
        ) -> Iterator[tuple[Any, ...]]:
            from indextables_spark.spark.search_join import PREFIX, JoinSearch  # lazy: numpy, with the UDTF only

            if not hasattr(self, "_join"):
                self._table = IndexTable(path, options)
                table_column = renamed(SEARCH_JOIN, "vector_column", vector_column, "column", column)
                # (None: the default, rrf; any text: parse_fusion checks it)
                fuse = cast("FusionArg | None", fusion if text_col and vector_col else None)
                version = self._table.version()
                self._join = JoinSearch(
                    path, options, version, text_col, vector_col, table_column, k or 10, fuse, where, PREFIX
                )
                self._pending: list[Any] = []
            self._pending.append(row)
            if len(self._pending) >= JOIN_BATCH:
                yield from self._flush()

        def terminate(self) -> Iterator[tuple[Any, ...]]:
            if getattr(self, "_pending", None):
                yield from self._flush()

        def _flush(self) -> Iterator[tuple[Any, ...]]:
            """The buffered queries searched at once (JoinSearch.matches), their matches."""
            join: JoinSearch = self._join
            rows, self._pending = self._pending, []
            values = [r.asDict() for r in rows]
            texts = [v.get(join.text_col) for v in values] if join.text_col else None
            vectors = [v.get(join.vector_col) for v in values] if join.vector_col else None
            for row, hits in zip(rows, join.matches(self._table, texts, vectors)):
                for hit in table_rows(hits):
                    yield tuple(row) + hit

    return SearchJoin


def vector_udtf_classes(options: dict[str, str]) -> dict[str, type]:
    """The UDTF classes of the vector functions, run with `options` (workers have no session)."""
    return {
        VECTOR_SEARCH: vector_udtf(VECTOR_SEARCH, options),
        HYBRID_SEARCH: vector_udtf(HYBRID_SEARCH, options),
        SEARCH_JOIN: search_join_udtf(options),
    }
