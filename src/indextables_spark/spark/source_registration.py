"""How `it.register` (spark/register.py) registers the data source on a session: with the Python
the driver can plan with (`planning_python`), and without Spark's warning that it replaced the
source Spark had found by itself (`register_sources`).

Spark registers the source at start-up from the installed `pyspark_indextables*` modules (its
lookup of `pyspark_*` modules). `spark.dataSource.register` of the same name then replaces that
static registration, and Spark 4.3's DataSourceManager.registerDataSource logs a WARN for each
name, always ("The data source indextables replaced a statically registered data source.", and
"… replaced a previously registered data source." when `register` runs again on the session):
three lines on the console of every program that calls `it.register`, the Quickstart's included.
No public API asks Spark whether a source is registered statically, and registering from Python is
what gives the source the Python it plans with (below) — so the registration stays, and in classic
sessions the DataSourceManager logger is set to ERROR for the duration of the calls (log4j through
the session's JVM gateway), its configuration restored right after: only the warnings of these
calls are left out, a user's own registrations still warn. A Spark Connect server logs them to its
own log, not to the client's console.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Callable, Iterator, Sequence

from indextables_spark.config.sessions import is_connect

log = logging.getLogger(__name__)

EXECUTORS_PYTHON = "spark.sql.execution.pyspark.python"
DATA_SOURCE_LOGGER = "org.apache.spark.sql.execution.datasources.DataSourceManager"


@contextlib.contextmanager
def planning_python(spark: Any) -> Iterator[None]:
    """Register with the driver's own Python when the executors run a packed environment's.

    A data source or UDTF registered from Python records `sc.pythonExec` (PYSPARK_PYTHON) and runs
    it for its planning on the driver too. With a packed environment that path is relative
    (`./environment/bin/python`, docs/guide/deployment.md) and does not resolve where Spark starts
    the driver's planning processes (the session's files directory): planning fails with `Cannot
    run program`. When the session also names the executors' Python
    (spark.sql.execution.pyspark.python, which the tasks run instead of the recorded one), the
    source is registered with this process's Python, which has the package; `sc.pythonExec` is
    restored at once, so nothing else (RDD code, other sources, UDFs registered later) sees the
    change. Classic sessions only: a Connect server registers with its own Python."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    recorded = str(getattr(sc, "pythonExec", "") or "")
    if not recorded or os.path.isabs(recorded) or not spark.conf.get(EXECUTORS_PYTHON, None):
        yield
        return
    sc.pythonExec = sys.executable
    try:
        yield
    finally:
        sc.pythonExec = recorded


def register_sources(spark: Any, sources: Sequence[type]) -> None:
    """`spark.dataSource.register` each source, without the replaced-registration warnings (see the
    module doc)."""
    with quiet_replacements(spark):
        for source in sources:
            spark.dataSource.register(source)


@contextlib.contextmanager
def quiet_replacements(spark: Any) -> Iterator[None]:
    """Classic sessions on log4j 2 (Spark's logging): the DataSourceManager logger at ERROR while
    the block runs, then as it was (its own level again, or no level of its own: it follows the
    root logger, which `sc.setLogLevel` sets). Anywhere else (Spark Connect, another logging
    backend): nothing changes."""
    restore: Callable[[], None] | None = None
    if not is_connect(spark):
        try:
            restore = _raise_level(spark._jvm, DATA_SOURCE_LOGGER)
        except Exception as e:  # no JVM gateway, or not log4j 2: the warnings stay
            log.debug("could not quiet %s: %s", DATA_SOURCE_LOGGER, e)
    try:
        yield
    finally:
        if restore is not None:
            restore()


def _raise_level(jvm: Any, name: str) -> Callable[[], None]:
    """Set logger `name` to ERROR; returns what puts its configuration back."""
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    own = config.getLoggers().containsKey(name)
    previous = config.getLoggerConfig(name).getLevel() if own else None
    log4j.core.config.Configurator.setLevel(name, log4j.Level.ERROR)

    def restore() -> None:
        if own:
            log4j.core.config.Configurator.setLevel(name, previous)
        else:  # the logger had no configuration of its own: remove the one setLevel made
            context.getConfiguration().removeLogger(name)
            context.updateLoggers()

    return restore
