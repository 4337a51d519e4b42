"""`spark.sql` statements that read indextables tables, planned for the index (after `register`).

frontends/sqlplan/statement.py plans the statement; here it runs, in classic and Spark Connect sessions:
- route "scan": each table reference reads through its own guarded scan declaring only the
  columns the statement uses (the `columns` read option); search operators arrive as pushed
  `_indexall` filters; Spark runs the rest of the statement as written;
- route "index aggregate": the aggregate is computed from the index (core/split/aggregate/group_aggregate.py,
  threads of this process over the splits' matching rows, or per-split counts), and Spark gets
  the result rows with the names and types it gives the statement itself (taken from Spark's
  analysis of the scan route); ORDER BY / LIMIT run in Spark over those rows.
`EXPLAIN <statement>` says which route a statement takes and why; `it.explain(df)` lists the
route of a DataFrame `spark.sql` returned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import pyarrow as pa

from indextables_spark.api.table import IndexTable
from indextables_spark.core.schema.arrow_types import arrow_type
from indextables_spark.core.schema.partitions import parse_partition_value
from indextables_spark.core.split.aggregate import group_aggregate as ga
from indextables_spark.core.split.aggregate.aggregate import ALL_BUCKETS
from indextables_spark.core.split.aggregate.buckets import describe
from indextables_spark.core.split.aggregate.group_aggregate import LONG_MAX, LONG_MIN, SumOverflow
from indextables_spark.errors import IndexTablesError
from indextables_spark.expr import operators as ops
from indextables_spark.expr.operators import SearchOperatorError
from indextables_spark.expr.where import column_types
from indextables_spark.frontends.sqlplan import plans
from indextables_spark.frontends.sqlplan import statement as st
from indextables_spark.frontends.sqlplan.operators import mentions_operators, tokenize
from indextables_spark.spark.guard import guarded
from indextables_spark.spark.sql_bridge import raw_load, view_names, view_source

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from indextables_spark.api.table import IndexTable
    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.split.aggregate.group_aggregate import GroupRequest
    from indextables_spark.core.split.read.search import SearchPlan

log = logging.getLogger(__name__)
ROUTE_ATTR = "_indextables_route"


@dataclass
class Route:
    """How a statement ran: for EXPLAIN and it.explain(df)."""

    name: str  # "scan" | "index aggregate"
    scans: list[dict[str, Any]] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    statement: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "route": self.name,
            "scans": self.scans,
            "searches": self.searches,
            "notes": self.notes,
            "spark_statement": self.statement,
        }

    def text(self) -> str:
        lines = [f"indextables route: {self.name}"]
        for s in self.scans:
            cols = "every column" if s["columns"] is None else (", ".join(s["columns"]) or "no data columns")
            lines.append(f"  table {s['table']} ({s['path']}): reads {cols}")
            if s.get("query"):
                lines.append(f"    index query: {s['query']}")
        for q in self.searches:
            lines.append(f"  search (one index query per table): {q}")
        for n in self.notes:
            lines.append(f"  {n}")
        lines.append(f"  statement Spark runs: {self.statement}")
        return "\n".join(lines)


class SparkCatalog:
    """The statement planner's view of the session: our views, table layouts, other tables' columns."""

    def __init__(self, spark: Any):
        self.spark = spark
        self._tables: dict[plans.Source, IndexTable] = {}
        self._infos: dict[plans.Source, plans.TableInfo] = {}
        self._snapshots: dict[plans.Source, Snapshot] = {}

    def view(self, name: str) -> plans.Source | None:
        src = view_source(self.spark, name)
        if src is None:
            return None
        return plans.Source(src.path, tuple(sorted((str(k), str(v)) for k, v in src.options.items())))

    def table(self, source: plans.Source) -> IndexTable:
        if source not in self._tables:
            opts = {k: v for k, v in source.options if k.lower() != "path"}
            self._tables[source] = IndexTable(source.path, opts, spark=self.spark)
        return self._tables[source]

    def snapshot(self, source: plans.Source) -> Snapshot:
        """The table version the statement is planned on (read once, by `info`)."""
        self.info(source)
        return self._snapshots[source]

    def info(self, source: plans.Source) -> plans.TableInfo:
        if source in self._infos:
            return self._infos[source]
        from indextables_spark.spark.read_options import (
            table_specs,  # lazy: pyspark is imported only when a Spark session runs this
        )

        table = self.table(source)
        snap = table.snapshot()
        self._snapshots[source] = snap
        names = [f["name"] for f in snap.schema_json["fields"]]
        opts = {k.lower(): v for k, v in source.options}
        virtual = ["_indexall"]
        if str(opts.get("withscore", "")).lower() == "true":
            virtual.append("_score")
        if opts.get("snippetfields"):
            virtual.append("_snippet")
        types = {k: v for k, v in column_types(snap.schema_json).items() if k in names}
        info = plans.TableInfo(names + virtual, types, list(snap.partition_columns), table_specs(snap, table.options))
        self._infos[source] = info
        return info

    def check_query(self, source: plans.Source, query: str) -> None:
        """QueryParseError now for a query the table's splits cannot parse (not in a task)."""
        from indextables_spark.core.split.read.query_parsing import (
            plan_query,  # lazy: keeps `import indextables_spark.spark.sql_routes` free of pyarrow
        )
        from indextables_spark.expr.search_query import SearchQuery  # lazy: as above

        plan_query(self.snapshot(source), self.table(source).options, SearchQuery(query))

    def other_columns(self, parts: tuple[str, ...]) -> list[str] | None:
        name = ".".join(f"`{p}`" for p in parts)
        try:
            return list(self.spark.table(name).columns)
        except Exception:  # noqa: BLE001 - an unknown table: the statement is not resolved (Spark reports it)
            return None


