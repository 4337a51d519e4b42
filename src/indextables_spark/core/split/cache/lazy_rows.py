"""A split's row store read from object storage by ranges, column by column, as queries need it.

The split cache fetches a remote split's index files whole (Tantivy opens them memory-mapped)
but not its row store (rows.arrow, LZ4-compressed Arrow IPC, about half of a split's bytes).
`LazyRows` opens the row store through a file object whose reads are ranged reads of the split
(`Storage.read_range`): Arrow's IPC reader with `included_fields` then fetches only the buffers
of the columns asked for, of the record batches asked for. Each (batch, column) fetched is
written once, uncompressed, to `rows.d/b<batch>-f<field>.arrow` in the split's cache directory,
so warm reads memory-map it as they do an extracted rows.arrow (zero-copy, no decompression).
The IPC footer (schema and batch offsets) is kept in `rows.d/footer.bin`.

`prefetch` takes what a read of some rows will need before it reads them: with the split's row
layout (format/row_layout.py, written with the split) the ranges of each batch's metadata and
columns are known, so every batch asked for costs one ranged read, all of them in flight at once;
a split written before the layout is walked batch by batch, the batches in parallel.

Which storage a directory's rows come from is registered by the cache (`register`) each time
it hands the directory out; a reader of a directory with no registered source fails clearly.
"""

from __future__ import annotations

import bisect
import os
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pyarrow as pa

from indextables_spark.core.split.format.row_layout import LAYOUT_NAME, RowLayout, decode
from indextables_spark.errors import SplitFormatError
from indextables_spark.util.pools import shared_pool
from indextables_spark.util.ranges import SeekableFile, coalesce

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

    from indextables_spark.core.storage.base import Storage

ROWS_DIR = "rows.d"
IPC_TAIL = "footer.bin"
_TAIL_BYTES = 8 << 10  # one ranged read usually holds the IPC footer
_KEEP_BYTES = 4 << 20  # fetched columns up to this size stay in memory
# A small read of the row store (a record batch's metadata) takes this much more in the same
# request: the buffers that follow (the batch's first columns) then cost no request of their own.
READAHEAD_BYTES = 64 << 10
PREFETCH_THREADS = 16  # ranged reads of row store batches in flight (a pool of their own)
PIECE_GAP = 16 << 10  # ranges of one batch closer than this are one request


@dataclass(frozen=True)
class RowSource:
    """Where a split's row store lies: bytes [offset, offset + length) of `key` in `storage`."""

    storage: Storage
    key: str
    offset: int
    length: int


_sources: dict[str, RowSource] = {}
_sources_lock = threading.Lock()


def register(local_dir: str, source: RowSource) -> None:
    with _sources_lock:
        _sources[os.path.abspath(local_dir)] = source


def source_for(local_dir: str) -> RowSource | None:
    with _sources_lock:
        return _sources.get(os.path.abspath(local_dir))


