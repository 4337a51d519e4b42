"""`it.explain(df)`: what the indextables reads of a DataFrame do, from their own planning.

The reader records each planning (spark/guard.record_explanation: the conditions the index
answers or narrows, the Tantivy query, the splits each pruning step kept) in the temp directory
of the host that plans it; explain plans the DataFrame afresh and returns the records written
meanwhile (reads planned concurrently by other queries of the same machine may be included; each
names its table path). Over Spark Connect the server plans the reads: explain asks it for the plan
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


def explain(df: Any) -> list[dict[str, Any]]:
    """One dict per indextables read in the DataFrame's plan (see IndexTable.explain for the fields;
    also `path`, `version`, `guarded`, `tasks`). Spark re-checks every filter on the rows the
    reader returns (`spark_rechecks_every_filter`)."""
    if is_connect(df):
        return _explain_connect(df)
    t0 = time.time()
    df.select("*")._jdf.queryExecution().executedPlan()  # a new plan: Spark plans a DataFrame's reads once
    found = guard.explanations_since(t0)
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
    found: list[dict[str, Any]] = json.loads(on_server(lambda: json.dumps(guard.explanations_since(t0))))
    if not found:
        raise InvalidOptionError(
            "no indextables read of this DataFrame was found: it reads no indextables table, or the Spark Connect "
            "server planned it on a host its executors do not share (a cluster); use "
            "indextables_spark.IndexTable(path, spark=spark).explain(query=..., where=...) there"
        )
    return found
