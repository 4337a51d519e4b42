"""Every `spark.indextables.*` option the package reads: key, type, default, secret or not, one line
of documentation. `Options.get_*` take their defaults from here (a key read without being listed
is a programming error), the configuration table of docs/configuration.md is generated
from it (docs/hooks/options_table.py at `make docs`; a test compares the committed copy), `Options.redacted` hides the
secret ones, and `unknown_keys` names the closest known key for a mistyped one.

Keys ending in `.<col>` (or `.<name>.<key>`) are families: any suffix is accepted.
`reference` names the IndexTables4Spark key an option matches (same meaning, so a job written for
the reference keeps it), shown in that table.

(Over 500 lines: one declaration per option, the one list every reader of options and the
configuration page share; splitting it by subject would make two places to look a key up.)
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class OptionSpec:
    key: str  # without the `spark.indextables.` prefix; `.<col>` marks a family
    type: str  # str | int | float | bool | size | duration (milliseconds)
    default: Any  # None: unset (or computed where read, as `doc` says)
    doc: str
    secret: bool = False
    readme: bool = True  # listed in the configuration table (docs/configuration.md)
    reference: str = ""  # the IndexTables4Spark key it matches ("" : none, or not stated)

    @property
    def family(self) -> bool:
        return "<" in self.key

    @property
    def prefix(self) -> str:
        """The fixed part of a family's key (`indexing.typemap.`)."""
        return self.key[: self.key.index("<")].lower() if self.family else self.key.lower()


def _option(key: str, type_: str, default: Any, doc: str, **kw: Any) -> OptionSpec:
    return OptionSpec(key, type_, default, doc, **kw)


