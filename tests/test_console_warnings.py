"""A normal run prints no warning the package causes: `it.register` replaces the data source Spark
found by itself (the `pyspark_indextables*` modules) without Spark's DataSourceManager WARN for each
of its names (spark/source_registration.py). The README's Quickstart, run as a script by
tests/smoke/test_readme_example.py, checks the console itself; these check the cause, in the
session the fast tier already has."""

from __future__ import annotations

from typing import Any

import pytest

import indextables_spark as it
from indextables_spark.spark.source_registration import DATA_SOURCE_LOGGER, quiet_replacements

pytestmark = pytest.mark.spark


def _logger(spark: Any) -> tuple[str, bool]:
    """The DataSourceManager logger's level, and whether it has a configuration of its own."""
    log4j = spark._jvm.org.apache.logging.log4j
    own = log4j.LogManager.getContext(False).getConfiguration().getLoggers().containsKey(DATA_SOURCE_LOGGER)
    return str(log4j.LogManager.getLogger(DATA_SOURCE_LOGGER).getLevel()), bool(own)


def test_register_quiets_only_its_own_registrations(spark):
    before = _logger(spark)
    assert before[1] is False  # follows the root logger (sc.setLogLevel)
    with quiet_replacements(spark):
        assert _logger(spark) == ("ERROR", True)  # the replaced-registration WARNs are not logged
    assert _logger(spark) == before
    it.register(spark)  # again on the session: every name replaced again, quietly
    assert _logger(spark) == before
    # a level the user gave the logger is kept
    log4j = spark._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel(DATA_SOURCE_LOGGER, log4j.Level.INFO)
    try:
        with quiet_replacements(spark):
            assert _logger(spark)[0] == "ERROR"
        assert _logger(spark) == ("INFO", True)
    finally:
        context = log4j.LogManager.getContext(False)
        context.getConfiguration().removeLogger(DATA_SOURCE_LOGGER)
        context.updateLoggers()
    assert _logger(spark) == before


def test_without_a_jvm_nothing_changes():
    class Session:  # no JVM gateway (as a Connect session has none)
        pass

    with quiet_replacements(Session()):
        pass
