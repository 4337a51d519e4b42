"""Option handling shared by the Spark reader and writer."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import InvalidOptionError
from ..options import PREFIX, Options

# Table-level settings recorded in the table's metadata configuration at creation, so later
# appends index the same way whatever the session's options are (like Delta table properties).
TABLE_SETTING_PREFIXES = ("indexing.", "dataskippingnumindexedcols", "stats.")


def resolve_options(raw: Mapping[str, Any]) -> Options:
    """Merge data source options: conf-copied `spark.indextables.*` keys first, short keys win."""
    items = [(str(k), v) for k, v in dict(raw).items()]
    prefixed = {k: v for k, v in items if k.lower().startswith(PREFIX)}
    short = {k: v for k, v in items if not k.lower().startswith(PREFIX)}
    return Options.of(prefixed, short)


def table_path(raw: Mapping[str, Any]) -> str:
    path = dict(raw).get("path") or dict(raw).get("paths")
    if not path:
        raise InvalidOptionError("indextables: no table path given (use .load(path) / .save(path) or option 'path')")
    if isinstance(path, str) and path.startswith("["):
        import json

        paths = json.loads(path)
        if len(paths) != 1:
            raise InvalidOptionError(f"indextables reads one table at a time, got paths {paths}")
        path = paths[0]
    return str(path)


def table_settings(opts: Options) -> dict[str, str]:
    """The options to record in a new table's metadata configuration (never credentials)."""
    return {PREFIX + k: v for k, v in opts.items() if k.startswith(TABLE_SETTING_PREFIXES)}


def partition_columns_option(opts: Options) -> list[str] | None:
    raw = opts.get_str("partitionBy")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.startswith("["):
        import json

        cols = json.loads(raw)
    else:
        cols = [c.strip() for c in raw.split(",") if c.strip()]
    return [str(c) for c in cols]
