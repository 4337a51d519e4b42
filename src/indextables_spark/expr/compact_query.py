"""Query terms on compact string columns (core/schema/compact_strings.py) rewritten before Tantivy
parses a query, as tantivy4java's hash_field_rewriter.rs does for the reference:

- `exact_only` column `c`: `c:value` and `c:"a phrase"` become `c:<xxHash64 of the text>` (a
  phrase is one whole value); wildcard (`c:ab*`), regex (`c:/a.*/`), fuzzy (`c:abc~1`), phrase
  prefix (`c:"ab"*`) and range (`c:[a TO b]`) terms are refused: a hash keeps no characters.
- `text_*_exactonly` column `c`: a term that is one match of the column's pattern (a UUID)
  becomes `c__uuids:<hash>`; a term or phrase holding matches among other text becomes the
  phrase of its stripped text AND the hashes of its matches (the index stripped them the same
  way, so the remaining tokens are adjacent there too).
- `text_*_strip` column `c`: a term or phrase holding a match is refused (the matches are not
  indexed: it could match no row).

Terms with a field are rewritten, and terms of a `c:( … )` group (the form FIELDMATCH / TEXTSEARCH
/ indexquery on a column take: expr/operators.py); an unfielded term searches the default fields,
which hold the stripped text of these columns (docs/guide/writing.md).
"""

from __future__ import annotations

import re
from typing import Sequence

from indextables_spark.core.schema import compact_strings
from indextables_spark.core.schema.types import IndexedField
from indextables_spark.expr.query_rewrite import TermRewriteError
from indextables_spark.expr.query_tokens import BOOST_RE, OPERATORS, QueryToken, lex_query, tokens_in_context

_FUZZY_RE = re.compile(r"~[0-9]*$")


def compact_terms(query: str, fields: Sequence[IndexedField]) -> str:
    """The query with its terms on compact string columns rewritten (see the module doc);
    TermRewriteError (position, reason) for a term such a column cannot answer."""
    modes = {f.name: f for f in fields if f.string_mode is not None and f.type != "u64"}
    modes.update({f.name: f for f in fields if f.string_mode == compact_strings.EXACT_ONLY})
    if not modes or not any(name in query for name in modes):
        return query
    # a *_exactonly column's hash field follows its text field (column_specs.py; usually named
    # `<col>__uuids`, with a suffix when a column of that name exists)
    hash_fields = {
        fields[i - 1].name: f.name
        for i, f in enumerate(fields)
        if i > 0 and f.string_mode is not None and f.type == "u64" and f.string_mode != compact_strings.EXACT_ONLY
    }
    toks, _ = lex_query(query)
    edits: list[tuple[int, int, str]] = []
    groups: list[str | None] = []  # the field of each open `field:( … )` group (FIELDMATCH's form)
    for prev, tok, in_range in tokens_in_context(toks):
        explicit = prev is not None and prev.kind == "field"
        name = prev.text if explicit and prev is not None else (groups[-1] if groups else None)
        if tok.kind == "(":
            groups.append(name)
            continue
        if tok.kind == ")":
            if groups:
                groups.pop()
            continue
        if name is None or name not in modes:
            continue
        field = modes[name]
        start = prev.start if explicit and prev is not None else tok.start
        edit = _rewrite_term(query, tok, in_range, field, hash_fields, explicit)
        if edit is not None:
            edits.append((start if edit[0] else tok.start, tok.end, edit[1]))
    out, last = [], 0
    for start, end, text in edits:
        out.append(query[last:start] + text)
        last = end
    return "".join(out) + query[last:]


def _rewrite_term(
    query: str, tok: QueryToken, in_range: bool, field: IndexedField, hash_fields: dict[str, str], explicit: bool
) -> tuple[bool, str] | None:
    """(whether the edit replaces the field name too, the new text) of one term on a compact
    column; None to keep it; TermRewriteError for a term the column cannot answer."""
    mode = compact_strings.parse_mode(field.string_mode or "")
    where = f"field {field.name!r} is indexed with {mode.mode}"
    if tok.kind == "[":
        if mode.hashed_whole:
            raise TermRewriteError(tok.start, f"{where} (hashes of whole values): range queries are not supported")
        return None
    if tok.kind not in ("word", "phrase") or in_range:
        return None
    raw = query[tok.start : tok.end]
    if tok.kind == "word" and (raw in OPERATORS or BOOST_RE.search(raw)):
        return None
    special = _special(raw, tok.kind, query[tok.end : tok.end + 1])
    if mode.hashed_whole:
        if special:
            raise TermRewriteError(
                tok.start,
                f"{where} (hashes of whole values): {special} queries are not supported; "
                f'search the whole value ({field.name}:"…" or =)',
            )
        return False, str(compact_strings.string_hash(tok.text))
    found = compact_strings.matches(mode, tok.text)
    if not found:
        return None
    if special:
        raise TermRewriteError(tok.start, f"{where}: a {special} query on text holding its pattern's matches")
    if not mode.keeps_matches:
        raise TermRewriteError(
            tok.start,
            f"{where}: the matches of its pattern ({found[0]!r}) are stripped from the index, so this term "
            f"can match no row; filter with = or LIKE (decided on the rows), or index the column with an "
            f"*_exactonly mode",
        )
    hashes = hash_fields.get(field.name)
    assert hashes is not None  # *_exactonly columns have one (column_specs.py)
    parts = [f"{hashes}:{compact_strings.string_hash(m)}" for m in dict.fromkeys(found)]
    rest = compact_strings.strip(mode, tok.text).strip()
    if rest:
        parts.insert(0, f'{field.name}:"{_escape(rest)}"')
    return explicit, "(" + " AND ".join(parts) + ")" if len(parts) > 1 else parts[0]


def _special(raw: str, kind: str, after: str) -> str | None:
    """What makes a term more than a literal value: wildcard, regex, fuzzy, phrase prefix."""
    if kind == "phrase":
        return "phrase prefix" if after == "*" else None
    if raw.startswith("/") and raw.endswith("/") and len(raw) > 1:
        return "regex"
    if _FUZZY_RE.search(raw) and not raw.endswith("\\~"):
        return "fuzzy"
    if re.search(r"(?<!\\)[*?]", raw):
        return "wildcard"
    return None


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