def _explain_prefix(text: str) -> tuple[str | None, str]:
    """('EXPLAIN [mode]', the statement) when the text is an EXPLAIN, else (None, text)."""

    tokens = tokenize(text) or []
    if not tokens or tokens[0].text.upper() != "EXPLAIN":
        return None, text
    # sqlglot reads EXPLAIN as a command: the rest of the text is one token
    head, rest = text[: tokens[0].end + 1], text[tokens[0].end + 1 :]
    words = rest.split(None, 1)
    if len(words) == 2 and words[0].upper() in ("EXTENDED", "FORMATTED", "CODEGEN", "COST"):
        return f"{head} {words[0]}", words[1]
    return head, rest


def run(spark: Any, text: str, run_sql: Callable[[str], Any]) -> Any:
    """The statement's DataFrame through our routes, or None to let Spark run the text as written."""

    explain, body = _explain_prefix(text)
    catalog = SparkCatalog(spark)
    try:
        plan = st.plan(body, catalog, view_names())
    except IndexTablesError:
        raise
    except Exception as e:  # noqa: BLE001 - a planner fault: Spark runs a plain statement as before
        if mentions_operators(body):
            raise SearchOperatorError(f"the statement's search operators could not be planned: {e!r}") from e
        log.warning("indextables: statement not planned for the index (%r); Spark runs it as written", e)
        return None
    if plan is None:
        return None
    for scan in plan.scans:
        _create_scan(spark, scan, int(catalog.snapshot(scan.source).version))
    route = Route(
        "scan",
        [
            {"table": s.written, "path": s.source.path, "columns": s.columns, "query": s.query, "view": s.view}
            for s in plan.scans
        ],
        plan.searches,
        list(plan.notes),
        plan.text,
    )
    if explain is not None:
        return _explain(spark, explain, plan, route, run_sql)
    df = run_sql(plan.text)
    if plan.aggregate is not None:
        answered = _answer_aggregate(spark, plan.aggregate, df.schema, catalog, route)
        if answered is not None:
            df = answered
    df.__dict__[ROUTE_ATTR] = route
    return df


def _create_scan(spark: Any, scan: plans.Scan, version: int) -> None:
    """The temporary view of one table reference (a guarded read of only its columns). A guarded
    read plans every query afresh, so the view is made once per table version (the version
    fixes its schema) and session."""

    made = spark.__dict__.setdefault("_indextables_scan_views", {})
    if made.get(scan.view) == version and spark.catalog.tableExists(scan.view):
        return
    opts = {**scan.source.option_dict, "path": scan.source.path}
    if scan.columns is not None:
        opts["columns"] = ",".join(scan.columns)
    if scan.query is not None:
        given = next((v for k, v in opts.items() if k.lower() == "query"), None)
        opts = {k: v for k, v in opts.items() if k.lower() != "query"}
        opts["query"] = scan.query if given is None else f"({given}) AND {scan.query}"
    df = guarded(raw_load(spark, opts))
    if not scan.keeps_indexall:
        df = df.drop("_indexall")  # `SELECT *` shows the table's columns only
    df.createOrReplaceTempView(scan.view)
    made[scan.view] = version


