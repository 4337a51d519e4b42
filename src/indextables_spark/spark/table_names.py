"""Table names in our SQL commands (`MERGE SPLITS db.t`, `CHECKPOINT INDEXTABLES t`, ...): the
table's path from the Spark catalog, as the reference resolves them (its session catalog's table
location).

A one-part name is first looked up among the temporary views made by `CREATE TEMPORARY VIEW v USING
indextables OPTIONS (path …)` (spark/sql_bridge.py): the view's options (credentials, ...) come with
its path. Any other name is looked up with `SHOW TABLE EXTENDED` (classic and Spark Connect alike),
which gives a catalog table's provider and location; the provider must be one of our format names.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.errors import AnalysisException

from indextables_spark.errors import TableNotFoundError
from indextables_spark.ops.command import TableName
from indextables_spark.spark import sql_bridge
from indextables_spark.spark.datasource import is_format_name
from indextables_spark.spark.patching import own

_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def _quote(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def local_path(location: str) -> str:
    """`file:/data/t` / `file:///data/t` (how Spark records a local location) → `/data/t`, so a
    table named in a command is the same table, for caches and results, as its path."""
    parsed = urlparse(location)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return unquote(parsed.path)
    return location


def _information(text: str) -> dict[str, str]:
    """`Key: value` lines of SHOW TABLE EXTENDED's `information` column."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and not key.startswith((" ", "|")):
            out.setdefault(key.strip(), value.strip())
    return out


def _catalog_entry(spark: Any, name: TableName) -> Any:
    """The SHOW TABLE EXTENDED row of the table `name` (None when the catalog has no such table)."""

    *namespace, table = name.parts
    pattern = table if _PLAIN.fullmatch(table) else "*"  # LIKE patterns are regular expressions
    where = f" IN {'.'.join(_quote(p) for p in namespace)}" if namespace else ""
    statement = f"SHOW TABLE EXTENDED{where} LIKE '{pattern}'"
    try:
        rows = own(type(spark), "sql")(spark, statement).collect()
    except AnalysisException as e:
        # an unknown catalog or namespace: say which table name led there
        raise TableNotFoundError(
            f"table {name}: the Spark catalog cannot look it up ({str(e).splitlines()[0]}); "
            f"give the table's path in quotes"
        ) from e
    matches = [r for r in rows if r["tableName"].lower() == table.lower()]
    if len(namespace) == 0:
        # temporary views shadow tables of the current namespace, as in Spark's own resolution
        matches.sort(key=lambda r: not r["isTemporary"])
    return matches[0] if matches else None


def resolve_table(spark: Any, name: TableName) -> tuple[str, dict[str, str]]:
    """The path of the indextables table `name` names, and the options that come with it."""

    if len(name.parts) == 1:
        view = sql_bridge.view_source(spark, name.parts[0])
        if view is not None:
            return view.path, {k: v for k, v in view.options.items() if k.lower() != "path"}
    row = _catalog_entry(spark, name)
    if row is None:
        raise TableNotFoundError(
            f"no table or view {name} in the Spark catalog; give an indextables table's path in quotes, "
            f"create the table with CREATE TABLE {name} USING indextables LOCATION '<path>', or a view "
            f"with CREATE TEMPORARY VIEW {name.parts[-1]} USING indextables OPTIONS (path '<path>')"
        )
    if row["isTemporary"]:
        raise TableNotFoundError(
            f"{name} is a temporary view that is not over an indextables table (only views made with "
            f"CREATE TEMPORARY VIEW … USING indextables OPTIONS (path …) name one); give the table's path in quotes"
        )
    info = _information(row["information"] or "")
    provider = info.get("Provider")
    if not is_format_name(provider):
        raise TableNotFoundError(
            f"{name} is not an indextables table (its provider is {provider or 'not recorded'}); "
            f"the command needs an indextables table"
        )
    location = info.get("Location")
    if not location:
        raise TableNotFoundError(f"the Spark catalog records no location for the indextables table {name}")
    return local_path(location), {}
