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
from typing import Any

import numpy as np


def _boundary() -> Any:
    return np.zeros(1, dtype=np.uint64)


@dataclass(frozen=True, slots=True)
class TermInfo:
    """One term's entry: how many documents hold it and where its postings and positions lie in
    the field's `.idx` and `.pos` sections ([start, end) byte offsets)."""

    doc_freq: int
    postings: tuple[int, int]
    positions: tuple[int, int]


@dataclass(slots=True)
class TermColumns:
    """keys[i] (strictly increasing); doc_freqs[i]; the postings and positions boundaries, n + 1 of
    each: term i spans [postings[i], postings[i + 1]). The numbers are numpy uint64 arrays."""

    keys: list[bytes] = field(default_factory=list)
    doc_freqs: Any = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    postings: Any = field(default_factory=_boundary)
    positions: Any = field(default_factory=_boundary)

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[tuple[bytes, TermInfo]]:
        """(key, TermInfo) in key order."""
        p, q = self.postings.tolist(), self.positions.tolist()
        for i, (key, doc_freq) in enumerate(zip(self.keys, self.doc_freqs.tolist())):
            yield key, TermInfo(doc_freq, (p[i], p[i + 1]), (q[i], q[i + 1]))
