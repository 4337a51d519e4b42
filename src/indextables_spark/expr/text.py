"""What a substring pattern on a tokenized (`text`) column says about the column's terms.

Spark's `contains` / `startswith` / `endswith` / `=` / `IN` on a text column compare raw strings,
while the index holds tokens. A pattern still implies tokens, which narrow the documents through
the index (a superset; the reader re-checks the raw filter exactly):

- A *closed* segment of the pattern, delimited on both sides by characters that always split
  tokens (or by the start/end of the value for startswith/endswith/=), is tokenized exactly like
  the value around it, so each of its tokens is a term the document must hold. The tokens come
  from a Tantivy analyzer identical to the index's (default, en_stem, whitespace).
- An *open* segment (cut by the pattern's unanchored edge) is a fragment of a longer token: only
  a regex over the term dictionary (`.*frag`, `frag.*`, `.*frag.*`) can use it, and only when
  every token of the split was indexed. Tantivy drops tokens of 40+ bytes (default), of the
  field's recorded limit (indexing.text.maxTokenLength) or 65,530+ bytes (any tokenizer), so the
  builder records in the footer (`fullyTokenized`) the columns
  where no value had such a token. Stemmed (en_stem) fragments cannot be matched at all.

"Always split" is decided with ASCII characters only: Tantivy's simple tokenizer splits on
Rust's `!char::is_alphanumeric()`, which Python's `str.isalnum` does not reproduce for every
non-ASCII character, so a non-ASCII character never counts as a certain delimiter.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema.analyzers import _analyzer

if TYPE_CHECKING:
    import tantivy

# Tokenizers whose splitting rule is known here (raw is whole-value, handled as an exact field).
SIMPLE_TOKENIZERS = frozenset({"default", "en_stem"})
WHITESPACE_TOKENIZERS = frozenset({"whitespace"})
# A token of at least this many UTF-8 bytes is not indexed (RemoveLongFilter(40) for the simple
# analyzers; Tantivy's MAX_TOKEN_LEN for any field).
MAX_TOKEN_BYTES = {"default": 40, "en_stem": 40, "whitespace": 65530}

_SIMPLE_DELIMS = frozenset(chr(c) for c in range(128) if not chr(c).isalnum())
_WS_DELIMS = frozenset(" \t\n\x0c\r")  # Rust's char::is_ascii_whitespace
_SIMPLE_SPLIT_RE = r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+"
_WS_SPLIT_RE = r"[ \t\n\x0c\r]+"
_REGEX_META = set('\\.+*?()|[]{}^$#&-~"')


@dataclass(frozen=True)
class Segment:
    text: str
    closed_left: bool  # a certain token boundary (or the value's start) precedes it
    closed_right: bool  # a certain token boundary (or the value's end) follows it


@dataclass(frozen=True)
class PatternTerms:
    """What a document matching the pattern must hold: exact terms and term regexes."""

    terms: tuple[str, ...]
    regexes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.terms and not self.regexes


def supported(tokenizer: str | None) -> bool:
    return tokenizer in SIMPLE_TOKENIZERS or tokenizer in WHITESPACE_TOKENIZERS


def token_limit(tokenizer: str, limit: int | None) -> int:
    """The byte length from which a field drops tokens: its recorded limit, else the tokenizer's."""
    return MAX_TOKEN_BYTES[tokenizer] if limit is None else limit


@functools.lru_cache(maxsize=32)
def analyzer(tokenizer: str, limit: int | None = None) -> tantivy.TextAnalyzer:
    """A Tantivy analyzer producing the same terms as the index's tokenizer of that name (with the
    field's recorded token limit, None: the tokenizer's own)."""

    if tokenizer in SIMPLE_TOKENIZERS or tokenizer in WHITESPACE_TOKENIZERS:
        return _analyzer(tokenizer, token_limit(tokenizer, limit) if tokenizer != "whitespace" else limit)
    raise ValueError(f"no analyzer for tokenizer {tokenizer!r}")


