"""Language analyzers beyond Tantivy's built-in tokenizers (`default`, `raw`, `en_stem`,
`whitespace`), registered on every Tantivy index we create or open — Tantivy does not persist
custom analyzers, so the tokenizer name recorded in the doc mapping is all a reader needs:

- `<iso>_stem` (`de_stem`, `fr_stem`, …, every Snowball stemmer Tantivy has): the default
  tokenizer's splitting, tokens of 40 bytes or more dropped, lowercased, stemmed; Latin-script
  languages then ASCII-folded, so `haus` finds "Häuser" and "Haus", `eleve` finds "élève".
- `cjk`: Chinese, Japanese and Korean characters each become a token, other scripts split as the
  default tokenizer, all lowercased. A query term of several CJK characters is analyzed the same
  way into adjacent tokens, which the query parser searches as a phrase: `body:東京` finds
  "東京都に住んでいます" but not "京東" (Lucene's StandardAnalyzer approach; Tantivy has no
  bigram filter for Elasticsearch's overlapping-bigram form, whose matches this is a superset of).
- `ngram_<min>_<max>` (written by `indexing.tokenizer.<col>=ngram` with `indexing.ngram.min.<col>` /
  `indexing.ngram.max.<col>`, default 2 and 3): every substring of min..max characters,
  lowercased, for substring search on codes and identifiers.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Iterable

# ISO 639-1 code -> Tantivy's Snowball language (tantivy.Filter.stemmer)
STEMMERS = {
    "ar": "arabic", "da": "danish", "de": "german", "el": "greek", "en": "english", "es": "spanish",
    "fi": "finnish", "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch", "no": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sv": "swedish", "ta": "tamil", "tr": "turkish",
}
_NOT_LATIN = frozenset({"ar", "el", "ru", "ta"})
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
CJK_PATTERN = rf"[{_CJK}]|[^{_CJK}\W_]+"
_NGRAM_RE = re.compile(r"^ngram_(\d+)_(\d+)$")
MAX_NGRAM = 20


def custom_names() -> list[str]:
    """The analyzer names this module provides (ngram ones are patterns: ngram_<min>_<max>)."""
    return sorted([f"{iso}_stem" for iso in STEMMERS if iso != "en"] + ["cjk", "ngram_<min>_<max>"])


def is_custom(name: str | None) -> bool:
    if not name:
        return False
    if name == "cjk":
        return True
    if name.endswith("_stem") and name[:-5] in STEMMERS and name != "en_stem":
        return True
    return ngram_bounds(name) is not None


def ngram_bounds(name: str) -> tuple[int, int] | None:
    m = _NGRAM_RE.match(name or "")
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    return (lo, hi) if 1 <= lo <= hi <= MAX_NGRAM else None


def lowercases(name: str | None) -> bool:
    """Do query terms for this tokenizer get lowercased (prefix terms are lowercased to match)?"""
    return name in ("default", "en_stem") or is_custom(name)


@functools.lru_cache(maxsize=64)
def analyzer(name: str) -> Any:
    """The Tantivy TextAnalyzer registered under `name`."""
    import tantivy

    if name == "cjk":
        return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(CJK_PATTERN))
                .filter(tantivy.Filter.remove_long(40)).filter(tantivy.Filter.lowercase()).build())
    bounds = ngram_bounds(name)
    if bounds is not None:
        return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(bounds[0], bounds[1], False))
                .filter(tantivy.Filter.lowercase()).build())
    iso = name[:-5]
    b = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(40))
         .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.stemmer(STEMMERS[iso])))
    if iso not in _NOT_LATIN:
        b = b.filter(tantivy.Filter.ascii_fold())
    return b.build()


def register(index: Any, tokenizers: Iterable[str | None]) -> None:
    """Register on a Tantivy index the custom analyzers its fields use (before indexing, parsing or
    searching: a field whose tokenizer is not registered cannot be used)."""
    for name in sorted({t for t in tokenizers if is_custom(t)}):
        index.register_tokenizer(name, analyzer(name))
