"""Tantivy's composite files (.term/.idx/.pos/.fieldnorm): where each field's section lies; and
what opening the fast field file (.fast) reads.

A composite file is `[field sections][offset table][u32 table length]` followed by the footer
tantivy appends to every segment file (`[version JSON][u32 JSON length][u32 magic 1337]`); the
offset table is `VInt n` then n x `(VInt offset delta, u32 field id, VInt idx)`, each offset the
start of a section, a section ending where the next begins (the last at the table).

The fast field file is a columnar (tantivy-columnar) followed by that footer: `[columns][column
dictionary (an sstable)][u64 dictionary length][u32 rows][u32 format version][magic 2 113 119 66]`.
Opening a segment reads the dictionary and what follows it, a column only when it is read.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

TANTIVY_FOOTER_MAGIC = 1337
# The u32 a `.term` section (one field's term dictionary) ends with (quickwit-oss/tantivy
# src/termdict/mod.rs DictionaryType): tantivy-py reads FST ones, the reference writes SSTable ones.
DICT_TYPE_FST, DICT_TYPE_SSTABLE = 1, 2
SECTIONED = ("term", "idx", "pos")  # composite files a query reads field by field
TAIL_BYTES = 4 << 10  # one read usually holds a composite file's offset table and tantivy footer
INDEX_SECTIONS = "indexSections"  # split footer key (bundle.py): the sections of each such file

Range = tuple[int, int]  # [start, end)


def sectioned(name: str) -> bool:
    return "." in name and name.rsplit(".", 1)[-1] in SECTIONED


def _vint(buf: bytes, i: int) -> tuple[int, int]:
    """Tantivy's VInt: 7 bits a byte, least significant first, the last byte has bit 0x80 set."""
    value = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated VInt")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b & 0x80:
            return value, i
        if shift > 63:
            raise ValueError("VInt too long")


def _table_start(length: int, tail: bytes) -> int:
    """Where a composite file's offset table starts (file offset), from the file's last bytes."""
    if len(tail) < 12:
        raise ValueError("too short")
    json_len, magic = (int(x) for x in struct.unpack("<II", tail[-8:]))
    if magic != TANTIVY_FOOTER_MAGIC:
        raise ValueError("no tantivy footer")
    body_end = length - 8 - json_len
    if body_end < 4:
        raise ValueError("footer longer than the file")
    return body_end - 4


def _offset_table(buf: bytes) -> list[tuple[int, int, int]]:
    """A composite file's offset table (the bytes between the sections and the u32 table length):
    (field id, idx, section start) of each entry, in file order."""
    n, i = _vint(buf, 0)
    entries: list[tuple[int, int, int]] = []
    offset = 0
    for _ in range(n):
        delta, i = _vint(buf, i)
        offset += delta
        if i + 4 > len(buf):
            raise ValueError("truncated offset table")
        (field,) = struct.unpack_from("<I", buf, i)
        idx, i = _vint(buf, i + 4)
        entries.append((int(field), idx, offset))
    if i != len(buf):
        raise ValueError("trailing bytes in the offset table")
    return entries


def read_tail(f: BinaryIO, length: int) -> bytes:
    """The last bytes of the open composite file `f` (`length` bytes) that hold its offset table
    and footer (needed_tail): one read of TAIL_BYTES, a second only when the table is longer."""
    f.seek(max(0, length - TAIL_BYTES))
    tail = f.read()
    need = needed_tail(length, tail)
    if need > len(tail):
        f.seek(length - need)
        tail = f.read()
    return tail


def composite_sections(length: int, tail: bytes, num_fields: int) -> dict[int, Range]:
    """Field id -> [start, end) of its section in a composite file of `length` bytes whose last
    len(tail) bytes are `tail` (holding the offset table: see needed_tail)."""
    t0 = length - len(tail)
    table_end = _table_start(length, tail)  # the u32 table length sits at [table_end, table_end + 4)
    if table_end < t0:
        raise ValueError("tail too short")
    (table_len,) = struct.unpack("<I", tail[table_end - t0 : table_end - t0 + 4])
    table_start = table_end - table_len
    if table_start < t0:
        raise ValueError("tail too short")
    offsets: list[int] = []
    ids: list[int] = []
    for field, idx, offset in _offset_table(tail[table_start - t0 : table_end - t0]):
        if idx != 0 or field >= num_fields or field in ids:
            raise ValueError("unexpected entry")
        offsets.append(offset)
        ids.append(field)
    offsets.append(table_start)
    if any(b < a for a, b in zip(offsets, offsets[1:])):
        raise ValueError("offsets out of order")
    return {f: (offsets[k], offsets[k + 1]) for k, f in enumerate(ids)}