def segments(pattern: str, tokenizer: str, anchored_left: bool, anchored_right: bool) -> list[Segment]:
    """The pattern cut at certain delimiters (delimiters dropped)."""
    delims = _SIMPLE_DELIMS if tokenizer in SIMPLE_TOKENIZERS else _WS_DELIMS
    out: list[Segment] = []
    start = 0
    n = len(pattern)
    for i in range(n + 1):
        if i == n or pattern[i] in delims:
            if i > start:
                out.append(Segment(pattern[start:i], start > 0 or anchored_left, i < n or anchored_right))
            start = i + 1
    return out


def regex_escape(s: str) -> str:
    return "".join("\\" + c if c in _REGEX_META else c for c in s)


def _fragment_regex(seg: Segment, tokenizer: str) -> str | None:
    """A term regex for an open segment, or None when the fragment cannot be matched safely."""
    if tokenizer == "en_stem" or not seg.text.isascii():
        return None  # stems differ from fragments; non-ASCII lowercasing/splitting is not certain
    frag = seg.text.lower() if tokenizer in SIMPLE_TOKENIZERS else regex_escape(seg.text)
    left = "" if seg.closed_left else ".*"
    right = "" if seg.closed_right else ".*"
    return f"(?s){left}{frag}{right}"


def pattern_terms(
    pattern: str,
    tokenizer: str,
    anchored_left: bool,
    anchored_right: bool,
    fully_tokenized: bool,
    limit: int | None = None,
) -> PatternTerms:
    """Terms/regexes every value containing `pattern` (at the anchors) must have in the index."""
    terms: list[str] = []
    regexes: list[str] = []
    for seg in segments(pattern, tokenizer, anchored_left, anchored_right):
        if seg.closed_left and seg.closed_right:
            terms.extend(analyzer(tokenizer, limit).analyze(seg.text))
        elif fully_tokenized:
            r = _fragment_regex(seg, tokenizer)
            if r is not None:
                regexes.append(r)
    return PatternTerms(tuple(dict.fromkeys(terms)), tuple(dict.fromkeys(regexes)))


def has_long_token(values: pa.Array, tokenizer: str, limit: int | None = None) -> bool:
    """May the tokenizer make a token of `limit` bytes (None: MAX_TOKEN_BYTES[tokenizer]) or more
    of the values (which Tantivy then drops)? The same over-approximation as max_token_bytes, 12x faster: a
    regex over the values as bytes (Arrow matches binary as Latin-1, so a repetition counts bytes)
    looks for a run of that many non-delimiter bytes without splitting anything."""
    limit = token_limit(tokenizer, limit)
    if len(values) == 0 or values.null_count == len(values):
        return False
    longest = pc.max(pc.binary_length(values)).as_py()
    if longest is None or longest < limit:
        return False
    if limit > 1000:  # RE2 repeats at most 1000 times
        return max_token_bytes(values, tokenizer) >= limit
    delims = (_SIMPLE_SPLIT_RE if tokenizer in SIMPLE_TOKENIZERS else _WS_SPLIT_RE)[:-1]  # "[...]"
    run = "[^" + delims[1:] + "{" + str(limit) + ",}"
    binary = values.cast(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
    return bool(pc.any(pc.match_substring_regex(binary, run)).as_py())


def max_token_bytes(values: pa.Array, tokenizer: str) -> int:
    """An upper bound of the UTF-8 length of the tokens the tokenizer makes of the values.

    Splits only at certain delimiters (ASCII), so the pieces are at least as long as the real
    tokens (vectorised: no per-row Python).
    """
    if len(values) == 0 or values.null_count == len(values):
        return 0
    pattern = _SIMPLE_SPLIT_RE if tokenizer in SIMPLE_TOKENIZERS else _WS_SPLIT_RE
    pieces = pc.list_flatten(pc.split_pattern_regex(values, pattern))
    if len(pieces) == 0:
        return 0
    longest = pc.max(pc.binary_length(pieces)).as_py()
    return int(longest or 0)
