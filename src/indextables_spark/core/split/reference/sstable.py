"""Reader of tantivy's SSTable term dictionary: what the reference (tantivy with the `quickwit`
feature) writes for each field in the `.term` file, where tantivy-py expects an FST dictionary.

Layout (quickwit-oss/tantivy `sstable/src/lib.rs` `Writer`, `sstable/src/delta.rs` `DeltaWriter`,
`sstable/src/block_reader.rs`, `sstable/src/index/{mod,v3}.rs`, values from
`src/termdict/sstable_termdict/mod.rs` `TermInfoValueWriter`; unchanged from the v3 index, Dec 2023,
to the newest tantivy checked, Jul 2026), all integers little-endian:

```
blocks:  [u32 L][u8 compressed][L - 1 bytes: zstd frame if compressed = 1]   (L counts the flag)
         payload = [VInt n][VInt postings start][VInt positions start]
                   n x [VInt doc_freq][VInt postings length][VInt positions length]
                   n x [keep | add << 4, or 0x01 LEB128 keep LEB128 add][add bytes of key]
end:     [u32 0]
index:   [FST last key (or a shorter separator) -> block id][block address store][u64 FST length]
         (FST length 0 and nothing else: a single block, no index)
footer:  [u64 index offset][u64 number of terms][u32 version 3]
```
VInt here is tantivy's `common::VInt` (the last byte has bit 0x80 set); the keep/add LEB128 is
`sstable/src/vint.rs` (bit 0x80 = more bytes follow). Every block starts a fresh key (keep 0):
tantivy reads a block alone once the index has found it.

Everything the format says is checked, the index against the blocks it indexes (tantivy trusts
it for lookups, this reader reads the blocks in order): a dictionary that breaks the format raises
SplitFormatError naming the split and the field. The format has no checksum of its own (nor do
tantivy's zstd frames): a changed byte that still makes a well-formed dictionary (a key's byte, a
length; measured: 4% of random bit flips) is caught by the `.term` file's CRC-32, which
transcode.transcode_term_file checks before using what this reader returns.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ducer
import numpy as np
import zstandard

from indextables_spark.core.split.reference.terms import TermColumns
from indextables_spark.errors import SplitFormatError

SSTABLE_VERSION = 3  # quickwit-oss/tantivy sstable/src/lib.rs SSTABLE_VERSION
INDEX_FST_VERSION = 2  # tantivy-fst (the `fst` crate's format 2) reads nothing newer
_FOOTER = struct.Struct("<QQI")  # index offset, number of terms, version
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_VINT_MODE = 1  # sstable/src/delta.rs VINT_MODE: keep and add follow as LEB128
_MAX_BLOCK = 64 << 20  # bound on a decompressed block when its frame does not say its size
_STORE_BLOCK_LEN = 128  # sstable/src/index/v3.rs STORE_BLOCK_LEN: block addresses per store block
# sstable/src/index/v3.rs BlockAddrBlockMetadata: offset, ref block start, ref first ordinal,
# range start slope, first ordinal slope, first ordinal bits, range start bits, block_len (count - 1)
_STORE_META = struct.Struct("<QQQIIBBH")
_U32_MAX = 0xFFFFFFFF

Fail = Callable[[str], SplitFormatError]


Decode = Callable[[bytes, int, "bytes | None"], "tuple[int, bytes, bytes]"]


@dataclass(frozen=True, slots=True)
class Block:
    """One block as read: [start, end) in the dictionary (its u32 length included), its first
    term's ordinal, how many terms it holds, its first and last keys."""

    start: int
    end: int
    first_ordinal: int
    count: int
    first_key: bytes
    last_key: bytes


