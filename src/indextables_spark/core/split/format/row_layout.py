"""Where each record batch and each column of it lies in a split's row store, recorded at write
time (`rows.layout`, bundled with the index files), so that a reader on object storage fetches
the rows it needs in one round of ranged reads instead of walking the IPC file request by request.

The row store (rows.arrow) is an Arrow IPC file of LZ4-compressed record batches. Its batches are
cut by size (ROW_BATCH_BYTES of uncompressed data, within [MIN_BATCH_ROWS, MAX_BATCH_ROWS] rows),
not by a fixed row count: a handful of rows then costs a handful of small ranges (a 100-byte row
batch of ~2,600 rows is ~130 KB of text before compression), as Tantivy's 16 KB document store
blocks and Lance's pages do. Splits written before this cut (65,536-row batches, no layout) keep
reading as they are; MERGE SPLITS rewrites them.

Layout file: `b"ITRLAY01"`, u32 batches, u32 fields (little-endian), then zlib of the int64 deltas
of the row-store-relative offsets, per batch: [metadata start, metadata end, then per top-level
field its body span start, end]. A span covers the field's buffers (and its children's): Arrow's
IPC writer lays a batch body out field by field, depth first. The spans are what pyarrow's own IPC
reader asks for (`IpcReadOptions(included_fields=[j])`): the writer measures them by reading the
file back through a recording file (`measure`), so no Arrow metadata is parsed here.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from indextables_spark.errors import SplitFormatError
from indextables_spark.util.ranges import Range, SeekableFile

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

LAYOUT_NAME = "rows.layout"
MAGIC = b"ITRLAY01"
ROW_BATCH_BYTES = 256 << 10  # uncompressed bytes per record batch (about 100 KB once compressed)
MIN_BATCH_ROWS = 64
MAX_BATCH_ROWS = 65_536


def batch_rows_for(nbytes: int, num_rows: int) -> int:
    """Rows per record batch for rows of this average size (`nbytes` over `num_rows` rows)."""
    per_row = max(1, nbytes // max(1, num_rows))
    return max(MIN_BATCH_ROWS, min(MAX_BATCH_ROWS, ROW_BATCH_BYTES // per_row))


@dataclass(frozen=True)
class RowLayout:
    """Offsets (relative to the row store's start) of each batch's metadata and field spans."""

    offsets: np.ndarray  # int64, shape (batches, 2 + 2 * fields)

    @property
    def num_batches(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def num_fields(self) -> int:
        return int((self.offsets.shape[1] - 2) // 2)

    def ranges(self, batch: int, fields: Sequence[int]) -> list[Range]:
        """The row-store-relative ranges reading these fields of one batch takes: its metadata,
        then each field's span (empty spans left out)."""
        row = self.offsets[batch]
        out = [(int(row[0]), int(row[1]))]
        for j in fields:
            s, e = int(row[2 + 2 * j]), int(row[3 + 2 * j])
            if e > s:
                out.append((s, e))
        return out

    def encode(self) -> bytes:
        flat = self.offsets.reshape(-1).astype("<i8")
        deltas = np.diff(flat, prepend=np.int64(0)).astype("<i8")
        return MAGIC + struct.pack("<II", self.num_batches, self.num_fields) + zlib.compress(deltas.tobytes(), 6)


def decode(data: bytes, where: str) -> RowLayout:
    """The layout in `data` (a `rows.layout` file); SplitFormatError naming the split otherwise."""
    if len(data) < 16 or data[:8] != MAGIC:
        raise SplitFormatError(f"split {where}: {LAYOUT_NAME} is not a row store layout (bad magic)")
    batches, fields = struct.unpack("<II", data[8:16])
    try:
        flat = np.frombuffer(zlib.decompress(data[16:]), dtype="<i8")
    except zlib.error as e:
        raise SplitFormatError(f"split {where}: {LAYOUT_NAME} is corrupt ({e})") from None
    if flat.size != batches * (2 + 2 * fields):
        raise SplitFormatError(
            f"split {where}: {LAYOUT_NAME} holds {flat.size} offsets, expected {batches * (2 + 2 * fields)}"
        )
    offsets = np.cumsum(flat).reshape(batches, 2 + 2 * fields)
    if batches and (offsets.min() < 0 or np.any(offsets[:, 1:] < offsets[:, :1])):
        raise SplitFormatError(f"split {where}: {LAYOUT_NAME} has offsets out of order")
    return RowLayout(offsets)


class _RecordingFile(SeekableFile):
    """A local file whose reads are recorded as (start, end)."""

    def __init__(self, f: io.BufferedReader, size: int):
        self.f, self.size = f, size
        self.reads: list[Range] = []

    def readinto(self, buf: WriteableBuffer) -> int:
        self.f.seek(self.pos)
        n = self.f.readinto(buf)
        if n:
            self.reads.append((self.pos, self.pos + n))
            self.pos += n
        return n or 0


def measure(rows_path: str) -> RowLayout:
    """The layout of the IPC file at rows_path: each field of each batch read alone through a
    recording file (the first read of a batch is its metadata, the rest the field's buffers).
    Costs one decompression of the row store: small next to indexing it."""
    import pyarrow as pa  # lazy: keeps `import indextables_spark.core.split.format.row_layout` free of pyarrow

    size = os.path.getsize(rows_path)
    with open(rows_path, "rb") as f:
        rec = _RecordingFile(f, size)
        pf = pa.PythonFile(rec, mode="r")
        whole = pa.ipc.open_file(pf)
        nfields, batches = len(whole.schema), whole.num_record_batches
        offsets = np.zeros((batches, 2 + 2 * nfields), dtype=np.int64)
        for j in range(nfields):
            reader = pa.ipc.open_file(pf, options=pa.ipc.IpcReadOptions(included_fields=[j]))
            for i in range(batches):
                rec.reads.clear()
                reader.get_batch(i)
                if not rec.reads:
                    raise SplitFormatError(f"row store {rows_path}: record batch {i} read nothing")
                meta, body = rec.reads[0], rec.reads[1:]
                offsets[i, 0:2] = meta
                offsets[i, 2 + 2 * j : 4 + 2 * j] = (
                    (min(s for s, _ in body), max(e for _, e in body)) if body else (meta[1], meta[1])
                )
    # an empty span sits at the end of the span before it, so the offsets of a batch never go back
    for i in range(batches):
        last = offsets[i, 1]
        for j in range(nfields):
            s, e = offsets[i, 2 + 2 * j], offsets[i, 3 + 2 * j]
            if e <= s:
                offsets[i, 2 + 2 * j : 4 + 2 * j] = (last, last)
            else:
                last = e
    return RowLayout(offsets)


def write_layout(rows_path: str, dest_dir: str) -> str:
    """Measure the row store at rows_path and write its layout file into dest_dir; returns its path
    (bundled with the index files by bundle.bundle's extra_files)."""
    path = os.path.join(dest_dir, LAYOUT_NAME)
    with open(path, "wb") as f:
        f.write(measure(rows_path).encode())
    return path


def live_batches(starts: Sequence[int], dead: np.ndarray | None) -> list[int]:
    """The batches (rows starts[i] .. starts[i+1]-1) not all of whose rows are in `dead` (sorted)."""
    bounds = np.asarray(starts, dtype=np.int64)
    if dead is None or not dead.size:
        return list(range(len(bounds) - 1))
    deleted = np.searchsorted(dead, bounds[1:]) - np.searchsorted(dead, bounds[:-1])
    live: list[int] = np.flatnonzero(deleted < np.diff(bounds)).tolist()
    return live
