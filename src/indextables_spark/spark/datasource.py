"""The "indextables" PySpark data source: glue between Spark and the Spark-free core."""

from __future__ import annotations

import logging
import sys
import uuid
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StringType, StructField, StructType

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import Options
from indextables_spark.core.log.read.table_log import parse_timestamp
from indextables_spark.errors import InvalidOptionError
from indextables_spark.spark.guard import INDEXALL, INDEXGUARD, SnapshotPin
from indextables_spark.spark.options import resolve_options, table_path
from indextables_spark.spark.worker_errors import short_tracebacks

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.expr.search_query import SearchQuery
    from indextables_spark.spark.streaming import IndexTablesStreamReader, IndexTablesStreamWriter
    from indextables_spark.spark.writer import IndexTablesWriter

log = logging.getLogger(__name__)

FORMAT_NAME = "indextables"
# The names jobs written for the reference (IndexTables4Spark) give `format(...)` / `USING`: its
# public provider class and the internal one its docs call interchangeable. Spark matches names of
# Python data sources case-insensitively.
REFERENCE_FORMAT_NAMES = (
    "io.indextables.provider.IndexTablesProvider",
    "io.indextables.spark.core.IndexTables4SparkTableProvider",
)
FORMAT_NAMES = (FORMAT_NAME, *REFERENCE_FORMAT_NAMES)
_FORMAT_KEYS = frozenset(n.lower() for n in FORMAT_NAMES)


def is_format_name(name: str | None) -> bool:
    """Is `name` one of the names this data source is registered under (any case)?"""
    return name is not None and name.lower() in _FORMAT_KEYS


# INDEXALL, INDEXGUARD: virtual, always-NULL string columns. `WHERE _indexall = '<query>'` passes a
# full-text query from SQL; guarded reads filter on `_indexguard` (spark/guard.py). The DataFrame
# API drops both, views keep `_indexall`.


def _called_by_plain_planner() -> bool:
    """True when Spark plans this read without filter pushdown (its `plan_data_source_read` worker):
    that reader never gets pushFilters, and one that overrides it is refused when pushdown is off.

    Read through the caller's frame because pyspark offers no other way (checked against pyspark
    4.x's sql/worker/plan_data_source_read.py and data_source_pushdown_filters.py): both planners
    call `data_source.reader(schema=schema)` alike, in separate worker processes; what differs, the
    session's spark.sql.python.filterPushdown.enabled (`enable_pushdown`), is a local of the plain
    planner's `_main`, never passed to the data source, and the options hold no trace of it. The
    plain planner then refuses a reader overriding pushFilters when that flag is off, so the
    reader's class must be chosen here, knowing which planner asks."""
    g = sys._getframe(2).f_globals
    spec = g.get("__spec__")
    return "pyspark.sql.worker.plan_data_source_read" in (g.get("__name__"), getattr(spec, "name", None))


@short_tracebacks("schema", "writer", "streamReader", "streamWriter")
class IndexTablesDataSource(DataSource):
    """`spark.read.format("indextables")` / `df.write.format("indextables")`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.opts: Options = resolve_options(options)
        self.pin: SnapshotPin | None = None
        self.query: SearchQuery | None = None  # the `query` option, checked by schema() (load())

    @property
    def path(self) -> str:
        return table_path(self.options)

    def _read_snapshot(self) -> Snapshot:
        table = IndexTable(self.path, self.opts)
        version = self.opts.get_str("versionAsOf")
        ts = self.opts.get_str("timestampAsOf")
        if version is not None and ts is not None:
            raise InvalidOptionError("give either 'versionAsOf' or 'timestampAsOf', not both")
        if version is not None:
            try:
                v = int(version)
            except ValueError:
                raise InvalidOptionError(f"option 'versionAsOf': expected a version number, got {version!r}") from None
            return table.snapshot(version=v)
        if ts is not None:
            return table.snapshot(timestamp_ms=parse_timestamp(ts))
        return table.snapshot()

    def schema(self) -> StructType:
        from indextables_spark.core.split.read.query_parsing import (
            plan_query,  # lazy: the read path (tantivy, pyarrow) loads when Spark plans a read, not for a write
        )
        from indextables_spark.expr.search_query import SearchQuery  # lazy: as above

        # lazy: the read path (tantivy, pyarrow) loads when Spark plans a read, not for a write
        from indextables_spark.spark.read_options import (
            declared_fields,
            extra_fields,
            nearest_query,
            read_options,
            table_specs,
        )

        snapshot = self._read_snapshot()
        time_travel = self.opts.get_str("versionAsOf") is not None or self.opts.get_str("timestampAsOf") is not None
        self.pin = SnapshotPin(uuid.uuid4().hex, snapshot.version, time_travel)
        schema = snapshot.schema
        ro = read_options(self.opts)
        if ro.query is not None:
            # a bad query fails load(), not a task; the reader's planning reuses these checks
            self.query = plan_query(snapshot, self.opts, SearchQuery(ro.query))
        specs = table_specs(snapshot, self.opts)
        if ro.vector is not None:  # a vector that does not fit the table fails load() too
            nearest_query(ro, specs, self.opts, self.path)
        # `_score` / `_snippet` only when the options ask for them (see reader.py).
        extra = extra_fields(ro, specs, self.path)
        fields, extra = declared_fields(ro, list(schema.fields), extra)  # the `columns` option
        return StructType(
            fields + [StructField(INDEXALL, StringType(), True), StructField(INDEXGUARD, StringType(), True)] + extra
        )

    def reader(self, schema: StructType) -> "DataSourceReader":
        from indextables_spark.spark.reader import IndexTablesReader, UnpushedReader  # lazy: the read path

        if self.pin is None:  # a schema given by the caller: schema() never ran
            snapshot = self._read_snapshot()
            self.pin = SnapshotPin(uuid.uuid4().hex, snapshot.version, False)
        cls = UnpushedReader if _called_by_plain_planner() else IndexTablesReader
        return cls(self.path, self.opts, schema, self.pin, self.query)

    def writer(self, schema: StructType, overwrite: bool) -> IndexTablesWriter:
        from indextables_spark.spark.writer import IndexTablesWriter  # lazy: the write path (tantivy)

        return IndexTablesWriter(self.path, self.opts, schema, overwrite)

    def streamReader(self, schema: StructType) -> IndexTablesStreamReader:
        from indextables_spark.spark.streaming import IndexTablesStreamReader  # lazy: streaming only

        return IndexTablesStreamReader(self.path, self.opts, schema, self.query)

    def streamWriter(self, schema: StructType, overwrite: bool) -> IndexTablesStreamWriter:
        from indextables_spark.spark.streaming import IndexTablesStreamWriter  # lazy: streaming only

        return IndexTablesStreamWriter(self.path, self.opts, schema, overwrite)


class IndexTablesProvider(IndexTablesDataSource):
    """The same data source under the reference's public format name."""

    @classmethod
    def name(cls) -> str:
        return REFERENCE_FORMAT_NAMES[0]


class IndexTables4SparkTableProvider(IndexTablesDataSource):
    """The same data source under the reference's internal format name."""

    @classmethod
    def name(cls) -> str:
        return REFERENCE_FORMAT_NAMES[1]


# Every class the data source is registered as (register() and the pyspark_* modules).
DATA_SOURCES = (IndexTablesDataSource, IndexTablesProvider, IndexTables4SparkTableProvider)
