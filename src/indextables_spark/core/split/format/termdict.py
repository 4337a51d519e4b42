"""Reader of tantivy's FST term dictionary (one field's `.term` section): a term's TermInfo, its
document frequency and where its postings and positions lie, without opening the index.

The layout (written by core/split/reference/fst_termdict.py, which documents it; quickwit-oss/
tantivy `src/termdict/fst_termdict/{termdict,term_info_store}.rs`), all integers little-endian:

```
[FST map: key -> term ordinal (tantivy-fst, the `fst` crate's format 2)]
[TermInfoStore: u64 metas length][u64 number of terms]
               [one 39-byte meta per 256 terms][bit-packed blocks]
[u64 TermInfoStore length][u32 FST_VERSION 1][u32 dictionary type 1 = FST]
```

A term's postings range is relative to its field's `.idx` section after the field's token count
(the section's first 8 bytes: tantivy's InvertedIndexReader::new splits them off), its positions
range relative to the field's `.pos` section.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import ducer

from indextables_spark.core.split.format.composite import DICT_TYPE_FST

FST_VERSION = 1
_TAIL = struct.Struct("<QII")  # TermInfoStore length, FST_VERSION, dictionary type
_META = struct.Struct("<QIQIQIBBB")  # offset of its bits, first TermInfo in full, three bit widths
_BLOCK_LEN = 256
_U64 = struct.Struct("<Q")
_STORE_HEAD = struct.Struct("<QQ")  # metas length, number of terms


@dataclass(frozen=True)
class TermInfo:
    doc_freq: int
    postings: tuple[int, int]  # [start, end) after the .idx section's token count
    positions: tuple[int, int]  # [start, end) in the .pos section


def is_fst_dictionary(section: bytes) -> bool:
    """Whether a `.term` section is an FST dictionary (its last u32; the reference writes SSTable ones)."""
    return len(section) >= _TAIL.size and struct.unpack_from("<I", section, len(section) - 4)[0] == DICT_TYPE_FST


def lookup_terms(section: bytes, keys: Iterable[bytes]) -> Mapping[bytes, TermInfo]:
    """The TermInfo of each key present in the FST term dictionary `section` (absent keys are left
    out); ValueError when the section is not an FST dictionary this reader knows."""
    if len(section) < _TAIL.size:
        raise ValueError("term dictionary too short")
    store_len, version, dict_type = _TAIL.unpack_from(section, len(section) - _TAIL.size)
    if dict_type != DICT_TYPE_FST or version != FST_VERSION:
        raise ValueError(f"not an FST term dictionary (type {dict_type}, version {version})")
    fst_end = len(section) - _TAIL.size - store_len
    if fst_end < 32 or store_len < _STORE_HEAD.size:
        raise ValueError("term dictionary lengths out of range")
    store = memoryview(section)[fst_end : len(section) - _TAIL.size]
    metas_len, num_terms = _STORE_HEAD.unpack_from(store, 0)
    if metas_len != -(-num_terms // _BLOCK_LEN) * _META.size or _STORE_HEAD.size + metas_len > len(store):
        raise ValueError("term info store metas out of range")
    fst = section[:fst_end]
    if _U64.unpack_from(fst, 0)[0] != 2:
        raise ValueError("not a tantivy-fst map")
    # ducer (the `fst` crate 0.4) reads format 3 = format 2 and a CRC-32C it does not check on
    # open; it refuses maps under 36 bytes, which a format-2 map of one or two keys is
    try:
        fmap = ducer.Map(struct.pack("<Q", 3) + fst[8:] + bytes(4))
    except Exception as e:
        raise ValueError(f"unreadable term FST ({e})") from None
    out: dict[bytes, TermInfo] = {}
    bits = store[_STORE_HEAD.size + metas_len :]
    for key in keys:
        ordinal = fmap.get(key)
        if ordinal is None:
            continue
        if not 0 <= int(ordinal) < num_terms:
            raise ValueError("term ordinal out of range")
        out[key] = _term_info(store, bits, int(ordinal))
    return out


def _term_info(store: memoryview, bits: memoryview, ordinal: int) -> TermInfo:
    block, inner = divmod(ordinal, _BLOCK_LEN)
    offset, doc_freq, p0, p_len, q0, q_len, d_bits, p_bits, q_bits = _META.unpack_from(
        store, _STORE_HEAD.size + block * _META.size
    )
    if inner == 0:
        return TermInfo(doc_freq, (p0, p0 + p_len), (q0, q0 + q_len))
    width = d_bits + p_bits + q_bits
    row = (inner - 1) * width  # bit address of the term's row; the next row starts its end

    def extract(addr: int, n: int) -> int:
        if n == 0:
            return 0
        start = addr // 8
        chunk = bytes(bits[start : start + (addr % 8 + n + 7) // 8])
        return (int.from_bytes(chunk, "little") >> (addr % 8)) & ((1 << n) - 1)

    if offset + (row + width + p_bits + q_bits + 7) // 8 > len(bits):
        raise ValueError("term info bits out of range")
    at = offset * 8
    p_start = p0 + extract(at + row, p_bits)
    p_end = p0 + extract(at + row + width, p_bits)
    q_start = q0 + extract(at + row + p_bits, q_bits)
    q_end = q0 + extract(at + row + width + p_bits, q_bits)
    df = extract(at + row + p_bits + q_bits, d_bits)
    if p_end < p_start or q_end < q_start:
        raise ValueError("term info ranges out of order")
    return TermInfo(df, (p_start, p_end), (q_start, q_end))
