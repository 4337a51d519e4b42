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

import ducer
import numpy as np

from indextables_spark.core.split.format.composite import DICT_TYPE_FST
from indextables_spark.core.split.reference.terms import TermColumns
from indextables_spark.errors import SplitFormatError

FST_VERSION = 1  # fst_termdict/termdict.rs FST_VERSION (the dictionary's, not the FST's)
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
    n = len(terms)
    doc_freqs, postings, positions = terms.doc_freqs, terms.postings, terms.positions
    firsts = np.arange(0, n, _BLOCK_LEN)
    lasts = np.minimum(firsts + _BLOCK_LEN, n)  # one past each block's last term
    rest = doc_freqs.copy()
    rest[firsts] = 0  # a block's doc_freq bits cover its later terms only
    widths = zip(
        _bit_lengths(np.maximum.reduceat(rest, firsts) if n else rest),
        _bit_lengths(postings[lasts] - postings[firsts]),
        _bit_lengths(positions[lasts] - positions[firsts]),
    )
    metas: list[bytes] = []
    packed: list[bytes] = []
    offset = 0
    for b0, b1, (d_bits, p_bits, q_bits) in zip(firsts.tolist(), lasts.tolist(), widths):
        p0, q0 = int(postings[b0]), int(positions[b0])
        first_p, first_q = int(postings[b0 + 1]) - p0, int(positions[b0 + 1]) - q0
        if max(d_bits, p_bits, q_bits) > _MAX_BITS or max(int(doc_freqs[b0]), first_p, first_q) > _U32_MAX:
            raise SplitFormatError(
                f"split {where}: field {field!r}: terms {b0}..{b1} have postings or positions spans "
                "beyond what tantivy's FST term dictionary stores"
            )
        metas.append(_META.pack(offset, int(doc_freqs[b0]), p0, first_p, q0, first_q, d_bits, p_bits, q_bits))
        bits = _pack_block(
            [(postings[b0 + 1 : b1 + 1] - np.uint64(p0), p_bits), (positions[b0 + 1 : b1 + 1] - np.uint64(q0), q_bits)],
            doc_freqs[b0 + 1 : b1],
            d_bits,
        )
        packed.append(bits)
        offset += len(bits)
    meta_bytes = b"".join(metas)
    return b"".join((struct.pack("<QQ", len(meta_bytes), n), meta_bytes, *packed))


def _bit_lengths(values: np.ndarray) -> list[int]:
    """tantivy-bitpacker compute_num_bits of each value (its bit length; tantivy says 64 above 56,
    which its readers refuse: the caller refuses more than 56)."""
    return [int(v).bit_length() for v in values.tolist()]


def _pack_block(offsets: list[tuple[np.ndarray, int]], doc_freqs: np.ndarray, d_bits: int) -> bytes:
    """One block's bits as tantivy-bitpacker's BitPacker lays them (a little-endian bit stream
    flushed to whole bytes): for each later term its postings start, positions start (relative,
    at their widths) and doc_freq; then the block's postings and positions ends. offsets: the
    relative postings and positions boundaries of the block's later terms and its end, with widths."""
    (p_rel, p_bits), (q_rel, q_bits) = offsets
    columns = [_bits(p_rel[:-1], p_bits), _bits(q_rel[:-1], q_bits), _bits(doc_freqs, d_bits)]
    rows = np.hstack(columns).ravel()
    tail = np.concatenate((_bits(p_rel[-1:], p_bits).ravel(), _bits(q_rel[-1:], q_bits).ravel()))
    return bytes(np.packbits(np.concatenate((rows, tail)), bitorder="little").tobytes())


def _bits(values: np.ndarray, width: int) -> np.ndarray:
    """The low `width` bits of each uint64, least significant first: an (n, width) array of 0/1."""
    as_bytes = values.astype("<u8").view(np.uint8).reshape(-1, 8)
    return np.unpackbits(as_bytes, axis=1, bitorder="little")[:, :width]
