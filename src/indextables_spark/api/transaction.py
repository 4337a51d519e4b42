"""`t.transaction()`: the log transaction (core/log/commit/transaction.py: add_files, remove_files,
add_delete_log, update_stat, commit) with data-level steps on top, all committed as one version:

    with t.transaction() as tx:
        tx.write(arrow_table)                  # builds splits, stages their adds
        tx.delete(where="id < 10")             # plans a row-level delete, stages its logs

Every step reads the table as the transaction read it (its read version): a delete does not see
the rows a write of the same transaction adds. The files the steps write (splits, stats files,
delete logs) go to the table's storage (an injected one included) and are deleted again when the
commit fails or the block raises. `IndexTable.write` and `IndexTable.delete` are one such step
each."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa

from indextables_spark.api.progress import progress_to
from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.log.commit.transaction import Transaction
from indextables_spark.core.schema.arrow_types import spark_schema_json
from indextables_spark.errors import CommitRetriesExhaustedError, ConcurrentModificationError, InvalidOptionError
from indextables_spark.ops.write.optimize_write import table_chunks
from indextables_spark.ops.write.write import (
    WritePlan,
    batch_source,
    build_splits,
    check_mode,
    commit_write,
    merge_stats,
    plan_write,
    rebase_created,
    stage_adds,
    stage_write,
    vector_builds,
    write_options,
    written_keys,
)
from indextables_spark.results.maintenance import DeleteResult, WriteResult
from indextables_spark.results.record import ProgressArg, elapsed_ms

if TYPE_CHECKING:
    from indextables_spark.expr.search_query import SearchQuery

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _StagedWrite:
    """What a write step staged: enough to commit it again over a table created concurrently."""

    plan: WritePlan
    overwrite: bool
    adds: list[AddFile]
    stats: dict[str, list[str]]


class TableTransaction(Transaction):
    """A log Transaction of one IndexTable that also writes Arrow data and deletes rows."""

    def __init__(
        self,
        log_: TransactionLog,
        options: Options,
        *,
        resolver: str = "merge",
        read_version: int | None = None,
        operation: str = "WRITE",
    ):
        super().__init__(log_, resolver=resolver, read_version=read_version, operation=operation)
        self.options = options  # the table's options: write settings (write.parallelism, ...)
        self._written: list[str] = []  # files the steps put under the table, not yet committed
        self._writes: list[_StagedWrite] = []
        self._steps: list[str] = []  # the operation of each step that staged something
        self._called = False  # a data-level step ran (even one that staged nothing)

    # ---- data-level steps ------------------------------------------------------------------------
    def write(
        self,
        data: Any,
        *,
        mode: str = "append",
        partition_by: str | Sequence[str] | None = None,
        progress: ProgressArg = None,
    ) -> WriteResult:
        """Build splits of `data` (pyarrow Table / RecordBatchReader / pandas DataFrame) under the
        table and stage their adds, as it.write_table does (schema checks, statistics, Bloom
        files; mode "append" creates the table when there is none, "overwrite" removes every live
        split and must be the first step, "error" refuses an existing table; `progress` as
        IndexTable.write's: rows written). Returns what it staged (status STAGED, version the
        read version; the commit makes the new one)."""
        started = time.perf_counter()
        uri = self.log.storage.uri
        overwrite = check_mode(mode, self.read_version >= 0, uri)
        if overwrite and self._called:
            raise InvalidOptionError(f"transaction on {uri}: an overwrite must be its first step")
        self._called = True
        opts = write_options(self.options, partition_by)
        schema, batches, total = batch_source(data)
        plan, _, _ = plan_write(self.log, opts, spark_schema_json(schema), overwrite, self.read_version)
        if self._writes and not _same_table(self._writes[0].plan, plan):
            raise InvalidOptionError(f"transaction on {uri}: its writes must have the same columns and partitioning")
        optimized = None
        if isinstance(data, pa.Table):  # optimized writes cut an Arrow table by partition value
            optimized = table_chunks(self.log, opts, plan, data, self.read_version)
        with progress_to(progress) as callback:
            if optimized is not None:
                written = build_splits(
                    self.log.storage, opts, optimized[0], batches, total, chunks=optimized[1], progress=callback
                )
            else:
                written = build_splits(self.log.storage, opts, plan, batches, total, progress=callback)
        adds = [AddFile.from_json(d) for m in written for d in m.adds]
        stats = merge_stats(written)
        self._written += written_keys((d for m in written for d in m.adds), stats)
        if self._writes:  # the first write staged the table's protocol, metadata and operation
            stage_adds(self, plan, adds, stats)
        else:
            stage_write(self, plan, overwrite, adds, stats)
        self._writes.append(_StagedWrite(plan, overwrite, adds, stats))
        self._steps.append(self.operation)
        return WriteResult(
            table_path=uri,
            status="STAGED",
            version=self.read_version,
            read_version=self.read_version,
            mode=mode,
            operation=self.operation,
            rows_written=sum(m.num_rows for m in written),
            splits_added=len(adds),
            bytes_written=sum(a.size for a in adds),
            partitions_written=len(
                {tuple(sorted((a.partition_values or {}).items())) for a in adds if a.partition_values}
            ),
            splits_removed=len(self._removes) if overwrite else 0,
            vector_index_build_ms=sum(vector_builds(adds)),
            duration_ms=elapsed_ms(started),
        )

    def delete(
        self, where: str | None = None, *, query: str | SearchQuery | None = None, kind: str = "auto"
    ) -> DeleteResult:
        """Plan a row-level delete of the rows matching `where` and/or the full-text `query` (see
        ops/write/delete.py for the grammar and the kinds) and stage its delete logs and removes.
        Returns its result: status STAGED (NO_ACTION when nothing matched), version the read
        version (the commit makes the new one)."""
        # lazy: ops/ sits below api/, but the delete planner loads only when a delete is staged
        from indextables_spark.ops.write.delete import OPERATION, stage_delete

        if any(w.overwrite for w in self._writes):
            raise InvalidOptionError(f"transaction on {self.log.storage.uri}: it overwrites the table, deletes nothing")
        self._called = True
        staged = stage_delete(self, where, query, kind)
        self._written += staged.written
        if staged.result.status != "NO_ACTION":
            self._steps.append(OPERATION)
        return staged.result

    # ---- commit ----------------------------------------------------------------------------------
    def commit(self) -> int:
        """Commit everything staged as one version. When the data-level steps staged nothing (a
        delete matching no row) and nothing else is staged, nothing is committed: returns (and
        sets committed_version to) the read version."""
        if self.committed_version is None and self._called and not self._steps and not self._staged_any():
            self.committed_version = self.read_version
            return self.read_version
        if len(set(self._steps)) > 1:  # writes and deletes in one version: it changes data, a WRITE
            self.with_operation("WRITE", {"operations": list(self._steps)})
        try:
            return super().commit()
        except ConcurrentModificationError as e:
            # a table another job created takes the write as an append (commit_write), unless the
            # commit already spent its retry budget
            if isinstance(e, CommitRetriesExhaustedError) or not self._creates_the_table_only():
                self.discard()
                raise
            return self._commit_over_created_table()
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Delete the files the data-level steps wrote, unless committed (the log never named them)."""
        keys, self._written = self._written, []
        if keys and self.committed_version is None:
            try:
                self.log.storage.delete(keys)
            except Exception:  # the error that got us here matters more
                log.warning("could not delete the uncommitted files of a transaction on %s", self.log.storage.uri)

    def __enter__(self) -> TableTransaction:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self.discard()
        super().__exit__(exc_type, exc, tb)

    def _staged_any(self) -> bool:
        staged = (self._adds, self._removes, self._delete_logs, self._skips, self._extra, self._stats)
        return any(staged) or self._metadata is not None or self._protocol is not None

    def _creates_the_table_only(self) -> bool:
        """Is this one write creating the table, nothing else staged? Then a table another job
        created meanwhile takes it as an append, as it takes a Spark write."""
        if self.read_version >= 0 or len(self._writes) != 1 or len(self._steps) != 1:
            return False
        return not (self._removes or self._delete_logs or self._extra or self._skips) and (
            len(self._adds) == len(self._writes[0].adds)
        )

    def _commit_over_created_table(self) -> int:
        w = self._writes[0]
        try:
            read_version = rebase_created(self.log, w.plan)
            version = commit_write(self.log, w.plan, read_version, False, w.adds, stats_files=w.stats)
        except BaseException:
            self.discard()
            raise
        self.committed_version = version
        return version


def _same_table(a: WritePlan, b: WritePlan) -> bool:
    return (a.schema_json, a.partition_columns, a.doc_mapping) == (b.schema_json, b.partition_columns, b.doc_mapping)