def needed_tail(length: int, tail: bytes) -> int:
    """How many last bytes of a composite file hold its offset table and footer."""
    t0 = length - len(tail)
    table_end = _table_start(length, tail)
    if table_end < t0:
        return length - table_end + 4
    table_len = int(struct.unpack("<I", tail[table_end - t0 : table_end - t0 + 4])[0])
    return length - (table_end - table_len)


COLUMNAR_MAGIC = bytes([2, 113, 119, 66])
COLUMNAR_FOOTER = 8 + 4 + 4 + 4  # dictionary length, rows, format version, magic


def columnar_tail(length: int, tail: bytes) -> int:
    """How many last bytes of a fast field file of `length` bytes (its last len(tail) bytes are
    `tail`) opening it reads: its column dictionary and footers (more than len(tail) when the
    dictionary starts before the tail)."""
    body_end = _table_start(length, tail) + 4  # where the tantivy footer starts
    t0 = length - len(tail)
    if body_end - COLUMNAR_FOOTER < t0:
        raise ValueError("tail too short")
    footer = tail[body_end - COLUMNAR_FOOTER - t0 : body_end - t0]
    if footer[-4:] != COLUMNAR_MAGIC:
        raise ValueError("no columnar footer")
    (dictionary_len,) = struct.unpack("<Q", footer[:8])
    start = body_end - COLUMNAR_FOOTER - int(dictionary_len)
    if start < 0:
        raise ValueError("column dictionary longer than the file")
    return length - start


def columnar_dictionary(tail: bytes) -> bytes:
    """The column dictionary of a fast field file whose last bytes are `tail` (at least the
    columnar_tail of it): an SSTable of `column name, 0, type code` -> the column's [start, end)
    in the file (reference/sstable.py `read_sstable_ranges` reads it)."""
    body_end = _table_start(len(tail), tail) + 4
    (dictionary_len,) = struct.unpack_from("<Q", tail, body_end - COLUMNAR_FOOTER)
    start = body_end - COLUMNAR_FOOTER - int(dictionary_len)
    if start < 0:
        raise ValueError("tail too short")
    return tail[start : body_end - COLUMNAR_FOOTER]


STORE_FOOTER = 4 + 8 + 1 + 15  # DocStoreFooter: u32 version, u64 skip index offset, u8 compressor, 15 zero bytes


def store_tail(length: int, tail: bytes) -> int:
    """How many last bytes of a doc store file (`.store`) of `length` bytes (its last len(tail)
    bytes are `tail`) opening it reads: its skip index and footers (quickwit-oss/tantivy
    `src/store/footer.rs` DocStoreFooter, then tantivy's footer); the blocks before it are read
    only by a document fetch."""
    body_end = _table_start(length, tail) + 4
    t0 = length - len(tail)
    if body_end - STORE_FOOTER < t0:
        raise ValueError("tail too short")
    footer = tail[body_end - STORE_FOOTER - t0 : body_end - t0]
    version, offset = struct.unpack_from("<IQ", footer, 0)
    if version not in (1, 2) or any(footer[13:]) or not 0 <= offset <= body_end - STORE_FOOTER:
        raise ValueError("not a doc store footer")
    return int(length - offset)


def index_sections(index_dir: str, names: list[str]) -> dict[str, Any] | None:
    """The split footer's `indexSections` for the index files `names` of index_dir: the field
    names of the schema (meta.json, in field id order) and, per sectioned file, where its offset
    table starts and each field's section; None when a file does not parse."""
    try:
        with open(os.path.join(index_dir, "meta.json"), "rb") as f:
            fields = [x["name"] for x in json.loads(f.read())["schema"]]
        files: dict[str, Any] = {}
        for name in names:
            if not sectioned(name):
                continue
            path = os.path.join(index_dir, name)
            length = os.path.getsize(path)
            with open(path, "rb") as f:
                tail = read_tail(f, length)
            secs = composite_sections(length, tail, len(fields))
            files[name] = {
                "tail": length - needed_tail(length, tail),
                "sections": {str(k): list(v) for k, v in secs.items()},
            }
        return {"fields": fields, "files": files}
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


