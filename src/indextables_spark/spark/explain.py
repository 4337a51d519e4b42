"""`it.explain(df)`: what the indextables reads of a DataFrame do, from their own planning.

The reader records each planning (spark/guard.record_explanation: the conditions the index
answers or narrows, the Tantivy query, the splits each pruning step kept) in the temp directory
of the host that plans it; explain plans the DataFrame afresh and returns the records written
meanwhile whose table path is one the DataFrame reads (another session of the same machine may plan
reads at the same moment; a read whose path the plan does not show, a catalog table's, keeps every
record of the moment). Over Spark Connect the server plans the reads: explain asks it for the plan
(an AnalyzePlan request, which plans the reads on the server's driver), then reads the records
with a one-task Spark job, which finds them when the server's executors share its driver's host
(a local-mode server, one machine); elsewhere it says so and points to
`IndexTable(path, spark=spark).explain(query, where)`, which answers the same question."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

from indextables_spark.config.sessions import is_connect
from indextables_spark.errors import InvalidOptionError
from indextables_spark.spark import guard
from indextables_spark.spark.options import table_path


def explain(df: Any) -> list[dict[str, Any]]:
    """One dict per indextables read in the DataFrame's plan (see IndexTable.explain for the fields;
    also `path`, `version`, `guarded`, `tasks`). Spark re-checks every filter on the rows the
    reader returns (`spark_rechecks_every_filter`)."""
    if is_connect(df):
        return _explain_connect(df)
    t0 = time.time()
    df.select("*")._jdf.queryExecution().executedPlan()  # a new plan: Spark plans a DataFrame's reads once
    found = _own(guard.explanations_since(t0), _classic_paths(df))
    if not found:
        raise InvalidOptionError(
            "no indextables read was planned for this DataFrame on this machine: it reads no indextables "
            "table, or Spark planned it elsewhere (a Spark Connect server on another host)"
        )
    return found


def _explain_connect(df: Any) -> list[dict[str, Any]]:
    import pyarrow as pa  # lazy: keeps `import indextables_spark.spark.explain` free of pyarrow

    spark = df.sparkSession

    def on_server(fn: Callable[[], str]) -> str:
        """fn() run in one task on the server's executors (its host, for a local-mode server)."""

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for _ in batches:
                yield pa.RecordBatch.from_arrays([pa.array([fn()])], names=["out"])

        rows = spark.range(1, numPartitions=1).mapInArrow(task, "out string").toArrow()
        out: str = rows.column("out")[0].as_py()  # a string column
        return out

    t0 = float(on_server(lambda: repr(time.time())))  # the server host's clock, not the client's
    df.select("*")._explain_string(mode="simple")  # the server plans the reads (and records them)
    since: list[dict[str, Any]] = json.loads(on_server(lambda: json.dumps(guard.explanations_since(t0))))
    found = _own(since, _connect_paths(df))
    if not found:
        raise InvalidOptionError(
            "no indextables read of this DataFrame was found: it reads no indextables table, or the Spark Connect "
            "server planned it on a host its executors do not share (a cluster); use "
            "indextables_spark.IndexTable(path, spark=spark).explain(query=..., where=...) there"
        )
    return found


def _own(found: list[dict[str, Any]], paths: set[str] | None) -> list[dict[str, Any]]:
    """The records of the DataFrame's own tables; all of them when a read's path is unknown (None)."""
    return found if paths is None else [f for f in found if f.get("path") in paths]


def _path_of(options: dict[str, Any]) -> str | None:
    return table_path(options) if options.get("path") or options.get("paths") else None


def _classic_paths(df: Any) -> set[str] | None:
    """The table paths of the plan's indextables relations (their read options, as the reader takes
    them: spark/datasource.py), or None when one has none (a catalog table)."""
    leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    paths: set[str] = set()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if not leaf.getClass().getName().endswith("DataSourceV2Relation") or leaf.table().name() != "indextables":
            continue
        jmap = leaf.options().asCaseSensitiveMap()
        path = _path_of({str(k): jmap.get(k) for k in jmap.keySet().toArray()})
        if path is None:
            return None
        paths.add(path)
    return paths


def _connect_paths(df: Any) -> set[str] | None:
    """The same from a Connect DataFrame's client-side plan (its indextables DataSource nodes)."""
    from pyspark.sql.connect.plan import DataSource, LogicalPlan  # lazy: Connect clients only

    paths: set[str] = set()
    seen: set[int] = set()
    todo: list[Any] = [df._plan]
    while todo:
        node = todo.pop()
        if id(node) in seen or not isinstance(node, LogicalPlan):
            continue
        seen.add(id(node))
        if isinstance(node, DataSource) and str(getattr(node, "_format", "")).lower() == "indextables":
            given = list(getattr(node, "_paths", None) or [])
            path = given[0] if len(given) == 1 else _path_of(dict(getattr(node, "_options", None) or {}))
            if path is None:
                return None
            paths.add(path)
        for value in vars(node).values():
            todo.extend(value if isinstance(value, (list, tuple)) else [value])
    return paths
