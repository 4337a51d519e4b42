"""The registry's maintenance options (config/registry.py joins the families).

The maintenance commands: MERGE SPLITS, PURGE, DELETE, BUILD INDEXTABLES COMPANION (and what a
build records in the companion table), the Iceberg catalogs a companion reads.
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import GB, OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("merge.targetSize", "size", 5 * GB, "MERGE SPLITS: target size of a merged split"),
    OptionSpec("merge.maxSourceSplitsPerMerge", "int", 1000, "MERGE SPLITS: sources per merged split"),
    OptionSpec("merge.skipSplitThreshold", "float", 0.45, "MERGE SPLITS: splits at this share of the target stay out"),
    OptionSpec("merge.skipCooldownHours", "float", 24.0, "MERGE SPLITS: retry delay of a split that failed to merge"),
    OptionSpec(
        "merge.localParallelism", "int", None, "MERGE SPLITS threads without Spark (default: min(2, CPU count))"
    ),
    OptionSpec("purge.defaultRetentionHours", "float", 168.0, "PURGE: split retention"),
    OptionSpec("purge.minRetentionHours", "float", 24.0, "PURGE: the smallest retention accepted"),
    OptionSpec("purge.retentionCheckEnabled", "bool", True, "PURGE: refuse retentions below the minimum"),
    OptionSpec("purge.txLogRetentionHours", "float", 720.0, "PURGE: version file retention"),
    OptionSpec(
        "delete.maxAttempts",
        "int",
        None,
        "DELETE: plans at most against concurrent commits (default: no cap but `transaction.retry.timeBudgetMs`)",
    ),
    OptionSpec(
        "indexing.primaryKey", "str", None, "the primary key column(s) of key deletes (DELETE … WHERE key IN …)"
    ),
    OptionSpec("companion.targetInputSize", "size", GB, "source bytes per companion split"),
    OptionSpec(
        "companion.parallelism",
        "int",
        None,
        "local indexing processes of BUILD INDEXTABLES COMPANION without Spark (default: the CPU count)",
    ),
    OptionSpec(
        "companion.sourceFormat",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: the source's format",
        readme=False,
    ),
    OptionSpec(
        "companion.sourcePath", "str", None, "recorded by BUILD INDEXTABLES COMPANION: the source", readme=False
    ),
    OptionSpec(
        "companion.sourceRoot", "str", None, "recorded by BUILD INDEXTABLES COMPANION: the source's root", readme=False
    ),
    OptionSpec(
        "companion.sourceVersion",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: the version indexed",
        readme=False,
    ),
    OptionSpec(
        "companion.sourceFieldIds",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: the Iceberg field id of each column indexed (renames re-index)",
        readme=False,
    ),
    OptionSpec(
        "companion.columnMapping",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: a Delta source's column mapping ({logical: physical}) its splits use",
        readme=False,
    ),
    OptionSpec(
        "companion.nestedFields",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: the source's nested struct fields (physical names, field ids) "
        "its splits use (renames re-index)",
        readme=False,
    ),
    OptionSpec(
        "companion.stream.maxConsecutiveErrors",
        "int",
        10,
        "WITH STREAMING / it.start_companion_sync: storage errors and commit conflicts retried in a row "
        "before the sync stops (errors of the source or its schema stop it at once)",
        reference="companion.stream.maxConsecutiveErrors",
    ),
    OptionSpec(
        "companion.maxAutomaticHashedFastfields",
        "int",
        10,
        "IndexTables4Spark's limit on string columns hashed without HASHED FASTFIELDS: accepted, no effect "
        "(nothing is hashed automatically here)",
        readme=False,
    ),
    OptionSpec(
        "companion.includeColumns",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its INCLUDE COLUMNS (reused by later builds)",
        readme=False,
    ),
    OptionSpec(
        "companion.excludeColumns",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its EXCLUDE COLUMNS (reused by later builds)",
        readme=False,
    ),
    OptionSpec(
        "companion.hashedFastfieldsInclude",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its HASHED FASTFIELDS INCLUDE (checked, changes no split)",
        readme=False,
    ),
    OptionSpec(
        "companion.hashedFastfieldsExclude",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its HASHED FASTFIELDS EXCLUDE (checked, changes no split)",
        readme=False,
    ),
    OptionSpec(
        "iceberg.catalog.<name>.<key>",
        "str",
        None,
        "pyiceberg catalog properties (`uri`, `warehouse`, …) for `CATALOG '<name>'`",
    ),
)