OPTIONS: tuple[OptionSpec, ...] = (
    # -- indexing (recorded in the table at creation) --
    _option(
        "indexing.typemap.<col>",
        "str",
        "string",
        "`string`, `text`, `text_and_string` or `ip` for string columns; list form "
        '`indexing.typemap.<type>` = `"a,b"` (a key ending in a type lists columns, as in the reference)',
        reference="indexing.typemap.<field> / indexing.typemap.<type>",
    ),
    _option(
        "indexing.tokenizer.<col>",
        "str",
        "default",
        "tokenizer of a text column: `default`, `raw`, `whitespace`, "
        "`en_stem`, `<iso>_stem` (ar da de el es fi fr hu it nl no pt ro ru sv ta tr), `cjk`, `ngram`; "
        'list form `indexing.tokenizer.<tokenizer>` = `"a,b"`',
        reference="indexing.tokenizer.<field> / indexing.tokenizer.<tokenizer>",
    ),
    _option("indexing.ngram.min.<col>", "int", 2, "shortest gram of an `ngram` column (1–20)"),
    _option("indexing.ngram.max.<col>", "int", 3, "longest gram of an `ngram` column (1–20)"),
    _option(
        "indexing.indexrecordoption.<col>",
        "str",
        "position",
        '`basic`, `freq` or `position`; list form `indexing.indexrecordoption.<option>` = `"a,b"`',
        reference="indexing.indexrecordoption.<field> / indexing.indexrecordoption.<option>",
    ),
    _option(
        "indexing.text.indexRecordOption",
        "str",
        "position",
        "record option of text columns without their own",
        reference="indexing.text.indexRecordOption",
    ),
    _option(
        "indexing.text.maxTokenLength",
        "str",
        "255",
        "tokenized (text, json) fields drop tokens of this many bytes or more: 1–65530, `min` (1), "
        "`legacy` (40), `default` (255), `tantivy_max` (65530), `builtin` (each tokenizer's own: 40, "
        "none for `whitespace`; tables created without this setting recorded keep it); recorded per field, "
        "queries use the same limit",
        reference="indexing.text.maxTokenLength",
    ),
    _option(
        "indexing.tokenLength.<col>",
        "str",
        None,
        "a column's token length (values as `indexing.text.maxTokenLength`); list form "
        '`indexing.tokenLength.<n or name>` = `"a,b"`',
        reference="indexing.tokenLength.<field> / indexing.tokenLength.<n>",
    ),
    _option(
        "indexing.fastfields",
        "str",
        None,
        "extra fast fields (comma list; numeric, date, bool, string and struct columns are fast anyway)",
        reference="indexing.fastfields (there: the only fast fields when set)",
    ),
    _option(
        "indexing.nonfastfields",
        "str",
        None,
        "columns without a fast field (comma list; ip fields stay fast): smaller splits, no aggregation "
        "of them (a clear error; SQL aggregates run in Spark), IS NULL filters evaluated on the rows",
        reference="indexing.nonfastfields",
    ),
    _option(
        "indexing.storeonly",
        "str",
        None,
        "columns stored but not indexed (comma list)",
        reference="indexing.storeonlyfields",
    ),
    _option(
        "indexing.storeonlyfields",
        "str",
        None,
        "same as `indexing.storeonly`",
        reference="indexing.storeonlyfields",
    ),
    _option(
        "indexing.indexonlyfields",
        "str",
        None,
        "columns indexed but not stored (comma list; fixed at creation): they read as NULL, filters on "
        "them are answered by the index alone (see Index-only columns)",
        reference="indexing.indexonlyfields",
    ),
    _option(
        "indexing.vector.<col>",
        "str",
        None,
        "a vector column (array of float or double): `<dimensions>[,<metric>]`, metric `cosine` (the default), "
        "`l2` or `dot`; each split keeps a nearest-neighbour index of it (see Vector search)",
    ),
    _option("indexing.bloomfilter.columns", "str", None, "columns with a per-split Bloom filter (comma list)"),
    _option("indexing.bloomfilter.fpp", "float", 0.01, "Bloom filter false-positive rate"),
    _option("indexing.split.targetSize", "size", None, "same as `write.targetSplitSize`", readme=False),
    _option("indexing.tempDirectoryPath", "str", None, "same as `indexWriter.tempDirectoryPath`", readme=False),
    _option("indexWriter.heapSize", "size", 512 * MB, "Tantivy indexing memory per split writer (at least 15M)"),
    _option("indexWriter.tempDirectoryPath", "str", None, "where splits are built (default: the system temp dir)"),
    _option(
        "dataSkippingNumIndexedCols",
        "int",
        32,
        "min/max statistics for the first N columns (-1: all)",
        reference="dataSkippingNumIndexedCols",
    ),
    _option(
        "dataSkippingStatsColumns",
        "str",
        None,
        "the columns with min/max statistics (comma list; replaces `dataSkippingNumIndexedCols`; "
        "names that are not data columns are logged and left out, as in the reference)",
        reference="dataSkippingStatsColumns",
    ),
    _option("stats.truncation.enabled", "bool", True, "truncate long string statistics"),
    _option("stats.truncation.maxLength", "int", 32, "string statistics truncation"),
    # -- writing --
    _option("write.targetSplitSize", "size", GB, "roll to a new split past this much Arrow data per task"),
    _option("split.targetSize", "size", None, "same as `write.targetSplitSize`", readme=False),
    _option("write.parallelism", "int", None, "`it.write_table` threads (default: the CPU count)"),
    _option(
        "write.chunkRows",
        "int",
        None,
        "`it.write_table` rows per chunk (default: the table split evenly over the threads, at least 100k rows each)",
    ),
    _option(
        "write.optimizeWrite.enabled",
        "bool",
        False,
        "optimized writes: `df.write…save()` (after `register`) shuffles the rows by partition values into "
        "tasks of about one split of `write.optimizeWrite.targetSplitSize` each; `it.write_table` of a pyarrow "
        "Table cuts them the same way (see Optimized writes)",
        reference="write.optimizeWrite.enabled / optimizeWrite.enabled (its earlier name)",
    ),
    _option("optimizeWrite.enabled", "bool", None, "same as `write.optimizeWrite.enabled`", readme=False),
    _option(
        "write.optimizeWrite.targetSplitSize",
        "size",
        GB,
        "optimized writes: the split file size aimed at",
        reference="write.optimizeWrite.targetSplitSize",
    ),
    _option(
        "optimizeWrite.targetRecordsPerSplit",
        "int",
        None,
        "optimized writes: rows per split instead of a size (the reference's earlier option)",
        reference="optimizeWrite.targetRecordsPerSplit",
    ),
    _option(
        "write.optimizeWrite.distributionMode",
        "str",
        "hash",
        "`hash`: tasks of about one split per partition value; `balanced`: the rows hashed by partition values "
        "over the default parallelism, splits rolled at `maxSplitSize`; `none`: no shuffle",
        reference="write.optimizeWrite.distributionMode",
    ),
    _option(
        "write.optimizeWrite.minRowsForEstimation",
        "int",
        10_000,
        "splits of the table with at least this many rows give the bytes per row; without any, a sample of "
        "the rows is built into splits on the driver",
        reference="write.optimizeWrite.minRowsForEstimation",
    ),
    _option(
        "write.optimizeWrite.maxSplitSize",
        "size",
        4 * GB,
        "`balanced` mode: a task rolls a split at this size",
        reference="write.optimizeWrite.maxSplitSize",
    ),
    _option(
        "write.optimizeWrite.samplingRatio",
        "float",
        1.1,
        "accepted and checked (> 0); unused: the sizes come from the table's splits or splits built from a "
        "sample, not from Spark's shuffle bytes",
        reference="write.optimizeWrite.samplingRatio",
    ),
    _option(
        "write.optimizeWrite.maxRowsPerSplit",
        "int",
        0,
        "set by optimized writes for their tasks: a split rolls after this many rows (0: no limit)",
        readme=False,
    ),
    _option("partitionBy", "str", None, "partition columns of a write (JSON list or comma list)"),
    _option("mergeSchema", "bool", False, "an append may add nullable columns"),
    _option("overwriteSchema", "bool", False, "an overwrite may redefine columns and partitioning"),
    _option("mergeOnWrite.enabled", "bool", False, "MERGE SPLITS after `df.write…save()`"),
    _option("mergeOnWrite.async.enabled", "bool", True, "merge-on-write in the background"),
    _option("mergeOnWrite.minBatchesToTrigger", "int", 1, "merge groups needed before a merge-on-write runs"),
    _option(
        "mergeOnWrite.batchCpuFraction", "float", 0.167, "share of the cluster's cores a merge-on-write batch uses"
    ),
    _option("mergeOnWrite.targetSize", "size", 4 * GB, "target size of merge-on-write"),
    _option("purgeOnWrite.enabled", "bool", False, "PURGE after writes"),
    _option("purgeOnWrite.triggerAfterMerge", "bool", True, "purge after a merge-on-write"),
    _option("purgeOnWrite.triggerAfterWrites", "int", 0, "purge every N writes (0: never by count)"),
    _option("purgeOnWrite.splitRetentionHours", "float", 168.0, "split retention of purge-on-write"),
    _option("purgeOnWrite.txLogRetentionHours", "float", 720.0, "version file retention of purge-on-write"),
    # -- the transaction log and its state --
    _option("checkpoint.enabled", "bool", True, "automatic V4 state every `checkpoint.interval` versions"),
    _option("checkpoint.interval", "int", 10, "versions between automatic states"),
    _option("state.format", "str", "avro", "`json` writes legacy JSON checkpoints instead"),
    _option("state.compression", "str", "zstd", "`zstd`, `snappy`, `none`"),
    _option("state.compressionLevel", "int", 3, "state compression level"),
    _option("state.entriesPerManifest", "int", 50_000, "compaction chunk size"),
    _option("state.compaction.tombstoneThreshold", "float", 0.10, "compact when tombstones exceed this share"),
    _option("state.compaction.maxManifests", "int", 20, "compact past this many manifests"),
    _option(
        "state.compaction.largeRemoveThreshold", "int", 2**31 - 1, "compact after a version removing this many files"
    ),
    _option("state.compaction.afterMerge", "bool", True, "compact the state after MERGE SPLITS"),
    _option("state.retention.versions", "int", 2, "old state directories kept"),
    _option("state.retention.hours", "float", 168.0, "old state directories younger than this are kept"),
    _option("state.gc.minManifestAgeHours", "float", 1.0, "orphan manifests younger than this are kept"),
    _option("state.read.parallelism", "int", 8, "parallel manifest decoding"),
    _option("state.schema.renormalizeThreshold", "int", 5, "doc mappings in the registry before renormalizing"),
    _option("state.retry.maxAttempts", "int", 10, "state write retries"),
    _option("state.retry.baseDelayMs", "int", 100, "state write retry base delay"),
    _option("state.retry.maxDelayMs", "int", 5000, "state write retry maximum delay"),
    _option("transaction.retry.maxAttempts", "int", 10, "commit retries"),
    _option("transaction.retry.baseDelayMs", "int", 100, "commit retry base delay"),
    _option("transaction.retry.maxDelayMs", "int", 5000, "commit retry maximum delay"),
    _option("transaction.compression.enabled", "bool", True, "GZIP version files"),
    # -- maintenance commands --
    _option("merge.targetSize", "size", 5 * GB, "MERGE SPLITS: target size of a merged split"),
    _option("merge.maxSourceSplitsPerMerge", "int", 1000, "MERGE SPLITS: sources per merged split"),
    _option("merge.skipSplitThreshold", "float", 0.45, "MERGE SPLITS: splits at this share of the target stay out"),
    _option("merge.skipCooldownHours", "float", 24.0, "MERGE SPLITS: retry delay of a split that failed to merge"),
    _option("merge.localParallelism", "int", None, "MERGE SPLITS threads without Spark (default: min(2, CPU count))"),
    _option("purge.defaultRetentionHours", "float", 168.0, "PURGE: split retention"),
    _option("purge.minRetentionHours", "float", 24.0, "PURGE: the smallest retention accepted"),
    _option("purge.retentionCheckEnabled", "bool", True, "PURGE: refuse retentions below the minimum"),
    _option("purge.txLogRetentionHours", "float", 720.0, "PURGE: version file retention"),
    _option("delete.maxAttempts", "int", 3, "DELETE: attempts against concurrent commits"),
    _option("indexing.primaryKey", "str", None, "the primary key column(s) of key deletes (DELETE … WHERE key IN …)"),
    _option("companion.targetInputSize", "size", GB, "source bytes per companion split"),
    _option(
        "companion.parallelism",
        "int",
        None,
        "local indexing processes of BUILD INDEXTABLES COMPANION without Spark (default: the CPU count)",
    ),
    _option(
        "companion.sourceFormat",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: the source's format",
        readme=False,
    ),
    _option("companion.sourcePath", "str", None, "recorded by BUILD INDEXTABLES COMPANION: the source", readme=False),
    _option(
        "companion.sourceRoot", "str", None, "recorded by BUILD INDEXTABLES COMPANION: the source's root", readme=False
    ),
    _option(
        "companion.sourceVersion",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: the version indexed",
        readme=False,
    ),
    _option(
        "companion.stream.maxConsecutiveErrors",
        "int",
        10,
        "WITH STREAMING / it.start_companion_sync: storage errors and commit conflicts retried in a row "
        "before the sync stops (errors of the source or its schema stop it at once)",
        reference="companion.stream.maxConsecutiveErrors",
    ),
    _option(
        "companion.maxAutomaticHashedFastfields",
        "int",
        10,
        "IndexTables4Spark's limit on string columns hashed without HASHED FASTFIELDS: accepted, no effect "
        "(nothing is hashed automatically here)",
        readme=False,
    ),
    _option(
        "companion.includeColumns",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its INCLUDE COLUMNS (reused by later builds)",
        readme=False,
    ),
    _option(
        "companion.excludeColumns",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its EXCLUDE COLUMNS (reused by later builds)",
        readme=False,
    ),
    _option(
        "companion.hashedFastfieldsInclude",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its HASHED FASTFIELDS INCLUDE (checked, changes no split)",
        readme=False,
    ),
    _option(
        "companion.hashedFastfieldsExclude",
        "str",
        None,
        "recorded by BUILD INDEXTABLES COMPANION: its HASHED FASTFIELDS EXCLUDE (checked, changes no split)",
        readme=False,
    ),
    _option(
        "iceberg.catalog.<name>.<key>",
        "str",
        None,
        "pyiceberg catalog properties (`uri`, `warehouse`, …) for `CATALOG '<name>'`",
    ),
    # -- reading --
    _option("query", "str", None, "a full-text query (Tantivy syntax) of a read"),
    _option("limit", "int", 0, "the N best matches by `_score` (0: every match)"),
    _option("orderBy", "str", None, "`_score` (the default with a limit)", readme=False),
    _option("withScore", "bool", False, "add the `_score` column to a read"),
    _option(
        "search.statistics",
        "str",
        "table",
        "BM25 statistics of `_score`: `table` (every live split of the version read: scores and top-n "
        "independent of how the table is split) or `split` (each split's own, as in 0.2)",
    ),
    _option(
        "where",
        "str",
        None,
        "a predicate over any columns (`IndexTable.search`'s `where` syntax) decided inside the read, before a "
        "top-n or vector read ranks (a DataFrame filter after load() applies after the limit)",
    ),
    _option(
        "vector",
        "str",
        None,
        "a vector search: the query vector (a JSON array or comma list of numbers); `limit` is its k "
        "(default 10); adds `_distance` (see Vector search)",
    ),
    _option("vectorColumn", "str", None, "the vector column a vector search ranks by (needed with several)"),
    _option(
        "fusion",
        "str",
        None,
        "a hybrid search: `rrf` (reciprocal rank fusion) or `weighted` fuses option `query`'s ranking with "
        "the vector ranking; `_score` is the fused score",
    ),
    _option("fusion.rrfK", "int", 60, "the k of reciprocal rank fusion: 1 / (k + rank)"),
    _option(
        "fusion.textWeight", "float", 0.5, "`weighted` fusion: the full-text ranking's weight (the vectors': 1 - it)"
    ),
    _option("fusion.window", "int", None, "the best rows of each ranking a fusion takes (default: max(limit, 50))"),
    _option(
        "search.vector.expansion",
        "int",
        64,
        "a vector search's HNSW candidate list per split (faiss efSearch; at least 4 x k): "
        "higher finds more of the true nearest, slower",
    ),
    _option(
        "search.vector.exactBelow",
        "int",
        20000,
        "a vector search compares a split's rows one by one (exact) when it holds at most this many vectors, "
        "else it searches the split's graph (filtered: the selection as a bitmap, or exactly when that costs "
        "less and it keeps at most this many)",
    ),
    _option("columns", "str", None, "the only columns a read declares (comma list; empty: none, for counts)"),
    _option("snippetFields", "str", None, "text columns whose `_snippet` a read adds (comma list)"),
    _option("versionAsOf", "int", None, "time travel to a version"),
    _option("timestampAsOf", "str", None, "time travel to a time (ISO 8601 or epoch milliseconds)"),
    _option(
        "read.maxPartitionBytes",
        "size",
        256 * MB,
        "grouping splits into Spark tasks: reads with a query or pushed "
        "filters are one task per core unless this is set; other reads one task per 256M",
    ),
    _option("read.minPartitions", "int", 2, "tasks of a read with a query (the session's cores when known)"),
    _option("read.batchSize", "int", 10_000, "rows per Arrow batch returned to Spark"),
    _option("read.bloomfilter.enabled", "bool", True, "skip splits by their Bloom filters"),
    _option(
        "read.stalenessLimit",
        "duration",
        1000,
        "how old (`0`, `500ms`, `2s`; a number is milliseconds) the listing of a table's log on an object store may be "
        "when a Spark-free read of the latest version reuses it instead of listing again: within it a read may miss "
        "commits other processes or machines made since that listing (this process's own commits are seen at once); "
        "`0` lists on every read. Local paths are listed on every read; Spark reads and tables opened with a "
        "SparkSession list on every read unless this is set (their commits run in other processes)",
    ),
    _option("aggregate.cache.enabled", "bool", True, "cache aggregation results per split"),
    _option("cache.disk.path", "str", None, "executor split cache (default: `$TMPDIR/indextables-cache`)"),
    _option("cache.disk.maxSize", "size", 10 * GB, "split cache size"),
    _option(
        "cache.disk.minFreeSpace",
        "size",
        2 * GB,
        "free space the split cache leaves on its disk (it evicts below it, under `cache.disk.maxSize`)",
    ),
    _option(
        "cache.rows.lazy",
        "str",
        "auto",
        "row stores of remote splits read by ranges, column by column (`true`: "
        "every split, `false`: fetch splits whole)",
    ),
    _option("cache.rows.lazyMinSplitSize", "size", 16 * MB, "smallest remote split whose row store is read by ranges"),
    _option(
        "cache.index.partialMinSplitSize",
        "size",
        4 * MB,
        "smallest remote split whose index files a Spark-free query fetches only in part (the sections "
        "its fields use); below it one request for the whole split is faster (bench/cloud_bench.py)",
    ),
    _option(
        "cache.selections.enabled",
        "bool",
        True,
        "a vector search keeps each split's rows its filters select for the next search with the same filters",
    ),
    _option("cache.rows.uncompressed", "bool", True, "cached row stores are uncompressed (memory-mapped reads)"),
    # -- streaming --
    _option("checkpointLocation", "str", None, "streaming checkpoint directory", readme=False),
    _option("startingVersion", "str", None, "streaming source: the first version read (`latest` or a number)"),
    _option("maxFilesPerTrigger", "int", 0, "streaming source: splits per micro-batch (0: no limit)"),
    _option("maxBytesPerTrigger", "size", 0, "streaming source: bytes per micro-batch (0: no limit)"),
    _option("ignoreDeletes", "bool", False, "streaming source: skip versions that only remove splits"),
    _option("ignoreChanges", "bool", False, "streaming source: skip rewritten splits"),
    _option("txnAppId", "str", None, "streaming sink: idempotent writes, with `queryId`", readme=False),
    _option("queryId", "str", None, "streaming sink: the query id of idempotent writes", readme=False),
    # -- storage --
    _option(
        "aws.accessKey",
        "str",
        None,
        "S3 static credentials (both or neither of access and secret key); else boto3's default chain",
        secret=True,
    ),
    _option("aws.secretKey", "str", None, "S3 secret key", secret=True),
    _option("aws.sessionToken", "str", None, "S3 session token", secret=True),
    _option("aws.region", "str", None, "S3 region (default: boto3's, `us-east-1` with an endpoint)"),
    _option(
        "aws.credentialsProvider",
        "str",
        None,
        "S3 credentials from a Python callable `module:function`, called as `function(uri, options)` on the "
        "driver and the executors; returns `AwsCredentials` (keys, session token, expiry), refreshed before expiry",
    ),
    _option("aws.credentialsProviderClass", "str", None, "same as `aws.credentialsProvider`", readme=False),
    _option("aws.profile", "str", None, "S3 credentials from this profile of the AWS config/credentials files"),
    _option(
        "aws.roleArn",
        "str",
        None,
        "assume this IAM role through STS (with the credentials above as the source), refreshed before expiry",
    ),
    _option("aws.roleSessionName", "str", "indextables-spark", "session name of the assumed role"),
    _option("aws.externalId", "str", None, "external id of the assumed role", secret=True),
    _option("aws.roleDurationSeconds", "int", 3600, "lifetime of the assumed role's credentials (900–43200)"),
    _option("aws.stsEndpoint", "str", None, "STS endpoint URL (default: `s3.endpoint` when set, else AWS's)"),
    _option(
        "credentials.refreshBufferSeconds",
        "int",
        300,
        "provider and assumed-role credentials are renewed this long before they expire",
    ),
    _option("s3.endpoint", "str", None, "S3-compatible endpoint URL"),
    _option("s3.pathStyleAccess", "bool", False, "`endpoint/bucket/key` addressing"),
    _option("s3.multipartThreshold", "size", 64 * MB, "S3 uploads in parts past this size"),
    _option("s3.multipartPartSize", "size", 16 * MB, "S3 part size"),
    _option("s3.uploadConcurrency", "int", 4, "S3 parallel part uploads"),
    _option("s3.maxConnections", "int", 32, "S3 connection pool size"),
    _option("s3.listPageSize", "int", 1000, "S3 keys per list request"),
    _option(
        "s3.presignedReads",
        "bool",
        True,
        "S3 reads and listings go as SigV4-presigned requests over botocore's HTTP session, without a boto3 "
        "client (~6x less CPU per request; missing objects and 5xx raised as the SDK does, other answers asked "
        "again through it); false: every request through boto3",
    ),
    _option("azure.accountName", "str", None, "Azure storage account"),
    _option("azure.accountKey", "str", None, "Azure account key", secret=True),
    _option("azure.connectionString", "str", None, "Azure connection string", secret=True),
    _option("azure.sasToken", "str", None, "Azure SAS token", secret=True),
    _option("azure.tenantId", "str", None, "Azure service principal (or workload identity) tenant"),
    _option(
        "azure.clientId",
        "str",
        None,
        "Azure service principal client id; with `azure.authType`, the managed or workload identity's client id",
    ),
    _option(
        "azure.authType",
        "str",
        None,
        "`managedIdentity`, `workloadIdentity` or `default` (DefaultAzureCredential), through azure-identity",
    ),
    _option(
        "azure.credentialsProvider",
        "str",
        None,
        "an Azure Storage bearer token from a Python callable `module:function`, called as `function(uri, options)`; "
        "returns `AzureToken` (token, expiry), refreshed before expiry",
    ),
    _option("azure.clientSecret", "str", None, "Azure service principal secret", secret=True),
    _option("azure.bearerToken", "str", None, "Azure OAuth bearer token", secret=True),
    _option("azure.endpoint", "str", None, "Azure blob endpoint (Azurite, sovereign clouds)"),
    _option("azure.singlePutMaxSize", "size", 64 * MB, "Azure uploads in blocks past this size"),
    _option("azure.blockSize", "size", 8 * MB, "Azure block size"),
    _option("azure.uploadConcurrency", "int", 4, "Azure parallel block uploads"),
    _option("azure.maxConnections", "int", 32, "Azure connection pool size"),
    _option("azure.listPageSize", "int", 5000, "Azure blobs per list request"),
    _option("storage.retry.maxAttempts", "int", 5, "attempts of a storage request on transient errors"),
    _option("storage.retry.baseDelayMs", "int", 100, "storage retry base delay"),
    _option("storage.retry.maxDelayMs", "int", 5000, "storage retry maximum delay"),
    _option("storage.connectTimeoutMs", "int", 10_000, "storage connect timeout"),
    _option("storage.readTimeoutMs", "int", 60_000, "storage read timeout"),
)

