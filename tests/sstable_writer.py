"""Test code: an SSTable term dictionary writer and an FST term dictionary reader of their own, to
make reference-like `.term` files from tantivy-py's (the reverse of the product's transcoder,
src/indextables_spark/core/split/reference/transcode.py, whose SSTable reader this must not share).

Written from quickwit-oss/tantivy's sources, as tantivy with the `quickwit` feature writes:
- `sstable/src/lib.rs` `Writer` and `sstable/src/delta.rs` `DeltaWriter`: a block is flushed once
  its keys take more than 4,000 bytes (BLOCK_LEN); its payload is [values][keys], zstd level 3 when
  longer than 2,048 bytes and the frame is shorter; [u32 payload length + 1][u8 compressed][payload];
  keys restart (keep 0) at each block; then [u32 0], the index, [u64 index offset][u64 terms][u32 3];
- `sstable/src/index/mod.rs` `SSTableIndexBuilder` (each block's last key shortened toward the next
  block's first, an FST of them -> block id; no index for one block) and `index/v3.rs`
  `BlockAddrStoreWriter` (128 block addresses per meta, linear prediction + bit-packed errors);
- `src/termdict/sstable_termdict/mod.rs` `TermInfoValueWriter` (the values).
The FST term dictionary read here is `src/termdict/fst_termdict/{termdict,term_info_store}.rs`.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Sequence

import ducer
import zstandard

BLOCK_LEN = 4000  # sstable/src/delta.rs
COMPRESS_ABOVE = 2048  # sstable/src/delta.rs flush_block
STORE_BLOCK_LEN = 128  # sstable/src/index/v3.rs
TERM_INFO_BLOCK = 256  # fst_termdict/term_info_store.rs BLOCK_LEN

# A term: (key, doc_freq, postings start, postings end, positions start, positions end)
Term = tuple[bytes, int, int, int, int, int]


# ---- encodings ----------------------------------------------------------------------------------


def vint(value: int) -> bytes:
    """tantivy common::VInt: the last byte carries 0x80."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F)
        value >>= 7
    out.append(value | 0x80)
    return bytes(out)


