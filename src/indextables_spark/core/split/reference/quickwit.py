"""The reference implementation's split file: a Quickwit split bundle (read side).

IndexTables4Spark writes its splits through tantivy4java as Quickwit bundles (layout decoded from
split files it wrote, and from Quickwit `quickwit-storage/src/split.rs`
`SplitPayloadBuilder`, `bundle_storage.rs` `BundleStorageFileOffsets`,
`quickwit-directories/src/hot_directory.rs`). All integers little-endian:

```
[index files, concatenated][u32 magic 403881646][u32 version 1][JSON {"files": {name: {"start", "end"}}}]
[u32 M = 8 + JSON length][hotcache: u32 magic 2557869106, u32 version 1, ...][u32 C = hotcache length]
```
The AddAction records footerStartOffset = start of the magic (F), footerEndOffset = file size,
hotcacheStartOffset / hotcacheLength (docs/reference/split-format.md, "Reference splits (Quickwit
bundle)"). Everything is parsed from the end and checked before use: a damaged file gives a
SplitFormatError naming it, never a partial index.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from indextables_spark.errors import SplitFormatError

BUNDLE_MAGIC = 403881646  # BundleStorageFileOffsetsVersions magic
BUNDLE_VERSION = 1
HOTCACHE_MAGIC = 2557869106  # HotDirectory's magic
HOTCACHE_VERSION = 1
TANTIVY_FOOTER_MAGIC = 1337  # tantivy `directory/footer.rs`: [JSON {"version", "crc"}][u32 len][u32 magic]
_UNFOOTERED = frozenset({"meta.json", ".managed.json", "split_fields", "_doc_mapping.json"})
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-]*$")  # tantivy names: <uuid>.<ext>, meta.json, .managed.json
_COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class BundleFile:
    name: str
    start: int
    end: int


@dataclass(frozen=True)
class QuickwitBundle:
    files: tuple[BundleFile, ...]
    footer_start: int  # F: where the file offsets section starts (AddAction footerStartOffset)
    hotcache_start: int
    hotcache_length: int
    size: int


def _u32(data: bytes) -> int:
    return int(struct.unpack("<I", data)[0])


def looks_like_bundle(tail: bytes, size: int) -> bool:
    """Cheap test on the file's last bytes (at least 8): the hotcache length fits the file and the
    hotcache starts with its magic when that lies within `tail`."""
    if size < 16 or len(tail) < 8:
        return False
    c = _u32(tail[-4:])
    h = size - 4 - c
    if c < 8 or h < 12:
        return False
    off = h - (size - len(tail))
    if off < 0:
        return True  # the hotcache header is outside what we have: let read_bundle decide
    return _u32(tail[off : off + 4]) == HOTCACHE_MAGIC


def read_bundle(f: BinaryIO, size: int, where: str) -> QuickwitBundle:
    """Parse and check the bundle's offsets table and hotcache framing."""

    def fail(what: str) -> SplitFormatError:
        return SplitFormatError(f"split {where}: {what} (Quickwit split bundle of the reference implementation)")

    def read(start: int, end: int) -> bytes:
        f.seek(start)
        data = f.read(end - start)
        if len(data) != end - start:
            raise fail(f"short read at bytes [{start}, {end})")
        return data

    def versioned(what: str, at: int, magic: int, version: int) -> None:
        """A versioned component's header (Quickwit `VersionedComponent`): u32 magic, u32 version."""
        got_magic, got_version = struct.unpack("<II", read(at, at + 8))
        if got_magic != magic:
            raise fail(f"bad {what} magic {got_magic} at byte {at} (expected {magic}; truncated or not a split?)")
        if got_version != version:
            raise fail(f"unsupported {what} version {got_version} (this reader knows {version})")

    if size < 16:
        raise fail(f"truncated file: {size} bytes")
    c = _u32(read(size - 4, size))
    h = size - 4 - c
    if c < 12 or h < 12:
        raise fail(f"hotcache length {c} does not fit in a {size}-byte file (truncated?)")
    versioned("hotcache", h, HOTCACHE_MAGIC, HOTCACHE_VERSION)
    m = _u32(read(h - 4, h))
    footer_start = h - 4 - m
    if m < 8 or footer_start < 0:
        raise fail(f"file offsets section length {m} does not fit before byte {h - 4}")
    versioned("bundle", footer_start, BUNDLE_MAGIC, BUNDLE_VERSION)
    try:
        table = json.loads(read(footer_start + 8, h - 4).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise fail(f"file offsets table is not valid JSON ({e})") from None
    entries = table.get("files") if isinstance(table, dict) else None
    if not isinstance(entries, dict) or not entries:
        raise fail("file offsets table has no 'files' object")
    files: list[BundleFile] = []
    for name, span in entries.items():
        if not isinstance(name, str) or not _SAFE_FILE.match(name) or name in (".", ".."):
            raise fail(f"file offsets table names an unsafe or invalid file {name!r}")
        start = span.get("start") if isinstance(span, dict) else None
        end = span.get("end") if isinstance(span, dict) else None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
            raise fail(f"file {name!r} has non-integer offsets {span!r}")
        assert isinstance(start, int) and isinstance(end, int)
        if not 0 <= start <= end <= footer_start:
            raise fail(f"file {name!r} spans bytes [{start}, {end}) outside the data section [0, {footer_start})")
        files.append(BundleFile(name, start, end))
    if "meta.json" not in entries:
        raise fail("the bundle has no meta.json (not a Tantivy index)")
    return QuickwitBundle(tuple(sorted(files, key=lambda x: x.start)), footer_start, h, c, size)


def extract_bundle(path: str, dest_dir: str, where: str) -> QuickwitBundle:
    """Write the bundle's index files into dest_dir (created if needed); the hotcache is not needed
    to open the files once they are local."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        bundle = read_bundle(f, size, where)
        os.makedirs(dest_dir, exist_ok=True)
        for bf in bundle.files:
            if bf.name == "split_fields":
                continue  # Quickwit's field list (empty from tantivy4java); not an index file
            with open(os.path.join(dest_dir, bf.name), "wb") as out:
                _copy(f, out, bf, where)
            if bf.name not in _UNFOOTERED:
                check_file_footer(os.path.join(dest_dir, bf.name), f"{where} (bundled file {bf.name})")
    return bundle


def _copy(f: BinaryIO, out: BinaryIO, bf: BundleFile, where: str) -> None:
    """The bundled file's bytes into `out`: kernel-side where the OS can (no Python buffers: a
    79 MB split's files are copied in a fraction of the time), else in chunks."""
    left, pos = bf.end - bf.start, bf.start
    if hasattr(os, "copy_file_range"):
        try:
            while left:
                n = os.copy_file_range(f.fileno(), out.fileno(), left, pos)
                if n == 0:
                    raise SplitFormatError(f"split {where}: file ended inside {bf.name!r}")
                left, pos = left - n, pos + n
            return
        except OSError:  # (a file system without it: the chunked copy from where it stopped)
            out.seek(pos - bf.start)
    f.seek(pos)
    while left:
        chunk = f.read(min(_COPY_CHUNK, left))
        if not chunk:
            raise SplitFormatError(f"split {where}: file ended inside {bf.name!r}")
        out.write(chunk)
        left -= len(chunk)


def check_file_footer(path: str, where: str) -> None:
    """Check a Tantivy index file against the CRC-32 its footer records (every segment file has
    one), so a damaged split fails here instead of returning wrong rows."""

    def fail(what: str) -> SplitFormatError:
        return SplitFormatError(f"split {where}: {what}")

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < 8:
            raise fail(f"{size} bytes, too short for a Tantivy file footer")
        f.seek(size - 8)
        length, magic = struct.unpack("<II", f.read(8))
        if magic != TANTIVY_FOOTER_MAGIC or length + 8 > size:
            raise fail("no Tantivy file footer (truncated or corrupt)")
        f.seek(size - 8 - length)
        try:
            footer = json.loads(f.read(length).decode("utf-8"))
            expected = int(footer["crc"])
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise fail(f"unreadable Tantivy file footer ({type(e).__name__}: {e})") from None
        crc, left = 0, size - 8 - length
        f.seek(0)
        while left:
            chunk = f.read(min(_COPY_CHUNK, left))
            if not chunk:
                raise fail("file ended before its footer")
            crc = zlib.crc32(chunk, crc)
            left -= len(chunk)
    if crc != expected:
        raise fail(f"checksum mismatch (footer says CRC-32 {expected}, the data has {crc}): the file is corrupt")
