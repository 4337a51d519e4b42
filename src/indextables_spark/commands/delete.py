"""Row-level DELETE: `IndexTable.delete(where, query=…)` and `DELETE FROM INDEXTABLES '<path>' WHERE …`.

The predicate uses the partition-filter grammar (log/partition_filter.py) over every column:
comparisons, IN, BETWEEN, IS [NOT] NULL, AND/OR/NOT, with literals converted to the column types
(dates and timestamps from ISO text; timestamps without a zone are UTC). A full-text condition is
either the `query` argument or a top-level `_indexall = '<query>'` conjunct. Rows where the
predicate is TRUE are deleted (NULL keeps the row, as in SQL).

One delete is one committed version, with one kind of delete log (log/delete_logs.py):

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
The commit uses the transaction's "merge" resolver by default; see log/transaction.py for the
conflicts with concurrent merges and deletes. On such a conflict the delete is planned again from
the new latest version (up to `spark.indextables.delete.maxAttempts`, default 3, attempts; the
"fail" resolver never retries).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..errors import ConcurrentModificationError, IndexTablesError
from ..log import partition_filter as pf
from ..log.actions import EQUALITY, POSITIONAL, PRIMARY_KEY, AddFile, RemoveFile
from ..log.delete_logs import load_split_deletes, positional_table, write_delete_log
from ..log.table_log import TransactionLog
from ..log.transaction import Transaction, now_ms
from ..options import Options
from ..split import filters as sf

log = logging.getLogger(__name__)

OPERATION = "DELETE"
INDEXALL = "_indexall"
PRIMARY_KEY_OPTION = "indexing.primaryKey"
KINDS = {"auto": None, "positional": POSITIONAL, "equality": EQUALITY, "primary_key": PRIMARY_KEY}
MAX_THREADS = 4  # splits searched at once (Tantivy and Arrow release the GIL)


class DeletePredicateError(IndexTablesError):
    """A DELETE predicate that cannot be used (value does not fit its column, wrong shape for the kind)."""


@dataclass
class DeleteResult:
    table_path: str
    status: str  # SUCCESS | NO_ACTION (nothing matched: no version committed)
    version: int  # the committed version (the read version for NO_ACTION)
    read_version: int
    kind: str | None  # POSITIONAL | EQUALITY | PRIMARY_KEY
    predicate: str | None
    query: str | None
    delete_logs: int = 0
    deleted_rows: int | None = 0  # None for key/equality deletes (not computed)
    removed_splits: int = 0  # splits all of whose rows were deleted
    splits_scanned: int = 0
    splits_total: int = 0
    duration_ms: float = 0.0

    def to_dict(self) -> dict:
        return {_camel(k): v for k, v in asdict(self).items()}


def _camel(s: str) -> str:
    head, *rest = s.split("_")
    return head + "".join(w.title() for w in rest)


# ---- predicate ------------------------------------------------------------------------------------


def column_types(schema_json: Mapping[str, Any]) -> dict[str, str]:
    """{column: Spark type name} (complex types by their kind: struct, array, map), plus the
    dotted paths of struct fields (`user.name`, `user.address.city`) that no column is named."""
    out: dict[str, str] = {}
    nested: dict[str, str] = {}

    def walk(prefix: str, t: Any) -> None:
        for f in t.get("fields", []):
            ft = f.get("type")
            path = f"{prefix}.{f['name']}"
            nested[path] = ft if isinstance(ft, str) else str(ft.get("type"))
            if isinstance(ft, dict) and ft.get("type") == "struct":
                walk(path, ft)

    for f in schema_json.get("fields", []):
        t = f.get("type")
        out[f["name"]] = t if isinstance(t, str) else str(t.get("type"))
        if isinstance(t, dict) and t.get("type") == "struct":
            walk(f["name"], t)
    return {**{k: v for k, v in nested.items() if k not in out}, **out}


_INT_TYPES = frozenset({"byte", "short", "integer", "long"})


def coerce(column: str, spark_type: str, v: Any) -> Any:
    """A parsed literal as the Python value of the column's type (what the filter model expects)."""
    t = spark_type.lower()
    try:
        if t in _INT_TYPES:
            if isinstance(v, bool):
                raise ValueError
            if isinstance(v, int):
                return v
            if isinstance(v, float) and v.is_integer():
                return int(v)
            if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
                return int(v)
        elif t in ("float", "double"):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            if isinstance(v, str):
                return float(v)
        elif t.startswith("decimal"):
            if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                return decimal.Decimal(str(v).strip())
        elif t == "string":
            if isinstance(v, str):
                return v
        elif t == "boolean":
            if isinstance(v, bool):
                return v
            if isinstance(v, str) and v.strip().lower() in ("true", "false"):
                return v.strip().lower() == "true"
        elif t == "date":
            if isinstance(v, str):
                return dt.date.fromisoformat(v.strip())
        elif t in ("timestamp", "timestamp_ntz"):
            if isinstance(v, str):
                ts = dt.datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
                if t == "timestamp_ntz":
                    return ts.replace(tzinfo=None)
                return ts if ts.tzinfo is not None else ts.replace(tzinfo=dt.timezone.utc)
        elif t == "binary":
            if isinstance(v, str):
                return v.encode("utf-8")
    except (ValueError, decimal.InvalidOperation):
        pass
    raise DeletePredicateError(f"DELETE predicate: value {v!r} does not fit column {column!r} of type {spark_type}")


