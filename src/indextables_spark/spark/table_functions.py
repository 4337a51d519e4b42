"""SQL table functions for search and aggregations.

    SELECT * FROM indextables_search('/path', 'body:spark AND tags:sql', 10)      -- rows + _score, best first
    SELECT * FROM indextables_search('/path', 'body:spark', 10, NULL, 'id,title') -- only those columns (+ _score)
    SELECT * FROM indextables_aggregate('/path', '{"by_tag": {"terms": {"field": "tag"}}}', 'body:spark')
    SELECT * FROM indextables_count('/path', 'body:spark')
    SELECT * FROM indextables_vector_search('/path', 'emb', '[0.1, 0.2, ...]', 10)  -- vector_functions.py

Two ways they run:

1. Through `spark.sql(...)` after `it.register(spark)` (the normal case): the wrapper finds calls
   whose arguments are literals and replaces each by a temporary view over a *distributed* plan:
   `indextables_search` becomes the indextables read with `query`/`orderBy=_score`/`limit`
   (one task per group of splits, each returning its top n; Spark merges them), so the function
   is as parallel as `spark.read`; `indextables_aggregate` and `indextables_count` run
   `IndexTable.aggregate` / `IndexTable.count` when `spark.sql` is called (a Spark job, or driver threads
   in local mode) and the view holds the result rows.
2. Otherwise (arguments that are not literals, or SQL reaching Spark without the wrapper), the
   same names are Python UDTFs. A UDTF runs in ONE Python worker with no SparkSession, so it
   searches every split there (threads; Tantivy releases the GIL): correct, not distributed.
   Like the maintenance functions, its options (credentials, ...) are the session's
   `spark.indextables.*` conf at `it.register` time.

Aggregation rows (both ways): `agg` (name path, `parent.child`), `keys` (bucket keys from the top,
as strings), `doc_count` (bucket rows), `metric` (`count`/`min`/`max`/`sum`/`avg`, `value`, or a
percent such as `50.0`), `value` (DOUBLE) and `value_text` (the value as text: dates stay
readable). A row with agg `_all` holds the number of matching rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import pyarrow as pa

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import Options
from indextables_spark.config.sessions import functions, with_session_options
from indextables_spark.core.split.aggregate.agg_request import parse_request
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.lexer import Lexicon, Token, end_of, token_at
from indextables_spark.spark.udtf_rows import table_rows
from indextables_spark.spark.vector_functions import (
    HYBRID_SEARCH,
    OLD_ARGS,
    SEARCH_JOIN,
    VECTOR_PARAMS,
    VECTOR_SEARCH,
    vector_options,
    vector_udtf_classes,
)

if TYPE_CHECKING:
    from pyspark.sql.udtf import AnalyzeArgument as Arg

    OptArg = Arg | None  # an argument a UDTF call may leave out

    from indextables_spark.core.log.read.snapshot import Snapshot

# A row of AGG_SCHEMA: aggregation path, bucket keys, doc count, metric, its number, its text
AggRow = tuple[str, list[str | None], int | None, str | None, float | None, str | None]

SEARCH = "indextables_search"
AGGREGATE = "indextables_aggregate"
COUNT = "indextables_count"
FUNCTIONS = (SEARCH, AGGREGATE, COUNT, VECTOR_SEARCH, HYBRID_SEARCH)
PARAMS = {
    SEARCH: ("path", "query", "limit", "snippet_fields", "columns"),
    AGGREGATE: ("path", "aggs", "query", "partition_filter"),
    COUNT: ("path", "query", "partition_filter"),
    **VECTOR_PARAMS,
}
REQUIRED = {SEARCH: 2, AGGREGATE: 2, COUNT: 1, VECTOR_SEARCH: 3, HYBRID_SEARCH: 4}
AGG_SCHEMA = "agg string, keys array<string>, doc_count bigint, metric string, value double, value_text string"
COUNT_SCHEMA = "count bigint"

_CALL = re.compile(r"(?i)(?<![\w.`$])(" + "|".join(FUNCTIONS) + r")\s*\(")


# ---------------------------------------------------------------------------------------------
# Finding calls with literal arguments in SQL text


@dataclass(frozen=True)
class Call:
    name: str  # lower-case function name
    start: int  # span in the SQL text, name to closing parenthesis
    end: int
    args: dict[str, Any]  # parameter name -> literal value


def skip_quoted(text: str, i: int) -> int:
    """Index after the string literal / quoted identifier / comment starting at i (else i)."""
    c = text[i]
    if c in "'\"`":
        j = i + 1
        while j < len(text):
            if text[j] == "\\" and c != "`":
                j += 2
                continue
            if text[j] == c:
                return j + 1
            j += 1
        return len(text)
    if text.startswith("--", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j + 1
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    return i


# Spark SQL literals: strings in either quote with backslash escapes, signed numbers; `name =>`
_LITERALS = Lexicon(
    number=r"[-+]?\d+(?:\.\d+)?",
    word=r"[A-Za-z_]\w*",
    punct=",()",
    double_quoted="string",
    backslash_escapes=True,
    operators=("=>",),
)
_WORD_VALUES: dict[str, Any] = {"null": None, "true": True, "false": False}


def _literal(tok: Token | None) -> tuple[bool, Any]:
    """(is a literal, its value) of a token."""
    if tok is None:
        return False, None
    if tok.kind == "string":
        return True, tok.value
    if tok.kind == "number":
        return True, float(tok.text) if "." in tok.text else int(tok.text)
    if tok.kind == "word" and tok.text.lower() in _WORD_VALUES:
        return True, _WORD_VALUES[tok.text.lower()]
    return False, None


def _parse_args(text: str, pos: int, name: str) -> tuple[dict[str, Any], int] | None:
    """Literal arguments from just after `(`; (args, index after `)`), or None if not literals."""
    params = PARAMS[name]
    args: dict[str, Any] = {}
    positional = 0
    tok = token_at(text, pos, _LITERALS)
    if tok is not None and tok.text == ")":
        return args, end_of(tok)
    while True:
        key = None
        if tok is not None and tok.kind == "word" and tok.text.lower() not in _WORD_VALUES:
            arrow = token_at(text, end_of(tok), _LITERALS)
            if arrow is None or arrow.text != "=>":
                return None
            key = tok.text.lower()
            tok = token_at(text, end_of(arrow), _LITERALS)
        is_literal, value = _literal(tok)
        if not is_literal or tok is None:
            return None
        if key is None:
            if positional >= len(params):
                return None
            key = params[positional]
            positional += 1
        if key not in params and not (name in VECTOR_PARAMS and key in OLD_ARGS):
            return None
        args[key] = value
        sep = token_at(text, end_of(tok), _LITERALS)
        if sep is None or sep.text not in (",", ")"):
            return None
        if sep.text == ")":
            return args, end_of(sep)
        tok = token_at(text, end_of(sep), _LITERALS)


def find_calls(text: str) -> list[Call]:
    calls = []
    i = 0
    while i < len(text):
        j = skip_quoted(text, i)
        if j != i:
            i = j
            continue
        m = _CALL.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_.`$")):
            name = m.group(1).lower()
            parsed = _parse_args(text, m.end(), name)
            if (
                parsed is not None
                and len(parsed[0]) >= REQUIRED[name]
                and all(
                    k in parsed[0] or (k == "vector_column" and "column" in parsed[0])
                    for k in PARAMS[name][: REQUIRED[name]]
                )
            ):
                calls.append(Call(name, i, parsed[1], parsed[0]))
                i = parsed[1]
                continue
        i += 1
    return calls


def rewrite_sql(spark: Any, text: str) -> str:
    """The SQL with every literal-argument call replaced by a temporary view (see module doc)."""
    calls = find_calls(text)
    if not calls:
        return text
    out, last = [], 0
    for call in calls:
        out.append(text[last : call.start])
        out.append(_view_for(spark, call))
        last = call.end
    out.append(text[last:])
    return "".join(out)


def _view_for(spark: Any, call: Call) -> str:
    digest = hashlib.sha1(json.dumps([call.name, call.args], sort_keys=True, default=str).encode()).hexdigest()
    name = f"__{call.name}_{digest[:16]}"
    _dataframe(spark, call).createOrReplaceTempView(name)
    return f"`{name}`"


def _dataframe(spark: Any, call: Call) -> Any:
    a = call.args
    path = _text(call, "path")
    if call.name == SEARCH:
        reader = spark.read.format("indextables").option("query", _text(call, "query")).option("orderBy", "_score")
        if a.get("limit") is not None:
            reader = reader.option("limit", _limit(call))
        if a.get("snippet_fields"):
            reader = reader.option("snippetFields", _text(call, "snippet_fields"))
        if a.get("columns") is not None:
            reader = reader.option("columns", _text(call, "columns"))
        return reader.load(path)
    if call.name in (VECTOR_SEARCH, HYBRID_SEARCH):
        reader = spark.read.format("indextables")
        for key, value in vector_options(call.name, a).items():
            reader = reader.option(key, value)
        return reader.load(path)
    if call.name == AGGREGATE:
        result = IndexTable(path, spark=spark).aggregate(
            _text(call, "aggs"), query=a.get("query"), partition_filter=a.get("partition_filter"), spark=spark
        )
        return spark.createDataFrame(aggregation_rows(_text(call, "aggs"), result), AGG_SCHEMA)
    return spark.createDataFrame(
        [(count_rows(spark, path, a.get("query"), a.get("partition_filter"), None),)], COUNT_SCHEMA
    )


def _text(call: Call, key: str) -> str:
    return required_text(call.name, key, call.args.get(key))


def _limit(call: Call) -> int:
    return positive_int(call.name, "limit", call.args.get("limit"))


def required_text(function: str, key: str, v: Any) -> str:
    """Argument `key` of a call of `function`: a non-empty string (InvalidOptionError naming both)."""
    if not isinstance(v, str) or not v:
        raise InvalidOptionError(f"{function}: argument {key!r} must be a non-empty string, got {v!r}")
    return v


def positive_int(function: str, key: str, v: Any) -> int:
    """Argument `key` of a call of `function`: a positive integer (InvalidOptionError naming both)."""
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise InvalidOptionError(f"{function}: argument {key!r} must be a positive integer, got {v!r}")
    return v


# ---------------------------------------------------------------------------------------------
# Results as rows


def count_rows(
    spark: Any, path: str, query: str | None, partition_filter: str | None, options: Mapping[str, Any] | None
) -> int:
    return IndexTable(path, with_session_options(spark, options)).count(query, partition_filter=partition_filter)


def _text_of(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    return str(v)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float, decimal.Decimal)):
        return float(v)
    return None


def aggregation_rows(aggs: Mapping[str, Any] | str, result: Mapping[str, Any]) -> list[AggRow]:
    """`IndexTable.aggregate`'s result as rows of AGG_SCHEMA."""

    rows: list[AggRow] = [("_all", [], int(result["doc_count"]), None, None, None)]
    _flatten(parse_request(aggs), result, "", [], rows)
    return rows