class RangedFile(SeekableFile):
    """Bytes [offset, offset + length) of an object as a read-only file: an optional tail held
    locally (from tail_start on), the rest by ranged reads (a split's row store here; a companion
    index's source Parquet files in companion.py)."""

    def __init__(
        self,
        source: RowSource,
        where: str,
        what: str,
        tail_start: int | None = None,
        tail: bytes = b"",
        readahead: int = 0,
    ):
        self.source, self.where, self.what = source, where, what
        self.tail_start = source.length if tail_start is None else tail_start
        self.tail = tail
        self.size = source.length
        self.readahead = readahead  # reads shorter than this fetch this much (kept in _ahead)
        self._ahead_start, self._ahead = 0, b""
        self._piece_starts: list[int] = []  # bytes fetched ahead (add_pieces), by start
        self._pieces: list[bytes] = []

    def add_pieces(self, pieces: Sequence[tuple[int, bytes]]) -> None:
        """Bytes [start, start + len) fetched ahead: reads inside one are served from it."""
        for start, data in pieces:
            i = bisect.bisect_left(self._piece_starts, start)
            self._piece_starts.insert(i, start)
            self._pieces.insert(i, data)

    def _from_pieces(self, start: int, end: int) -> bytes | None:
        i = bisect.bisect_right(self._piece_starts, start) - 1
        if i >= 0 and end <= self._piece_starts[i] + len(self._pieces[i]):
            return self._pieces[i][start - self._piece_starts[i] : end - self._piece_starts[i]]
        return None

    def readinto(self, buffer: WriteableBuffer) -> int:
        buf = memoryview(buffer).cast("B")  # counted and filled by bytes, whatever the buffer's item format
        n = max(0, min(len(buf), self.source.length - self.pos))
        if n == 0:
            return 0
        start, end = self.pos, self.pos + n
        ahead_end = self._ahead_start + len(self._ahead)
        piece = self._from_pieces(start, end) if self._pieces else None
        if piece is not None:
            data = piece
        elif start >= self.tail_start:
            data = self.tail[start - self.tail_start : end - self.tail_start]
        elif self._ahead_start <= start < ahead_end:  # from what the last small read took along
            data = self._ahead[start - self._ahead_start : end - self._ahead_start]
            if end > ahead_end:
                s = self.source
                data += s.storage.read_range(s.key, s.offset + ahead_end, s.offset + end)
        elif n < self.readahead:
            s = self.source
            stop = min(start + self.readahead, self.tail_start)
            self._ahead_start = start
            self._ahead = s.storage.read_range(s.key, s.offset + start, s.offset + max(stop, end))
            data = self._ahead[: end - start]
        else:
            s = self.source
            data = s.storage.read_range(s.key, s.offset + start, s.offset + end)
        if len(data) != n:
            raise SplitFormatError(f"{self.where}: short read of {self.what} at bytes [{start}, {end})")
        buf[:n] = data
        self.pos = end
        return n


