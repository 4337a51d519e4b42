"""The single-file split format.

```
[file 1 bytes][file 2 bytes]...[rows.arrow bytes][footer JSON utf-8][u64 LE footer length][b"ITSPLIT1"]
```
Footer JSON (formatVersion 1):
```
{"formatVersion": 1,
 "files": [{"name": "meta.json", "offset": 0, "length": 123}, ...],      # the Tantivy index files
 "rows": {"name": "rows.arrow", "offset": .., "length": .., "numRows": N, "format": "arrow-ipc",
          "batchRows": [65536, 65536, 17]},                             # rows per IPC record batch
 "docMapping": "<doc mapping JSON text>",
 "createdBy": "indextables_spark 0.1.0",
 "indexSections": {"fields": [...], "files": {"<seg>.term": {"tail": t, "sections": {"<field id>": [s, e]}}}},
                                                                        # optional, see composite.py
 "truncatedTerms": ["col", ...],                                        # optional, see builder.py
 "fullyTokenized": ["col", ...]}                                        # optional, see text.py
```
footerStartOffset is the offset of the footer JSON; footerEndOffset is the file size. Readers check
the trailer (length, magic) and formatVersion before trusting anything else.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Sequence, Union

from indextables_spark.core.split.format.composite import INDEX_SECTIONS, index_sections
from indextables_spark.core.split.format.hotcache import HOTCACHE_KEY, ROWS_FILE, open_pieces, write_hotcache
from indextables_spark.errors import SplitFormatError

MAGIC = b"ITSPLIT1"
FORMAT_VERSION = 1
# a split whose row store leaves a vector column's values to its vectors file (vector_index.py,
# `"rowStore": false`): a reader before it would read them as empty lists, so it refuses the split
VECTORS_OUTSIDE_ROWS_VERSION = 2
FORMAT_VERSIONS = (FORMAT_VERSION, VECTORS_OUTSIDE_ROWS_VERSION)
TRAILER_LEN = 16  # u64 footer length + 8-byte magic
ROWS_NAME = "rows.arrow"
COMPANION_ROWS = "companion-parquet"  # rows.format of a companion split (no row store in the file)
FOOTER_FILE = "footer.json"  # written next to the extracted files
EXTRACTED_FROM = "extractedFrom"  # key added to the local footer.json: the split's URI
LAZY_ROWS = "lazyRows"  # key added to the local footer.json: rows.arrow is read by ranges
CREATED_BY = "indextables_spark 0.1.0"
_TAIL_GUESS = 16 << 10  # one ranged read usually gets the whole footer
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_COPY_CHUNK = 8 << 20
LOCAL_BATCH_ROWS = 65_536  # rows per record batch of an extracted, uncompressed row store


@dataclass(frozen=True)
class BundledFile:
    name: str
    offset: int
    length: int


@dataclass(frozen=True)
class SplitFooter:
    format_version: int
    files: list[BundledFile]
    rows: BundledFile
    num_rows: int
    batch_rows: list[int]
    doc_mapping: str
    created_by: str
    footer_start: int
    footer_end: int
    raw: dict[str, Any] = field(default_factory=dict)  # the whole footer JSON (extra fields kept)

    @property
    def is_companion(self) -> bool:
        """The rows live in another table's Parquet files (companion.py), not in the split."""
        return bool(self.raw.get("rows", {}).get("format") == COMPANION_ROWS)

    @property
    def truncated_terms(self) -> list[str]:
        return list(self.raw.get("truncatedTerms") or [])

    @property
    def fully_tokenized(self) -> list[str]:
        """Text columns none of whose tokens was dropped for length (see text.py)."""
        return list(self.raw.get("fullyTokenized") or [])


@dataclass(frozen=True)
class RangeSource:
    """A split reachable by ranged reads (object stores)."""

    size: int
    read_range: Callable[[int, int], bytes]  # bytes [start, end)


Source = Union[bytes, bytearray, memoryview, str, RangeSource, BinaryIO]


# ---------------------------------------------------------------------------------------------
# Writing


