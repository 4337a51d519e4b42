"""Per-split Bloom filters on chosen columns, used by the planner to skip splits for EqualTo / In.

Writing: with `spark.indextables.indexing.bloomfilter.columns` (comma-separated stored columns;
`indexing.bloomfilter.fpp`, default 0.01, the false-positive rate), SplitWriter hashes those
columns while indexing and writes next to each split `…/split-<uuid>.split` the side file
`…/split-<uuid>.bloom`, which the commit lists in the table state under the stats key
"bloomfilter" (log/actions.StatsFiles). Reading: `prune_with_blooms` drops the splits whose
filters cannot match (needs the file listed; splits without one are never skipped). Bloom files
are immutable and cached per process. `spark.indextables.read.bloomfilter.enabled=false` turns the
skipping off (for comparisons).

File: a sidecar frame (core/log/deletes/sidecar.py; magic b"ITBF", format version 1), header
{"splitPath", "hash": HASH_SCHEME, "columns": {name: {"numBits", "numHashes", "numValues",
"offset", "length"}}}, payload: the bit arrays (bit i of byte i // 8, little-endian bit order).

Hashing is deterministic across processes and machines (never Python's hash()): a value becomes
64 bits — integers, dates, timestamps and booleans as int64, floating point by its IEEE-754 bits
(-0.0 as 0.0, every NaN as one NaN), strings and binaries as 8-byte little-endian words each
folded in with the splitmix64 finaliser (then the length) — and the k probe positions are
h1 + i·h2 mod m (Kirsch–Mitzenmacher) over the two 32-bit halves of splitmix64(value).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence, Union, cast

import numpy as np
import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.config.registry import registered_default
from indextables_spark.core.log.model.actions import AddFile, stats_file_for
from indextables_spark.core.log.deletes.sidecar import decode_frame, encode_frame
from indextables_spark.core.schema.arrow_types import arrow_schema
from indextables_spark.core.schema.partitions import spark_type_of_arrow
from indextables_spark.core.storage import open_storage
from indextables_spark.errors import CorruptStateError, FileNotFoundInStorageError, InvalidOptionError
from indextables_spark.expr.model import And, EqualNullSafe, EqualTo, Filter, FilterVisitor, In, Or
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    from indextables_spark.core.log.read.snapshot import Snapshot
    from indextables_spark.core.storage.base import Storage

STATS_KEY = "bloomfilter"
FILE_EXT = "bloom"
MAGIC = b"ITBF"
FORMAT_VERSION = 1
HASH_SCHEME = "words64-splitmix64/v1"
DEFAULT_FPP = registered_default("indexing.bloomfilter.fpp")
MAX_HASHES = 16
_DEDUP_EVERY = 1 << 20  # fold accumulated hashes into distinct ones past this many
_CACHE_ENTRIES = 4096
_LOAD_THREADS = 8

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SEED_BYTES = np.uint64(0x243F6A8885A308D3)
_BYTE_SHIFTS = np.arange(8, dtype=np.uint64) * np.uint64(8)


# ---- hashing ----------------------------------------------------------------------------------


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (bijective, full avalanche); wraps modulo 2^64."""
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        out: np.ndarray = x ^ (x >> np.uint64(31))
        return out


def _bytes_hash(arr: pa.Array) -> np.ndarray:
    """64-bit hashes of non-null string/binary values (vectorised over 8-byte words)."""
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    padded = np.concatenate([data, np.zeros(8, np.uint8)])
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    h = np.full(n, _SEED_BYTES, dtype=np.uint64)
    order = np.argsort(-lengths, kind="stable")  # longest first: the active rows are a prefix
    sorted_len = lengths[order]
    lanes = np.arange(8)
    for j in range(0, int(lengths.max(initial=0)), 8):
        k = int(np.searchsorted(-sorted_len, -j, side="left"))  # rows with length > j
        idx = order[:k]
        rem = lengths[idx] - j
        chunk = padded[(starts[idx] + j)[:, None] + lanes]
        chunk = np.where(lanes < rem[:, None], chunk, 0).astype(np.uint64)
        word = np.bitwise_or.reduce(chunk << _BYTE_SHIFTS, axis=1)
        h[idx] = _mix64(h[idx] ^ word)
    return _mix64(h ^ lengths.astype(np.uint64))


