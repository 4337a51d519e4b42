"""Batch reader: plan splits on the driver (prune, skip, group), search them on executors."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..log.actions import AddFile
from ..options import Options
from . import filters as spark_filters

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 10_000
DEFAULT_PARTITION_BYTES = 256 << 20


@dataclass
class SplitGroup(InputPartition):
    """One Spark task: a few splits read one after another."""

    files: list[dict]   # AddFile wire JSON

    def __init__(self, files: list[dict]):
        self.files = files


def group_by_size(files: list[AddFile], target_bytes: int, min_groups: int) -> list[list[AddFile]]:
    """Bin-pack splits into groups of about target_bytes, at least min_groups when possible."""
    if not files:
        return []
    total = sum(f.size for f in files)
    target = max(1, min(target_bytes, -(-total // max(1, min_groups))))
    groups: list[list[AddFile]] = []
    sizes: list[int] = []
    for f in sorted(files, key=lambda f: -f.size):  # largest first, into the emptiest fitting group
        best = None
        for i, s in enumerate(sizes):
            if s + f.size <= target and (best is None or s < sizes[best]):
                best = i
        if best is None:
            groups.append([f])
            sizes.append(f.size)
        else:
            groups[best].append(f)
            sizes[best] += f.size
    return groups


class IndexTablesReader(DataSourceReader):
    def __init__(self, path: str, opts: Options, snapshot, schema: StructType):
        from ..split.types import column_specs

        self.path = path
        self.opts = opts
        self.schema_json = schema.jsonValue()
        self.table_schema_json = snapshot.schema_json
        self.partition_columns = snapshot.partition_columns
        self.version = snapshot.version
        self._snapshot = snapshot
        self.option_query = opts.get_str("query")
        self.index_queries: list[str] = []   # from `_indexall = '...'` filters
        self.column_types = {
            f["name"]: (f["type"] if isinstance(f["type"], str) else f["type"].get("type"))
            for f in self.table_schema_json["fields"]
        }
        self.specs = column_specs(self.table_schema_json, self.partition_columns, opts)
        self.partition_filters: list = []
        self.data_filters: list = []

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_snapshot", None)  # executors only need the plan
        return state

    @property
    def query(self) -> str | None:
        """The full-text query: the `query` option AND every `_indexall = '...'` filter."""
        parts = ([self.option_query] if self.option_query else []) + self.index_queries
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else " AND ".join(f"({p})" for p in parts)

    def pushFilters(self, filters):
        from ..split.filters import supports

        parts = set(self.partition_columns)
        self.partition_filters, self.data_filters, self.index_queries = [], [], []
        for f in filters:
            verdict = indexall_filter(f)
            if verdict is not None:
                if isinstance(verdict, str):
                    self.index_queries.append(verdict)
                continue
            core = spark_filters.convert(f, self.column_types)
            if core is None:
                yield f
                continue
            cols = spark_filters.columns_of(core)
            if cols <= parts:
                self.partition_filters.append(core)
            elif not (cols & parts) and supports(core, self.specs):
                self.data_filters.append(core)
            else:
                yield f

    def _live_files(self) -> list[AddFile]:
        from ..split.filters import prune_partition, skip_split

        files = self._snapshot.files
        n_total = len(files)
        if self.partition_filters:
            types = {c: self.column_types[c] for c in self.partition_columns}
            files = [f for f in files
                     if prune_partition(f.partition_values, self.partition_filters, self.partition_columns, types)]
        n_after_partitions = len(files)
        if self.data_filters:
            files = [f for f in files if not skip_split(f, self.data_filters, self.specs)]
        log.info(
            "indextables: %s v%d: %d splits, %d after partition pruning, %d after data skipping",
            self.path, self.version, n_total, n_after_partitions, len(files),
        )
        return files

    def partitions(self):
        files = self._live_files()
        target = self.opts.get_size("read.maxPartitionBytes", DEFAULT_PARTITION_BYTES)
        min_groups = self.opts.get_int("read.minPartitions", 2)
        groups = group_by_size(files, target, min_groups)
        if not groups:
            return [SplitGroup([])]
        return [SplitGroup([f.to_json() for f in g]) for g in groups]

    def read(self, partition: SplitGroup) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(StructType.fromJson(self.schema_json), timezone="UTC")
        for d in partition.files:
            yield from read_split(self, AddFile.from_json(d), target)


def indexall_filter(f):
    """How a filter on the `_indexall` pseudo-column is consumed: the query text (EqualTo), True
    for filters that are no-ops on it (the plan guard, IS NOT NULL), None when not about it."""
    from pyspark.sql import datasource as sds

    from .datasource import INDEXALL, PLAN_GUARD

    if isinstance(f, sds.EqualTo) and tuple(f.attribute) == (INDEXALL,) and isinstance(f.value, str):
        return f.value
    if isinstance(f, sds.IsNotNull) and tuple(f.attribute) == (INDEXALL,):
        return True
    if (isinstance(f, sds.Not) and isinstance(f.child, sds.EqualNullSafe)
            and tuple(f.child.attribute) == (INDEXALL,) and f.child.value == PLAN_GUARD):
        return True
    return None


def read_split(reader: IndexTablesReader, add: AddFile, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    from ..split.cache import get_cache
    from ..split.reader import SplitReader
    from ..split.partitions import partition_value_array
    from ..storage import open_storage

    storage = open_storage(reader.path, reader.opts)
    local_dir = get_cache(reader.opts).local_dir(storage, add)
    split = SplitReader(local_dir)
    batch_rows = reader.opts.get_int("read.batchSize", DEFAULT_BATCH_ROWS)
    from .datasource import INDEXALL

    data_names = [f.name for f in target if f.name not in reader.partition_columns and f.name != INDEXALL]
    for batch in split.read(reader.data_filters, reader.query, data_names, batch_rows):
        n = batch.num_rows
        if n == 0:
            continue
        cols = []
        for f in target:
            if f.name == INDEXALL:
                cols.append(pa.nulls(n, f.type))
            elif f.name in reader.partition_columns:
                cols.append(partition_value_array(add.partition_values.get(f.name), f.type, n))
            else:
                col = batch.column(batch.schema.get_field_index(f.name))
                cols.append(col if col.type.equals(f.type) else col.cast(f.type))
        yield pa.RecordBatch.from_arrays(cols, schema=target)