def read_sstable_terms(data: bytes, where: str, field: str) -> TermColumns:
    """The terms of one field's SSTable term dictionary `data` (the field's `.term` section without
    its trailing u32 dictionary type), in key order. `where` names the split, `field` the field."""
    fail = _failer(where, field, "SSTable term dictionary")
    keys: list[bytes] = []
    doc_freqs: list[Any] = []
    postings: list[Any] = [np.zeros(1, dtype=np.uint64)]
    positions: list[Any] = [np.zeros(1, dtype=np.uint64)]

    def decode(payload: bytes, at: int, prev: bytes | None) -> tuple[int, bytes, bytes]:
        n, i, (p_start, q_start, dfs, p_ends, q_ends) = _term_infos(payload, at, fail)
        if not keys:
            postings[0][0], positions[0][0] = p_start, q_start
        elif (p_start, q_start) != (int(postings[-1][-1]), int(positions[-1][-1])):
            raise fail(
                f"block at byte {at}: postings/positions start at {p_start}/{q_start}, not where the "
                f"previous term's end ({postings[-1][-1]}/{positions[-1][-1]}): not contiguous"
            )
        doc_freqs.append(dfs)
        postings.append(p_ends)
        positions.append(q_ends)
        return _keys(payload, i, n, at, prev, keys, fail)

    _read(data, fail, decode)
    return TermColumns(
        keys,
        np.concatenate(doc_freqs) if doc_freqs else np.zeros(0, dtype=np.uint64),
        np.concatenate(postings),
        np.concatenate(positions),
    )


def read_sstable_keys(data: bytes, where: str, what: str) -> list[bytes]:
    """The keys of an SSTable without values (tantivy's `VoidSSTable`, e.g. the dictionary of a
    tantivy-columnar string column), checked the same way; `what` names the dictionary."""
    fail = _failer(where, what, "SSTable")
    keys: list[bytes] = []

    def decode(payload: bytes, at: int, prev: bytes | None) -> tuple[int, bytes, bytes]:
        return _keys(payload, 0, None, at, prev, keys, fail)

    _read(data, fail, decode)
    return keys


def read_sstable_ranges(data: bytes, where: str, what: str) -> list[tuple[bytes, int, int]]:
    """(key, start, end) of each entry of a tantivy `RangeSSTable` (the column dictionary of a
    tantivy-columnar fast field file: column key -> its bytes), checked the same way. Its values
    (sstable/src/value/range.rs RangeValueWriter) are, per block, LEB128 n + 1 then the deltas of
    [first start, end, end, ...]: a block's ranges follow each other."""
    fail = _failer(where, what, "SSTable")
    keys: list[bytes] = []
    ranges: list[tuple[int, int]] = []

    def decode(payload: bytes, at: int, prev: bytes | None) -> tuple[int, bytes, bytes]:
        n, i = _leb128(payload, 0)
        bounds = []
        value = 0
        for _ in range(n):
            delta, i = _leb128(payload, i)
            value += delta
            bounds.append(value)
        if n < 2:
            raise fail(f"block at byte {at}: {n} range bounds")
        ranges.extend(zip(bounds, bounds[1:]))
        return _keys(payload, i, n - 1, at, prev, keys, fail)

    _read(data, fail, decode)
    return [(k, a, b) for k, (a, b) in zip(keys, ranges)]


def _failer(where: str, field: str, what: str) -> Fail:
    def fail(problem: str) -> SplitFormatError:
        return SplitFormatError(f"split {where}: field {field!r}: {what}: {problem}")

    return fail


def _read(data: bytes, fail: Fail, decode: Decode) -> None:
    """Read the footer and the blocks (decode(payload, block start, previous key) -> (terms in it,
    first key, last key)) and check the index against the blocks."""
    size = len(data)
    if size < _FOOTER.size + 4 + 8:
        raise fail(f"{size} bytes, too short for an SSTable (truncated?)")
    index_offset, num_terms, version = _FOOTER.unpack_from(data, size - _FOOTER.size)
    if version != SSTABLE_VERSION:
        raise fail(f"SSTable version {version}, this reader knows {SSTABLE_VERSION}")
    if not 4 <= index_offset <= size - _FOOTER.size - 8:
        raise fail(f"index offset {index_offset} outside the {size}-byte dictionary (truncated?)")
    blocks = _blocks(data, index_offset, fail, decode)
    read = blocks[-1].first_ordinal + blocks[-1].count if blocks else 0
    if read != num_terms:
        raise fail(f"the blocks hold {read} terms, the footer says {num_terms}")
    _check_index(data[index_offset : size - _FOOTER.size], blocks, fail)