@dataclass(frozen=True)
class CompositeEntry:
    """One section of a composite file: tantivy's FileAddr (field id, idx) and its [start, end)."""

    field: int
    idx: int
    start: int
    end: int


def composite_layout(data: bytes) -> tuple[list[CompositeEntry], bytes]:
    """A whole composite file's sections in file order and its tantivy footer's JSON (quickwit-oss/
    tantivy `src/directory/composite_file.rs` `CompositeFile::open`, `src/directory/footer.rs`);
    ValueError when it does not parse."""
    table_end = _table_start(len(data), data)
    (table_len,) = struct.unpack_from("<I", data, table_end)
    table_start = table_end - table_len
    if table_start < 0:
        raise ValueError("offset table longer than the file")
    entries: list[CompositeEntry] = []
    starts = _offset_table(data[table_start:table_end])
    if len({(f, x) for f, x, _ in starts}) != len(starts):
        raise ValueError("a section named twice")
    for k, (field, idx, start) in enumerate(starts):
        end = starts[k + 1][2] if k + 1 < len(starts) else table_start
        if end < start:
            raise ValueError("offsets out of order")
        entries.append(CompositeEntry(field, idx, start, end))
    (json_len,) = struct.unpack_from("<I", data, len(data) - 8)
    return entries, data[len(data) - 8 - json_len : len(data) - 8]


def composite_file(sections: Sequence[tuple[int, int, bytes]], footer_json: bytes) -> bytes:
    """A composite file of the (field id, idx, bytes) sections in this order, as tantivy's
    `CompositeWrite::close` writes it, then tantivy's footer: `footer_json` (an existing footer's
    JSON, its version kept) with the CRC-32 of everything before it (crc32fast: zlib's CRC-32)."""
    table = [vint_bytes(len(sections))]
    offset = prev = 0
    for field, idx, body in sections:
        table += [vint_bytes(offset - prev), struct.pack("<I", field), vint_bytes(idx)]
        prev = offset
        offset += len(body)
    table_bytes = b"".join(table)
    body = b"".join([*(s for _, _, s in sections), table_bytes, struct.pack("<I", len(table_bytes))])
    return with_tantivy_footer(body, footer_json)


def tantivy_footer(data: bytes) -> tuple[int, bytes]:
    """(where the footer starts, its JSON) of a tantivy segment file (`src/directory/footer.rs`:
    `[body][version JSON with the body's CRC-32][u32 JSON length][u32 magic 1337]`); ValueError
    when it has none."""
    if len(data) < 8:
        raise ValueError("too short for a tantivy footer")
    json_len, magic = struct.unpack_from("<II", data, len(data) - 8)
    if magic != TANTIVY_FOOTER_MAGIC or json_len > len(data) - 8:
        raise ValueError("no tantivy footer")
    body_end = len(data) - 8 - json_len
    return body_end, bytes(data[body_end : len(data) - 8])


def with_tantivy_footer(body: bytes, footer_json: bytes) -> bytes:
    """`body` and tantivy's footer: `footer_json` (an existing footer's JSON, its version kept)
    with the CRC-32 of `body` (crc32fast: zlib's CRC-32)."""
    footer = json.loads(footer_json)
    if not isinstance(footer, dict) or "crc" not in footer or _footer_json(footer) != footer_json:
        raise ValueError("the footer JSON is not tantivy's")
    footer["crc"] = zlib.crc32(body)
    new_json = _footer_json(footer)
    return b"".join((body, new_json, struct.pack("<II", len(new_json), TANTIVY_FOOTER_MAGIC)))


def footer_crc_ok(data: bytes) -> bool:
    """Whether a tantivy file's footer CRC-32 matches the bytes before the footer."""
    (json_len,) = struct.unpack_from("<I", data, len(data) - 8)
    body_end = len(data) - 8 - json_len
    return bool(zlib.crc32(memoryview(data)[:body_end]) == json.loads(data[body_end : len(data) - 8])["crc"])


def _footer_json(footer: dict[str, Any]) -> bytes:
    """serde_json's compact form (tantivy's footer: struct fields in order, no spaces)."""
    return json.dumps(footer, separators=(",", ":")).encode()


def vint_bytes(value: int) -> bytes:
    """Tantivy's VInt (see _vint)."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F)
        value >>= 7
    out.append(value | 0x80)
    return bytes(out)
