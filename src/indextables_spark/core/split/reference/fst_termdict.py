"""Writer of tantivy's FST term dictionary (what tantivy-py reads), byte for byte as tantivy writes
it: quickwit-oss/tantivy `src/termdict/fst_termdict/termdict.rs` `TermDictionaryBuilder`,
`term_info_store.rs` `TermInfoStoreWriter`, `src/postings/term_info.rs`, the dictionary type from
`src/termdict/mod.rs`. All integers little-endian:

```
[FST map: key -> term ordinal (tantivy-fst, the `fst` crate's format 2)]
[TermInfoStore: u64 metas length][u64 number of terms]
               [one 39-byte meta per 256 terms: u64 offset of its bits, its first TermInfo in full
                (u32 doc_freq, u64 postings start, u32 postings length, u64 positions start,
                u32 positions length), u8 doc_freq bits, u8 postings bits, u8 positions bits]
               [per block, byte-aligned: for each later term, its postings start, positions start
                (both relative to the first term's) and doc_freq bit-packed; then the block's
                postings and positions ends]
[u64 TermInfoStore length][u32 FST_VERSION 1][u32 dictionary type 1 = FST]
```

The FST comes from ducer (PyPI, MIT), which wraps BurntSushi's `fst` crate 0.4: that writes format
3, format 2 plus a trailing CRC-32C of the rest with 3 in the version field; its nodes are those
tantivy-fst (a fork of `fst` 0.3) writes, so setting the version to 2 and dropping the checksum
gives tantivy-fst's bytes (checked: the whole `.term` file comes out identical to tantivy-py's).
"""

from __future__ import annotations

import struct

from indextables_spark.core.split.reference.terms import TermColumns
from indextables_spark.errors import SplitFormatError

FST_VERSION = 1  # fst_termdict/termdict.rs FST_VERSION (the dictionary's, not the FST's)
DICT_TYPE_FST = 1  # src/termdict/mod.rs DictionaryType::Fst
TANTIVY_FST_FORMAT = 2  # what tantivy-fst writes and reads
_BLOCK_LEN = 256  # term_info_store.rs BLOCK_LEN
_META = struct.Struct("<QIQIQIBBB")  # TermInfoBlockMeta: offset, TermInfo, three bit widths
_MAX_BITS = 56  # tantivy's extract_bits asserts num_bits <= 56
_U32_MAX = 0xFFFFFFFF


def write_fst_termdict(terms: TermColumns, where: str, field: str) -> bytes:
    """The FST term dictionary section (its dictionary type included) holding `terms`; raises
    SplitFormatError naming the split and field when tantivy could not represent them."""
    store = term_info_store(terms, where, field)
    return b"".join(
        (fst_map(terms.keys, where, field), store, struct.pack("<QII", len(store), FST_VERSION, DICT_TYPE_FST))
    )


def fst_map(keys: list[bytes], where: str, field: str) -> bytes:
    """tantivy-fst's map of keys (strictly increasing) to their ordinals."""
    import ducer

    try:
        built = ducer.Map.build(":memory:", zip(keys, range(len(keys))))
    except ValueError as e:  # the fst crate refuses keys out of order or repeated
        raise SplitFormatError(f"split {where}: field {field!r}: cannot build the term FST ({e})") from None
    fst = bytearray(bytes(built))  # a ducer Buffer (buffer protocol)
    # fst 0.4 `raw/build.rs`: [u64 version][u64 type]...[u64 count][u64 root][u32 crc32c]
    if len(fst) < 36 or struct.unpack_from("<Q", fst, 0)[0] != 3:
        raise SplitFormatError(f"split {where}: field {field!r}: ducer wrote an FST of an unknown format")
    struct.pack_into("<Q", fst, 0, TANTIVY_FST_FORMAT)
    return bytes(fst[:-4])


def term_info_store(terms: TermColumns, where: str, field: str) -> bytes:
    """tantivy's TermInfoStore of the terms' TermInfos (term_info_store.rs `TermInfoStoreWriter`)."""
    metas: list[bytes] = []
    packed: list[bytes] = []
    offset = 0
    n = len(terms)
    doc_freqs, postings, positions = terms.doc_freqs, terms.postings, terms.positions
    for b0 in range(0, n, _BLOCK_LEN):
        b1 = min(b0 + _BLOCK_LEN, n)
        p0, q0 = postings[b0], positions[b0]
        p_end, q_end = postings[b1] - p0, positions[b1] - q0
        # tantivy-bitpacker compute_num_bits: the bit length (64 above 56, which tantivy cannot read)
        d_bits = max(doc_freqs[b0 + 1 : b1], default=0).bit_length()
        p_bits, q_bits = p_end.bit_length(), q_end.bit_length()
        first_p, first_q = postings[b0 + 1] - p0, positions[b0 + 1] - q0
        if max(d_bits, p_bits, q_bits) > _MAX_BITS or max(doc_freqs[b0], first_p, first_q) > _U32_MAX:
            raise SplitFormatError(
                f"split {where}: field {field!r}: terms {b0}..{b1} have postings or positions spans "
                "beyond what tantivy's FST term dictionary stores"
            )
        metas.append(_META.pack(offset, doc_freqs[b0], p0, first_p, q0, first_q, d_bits, p_bits, q_bits))
        bits = _pack_block(doc_freqs, postings, positions, b0, b1, p_bits, q_bits)
        packed.append(bits)
        offset += len(bits)
    meta_bytes = b"".join(metas)
    return b"".join((struct.pack("<QQ", len(meta_bytes), n), meta_bytes, *packed))


def _pack_block(
    doc_freqs: list[int], postings: list[int], positions: list[int], b0: int, b1: int, p_bits: int, q_bits: int
) -> bytes:
    """The bits of terms b0+1 .. b1-1 (postings start, positions start, doc_freq, each relative to
    term b0's starts, at p_bits, q_bits and the rest) and the block's two ends, as
    tantivy-bitpacker's BitPacker lays them: one little-endian bit stream, flushed to whole bytes."""
    p0, q0 = postings[b0], positions[b0]
    d_shift = p_bits + q_bits
    records = [
        (postings[i] - p0) | ((positions[i] - q0) << p_bits) | (doc_freqs[i] << d_shift) for i in range(b0 + 1, b1)
    ]
    width = d_shift + max(doc_freqs[b0 + 1 : b1], default=0).bit_length()
    records.append((postings[b1] - p0) | ((positions[b1] - q0) << p_bits))
    total = (b1 - b0 - 1) * width + d_shift
    return _concat_bits(records, width).to_bytes((total + 7) // 8, "little")


def _concat_bits(records: list[int], width: int) -> int:
    """sum(records[i] << (i * width)), by halves so that each shift is of a number half as long
    (records of a block: at most 256)."""
    if len(records) <= 8:
        value = 0
        for r in reversed(records):
            value = (value << width) | r
        return value
    half = len(records) // 2
    return _concat_bits(records[:half], width) | (_concat_bits(records[half:], width) << (half * width))
