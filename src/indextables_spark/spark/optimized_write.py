"""Optimized writes in Spark: the shuffle IndexTables4Spark gets from `RequiresDistributionAndOrdering`,
done by `register`'s `save()` wrapper on the DataFrame before Spark's own save (classic and Connect).

`hash` (the default): one job counts the rows of each partition value; the bytes per row come from
the table's splits (history) or from splits of a sample built on the driver (ops/write/optimize_write.py);
each value's rows are cut into k equal buckets (k: split sizes closest to the target) by a hash of
the row, and `repartition(N, key)` gives every bucket a task of its own, which writes it as one
split. `balanced`: `repartition(defaultParallelism, partition columns)`, splits rolled at
`maxSplitSize`. `none`: no shuffle. The tasks also roll a split at `write.optimizeWrite.maxRowsPerSplit`
rows (set here), so any bucket that shares a task still gives splits near the target.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from pyspark.sql.types import DataType, MapType, StructType

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import Options, session_options
from indextables_spark.config.sessions import functions, is_connect
from indextables_spark.core.split.write.builder import target_split_bytes_option
from indextables_spark.ops.write import optimize_write as ow
from indextables_spark.ops.write.write import plan_write

log = logging.getLogger(__name__)

TASK_COLUMN = "__indextables_optimize_write_task"
NO_BYTE_ROLL = str(1 << 62)


def _name(c: str) -> str:
    return "`" + c.replace("`", "``") + "`"


def _has_map(t: DataType) -> bool:
    if isinstance(t, MapType):
        return True
    if isinstance(t, StructType):
        return any(_has_map(f.dataType) for f in t.fields)
    element = getattr(t, "elementType", None)
    return element is not None and _has_map(element)


def _default_parallelism(spark: Any) -> int:
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    raw = spark.conf.get("spark.default.parallelism", None) or spark.conf.get("spark.sql.shuffle.partitions", "200")
    return max(1, int(raw))


def optimize(
    spark: Any,
    df: Any,
    path: str,
    write_options: Mapping[str, Any],
    conf: Mapping[str, str],
    options: Options,
    overwrite: bool,
) -> tuple[Any, dict[str, str]] | None:
    """(the DataFrame to write, options to add) for an optimized write; None: write `df` as it is.
    `write_options` (given to the writer) win over `conf` (the session's); `options`: every option
    of the write (both, and partitionBy)."""
    cfg = ow.OptimizedWriteConfig.resolve(Options.of(write_options), Options.of(conf))
    if not cfg.shuffles:
        return None
    F = functions(spark)
    table = IndexTable(path, options)
    plan, read_version, exists = plan_write(table.log, options, df.schema.jsonValue(), overwrite)
    parts = plan.partition_columns
    history = table.log.snapshot(read_version).files if exists else []

    def model(total: int | None) -> ow.SizeModel:
        found = ow.history_model(history, cfg.min_rows_for_estimation)
        if found is not None:
            return found
        sample = df
        if total and total > ow.SAMPLE_ROWS:
            sample = df.sample(fraction=min(1.0, 1.5 * ow.SAMPLE_ROWS / total), seed=17)
        measured = ow.measure_sample(plan, sample.limit(ow.SAMPLE_ROWS).toArrow())
        return measured or ow.SizeModel(1.0, 0.0, "sample")

    extra: dict[str, str] = {}
    if target_split_bytes_option(options) is None:
        extra["write.targetSplitSize"] = NO_BYTE_ROLL  # the tasks roll by rows (below), not by Arrow bytes
    if cfg.distribution_mode == "balanced":
        m = model(None)
        n = _default_parallelism(spark)
        out = df.repartition(n, *[F.col(_name(c)) for c in parts]) if parts else df.repartition(n)
        extra[ow.MAX_ROWS] = str(ow.max_rows_per_split(m, cfg))
        log.info(
            "indextables: optimized write (balanced) of %s: %d tasks, %s rows per split at most",
            path,
            n,
            extra[ow.MAX_ROWS],
        )
        return out, extra

    key = (
        F.concat_ws("\u0001", *[F.coalesce(F.col(_name(c)).cast("string"), F.lit("\u0000")) for c in parts])
        if parts
        else F.lit("")
    )
    counts = {str(r[0]): int(r[1]) for r in df.groupBy(key.alias("k")).count().collect()}
    total = sum(counts.values())
    if total == 0:
        return None
    m = ow.SizeModel(1.0, 0.0, "records") if cfg.target_records else model(total)
    splits = ow.split_counts(counts, m, cfg.target_split_bytes, cfg.target_records)
    offsets, n = {}, 0
    for k in sorted(splits):
        offsets[k] = n
        n += splits[k]
    keys = ow.task_keys(n)
    hashable = [F.col(_name(f.name)) for f in df.schema.fields if not _has_map(f.dataType)]
    row_hash = F.xxhash64(*hashable) if hashable else F.xxhash64(F.rand(17))

    def lookup(values: Mapping[str, int]) -> Any:
        return F.try_element_at(F.create_map(*[F.lit(x) for kv in values.items() for x in kv]), key)

    bucket = lookup(offsets) + F.pmod(row_hash, lookup(splits))
    task = F.try_element_at(F.array(*[F.lit(k) for k in keys]), (bucket + 1).cast("int")).cast("int")
    out = df.withColumn(TASK_COLUMN, task).repartition(n, F.col(TASK_COLUMN)).drop(TASK_COLUMN)
    extra[ow.MAX_ROWS] = str(ow.max_rows_per_split(m, cfg))
    log.info(
        "indextables: optimized write of %s: %d rows, %d partition values, %d tasks (sizes from %s: %.1f bytes per row)",
        path,
        total,
        len(counts),
        n,
        m.source,
        m.bytes_per_row,
    )
    return out, extra


def optimized_writer(
    spark: Any,
    df: Any,
    fmt: Any,
    given: Mapping[str, Any],
    partition_by: list[str] | None,
    opts: Mapping[str, str],
    target: str | None,
    save_mode: str,
) -> Any:
    """For `register`'s save(): a writer of the shuffled DataFrame with the same format, mode and
    options (and the tasks' options), or None to save as given. `given`: the options given to the
    writer; `opts`: those and the session conf; `save_mode`: lower case, no underscores."""
    if target is None:
        return None
    every: dict[str, Any] = {**opts, **{str(k): v for k, v in given.items()}}  # given values as given (True)
    if partition_by:
        every["partitionBy"] = ",".join(partition_by)
    written = {str(k): str(v) for k, v in given.items()}
    overwrite = save_mode == "overwrite"
    done = optimize(spark, df, target, written, session_options(spark), Options.of(every), overwrite)
    if done is None:
        return None
    out, extra = done
    return out.write.format(str(fmt)).mode("overwrite" if overwrite else "append").options(**{**every, **extra})
