"""`indextables_spark.register(spark)`: the data source, SQL table functions, and bridges.

Bridges around Spark 4.3 limits of Python data sources (see platform-facts):
- `.partitionBy(...)` is refused by Spark for Python data sources. We wrap the writers so that,
  when the format is "indextables", partition columns travel as the `partitionBy` option.
- Data source options never see the Spark conf. The wrappers copy `spark.indextables.*` conf
  entries into the options of indextables reads and writes (explicit options win).
- `spark.sql(...)` runs our command texts (MERGE SPLITS, CHECKPOINT INDEXTABLES, ...) like
  `it.sql`: Spark's parser has no such statements and Python cannot extend it.
- A bare `.save()` (mode ErrorIfExists / Ignore) is refused by Spark for Python data sources; the
  wrapper checks for an existing table itself and then writes in append mode.
- Spark 4.3 caches a Python data source's planned read (partitions + reader) on the relation and
  reuses it for later scans of the same DataFrame or view that push no filters. Those scans would
  see a stale snapshot and, worse, the pushed filters of an earlier query (wrong rows). Every read
  we create therefore carries a guard filter on the virtual `_indexall` column that is always true
  but always pushed, so each scan is planned afresh; DataFrame reads then drop `_indexall`.
"""
from __future__ import annotations

import functools
import threading

from pyspark.sql import DataFrameReader, DataFrameWriter, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

from ..errors import TableExistsError
from ..options import PREFIX
from .datasource import FORMAT_NAME, INDEXALL, PLAN_GUARD, IndexTablesDataSource

_patch_lock = threading.Lock()
_patched = False


def _is_ours(fmt: str | None) -> bool:
    return bool(fmt) and fmt.lower() in (FORMAT_NAME, "indextables_spark", "io.indextables.spark")


def conf_options(spark: SparkSession) -> dict[str, str]:
    """`spark.indextables.*` entries of the session conf."""
    import json

    # One JSON string from the JVM: `spark.conf.getAll` makes a Py4J round trip per entry
    # (25-60 ms per call, paid by every read and write). Looking the class up costs ~5 ms: kept.
    mapper = spark.__dict__.get("_it_json_mapper")
    if mapper is None:
        mapper = spark.__dict__["_it_json_mapper"] = spark._jvm.com.fasterxml.jackson.databind.ObjectMapper()
    entries = json.loads(mapper.writeValueAsString(spark.conf._jconf.getAllAsJava()))
    return {k: v for k, v in entries.items() if k.startswith(PREFIX)}


def _original(cls, name):
    fn = getattr(cls, name)
    return getattr(fn, "_indextables_original", fn)


def _wrap(cls, name, make):
    original = _original(cls, name)
    wrapped = functools.wraps(original)(make(original))
    wrapped._indextables_original = original
    setattr(cls, name, wrapped)


def _given(obj) -> dict:
    return obj.__dict__.setdefault("_it_options", {})


def _short(key: str) -> str:
    k = key.lower()
    return k[len(PREFIX):] if k.startswith(PREFIX) else k


def _inject_conf(obj, spark) -> None:
    """Copy conf entries whose key was not given explicitly (with or without the prefix)."""
    given = {_short(k) for k in _given(obj)}
    set_option = _original(type(obj), "option")
    for k, v in conf_options(spark).items():
        if _short(k) not in given:
            set_option(obj, k, v)


def _install_option_tracking(cls) -> None:
    def make_format(orig):
        def format(self, source):
            self._it_format = source
            return orig(self, source)
        return format

    def make_option(orig):
        def option(self, key, value):
            _given(self)[str(key)] = value
            return orig(self, key, value)
        return option

    def make_options(orig):
        def options(self, **opts):
            _given(self).update({str(k): v for k, v in opts.items()})
            return orig(self, **opts)
        return options

    def make_partition_by(orig):
        def partitionBy(self, *cols):
            if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
                cols = tuple(cols[0])
            # Deferred until save/start: the format may be set after partitionBy.
            self._it_partition_by = [str(c) for c in cols]
            return self
        return partitionBy

    _wrap(cls, "format", make_format)
    _wrap(cls, "option", make_option)
    _wrap(cls, "options", make_options)
    if hasattr(cls, "partitionBy"):
        _wrap(cls, "partitionBy", make_partition_by)


