"""`it.sql(spark, text)`: our command texts run here, any other text goes to `spark.sql`."""

from __future__ import annotations

from ..sessions import with_session_options
from .execute import execute
from .parser import parse_command


def run_sql(spark, text: str):
    """A DataFrame of the command's result rows (see results.py for the columns of each command).

    The operations run on the driver with the session's `spark.indextables.*` conf as options;
    MERGE SPLITS runs one Spark task per merge group. Classic or Spark Connect session."""
    cmd = parse_command(text)
    if cmd is None:
        return spark.sql(text)
    res = execute(cmd, with_session_options(spark), spark=spark)
    return spark.createDataFrame(res.table, schema=res.spec.spark_schema())