def _blocks(data: bytes, end: int, fail: Fail, decode: Decode) -> list[Block]:
    """The blocks in [0, end), which must close with the empty end block right before the index."""
    blocks: list[Block] = []
    dctx = zstandard.ZstdDecompressor()
    pos = ordinal = 0
    prev: bytes | None = None
    while True:
        if pos + 4 > end:
            raise fail(f"no end-of-blocks marker before the index at byte {end} (truncated?)")
        (length,) = _U32.unpack_from(data, pos)
        if length == 0:
            if pos + 4 != end:
                raise fail(f"the end-of-blocks marker at byte {pos} is not where the index starts ({end})")
            return blocks
        if length < 2 or pos + 4 + length > end:
            raise fail(f"block at byte {pos} of {length} bytes does not fit before the index at byte {end}")
        flag = data[pos + 4]
        payload = data[pos + 5 : pos + 4 + length]
        if flag == 1:
            try:
                payload = dctx.decompress(payload, max_output_size=_MAX_BLOCK, allow_extra_data=False)
            except zstandard.ZstdError as e:
                raise fail(f"block at byte {pos}: bad zstd frame ({e})") from None
        elif flag != 0:
            raise fail(f"block at byte {pos}: compression flag {flag} (0 or 1 expected)")
        try:
            count, first, prev = decode(payload, pos, prev)
        except (IndexError, ValueError) as e:
            raise fail(f"block at byte {pos}: truncated or malformed ({e or type(e).__name__})") from None
        blocks.append(Block(pos, pos + 4 + length, ordinal, count, first, prev))
        ordinal += count
        pos += 4 + length