class LazyRows:
    """The row store of one split directory, fetched by (batch, column) on first use."""

    def __init__(self, local_dir: str, source: RowSource, where: str):
        self.dir = os.path.join(local_dir, ROWS_DIR)
        self.where = where
        os.makedirs(self.dir, exist_ok=True)
        tail_path = os.path.join(self.dir, IPC_TAIL)
        try:
            with open(tail_path, "rb") as f:
                tail = f.read()
        except FileNotFoundError:
            tail = _ipc_tail(source, where)
            _write_atomic(tail_path, tail)
        tail_start = source.length - len(tail)
        if not 10 <= len(tail) <= source.length or tail[-6:] != b"ARROW1":
            raise SplitFormatError(
                f"split {where}: the row store footer ({tail_path}) is not an Arrow IPC file "
                f"footer; delete the cache directory {local_dir}"
            )
        self._source, self._tail_start, self._tail = source, tail_start, tail
        self._file = RangedFile(source, f"split {where}", "the row store", tail_start, tail)
        try:
            self.ipc = pa.ipc.open_file(pa.PythonFile(self._file, mode="r"))
        except pa.ArrowException as e:
            raise SplitFormatError(f"split {where}: the row store is unreadable ({e})") from e
        self.schema: pa.Schema = self.ipc.schema
        self.num_record_batches = self.ipc.num_record_batches
        self.layout = _load_layout(local_dir, where, self.num_record_batches, len(self.schema))
        # at most an eighth of an average record batch: small row stores are not read twice over
        self._file.readahead = min(READAHEAD_BYTES, tail_start // max(1, self.num_record_batches) // 8)
        self._readers: dict[tuple[int, ...], Any] = {}
        self._columns: dict[tuple[int, int], pa.Array] = {}
        self._built: dict[tuple[int, tuple[str, ...] | None], pa.RecordBatch] = {}  # batch() answers
        self._lock = threading.Lock()

    def _path(self, batch: int, field: int) -> str:
        return os.path.join(self.dir, f"b{batch:06d}-f{field:04d}.arrow")

    def _load_local(self, batch: int, field: int) -> pa.Array | None:
        """A fetched column from its local file: read into memory, not memory-mapped (a map keeps
        a file descriptor open, and a split has one file per fetched batch and column)."""
        path = self._path(batch, field)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        try:
            return pa.ipc.open_file(pa.BufferReader(pa.py_buffer(data))).get_batch(0).column(0)
        except pa.ArrowException as e:
            raise SplitFormatError(
                f"split {self.where}: cached row store column file {path} is unreadable "
                f"({e}); delete the cache directory {os.path.dirname(self.dir)}"
            ) from e

    def _fetch(self, batch: int, fields: Sequence[int], file: RangedFile | None = None) -> dict[int, pa.Array]:
        """Read (ranged) these columns of one record batch and keep each, uncompressed, locally;
        through `file` (a RangedFile of this row store) when given, else the shared one."""
        key = tuple(sorted(fields))
        if file is not None:
            reader = pa.ipc.open_file(
                pa.PythonFile(file, mode="r"), options=pa.ipc.IpcReadOptions(included_fields=list(key))
            )
        else:
            reader = self._readers.get(key)
            if reader is None:
                if len(self._readers) >= 8:  # column subsets asked for: keep the last few
                    self._readers.pop(next(iter(self._readers)))
                reader = self._readers[key] = pa.ipc.open_file(
                    pa.PythonFile(self._file, mode="r"), options=pa.ipc.IpcReadOptions(included_fields=list(key))
                )
        try:
            got = reader.get_batch(batch)
        except pa.ArrowException as e:
            raise SplitFormatError(
                f"split {self.where}: record batch {batch} of the row store is unreadable ({e})"
            ) from e
        out = {}
        for j, name in zip(key, got.schema.names):
            col = out[j] = got.column(name)
            one = pa.RecordBatch.from_arrays([col], schema=pa.schema([self.schema.field(j)]))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, one.schema) as w:
                w.write_batch(one)
            _write_atomic(self._path(batch, j), sink.getvalue().to_pybytes())
            self._keep(batch, j, col)
        return out

    def _keep(self, batch: int, field: int, col: pa.Array) -> None:
        """Keep small columns in memory (read again per use otherwise: a scan of wide text
        columns over hundreds of splits must not stay resident)."""
        if col.nbytes <= _KEEP_BYTES:
            self._columns[(batch, field)] = col

    def _field_ids(self, columns: Sequence[str] | None) -> list[int]:
        """The sorted field indices of these columns (every column: None)."""
        names = list(columns) if columns is not None else self.schema.names
        return sorted({self.schema.get_field_index(c) for c in names})

    def _missing(self, i: int, fields: Sequence[int]) -> list[int]:
        """Of these fields of batch i, those neither in memory nor in a local file (caller locks)."""
        return [j for j in fields if (i, j) not in self._columns and not os.path.exists(self._path(i, j))]

    def has(self, batches: Sequence[int], columns: Sequence[str] | None = None) -> bool:
        """Whether these columns (every column: None) of these batches are here already."""
        fields = self._field_ids(columns)
        with self._lock:
            return not any(self._missing(i, fields) for i in dict.fromkeys(batches))

    def prefetch(self, batches: Sequence[int], columns: Sequence[str] | None = None) -> None:
        """Fetch now what reading `columns` (every column: None) of these batches lacks, every
        batch in parallel: one ranged read per batch with the split's layout, else pyarrow's walk
        of the batch (its metadata, then each column's buffers)."""
        fields = self._field_ids(columns)
        with self._lock:
            wanted = {i: m for i in dict.fromkeys(batches) if (m := self._missing(i, fields))}
        if not wanted:
            return
        pool = shared_pool("row-ranges", PREFETCH_THREADS)
        pieces: dict[int, list[tuple[int, bytes]]] = {i: [] for i in wanted}
        if self.layout is not None:  # every range of every batch in flight at once
            src, layout = self._source, self.layout
            reads = [
                (i, r) for i, fs in wanted.items() for r in coalesce(layout.ranges(i, fs), PIECE_GAP, bounded=True)
            ]

            def read(item: tuple[int, tuple[int, int]]) -> tuple[int, int, bytes]:
                i, (a, b) = item
                return i, a, src.storage.read_range(src.key, src.offset + a, src.offset + b)

            for i, a, data in pool.map(read, reads) if len(reads) > 1 else map(read, reads):
                pieces[i].append((a, data))

        def decode(item: tuple[int, list[int]]) -> None:
            i, fs = item
            file = RangedFile(self._source, f"split {self.where}", "the row store", self._tail_start, self._tail)
            file.add_pieces(pieces[i])
            self._fetch(i, fs, file)

        list(pool.map(decode, wanted.items()) if len(wanted) > 1 else map(decode, wanted.items()))

    def batch(self, i: int, columns: Sequence[str] | None = None) -> pa.RecordBatch:
        key = (i, tuple(columns) if columns is not None else None)
        built = self._built.get(key)
        if built is not None:  # (a warm read of a split asks for the same batch and columns again)
            return built
        names = list(columns) if columns is not None else self.schema.names
        fields = [self.schema.get_field_index(c) for c in names]
        got: dict[int, pa.Array] = {}
        with self._lock:
            missing = []
            for j in dict.fromkeys(fields):
                col = self._columns.get((i, j))
                if col is None:
                    col = self._load_local(i, j)
                    if col is not None:
                        self._keep(i, j, col)
                if col is None:
                    missing.append(j)
                else:
                    got[j] = col
            if missing:
                got.update(self._fetch(i, missing))
            out = pa.RecordBatch.from_arrays(
                [got[j] for j in fields], schema=pa.schema([self.schema.field(j) for j in fields])
            )
            if all((i, j) in self._columns for j in fields):  # held in memory anyway: keep the batch
                if len(self._built) >= 64:
                    self._built.pop(next(iter(self._built)))
                self._built[key] = out
        return out


