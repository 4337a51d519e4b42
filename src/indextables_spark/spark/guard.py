"""The plan guard: how a read is kept from returning rows planned for another scan.

Spark 4.1–4.3 keep a Python data source's planned read (the reader with its pushed filters, and
its partitions) on the *relation* and reuse it: a later scan of the same DataFrame or view that
pushes no filter runs the previous scan's reader, and two scans of one relation in one query
(self-join, self-union) both run the reader planned last. Nothing in the data source API tells a
reader which scan it serves, so:

- A read is *guarded* when its plan filters on `NOT (_indexguard <=> '<prefix><epoch>')`, always
  true (`_indexguard` is a virtual, always-NULL column of its own: on `_indexall`, Spark's constant
  propagation would fold the guard away next to `_indexall = '<query>'`). Spark pushes it, so every scan of a guarded relation is planned afresh, and the epoch is
  `unix_micros(current_timestamp())`, which Spark folds to one literal per query before pushdown:
  scans of the same relation with the same epoch belong to one query. Guarded reads come from our
  load wrapper (`it.register`) and our SQL views.
- A guarded scan reads the latest version and narrows by the pushed filters, unless another scan of
  the same relation in the same query pushed different filters: then both would run the reader
  planned last, so it narrows by none of them. Data filters are always handed back to Spark as
  well (the reader applies them exactly, Spark again): a scan whose filters were taken must not
  lose them when it ends up running the reader planned for a sibling scan. The full-text query (`_indexall`) cannot be left to Spark: two scans of one relation in
  one query with different queries fail with an error saying to load the table once per scan.
- An unguarded read (a plain `spark.read.format("indextables").load()` without `it.register`, or
  `CREATE TEMPORARY VIEW ... USING indextables` reaching Spark directly) may be reused for any later
  scan, so it reads the version pinned when the DataFrame was loaded and pushes nothing: every
  filter is applied by Spark over the splits (slower, always right). `_indexall` queries and
  ranked reads (`limit`, `orderBy`) need a guarded read and fail with an error saying so.

Scans are recorded on the driver (where Spark plans) in small files, one per relation and query.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import Options
from indextables_spark.config.sessions import functions
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter as SparkFilter

    from indextables_spark.core.log.read.snapshot import Snapshot

INDEXALL = "_indexall"
INDEXGUARD = "_indexguard"
VIRTUAL_COLUMNS = (INDEXALL, INDEXGUARD)
GUARD_PREFIX = "\u0000indextables-plan-guard:"
_SCANS_DIR = "indextables-scans"
_KEEP_SECONDS = 3600.0


@dataclass(frozen=True)
class Guard:
    """The guard filter of one query: `epoch` is the same for every scan of that query."""

    epoch: str


def parse(value: object) -> Guard | None:
    if isinstance(value, str) and value.startswith(GUARD_PREFIX):
        return Guard(value[len(GUARD_PREFIX) :])
    return None


def guarded(df: Any) -> Any:
    """The DataFrame with the plan guard `NOT (_indexguard <=> '<prefix>' ||
    unix_micros(current_timestamp()))`, without the `_indexguard` column (keeps `_indexall`)."""

    sf = functions(df)
    epoch = sf.unix_micros(sf.current_timestamp()).cast("string")
    return df.where(~df[INDEXGUARD].eqNullSafe(sf.concat(sf.lit(GUARD_PREFIX), epoch))).drop(INDEXGUARD)


def _scans_dir() -> str:
    d = os.path.join(tempfile.gettempdir(), _SCANS_DIR)
    os.makedirs(d, exist_ok=True)
    return d


def _forget_old(d: str, now: float) -> None:
    for name in os.listdir(d):
        p = os.path.join(d, name)
        try:
            if now - os.stat(p).st_mtime > _KEEP_SECONDS:
                os.unlink(p)
        except FileNotFoundError:
            pass


def record_scan(relation_id: str, epoch: str, queries: list[str], filters: list[SparkFilter], path: str) -> bool:
    """Record one guarded scan; True when this relation's scans in this query all pushed the same
    filters (the reader may narrow by them), False when they differ (leave them to Spark)."""
    d = _scans_dir()
    name = os.path.join(d, f"{relation_id}-{epoch}")
    line = json.dumps({"q": queries, "f": sorted(repr(f) for f in filters)}) + "\n"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    with open(name) as fh:
        seen = [json.loads(x) for x in fh if x.strip()]
    if len(seen) == 1:
        now = time.time()
        if int(now) % 16 == 0:  # now and then: files of past queries
            _forget_old(d, now)
        return True
    if any(s["q"] != seen[0]["q"] for s in seen):
        raise InvalidOptionError(
            f"one loaded DataFrame/view of the indextables table {path} is scanned {len(seen)} times in one query "
            f"with different full-text queries or filters on index-only columns ({sorted({' AND '.join(s['q']) or '<none>' for s in seen})}); "
            f"Spark plans one read per loaded relation, so load the table once per scan "
            f"(spark.read.format('indextables').load(path) for each side, or a separate view per query)"
        )
    return all(s["f"] == seen[0]["f"] for s in seen)


def record_explanation(explanation: dict[str, Any]) -> None:
    """Keep what one planned read does (reader.partitions) for it.explain(df) on this machine."""
    d = _scans_dir()
    name = os.path.join(d, f"explain-{time.time():.6f}-{os.getpid()}-{id(explanation)}.json")
    tmp = name + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(explanation, fh)
    os.replace(tmp, name)


def explanations_since(t0: float) -> list[dict[str, Any]]:
    """The reads planned on this machine since t0 (epoch seconds), oldest first."""
    d = _scans_dir()
    out: list[dict[str, Any]] = []
    for name in sorted(os.listdir(d)):
        if not (name.startswith("explain-") and name.endswith(".json")):
            continue
        try:
            if float(name.split("-")[1]) < t0:
                continue
            with open(os.path.join(d, name), encoding="utf-8") as fh:
                out.append(json.load(fh))
        except (ValueError, OSError):
            continue
    return out


def unguarded_query_message(path: str) -> str:
    return (
        f"a full-text `{INDEXALL} = '<query>'` filter on {path} needs a guarded read: call "
        f"indextables_spark.register(spark) before loading the table or creating the view (its load and "
        f"view bridge plan every scan afresh), or pass the query as the read option 'query'"
    )


def unguarded_index_only_message(path: str, column: str | None) -> str:
    return (
        f"a filter on the index-only column {column!r} of {path} (indexing.indexonlyfields) is answered by the "
        f"index alone, which needs a guarded read: call indextables_spark.register(spark) before loading the "
        f"table or creating the view (the rows hold NULL for an index-only column, so Spark cannot apply it)"
    )


def unguarded_ranking_message(path: str) -> str:
    return (
        f"options 'limit' / 'orderBy' on {path} rank across tasks, which needs the read returned by "
        f"spark.read.format('indextables') after indextables_spark.register(spark); without it, use "
        f"option 'withScore' and DataFrame.orderBy('_score', ascending=False).limit(n)"
    )


@dataclass(frozen=True)
class SnapshotPin:
    """Which snapshot the readers of one relation read (see spark/guard.py)."""

    relation_id: str  # one per loaded DataFrame / view (Spark keeps one DataSource per relation)
    version: int  # the version time travel asked for, else the latest at load time
    time_travel: bool

    def snapshot(self, path: str, opts: Options, latest: bool) -> Snapshot:
        table = IndexTable(path, opts)
        if latest and not self.time_travel:
            return table.snapshot()
        return table.snapshot(version=self.version)