_BY_KEY = {o.key.lower(): o for o in OPTIONS if not o.family}
_FAMILIES = [o for o in OPTIONS if o.family]


def spec(key: str) -> OptionSpec | None:
    """The registered option for a key (without the prefix, any case), or None."""
    k = key.lower()
    found = _BY_KEY.get(k)
    if found is not None:
        return found
    return next((o for o in _FAMILIES if k.startswith(o.prefix) and len(k) > len(o.prefix)), None)


def registered_default(key: str) -> Any:
    """The default of a registered option (for the module constants that name it)."""
    found = spec(key)
    if found is None:
        raise KeyError(f"option {key!r} is not in option_registry.OPTIONS")
    return found.default


SECRET_KEYS = frozenset(o.key.lower() for o in OPTIONS if o.secret)


def closest(key: str) -> str | None:
    """The registered key closest to a mistyped one."""

    names = [o.key for o in OPTIONS]
    match = difflib.get_close_matches(key, names, n=1, cutoff=0.6) or difflib.get_close_matches(
        key.lower(), [n.lower() for n in names], n=1, cutoff=0.6
    )
    if not match:
        return None
    return next(n for n in names if n.lower() == match[0].lower())


def unknown_keys(keys: Iterable[str]) -> list[tuple[str, str | None]]:
    """(key, closest known key) for each key that is no registered option."""
    return [(k, closest(k)) for k in keys if spec(k) is None]