def hash_values(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """64-bit hashes of the non-null values (see the module doc); the type decides the encoding."""
    if isinstance(values, pa.ChunkedArray):
        parts = [hash_values(c) for c in values.chunks]
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)
    values = values.drop_null() if values.null_count else values
    t = values.type
    if spark_type_of_arrow(t) in ("string", "binary"):
        return _bytes_hash(values.cast(pa.large_string()) if pa.types.is_string_view(t) else values)
    if pa.types.is_floating(t):
        x = values.cast(pa.float64()).to_numpy(zero_copy_only=False).copy()
        x[x == 0.0] = 0.0  # -0.0 = 0.0
        x[np.isnan(x)] = np.nan  # one NaN
        return _mix64(x.view(np.uint64))
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_temporal(t):
        if pa.types.is_date(t):
            values = values.cast(pa.date32()).cast(pa.int32())
        elif pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t):
            values = values.cast(pa.int64())
        ints = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
        return _mix64(ints.view(np.uint64))
    raise InvalidOptionError(f"Bloom filters do not support columns of type {t}")


_SUPPORTED = frozenset({"string", "binary", "double", "long", "boolean", "date", "timestamp", "timestamp_ntz"})


def supported_type(t: pa.DataType) -> bool:
    return spark_type_of_arrow(t) in _SUPPORTED


# ---- the filter --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BloomFilter:
    num_bits: int  # a multiple of 64
    num_hashes: int
    bits: np.ndarray  # uint8, num_bits / 8 bytes
    num_values: int = 0

    @staticmethod
    def _positions(hashes: np.ndarray, num_bits: int, num_hashes: int) -> np.ndarray:
        """(len(hashes), num_hashes) bit positions."""
        h = _mix64(hashes.astype(np.uint64, copy=False))
        h1 = h & np.uint64(0xFFFFFFFF)
        h2 = (h >> np.uint64(32)) | np.uint64(1)
        i = np.arange(num_hashes, dtype=np.uint64)
        with np.errstate(over="ignore"):
            return (h1[:, None] + i * h2[:, None]) % np.uint64(num_bits)

    @classmethod
    def build(cls, hashes: np.ndarray, fpp: float = DEFAULT_FPP) -> "BloomFilter":
        distinct = np.unique(hashes)
        n = max(1, int(distinct.size))
        m = max(64, int(math.ceil(-n * math.log(fpp) / (math.log(2) ** 2) / 64.0)) * 64)
        k = min(MAX_HASHES, max(1, int(round(m / n * math.log(2)))))
        flags = np.zeros(m, dtype=bool)
        if distinct.size:
            flags[cls._positions(distinct, m, k).ravel()] = True
        return cls(m, k, np.packbits(flags, bitorder="little"), int(distinct.size))

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash: False means certainly absent."""
        if hashes.size == 0:
            return np.zeros(0, dtype=bool)
        pos = self._positions(hashes, self.num_bits, self.num_hashes)
        bit = (self.bits[(pos >> np.uint64(3)).astype(np.int64)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1
        return cast(np.ndarray, bit.astype(bool).all(axis=1))  # one bool per row: an array


# ---- writing (SplitWriter) ------------------------------------------------------------------------


def configured_columns(options: Options) -> list[str]:
    raw = options.get_str("indexing.bloomfilter.columns") or ""
    return [c.strip() for c in raw.split(",") if c.strip()]


@dataclass(frozen=True)
class BloomConfig:
    """Which stored columns get Bloom filters, resolved against a split's stored schema."""

    columns: tuple[str, ...]
    fpp: float

    @classmethod
    def from_options(
        cls, options: Options, stored_schema: pa.Schema, partition_columns: Sequence[str]
    ) -> "BloomConfig | None":
        wanted = configured_columns(options)
        if not wanted:
            return None
        fpp = options.get_float("indexing.bloomfilter.fpp")
        if not 0.0 < fpp < 1.0:
            raise InvalidOptionError(
                f"option 'spark.indextables.indexing.bloomfilter.fpp': expected a rate in (0, 1), got {fpp}"
            )
        by_lower = {n.lower(): n for n in stored_schema.names}
        cols = []
        for c in wanted:
            if c.lower() in {p.lower() for p in partition_columns}:
                raise InvalidOptionError(
                    f"option 'spark.indextables.indexing.bloomfilter.columns': {c!r} is a "
                    f"partition column (partition pruning already covers it)"
                )
            name = by_lower.get(c.lower())
            if name is None:
                raise InvalidOptionError(
                    f"option 'spark.indextables.indexing.bloomfilter.columns': {c!r} is not a "
                    f"column of the table (columns: {stored_schema.names})"
                )
            t = stored_schema.field(name).type
            if not supported_type(t):
                raise InvalidOptionError(
                    f"option 'spark.indextables.indexing.bloomfilter.columns': column {name!r} "
                    f"has type {t}; Bloom filters support strings, binaries, numbers, "
                    f"booleans, dates and timestamps"
                )
            if name not in cols:
                cols.append(name)
        return cls(tuple(cols), fpp)

    def new_split(self) -> "SplitBloomBuilder":
        return SplitBloomBuilder(self)