class _Typed(sf.FilterVisitor[sf.Filter]):
    """A parsed predicate with its literals as values of the column types (what sf.arrow_mask expects)."""

    def __init__(self, types: Mapping[str, str]):
        self.types = types

    def visit_and(self, f: Any) -> sf.Filter:
        return type(f)(self.visit(f.left), self.visit(f.right))

    visit_or = visit_and

    def visit_not(self, f: sf.Not) -> sf.Filter:
        return sf.Not(self.visit(f.child))

    def visit_in(self, f: sf.In) -> sf.Filter:
        return sf.In(f.column, tuple(coerce(f.column, self.types[f.column], v) for v in f.values))

    def visit_is_null(self, f: Any) -> sf.Filter:
        return f

    visit_is_not_null = visit_is_null

    def visit_comparison(self, f: Any) -> sf.Filter:
        if f.column == INDEXALL:
            raise DeletePredicateError(f"DELETE predicate: {INDEXALL} = '<query>' must be a top-level AND condition")
        return replace(f, value=coerce(f.column, self.types[f.column], f.value))

    visit_string_match = visit_comparison


def _typed(f: sf.Filter, types: Mapping[str, str]) -> sf.Filter:
    return _Typed(types).visit(f)


def _conjuncts(f: sf.Filter) -> list[sf.Filter]:
    return _conjuncts(f.left) + _conjuncts(f.right) if isinstance(f, sf.And) else [f]


def _and_all(items: Sequence[Any], cls) -> Any:
    out = None
    for x in items:
        out = x if out is None else cls(out, x)
    return out


@dataclass(frozen=True)
class Predicate:
    conjuncts: tuple[sf.Filter, ...]  # AND of these (split filter model), over any columns
    query: str | None  # the full-text part (query argument AND _indexall conditions)


def parse_delete(where: str | None, query: str | None, types: Mapping[str, str]) -> Predicate:
    if where is not None and not where.strip():
        raise DeletePredicateError("DELETE: the WHERE predicate is empty")
    if where is None and query is None:
        raise DeletePredicateError(
            "DELETE needs a WHERE predicate or a full-text query (to drop whole partitions "
            "use DROP INDEXTABLES PARTITIONS)"
        )
    queries = [query] if query is not None else []
    conjuncts: list[sf.Filter] = []
    if where is not None:
        expr = pf.parse_predicate(where, {**types, INDEXALL: "string"}, what="DELETE predicate")
        for c in _conjuncts(expr):
            if isinstance(c, sf.EqualTo) and c.column == INDEXALL and isinstance(c.value, str):
                queries.append(c.value)
            else:
                conjuncts.append(_typed(c, types))
    q = None if not queries else queries[0] if len(queries) == 1 else " AND ".join(f"({x})" for x in queries)
    return Predicate(tuple(conjuncts), q)