def _index_files(index_dir: str) -> list[str]:
    # Lock files and tantivy's GC bookkeeping are recreated on open; everything else is the index.
    names = [
        n
        for n in os.listdir(index_dir)
        if not n.endswith(".lock") and n != ".managed.json" and os.path.isfile(os.path.join(index_dir, n))
    ]
    for n in names:
        if not _SAFE_FILE.match(n) or n in (ROWS_NAME, FOOTER_FILE):
            raise SplitFormatError(f"index directory {index_dir}: unexpected file name {n!r}")
    return sorted(names, key=lambda n: (_BUNDLE_ORDER.get(n.rsplit(".", 1)[-1], len(_BUNDLE_ORDER)), n))


# Where each kind of index file goes in the bundle: what a query reads whole or in big sections
# (doc store, positions, postings) first, then what every query reads a little of (fast field
# columns, field norms, term dictionaries) next to each other and to the small files, so that a
# cold query's pieces of them are one request, not one per file (cache/sparse.py coalesces).
_BUNDLE_ORDER = {ext: i for i, ext in enumerate(("store", "pos", "idx", "fast", "fieldnorm", "term"))}


def _append(out: BinaryIO, path: str) -> int:
    with open(path, "rb") as f:
        n = 0
        while True:
            chunk = f.read(_COPY_CHUNK)
            if not chunk:
                return n
            out.write(chunk)
            n += len(chunk)