def _answer_aggregate(
    spark: Any, agg: plans.AggregatePlan, schema: StructType, catalog: SparkCatalog, route: Route
) -> Any:
    """The aggregate's DataFrame from the index, or None when it must run in Spark after all."""

    try:
        source = agg.scan.source
        rows = compute_aggregate(catalog.table(source), catalog.snapshot(source), agg, catalog.info(source))
    except ga.SumOverflow as e:
        route.notes.append(f"not answered from the index: {e}; Spark computes it")
        return None
    out = [tuple(r[i] for i in agg.outputs) for r in rows]
    df = _result_frame(spark, out, schema)
    if agg.order:
        cols = []
        for pos, desc, nulls_first in agg.order:
            c = df[df.columns[pos]]
            if desc:
                cols.append(c.desc_nulls_first() if nulls_first else c.desc_nulls_last())
            else:
                cols.append(c.asc_nulls_first() if nulls_first else c.asc_nulls_last())
        df = df.orderBy(*cols)
    if agg.limit is not None:
        df = df.limit(agg.limit)
    route.name = "index aggregate"
    described = {b.name: f"{b.column} {describe(b.spec)}" for b in agg.request.buckets}
    route.notes.append(
        f"answered from the index: GROUP BY {[described.get(k, k) for k in agg.request.keys] or '()'}, "
        f"{', '.join(f'{a.function}({a.column or chr(42)})' for a in agg.request.aggs)}; Spark gets the result rows"
    )
    return df


def compute_aggregate(
    table: IndexTable, snap: Snapshot, agg: plans.AggregatePlan, info: plans.TableInfo
) -> list[tuple[Any, ...]]:
    """Rows (keys..., aggregates...) of the aggregate over `snap`, the version the statement was
    planned on (its scan view and result schema come from the same version)."""
    from indextables_spark.core.split.read.split_threads import (  # lazy: keeps `import indextables_spark.spark.sql_routes` free of numpy
        fetch_missing,
        map_chunks,
    )
    from indextables_spark.core.split.read.search import (  # lazy: keeps `import indextables_spark.spark.sql_routes` free of numpy
        SearchPlan,
        count_split,
    )
    from indextables_spark.core.split.read.scan import TableScan  # lazy: as above
    from indextables_spark.expr.search_query import SearchQuery  # lazy: as above

    query = ops.to_query(agg.search, info.specs) if agg.search is not None else None
    request = agg.request
    scan = TableScan(
        table.storage,
        snap,
        table.options,
        conditions=agg.conjuncts,
        query=SearchQuery.of(query),
        columns=request.columns,
    )
    plan = SearchPlan(scan, scan.live_files())
    files = plan.files  # (the query planned for them)
    if query is not None or plan.scan.exact:
        fetch_missing(table.storage, table.options, files)
    # Tantivy's stats read fast fields: a column written without one (indexing.nonfastfields)
    # is aggregated from the rows; so is an index-only one (indexing.indexonlyfields), whose
    # rows hold NULL: the answer Spark computes over the rows of a scan; so is a compact string
    # column (core/schema/compact_strings.py), whose fast field holds hashes, not values
    slow = {
        s.name
        for s in info.specs
        if (s.value_field is not None and not s.value_field.fast) or s.index_only or s.string_mode is not None
    }
    fast = not any(a.column in slow for a in request.aggs)
    engine = _engine_rows(table, snap, files, request, plan, info.types) if fast else None
    if engine is not None:
        return engine
    if (
        request.count_only
        and set(request.keys) <= set(plan.scan.parts)
        and not plan.scan.read.residual
        and not plan.scan.narrowing
    ):
        # COUNT(*) by partition columns: each split counts its matches, no row is read
        def counts(chunk: list[AddFile]) -> list[tuple[AddFile, int]]:
            return [(f, count_split(table.storage, plan.scan.read, f, snap.deletes_for(f))) for f in chunk]

        pairs = map_chunks(counts, files) if files else []
        typed = [
            ({k: parse_partition_value(f.partition_values.get(k), info.types[k]) for k in request.keys}, n)
            for f, n in pairs
        ]
        merged = ga.count_partial(typed, request, plan.scan.schema)
    else:

        def partials(chunk: list[AddFile]) -> list[pa.Table]:
            return [ga.partial(plan.read_splits(chunk), request)]

        merged = ga.merge(map_chunks(partials, files) if files else [], request)
    return ga.finish(merged, request)


_EXACT_F64 = 2**53
_INTS = ("byte", "short", "integer", "long")


