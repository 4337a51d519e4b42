"""The registry's reading options (config/registry.py joins the families).

Reads: the query, limit, `where`, vector and hybrid searches, columns, time travel, how a read
is divided into tasks, and the per-process caches (the split cache on disk, aggregations, rows).
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import MB, GB, OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("query", "str", None, "a full-text query (Tantivy syntax) of a read"),
    OptionSpec("limit", "int", 0, "the N best matches by `_score` (0: every match)"),
    OptionSpec("orderBy", "str", None, "`_score` (the default with a limit)", readme=False),
    OptionSpec("withScore", "bool", False, "add the `_score` column to a read"),
    OptionSpec(
        "search.statistics",
        "str",
        "table",
        "BM25 statistics of `_score`: `table` (every live split of the version read: scores and top-n "
        "independent of how the table is split) or `split` (each split's own, as in 0.2)",
    ),
    OptionSpec(
        "where",
        "str",
        None,
        "a predicate over any columns (`IndexTable.search`'s `where` syntax) decided inside the read, before a "
        "top-n or vector read ranks (a DataFrame filter after load() applies after the limit)",
    ),
    OptionSpec(
        "vector",
        "str",
        None,
        "a vector search: the query vector (a JSON array or comma list of numbers); `limit` is its k "
        "(default 10); adds `_distance` (see Vector search)",
    ),
    OptionSpec(
        "vectorColumn",
        "str",
        None,
        "the vector column a vector search ranks by (needed with several; `vector_column=` in Python)",
    ),
    OptionSpec(
        "fusion",
        "str",
        None,
        "with options `query` and `vector`, a hybrid search: `rrf` (reciprocal rank fusion, the default on "
        "every route) or `weighted` fuses the query's ranking with the vector ranking (`_score`: the fused "
        "score); `none`: the query only selects the rows the vectors rank",
    ),
    OptionSpec("fusion.rrfK", "int", 60, "the k of reciprocal rank fusion: 1 / (k + rank)"),
    OptionSpec(
        "fusion.textWeight", "float", 0.5, "`weighted` fusion: the full-text ranking's weight (the vectors': 1 - it)"
    ),
    OptionSpec("fusion.window", "int", None, "the best rows of each ranking a fusion takes (default: max(limit, 50))"),
    OptionSpec(
        "search.vector.expansion",
        "int",
        64,
        "how much of each split's vector index a search reads: an `ivf_pq` index probes expansion / 4 of its "
        "lists (faiss nprobe), an `hnsw` graph keeps this candidate list (faiss efSearch; at least 4 x k): "
        "higher finds more of the true nearest, slower",
    ),
    OptionSpec(
        "search.vector.exactBelow",
        "int",
        20000,
        "a vector search compares a split's rows one by one (exact) when it holds at most this many vectors, "
        "else it searches the split's graph (filtered: the selection as a bitmap, or exactly when that costs "
        "less and it keeps at most this many)",
    ),
    OptionSpec("columns", "str", None, "the only columns a read declares (comma list; empty: none, for counts)"),
    OptionSpec("snippetFields", "str", None, "text columns whose `_snippet` a read adds (comma list)"),
    OptionSpec("versionAsOf", "int", None, "time travel to a version"),
    OptionSpec("timestampAsOf", "str", None, "time travel to a time (ISO 8601 or epoch milliseconds)"),
    OptionSpec(
        "read.maxPartitionBytes",
        "size",
        256 * MB,
        "grouping splits into Spark tasks: reads with a query or pushed "
        "filters are one task per core unless this is set; other reads one task per 256M",
    ),
    OptionSpec("read.minPartitions", "int", 2, "tasks of a read with a query (the session's cores when known)"),
    OptionSpec("read.batchSize", "int", 10_000, "rows per Arrow batch returned to Spark"),
    OptionSpec("read.bloomfilter.enabled", "bool", True, "skip splits by their Bloom filters"),
    OptionSpec(
        "read.stalenessLimit",
        "duration",
        1000,
        "how old (`0`, `500ms`, `2s`; a number is milliseconds) the listing of a table's log on an object store may be "
        "when a Spark-free read of the latest version reuses it instead of listing again: within it a read may miss "
        "commits other processes or machines made since that listing (this process's own commits are seen at once); "
        "`0` lists on every read. Local paths are listed on every read; Spark reads and tables opened with a "
        "SparkSession list on every read unless this is set (their commits run in other processes)",
    ),
    OptionSpec("aggregate.cache.enabled", "bool", True, "cache aggregation results per split"),
    OptionSpec("cache.disk.path", "str", None, "executor split cache (default: `$TMPDIR/indextables-cache`)"),
    OptionSpec("cache.disk.maxSize", "size", 10 * GB, "split cache size"),
    OptionSpec(
        "cache.disk.minFreeSpace",
        "size",
        2 * GB,
        "free space the split cache leaves on its disk (it evicts below it, under `cache.disk.maxSize`)",
    ),
    OptionSpec(
        "cache.rows.lazy",
        "str",
        "auto",
        "row stores of remote splits read by ranges, column by column (`true`: "
        "every split, `false`: fetch splits whole)",
    ),
    OptionSpec(
        "cache.rows.lazyMinSplitSize", "size", 16 * MB, "smallest remote split whose row store is read by ranges"
    ),
    OptionSpec(
        "cache.index.partialMinSplitSize",
        "size",
        4 * MB,
        "smallest remote split whose index files a Spark-free query fetches only in part (the sections "
        "its fields use); below it one request for the whole split is faster (bench/cloud_bench.py)",
    ),
    OptionSpec(
        "cache.selections.enabled",
        "bool",
        True,
        "a vector search keeps each split's rows its filters select for the next search with the same filters",
    ),
    OptionSpec("cache.rows.uncompressed", "bool", True, "cached row stores are uncompressed (memory-mapped reads)"),
)
