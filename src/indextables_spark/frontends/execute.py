"""Run a parsed command: the one executor behind `it.sql`, the SQL table functions and the command
line (IndexTable.maintenance runs the same commands, api/maintenance.py). Generic: the command runs
itself (`run`, ops/registry.py), and its output becomes the typed rows of its result class."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.schema.arrow_types import spark_schema_json
from indextables_spark.ops.command import Command, Context, Listing, table_name_of
from indextables_spark.ops.registry import Operation, operation_of
from indextables_spark.results.record import ProgressCallback, Record


@dataclass
class CommandResult:
    operation: Operation
    result: type[Record]  # the class of its rows: the output columns are its fields
    table: pa.Table  # the typed rows (SQL / CLI tables)
    raw: Any  # what the operation returned (a result, a list of them, or the same Arrow table)

    @property
    def name(self) -> str:
        return self.operation.name


def spark_schema(result: type[Record]) -> Any:
    """A result class's columns as a pyspark StructType (SQL commands, table functions)."""
    from pyspark.sql.types import StructType  # lazy: pyspark only when a Spark front end asks

    return StructType.fromJson(spark_schema_json(result.arrow_schema()))


def execute(
    cmd: Command,
    options: Options | Mapping[str, Any] | None = None,
    spark: Any = None,
    progress: ProgressCallback | None = None,
) -> CommandResult:
    """spark: when given, the operations that can run as a Spark job do (MERGE SPLITS, the caches);
    else they run in this process."""
    name = table_name_of(cmd)
    opts = options if isinstance(options, Options) else Options.of(options)
    ctx = Context(opts, spark, progress)
    if name is not None:
        ctx.path(name)  # raises: table names are resolved by it.sql / spark.sql only
    out = cmd.run(ctx)
    result = type(cmd).result
    if isinstance(out, pa.Table):
        return CommandResult(operation_of(type(cmd)), result, out, out)
    if isinstance(out, Listing):
        return CommandResult(operation_of(type(cmd)), result, result.table(out.rows), out.raw)
    rows = [out] if isinstance(out, Record) else list(out)
    return CommandResult(operation_of(type(cmd)), result, result.table(rows), out)
