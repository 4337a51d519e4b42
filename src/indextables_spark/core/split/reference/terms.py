"""A field's term dictionary as the transcoder carries it: the keys in order with their TermInfos
(quickwit-oss/tantivy `src/postings/term_info.rs`), held column-wise because a split's dictionaries
hold millions of terms and one Python object per term would cost more than decoding them.

Both of tantivy's dictionaries assume a field's postings (and positions) are contiguous in term
order, term i's range ending where term i+1's begins (the SSTable stores only lengths after a
block's first start, the FST dictionary's TermInfoStore only starts), so ranges are kept as n + 1
boundaries: term i's postings are the `.idx` section's bytes [postings[i], postings[i + 1]).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TermInfo:
    """One term's entry: how many documents hold it and where its postings and positions lie in
    the field's `.idx` and `.pos` sections ([start, end) byte offsets)."""

    doc_freq: int
    postings: tuple[int, int]
    positions: tuple[int, int]


@dataclass(slots=True)
class TermColumns:
    """keys[i] (strictly increasing), doc_freqs[i], and the postings/positions boundaries (n + 1
    each: term i spans [postings[i], postings[i + 1]))."""

    keys: list[bytes] = field(default_factory=list)
    doc_freqs: list[int] = field(default_factory=list)
    postings: list[int] = field(default_factory=lambda: [0])
    positions: list[int] = field(default_factory=lambda: [0])

    def __len__(self) -> int:
        return len(self.keys)

    def term_info(self, i: int) -> TermInfo:
        return TermInfo(
            self.doc_freqs[i],
            (self.postings[i], self.postings[i + 1]),
            (self.positions[i], self.positions[i + 1]),
        )

    def __iter__(self) -> Iterator[tuple[bytes, TermInfo]]:
        """(key, TermInfo) in key order."""
        for i, key in enumerate(self.keys):
            yield key, self.term_info(i)
