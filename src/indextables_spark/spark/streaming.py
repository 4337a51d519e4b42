"""Structured Streaming source (change feed of added splits) and sink (one version per batch).

The source returns the rows of each micro-batch's splits that options `query` and `where` select
(every row without them), planned by the one planner (core/split/read/scan.py) per micro-batch;
`columns` and `snippetFields` as a batch read; what has no meaning on rows that arrive without end
(a limit, an order by `_score`, `_score` itself, a vector search, time travel) is refused when the
stream starts, naming the option (read_options.stream_read_options).

Source offsets are positions in the table's sequence of added splits:
`{"version": v, "index": i, "isStartingVersion": b}` means every split of the units before v, and
the first i splits (sorted by path) of unit v, were emitted. Unit v is either the snapshot of version
v (isStartingVersion, the initial full table) or the data-changing adds of version file v.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, cast

from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.spark.read_options import SNIPPET, stream_read_options, where_conditions
from indextables_spark.spark.task_read import TaskRead, data_names, read_ranked

try:  # read limits (admission control) and Trigger.AvailableNow for Python sources: pyspark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxFiles,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pyspark 4.1: Spark calls latestOffset() without arguments (no read limits)
    SupportsTriggerAvailableNow = object  # type: ignore[misc,assignment]  # a plain base class instead
from pyspark.sql.types import StructType

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import AddFile, CommitInfo, DeleteLog, RemoveFile
from indextables_spark.errors import IndexTablesError, InvalidOptionError
from indextables_spark.spark.reader import SplitGroup, task_groups
from indextables_spark.spark.task_read import task_json
from indextables_spark.spark.worker_errors import short_tracebacks

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit

    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.split.read.scan import TableScan
    from indextables_spark.expr.search_query import SearchQuery
    from indextables_spark.spark.read_options import ReadOptions


log = logging.getLogger(__name__)


class StreamingDeletesError(IndexTablesError):
    """A version removed data and the stream was not told to ignore it."""


@dataclass(frozen=True)
class Position:
    version: int
    index: int
    starting: bool

    def to_offset(self) -> dict[str, Any]:
        return {"version": self.version, "index": self.index, "isStartingVersion": self.starting}

    @classmethod
    def of(cls, d: dict[str, Any]) -> "Position":
        return cls(int(d["version"]), int(d["index"]), bool(d.get("isStartingVersion", False)))


@short_tracebacks(
    "initialOffset",
    "prepareForTriggerAvailableNow",
    "getDefaultReadLimit",
    "latestOffset",
    "partitions",
    "read",
    "commit",
)
class IndexTablesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The rows of each micro-batch's splits that the `query` and `where` options select (every
    row without them), with the `columns` and `snippetFields` asked; the options a stream cannot
    answer are refused when the stream starts (`_options`)."""

    def __init__(self, path: str, opts: Options, schema: StructType, checked: SearchQuery | None = None):
        self.path = path
        self.opts = opts
        self._read_opts: ReadOptions | None = None  # checked by the stream's first call (_options)
        # the `query` option as load() checked it (spark/datasource.py): its checks are not repeated
        self.checked = checked
        self.schema_json = schema.jsonValue()
        self.table = IndexTable(path, opts)
        snap = self.table.snapshot()
        self.partition_columns = snap.partition_columns
        self.ignore_deletes = opts.get_bool("ignoreDeletes")
        self.ignore_changes = opts.get_bool("ignoreChanges")
        self.max_files = opts.get_int("maxFilesPerTrigger") or None
        self.max_bytes = opts.get_size("maxBytesPerTrigger") or None
        self._target_version: int | None = None
        self._units: dict[tuple[int, bool], list[AddFile]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_units"] = {}
        state["table"] = None
        return state

    def _options(self) -> ReadOptions:
        """The read options, checked once, by the stream's first call (Spark calls these offset
        methods before any micro-batch, a resumed stream without initialOffset): what a stream
        refuses (read_options.stream_read_options; a registered session's readStream.load()
        refused it already) and a `where` the table refuses. Not in the constructor: pyspark 4.3
        follows an error raised there by an UnboundLocalError of its own runner's."""
        if self._read_opts is None:
            ro = stream_read_options(self.opts)
            self._scan((self.table or IndexTable(self.path, self.opts)).snapshot(), ro)
            self._read_opts = ro
        return self._read_opts

    # ---- offsets --------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        self._options()
        start = self.opts.get_str("startingVersion")
        latest = self.table.version()
        if start is None:
            return Position(latest, 0, True).to_offset()
        if start.strip().lower() == "latest":
            return Position(latest + 1, 0, False).to_offset()
        try:
            v = int(start)
        except ValueError:
            raise InvalidOptionError(
                f"option 'startingVersion': expected a version or 'latest', got {start!r}"
            ) from None
        if v < 0 or v > latest + 1:
            raise InvalidOptionError(f"option 'startingVersion' {v} is outside the table's versions 0..{latest}")
        return Position(v, 0, False).to_offset()

    def prepareForTriggerAvailableNow(self) -> None:
        self._options()
        self._target_version = self.table.version()

    def getDefaultReadLimit(self) -> ReadLimit:
        self._options()
        if self.max_files:
            return ReadMaxFiles(self.max_files)
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def _unit(self, version: int, starting: bool) -> list[AddFile]:
        key = (version, starting)
        if key not in self._units:
            table = self.table or IndexTable(self.path, self.opts)
            if starting:
                files = table.snapshot(version).files if version >= 0 else []
            else:
                files = self._version_adds(table, version)
            self._units[key] = sorted(files, key=lambda f: f.path)
        return self._units[key]

    def _version_adds(self, table: IndexTable, version: int) -> list[AddFile]:
        actions = table.log.read_actions(version)
        adds = [a for a in actions if isinstance(a, AddFile) and a.data_change]
        removes = [a for a in actions if isinstance(a, RemoveFile) and a.data_change]
        deletes = [a for a in actions if isinstance(a, DeleteLog)]
        if deletes and not (self.ignore_deletes or self.ignore_changes):
            # Row-level deletes of rows the stream may have emitted already (units are emitted as added).
            raise StreamingDeletesError(
                f"stream from {self.path}: version {version} deleted rows ({len(deletes)} delete logs); "
                f"set option ignoreDeletes=true to skip deletions"
            )
        if removes:
            if adds and not self.ignore_changes:
                raise StreamingDeletesError(
                    f"stream from {self.path}: version {version} rewrote data ({len(removes)} removed and "
                    f"{len(adds)} added splits); set option ignoreChanges=true to receive the rewritten rows again"
                )
            if not adds and not (self.ignore_deletes or self.ignore_changes):
                raise StreamingDeletesError(
                    f"stream from {self.path}: version {version} deleted data ({len(removes)} splits removed); "
                    f"set option ignoreDeletes=true to skip deletions"
                )
        return adds

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        self._options()
        if start is None:
            return self._latest_without_limits()
        pos = Position.of(start)
        last = self.table.version() if self._target_version is None else self._target_version
        max_files = getattr(limit, "max_files", None)
        max_bytes = getattr(limit, "max_bytes", None)
        files = nbytes = 0
        version, index, starting = pos.version, pos.index, pos.starting
        while True:
            if not starting and version > last:
                break
            unit = self._unit(version, starting)
            while index < len(unit):
                f = unit[index]
                if (max_files and files >= max_files) or (max_bytes and files and nbytes + f.size > max_bytes):
                    return Position(version, index, starting).to_offset()
                files += 1
                nbytes += f.size
                index += 1
            if starting:
                version, index, starting = version + 1, 0, False
            elif version < last:
                version, index = version + 1, 0
            else:
                break
        end = Position(version, index, starting)
        # Normalise "all of unit v consumed" to "start of unit v+1" only when v+1 exists.
        return end.to_offset()

    def _latest_without_limits(self) -> dict[str, Any]:
        """pyspark 4.1 (no admission control): every split up to the table's current version."""
        if self.max_files or self.max_bytes:
            log.warning(
                "indextables stream from %s: maxFilesPerTrigger/maxBytesPerTrigger need pyspark >= 4.2 "
                "(read limits for Python sources); this micro-batch reads every new split",
                self.path,
            )
        return Position(self.table.version() + 1, 0, False).to_offset()

    def _files_between(self, start: Position, end: Position) -> list[AddFile]:
        out: list[AddFile] = []
        version, index, starting = start.version, start.index, start.starting
        while (version, not starting) < (end.version, not end.starting) or (
            version == end.version and starting == end.starting and index < end.index
        ):
            unit = self._unit(version, starting)
            stop = end.index if (version == end.version and starting == end.starting) else len(unit)
            out.extend(unit[index:stop])
            if version == end.version and starting == end.starting:
                break
            version, index, starting = (version + 1, 0, False)
        return out

    def _scan(self, snapshot: Snapshot, ro: ReadOptions) -> TableScan:
        """A micro-batch's read, planned (core/split/read/scan.py) from the options with the
        table's settings as of `snapshot`: the query and `where` select the rows (as a batch read
        with them and no limit), `columns` and `snippetFields` the columns."""
        from indextables_spark.core.split.read.scan import (
            TableScan,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )

        target = arrow_schema(self.schema_json, field_metadata=True)  # = Spark's to_arrow_schema
        query = self.checked if self.checked is not None and self.checked.text == ro.query else ro.query
        return TableScan(
            (self.table or IndexTable(self.path, self.opts)).storage,
            snapshot,
            self.opts,
            conditions=where_conditions(self.opts, snapshot.schema_json),
            query=query,
            columns=[c for c in target.names if c in self.partition_columns]
            + data_names(self.partition_columns, target),
            snippets=ro.snippet_fields if SNIPPET in target.names else (),
            typed=target,
            read_filter_columns=False,  # (the rows the target declares: no one re-checks them)
            batch_rows=ro.batch_rows,
            subject=f"a stream from {self.path}",
        )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[SplitGroup]:
        start_pos = Position.of(start)
        table = self.table or IndexTable(self.path, self.opts)
        # planned with the table's latest settings; of the micro-batch's splits, those the `where`
        # conditions keep, the query planned for their doc mappings (QueryParseError before a task)
        scan = self._scan(table.snapshot(), self._options())
        files = scan.live_files(self._files_between(start_pos, Position.of(end)))
        groups = task_groups(self.opts, files, scan.text is not None or bool(scan.pushed))
        # The initial snapshot unit is read without the rows deleted as of its version; later units
        # emit splits as added (a later delete is a change the stream fails on or ignores).
        deletes: dict[str, list[dict[str, Any]]] = {}
        if start_pos.starting and start_pos.version >= 0:
            from indextables_spark.core.log.deletes.delete_logs import (
                deletes_json,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
            )

            deletes = deletes_json(table.snapshot(start_pos.version), files)
        return [
            SplitGroup([task_json(f) for f in g], {f.path: deletes[f.path] for f in g if f.path in deletes}, scan.read)
            for g in groups
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SplitGroup)  # made by partitions()
        target = arrow_schema(self.schema_json, field_metadata=True)  # = Spark's to_arrow_schema
        adds = [AddFile.from_json(d) for d in partition.files]
        if SNIPPET in target.names and partition.plan.text is not None:
            # snippets are made with each split's index, as a batch read makes them: its ranked
            # path, every match of the split (a stream declares no `_score`: stream_read_options)
            yield from read_ranked(partition.plan, adds, target, partition.deletes)
            return
        yield from TaskRead(partition.plan, target).batches(adds, partition.deletes, None)

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing to release: units are re-derivable from the log.
        keep = Position.of(end)
        self._units = {k: v for k, v in self._units.items() if (k[0], not k[1]) >= (keep.version, not keep.starting)}


@dataclass
class StreamBatchWritten(WriterCommitMessage):
    adds: list[dict[str, Any]]  # AddFile wire JSON
    stats: dict[str, list[str]]

    def __init__(self, adds: list[dict[str, Any]], stats: dict[str, list[str]] | None = None):
        self.adds = adds
        self.stats = stats or {}


@short_tracebacks("write", "commit", "abort")
class IndexTablesStreamWriter(DataSourceStreamArrowWriter):
    """One table version per micro-batch, idempotent per (query id, batch id)."""

    def __init__(self, path: str, opts: Options, schema: StructType, overwrite: bool):
        from indextables_spark.spark.writer import (
            plan_write,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )

        self.path = path
        self.opts = opts
        self.overwrite = overwrite
        self.schema = schema
        self.plan, _, _ = plan_write(path, opts, schema, overwrite)
        from indextables_spark.ops.write.optimize_write import (
            OptimizedWriteConfig,  # lazy: as plan_write
        )

        if OptimizedWriteConfig.resolve(opts).shuffles:  # (checked: a bad value fails the stream)
            log.info(
                "indextables: write.optimizeWrite.* does not apply to streams (%s): each micro-batch writes a split "
                "per task and partition value; mergeOnWrite or MERGE SPLITS combine them",
                path,
            )
        # Identity of the writing query for idempotent replays (like Delta's txnAppId).
        self.app_id = opts.get_str("txnAppId") or opts.get_str("queryId") or opts.get_str("checkpointLocation") or path

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamBatchWritten:
        from indextables_spark.spark.writer import (
            write_splits,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )

        written = write_splits(self.path, self.opts, self.plan, iterator)
        return StreamBatchWritten(written.adds, written.stats)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from indextables_spark.ops.write.write import (
            merge_stats,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )
        from indextables_spark.ops.write.write import (
            commit_write,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )

        batch = cast("list[StreamBatchWritten | None]", messages)  # what write() returned

        table = IndexTable(self.path, self.opts)
        txn_id = f"{self.app_id}:{batchId}"
        if already_committed(table, self.app_id, batchId):
            log.info("indextables: batch %s of %s already committed; skipping replay", batchId, self.path)
            from indextables_spark.spark.writer import (
                delete_written,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
            )

            delete_written(
                self.path,
                self.opts,
                [d for m in batch if m is not None for d in m.adds],
                merge_stats(m for m in batch if m is not None),
            )
            return
        adds = [AddFile.from_json(d) for m in batch if m is not None for d in m.adds]
        commit_write(
            table.log,
            self.plan,
            table.version(),
            self.overwrite,
            adds,
            operation="STREAMING UPDATE",
            txn_id=txn_id,
            stats_files=merge_stats(m for m in batch if m is not None),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from indextables_spark.ops.write.write import (
            merge_stats,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )
        from indextables_spark.spark.writer import (
            delete_written,  # lazy: keeps `import indextables_spark.spark.streaming` free of numpy
        )

        batch = cast("list[StreamBatchWritten | None]", messages)  # what write() returned

        delete_written(
            self.path,
            self.opts,
            [d for m in batch if m is not None for d in m.adds],
            merge_stats(m for m in batch if m is not None),
        )


def already_committed(table: IndexTable, app_id: str, batch_id: int) -> bool:
    """Scan back from the latest version for this app's commits; batch ids only grow."""
    prefix = f"{app_id}:"
    for v in reversed(table.log.list_versions()):
        for a in table.log.read_actions(v):
            if isinstance(a, CommitInfo) and a.txn_id and a.txn_id.startswith(prefix):
                seen = int(a.txn_id[len(prefix) :])
                if seen == batch_id:
                    return True
                if seen < batch_id:
                    return False
    return False
