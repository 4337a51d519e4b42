"""Row-level DELETE: `IndexTable.delete(where, query=…)` and `DELETE FROM INDEXTABLES '<path>' WHERE …`.

The predicate uses the partition-filter grammar (expr/partition_filter.py) over every column:
comparisons, IN, BETWEEN, IS [NOT] NULL, AND/OR/NOT, with literals converted to the column types
(dates and timestamps from ISO text; timestamps without a zone are UTC). A full-text condition is
either the `query` argument or a top-level `_indexall = '<query>'` conjunct. Rows where the
predicate is TRUE are deleted (NULL keeps the row, as in SQL).

One delete is one committed version, with one kind of delete log (core/log/deletes/delete_logs.py):

- POSITIONAL (the default): the live splits that may match (after partition pruning, min/max
  stats and Bloom filters) are searched and filtered exactly, and the row ids of the matching rows
  of each split go into one log per split; a split all of whose live rows match is removed
  instead (a `remove` action, dataChange=true).
- PRIMARY_KEY (automatic when the predicate is `<key> = v` / `<key> IN (…)` on the table's declared
  key column, `spark.indextables.indexing.primaryKey`): one log with the key values, no split is read.
- EQUALITY (kind="equality"): one log with the value tuples of a predicate that is a conjunction of
  `column = value` or one column's `= / IN` list, on stored (non-partition) columns.

Key and equality logs apply to the rows of every split added before the delete; rows written
later with the same values stay. The number of rows they delete is not computed (None).
The commit uses the transaction's "merge" resolver by default; see core/log/commit/transaction.py for the
conflicts with concurrent merges and deletes. On such a conflict the delete is planned again from
the new latest version, under the commit policy (core/log/commit/policy.py: for
`spark.indextables.transaction.retry.timeBudgetMs`, at most `spark.indextables.delete.maxAttempts`
times when set; the "fail" resolver never retries).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence, TypeVar

import numpy as np
import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import EQUALITY, POSITIONAL, PRIMARY_KEY, AddFile, RemoveFile
from indextables_spark.core.log.deletes.delete_logs import load_split_deletes, positional_table, write_delete_log
from indextables_spark.core.log.commit.reference_splits import refuse_reference_writes
from indextables_spark.core.log.read.snapshot import Snapshot
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.policy import CommitPolicy, replan
from indextables_spark.core.log.commit.transaction import Transaction, now_ms
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.format.column_specs import column_specs
from indextables_spark.core.split.read.plan import ReadPlan
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.split.read.scan import TableScan
from indextables_spark.core.split.read.index_only import check_index_only
from indextables_spark.core.storage import Storage
from indextables_spark.errors import (
    PredicateError,
    TableNotFoundError,
)
from indextables_spark.expr.model import EqualTo, Filter, In, Or
from indextables_spark.expr.partition_filter import parse_predicate
from indextables_spark.expr.search_query import SearchQuery
from indextables_spark.expr.where import INDEXALL, and_parts, column_types, typed
from indextables_spark.results.maintenance import DeleteResult
from indextables_spark.results.record import elapsed_ms
from indextables_spark.ops.command import CommandParser, Context, Target
from indextables_spark.ops.table_commands import table_and_where

log = logging.getLogger(__name__)

OPERATION = "DELETE"
WHAT = "DELETE predicate"
PRIMARY_KEY_OPTION = "indexing.primaryKey"
KINDS = {"auto": None, "positional": POSITIONAL, "equality": EQUALITY, "primary_key": PRIMARY_KEY}
MAX_THREADS = 4  # splits searched at once (Tantivy and Arrow release the GIL)
T = TypeVar("T")


class DeletePredicateError(PredicateError):
    """A DELETE predicate that cannot be used (value does not fit its column, wrong shape for the kind)."""


# ---- predicate ------------------------------------------------------------------------------------


def _and_all(items: Sequence[Any], cls: Callable[[Any, Any], Any]) -> Any:
    out = None
    for x in items:
        out = x if out is None else cls(out, x)
    return out


@dataclass(frozen=True)
class Predicate:
    conjuncts: tuple[Filter, ...]  # AND of these (split filter model), over any columns
    query: SearchQuery | None  # the full-text part (query argument AND _indexall conditions)


def parse_delete(where: str | None, query: str | SearchQuery | None, types: Mapping[str, str]) -> Predicate:
    if where is not None and not where.strip():
        raise DeletePredicateError("DELETE: the WHERE predicate is empty")
    if where is None and query is None:
        raise DeletePredicateError(
            "DELETE needs a WHERE predicate or a full-text query (to drop whole partitions "
            "use DROP INDEXTABLES PARTITIONS)"
        )
    given = SearchQuery.of(query)  # a text or an it.SearchQuery (its struct-field narrowing kept)
    queries = [given.text] if given is not None and given.text is not None else []
    conjuncts: list[Filter] = []
    if where is not None:
        expr = parse_predicate(where, {**types, INDEXALL: "string"}, what=WHAT)
        for c in and_parts(expr):
            if isinstance(c, EqualTo) and c.column == INDEXALL and isinstance(c.value, str):
                queries.append(c.value)
            else:
                try:
                    conjuncts.append(typed(c, types, WHAT))
                except PredicateError as e:
                    raise DeletePredicateError(str(e)) from None
    text = None if not queries else queries[0] if len(queries) == 1 else " AND ".join(f"({x})" for x in queries)
    if given is not None and text == given.text:
        return Predicate(tuple(conjuncts), given)  # the caller's value: its checks are kept
    return Predicate(tuple(conjuncts), SearchQuery.of(text, given.narrowing if given is not None else ()))


# ---- key / equality deletes ----------------------------------------------------------------------------


def _column_values(f: Filter) -> tuple[str, list[Any]] | None:
    """(column, values) when f is `c = v`, `c IN (…)` or an OR of those on one column."""
    if isinstance(f, EqualTo) and f.value is not None:
        return f.column, [f.value]
    if isinstance(f, In):
        return f.column, [v for v in f.values if v is not None]
    if isinstance(f, Or):
        left, right = _column_values(f.left), _column_values(f.right)
        if left and right and left[0] == right[0]:
            return left[0], left[1] + right[1]
    return None


def equality_values(pred: Predicate, arrow_types: Mapping[str, pa.DataType]) -> pa.Table | None:
    """The value tuples of an equality-shaped predicate, None when it has another shape."""
    if pred.query is not None or not pred.conjuncts:
        return None
    if len(pred.conjuncts) == 1:
        cv = _column_values(pred.conjuncts[0])
        if cv is None:
            return None
        return pa.table({cv[0]: pa.array(cv[1], arrow_types[cv[0]])})
    cols: dict[str, Any] = {}
    for f in pred.conjuncts:
        if not isinstance(f, EqualTo) or f.value is None or f.column in cols:
            return None
        cols[f.column] = f.value
    return pa.table({c: pa.array([v], arrow_types[c]) for c, v in cols.items()})


def choose_kind(
    requested: str, pred: Predicate, values: pa.Table | None, primary_key: str | None, partition_columns: Sequence[str]
) -> str:
    if requested not in KINDS:
        raise DeletePredicateError(f"DELETE: unknown kind {requested!r} (expected one of {sorted(KINDS)})")
    kind = KINDS[requested]
    key_shaped = (
        values is not None
        and primary_key is not None
        and values.column_names == [primary_key]
        and primary_key not in set(partition_columns)
    )
    if kind is None:
        return PRIMARY_KEY if key_shaped else POSITIONAL
    if kind == PRIMARY_KEY and not key_shaped:
        raise DeletePredicateError(
            "DELETE kind primary_key needs a declared key column (spark.indextables.indexing.primaryKey, "
            f"declared: {primary_key!r}) and a predicate `<key> = v` or `<key> IN (...)` on it"
        )
    if kind == EQUALITY:
        if values is None:
            raise DeletePredicateError(
                "DELETE kind equality needs `c1 = v1 AND c2 = v2 ...` or `c IN (...)` without a full-text query"
            )
        parts = [c for c in values.column_names if c in set(partition_columns)]
        if parts:
            raise DeletePredicateError(
                f"DELETE kind equality: {parts} are partition columns, which splits do not "
                f"store; use a positional delete"
            )
    return kind


# ---- positional deletes -------------------------------------------------------------------------------


@dataclass
class _SplitMatch:
    add: AddFile
    row_ids: np.ndarray
    live_rows: int


def _match_split(storage: Storage, snapshot: Snapshot, plan: ReadPlan, add: AddFile, target: pa.Schema) -> _SplitMatch:
    """The live rows of one split the plan matches (ReadPlan.row_ids; `target`: the table's columns,
    on which the residual filters are checked with the split's partition values)."""
    reader = SplitReader(get_cache(plan.options).local_dir(storage, add))
    existing = load_split_deletes(storage, snapshot.deletes_for(add), reader.num_rows, add.path)
    row_ids = plan.row_ids(reader, add, existing, target)
    live = reader.count(deletes=existing) if row_ids.size else 0
    return _SplitMatch(add, row_ids, live)


# ---- the command ------------------------------------------------------------------------------------


def replan_on_conflict(log_: TransactionLog, resolver: str, attempt: Callable[[], T]) -> T:
    """Run `attempt` (plan, stage and commit a delete) again on a conflict with a concurrent commit,
    under the commit policy (core/log/commit/policy.py; `delete.maxAttempts` caps it when set); once
    with the "fail" resolver."""
    if resolver == "fail":
        return attempt()
    policy = CommitPolicy.from_options(log_.options, cap_key="delete.maxAttempts")
    return replan(policy, lambda n: attempt(), log_.storage.uri, OPERATION)


def delete(
    log_: TransactionLog,
    where: str | None = None,
    query: str | SearchQuery | None = None,
    kind: str = "auto",
    resolver: str = "merge",
) -> DeleteResult:
    """Delete the rows matching `where` (and `query`) as one new version; see the module doc."""

    def once() -> DeleteResult:
        started = time.perf_counter()
        txn = Transaction(log_, resolver=resolver, operation=OPERATION)
        staged = stage_delete(txn, where, query, kind)
        if staged.result.status == "NO_ACTION":
            return staged.result
        try:
            version = txn.commit()
        except BaseException:
            if staged.written and txn.committed_version is None:
                log_.storage.delete(staged.written)  # never referenced by the log
            raise
        return replace(staged.result, status="SUCCESS", version=version, duration_ms=elapsed_ms(started))

    result = replan_on_conflict(log_, resolver, once)
    if result.status == "SUCCESS":
        log.info(
            "DELETE on %s: version %d, %s, %s rows, %d delete logs, %d splits removed",
            log_.storage.uri,
            result.version,
            result.kind,
            result.deleted_rows,
            result.delete_logs,
            result.removed_splits,
        )
    return result


@dataclass(frozen=True)
class StagedDelete:
    """A delete staged on a transaction: its result (status STAGED, or NO_ACTION when nothing
    matched and nothing was staged; version: the read version) and the delete log files it wrote
    (to delete if the commit fails)."""

    result: DeleteResult
    written: list[str]


def stage_delete(txn: Transaction, where: str | None, query: str | SearchQuery | None, kind: str) -> StagedDelete:
    """Plan a delete against the table `txn` read and stage its delete logs and removes on `txn`
    (the operation becomes DELETE with its parameters); nothing is committed."""
    started = time.perf_counter()
    log_ = txn.log
    snap = txn.snapshot()
    if snap is None:
        raise TableNotFoundError(f"DELETE: no indextables table at {log_.storage.uri}")
    # Refuse a table this version may not write before any delete log is written into it.
    from indextables_spark.core.log.model.protocol_gate import check_writable

    check_writable(snap.protocol_action, f"DELETE on table {log_.storage.uri}")
    # Nor into a table holding the reference implementation's splits (it cannot apply our logs).
    refuse_reference_writes(snap, log_.storage.uri, OPERATION)
    storage = log_.storage
    conf = {k: v for k, v in snap.metadata_action.configuration.items() if not k.startswith("docMappingSchema.")}
    opts = Options.of(conf, log_.options)
    types = column_types(snap.schema_json)
    arrow_types = {f.name: f.type for f in arrow_schema(snap.schema_json)}
    pred = parse_delete(where, query, types)
    values = equality_values(pred, arrow_types)
    specs = column_specs(snap.schema_json, snap.partition_columns, opts)
    subject = f"DELETE on {storage.uri}"
    index_only = check_index_only(pred.conjuncts, specs, subject)
    if index_only and values is not None:
        # equality and key deletes match values in the rows, which hold no index-only column
        if kind in ("equality", "primary_key"):
            raise DeletePredicateError(
                f"DELETE kind {kind}: the predicate reads index-only columns (indexing.indexonlyfields), whose "
                f"values only the index holds; use kind positional (or auto)"
            )
        values = None
    chosen = choose_kind(kind, pred, values, _primary_key(opts, types), snap.partition_columns)
    result = DeleteResult(
        table_path=storage.uri,
        status="NO_ACTION",
        version=snap.version,
        read_version=snap.version,
        kind=chosen,
        predicate=where,
        query=query.text if isinstance(query, SearchQuery) else query,
        splits_total=snap.num_files,
    )
    written: list[str] = []
    deleted_rows: int | None = 0
    removed_splits = delete_logs = scanned = 0
    try:
        if chosen == POSITIONAL:
            # the scan (core/split/read/scan.py) prunes the splits that may match (partition values
            # exactly, min/max stats, Bloom filters) and plans what each runs: the query, the
            # filters it applies exactly (the index answers those on index-only columns), the
            # residual checked on the rows with partition values
            scan = TableScan(
                storage, snap, opts, conditions=pred.conjuncts, query=pred.query, columns=(), subject=subject
            )
            files = scan.live_files()
            scanned = len(files)
            plan = scan.read
            target = arrow_schema(snap.schema_json)
            with ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(files)))) as pool:
                matches = list(pool.map(lambda f: _match_split(storage, snap, plan, f, target), files))
            ts = now_ms()
            rows = 0
            for m in matches:
                if not m.row_ids.size:
                    continue
                rows += int(m.row_ids.size)
                if m.row_ids.size == m.live_rows:  # every live row: drop the split
                    txn.remove_files([RemoveFile(m.add.path, ts, True, dict(m.add.partition_values or {}), m.add.size)])
                    removed_splits += 1
                else:
                    d = write_delete_log(storage, POSITIONAL, positional_table(m.row_ids), split_path=m.add.path)
                    written.append(d.path)
                    txn.add_delete_log(d)
                    delete_logs += 1
            deleted_rows = rows
            if not rows:
                return StagedDelete(replace(result, splits_scanned=scanned, duration_ms=elapsed_ms(started)), [])
        else:
            d = write_delete_log(storage, chosen, values)
            written.append(d.path)
            txn.add_delete_log(d)
            delete_logs, deleted_rows = 1, None
    except BaseException:
        if written:
            storage.delete(written)  # never referenced by the log
        raise
    txn.with_operation(
        OPERATION, {"predicate": where, "query": result.query, "kind": chosen, "numDeletedRows": deleted_rows}
    )
    result = replace(
        result,
        status="STAGED",
        deleted_rows=deleted_rows,
        removed_splits=removed_splits,
        delete_logs=delete_logs,
        splits_scanned=scanned,
        duration_ms=elapsed_ms(started),
    )
    return StagedDelete(result, written)


def _primary_key(opts: Options, types: Mapping[str, str]) -> str | None:
    pk = opts.get_str(PRIMARY_KEY_OPTION)
    if not pk:
        return None
    by_lower = {c.lower(): c for c in types}
    name = by_lower.get(pk.strip().lower())
    if name is None:
        raise DeletePredicateError(
            f"table option spark.indextables.{PRIMARY_KEY_OPTION} names {pk!r}, which is not "
            f"a column of the table (columns: {sorted(types)})"
        )
    return name


@dataclass(frozen=True)
class Delete:
    """DELETE FROM INDEXTABLES <table> WHERE <predicate over any columns> (its registry row: ops/registry.py)."""

    result: ClassVar[type[DeleteResult]] = DeleteResult
    path: Target
    where: str

    @classmethod
    def parse(cls, p: CommandParser) -> Delete:
        return cls(*table_and_where(p, "DELETE FROM INDEXTABLES needs a WHERE clause"))

    def run(self, ctx: Context) -> DeleteResult:
        return delete(ctx.log(self.path), self.where)
