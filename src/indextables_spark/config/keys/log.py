"""The registry's log options (config/registry.py joins the families).

The transaction log and its V4 state: automatic states, their format and compaction, retention,
retries of state writes and commits (core/log/commit/policy.py).
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("checkpoint.enabled", "bool", True, "automatic V4 state every `checkpoint.interval` versions"),
    OptionSpec("checkpoint.interval", "int", 10, "versions between automatic states"),
    OptionSpec("state.format", "str", "avro", "`json` writes legacy JSON checkpoints instead"),
    OptionSpec("state.compression", "str", "zstd", "`zstd`, `snappy`, `none`"),
    OptionSpec("state.compressionLevel", "int", 3, "state compression level"),
    OptionSpec("state.entriesPerManifest", "int", 50_000, "compaction chunk size"),
    OptionSpec("state.compaction.tombstoneThreshold", "float", 0.10, "compact when tombstones exceed this share"),
    OptionSpec("state.compaction.maxManifests", "int", 20, "compact past this many manifests"),
    OptionSpec(
        "state.compaction.largeRemoveThreshold", "int", 2**31 - 1, "compact after a version removing this many files"
    ),
    OptionSpec("state.compaction.afterMerge", "bool", True, "compact the state after MERGE SPLITS"),
    OptionSpec("state.retention.versions", "int", 2, "old state directories kept"),
    OptionSpec("state.retention.hours", "float", 168.0, "old state directories younger than this are kept"),
    OptionSpec("state.gc.minManifestAgeHours", "float", 1.0, "orphan manifests younger than this are kept"),
    OptionSpec("state.read.parallelism", "int", 8, "parallel manifest decoding"),
    OptionSpec("state.schema.renormalizeThreshold", "int", 5, "doc mappings in the registry before renormalizing"),
    OptionSpec(
        "state.retry.timeBudgetMs", "int", 120_000, "a state write that keeps losing races gives up after this long"
    ),
    OptionSpec("state.retry.maxAttempts", "int", None, "state write attempts at most (default: no cap but the budget)"),
    OptionSpec("state.retry.baseDelayMs", "int", 100, "state write retry base delay"),
    OptionSpec("state.retry.maxDelayMs", "int", 5000, "state write retry maximum delay"),
    OptionSpec(
        "transaction.retry.timeBudgetMs",
        "int",
        120_000,
        "a commit (or a DELETE, write or companion sync planned again) that keeps losing to concurrent "
        "commits gives up after this long",
    ),
    OptionSpec(
        "transaction.retry.maxAttempts", "int", None, "commit attempts at most (default: no cap but the budget)"
    ),
    OptionSpec("transaction.retry.baseDelayMs", "int", 100, "commit retry base delay (doubling per retry)"),
    OptionSpec(
        "transaction.retry.maxDelayMs",
        "int",
        1000,
        "commit retry maximum delay (short: a writer that waits long misses the moments it could commit)",
    ),
    OptionSpec("transaction.compression.enabled", "bool", True, "GZIP version files"),
)
