"""IndexTables4Spark's compact string indexing modes (`indexing.typemap.<col>` / INDEXING MODES):
what each mode indexes, the hash it indexes values by, and the pattern it strips from text.

| mode                            | Tantivy field(s) of column `c`                                      |
|---------------------------------|---------------------------------------------------------------------|
| `exact_only`                    | u64 `c`: xxHash64 of the whole value (no terms, no dictionary)      |
| `text_uuid_exactonly`           | text `c` (UUIDs replaced by a space) + u64 `c__uuids` (their hashes)|
| `text_uuid_strip`               | text `c` (UUIDs replaced by a space); the UUIDs are not indexed     |
| `text_custom_exactonly:<regex>` | as `text_uuid_exactonly`, the regex's matches instead of UUIDs      |
| `text_custom_strip:<regex>`     | as `text_uuid_strip`, the regex's matches instead of UUIDs          |

The hash is the reference's (tantivy4java native/src/parquet_companion/indexing.rs,
`hash_string_value`): xxHash64 of the UTF-8 bytes, seed 0, with 0 mapped to 1. The UUID pattern
and the replacement by one space are string_indexing.rs's (`UUID_REGEX`, `strip_pattern`).
Patterns are Python `re` (Unicode-aware like Rust's `regex` crate, which the reference uses);
the same compiled pattern strips at write time and routes query terms at read time.

The rows keep the original values (our row store, or a companion's source Parquet), so a hash
only narrows: every filter it answers is re-checked on the rows (no wrong row from a collision).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from indextables_spark.errors import InvalidOptionError

EXACT_ONLY = "exact_only"
UUID_EXACTONLY = "text_uuid_exactonly"
UUID_STRIP = "text_uuid_strip"
CUSTOM_EXACTONLY = "text_custom_exactonly:"
CUSTOM_STRIP = "text_custom_strip:"
UUID_REGEX = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
COMPANION_SUFFIX = "__uuids"  # the reference's name for the hash field of a text_*_exactonly column
MODES_DESCRIPTION = (
    "exact_only, text_uuid_exactonly, text_uuid_strip, text_custom_exactonly:<regex>, text_custom_strip:<regex>"
)


@dataclass(frozen=True)
class StringMode:
    """A compact string mode, parsed."""

    mode: str  # as recorded: the prefix lower-cased, a custom regex as given
    pattern: str | None  # the stripped pattern (None: exact_only)
    keeps_matches: bool  # *_exactonly: the matches are hashed into `<col>__uuids`

    @property
    def hashed_whole(self) -> bool:
        return self.mode == EXACT_ONLY

    @property
    def regex(self) -> re.Pattern[str]:
        assert self.pattern is not None
        return _compiled(self.pattern)


def is_compact_mode(value: str) -> bool:
    low = value.strip().lower()
    return low in (EXACT_ONLY, UUID_EXACTONLY, UUID_STRIP) or low.startswith((CUSTOM_EXACTONLY, CUSTOM_STRIP))


def normalize(value: str) -> str:
    """The mode's prefix lower-cased, a custom regex kept as given (the reference's normalizeForNative)."""
    v = value.strip()
    i = v.find(":")
    return v[:i].lower() + v[i:] if i >= 0 else v.lower()


def parse_mode(value: str, where: str = "") -> StringMode:
    """The mode a typemap value names; InvalidOptionError for an empty or invalid custom regex."""
    mode = normalize(value)
    if mode == EXACT_ONLY:
        return StringMode(mode, None, False)
    if mode in (UUID_EXACTONLY, UUID_STRIP):
        return StringMode(mode, UUID_REGEX, mode == UUID_EXACTONLY)
    for prefix in (CUSTOM_EXACTONLY, CUSTOM_STRIP):
        if mode.startswith(prefix):
            pattern = mode[len(prefix) :]
            if not pattern:
                raise InvalidOptionError(f"{where}indexing mode {value!r}: the regex after ':' is empty")
            try:
                _compiled(pattern)
            except re.error as e:
                raise InvalidOptionError(f"{where}indexing mode {value!r}: invalid regex {pattern!r} ({e})") from None
            return StringMode(mode, pattern, prefix == CUSTOM_EXACTONLY)
    raise InvalidOptionError(f"{where}{value!r} is not a compact string mode ({MODES_DESCRIPTION})")


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def string_hash(value: str) -> int:
    """The reference's hash of a string (see the module doc): never 0."""
    import xxhash  # lazy: only tables with a compact mode need it

    h = int(xxhash.xxh64_intdigest(value.encode("utf-8"), 0))
    return h if h != 0 else 1


def strip(mode: StringMode, value: str) -> str:
    """The text indexed for a value: each match of the mode's pattern replaced by one space."""
    return mode.regex.sub(" ", value)


def matches(mode: StringMode, value: str) -> list[str]:
    """The pattern's matches in a value (hashed into `<col>__uuids` by the *_exactonly modes)."""
    return [m.group(0) for m in mode.regex.finditer(value)]
