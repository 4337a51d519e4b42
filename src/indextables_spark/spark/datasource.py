"""The "indextables" PySpark data source: glue between Spark and the Spark-free core."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from ..errors import InvalidOptionError
from ..log.actions import AddFile
from ..options import Options
from .options import resolve_options, table_path

log = logging.getLogger(__name__)

FORMAT_NAME = "indextables"

# A virtual, always-NULL string column. `WHERE _indexall = '<query>'` passes a full-text query from
# SQL; the DataFrame API drops the column (see register.py for why every scan filters on it).
INDEXALL = "_indexall"
# Value of the plan guard `NOT (_indexall <=> PLAN_GUARD)`: always true, but it makes Spark run
# filter pushdown (and so fresh planning) for every scan. See register.py.
PLAN_GUARD = "\u0000indextables-plan-guard"


class IndexTablesDataSource(DataSource):
    """`spark.read.format("indextables")` / `df.write.format("indextables")`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def __init__(self, options):
        super().__init__(options)
        self.opts: Options = resolve_options(options)

    @property
    def path(self) -> str:
        return table_path(self.options)

    def _read_snapshot(self):
        from ..log.table_log import parse_timestamp
        from ..table import IndexTable

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
        from pyspark.sql.types import StringType, StructField

        from .reader import check_table_query, extra_fields, read_options

        snapshot = self._read_snapshot()
        schema = snapshot.schema
        ro = read_options(self.opts)
        if ro.query is not None:
            check_table_query(snapshot, self.opts, ro.query)   # a bad query fails load(), not a task
        # `_score` / `_snippet` only when the options ask for them (see reader.py).
        extra = extra_fields(ro, schema, snapshot.partition_columns)
        return StructType(list(schema.fields) + [StructField(INDEXALL, StringType(), True)] + extra)

    def reader(self, schema: StructType) -> "DataSourceReader":
        from .reader import IndexTablesReader

        return IndexTablesReader(self.path, self.opts, self._read_snapshot(), schema)

    def writer(self, schema: StructType, overwrite: bool):
        from .writer import IndexTablesWriter

        return IndexTablesWriter(self.path, self.opts, schema, overwrite)

    def streamReader(self, schema: StructType):
        from .streaming import IndexTablesStreamReader

        return IndexTablesStreamReader(self.path, self.opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .streaming import IndexTablesStreamWriter

        return IndexTablesStreamWriter(self.path, self.opts, schema, overwrite)