def _apply_partition_by(obj, cls) -> bool:
    """Turn a deferred partitionBy into our option (ours) or Spark's own call. True if ours."""
    cols = obj.__dict__.pop("_it_partition_by", None)
    ours = _is_ours(getattr(obj, "_it_format", None))
    if cols is not None:
        if ours:
            obj.option("partitionBy", ",".join(cols))
        else:
            _original(cls, "partitionBy")(obj, *cols)
    return ours


def guarded(df):
    """The DataFrame with the always-true plan guard on `_indexall` (see the module docstring)."""
    from pyspark.sql import functions as sf

    return df.where(~sf.col(INDEXALL).eqNullSafe(sf.lit(PLAN_GUARD)))


def raw_load(spark: SparkSession, options: dict):
    """An indextables read with the `_indexall` column and no guard (for views)."""
    from .reader import load_options

    reader = spark.read.format(FORMAT_NAME)
    _inject_conf(reader, spark)
    for k, v in {**load_options(spark, options), **options}.items():
        _original(DataFrameReader, "option")(reader, k, v)
    return _original(DataFrameReader, "load")(reader)


def register_functions(spark: SparkSession, conf: dict[str, str]) -> None:
    """(Re-)register the SQL table functions with this spark.indextables.* conf."""
    from ..commands.table_functions import register_command_functions
    from .table_functions import register_table_functions

    register_command_functions(spark, conf)
    register_table_functions(spark, conf)
    spark.__dict__["_it_functions_conf"] = dict(conf)


def refresh_functions(spark: SparkSession, text: str) -> None:
    """Before SQL that calls our table functions: re-register them when the conf changed since
    they were registered (they run in workers with the conf they were registered with, so
    credentials set after `register()` would otherwise be missing)."""
    if "indextables_" not in text.lower() or "_it_functions_conf" not in spark.__dict__:
        return
    conf = conf_options(spark)
    if conf != spark.__dict__["_it_functions_conf"]:
        register_functions(spark, conf)


def _install_sql_bridge() -> None:
    from . import sql_bridge

    def make_sql(orig):
        def sql(self, sqlQuery, args=None, **kwargs):
            if isinstance(sqlQuery, str) and not args and not kwargs:
                from ..commands.parser import parse_command

                # our command texts (MERGE SPLITS ..., CHECKPOINT INDEXTABLES ...) are Spark-free:
                # run them as it.sql would; parse errors in them name the position
                if parse_command(sqlQuery) is not None:
                    from ..commands.sql import run_sql

                    return run_sql(self, sqlQuery)
            if isinstance(sqlQuery, str):
                refresh_functions(self, sqlQuery)
                from .table_functions import rewrite_sql

                # indextables_search/... calls with literal arguments → distributed views
                sqlQuery = rewrite_sql(self, sqlQuery)
                # a view referenced twice gets a relation per reference (see sql_bridge)
                sqlQuery = sql_bridge.split_view_references(self, sqlQuery)
            if isinstance(sqlQuery, str) and not args and not kwargs:
                handled = sql_bridge.try_handle(self, sqlQuery, _is_ours)
                if handled is not None:
                    return handled
            return orig(self, sqlQuery, args, **kwargs)
        return sql

    _wrap(SparkSession, "sql", make_sql)