def _term_infos(payload: bytes, at: int, fail: Fail) -> tuple[int, int, tuple[int, int, Any, Any, Any]]:
    """A block's TermInfos (TermInfoValueReader::load): n, the offset of its keys, and (postings
    start, positions start, doc_freqs, postings ends, positions ends), the last three numpy arrays.
    Decoded with numpy: a VInt ends at each byte with 0x80 set, and the 3n + 3 VInts come first."""
    arr = np.frombuffer(payload, dtype=np.uint8)
    stops = np.flatnonzero(arr & 0x80)
    if not len(stops) or stops[0] > 8:
        raise fail(f"block at byte {at}: no term count")
    first = int(stops[0])
    n = _vint_value(arr, 0, first)
    if n == 0 or len(stops) < 3 + 3 * n:
        raise fail(f"block at byte {at}: {n} terms do not fit its {len(payload)} bytes (truncated?)")
    stops = stops[1 : 3 + 3 * n]
    starts = np.empty_like(stops)
    starts[0] = first + 1
    starts[1:] = stops[:-1] + 1
    lengths = stops - starts + 1
    longest = int(lengths.max())
    if longest > 9:  # 63 bits; no offset or count comes near
        raise fail(f"block at byte {at}: a VInt of {longest} bytes")
    values = (arr[stops] & 0x7F).astype(np.uint64) << (7 * (lengths - 1)).astype(np.uint64)
    for k in range(longest - 1):
        longer = lengths > k + 1
        values[longer] |= (arr[starts[longer] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    p_start, q_start = int(values[0]), int(values[1])
    triples = values[2:].reshape(n, 3)
    doc_freqs = triples[:, 0]
    if int(doc_freqs.max()) > _U32_MAX:
        raise fail(f"block at byte {at}: a document frequency over 2^32")
    p_ends = np.cumsum(triples[:, 1]) + np.uint64(p_start)
    q_ends = np.cumsum(triples[:, 2]) + np.uint64(q_start)
    # uint64 wraps silently: the ends must be what Python's integers say
    if int(p_ends[-1]) != p_start + sum(triples[:, 1].tolist()) or int(q_ends[-1]) != q_start + sum(
        triples[:, 2].tolist()
    ):
        raise fail(f"block at byte {at}: postings or positions offsets beyond 2^64")
    return n, int(stops[-1]) + 1, (p_start, q_start, doc_freqs, p_ends, q_ends)


def _vint_value(arr: np.ndarray, start: int, stop: int) -> int:
    """The VInt in arr[start : stop + 1] (its last byte at stop)."""
    value = 0
    for k in range(stop, start - 1, -1):
        value = (value << 7) | (int(arr[k]) & 0x7F)
    return value


def _leb128(buf: bytes, i: int) -> tuple[int, int]:
    """sstable/src/vint.rs: 7 bits a byte, low first, 0x80 = more bytes follow."""
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("a key length longer than 10 bytes")


def _keys(
    buf: bytes, i: int, n: int | None, at: int, prev: bytes | None, keys: list[bytes], fail: Fail
) -> tuple[int, bytes, bytes]:
    """Decode the keys of a block from buf[i:] to its end into keys (n of them when n is given);
    returns (count, first key, last key). Keys must increase strictly, across blocks too."""
    end = len(buf)
    start = len(keys)
    append = keys.append
    if i >= end:
        raise fail(f"block at byte {at} holds no key")
    # the first key: a block starts afresh (keep 0), and it must follow the previous block's last
    b = buf[i]
    if b == _VINT_MODE:
        keep, i = _leb128(buf, i + 1)
        add, i = _leb128(buf, i)
    else:
        keep, add, i = b & 15, b >> 4, i + 1
    if keep:
        raise fail(f"block at byte {at}: its first key keeps {keep} bytes of a previous key")
    key = buf[i : i + add]
    i += add
    if i > end or (prev is not None and key <= prev):
        raise fail(f"block at byte {at}: first key truncated or not after the previous block's last")
    append(key)
    size = add
    while i < end:
        b = buf[i]
        if b == _VINT_MODE:
            keep, i = _leb128(buf, i + 1)
            add, i = _leb128(buf, i)
        else:
            keep = b & 15
            add = b >> 4
            i += 1
        if keep > size:
            raise fail(f"block at byte {at}: key {len(keys) - start} keeps {keep} bytes of a {size}-byte key")
        nxt = key[:keep] + buf[i : i + add]
        if nxt <= key:
            raise fail(f"block at byte {at}: keys out of order ({key[:40]!r} then {nxt[:40]!r})")
        append(nxt)
        key = nxt
        size = keep + add
        i += add
    if i != end:
        raise fail(f"block at byte {at}: its last key runs past the block's end")
    count = len(keys) - start
    if n is not None and count != n:
        raise fail(f"block at byte {at} holds {count} keys for {n} term infos")
    return count, keys[start], key


def _check_index(index: bytes, blocks: list[Block], fail: Fail) -> None:
    """The index must be what tantivy's writer makes of these blocks (sstable/src/index/mod.rs
    `SSTableIndexBuilder::serialize`): nothing but a zero FST length for at most one block; else an
    FST mapping to each block id a key k with last key <= k < the next block's first key (what
    `locate_with_key` needs), and a block address store giving each block's byte range and first
    ordinal."""
    (fst_len,) = _U64.unpack_from(index, len(index) - 8)
    if fst_len == 0:
        if len(index) != 8 or len(blocks) > 1:
            raise fail(f"the index says one block, there are {len(blocks)} and {len(index) - 8} index bytes")
        return
    if len(blocks) < 2:
        raise fail("an index of blocks for a single block (tantivy writes none)")
    if fst_len > len(index) - 16:
        raise fail(f"index FST length {fst_len} does not fit the {len(index)}-byte index")
    items = _fst_items(index[:fst_len], fail)
    if len(items) != len(blocks):
        raise fail(f"the index names {len(items)} blocks, there are {len(blocks)}")
    for i, ((key, block_id), block) in enumerate(zip(items, blocks)):
        if block_id != i:
            raise fail(f"the index's entry {i} points at block {block_id}")
        if key < block.last_key or (i + 1 < len(blocks) and key >= blocks[i + 1].first_key):
            raise fail(f"the index's key for block {i} does not separate it from the next block")
    addrs = _block_addrs(index[fst_len:-8], len(blocks), fail)
    for i, (addr, block) in enumerate(zip(addrs, blocks)):
        if addr != (block.start, block.end, block.first_ordinal):
            raise fail(
                f"the index puts block {i} at bytes [{addr[0]}, {addr[1]}) from term {addr[2]}, "
                f"it is at [{block.start}, {block.end}) from term {block.first_ordinal}"
            )


def _fst_items(fst: bytes, fail: Fail) -> list[tuple[bytes, int]]:
    """The (key, value) pairs of a tantivy-fst map (the `fst` crate's format 2), read with ducer
    (which wraps the `fst` crate 0.4). Given as format 3, which is format 2 and a CRC-32C that
    opening does not check: the `fst` crate refuses a map shorter than 36 bytes whatever its
    format, and a format 2 map of a key or two is 35."""
    if len(fst) < 32 or _U64.unpack_from(fst, 0)[0] != INDEX_FST_VERSION:
        raise fail(f"the index FST is not an FST of format {INDEX_FST_VERSION}")
    as_v3 = struct.pack("<Q", 3) + fst[8:] + bytes(4)
    try:
        return [(bytes(k), int(v)) for k, v in ducer.Map(as_v3).items()]
    except Exception as e:
        raise fail(f"unreadable index FST ({e})") from None
    except BaseException as e:  # a Rust panic inside ducer (pyo3's PanicException is a BaseException)
        if type(e).__name__ != "PanicException":
            raise
        raise fail(f"unreadable index FST ({e})") from None


def _block_addrs(store: bytes, count: int, fail: Fail) -> list[tuple[int, int, int]]:
    """(start, end, first ordinal) of each of `count` blocks from a block address store
    (sstable/src/index/v3.rs `BlockAddrStore`, `BlockAddrBlockMetadata::deserialize_block_addr`):
    [u64 metas length][one meta per 128 blocks][bit-packed addresses]; each meta holds its first
    block's start and ordinal, and the others are `slope * j + packed - 2^(bits - 1)` from them
    (the end of the last is stored after them)."""
    if len(store) < 8:
        raise fail("the index's block address store is truncated")
    (metas_len,) = _U64.unpack_from(store, 0)
    metas_count = -(-count // _STORE_BLOCK_LEN)
    if metas_len != metas_count * _STORE_META.size or 8 + metas_len > len(store):
        raise fail(f"the index's block address store has {metas_len} bytes of metas for {count} blocks")
    packed = store[8 + metas_len :]
    out: list[tuple[int, int, int]] = []
    offset = 0
    for m in range(metas_count):
        at, start, ordinal, r_slope, o_slope, o_bits, r_bits, block_len = _STORE_META.unpack_from(store, 8 + m * 36)
        n = min(_STORE_BLOCK_LEN, count - m * _STORE_BLOCK_LEN)
        if block_len != n - 1 or at != offset or not (1 <= r_bits <= 56 and 1 <= o_bits <= 56):
            raise fail(f"the index's block address store meta {m} is inconsistent")
        width = r_bits + o_bits
        size = (block_len * width + r_bits + 7) // 8
        if at + size > len(packed):
            raise fail(f"the index's block address store is truncated (meta {m})")
        bits = int.from_bytes(packed[at : at + size], "little")
        r_mask, o_mask, r_shift, o_shift = (1 << r_bits) - 1, (1 << o_bits) - 1, 1 << (r_bits - 1), 1 << (o_bits - 1)
        starts, ordinals = [start], [ordinal]
        for j in range(1, n):
            word = bits >> ((j - 1) * width)
            starts.append(start + (word & r_mask) + r_slope * j - r_shift)
            ordinals.append(ordinal + ((word >> r_bits) & o_mask) + o_slope * j - o_shift)
        starts.append(start + ((bits >> (block_len * width)) & r_mask) + r_slope * n - r_shift)
        out.extend((starts[j], starts[j + 1], ordinals[j]) for j in range(n))
        offset = at + size
    if offset != len(packed):
        raise fail(f"{len(packed) - offset} bytes after the index's block addresses")
    return out
