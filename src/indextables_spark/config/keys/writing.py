"""The registry's writing options (config/registry.py joins the families).

Writes: split sizes, threads, optimized writes (`write.optimizeWrite.*`), partitioning and schema
changes, and the maintenance a write triggers (merge- and purge-on-write).
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import GB, OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("write.targetSplitSize", "size", GB, "roll to a new split past this much Arrow data per task"),
    OptionSpec("split.targetSize", "size", None, "same as `write.targetSplitSize`", readme=False),
    OptionSpec("write.parallelism", "int", None, "`it.write_table` threads (default: the CPU count)"),
    OptionSpec(
        "write.chunkRows",
        "int",
        None,
        "`it.write_table` rows per chunk (default: the table split evenly over the threads, at least 100k rows each)",
    ),
    OptionSpec(
        "write.optimizeWrite.enabled",
        "bool",
        False,
        "optimized writes: `df.write…save()` (after `register`) shuffles the rows by partition values into "
        "tasks of about one split of `write.optimizeWrite.targetSplitSize` each; `it.write_table` of a pyarrow "
        "Table cuts them the same way (see Optimized writes)",
        reference="write.optimizeWrite.enabled / optimizeWrite.enabled (its earlier name)",
    ),
    OptionSpec("optimizeWrite.enabled", "bool", None, "same as `write.optimizeWrite.enabled`", readme=False),
    OptionSpec(
        "write.optimizeWrite.targetSplitSize",
        "size",
        GB,
        "optimized writes: the split file size aimed at",
        reference="write.optimizeWrite.targetSplitSize",
    ),
    OptionSpec(
        "optimizeWrite.targetRecordsPerSplit",
        "int",
        None,
        "optimized writes: rows per split instead of a size (the reference's earlier option)",
        reference="optimizeWrite.targetRecordsPerSplit",
    ),
    OptionSpec(
        "write.optimizeWrite.distributionMode",
        "str",
        "hash",
        "`hash`: tasks of about one split per partition value; `balanced`: the rows hashed by partition values "
        "over the default parallelism, splits rolled at `maxSplitSize`; `none`: no shuffle",
        reference="write.optimizeWrite.distributionMode",
    ),
    OptionSpec(
        "write.optimizeWrite.minRowsForEstimation",
        "int",
        10_000,
        "splits of the table with at least this many rows give the bytes per row; without any, a sample of "
        "the rows is built into splits on the driver",
        reference="write.optimizeWrite.minRowsForEstimation",
    ),
    OptionSpec(
        "write.optimizeWrite.maxSplitSize",
        "size",
        4 * GB,
        "`balanced` mode: a task rolls a split at this size",
        reference="write.optimizeWrite.maxSplitSize",
    ),
    OptionSpec(
        "write.optimizeWrite.samplingRatio",
        "float",
        1.1,
        "accepted and checked (> 0); unused: the sizes come from the table's splits or splits built from a "
        "sample, not from Spark's shuffle bytes",
        reference="write.optimizeWrite.samplingRatio",
    ),
    OptionSpec(
        "write.optimizeWrite.maxRowsPerSplit",
        "int",
        0,
        "set by optimized writes for their tasks: a split rolls after this many rows (0: no limit)",
        readme=False,
    ),
    OptionSpec("partitionBy", "str", None, "partition columns of a write (JSON list or comma list)"),
    OptionSpec("mergeSchema", "bool", False, "an append may add nullable columns"),
    OptionSpec("overwriteSchema", "bool", False, "an overwrite may redefine columns and partitioning"),
    OptionSpec("mergeOnWrite.enabled", "bool", False, "MERGE SPLITS after `df.write…save()`"),
    OptionSpec("mergeOnWrite.async.enabled", "bool", True, "merge-on-write in the background"),
    OptionSpec("mergeOnWrite.minBatchesToTrigger", "int", 1, "merge groups needed before a merge-on-write runs"),
    OptionSpec(
        "mergeOnWrite.batchCpuFraction", "float", 0.167, "share of the cluster's cores a merge-on-write batch uses"
    ),
    OptionSpec("mergeOnWrite.targetSize", "size", 4 * GB, "target size of merge-on-write"),
    OptionSpec("purgeOnWrite.enabled", "bool", False, "PURGE after writes"),
    OptionSpec("purgeOnWrite.triggerAfterMerge", "bool", True, "purge after a merge-on-write"),
    OptionSpec("purgeOnWrite.triggerAfterWrites", "int", 0, "purge every N writes (0: never by count)"),
    OptionSpec("purgeOnWrite.splitRetentionHours", "float", 168.0, "split retention of purge-on-write"),
    OptionSpec("purgeOnWrite.txLogRetentionHours", "float", 720.0, "version file retention of purge-on-write"),
)
