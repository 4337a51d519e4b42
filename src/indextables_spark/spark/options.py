"""Option handling shared by the Spark reader and writer."""

from __future__ import annotations

import json
from typing import Any, Mapping

from indextables_spark.config.option_checks import CHECKED, checked_elsewhere, warn_unknown_options
from indextables_spark.config.options import PREFIX, Options
from indextables_spark.config.sessions import spark_read_options
from indextables_spark.errors import InvalidOptionError


def resolve_options(raw: Mapping[str, Any]) -> Options:
    """Merge data source options: conf-copied `spark.indextables.*` keys first, short keys win.
    `read.stalenessLimit` is 0 unless set (config/sessions.spark_read_options): Spark plans reads in
    Python workers that never see the commits other workers make."""
    items = [(str(k), v) for k, v in dict(raw).items()]
    prefixed = {k: v for k, v in items if k.lower().startswith(PREFIX)}
    short = {k: v for k, v in items if not k.lower().startswith(PREFIX)}
    marked = any(k.lower() == CHECKED.lower() and str(v).lower() == "true" for k, v in prefixed.items())
    with checked_elsewhere(marked):  # the driver logged them (spark/register.py): once per job
        # the short keys are the `.option()` calls' (the prefixed ones Options.of checks): a
        # mistyped `qurey` would otherwise read the whole table without a word
        warn_unknown_options(short)
        return spark_read_options(Options.of(prefixed, short))


def table_path(raw: Mapping[str, Any]) -> str:
    path = dict(raw).get("path") or dict(raw).get("paths")
    if not path:
        raise InvalidOptionError("indextables: no table path given (use .load(path) / .save(path) or option 'path')")
    if isinstance(path, str) and path.startswith("["):
        paths = json.loads(path)
        if len(paths) != 1:
            raise InvalidOptionError(f"indextables reads one table at a time, got paths {paths}")
        path = paths[0]
    return str(path)