@dataclass
class SplitBloomBuilder:
    """Collects the value hashes of one split's Bloom columns."""

    config: BloomConfig
    hashes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)

    def add(self, rows: pa.RecordBatch) -> None:
        for c in self.config.columns:
            parts = self.hashes.setdefault(c, [])
            parts.append(hash_values(rows.column(c)))
            self.pending[c] = self.pending.get(c, 0) + rows.num_rows
            if self.pending[c] >= _DEDUP_EVERY:  # bound memory on low-cardinality columns
                self.hashes[c] = [np.unique(np.concatenate(parts))]
                self.pending[c] = 0

    def encode(self, split_path: str) -> bytes:
        cols: dict[str, Any] = {}
        payload: list[bytes] = []
        offset = 0
        for c in self.config.columns:
            parts = self.hashes.get(c) or []
            bf = BloomFilter.build(np.concatenate(parts) if parts else np.empty(0, np.uint64), self.config.fpp)
            data = bf.bits.tobytes()
            cols[c] = {
                "numBits": bf.num_bits,
                "numHashes": bf.num_hashes,
                "numValues": bf.num_values,
                "offset": offset,
                "length": len(data),
            }
            payload.append(data)
            offset += len(data)
        header = {"splitPath": split_path, "hash": HASH_SCHEME, "columns": cols}
        return encode_frame(MAGIC, FORMAT_VERSION, header, b"".join(payload))


def bloom_file_for(split_path: str) -> str:
    return stats_file_for(split_path, FILE_EXT)


# ---- reading ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SplitBlooms:
    split_path: str
    filters: dict[str, BloomFilter]  # by column name

    def column(self, name: str) -> BloomFilter | None:
        f = self.filters.get(name)
        if f is not None:
            return f
        matches = [v for k, v in self.filters.items() if k.lower() == name.strip("`").lower()]
        return matches[0] if len(matches) == 1 else None


def decode_blooms(data: bytes, split_path: str, where: str) -> SplitBlooms:
    header, payload = decode_frame(data, MAGIC, FORMAT_VERSION, "Bloom filter", where)
    if header.get("hash") != HASH_SCHEME:
        raise CorruptStateError(
            f"{where}: Bloom filter hash scheme {header.get('hash')!r} found; this "
            f"indextables_spark uses {HASH_SCHEME!r}"
        )
    if header.get("splitPath") != split_path:
        raise CorruptStateError(f"{where}: Bloom filter of split {header.get('splitPath')!r}, expected {split_path!r}")
    out = {}
    try:
        for name, c in header["columns"].items():
            off, length, m, k = int(c["offset"]), int(c["length"]), int(c["numBits"]), int(c["numHashes"])
            if off < 0 or off + length > len(payload) or length * 8 != m or m <= 0 or not 1 <= k <= MAX_HASHES:
                raise ValueError(
                    f"column {name!r}: bits [{off}, {off + length}) of {len(payload)}, {m} bits, {k} hashes"
                )
            bits = np.frombuffer(payload, dtype=np.uint8, count=length, offset=off)
            out[str(name)] = BloomFilter(m, k, bits, int(c.get("numValues", 0)))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorruptStateError(f"{where}: corrupt Bloom filter header ({e})") from None
    return SplitBlooms(split_path, out)


_cache: LruCache[SplitBlooms] = LruCache(_CACHE_ENTRIES)


def load_blooms(storage: Storage, split_path: str) -> SplitBlooms:
    key = bloom_file_for(split_path)
    where = storage.full_uri(key)
    hit = _cache.get(where)
    if hit is not None:
        return hit
    try:
        data = storage.read(key)
    except FileNotFoundInStorageError:
        raise CorruptStateError(f"Bloom filter file {where} is missing (listed in the table state)") from None
    blooms = decode_blooms(data, split_path, where)
    _cache.put(where, blooms)
    return blooms


# ---- planning -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Probe:
    """`column IN values` with the values hashed once (EqualTo is a one-value probe)."""

    column: str
    hashes: np.ndarray


@dataclass(frozen=True)
class _Both:
    left: _Probes
    right: _Probes
    all_needed: bool  # AND: either side rules the split out; OR: both must


