"""A reference segment's files made ours without re-indexing (CONVERT, rewrite.py): the `__row`
fast column added to its fast field file, its document store emptied (the rows move to rows.arrow),
and meta.json saying so. Every other byte of the segment stays as the reference wrote it.

Formats, from quickwit-oss/tantivy (the version the `.term` transcoder reads, transcode.py):
- the fast field file is tantivy-columnar (`columnar/src/columnar/writer/serializer.rs`):
  `[columns][column dictionary: RangeSSTable key -> byte range][u64 its length][u32 rows]
  [u32 format version][magic 2 113 119 66]`, then tantivy's footer. A column's key is its name,
  b"\\0" and its type code; the dictionary's ranges follow each other in key order, so the columns
  are laid out again with ours among them;
- a u64 column of full cardinality (`columnar/src/column/serialize.rs`): `[u8 cardinality 0 = full]
  [u8 codec][ColumnStats: VInt min, VInt gcd, VInt (max - min) / gcd, VInt rows][codec data]
  [u32 column index length = 1]`; codec 1 (linear, `column_values/u64_based/linear.rs`: VInt slope
  in 32.32 fixed point, VInt intercept, u8 bit width, bit-packed residuals) holds `base + doc`
  in no bits at all; codec 0 (bit-packed) holds anything else;
- the document store (`src/store/{footer,index/skip_index_builder}.rs`): `[blocks][skip index]
  [u32 store version][u64 skip index offset][u8 compressor][15 zero bytes]`; an empty one is an
  empty skip index (`Vec<VInt>` of no layers: 0x80) at offset 0.
Our readers never read a converted split's document store (its rows are in rows.arrow) and tantivy
opens a store by its footer alone, so the empty store costs ~100 bytes instead of a second copy of
every row.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Mapping, Sequence

import numpy as np

from indextables_spark.core.schema.types import ROW_FIELD
from indextables_spark.core.split.format.composite import COLUMNAR_FOOTER, COLUMNAR_MAGIC, tantivy_footer, vint_bytes
from indextables_spark.core.split.format.composite import with_tantivy_footer
from indextables_spark.core.split.reference.sstable import read_sstable_ranges
from indextables_spark.errors import SplitFormatError

U64_COLUMN = 1  # columnar/src/columnar/column_type.rs ColumnType::U64
FULL = 0  # columnar/src/lib.rs Cardinality::Full
BITPACKED, LINEAR = 0, 1  # columnar/src/column_values/u64_based/mod.rs CodecType
ROW_KEY = ROW_FIELD.encode() + b"\x00" + bytes([U64_COLUMN])
STORE_FOOTER = 28  # src/store/footer.rs DocStoreFooter::SIZE_IN_BYTES
# meta.json's entry of our row id field, as tantivy-py writes it for our splits
ROW_SCHEMA_ENTRY: dict[str, Any] = {
    "name": ROW_FIELD,
    "type": "u64",
    "options": {"indexed": False, "fieldnorms": False, "fast": True, "stored": False},
}


# ---- encodings ------------------------------------------------------------------------------------


def _leb128(value: int) -> bytes:
    """sstable/src/vint.rs: 0x80 on every byte but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _num_bits(value: int) -> int:
    """tantivy-bitpacker compute_num_bits: 57-63 bits are stored as 64."""
    n = value.bit_length()
    return n if n <= 56 else 64


