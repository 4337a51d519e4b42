"""`it.explain(df)`: what the indextables reads of a DataFrame do, from their own planning.

The reader records each planning (spark/guard.record_explanation: the conditions the index
answers or narrows, the Tantivy query, the splits each pruning step kept) in the temp directory
of the driver host; explain plans the DataFrame afresh and returns the records written meanwhile
(reads planned concurrently by other queries of the same machine may be included; each names its
table path). Over Spark Connect the planning happens on the server, whose records a client cannot
read: there `IndexTable(path, spark=spark).explain(query, where)` answers the same question."""
from __future__ import annotations

import time

from ..errors import InvalidOptionError
from ..sessions import is_connect
from . import guard


def explain(df) -> list[dict]:
    """One dict per indextables read in the DataFrame's plan (see IndexTable.explain for the fields;
    also `path`, `version`, `guarded`, `tasks`). Spark re-checks every filter on the rows the
    reader returns (`spark_rechecks_every_filter`)."""
    if is_connect(df):
        raise InvalidOptionError(
            "it.explain(df) needs a classic Spark session: over Spark Connect the reads are planned on the "
            "server; use indextables_spark.IndexTable(path, spark=spark).explain(query=..., where=...)")
    t0 = time.time()
    df.select("*")._jdf.queryExecution().executedPlan()   # a new plan: Spark plans a DataFrame's reads once
    found = guard.explanations_since(t0)
    if not found:
        raise InvalidOptionError(
            "no indextables read was planned for this DataFrame on this machine: it reads no indextables "
            "table, or Spark planned it elsewhere (a Spark Connect server on another host)")
    return found