def _load_layout(local_dir: str, where: str, batches: int, fields: int) -> RowLayout | None:
    """The split's row layout (format/row_layout.py) when it was written with one, checked
    against the row store it describes."""
    try:
        with open(os.path.join(local_dir, LAYOUT_NAME), "rb") as f:
            layout = decode(f.read(), where)
    except FileNotFoundError:
        return None
    if layout.num_batches != batches or layout.num_fields != fields:
        raise SplitFormatError(
            f"split {where}: {LAYOUT_NAME} describes {layout.num_batches} batches of {layout.num_fields} "
            f"columns, the row store has {batches} of {fields}"
        )
    return layout


def _ipc_tail(source: RowSource, where: str) -> bytes:
    return ipc_tail(lambda s, e: source.storage.read_range(source.key, s, e), source.offset, source.length, where)


def ipc_tail(read: Callable[[int, int], bytes], offset: int, length: int, where: str) -> bytes:
    """The end of the row store at [offset, offset + length) of a split (read by `read(start,
    end)`) holding its IPC footer (schema, batch offsets): the last 8 KiB, or as much more as the
    footer's recorded length says."""

    def tail_of(n: int) -> bytes:
        return read(offset + max(0, length - n), offset + length)

    tail = tail_of(_TAIL_BYTES)
    if len(tail) < 10 or tail[-6:] != b"ARROW1":
        raise SplitFormatError(f"split {where}: the row store does not end with an Arrow IPC file footer")
    need = int.from_bytes(tail[-10:-6], "little", signed=True) + 10
    if need > len(tail) and need <= length:
        tail = tail_of(need)
    return tail


def save_ipc_tail(local_dir: str, read: Callable[[int, int], bytes], offset: int, length: int, where: str) -> None:
    """Keep the row store's IPC footer in the split's cache directory now (the split cache calls
    this with the bytes of its first read of the split at hand: LazyRows then needs no request)."""
    _write_atomic(os.path.join(local_dir, ROWS_DIR, IPC_TAIL), ipc_tail(read, offset, length, where))


def keep_ipc_tail(local_dir: str, tail: bytes) -> None:
    """Keep the row store's IPC footer (from the split's hotcache: format/hotcache.py) in the split's
    cache directory: LazyRows then needs no request to open it."""
    _write_atomic(os.path.join(local_dir, ROWS_DIR, IPC_TAIL), tail)


def _write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)  # a cache directory wiped under open handles
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