def bundle(
    index_dir: str,
    rows_path: str | None,
    doc_mapping: str,
    out_path: str,
    *,
    num_rows: int | None = None,
    batch_rows: list[int] | None = None,
    extra: dict[str, Any] | None = None,
    extra_files: Sequence[str] = (),
) -> tuple[int, int]:
    """Write the split file; returns (footer_start, footer_end). Without rows_path the split
    holds no row store: a companion split (companion.py; `extra` carries its source files).
    extra_files: more files bundled with the index files (vector indexes: vector_index.py)."""
    entries: list[dict[str, Any]] = []
    index_files = [os.path.join(index_dir, n) for n in _index_files(index_dir)]
    taken = {os.path.basename(p) for p in index_files}
    for p in extra_files:
        name = os.path.basename(p)
        if not _SAFE_FILE.match(name) or name in taken or name in (ROWS_NAME, FOOTER_FILE):
            raise SplitFormatError(f"split file {out_path}: cannot bundle {name!r} (unsafe or taken name)")
        taken.add(name)
    with open(out_path, "wb") as out:
        offset = 0
        for path in [*index_files, *extra_files]:
            n = _append(out, path)
            entries.append({"name": os.path.basename(path), "offset": offset, "length": n})
            offset += n
        rows_len = _append(out, rows_path) if rows_path is not None else 0
        from indextables_spark.core.split.format.vector_index import (  # lazy: keeps this module free of pyarrow
            ROW_STORE_KEY,
            VECTOR_FILE_PREFIX,
            VECTORS_KEY,
        )

        named = [(os.path.basename(p), p) for p in [*index_files, *extra_files]]
        sections = index_sections(index_dir, [e["name"] for e in entries])
        pieces = open_pieces(named, rows_path, VECTOR_FILE_PREFIX, sections)
        paths = {**dict(named), **({ROWS_FILE: rows_path} if rows_path is not None else {})}
        hotcache = write_hotcache(out, pieces, paths, offset + rows_len)
        rows = {
            "name": ROWS_NAME,
            "offset": offset,
            "length": rows_len,
            "numRows": int(num_rows if num_rows is not None else sum(batch_rows or [])),
            "format": "arrow-ipc" if rows_path is not None else COMPANION_ROWS,
            "batchRows": list(batch_rows or []),
        }
        footer_start = offset + rows_len + hotcache["length"]
        footer = {
            "formatVersion": (
                VECTORS_OUTSIDE_ROWS_VERSION
                if any(v.get(ROW_STORE_KEY) is False for v in (extra or {}).get(VECTORS_KEY, {}).values())
                else FORMAT_VERSION
            ),
            "files": entries,
            "rows": rows,
            "docMapping": doc_mapping,
            "createdBy": CREATED_BY,
            **({INDEX_SECTIONS: sections} if sections is not None else {}),
            HOTCACHE_KEY: hotcache,
            **(extra or {}),
        }
        data = json.dumps(footer, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        out.write(data)
        out.write(struct.pack("<Q", len(data)))
        out.write(MAGIC)
        out.flush()
        os.fsync(out.fileno())
    return footer_start, footer_start + len(data) + TRAILER_LEN


# ---------------------------------------------------------------------------------------------
# Reading


class _Reader:
    """Uniform ranged access over the accepted sources."""

    size: int
    read: Callable[[int, int], bytes]  # bytes [start, end)

    def __init__(self, source: Source, where: str):
        self.where = where
        self._close: Callable[[], None] | None = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            buf = memoryview(source)
            self.size = len(buf)
            self.read = lambda s, e: bytes(buf[s:e])
        elif isinstance(source, RangeSource):
            self.size = source.size
            self.read = source.read_range
        elif isinstance(source, str):
            try:
                f = open(source, "rb")
            except FileNotFoundError:
                raise SplitFormatError(f"split {where}: file not found ({source})") from None
            self._close = f.close
            self.size = os.fstat(f.fileno()).st_size
            self.read = self._file_read(f)
        elif hasattr(source, "seek") and hasattr(source, "read"):
            self.size = source.seek(0, io.SEEK_END)
            self.read = self._file_read(source)
        else:
            raise TypeError(f"split {where}: cannot read from {type(source).__name__}")

    @staticmethod
    def _file_read(f: BinaryIO) -> Callable[[int, int], bytes]:
        def read(s: int, e: int) -> bytes:
            f.seek(s)
            return f.read(max(0, e - s))

        return read

    def close(self) -> None:
        if self._close:
            self._close()


def _fail(where: str, what: str) -> SplitFormatError:
    return SplitFormatError(f"split {where}: {what}")


def _entry(d: Any, where: str, limit: int, what: str) -> BundledFile:
    if not isinstance(d, dict):
        raise _fail(where, f"footer entry for {what} is not an object: {str(d)[:100]}")
    name, off, length = d.get("name"), d.get("offset"), d.get("length")
    if not isinstance(name, str) or not _SAFE_FILE.match(name):
        raise _fail(where, f"footer names an unsafe or invalid file {name!r}")
    if not isinstance(off, int) or not isinstance(length, int) or isinstance(off, bool) or isinstance(length, bool):
        raise _fail(where, f"footer entry {name!r} has non-integer offset/length ({off!r}, {length!r})")
    if off < 0 or length < 0 or off + length > limit:
        raise _fail(
            where,
            f"footer entry {name!r} spans bytes [{off}, {off + length}) outside the data "
            f"section [0, {limit}) of the file",
        )
    return BundledFile(name, off, length)


def _parse_footer(data: bytes, size: int, footer_start: int, where: str) -> SplitFooter:
    try:
        d = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(where, f"footer is not valid UTF-8 JSON ({e})") from None
    if not isinstance(d, dict):
        raise _fail(where, f"footer is not a JSON object: {str(d)[:100]}")
    version = d.get("formatVersion")
    if version not in FORMAT_VERSIONS:
        raise _fail(where, f"unsupported split format version {version!r} (this reader supports {FORMAT_VERSIONS})")
    files_raw = d.get("files")
    if not isinstance(files_raw, list):
        raise _fail(where, "footer has no 'files' list")
    files = [_entry(x, where, footer_start, "an index file") for x in files_raw]
    rows_raw: Any = d.get("rows")  # an object: checked by _entry
    rows = _entry(rows_raw, where, footer_start, "rows")
    if rows_raw.get("format") not in ("arrow-ipc", COMPANION_ROWS):
        raise _fail(where, f"unsupported row store format {rows_raw.get('format')!r} (expected 'arrow-ipc')")
    if rows_raw.get("format") == COMPANION_ROWS and not isinstance(d.get("companion"), dict):
        raise _fail(where, "the rows are in companion source files but the footer has no 'companion' section")
    num_rows = rows_raw.get("numRows")
    batch_rows = rows_raw.get("batchRows") or []
    if not isinstance(num_rows, int) or num_rows < 0:
        raise _fail(where, f"footer has an invalid numRows {num_rows!r}")
    if not isinstance(batch_rows, list) or sum(batch_rows) != num_rows:
        raise _fail(
            where,
            f"footer batchRows (sum {sum(batch_rows) if isinstance(batch_rows, list) else '?'}) "
            f"disagree with numRows {num_rows}",
        )
    names = [f.name for f in files] + [rows.name]
    if len(set(names)) != len(names):
        raise _fail(where, "footer lists a file twice")
    doc_mapping = d.get("docMapping")
    if not isinstance(doc_mapping, str):
        raise _fail(where, "footer has no docMapping")
    return SplitFooter(
        version,
        files,
        rows,
        num_rows,
        list(batch_rows),
        doc_mapping,
        str(d.get("createdBy") or ""),
        footer_start,
        size,
        d,
    )


def _read_footer(r: _Reader) -> SplitFooter:
    where = r.where
    if r.size < TRAILER_LEN:
        raise _fail(where, f"truncated file: {r.size} bytes, shorter than the {TRAILER_LEN}-byte trailer")
    tail_start = max(0, r.size - _TAIL_GUESS)
    tail = r.read(tail_start, r.size)
    if len(tail) != r.size - tail_start:
        raise _fail(where, f"short read: got {len(tail)} of the last {r.size - tail_start} bytes")
    magic = tail[-8:]
    if magic != MAGIC:
        raise _fail(
            where, f"bad magic {magic!r} at the end of the file (expected {MAGIC!r}); not a split, or truncated"
        )
    (footer_len,) = struct.unpack("<Q", tail[-16:-8])
    footer_start = r.size - TRAILER_LEN - footer_len
    if footer_len == 0 or footer_start < 0:
        raise _fail(where, f"truncated or corrupt: footer length {footer_len} does not fit in a {r.size}-byte file")
    if footer_start >= tail_start:
        data = tail[footer_start - tail_start : len(tail) - TRAILER_LEN]
    else:
        data = r.read(footer_start, r.size - TRAILER_LEN)
    return _parse_footer(data, r.size, footer_start, where)


def read_footer(data_or_reader: Source, path_for_errors: str) -> SplitFooter:
    """Validate the trailer and parse the footer of a split (bytes, local path, file or RangeSource)."""
    r = _Reader(data_or_reader, path_for_errors)
    try:
        return _read_footer(r)
    finally:
        r.close()


def _copy_range(r: _Reader, src_path: str | None, start: int, length: int, dest: str) -> None:
    with open(dest, "wb") as out:
        if src_path is not None and hasattr(os, "copy_file_range"):
            # Kernel-side copy: no Python buffers for big segment files.
            with open(src_path, "rb") as src:
                done = 0
                while done < length:
                    n = os.copy_file_range(src.fileno(), out.fileno(), length - done, start + done)
                    if n == 0:
                        raise _fail(r.where, f"file ended while copying bytes [{start}, {start + length})")
                    done += n
            return
        done = 0
        while done < length:
            n = min(_COPY_CHUNK, length - done)
            chunk = r.read(start + done, start + done + n)
            if len(chunk) != n:
                raise _fail(r.where, f"short read at bytes [{start + done}, {start + done + n})")
            out.write(chunk)
            done += n


def _copy_coalesced(r: _Reader, files: list[BundledFile], dest_dir: str) -> None:
    """Write the files of a remote split with as few ranged reads as possible: the bundled files
    are adjacent, so their bytes are read in _COPY_CHUNK pieces across file boundaries (a split's
    eight index files are one or a few requests, not eight)."""
    files = sorted(files, key=lambda f: f.offset)
    i = 0
    while i < len(files):
        j = i + 1  # a run of adjacent files
        while j < len(files) and files[j].offset == files[j - 1].offset + files[j - 1].length:
            j += 1
        run = files[i:j]
        start, end = run[0].offset, run[-1].offset + run[-1].length
        outs = [open(os.path.join(dest_dir, f.name), "wb") for f in run]
        try:
            pos = start
            while pos < end:
                n = min(_COPY_CHUNK, end - pos)
                chunk = r.read(pos, pos + n)
                if len(chunk) != n:
                    raise _fail(r.where, f"short read at bytes [{pos}, {pos + n})")
                for f, out in zip(run, outs):  # the part of the chunk that belongs to each file
                    lo, hi = max(pos, f.offset), min(pos + n, f.offset + f.length)
                    if lo < hi:
                        out.write(chunk[lo - pos : hi - pos])
                pos += n
        finally:
            for out in outs:
                out.close()
        i = j


def extract(
    split_bytes_source: Source, dest_dir: str, path_for_errors: str | None = None, *, rows: bool = True
) -> SplitFooter:
    """Write the split's index files, rows.arrow and footer.json into dest_dir (created if needed).
    rows=False leaves the row store where it is (lazy_rows.py reads it by ranges)."""
    where = path_for_errors or (split_bytes_source if isinstance(split_bytes_source, str) else "<bytes>")
    r = _Reader(split_bytes_source, where)
    try:
        footer = _read_footer(r)
        os.makedirs(dest_dir, exist_ok=True)
        src_path = split_bytes_source if isinstance(split_bytes_source, str) else None
        rows = rows and not footer.is_companion
        wanted = [*footer.files, footer.rows] if rows else list(footer.files)
        if src_path is None:
            _copy_coalesced(r, wanted, dest_dir)
        else:
            for f in wanted:
                _copy_range(r, src_path, f.offset, f.length, os.path.join(dest_dir, f.name))
        with open(os.path.join(dest_dir, FOOTER_FILE), "w", encoding="utf-8") as out:
            # The local copy also records where it came from, so that errors raised while opening
            # the extracted directory name the split, not a cache directory.
            extra = {EXTRACTED_FROM: where} if rows else {EXTRACTED_FROM: where, LAZY_ROWS: True}
            out.write(json.dumps({**footer.raw, **extra}, ensure_ascii=False))
        return footer
    finally:
        r.close()


def uncompress_rows(local_dir: str) -> None:
    """Rewrite an extracted split's rows.arrow without compression, in record batches of up to
    LOCAL_BATCH_ROWS rows (footer.json's batchRows updated to match): what reads rechunk to.

    Readers memory-map the row store: uncompressed, a selective read touches only the pages of
    the rows it takes and a full scan hands out zero-copy batches, instead of decompressing every
    batch it touches. The split file in storage stays LZ4-compressed, in the small batches that
    ranged reads of a few rows want (row_layout.py); a local copy wants few big ones (a scan's
    cost is per batch, and a read rechunks to 65,536 rows), so the rows are re-cut.
    """
    import pyarrow as pa  # lazy: keeps `import indextables_spark.core.split.format.bundle` free of pyarrow

    path = os.path.join(local_dir, ROWS_NAME)
    tmp = path + ".plain"
    sizes: list[int] = []
    try:
        with pa.memory_map(path, "r") as src:
            reader = pa.ipc.open_file(src)
            table = reader.read_all()  # (decompressed)
            with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, reader.schema) as w:
                for start in range(0, table.num_rows, LOCAL_BATCH_ROWS):
                    piece = table.slice(start, LOCAL_BATCH_ROWS).combine_chunks()
                    w.write_batch(piece.to_batches(max_chunksize=LOCAL_BATCH_ROWS)[0])
                    sizes.append(piece.num_rows)
    except pa.ArrowException as e:
        raise SplitFormatError(
            f"split {extracted_source(local_dir)}: the row store {ROWS_NAME} is unreadable ({e})"
        ) from e
    footer_path = os.path.join(local_dir, FOOTER_FILE)
    with open(footer_path, "rb") as f:
        footer = json.loads(f.read())
    if footer["rows"].get("batchRows") != sizes:
        footer["rows"]["batchRows"] = sizes
        with open(footer_path + ".tmp", "w", encoding="utf-8") as out:
            out.write(json.dumps(footer, ensure_ascii=False))
        os.replace(footer_path + ".tmp", footer_path)
    os.replace(tmp, path)


def extracted_source(local_dir: str) -> str:
    """The URI of the split an extracted directory came from (the directory when unknown)."""
    try:
        with open(os.path.join(local_dir, FOOTER_FILE), "rb") as f:
            return str(json.loads(f.read()).get(EXTRACTED_FROM) or local_dir)
    except (OSError, ValueError):
        return local_dir


def load_extracted_footer(local_dir: str) -> SplitFooter:
    """The footer of an extracted split directory (written by extract)."""
    path = os.path.join(local_dir, FOOTER_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise SplitFormatError(f"split directory {local_dir}: missing {FOOTER_FILE} (not an extracted split)") from None
    # Offsets refer to the bundled file, which is not at hand: skip the range checks (limit "infinite").
    return _parse_footer(data, -1, 1 << 62, local_dir)