def _flatten(
    request: Mapping[str, Any], result: Mapping[str, Any], prefix: str, keys: list[str | None], rows: list[AggRow]
) -> None:
    for name, body in request.items():
        kind = next(k for k in body if k not in ("aggs", "aggregations"))
        path = prefix + name
        r = result[name]
        if "buckets" in r:
            subs = body.get("aggs", body.get("aggregations")) or {}
            for b in r["buckets"]:
                bkeys = keys + [_text_of(b["key"])]
                rows.append((path, bkeys, int(b["doc_count"]), None, None, None))
                if subs:
                    _flatten(subs, b, path + ".", bkeys, rows)
        elif kind == "stats":
            for metric in ("count", "min", "max", "sum", "avg"):
                rows.append((path, keys, None, metric, _number(r[metric]), _text_of(r[metric])))
        elif kind == "percentiles":
            for p, v in r["values"].items():
                rows.append((path, keys, None, p, _number(v), _text_of(v)))
        else:
            rows.append((path, keys, None, "value", _number(r["value"]), _text_of(r["value"])))


# ---------------------------------------------------------------------------------------------
# Python UDTF fallbacks (one worker, no session)


def search_table(
    path: str,
    query: str,
    limit: int | None,
    options: Mapping[str, Any],
    snippet_fields: str | None = None,
    columns: str | None = None,
) -> pa.Table:
    """The rows of the best matches (all of them without a limit), best first, in this process:
    the Spark-free search's plan (core/split/read/search.py), scored like every other route."""
    from indextables_spark.core.split.read.search import (  # lazy: keeps `import indextables_spark.spark.table_functions` free of numpy
        SearchPlan,
    )
    from indextables_spark.core.split.read.search import (
        search_table as search_plan,  # lazy: keeps `import indextables_spark.spark.table_functions` free of numpy
    )
    from indextables_spark.core.split.read.scan import TableScan  # lazy: as above
    from indextables_spark.expr.search_query import SearchQuery  # lazy: as above
    from indextables_spark.spark.read_options import (  # lazy: pyspark is imported only when a Spark session runs this
        SCORE,
        SNIPPET,
    )

    # (the literal calls' checks: `_text`, `_limit`; a NULL query or limit 0 is no search here either)
    query = required_text(SEARCH, "query", query)
    limit = None if limit is None else positive_int(SEARCH, "limit", limit)
    table = IndexTable(path, options)
    snap = table.snapshot()
    declared = [f.name for f in search_schema(table, snap, snippet_fields, columns).fields]
    fields = tuple(f.strip() for f in (snippet_fields or "").split(",") if f.strip())
    data = [c for c in declared if c not in (SCORE, SNIPPET)]
    scan = TableScan(table.storage, snap, table.options, query=SearchQuery(query), columns=data, snippets=fields)
    plan = SearchPlan(scan, scan.live_files())
    return search_plan(plan, limit, scored=True).select(declared)


