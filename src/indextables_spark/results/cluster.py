"""Results of what every process holds (ops/cluster/): its split cache (one row per host and cache
directory), what it fetched from object storage, its environment."""

from __future__ import annotations

from indextables_spark.results.record import OperationResult, result


@result
class CacheDirectoryRow(OperationResult):
    """A row of the split cache commands: one per host and cache directory (`cache.disk.path`);
    the commands' own columns follow these."""

    host: str
    cache_path: str


@result
class PrewarmCacheResult(CacheDirectoryRow):
    """PREWARM INDEXTABLES CACHE."""

    table_path: str
    splits: int = 0
    already_cached: int = 0
    fetched: int = 0
    bytes: int = 0
    tasks: int = 1
    duration_ms: float = 0.0


@result
class DiskCacheInfo(CacheDirectoryRow):
    """DESCRIBE INDEXTABLES DISK CACHE."""

    entries: int = 0
    bytes: int = 0
    limit: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    processes: int = 1


@result
class FlushDiskCacheResult(CacheDirectoryRow):
    """FLUSH INDEXTABLES DISK CACHE."""

    entries_removed: int = 0
    bytes_removed: int = 0
    in_use_kept: int = 0
    processes: int = 1


@result
class StorageStatsRow(OperationResult):
    """DESCRIBE INDEXTABLES STORAGE STATS: what the Python processes of the driver (`driver`) and
    of each executor host fetched from object storage since they started (bytes, GET requests)."""

    executor_id: str
    host: str
    bytes_fetched: int = 0
    requests: int = 0
    processes: int = 1


@result
class EnvironmentRow(OperationResult):
    """DESCRIBE INDEXTABLES ENVIRONMENT: one property of the driver or of an executor host."""

    host: str
    role: str  # driver | worker
    property_type: str  # spark | indextables | python | package | env
    property_name: str
    property_value: str | None = None
