"""Language analyzers beyond Tantivy's built-in tokenizers (`default`, `raw`, `en_stem`,
`whitespace`), registered on every Tantivy index we create or open — Tantivy does not persist
custom analyzers, so the tokenizer name recorded in the doc mapping is all a reader needs:

- `<iso>_stem` (`de_stem`, `fr_stem`, …, every Snowball stemmer Tantivy has): the default
  tokenizer's splitting, tokens of 40 bytes or more dropped, lowercased, stemmed; Latin-script
  languages then ASCII-folded, so `haus` finds "Häuser" and "Haus", `eleve` finds "élève".
- `cjk` (recorded as `cjk_bigram`): as Elasticsearch's cjk analyzer, every run of Chinese,
  Japanese or Korean characters becomes its overlapping bigrams ("東京都" → 東京, 京都; a lone
  character stays a unigram), other scripts split as the default tokenizer, all lowercased.
  Tantivy has no bigram filter, so the indexed text is rewritten before Tantivy sees it
  (`bigram_text`: "東京 京都", consecutive positions) and the analyzer only splits it; query terms
  are rewritten the same way (`cjk_bigram_terms`: `body:東京都` → the phrase "東京 京都").
  `body:東京` finds "東京都に住んでいます" but not "京東".
- `<tokenizer>_limit_<n>` (the reference's naming): a field with a recorded token length
  (`indexing.text.maxTokenLength`, core/split/format/indexing.py) — the tokenizer's analyzer dropping tokens
  of n bytes or more instead of its own limit (40 for `default`, `en_stem`, the stemmers and
  `cjk`; `whitespace` has none below Tantivy's 65,530). Registered for `default`, `en_stem` and
  `whitespace` too, since Tantivy's built-in ones keep their own limit.
- `cjk` in doc mappings written before bigrams (one token per CJK character, a query term of
  several searched as a phrase of them) is still read as it was written.
- `ngram_<min>_<max>` (written by `indexing.tokenizer.<col>=ngram` with `indexing.ngram.min.<col>` /
  `indexing.ngram.max.<col>`, default 2 and 3): every substring of min..max characters,
  lowercased, for substring search on codes and identifiers.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Iterable, TypeGuard

if TYPE_CHECKING:
    import pyarrow as pa
    import tantivy

# ISO 639-1 code -> Tantivy's Snowball language (tantivy.Filter.stemmer)
STEMMERS = {
    "ar": "arabic",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}
_NOT_LATIN = frozenset({"ar", "el", "ru", "ta"})
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
CJK_PATTERN = rf"[{_CJK}]|[^{_CJK}\W_]+"
CJK_BIGRAM = "cjk_bigram"
CJK_BIGRAM_PATTERN = rf"[{_CJK}]{{1,2}}|[^{_CJK}\W_]+"
# The same character classes for Python's re (no \p{...}): the Unicode blocks of those scripts.
_CJK_RANGES = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK_RANGES}]+")
_NGRAM_RE = re.compile(r"^ngram_(\d+)_(\d+)$")
_LIMIT_RE = re.compile(r"^(.+)_limit_(\d+)$")
BUILTIN_LIMITS = {"default": 40, "en_stem": 40, "whitespace": None}  # None: no filter (Tantivy's 65,530)
MAX_NGRAM = 20


def custom_names() -> list[str]:
    """The analyzer names this module provides (ngram ones are patterns: ngram_<min>_<max>)."""
    return sorted([f"{iso}_stem" for iso in STEMMERS if iso != "en"] + ["cjk", "ngram_<min>_<max>"])


def limited(name: str) -> tuple[str, int] | None:
    """(tokenizer, byte limit) of a `<tokenizer>_limit_<n>` name, else None."""
    m = _LIMIT_RE.match(name or "")
    if not m or not 1 <= int(m.group(2)) <= 65530:
        return None
    base = m.group(1)
    return (base, int(m.group(2))) if base in BUILTIN_LIMITS or _is_language(base) else None


def _is_language(name: str) -> bool:
    return name in ("cjk", CJK_BIGRAM) or (name.endswith("_stem") and name[:-5] in STEMMERS and name != "en_stem")


def is_custom(name: str | None) -> TypeGuard[str]:
    if not name:
        return False
    if limited(name) is not None:
        return True
    if name in ("cjk", CJK_BIGRAM):
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
def analyzer(name: str) -> tantivy.TextAnalyzer:
    """The Tantivy TextAnalyzer registered under `name`."""

    lim = limited(name)
    if lim is not None:
        return _analyzer(lim[0], lim[1])
    return _analyzer(name, None)


def _analyzer(name: str, limit: int | None) -> tantivy.TextAnalyzer:
    """The analyzer of a tokenizer with a byte limit (None: the tokenizer's own, 40 for ours)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.schema.analyzers` free of tantivy

    if name in BUILTIN_LIMITS:  # Tantivy's own, with another limit
        tokenizer = tantivy.Tokenizer.whitespace() if name == "whitespace" else tantivy.Tokenizer.simple()
        b = tantivy.TextAnalyzerBuilder(tokenizer)
        if limit is not None:
            b = b.filter(tantivy.Filter.remove_long(limit))
        if name != "whitespace":
            b = b.filter(tantivy.Filter.lowercase())
        if name == "en_stem":
            b = b.filter(tantivy.Filter.stemmer("english"))
        return b.build()
    limit = 40 if limit is None else limit
    if name in ("cjk", CJK_BIGRAM):
        pattern = CJK_PATTERN if name == "cjk" else CJK_BIGRAM_PATTERN
        return (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(pattern))
            .filter(tantivy.Filter.remove_long(limit))
            .filter(tantivy.Filter.lowercase())
            .build()
        )
    bounds = ngram_bounds(name)
    if bounds is not None:
        return (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(bounds[0], bounds[1], False))
            .filter(tantivy.Filter.lowercase())
            .build()
        )
    iso = name[:-5]
    b = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(limit))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer(STEMMERS[iso]))
    )
    if iso not in _NOT_LATIN:
        b = b.filter(tantivy.Filter.ascii_fold())
    return b.build()


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def bigram_text(text: str) -> str:
    """The text a `cjk_bigram` field indexes: each CJK run as its overlapping bigrams, space
    separated (so the analyzer's regex yields them at consecutive positions), other text as is."""

    def bigrams(m: re.Match[str]) -> str:
        run = m.group(0)
        return " " + (run if len(run) == 1 else " ".join(run[i : i + 2] for i in range(len(run) - 1))) + " "

    return _CJK_RUN.sub(bigrams, text)


def bigram_values(values: pa.Array) -> pa.Array:
    """bigram_text of every value of an Arrow string array (values without CJK untouched)."""
    import pyarrow as pa  # lazy: keeps `import indextables_spark.core.schema.analyzers` free of pyarrow
    import pyarrow.compute as pc  # lazy: keeps `import indextables_spark.core.schema.analyzers` free of pyarrow

    mask = pc.match_substring_regex(values, f"[{_CJK_RANGES}]")
    if not pc.any(mask).as_py():
        return values
    return pa.array(
        [bigram_text(v) if v is not None and m else v for v, m in zip(values.to_pylist(), mask.to_pylist())],
        values.type,
    )


def register(index: tantivy.Index, tokenizers: Iterable[str | None]) -> None:
    """Register on a Tantivy index the custom analyzers its fields use (before indexing, parsing or
    searching: a field whose tokenizer is not registered cannot be used)."""
    for name in sorted({t for t in tokenizers if is_custom(t)}):
        index.register_tokenizer(name, analyzer(name))
        # a fast text/json field looks its tokenizer up in another registry (Tantivy's fast field
        # tokenizers: `default` and `raw` only, unless registered)
        index.register_fast_field_tokenizer(name, analyzer(name))