def _engine_rows(
    table: IndexTable,
    snap: Snapshot,
    files: list[AddFile],
    request: GroupRequest,
    plan: SearchPlan,
    types: dict[str, str],
) -> list[tuple[Any, ...]] | None:
    """The aggregate from Tantivy's aggregations (core/split/aggregate/aggregate.py) when that is exact: keys are
    partition columns with no NULL value (each split is one bucket), no data-column filter, and
    every aggregate is COUNT(*) or an aggregate of an integer column whose f64 accumulation cannot
    round (count × largest magnitude < 2^53, checked on the result). None: use the row route."""
    from indextables_spark.api.aggregate import (
        aggregate,  # lazy: keeps `import indextables_spark.spark.sql_routes` free of numpy
    )

    if plan.scan.exact or not set(request.keys) <= set(plan.scan.parts):
        return None
    if any(a.function != "count_star" and a.spark_type not in _INTS for a in request.aggs):
        return None
    if request.count_only:
        return None  # per-split counts are cheaper still (compute_aggregate)
    if any(f.partition_values.get(k) is None for f in files for k in request.keys):
        return None
    columns = sorted({a.column for a in request.aggs if a.column is not None})
    leaf = {f"s{i}": {"stats": {"field": c}} for i, c in enumerate(columns)}
    req: dict[str, Any] = leaf
    for depth, key in reversed(list(enumerate(request.keys))):
        req = {f"k{depth}": {"terms": {"field": key, "size": ALL_BUCKETS}, **({"aggs": req} if req else {})}}
    # (never empty: an aggregate of a column is requested, COUNT(*) alone returned above)
    result = aggregate(table.storage, snap, list(files), plan.scan.read, req, execution="driver")
    rows: list[tuple[Any, ...]] = []

    def values(bucket: dict[str, Any], keys: list[Any]) -> tuple[Any, ...] | None:
        out = list(keys)
        for a in request.aggs:
            if a.function == "count_star":
                out.append(int(bucket["doc_count"]))
                continue
            assert a.column is not None  # an aggregate of a column
            st = bucket[f"s{columns.index(a.column)}"]
            n = int(st.get("count") or 0)
            if a.function == "count":
                out.append(n)
                continue
            if n == 0:
                out.append(None)
                continue
            lo, hi, total = st["min"], st["max"], st["sum"]
            if n * max(abs(lo), abs(hi)) >= _EXACT_F64:
                return None
            total = int(round(total))
            if a.function == "sum":
                if not LONG_MIN <= total <= LONG_MAX:
                    raise SumOverflow(f"sum of column {a.column!r} is {total}, outside the long range")
                out.append(total)
            elif a.function == "avg":
                out.append(total / n)
            else:
                out.append(int(lo) if a.function == "min" else int(hi))
        return tuple(out)

    def walk(level: dict[str, Any], depth: int, keys: list[Any]) -> bool:
        if depth == len(request.keys):
            row = values(level, keys)
            if row is None:
                return False
            rows.append(row)
            return True
        key = request.keys[depth]
        for b in level[f"k{depth}"]["buckets"]:
            k = b["key"]
            typed = parse_partition_value(k, types[key]) if isinstance(k, str) and types[key] != "string" else k
            if not walk(b, depth + 1, keys + [typed]):
                return False
        return True

    if not request.keys:
        row = values(result, [])
        return None if row is None else [row]
    return rows if walk(result, 0, []) else None


def _result_frame(spark: Any, rows: list[tuple[Any, ...]], schema: StructType) -> Any:
    """A DataFrame of a few result rows with Spark's schema, built from Arrow (a local relation:
    no Spark job, unlike a list of rows in a classic session)."""

    fields = [pa.field(f.name, arrow_type(f.dataType.jsonValue()), f.nullable) for f in schema.fields]
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(fields)]
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), schema)


def _explain(spark: Any, mode: str, plan: plans.StatementPlan, route: Route, run_sql: Callable[[str], Any]) -> Any:
    spark_plan = run_sql(f"{mode} {plan.text}").collect()[0][0]
    if plan.aggregate is not None:
        route.name = "index aggregate"
        route.notes.append(
            "answered from the index when run (an integer SUM outside the long range falls back to Spark); "
            "Spark's plan below is the fallback scan route"
        )
    return spark.createDataFrame([(route.text() + "\n\n" + spark_plan,)], "plan string")


def route_of(df: Any) -> Route | None:
    return df.__dict__.get(ROUTE_ATTR) if hasattr(df, "__dict__") else None