def search_schema(table: IndexTable, snapshot: Snapshot, snippet_fields: str | None, columns: str | None = None) -> Any:
    """The rows' schema of a search of `table` at `snapshot`: every column (or those `columns`
    names, as the read option) + `_score` (+ `_snippet`)."""
    from pyspark.sql.types import StructType  # lazy: pyspark is imported only when a Spark session runs this

    from indextables_spark.spark.read_options import (  # lazy: pyspark is imported only when a Spark session runs this
        declared_fields,
        extra_fields,
        read_options,
        table_specs,
    )

    opts = {"query": "*", "orderBy": "_score", "snippetFields": snippet_fields or ""}
    ro = read_options(Options.of(opts if columns is None else {**opts, "columns": columns}))
    extra = extra_fields(ro, table_specs(snapshot, table.options), table.path)
    fields, extra = declared_fields(ro, list(snapshot.schema.fields), extra)
    return StructType(fields + extra)


def _udtf_classes(options: dict[str, str]) -> dict[str, type]:
    from pyspark.sql.udtf import AnalyzeResult  # lazy: pyspark is imported only when a Spark session runs this

    class Search:
        @staticmethod
        def analyze(
            path: Arg, query: Arg, limit: OptArg = None, snippet_fields: OptArg = None, columns: OptArg = None
        ) -> AnalyzeResult:
            # path.value is None where the path is no constant: IndexTable refuses it
            table = IndexTable(path.value, options)  # type: ignore[arg-type]
            return AnalyzeResult(
                search_schema(
                    table,
                    table.snapshot(),
                    snippet_fields.value if snippet_fields else None,
                    columns.value if columns else None,
                )
            )

        def eval(
            self,
            path: str,
            query: str,
            limit: int | None = None,
            snippet_fields: str | None = None,
            columns: str | None = None,
        ) -> Iterator[tuple[Any, ...]]:
            yield from table_rows(search_table(path, query, limit, options, snippet_fields, columns))

    class Aggregate:
        def eval(
            self, path: str, aggs: str, query: str | None = None, partition_filter: str | None = None
        ) -> Iterator[AggRow]:
            result = IndexTable(path, options).aggregate(
                aggs, query=query, partition_filter=partition_filter, execution="driver"
            )
            yield from aggregation_rows(aggs, result)

    class Count:
        def eval(
            self, path: str, query: str | None = None, partition_filter: str | None = None
        ) -> Iterator[tuple[int]]:
            yield (count_rows(None, path, query, partition_filter, options),)

    return {SEARCH: Search, AGGREGATE: Aggregate, COUNT: Count, **vector_udtf_classes(options)}


def register_table_functions(spark: Any, conf: dict[str, str]) -> None:
    """Register the UDTF fallbacks (the `spark.sql` wrapper rewrites literal calls first); they run
    with `conf` (the session's spark.indextables.* entries: workers have no session)."""

    udtf = functions(spark).udtf

    classes = _udtf_classes(dict(conf))
    # Plain (not Arrow) UDTFs: Arrow UDTFs need pandas, which is not a dependency.
    spark.udtf.register(SEARCH, udtf(classes[SEARCH], useArrow=False))
    spark.udtf.register(AGGREGATE, udtf(classes[AGGREGATE], returnType=AGG_SCHEMA, useArrow=False))
    spark.udtf.register(COUNT, udtf(classes[COUNT], returnType=COUNT_SCHEMA, useArrow=False))
    spark.udtf.register(VECTOR_SEARCH, udtf(classes[VECTOR_SEARCH], useArrow=False))
    spark.udtf.register(HYBRID_SEARCH, udtf(classes[HYBRID_SEARCH], useArrow=False))
    spark.udtf.register(SEARCH_JOIN, udtf(classes[SEARCH_JOIN], useArrow=False))
