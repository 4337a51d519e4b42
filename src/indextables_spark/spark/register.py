"""`it.register(spark)` and `it.unregister(spark)`.

Reads and writes work without `register`: the data source is found by Spark itself (the
`pyspark_indextables` module), `.option("partitionBy", ...)` partitions a write, and an unguarded
read is always right (spark/guard.py). What `register` adds, in classic and Spark Connect sessions:

1. Public extension points: the data source (`spark.dataSource.register`, without Spark's warning
   that it replaced the one Spark found itself: spark/source_registration.py), the SQL table
   functions (Python UDTFs), the bucket functions of GROUP BY (temporary functions,
   spark/bucket_functions.py), `spark.sql.python.filterPushdown.enabled=true`, and our secret
   options added to Spark's redaction patterns (config/sessions.py extend_spark_redaction).
2. Pass-through wrappers of pyspark's reader/writer builder classes (classic and Connect, batch and
   streaming). Every wrapper first calls pyspark's own method with the same arguments, so nothing
   changes for other formats; only when the format is "indextables" (or one of the reference's
   provider names, spark/datasource.py) do `load()`, `save()`,
   `start()` and `insertInto(<our view>)` do more:
   - `load()`: copies the session's `spark.indextables.*` conf into the options (a data source never
     sees the conf), adds the plan guard (spark/guard.py: every scan planned afresh, filters pushed
     into the index) and, for `limit`/`orderBy`, the global top n above the per-task top n.
   - `save()` / `start()`: Spark refuses `.partitionBy()` for Python data sources, so the columns
     move into the `partitionBy` option (and Spark's partitioning is cleared); the conf is copied;
     a bare `.save()` (ErrorIfExists, refused by Spark for Python sources) checks for a table
     itself; with `write.optimizeWrite.enabled` `save()` writes the DataFrame shuffled into tasks of
     about one target-size split each (spark/optimized_write.py); merge-/purge-on-write run after
     the write.
   - `insertInto(v)` on one of our SQL views writes to its table (Spark refuses it).
3. `SparkSession.sql`: our command texts (MERGE SPLITS, ...), table functions with literal
   arguments (run distributed), and `CREATE TEMPORARY VIEW ... USING indextables` / INSERT into
   such views; any other text goes to Spark unchanged.
4. `SparkSession.stop`: first our stream watchers end and the running merge-/purge-on-write
   finishes (post_write.stop_background), so that nothing of ours calls Spark while it stops.

`unregister(spark)` restores every wrapped method.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, cast

from indextables_spark.api.table import IndexTable
from indextables_spark.config.option_checks import CHECKED, warn_unknown_options
from indextables_spark.config.options import Options, pack_secrets, session_options, short_key
from indextables_spark.config.sessions import extend_spark_redaction
from indextables_spark.errors import TableExistsError
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.spark import sql_bridge
from indextables_spark.spark.guard import VIRTUAL_COLUMNS, guarded
from indextables_spark.spark.patching import own as _own
from indextables_spark.spark.patching import remove_all, wrapped_any
from indextables_spark.spark.patching import wrap as _wrap
from indextables_spark.spark.source_registration import planning_python, register_sources

_lock = threading.Lock()


def is_ours(fmt: str | None) -> bool:
    """Is `fmt` one of our format names ("indextables" and the reference's provider class names)?"""
    from indextables_spark.spark.datasource import (
        is_format_name,  # lazy: pyspark is imported only when a Spark session runs this
    )

    return is_format_name(fmt)


def session_of(builder: Any) -> Any:
    """The SparkSession of a reader/writer builder (classic: _spark; Connect: _client/_spark/_session)."""
    for attr in ("_spark", "_client", "_session"):
        s = builder.__dict__.get(attr)
        if s is not None:
            return s
    raise AttributeError(f"no SparkSession on {type(builder).__name__}")


@dataclass
class _Given:
    """What the user gave a builder, recorded by the pass-through wrappers."""

    format: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    partition_by: list[str] | None = None
    mode: str | None = None


def _given(builder: Any) -> _Given:
    given: _Given = builder.__dict__.setdefault("_indextables_given", _Given())
    return given


def _inject_conf(builder: Any, spark: Any) -> dict[str, str]:
    """Copy conf entries whose key was not given explicitly; returns every option now set. Keys
    that name no option are logged here, in the user's process, and the options are marked so
    (`optionsChecked`) that the Python workers where Spark runs the data source do not log them
    again (without `register` only they do)."""
    given = _given(builder).options
    keys = {short_key(k) for k in given}
    set_option = _own(type(builder), "option")
    out = {str(k): str(v) for k, v in given.items()}
    conf = session_options(spark)
    warn_unknown_options({**conf, **given})
    copied = {k: v for k, v in conf.items() if short_key(k) not in keys}
    for k, v in pack_secrets({**copied, CHECKED: "true"}).items():  # secrets under a name Spark's plans redact
        set_option(builder, k, v)
        out[k] = v
    return out


# ---- pass-through recorders -------------------------------------------------------------------


def _recorders(cls: type) -> None:
    def make_format(orig: Callable[..., Any]) -> Callable[..., Any]:
        def format(self: Any, source: Any) -> Any:
            _given(self).format = source
            return orig(self, source)

        return format

    def make_option(orig: Callable[..., Any]) -> Callable[..., Any]:
        def option(self: Any, key: Any, value: Any) -> Any:
            _given(self).options[str(key)] = value
            return orig(self, key, value)

        return option

    def make_options(orig: Callable[..., Any]) -> Callable[..., Any]:
        def options(self: Any, **opts: Any) -> Any:
            _given(self).options.update({str(k): v for k, v in opts.items()})
            return orig(self, **opts)

        return options

    def make_partition_by(orig: Callable[..., Any]) -> Callable[..., Any]:
        def partitionBy(self: Any, *cols: Any) -> Any:
            flat = tuple(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
            _given(self).partition_by = [str(c) for c in flat]
            return orig(self, *cols)

        return partitionBy

    def make_mode(orig: Callable[..., Any]) -> Callable[..., Any]:
        def mode(self: Any, saveMode: Any) -> Any:
            if saveMode is not None:
                _given(self).mode = saveMode
            return orig(self, saveMode)

        return mode

    _wrap(cls, "format", make_format)
    _wrap(cls, "option", make_option)
    _wrap(cls, "options", make_options)
    _wrap(cls, "partitionBy", make_partition_by)
    _wrap(cls, "mode", make_mode)


# ---- indextables-only behaviour ---------------------------------------------------------------


def _move_partitioning(builder: Any) -> None:
    """`.partitionBy(cols)` → option partitionBy, Spark's own partitioning cleared (it refuses it)."""
    g = _given(builder)
    if g.partition_by:
        _own(type(builder), "option")(builder, "partitionBy", ",".join(g.partition_by))
        _own(type(builder), "partitionBy")(builder)


def _writing_ours(builder: Any) -> tuple[Any, dict[str, str]]:
    """(session, options) of a save() or start() to our format: partitioning moved into the options,
    the session's conf injected."""
    spark = session_of(builder)
    _move_partitioning(builder)
    return spark, _inject_conf(builder, spark)


def _make_load(streaming: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def load(self: Any, path: Any = None, format: Any = None, schema: Any = None, **options: Any) -> Any:
            if format is not None:
                self.format(format)
            if options:
                self.options(**options)
            g = _given(self)
            if not is_ours(g.format):
                return orig(self, path=path, schema=schema)
            spark = session_of(self)
            _inject_conf(self, spark)
            from indextables_spark.spark.read_options import (  # lazy: pyspark is imported only when a Spark session runs this
                finish_load,
                load_options,
                stream_read_options,
            )

            if streaming:  # what a stream cannot answer fails readStream.load(), naming the option
                stream_read_options(Options.of({str(k): v for k, v in g.options.items()}))
            for k, v in load_options(spark, g.options).items():
                _own(type(self), "option")(self, k, v)
            if streaming:
                return orig(self, path=path, schema=schema).drop(*VIRTUAL_COLUMNS)
            df = orig(self, path=path, schema=schema)
            return finish_load(guarded(df), g.options)

        return load

    return make


def _apply(
    builder: Any, format: Any = None, mode: Any = None, partitionBy: Any = None, options: dict[str, Any] | None = None
) -> _Given:
    """The keyword arguments of save()/start() through the (recording) builder methods, as pyspark does."""
    if format is not None:
        builder.format(format)
    if mode is not None:
        builder.mode(mode)
    if partitionBy is not None:
        builder.partitionBy(partitionBy)
    if options:
        builder.options(**options)
    return _given(builder)


def _path(path: str | None, opts: dict[str, str]) -> str | None:
    return path or next((v for k, v in opts.items() if k.lower() == "path"), None)


def _make_save(orig: Callable[..., Any]) -> Callable[..., Any]:
    def save(
        self: Any,
        path: str | None = None,
        format: Any = None,
        mode: Any = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> Any:
        g = _apply(self, format, mode, partitionBy, options)
        if not is_ours(g.format):
            return orig(self, path=path)
        spark, opts = _writing_ours(self)
        target = _path(path, opts)
        save_mode = str(g.mode or "errorifexists").lower().replace("_", "")
        if save_mode in ("error", "errorifexists", "default", "ignore"):
            if IndexTable(target, opts).exists():  # type: ignore[arg-type]  # IndexTable refuses a None path
                if save_mode == "ignore":
                    return None
                raise TableExistsError(
                    f"an indextables table already exists at {target}; use mode('append') or mode('overwrite')"
                )
            _own(type(self), "mode")(self, "append")
        result = orig(_optimized(self, spark, opts, target, save_mode), path=path)
        # The commit ran in a worker without a session: merge-/purge-on-write run here (never raise).
        from indextables_spark.ops.maintenance.post_write import maybe_run

        maybe_run(spark, cast(str, target), opts)  # Spark's save succeeded: a path was given
        return result

    return save


def _optimized(builder: Any, spark: Any, opts: dict[str, str], target: str | None, save_mode: str) -> Any:
    """The builder to save with: `builder`, or with optimized writes (write.optimizeWrite.*) one of
    the same format, mode and options on the shuffled DataFrame (spark/optimized_write.py)."""
    from indextables_spark.spark.optimized_write import (
        optimized_writer,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
    )

    g = _given(builder)
    df = _dataframe_of(builder, spark)
    return optimized_writer(spark, df, g.format, g.options, g.partition_by, opts, target, save_mode) or builder


def _make_start(orig: Callable[..., Any]) -> Callable[..., Any]:
    def start(
        self: Any,
        path: str | None = None,
        format: Any = None,
        outputMode: Any = None,
        partitionBy: Any = None,
        queryName: Any = None,
        **options: Any,
    ) -> Any:
        g = _apply(self, format, None, partitionBy, options)
        if not is_ours(g.format):
            return orig(self, path=path, outputMode=outputMode, queryName=queryName)
        spark, opts = _writing_ours(self)
        query = orig(self, path=path, outputMode=outputMode, queryName=queryName)
        from indextables_spark.ops.maintenance.stream_watch import (
            watch_stream,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
        )

        # merge-/purge-on-write after the micro-batches (the sink commits in a worker)
        watch_stream(spark, query, _path(path, opts), opts)  # type: ignore[arg-type]  # None (no path): the data source refuses the stream
        return query

    return start


def _make_insert_into(orig: Callable[..., Any]) -> Callable[..., Any]:
    def insertInto(self: Any, tableName: str, overwrite: bool | None = None) -> Any:
        spark = session_of(self)
        src = sql_bridge.view_source(spark, tableName)
        if src is None:
            return orig(self, tableName, overwrite)
        # Spark refuses INSERT into our (DataFrame-backed) views: write to their table instead
        if overwrite is None:
            overwrite = str(_given(self).mode or "").lower() == "overwrite"
        sql_bridge.insert_dataframe(
            spark,
            src,
            tableName,
            bool(overwrite),
            _dataframe_of(self, spark),
            write_options={k: str(v) for k, v in _given(self).options.items()},
        )

    return insertInto


def _dataframe_of(writer: Any, spark: Any) -> Any:
    df = writer.__dict__["_df"]
    if hasattr(df, "columns"):
        return df
    from pyspark.sql.connect.dataframe import DataFrame  # Connect keeps the plan, not a DataFrame

    return DataFrame(df, spark)


def _make_sql(orig: Callable[..., Any]) -> Callable[..., Any]:
    def sql(self: Any, sqlQuery: Any, args: Any = None, **kwargs: Any) -> Any:
        if isinstance(sqlQuery, str) and not args and not kwargs:
            # our command texts (MERGE SPLITS ..., CHECKPOINT INDEXTABLES ...) are Spark-free
            if parse_command(sqlQuery) is not None:
                from indextables_spark.frontends.sql import (
                    run_sql,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
                )
                from indextables_spark.spark.table_names import (
                    resolve_table,  # lazy: pyspark is imported only when a Spark session runs this
                )

                return run_sql(self, sqlQuery, resolve_table)
        if isinstance(sqlQuery, str):
            refresh_functions(self, sqlQuery)
            from indextables_spark.spark.table_functions import (
                rewrite_sql,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
            )

            # indextables_search/... calls with literal arguments → distributed views
            sqlQuery = rewrite_sql(self, sqlQuery)
        if isinstance(sqlQuery, str) and not args and not kwargs:
            handled = sql_bridge.try_handle(self, sqlQuery, is_ours)
            if handled is not None:
                return handled
            from indextables_spark.spark import (
                sql_routes,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow, sqlglot
            )

            # statements reading our tables: projection, search operators, aggregates from the index
            routed = sql_routes.run(self, sqlQuery, lambda text: orig(self, text, args, **kwargs))
            if routed is not None:
                return routed
        if isinstance(sqlQuery, str):
            sqlQuery = sql_bridge.split_view_references(self, sqlQuery)
        return orig(self, sqlQuery, args, **kwargs)

    return sql


# ---- table functions ----------------------------------------------------------------------------


def register_functions(spark: Any, conf: dict[str, str]) -> None:
    """(Re-)register the SQL table functions with this spark.indextables.* conf."""
    from indextables_spark.spark.maintenance_functions import (
        register_command_functions,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
    )
    from indextables_spark.spark.table_functions import (
        register_table_functions,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
    )

    register_command_functions(spark, conf)
    register_table_functions(spark, conf)
    spark.__dict__["_it_functions_conf"] = dict(conf)


def refresh_functions(spark: Any, text: str) -> None:
    """Before SQL that calls our table functions: re-register them when the conf changed since
    they were registered (they run in workers with the conf they were registered with)."""
    if "indextables_" not in text.lower() or "_it_functions_conf" not in spark.__dict__:
        return
    conf = session_options(spark)
    if conf != spark.__dict__["_it_functions_conf"]:
        register_functions(spark, conf)


# ---- install / remove ---------------------------------------------------------------------------


def _builder_classes() -> list[tuple[str, type]]:
    from pyspark.sql.readwriter import (  # lazy: pyspark is imported only when a Spark session runs this
        DataFrameReader,
        DataFrameWriter,
    )
    from pyspark.sql.session import SparkSession  # lazy: pyspark is imported only when a Spark session runs this
    from pyspark.sql.streaming.readwriter import (  # lazy: pyspark is imported only when a Spark session runs this
        DataStreamReader,
        DataStreamWriter,
    )

    out = [
        ("reader", DataFrameReader),
        ("writer", DataFrameWriter),
        ("stream_reader", DataStreamReader),
        ("stream_writer", DataStreamWriter),
        ("session", SparkSession),
    ]
    try:  # the Connect client (needs grpcio, pandas, ...); absent in a classic-only install
        from pyspark.sql.connect.readwriter import DataFrameReader as CReader  # optional: ImportError below
        from pyspark.sql.connect.readwriter import DataFrameWriter as CWriter  # optional: ImportError below
        from pyspark.sql.connect.session import SparkSession as CSession  # optional: ImportError below
        from pyspark.sql.connect.streaming.readwriter import DataStreamReader as CStreamReader  # optional
        from pyspark.sql.connect.streaming.readwriter import DataStreamWriter as CStreamWriter  # optional
    except ImportError:
        return out
    return out + [
        ("reader", CReader),
        ("writer", CWriter),
        ("stream_reader", CStreamReader),
        ("stream_writer", CStreamWriter),
        ("session", CSession),
    ]


def _make_stop(orig: Callable[..., Any]) -> Callable[..., Any]:
    def stop(self: Any) -> Any:
        from indextables_spark.ops.maintenance.post_write import (
            stop_background,  # lazy: keeps `import indextables_spark.spark.register` free of pyarrow
        )

        # our stream watchers end and the running merge-/purge-on-write finishes before Spark stops
        stop_background(self)
        return orig(self)

    return stop


def _install() -> None:
    for kind, cls in _builder_classes():
        if kind == "session":
            _wrap(cls, "sql", _make_sql)
            _wrap(cls, "stop", _make_stop)
            continue
        _recorders(cls)
        if kind in ("reader", "stream_reader"):
            _wrap(cls, "load", _make_load(streaming=kind == "stream_reader"))
        elif kind == "writer":
            _wrap(cls, "save", _make_save)
            _wrap(cls, "insertInto", _make_insert_into)
        else:
            _wrap(cls, "start", _make_start)


def register(spark: Any) -> None:
    """Register the data source (under each of its format names) and table functions; enable filter
    pushdown; have Spark hide our secret options where it shows them (config/sessions.py
    extend_spark_redaction); install the wrappers."""
    from indextables_spark.spark.datasource import (
        DATA_SOURCES,  # lazy: pyspark is imported only when a Spark session runs this
    )

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    extend_spark_redaction(spark)
    with planning_python(spark):
        register_sources(spark, DATA_SOURCES)
        register_functions(spark, session_options(spark))
        from indextables_spark.spark.bucket_functions import (
            register_bucket_functions,  # lazy: pyspark is imported only when a Spark session runs this
        )

        register_bucket_functions(spark)
    with _lock:
        if not wrapped_any():
            _install()


def unregister(spark: Any = None) -> None:
    """Remove every wrapper `register` installed (they are per process, for every session). The data
    source and table functions stay registered: they change nothing for other formats."""
    with _lock:
        remove_all()