# What _Compile makes of a filter that Bloom filters can rule out (False: `x = NULL`, never true)
_Probes = Union[_Probe, _Both, Literal[False]]


class _Compile(FilterVisitor[_Probes | None]):
    """A filter as probes on Bloom columns; None where Bloom filters cannot rule anything out.
    The constant False stands for `x = NULL` (never true)."""

    def __init__(self, types: Mapping[str, pa.DataType]):
        self.types = types

    def visit_and(self, f: And) -> _Probes | None:
        left, right = self.visit(f.left), self.visit(f.right)
        if left is None or right is None:
            return left if right is None else right
        return _Both(left, right, all_needed=False)

    def visit_or(self, f: Or) -> _Probes | None:
        left, right = self.visit(f.left), self.visit(f.right)
        return None if left is None or right is None else _Both(left, right, all_needed=True)

    def visit_equal_to(self, f: EqualTo) -> _Probes | None:
        return False if f.value is None else self._probe(f.column, [f.value])

    def visit_equal_null_safe(self, f: EqualNullSafe) -> _Probes | None:
        return None if f.value is None else self._probe(f.column, [f.value])  # x <=> NULL needs null counts

    def visit_in(self, f: In) -> _Probes | None:
        return self._probe(f.column, [v for v in f.values if v is not None])

    def _nothing(self, f: Filter) -> _Probes | None:
        return None  # ranges, negations, NULL tests, LIKE: a Bloom filter cannot rule them out

    visit_not = visit_comparison = visit_is_null = visit_is_not_null = visit_string_match = _nothing

    def _probe(self, column: str, values: Sequence[Any]) -> _Probes | None:
        t = self.types.get(column.strip("`").lower())
        if t is None:
            return None
        return _Probe(column, hash_values(pa.array(values, type=t)))


def _compile(f: Filter, types: Mapping[str, pa.DataType]) -> _Probes | None:
    return _Compile(types).visit(f)


def _rules_out(probe: _Probes, blooms: SplitBlooms) -> bool:
    if probe is False:
        return True
    if isinstance(probe, _Both):
        a, b = _rules_out(probe.left, blooms), _rules_out(probe.right, blooms)
        return (a and b) if probe.all_needed else (a or b)
    bloom = blooms.column(probe.column)
    return bloom is not None and not bool(bloom.might_contain(probe.hashes).any())


def skip_by_blooms(
    table_path: str, options: Options, snapshot: Snapshot, files: Sequence[AddFile], filters: Sequence[Filter]
) -> list[AddFile]:
    """The planner hook (Spark reader): prune_with_blooms with the snapshot's stats files and schema."""
    if not snapshot.stats_files.get(STATS_KEY) or not filters:
        return list(files)

    types = {f.name: f.type for f in arrow_schema(snapshot.schema_json)}
    return prune_with_blooms(open_storage(table_path, options), files, filters, snapshot.stats_files, types, options)


def prune_with_blooms(
    storage: Storage,
    files: Sequence[AddFile],
    filters: Sequence[Filter],
    stats_files: Mapping[str, Sequence[str]],
    column_types: Mapping[str, pa.DataType],
    options: Options | None = None,
) -> list[AddFile]:
    """The files (AddFile) whose Bloom filters do not rule out the filters (a flat AND list of
    split filters); files without a listed Bloom file are kept. column_types: Arrow type by column."""
    listed = set(stats_files.get(STATS_KEY) or ())
    if not listed or (options is not None and not options.get_bool("read.bloomfilter.enabled")):
        return list(files)
    types = {k.lower(): v for k, v in column_types.items()}
    probes = [p for p in (_compile(f, types) for f in filters) if p is not None]
    if not probes:
        return list(files)
    candidates = [f for f in files if bloom_file_for(f.path) in listed]
    cached = {a.path: _cache.get(storage.full_uri(bloom_file_for(a.path))) for a in candidates}
    loaded = {p: b for p, b in cached.items() if b is not None}
    missing = [p for p, b in cached.items() if b is None]
    if len(missing) > 1:  # the first planning reads the files (I/O, in parallel); later ones hit the cache
        with ThreadPoolExecutor(max_workers=min(_LOAD_THREADS, len(missing)), thread_name_prefix="itx-bloom") as ex:
            loaded.update(zip(missing, ex.map(lambda p: load_blooms(storage, p), missing)))
    elif missing:
        loaded[missing[0]] = load_blooms(storage, missing[0])
    skipped = {a.path for a in candidates if any(_rules_out(p, loaded[a.path]) for p in probes)}
    return [f for f in files if f.path not in skipped]