def markdown_table() -> str:
    """The configuration table (docs/configuration.md)."""

    def default(o: OptionSpec) -> str:
        if o.default is None:
            return "—"
        if o.type == "size" and isinstance(o.default, int) and o.default:
            for unit, n in (("G", GB), ("M", MB), ("K", KB)):
                if o.default % n == 0:
                    return f"`{o.default // n}{unit}`"
        if isinstance(o.default, bool):
            return f"`{str(o.default).lower()}`"
        if o.type == "duration" and isinstance(o.default, int):
            return f"`{o.default // 1000}s`" if o.default and o.default % 1000 == 0 else f"`{o.default}ms`"
        return f"`{o.default}`"

    def reference(o: OptionSpec) -> str:
        """`key` / `key` (remark): the reference's keys as code, a remark after them as text."""
        parts = []
        for part in o.reference.split(" / ") if o.reference else []:
            key, _, remark = part.partition(" (")
            parts.append(f"`{key}`" + (f" ({remark}" if remark else ""))
        return " / ".join(parts)

    lines = [
        "| key | type | default | meaning | IndexTables4Spark key |",
        "|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        if o.readme:
            lines.append(
                f"| `{o.key}` | {o.type}{' (secret)' if o.secret else ''} | {default(o)} | {o.doc} | {reference(o)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
