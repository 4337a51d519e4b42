"""The operations as SQL table functions (Python UDTFs), registered by `it.register`: a generic
reader of ops/registry.py — each operation with a `function` is one, its arguments the command's
fields, in order, its columns its result class's fields:

    SELECT * FROM indextables_describe_state('/path')
    SELECT * FROM indextables_describe_transaction_log('/path', true)          -- INCLUDE ALL
    SELECT * FROM indextables_checkpoint('/path')  /  indextables_compact('/path')
    SELECT * FROM indextables_merge_splits('/path', "day = '2024-01-01'", '100M', 10, 100)
    SELECT * FROM indextables_purge('/path', 168, 720, true)                   -- hours, hours, dry run
    SELECT * FROM indextables_truncate_time_travel('/path', true)
    SELECT * FROM indextables_drop_partitions('/path', "day < '2024-01-01'")
    SELECT * FROM indextables_repair_transaction_log('/t/_transaction_log', '/t/_transaction_log_repaired')
    SELECT * FROM indextables_convert('/path', true)                            -- dry run
    SELECT * FROM indextables_describe_component_sizes('/path', "day = '2024-01-01'")
    SELECT * FROM indextables_describe_storage_stats()      -- the worker process running it
    SELECT * FROM indextables_describe_environment()        -- likewise

Arguments may also be named (`indextables_purge(path => '/p', dry_run => true)`). The function runs
in a Python worker, which has no session: the `spark.indextables.*` conf (credentials, endpoints,
options) is taken when `it.register(spark)` runs — register again after changing it. MERGE SPLITS
merges in that worker (no Spark job). Like any table function, the command runs each time the
query is executed.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

from indextables_spark.config.sessions import functions
from indextables_spark.frontends.execute import spark_schema
from indextables_spark.ops import registry
from indextables_spark.ops.command import Command, coerced, signature
from indextables_spark.spark.udtf_rows import table_rows

_SELF = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)


def rows(cmd: Command, options: dict[str, str]) -> Iterator[tuple[Any, ...]]:
    from indextables_spark.frontends.execute import execute  # lazy: runs in the worker

    yield from table_rows(execute(cmd, options).table)


def function_class(command: type[Command], options: dict[str, str]) -> type:
    """A UDTF class running `command` with the options captured at registration; its `eval` takes
    the command's fields (positional or named, as the signature says)."""
    params = signature(command)

    def eval(self: Any, *args: Any, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
        bound = params.bind(*args, **kwargs)
        bound.apply_defaults()
        yield from rows(command(**coerced(command, bound.arguments)), options)

    # what Spark binds named arguments by (`path => '/p'`)
    eval.__signature__ = params.replace(parameters=[_SELF, *params.parameters.values()])  # type: ignore[attr-defined]
    return type(command.__name__, (), {"eval": eval})


def register_command_functions(spark: Any, conf: dict[str, str]) -> None:
    """Register every operation's table function on the session (called by `it.register`); they
    run with `conf` (the session's spark.indextables.* entries: workers have no session)."""

    udtf = functions(spark).udtf
    for op in registry.OPERATIONS:
        if op.function:
            command = op.load()
            cls = function_class(command, dict(conf))
            # Plain (not Arrow) UDTFs: one row per command, and Arrow UDTFs would need pandas.
            spark.udtf.register(op.function, udtf(cls, returnType=spark_schema(command.result), useArrow=False))
