"""`it.sql(spark, text)`: our command texts run here, any other text goes to `spark.sql`."""

from __future__ import annotations

from typing import Any, Callable

from indextables_spark.config.sessions import with_session_options
from indextables_spark.frontends.execute import execute, spark_schema
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.ops.command import TableName, table_name_of, with_table_path

# (spark, table name) → (the table's path, options that come with it: those of a view over it)
TableResolver = Callable[[Any, TableName], tuple[str, dict[str, str]]]


def run_sql(spark: Any, text: str, resolve_table: TableResolver | None = None) -> Any:
    """A DataFrame of the command's result rows (the fields of its result class, results.py).

    The operations run on the driver with the session's `spark.indextables.*` conf as options;
    MERGE SPLITS runs one Spark task per merge group. Classic or Spark Connect session.
    `resolve_table` turns a table name given instead of a path (`MERGE SPLITS db.t`) into the
    table's path (spark/table_names.py); without it such a command is refused."""
    cmd = parse_command(text)
    if cmd is None:
        return spark.sql(text)
    table_options: dict[str, str] = {}
    name = table_name_of(cmd)
    if name is not None and resolve_table is not None:
        path, table_options = resolve_table(spark, name)
        cmd = with_table_path(cmd, path)
    res = execute(cmd, with_session_options(spark, table_options), spark=spark)
    return spark.createDataFrame(res.table, schema=spark_schema(res.result))