# ---- key / equality deletes ----------------------------------------------------------------------------


def _column_values(f: sf.Filter) -> tuple[str, list[Any]] | None:
    """(column, values) when f is `c = v`, `c IN (…)` or an OR of those on one column."""
    if isinstance(f, sf.EqualTo) and f.value is not None:
        return f.column, [f.value]
    if isinstance(f, sf.In):
        return f.column, [v for v in f.values if v is not None]
    if isinstance(f, sf.Or):
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
        if not isinstance(f, sf.EqualTo) or f.value is None or f.column in cols:
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


def _with_partitions(batch: pa.RecordBatch, add: AddFile, partition_types: Mapping[str, pa.DataType]) -> pa.RecordBatch:
    from ..split.partitions import partition_value_array

    if not partition_types:
        return batch
    n = batch.num_rows
    cols, names = list(batch.columns), list(batch.schema.names)
    for c, t in partition_types.items():
        cols.append(partition_value_array(add.partition_values.get(c), t, n))
        names.append(c)
    return pa.RecordBatch.from_arrays(cols, names=names)


def _match_split(
    storage,
    options: Options,
    snapshot,
    add: AddFile,
    pred: Predicate,
    pushed: list[sf.Filter],
    partition_types: Mapping[str, pa.DataType],
) -> _SplitMatch:
    from ..split.cache import get_cache
    from ..split.reader import SplitReader

    reader = SplitReader(get_cache(options).local_dir(storage, add))
    existing = load_split_deletes(storage, snapshot.deletes_for(add), reader.num_rows, add.path)
    found: list[np.ndarray] = []
    for ids, batch in reader.read_with_row_ids(pushed, pred.query, existing):
        if pred.conjuncts:
            keep = sf.arrow_mask(_with_partitions(batch, add, partition_types), list(pred.conjuncts))
            ids = ids.filter(keep)
        if len(ids):
            found.append(ids.to_numpy())
    row_ids = np.concatenate(found) if found else np.empty(0, np.int64)
    live = reader.count(deletes=existing) if row_ids.size else 0
    return _SplitMatch(add, row_ids, live)


def _candidates(storage, snapshot, pred: Predicate, specs, options: Options) -> list[AddFile]:
    from ..split.bloom import skip_by_blooms

    parts = list(snapshot.partition_columns)
    types = column_types(snapshot.schema_json)
    part_only = [f for f in pred.conjuncts if sf.columns_of(f) <= set(parts)]
    data_only = [f for f in pred.conjuncts if not (sf.columns_of(f) & set(parts))]
    files = snapshot.files
    if part_only:
        ptypes = {c: types[c] for c in parts}
        files = [f for f in files if sf.prune_partition(f.partition_values, part_only, parts, ptypes)]
    if data_only:
        files = [f for f in files if not sf.skip_split(f, data_only, specs)]
        files = skip_by_blooms(storage.uri, options, snapshot, files, data_only)
    return files


# ---- the command ------------------------------------------------------------------------------------


def delete(
    log_: TransactionLog,
    where: str | None = None,
    query: str | None = None,
    kind: str = "auto",
    resolver: str = "merge",
) -> DeleteResult:
    """Delete the rows matching `where` (and `query`) as one new version; see the module doc."""
    attempts = 1 if resolver == "fail" else max(1, log_.options.get_int("delete.maxAttempts"))
    for attempt in range(1, attempts + 1):
        try:
            return _delete_once(log_, where, query, kind, resolver)
        except ConcurrentModificationError as e:
            if attempt == attempts:
                raise
            log.info(
                "DELETE on %s conflicted with a concurrent commit (%s); planning again (attempt %d of %d)",
                log_.storage.uri,
                e,
                attempt + 1,
                attempts,
            )
    raise IndexTablesError("unreachable")  # pragma: no cover