def _install_bridges() -> None:
    for cls in (DataFrameReader, DataStreamReader, DataFrameWriter, DataStreamWriter):
        _install_option_tracking(cls)

    def make_mode(orig):
        def mode(self, saveMode):
            if saveMode is not None:
                self._it_mode = saveMode
            return orig(self, saveMode)
        return mode

    def make_save(orig):
        def save(self, path=None, format=None, mode=None, partitionBy=None, **options):
            if format is not None:
                self.format(format)
            if mode is not None:
                self.mode(mode)
            if partitionBy is not None:
                self.partitionBy(partitionBy)
            if options:
                self.options(**options)
            if not _apply_partition_by(self, DataFrameWriter):
                return orig(self, path=path)
            _inject_conf(self, self._spark)
            save_mode = str(getattr(self, "_it_mode", "errorifexists")).lower().replace("_", "")
            if save_mode in ("error", "errorifexists", "default", "ignore"):
                from ..table import IndexTable

                target = path or _given(self).get("path")
                table = IndexTable(target, {**conf_options(self._spark), **{k: str(v) for k, v in _given(self).items()}})
                if table.exists():
                    if save_mode == "ignore":
                        return None
                    raise TableExistsError(
                        f"an indextables table already exists at {target}; use mode('append') or mode('overwrite')"
                    )
                _original(DataFrameWriter, "mode")(self, "append")
            result = orig(self, path=path)
            # The commit ran in a worker without a session: merge-/purge-on-write run here (never raise).
            from ..commands.post_write import maybe_run

            maybe_run(self._spark, path or _given(self).get("path"),
                      {**conf_options(self._spark), **{k: str(v) for k, v in _given(self).items()}})
            return result
        return save

    def make_start(orig):
        def start(self, path=None, format=None, outputMode=None, partitionBy=None, queryName=None, **options):
            if format is not None:
                self.format(format)
            if partitionBy is not None:
                self.partitionBy(partitionBy)
            if options:
                self.options(**options)
            if not _apply_partition_by(self, DataStreamWriter):
                return orig(self, path=path, outputMode=outputMode, queryName=queryName)
            _inject_conf(self, self._spark)
            query = orig(self, path=path, outputMode=outputMode, queryName=queryName)
            from ..commands.post_write import watch_stream

            # merge-/purge-on-write after the micro-batches (the sink commits in a worker)
            watch_stream(self._spark, query, path or _given(self).get("path"),
                         {**conf_options(self._spark), **{k: str(v) for k, v in _given(self).items()}})
            return query
        return start

    def make_load(orig):
        def load(self, path=None, format=None, schema=None, **options):
            if format is not None:
                self.format(format)
            if options:
                self.options(**options)
            if not _is_ours(getattr(self, "_it_format", None)):
                return orig(self, path=path, schema=schema)
            _inject_conf(self, self._spark)
            if isinstance(self, DataStreamReader):
                return orig(self, path=path, schema=schema).drop(INDEXALL)
            from .reader import finish_load, load_options

            for k, v in load_options(self._spark, _given(self)).items():
                _original(DataFrameReader, "option")(self, k, v)
            df = orig(self, path=path, schema=schema)
            return finish_load(guarded(df), _given(self))   # top n / score order; drops _indexall
        return load

    def make_insert_into(orig):
        def insertInto(self, tableName, overwrite=None):
            from . import sql_bridge

            src = sql_bridge.view_source(self._spark, tableName)
            if src is None:
                return orig(self, tableName, overwrite)
            # Spark refuses INSERT into our (DataFrame-backed) views: write to their table instead
            if overwrite is None:
                overwrite = str(getattr(self, "_it_mode", "")).lower() == "overwrite"
            sql_bridge.insert_dataframe(self._spark, src, tableName, bool(overwrite), self._df,
                                        write_options={k: str(v) for k, v in _given(self).items()})
        return insertInto

    _wrap(DataFrameWriter, "insertInto", make_insert_into)
    _wrap(DataFrameWriter, "mode", make_mode)
    _wrap(DataFrameWriter, "save", make_save)
    _wrap(DataStreamWriter, "start", make_start)
    _wrap(DataFrameReader, "load", make_load)
    _wrap(DataStreamReader, "load", make_load)


def register(spark: SparkSession) -> None:
    """Register the data source and table functions; enable filter pushdown; install bridges."""
    global _patched
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(IndexTablesDataSource)
    register_functions(spark, conf_options(spark))
    with _patch_lock:
        if not _patched:
            _install_bridges()
            _install_sql_bridge()
            _patched = True
