"""DESCRIBE INDEXTABLES COMPONENT SIZES <table> [WHERE <partition predicate>]: the bytes of each
index component of each live split (of the partitions matching WHERE), per field.

The sizes come from the splits themselves (core/split/read/components.py): the footer and a few
small ranges of each split (its composite files' offset tables, its fast field column
dictionaries), read with `Storage.read_range`, never the whole split nor the split cache. With a
SparkSession the splits are read by a Spark job (classic and Spark Connect), as the reference
does; without one, by threads of this process.

Keys and types follow the reference (tantivy4java `native/src/prewarm/component_sizes.rs`):
`<field>.fastfield`, `<field>.fieldnorm`, `_store`; where the reference gives only the totals of a
split's term dictionaries, postings and positions (`_term_total`, `_postings_total`,
`_positions_total`), these are per field here (`<field>.term`, `<field>.postings`,
`<field>.positions`, the keys its own documentation shows), with the bytes of those files that
belong to no field as `_term_other`, …: the sum of a component type is the reference's total, and
every byte of a split is in one row.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.config.sessions import default_parallelism, run_tasks
from indextables_spark.core.storage import open_storage
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import SplitFormatError, TableNotFoundError
from indextables_spark.results.inspect import ComponentSizeRow
from indextables_spark.ops.command import Context
from indextables_spark.ops.table_commands import PartitionsCommand
from indextables_spark.util.pools import shared_pool

LOCAL_THREADS = 8  # splits read at once without Spark (each a few small ranged reads)

# One split to describe: its path in the log, its size (None: ask the storage), partition values.
SplitRef = tuple[str, "int | None", "dict[str, str | None]"]


def _partition_json(values: dict[str, str | None]) -> str | None:
    """The reference's partition_values: a JSON object, null for an unpartitioned split."""
    return json.dumps(dict(sorted(values.items())), separators=(",", ":")) if values else None


def split_rows(storage: Storage, split: SplitRef) -> list[ComponentSizeRow]:
    """The component rows of one split."""
    from indextables_spark.core.split.read.components import (  # lazy: the split format readers
        split_components,
    )

    path, size, partition_values = split
    where = storage.full_uri(path)
    if size is None:
        info = storage.stat(path)
        if info is None:
            raise TableNotFoundError(f"split file not found: {where}")
        size = info.size
    try:
        components = split_components(lambda s, e: storage.read_range(path, s, e), size, where)
    except SplitFormatError as e:
        raise SplitFormatError(f"DESCRIBE INDEXTABLES COMPONENT SIZES: {e}") from e
    pv = _partition_json(partition_values)
    return [ComponentSizeRow(path, pv, c.key, c.size, c.type, c.field, c.column) for c in components]


def _group_rows(uri: str, options: dict[str, str], splits: list[SplitRef]) -> list[ComponentSizeRow]:
    """A Spark task: the rows of some splits of the table at `uri`."""
    storage = open_storage(uri, Options.of(options))
    return [row for split in splits for row in split_rows(storage, split)]


def component_sizes(
    storage: Storage, options: Options, splits: list[SplitRef], spark: Any = None
) -> list[ComponentSizeRow]:
    """The rows of `splits` (split path order, then component key): read by a Spark job of up to
    one task per core when `spark` is given, else by this process's threads."""
    splits = sorted(splits, key=lambda s: s[0])
    if spark is not None and len(splits) > 1:
        n = min(len(splits), default_parallelism(spark))
        groups = [splits[i::n] for i in range(n)]
        job = functools.partial(_group_rows, storage.uri, dict(options.items()))
        parts = run_tasks(spark, job, groups, description=f"DESCRIBE INDEXTABLES COMPONENT SIZES {storage.uri}")
        rows = [r for part in parts for r in part]
    else:
        pool = shared_pool("describe", LOCAL_THREADS)
        rows = [r for part in pool.map(lambda s: split_rows(storage, s), splits) for r in part]
    return sorted(rows, key=lambda r: (r.split_path, r.component_key))


@dataclass(frozen=True)
class DescribeComponentSizes(PartitionsCommand):
    """DESCRIBE INDEXTABLES COMPONENT SIZES <table> [WHERE <partition predicate>]: one row per
    component of each live split (of the partitions matching `where`): term dictionaries,
    postings, positions, fieldnorms and fast fields per field, the row store, vector indexes."""

    result: ClassVar[type[ComponentSizeRow]] = ComponentSizeRow

    def run(self, ctx: Context) -> pa.Table:
        log = ctx.log(self.path)
        if not log.exists():
            raise TableNotFoundError(f"no indextables table at {log.storage.uri}")
        files = log.pruned_snapshot(self.where).files
        splits: list[SplitRef] = [(f.path, f.size, {k: v or "" for k, v in f.partition_values.items()}) for f in files]
        return ComponentSizeRow.table(component_sizes(log.storage, ctx.options, splits, ctx.spark))