def _delete_once(log_: TransactionLog, where: str | None, query: str | None, kind: str, resolver: str) -> DeleteResult:
    from ..split.types import arrow_schema, column_specs

    started = time.perf_counter()
    txn = Transaction(
        log_, resolver=resolver, operation=OPERATION, operation_parameters={"predicate": where, "query": query}
    )
    if txn.read_version < 0:
        from ..errors import TableNotFoundError

        raise TableNotFoundError(f"DELETE: no indextables table at {log_.storage.uri}")
    snap = txn.snapshot()
    # Refuse a table this version may not write before any delete log is written into it.
    from ..log.protocol_gate import check_writable

    check_writable(snap.protocol_action, f"DELETE on table {log_.storage.uri}")
    storage = log_.storage
    conf = {k: v for k, v in snap.metadata_action.configuration.items() if not k.startswith("docMappingSchema.")}
    opts = Options.of(conf, log_.options)
    types = column_types(snap.schema_json)
    arrow_types = {f.name: f.type for f in arrow_schema(snap.schema_json)}
    pred = parse_delete(where, query, types)
    values = equality_values(pred, arrow_types)
    chosen = choose_kind(kind, pred, values, _primary_key(opts, types), snap.partition_columns)
    result = DeleteResult(
        storage.uri, "NO_ACTION", snap.version, snap.version, chosen, where, query, splits_total=snap.num_files
    )
    written: list[str] = []
    try:
        if chosen == POSITIONAL:
            specs = column_specs(snap.schema_json, snap.partition_columns, opts)
            files = _candidates(storage, snap, pred, specs, opts)
            result.splits_scanned = len(files)
            parts = set(snap.partition_columns)
            pushed = [f for f in pred.conjuncts if not (sf.columns_of(f) & parts) and sf.supports(f, specs)]
            ptypes = {c: arrow_types[c] for c in snap.partition_columns}
            with ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(files)))) as pool:
                matches = list(pool.map(lambda f: _match_split(storage, opts, snap, f, pred, pushed, ptypes), files))
            ts = now_ms()
            for m in matches:
                if not m.row_ids.size:
                    continue
                result.deleted_rows += int(m.row_ids.size)
                if m.row_ids.size == m.live_rows:  # every live row: drop the split
                    txn.remove_files([RemoveFile(m.add.path, ts, True, dict(m.add.partition_values or {}), m.add.size)])
                    result.removed_splits += 1
                else:
                    d = write_delete_log(storage, POSITIONAL, positional_table(m.row_ids), split_path=m.add.path)
                    written.append(d.path)
                    txn.add_delete_log(d)
                    result.delete_logs += 1
            if not result.deleted_rows:
                result.duration_ms = round((time.perf_counter() - started) * 1000, 1)
                return result
        else:
            d = write_delete_log(storage, chosen, values)
            written.append(d.path)
            txn.add_delete_log(d)
            result.delete_logs, result.deleted_rows = 1, None
        txn.operation_parameters.update({"kind": chosen, "numDeletedRows": result.deleted_rows})
        result.version = txn.commit()
    except BaseException:
        if written and txn.committed_version is None:
            storage.delete(written)  # never referenced by the log
        raise
    result.status = "SUCCESS"
    result.duration_ms = round((time.perf_counter() - started) * 1000, 1)
    log.info(
        "DELETE on %s: version %d, %s, %s rows, %d delete logs, %d splits removed",
        storage.uri,
        result.version,
        chosen,
        result.deleted_rows,
        result.delete_logs,
        result.removed_splits,
    )
    return result


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