def leb128(value: int) -> bytes:
    """sstable/src/vint.rs: 0x80 on every byte but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_vint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b & 0x80:
            return value, i
        shift += 7


def num_bits(value: int) -> int:
    """tantivy-bitpacker compute_num_bits."""
    n = value.bit_length()
    return n if n <= 56 else 64


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def tantivy_fst(items: Iterable[tuple[bytes, int]]) -> bytes:
    """tantivy-fst's bytes for a map: ducer (the `fst` crate 0.4) writes format 3 = format 2 plus a
    4-byte CRC-32C and version 3."""
    data = bytearray(bytes(ducer.Map.build(":memory:", items)))
    assert struct.unpack_from("<Q", data, 0)[0] == 3
    struct.pack_into("<Q", data, 0, 2)
    return bytes(data[:-4])


class BitPacker:
    """tantivy-bitpacker BitPacker: a little-endian bit stream, flushed to whole bytes."""

    def __init__(self) -> None:
        self.value = 0
        self.bits = 0
        self.out = bytearray()

    def write(self, value: int, bits: int) -> None:
        assert 0 <= value < (1 << bits) or (bits == 0 and value == 0), (value, bits)
        self.value |= value << self.bits
        self.bits += bits

    def flush(self) -> bytes:
        data = self.value.to_bytes((self.bits + 7) // 8, "little")
        self.value = self.bits = 0
        return data


# ---- the SSTable writer ---------------------------------------------------------------------------


def term_info_values(terms: Sequence[Term]) -> bytes:
    """TermInfoValueWriter::serialize_block."""
    out = [vint(len(terms)), vint(terms[0][2]), vint(terms[0][4])]
    for _, df, ps, pe, qs, qe in terms:
        out += [vint(df), vint(pe - ps), vint(qe - qs)]
    return b"".join(out)


def shorten(left: bytes, right: bytes) -> bytes:
    """sstable/src/index/mod.rs find_shorter_str_in_between."""
    assert left < right
    common = common_prefix(left, right)
    if len(left) == common:
        return left
    for pos in range(common + 1, len(left)):
        if left[pos] != 0xFF:
            return left[:pos] + bytes([left[pos] + 1])
    return left


def find_best_slope(elements: list[tuple[int, int]]) -> tuple[int, int]:
    """sstable/src/index/v3.rs find_best_slope."""
    min_idx, min_val, min_slope = 1, 0, 0xFFFFFFFF
    max_idx, max_val, max_slope = 1, 0, 0
    for index, value in elements:
        slope = (value // index) & 0xFFFFFFFF
        if slope <= min_slope:
            min_slope, min_idx, min_val = slope, index, value
        if slope >= max_slope:
            max_slope, max_idx, max_val = slope, index, value
    denominator = min_idx + max_idx
    final = ((min_val + max_val + denominator // 2) // denominator) & 0xFFFFFFFF
    deviation = max((abs(value - final * index) for index, value in elements), default=0)
    return final, num_bits(deviation) + 1


def block_addr_store(addrs: Sequence[tuple[int, int, int]]) -> bytes:
    """BlockAddrStoreWriter for (start, end, first ordinal) of each block."""
    metas, packed = bytearray(), bytearray()
    for s0 in range(0, len(addrs), STORE_BLOCK_LEN):
        chunk = addrs[s0 : s0 + STORE_BLOCK_LEN]
        ref_start, _, ref_ord = chunk[0]
        starts = [a[0] - ref_start for a in chunk]
        ords = [a[2] - ref_ord for a in chunk]
        last_end = chunk[-1][1] - ref_start
        r_slope, r_bits = find_best_slope(list(enumerate(starts + [last_end]))[1:])
        o_slope, o_bits = find_best_slope(list(enumerate(ords))[1:])
        r_shift, o_shift = 1 << (r_bits - 1), 1 << (o_bits - 1)
        metas += struct.pack(
            "<QQQIIBBH", len(packed), ref_start, ref_ord, r_slope, o_slope, o_bits, r_bits, len(chunk) - 1
        )
        bp = BitPacker()
        for i in range(1, len(chunk)):
            bp.write(starts[i] - r_slope * i + r_shift, r_bits)
            bp.write(ords[i] - o_slope * i + o_shift, o_bits)
        bp.write(last_end - r_slope * len(chunk) + r_shift, r_bits)
        packed += bp.flush()
    return struct.pack("<Q", len(metas)) + bytes(metas) + bytes(packed)


def write_sstable(keys: Sequence[bytes], values: Sequence[Term] | None = None, check_order: bool = True) -> bytes:
    """An SSTable of keys (strictly increasing) with TermInfo values (terms, same order) or none
    (tantivy's VoidSSTable), as tantivy's Writer with the default block length writes it."""
    out = bytearray()
    index: list[list[object]] = []  # [last key or greater, start, end, first ordinal]
    block_keys = bytearray()
    block_terms: list[Term] = []
    prev = b""
    first_ord = num_terms = 0
    zc = zstandard.ZstdCompressor(level=3)

    def flush() -> None:
        nonlocal first_ord, prev
        vals = term_info_values(block_terms) if values is not None else b""
        start = len(out)
        raw = vals + bytes(block_keys)
        if len(raw) > COMPRESS_ABOVE and len(comp := zc.compress(raw)) < len(raw):
            out.extend(struct.pack("<IB", len(comp) + 1, 1) + comp)
        else:
            out.extend(struct.pack("<IB", len(raw) + 1, 0) + raw)
        index.append([prev, start, len(out), first_ord])
        first_ord = num_terms
        prev = b""
        block_keys.clear()
        block_terms.clear()

    for n, key in enumerate(keys):
        if first_ord == num_terms and index:
            index[-1][0] = shorten(index[-1][0], key)  # type: ignore[arg-type]
        keep = common_prefix(prev, key)
        add = len(key) - keep
        assert not check_order or not prev or prev < key
        block_keys += bytes([keep | add << 4]) if keep < 16 and add < 16 else b"\x01" + leb128(keep) + leb128(add)
        block_keys += key[keep:]
        prev = key
        if values is not None:
            block_terms.append(values[n])
        num_terms += 1
        if len(block_keys) > BLOCK_LEN:
            flush()
    if block_keys:
        flush()
    out += struct.pack("<I", 0)
    offset = len(out)
    fst_len = 0
    if len(index) > 1:
        fst = tantivy_fst((k, i) for i, (k, *_) in enumerate(index))  # type: ignore[misc]
        out += fst + block_addr_store([(s, e, o) for _, s, e, o in index])  # type: ignore[misc]
        fst_len = len(fst)
    out += struct.pack("<QQQI", fst_len, offset, num_terms, 3)
    return bytes(out)


def sstable_section(terms: Sequence[Term]) -> bytes:
    """A `.term` section as the reference writes it: the SSTable and the u32 type 2."""
    return write_sstable([t[0] for t in terms], terms) + struct.pack("<I", 2)


def sstable_blocks(sstable: bytes) -> list[tuple[int, int, bool, int]]:
    """(start, end, compressed, number of terms) of each block of an SSTable with TermInfo values."""
    out = []
    pos = 0
    while (length := struct.unpack_from("<I", sstable, pos)[0]) != 0:
        payload = sstable[pos + 5 : pos + 4 + length]
        compressed = sstable[pos + 4] == 1
        if compressed:
            payload = zstandard.ZstdDecompressor().decompress(payload)
        out.append((pos, pos + 4 + length, compressed, read_vint(payload, 0)[0]))
        pos += 4 + length
    return out


def sstable_blocks_void(sstable: bytes) -> list[tuple[int, int, bool]]:
    """(start, end, compressed) of each block of an SSTable of any values."""
    out = []
    pos = 0
    while (length := struct.unpack_from("<I", sstable, pos)[0]) != 0:
        out.append((pos, pos + 4 + length, sstable[pos + 4] == 1))
        pos += 4 + length
    return out


# ---- the FST term dictionary reader --------------------------------------------------------------


def extract_bits(data: bytes, addr: int, bits: int) -> int:
    return (int.from_bytes(data[addr // 8 : addr // 8 + 9], "little") >> (addr % 8)) & ((1 << bits) - 1)


def read_fst_section(section: bytes) -> list[Term]:
    """The terms of a tantivy-py `.term` section (FST dictionary, type 1)."""
    store_len, fst_version, kind = struct.unpack_from("<QII", section, len(section) - 16)
    assert (fst_version, kind) == (1, 1), (fst_version, kind)
    fst = section[: len(section) - 16 - store_len]
    store = section[len(section) - 16 - store_len : len(section) - 16]
    keys = []
    # (as format 3: ducer's `fst` crate refuses a map under 36 bytes, a format 2 one-term map is 35)
    for i, (k, v) in enumerate(ducer.Map(struct.pack("<Q", 3) + fst[8:] + bytes(4)).items()):
        assert v == i
        keys.append(bytes(k))
    metas_len, count = struct.unpack_from("<QQ", store, 0)
    assert count == len(keys)
    packed = store[16 + metas_len :]
    terms: list[Term] = []
    for b in range(metas_len // 39):
        off, df0, p0, plen0, q0, qlen0, db, pb, qb = struct.unpack_from("<QIQIQIBBB", store, 16 + 39 * b)
        terms.append((keys[len(terms)], df0, p0, p0 + plen0, q0, q0 + qlen0))
        width = db + pb + qb
        data = packed[off:]
        for k in range(1, min(TERM_INFO_BLOCK, count - b * TERM_INFO_BLOCK)):
            a = (k - 1) * width
            terms.append(
                (
                    keys[len(terms)],
                    extract_bits(data, a + pb + qb, db),
                    p0 + extract_bits(data, a, pb),
                    p0 + extract_bits(data, a + width, pb),
                    q0 + extract_bits(data, a + pb, qb),
                    q0 + extract_bits(data, a + pb + width, qb),
                )
            )
    assert len(terms) == count
    return terms


# ---- `.term` composite files ---------------------------------------------------------------------


def read_composite(data: bytes) -> tuple[list[tuple[int, int, bytes]], bytes]:
    """(field, idx, section) in file order and the footer JSON (src/directory/composite_file.rs)."""
    json_len, magic = struct.unpack_from("<II", data, len(data) - 8)
    assert magic == 1337
    body_end = len(data) - 8 - json_len
    (table_len,) = struct.unpack_from("<I", data, body_end - 4)
    table_start = body_end - 4 - table_len
    n, i = read_vint(data, table_start)
    starts = []
    offset = 0
    for _ in range(n):
        delta, i = read_vint(data, i)
        offset += delta
        (field,) = struct.unpack_from("<I", data, i)
        idx, i = read_vint(data, i + 4)
        starts.append((field, idx, offset))
    ends = [s[2] for s in starts[1:]] + [table_start]
    return [(f, x, data[s:e]) for (f, x, s), e in zip(starts, ends)], data[body_end : len(data) - 8]


def write_composite(sections: Sequence[tuple[int, int, bytes]], footer_json: bytes) -> bytes:
    table = bytearray(vint(len(sections)))
    offset = prev = 0
    for field, idx, body in sections:
        table += vint(offset - prev) + struct.pack("<I", field) + vint(idx)
        prev = offset
        offset += len(body)
    body = b"".join(s for _, _, s in sections) + bytes(table) + struct.pack("<I", len(table))
    footer = json.loads(footer_json)
    footer["crc"] = zlib.crc32(body)
    new_json = json.dumps(footer, separators=(",", ":")).encode()
    return body + new_json + struct.pack("<II", len(new_json), 1337)


def term_file_as_reference(data: bytes, fields: Iterable[int] | None = None) -> bytes:
    """A tantivy-py `.term` file with the FST dictionaries of `fields` (None = all) rewritten as the
    reference's SSTable dictionaries."""
    sections, footer = read_composite(data)
    wanted = None if fields is None else set(fields)
    out = [(f, x, sstable_section(read_fst_section(s)) if wanted is None or f in wanted else s) for f, x, s in sections]
    return write_composite(out, footer)