def _bitpacked(values: np.ndarray, bits: int) -> bytes:
    """tantivy-bitpacker BitPacker: each value's low `bits` bits in a little-endian bit stream,
    flushed to whole bytes."""
    if bits == 0 or not len(values):
        return b""
    shifts = np.arange(bits, dtype=np.uint64)
    out = bytearray()
    for start in range(0, len(values), 1 << 16):  # bounded memory: 64k values at a time (a multiple of 8)
        chunk = values[start : start + (1 << 16)].astype(np.uint64)
        stream = ((chunk[:, None] >> shifts) & np.uint64(1)).astype(np.uint8).ravel()
        out += np.packbits(stream, bitorder="little").tobytes()
    return bytes(out[: (len(values) * bits + 7) // 8])


# ---- the row id column -----------------------------------------------------------------------------


def row_id_column(values: np.ndarray) -> bytes:
    """The bytes of a full u64 column holding `values` (one per document), as tantivy reads them:
    linear when they are consecutive, bit-packed otherwise."""
    n = len(values)
    if n == 0:
        raise ValueError("a segment without documents has no row ids")
    lo, hi = int(values.min()), int(values.max())
    stats = vint_bytes(lo) + vint_bytes(1) + vint_bytes(hi - lo) + vint_bytes(n)
    consecutive = n == 1 or bool(np.all(np.diff(values.astype(np.int64)) == 1))
    if consecutive and n < (1 << 31):
        # Line::eval(x) = intercept + ((x * slope) >> 32) = lo + x with slope 1.0 (1 << 32)
        codec = bytes([LINEAR]) + stats + vint_bytes(1 << 32) + vint_bytes(lo) + bytes([0])
    else:
        bits = _num_bits(hi - lo)
        codec = bytes([BITPACKED]) + stats + _bitpacked(values - np.uint64(lo), bits)
    return bytes([FULL]) + codec + struct.pack("<I", 1)


def _range_sstable(entries: Sequence[tuple[bytes, int, int]]) -> bytes:
    """A RangeSSTable of the (key, start, end) entries (keys increasing, each range starting where
    the previous ends) in one uncompressed block: `[u32 payload length + 1][u8 0][values][keys]
    [u32 0]`, no index (one block), `[u64 0][u64 index offset][u64 entries][u32 version 3]`."""
    values = [_leb128(len(entries) + 1), _leb128(entries[0][1])]
    prev = entries[0][1]
    keys = []
    prev_key = b""
    for key, start, end in entries:
        if start != prev or end < start or key <= prev_key:
            raise ValueError("column ranges must follow each other in key order")
        values.append(_leb128(end - prev))
        prev = end
        keep = 0  # keys restart at each block; within it, the common prefix with the previous one
        limit = min(len(prev_key), len(key))
        while keep < limit and prev_key[keep] == key[keep]:
            keep += 1
        add = len(key) - keep
        keys.append(bytes([keep | add << 4]) if keep < 16 and add < 16 else b"\x01" + _leb128(keep) + _leb128(add))
        keys.append(key[keep:])
        prev_key = key
    payload = b"".join(values) + b"".join(keys)
    blocks = struct.pack("<IB", len(payload) + 1, 0) + payload + struct.pack("<I", 0)
    return blocks + struct.pack("<QQQI", 0, len(blocks), len(entries), 3)


def with_row_ids(data: bytes, row_ids: np.ndarray, where: str) -> bytes:
    """A segment's fast field file `data` with our `__row` column of `row_ids` (one per document)
    added, the other columns' bytes as they were."""

    def fail(what: str) -> SplitFormatError:
        return SplitFormatError(f"split {where}: its fast field file {what}")

    try:
        body_end, footer_json = tantivy_footer(data)
    except ValueError as e:
        raise fail(f"has no tantivy footer ({e})") from None
    if body_end < COLUMNAR_FOOTER or data[body_end - 4 : body_end] != COLUMNAR_MAGIC:
        raise fail("is not a tantivy-columnar file")
    dict_len, num_docs = struct.unpack_from("<QI", data, body_end - COLUMNAR_FOOTER)
    version_and_magic = data[body_end - 8 : body_end]
    dict_start = body_end - COLUMNAR_FOOTER - int(dict_len)
    if dict_start < 0:
        raise fail("has a column dictionary longer than itself")
    if num_docs != len(row_ids):
        raise fail(f"holds {num_docs} documents, the segment {len(row_ids)}")
    columns = read_sstable_ranges(data[dict_start : body_end - COLUMNAR_FOOTER], where, "fast field columns")
    if any(key == ROW_KEY for key, _, _ in columns):
        raise fail(f"already has a {ROW_FIELD!r} column")
    if any(not 0 <= s <= e <= dict_start for _, s, e in columns):
        raise fail("has a column outside its data")
    parts: list[tuple[bytes, bytes]] = [(k, data[s:e]) for k, s, e in columns]
    parts.append((ROW_KEY, row_id_column(row_ids)))
    parts.sort(key=lambda p: p[0])
    entries = []
    offset = 0
    for key, blob in parts:
        entries.append((key, offset, offset + len(blob)))
        offset += len(blob)
    dictionary = _range_sstable(entries)
    body = b"".join(
        [*(blob for _, blob in parts), dictionary, struct.pack("<QI", len(dictionary), num_docs), version_and_magic]
    )
    return with_tantivy_footer(body, footer_json)


# ---- the document store and meta.json ----------------------------------------------------------------


def empty_store(data: bytes, where: str) -> bytes:
    """A document store holding no document, with `data`'s (a store tantivy wrote) version and
    compressor: what tantivy needs to open the segment."""
    try:
        body_end, footer_json = tantivy_footer(data)
    except ValueError as e:
        raise SplitFormatError(f"split {where}: its document store has no tantivy footer ({e})") from None
    if body_end < STORE_FOOTER:
        raise SplitFormatError(f"split {where}: its document store is too short ({body_end} bytes)")
    (version,) = struct.unpack_from("<I", data, body_end - STORE_FOOTER)
    compressor = data[body_end - STORE_FOOTER + 12]
    body = b"\x80" + struct.pack("<IQB", version, 0, compressor) + bytes(15)
    return with_tantivy_footer(body, footer_json)


def converted_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """meta.json of the converted index: no field stored (the rows are in rows.arrow), and our
    `__row` field last (the other fields keep their ids, which the segment files are keyed by).
    Tokenizer names stay the reference's (the split footer says which analyzers they stand for)."""
    out = json.loads(json.dumps(meta))  # a deep copy
    schema = out["schema"]
    if any(f.get("name") == ROW_FIELD for f in schema):
        raise ValueError(f"the reference's schema has a field named {ROW_FIELD!r}")
    for f in schema:
        options = f.get("options") or {}
        options["stored"] = False
    schema.append(json.loads(json.dumps(ROW_SCHEMA_ENTRY)))
    return dict(out)
