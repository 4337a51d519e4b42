"""`spark.sql` statements that read indextables tables, planned for the index (after `register`).

sqlplan/statement.py plans the statement; here it runs, in classic and Spark Connect sessions:
- route "scan": each table reference reads through its own guarded scan declaring only the
  columns the statement uses (the `columns` read option); search operators arrive as pushed
  `_indexall` filters; Spark runs the rest of the statement as written;
- route "index aggregate": the aggregate is computed from the index (split/group_aggregate.py,
  threads of this process over the splits' matching rows, or per-split counts), and Spark gets
  the result rows with the names and types it gives the statement itself (taken from Spark's
  analysis of the scan route); ORDER BY / LIMIT run in Spark over those rows.
`EXPLAIN <statement>` says which route a statement takes and why; `it.explain(df)` lists the
route of a DataFrame `spark.sql` returned.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..sqlplan import statement as st

log = logging.getLogger(__name__)
ROUTE_ATTR = "_indextables_route"
_lock = threading.Lock()


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
        for q in self.searches:
            lines.append(f"  search (one index query per table): {q}")
        for n in self.notes:
            lines.append(f"  {n}")
        lines.append(f"  statement Spark runs: {self.statement}")
        return "\n".join(lines)


class SparkCatalog:
    """The statement planner's view of the session: our views, table layouts, other tables' columns."""

    def __init__(self, spark):
        self.spark = spark
        self._infos: dict[st.Source, st.TableInfo] = {}

    def view(self, name: str) -> st.Source | None:
        from .sql_bridge import view_source

        src = view_source(self.spark, name)
        if src is None:
            return None
        return st.Source(src.path, tuple(sorted((str(k), str(v)) for k, v in src.options.items())))

    def table(self, source: st.Source):
        from ..table import IndexTable

        opts = {k: v for k, v in source.options if k.lower() != "path"}
        return IndexTable(source.path, opts, spark=self.spark)

    def info(self, source: st.Source) -> st.TableInfo:
        if source in self._infos:
            return self._infos[source]
        from ..split.where import column_types
        from .reader import table_specs

        table = self.table(source)
        snap = table.snapshot()
        names = [f["name"] for f in snap.schema_json["fields"]]
        opts = {k.lower(): v for k, v in source.options}
        virtual = ["_indexall"]
        if str(opts.get("withscore", "")).lower() == "true":
            virtual.append("_score")
        if opts.get("snippetfields"):
            virtual.append("_snippet")
        types = {k: v for k, v in column_types(snap.schema_json).items() if k in names}
        info = st.TableInfo(names + virtual, types, list(snap.partition_columns), table_specs(snap, table.options))
        self._infos[source] = info
        return info

    def other_columns(self, parts: tuple[str, ...]) -> list[str] | None:
        name = ".".join(f"`{p}`" for p in parts)
        try:
            return list(self.spark.table(name).columns)
        except Exception:  # noqa: BLE001 - an unknown table: the statement is not resolved (Spark reports it)
            return None


def _explain_prefix(text: str) -> tuple[str | None, str]:
    """('EXPLAIN [mode]', the statement) when the text is an EXPLAIN, else (None, text)."""
    from ..sqlplan.operators import tokenize

    tokens = tokenize(text) or []
    if not tokens or tokens[0].text.upper() != "EXPLAIN":
        return None, text
    # sqlglot reads EXPLAIN as a command: the rest of the text is one token
    head, rest = text[: tokens[0].end + 1], text[tokens[0].end + 1 :]
    words = rest.split(None, 1)
    if len(words) == 2 and words[0].upper() in ("EXTENDED", "FORMATTED", "CODEGEN", "COST"):
        return f"{head} {words[0]}", words[1]
    return head, rest


def run(spark, text: str, run_sql: Callable[[str], Any]):
    """The statement's DataFrame through our routes, or None to let Spark run the text as written."""
    from .sql_bridge import view_names

    explain, body = _explain_prefix(text)
    catalog = SparkCatalog(spark)
    plan = st.plan(body, catalog, view_names())
    if plan is None:
        return None
    for scan in plan.scans:
        _create_scan(spark, scan)
    route = Route(
        "scan",
        [{"table": s.written, "path": s.source.path, "columns": s.columns, "view": s.view} for s in plan.scans],
        plan.searches,
        list(plan.notes),
        plan.text,
    )
    if explain is not None:
        return _explain(spark, explain, plan, route, catalog, run_sql)
    df = run_sql(plan.text)
    if plan.aggregate is not None:
        answered = _answer_aggregate(spark, plan.aggregate, df.schema, catalog, route)
        if answered is not None:
            df = answered
    df.__dict__[ROUTE_ATTR] = route
    return df


def _create_scan(spark, scan: st.Scan) -> None:
    """The temporary view of one table reference (a guarded read of only its columns)."""
    from .guard import guarded
    from .sql_bridge import raw_load

    opts = {**scan.source.option_dict, "path": scan.source.path}
    if scan.columns is not None:
        opts["columns"] = ",".join(scan.columns)
    guarded(raw_load(spark, opts)).createOrReplaceTempView(scan.view)


def _answer_aggregate(spark, agg: st.AggregatePlan, schema, catalog: SparkCatalog, route: Route):
    """The aggregate's DataFrame from the index, or None when it must run in Spark after all."""
    from ..split import group_aggregate as ga

    try:
        rows = compute_aggregate(catalog.table(agg.scan.source), agg, catalog.info(agg.scan.source))
    except ga.SumOverflow as e:
        route.notes.append(f"not answered from the index: {e}; Spark computes it")
        return None
    out = [tuple(r[i] for i in agg.outputs) for r in rows]
    df = spark.createDataFrame(out, schema)
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
    route.notes.append(
        f"answered from the index: GROUP BY {list(agg.request.keys) or '()'}, "
        f"{', '.join(f'{a.function}({a.column or chr(42)})' for a in agg.request.aggs)}; Spark gets the result rows"
    )
    return df


def compute_aggregate(table, agg: st.AggregatePlan, info: st.TableInfo) -> list[tuple]:
    """Rows (keys..., aggregates...) of the aggregate over the table's current snapshot."""
    from ..split import group_aggregate as ga
    from ..split import operators as ops
    from ..split.search import SearchPlan, fetch_missing, map_chunks

    snap = table.snapshot()
    query = ops.to_query(agg.search, info.specs) if agg.search is not None else None
    request = agg.request
    plan = SearchPlan(table.storage, snap, table.options, agg.conjuncts, query, request.columns)
    files = plan.live_files()
    plan.check_query(files)
    fetch_missing(table.storage, table.options, files)

    def partials(chunk: list) -> list:
        return [ga.partial(plan.read_splits(chunk), request)]

    merged = ga.merge(map_chunks(partials, files) if files else [], request)
    return ga.finish(merged, request)


def _explain(spark, mode: str, plan: st.StatementPlan, route: Route, catalog: SparkCatalog, run_sql):
    spark_plan = run_sql(f"{mode} {plan.text}").collect()[0][0]
    if plan.aggregate is not None:
        route.name = "index aggregate"
        route.notes.append(
            "answered from the index when run (an integer SUM outside the long range falls back to Spark); "
            "Spark's plan below is the fallback scan route"
        )
    return spark.createDataFrame([(route.text() + "\n\n" + spark_plan,)], "plan string")


def route_of(df) -> Route | None:
    return df.__dict__.get(ROUTE_ATTR) if hasattr(df, "__dict__") else None
