"""Optimized writes (`write.optimizeWrite.*`, IndexTables4Spark's names): the Spark-free part.

IndexTables4Spark asks Spark for a required distribution (`RequiresDistributionAndOrdering`:
clustered by the partition columns, an advisory partition size of targetSplitSize / samplingRatio,
or history's bytes per row). A Python data source cannot ask that, so `register`'s `save()` wrapper
shuffles the DataFrame itself (spark/optimized_write.py) from what is decided here:

- `OptimizedWriteConfig.resolve`: the options, write options over the session conf, each under the
  reference's current name (`write.optimizeWrite.*`) or its earlier one (`optimizeWrite.enabled`,
  `optimizeWrite.targetRecordsPerSplit`); a bad value is an InvalidOptionError naming the option.
- `SizeModel`: bytes of a split of n rows = overhead + n * bytes_per_row, from the table's splits of at
  least `minRowsForEstimation` rows ("history", as the reference), else from two splits built on the
  driver from a sample of the rows (`measure_sample`).
- `split_counts`: how many splits each partition value's rows make (sizes closest to the target);
  `task_keys`: an int key per task whose Spark hash lands in that task, so `repartition(N, key)`
  gives each bucket a task of its own.
- `table_chunks`: the same cut for a Spark-free write of a pyarrow Table (it.write_table, tx.write):
  each chunk is one split, built in the write's threads.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.split.write.builder import target_split_bytes_option
from indextables_spark.core.storage import open_storage
from indextables_spark.errors import InvalidOptionError
from indextables_spark.ops.write.write import WritePlan, write_splits

ENABLED = ("write.optimizeWrite.enabled", "optimizeWrite.enabled")
TARGET_SIZE = "write.optimizeWrite.targetSplitSize"
TARGET_RECORDS = "optimizeWrite.targetRecordsPerSplit"
SAMPLING_RATIO = "write.optimizeWrite.samplingRatio"
MIN_ROWS = "write.optimizeWrite.minRowsForEstimation"
MODE = "write.optimizeWrite.distributionMode"
MAX_SPLIT_SIZE = "write.optimizeWrite.maxSplitSize"
MAX_ROWS = "write.optimizeWrite.maxRowsPerSplit"  # set by the wrapper for the tasks (SplitWriter rolls)
MODES = ("hash", "balanced", "none")
SAMPLE_ROWS = 20_000  # rows of the driver's sample splits (no history)
ROLL_FACTOR = 1.5  # a task rolls a partition value's split at this many times the rows per split


def _first(layers: Sequence[Options], keys: Sequence[str]) -> tuple[Options, str] | None:
    """The first layer (write options, then conf) that sets one of `keys` (aliases), and the key."""
    for layer in layers:
        for key in keys:
            raw = layer.get_str(key)
            if raw is not None and raw.strip() != "":
                return layer, key
    return None


@dataclass(frozen=True)
class OptimizedWriteConfig:
    enabled: bool = False
    target_split_bytes: int = 1 << 30
    target_records: int | None = None  # optimizeWrite.targetRecordsPerSplit: rows instead of bytes
    sampling_ratio: float = 1.1
    min_rows_for_estimation: int = 10_000
    distribution_mode: str = "hash"
    max_split_bytes: int = 4 << 30

    @classmethod
    def resolve(cls, *layers: Options | Mapping[str, str] | None) -> "OptimizedWriteConfig":
        """The settings from option layers, first layer first (write options, then the session
        conf); every value is checked, enabled or not, so a typo fails the write that made it."""
        ls = [x if isinstance(x, Options) else Options.of(x) for x in layers if x is not None]

        def found(*keys: str) -> tuple[Options, str] | None:
            return _first(ls, keys)

        d = cls()
        hit = found(*ENABLED)
        enabled = hit[0].get_bool(hit[1]) if hit else d.enabled
        hit = found(TARGET_SIZE)
        target = hit[0].get_size(hit[1]) if hit else d.target_split_bytes
        _positive(TARGET_SIZE, target)
        hit = found(TARGET_RECORDS)
        records = hit[0].get_int(hit[1]) if hit else None
        if records is not None:
            _positive(TARGET_RECORDS, records)
        hit = found(SAMPLING_RATIO)
        ratio = hit[0].get_float(hit[1]) if hit else d.sampling_ratio
        if not ratio > 0:
            raise InvalidOptionError(f"option {SAMPLING_RATIO!r}: must be > 0, got {ratio}")
        hit = found(MIN_ROWS)
        min_rows = hit[0].get_int(hit[1]) if hit else d.min_rows_for_estimation
        _positive(MIN_ROWS, min_rows)
        hit = found(MODE)
        mode = (hit[0].get_str(hit[1]) or "").strip().lower() if hit else d.distribution_mode
        if mode not in MODES:
            raise InvalidOptionError(f"option {MODE!r}: must be one of {', '.join(MODES)}, got {mode!r}")
        hit = found(MAX_SPLIT_SIZE)
        max_split = hit[0].get_size(hit[1]) if hit else d.max_split_bytes
        _positive(MAX_SPLIT_SIZE, max_split)
        return cls(enabled, target, records, ratio, min_rows, mode, max_split)

    @property
    def shuffles(self) -> bool:
        """Does the write shuffle? (mode `none`: the reference's unspecified distribution, no shuffle)"""
        return self.enabled and self.distribution_mode != "none"


def _positive(key: str, value: int) -> None:
    if value <= 0:
        raise InvalidOptionError(f"option {key!r}: must be > 0, got {value}")


# ---- sizes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeModel:
    """Bytes of a split of n rows: overhead + n * bytes_per_row."""

    bytes_per_row: float
    overhead: float = 0.0
    source: str = "history"  # "history" | "sample" | "records" (targetRecordsPerSplit)

    def rows_for(self, target_bytes: int) -> int:
        """Rows of a split of about target_bytes (at least 1)."""
        return max(1, int((target_bytes - self.overhead) / self.bytes_per_row))

    def size_of(self, rows: float) -> float:
        return self.overhead + rows * self.bytes_per_row


def history_model(adds: Iterable[AddFile], min_rows: int) -> SizeModel | None:
    """Bytes per row of the table's splits of at least `min_rows` rows (the reference's history
    mode, WriteSizeEstimator.calculateBytesPerRow); None when none qualifies."""
    size = rows = 0
    for a in adds:
        if a.num_records is not None and a.num_records >= min_rows and a.size > 0:
            size += a.size
            rows += a.num_records
    return SizeModel(size / rows, 0.0, "history") if rows else None


def measure_sample(plan: WritePlan, sample: pa.Table) -> SizeModel | None:
    """Build the sample's rows as one split, and its first half as another (in a temp directory on
    this machine), and fit size = overhead + rows * bytes_per_row through the two; None for no rows.
    Partition columns are set to the first row's values (one split, as a task of one value)."""
    n = sample.num_rows
    if n == 0:
        return None
    for c in plan.partition_columns:
        i = sample.schema.get_field_index(c)
        sample = sample.set_column(i, sample.schema.field(i), pa.repeat(sample.column(i)[0], n))
    tmp = tempfile.mkdtemp(prefix="indextables-optimize-write-")
    try:
        storage = open_storage(tmp, plan.options)
        unrolled = replace(plan, target_split_bytes=1 << 62, options=Options.of(plan.options, {MAX_ROWS: ""}))
        sizes = []
        for part in (sample, sample.slice(0, n // 2)) if n >= 2 else (sample,):
            written = write_splits(storage, unrolled, iter(part.to_batches()))
            sizes.append((part.num_rows, sum(int(a["size"]) for a in written.adds)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (n1, s1) = sizes[0]
    if len(sizes) == 2:
        n2, s2 = sizes[1]
        if n1 > n2 and s1 > s2:
            per_row = (s1 - s2) / (n1 - n2)
            return SizeModel(per_row, max(0.0, s1 - per_row * n1), "sample")
    return SizeModel(s1 / n1, 0.0, "sample")


# ---- buckets and tasks -----------------------------------------------------------------------------


def split_count(rows: int, model: SizeModel, target_bytes: int, target_rows: int | None = None) -> int:
    """How many equal splits `rows` rows make so that their size is closest to the target."""
    if rows <= 0:
        return 1
    per = target_rows if target_rows else model.rows_for(target_bytes)
    x = rows / per
    lo = max(1, math.floor(x))
    hi = max(1, math.ceil(x))
    if target_rows:
        dev = {k: abs(rows / k / target_rows - 1) for k in (lo, hi)}
    else:
        dev = {k: abs(model.size_of(rows / k) / target_bytes - 1) for k in (lo, hi)}
    return min(dev, key=lambda k: (dev[k], k))


def split_counts(
    counts: Mapping[str, int], model: SizeModel, target_bytes: int, target_rows: int | None = None
) -> dict[str, int]:
    """Splits per partition value (key -> rows)."""
    return {k: split_count(n, model, target_bytes, target_rows) for k, n in counts.items()}


# Spark's hash partitioning: pmod(Murmur3Hash(key, seed 42), N) (HashPartitioning.partitionIdExpression)
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's `hash(<int>)` (Murmur3_x86_32.hashInt), as a signed 32-bit int."""
    k1 = (value & _M32) * 0xCC9E2D51 & _M32
    k1 = _rotl(k1, 15) * 0x1B873593 & _M32
    h1 = (seed & _M32) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _M32
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def task_keys(n: int) -> list[int]:
    """keys[t]: a non-negative int whose Spark hash partition among n is t (every task one key)."""
    keys: list[int | None] = [None] * n
    left, candidate = n, 0
    while left:
        t = spark_hash_int(candidate) % n
        if keys[t] is None:
            keys[t] = candidate
            left -= 1
        candidate += 1
    return [k for k in keys if k is not None]


def max_rows_per_split(model: SizeModel, cfg: OptimizedWriteConfig) -> int:
    """The rows at which a task rolls a partition value's split: hash mode ROLL_FACTOR times the
    rows per split (buckets are about one split; a bucket that shares its task with another of its
    value still gives splits near the target); balanced mode the rows of maxSplitSize."""
    if cfg.distribution_mode == "balanced":
        return model.rows_for(cfg.max_split_bytes)
    per = cfg.target_records or model.rows_for(cfg.target_split_bytes)
    return max(1, math.ceil(ROLL_FACTOR * per))


# ---- Spark-free writes (it.write_table, tx.write) ------------------------------------------------


def table_chunks(
    log_: TransactionLog, opts: Options, plan: WritePlan, data: pa.Table, read_version: int
) -> tuple[WritePlan, Iterator[list[pa.RecordBatch]]] | None:
    """`hash` mode for a Spark-free write of an Arrow table: each partition value's rows cut into
    the number of equal chunks (one split each) whose size is closest to the target. Returns the plan
    to build with (no Arrow-bytes roll unless a target size option is given; rows roll as in Spark)
    and the chunks; None when optimized writes are off (or `balanced`: threads are not tasks)."""
    cfg = OptimizedWriteConfig.resolve(opts)
    if not cfg.shuffles or cfg.distribution_mode != "hash" or data.num_rows == 0:
        return None
    parts = plan.partition_columns
    if parts:
        idx = data.select(parts).append_column("__i", pa.array(range(data.num_rows), pa.int64()))
        groups = [
            g["__i_list"] for g in idx.group_by(parts, use_threads=False).aggregate([("__i", "list")]).to_pylist()
        ]
    else:
        groups = [list(range(data.num_rows))]
    if cfg.target_records:
        model = SizeModel(1.0, 0.0, "records")
    else:
        files = log_.snapshot(read_version).files if read_version >= 0 else []
        found = history_model(files, cfg.min_rows_for_estimation)
        if found is None:
            step = max(1, data.num_rows // SAMPLE_ROWS)
            found = measure_sample(plan, data.take(pa.array(range(0, data.num_rows, step), pa.int64())))
        model = found or SizeModel(1.0, 0.0, "sample")
    extra = {MAX_ROWS: str(max_rows_per_split(model, cfg))}
    target_bytes = None if target_split_bytes_option(opts) is not None else 1 << 62
    built = replace(
        plan,
        options=Options.of(plan.options, extra),
        target_split_bytes=target_bytes or plan.target_split_bytes,
    )

    def chunks() -> Iterator[list[pa.RecordBatch]]:
        for rows in groups:
            k = split_count(len(rows), model, cfg.target_split_bytes, cfg.target_records)
            for j in range(k):
                part = rows[j * len(rows) // k : (j + 1) * len(rows) // k]
                if part:
                    yield data.take(pa.array(part, pa.int64())).combine_chunks().to_batches()

    return built, chunks()
