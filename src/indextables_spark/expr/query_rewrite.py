"""Query rewriting before Tantivy parses a query: `a AND NOT b` as `a AND -b`, Lucene's fuzzy
(`term~N`) and prefix (`prefix*`) terms, CIDR blocks on IP fields, CJK text as bigrams."""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from indextables_spark.expr.query_tokens import BOOST_RE, OPERATORS, lex_query, tokens_in_context
from indextables_spark.expr.text import regex_escape


def negations_as_prefix(query: str) -> str:
    """`a AND NOT b` as `a AND -b`. Tantivy parses the former as Must(a) + Must(Bool[MustNot(b)]),
    a purely negative clause that matches nothing, so the whole query matched no document; Lucene,
    Elasticsearch and Quickwit read it as "a and not b", which is what `-b` means to Tantivy."""
    if "NOT" not in query:
        return query
    toks, _ = lex_query(query)
    out, last = [], 0
    for prev, tok, nxt in zip([None, *toks], toks, toks[1:]):
        if tok.kind == "word" and query[tok.start : tok.end] == "NOT" and (prev is None or prev.kind != "field"):
            out.append(query[last : tok.start] + "-")
            last = nxt.start
    return "".join(out) + query[last:] if out else query


@dataclass(frozen=True)
class TermRewriteError(Exception):
    """A fuzzy or prefix term that cannot be searched: where (character offset) and why."""

    position: int
    reason: str


_FUZZY_RE = re.compile(r"^(?P<term>.*[^\\~])~(?P<distance>[0-9]+)$")
MAX_EDIT_DISTANCE = 2


def fuzzy_and_prefix_terms(
    query: str, fields: Mapping[str, tuple[str, str | None]], default_fields: Sequence[str]
) -> tuple[str, dict[str, tuple[bool, int, bool]]]:
    """Lucene's `term~N` (fuzzy, edit distance N ≤ 2) and `prefix*` in Tantivy's terms.

    Tantivy's parser reads `kestral~1` as the phrase "kestral 1" and `kestr*` as the term "kestr",
    so both matched nothing. Prefixes become regex terms (`/kestr.*/`, lowercased when the field's
    tokenizer lowercases). Fuzzy terms become plain terms plus the parser's per-field fuzziness
    (`fuzzy_fields`) when every term of that field in the query has the same distance (the
    parser's fuzziness is per field); in a field whose terms differ (`body:kestral~1 AND
    body:falcon`), each fuzzy term becomes a regex of every string within its edit distance
    (`fuzzy_regex`). fields: Tantivy field name -> (type, tokenizer). Returns (query, fuzzy_fields)."""
    if "~" not in query and "*" not in query and "/" not in query:
        return query, {}
    # lazy: core/schema's analyzers (a layer below expr) load only when a query is rewritten
    from indextables_spark.core.schema.analyzers import lowercases

    toks, _ = lex_query(query)
    edits: list[tuple[int, int, str]] = []
    distances: dict[str, set[int]] = {}
    fuzzy_terms: list[tuple[int, int, str, int, list[str], bool]] = []  # start, end, term, d, targets, fielded
    for prev, tok, in_range in tokens_in_context(toks):
        if (
            tok.kind == "phrase"
            and not in_range
            and "/" in tok.text
            and prev is not None
            and prev.kind == "field"
            and fields.get(prev.text, (None, None))[0] == "ip"
        ):
            edits.append((tok.start, tok.end, _cidr_range(tok.text, tok.start)))  # ip:"fe80::/64"
            continue
        if tok.kind != "word" or in_range:
            continue
        raw = query[tok.start : tok.end]
        if raw in OPERATORS or raw.startswith("~") or BOOST_RE.search(raw):
            continue
        field = prev.text if prev is not None and prev.kind == "field" else None
        targets = [field] if field is not None else list(default_fields)
        fuzzy = _FUZZY_RE.match(raw)
        if "/" in raw and field is not None and fields.get(field, (None, None))[0] == "ip":
            edits.append((tok.start, tok.end, _cidr_range(raw, tok.start)))
        elif fuzzy:
            d = int(fuzzy.group("distance"))
            if d > MAX_EDIT_DISTANCE:
                raise TermRewriteError(
                    tok.start + len(fuzzy.group("term")), f"edit distance {d}: fuzzy terms take ~0, ~1 or ~2"
                )
            for f in targets:
                distances.setdefault(f, set()).add(d)
            fuzzy_terms.append((tok.start, tok.end, fuzzy.group("term"), d, targets, field is not None))
        elif raw.endswith("*") and not raw.endswith("\\*") and raw != "*":
            prefix = tok.text[:-1]
            regexes = []
            for f in targets:
                ftype, tokenizer = fields.get(f, (None, None))
                if ftype != "text":
                    raise TermRewriteError(
                        tok.start,
                        f"prefix term on {f!r}, a {ftype or 'unknown'} field: "
                        f"prefixes apply to text and string columns",
                    )
                p = prefix.lower() if lowercases(tokenizer) else prefix
                regexes.append("/" + regex_escape(p).replace("/", "\\/") + ".*/")
            if field is not None:
                edits.append((tok.start, tok.end, regexes[0]))
            else:  # Tantivy's regex terms name their field: one per default field
                alts = [f"{f}:{r}" for f, r in zip(targets, regexes)]
                edits.append((tok.start, tok.end, alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")"))
        else:
            for f in targets:
                distances.setdefault(f, set()).add(0)
    mixed = {f for f, ds in distances.items() if len(ds) > 1}
    fuzzy_fields = {f: (False, next(iter(ds)), True) for f, ds in distances.items() if ds != {0} and f not in mixed}
    for start, end, term, d, targets, fielded in fuzzy_terms:
        if not any(f in mixed for f in targets):
            edits.append((start, end, term))
            continue
        regexes = []
        for f in targets:
            ftype, tokenizer = fields.get(f, (None, None))
            if ftype != "text":
                raise TermRewriteError(
                    start,
                    f"fuzzy term on {f!r}, a {ftype or 'unknown'} field, next to other "
                    f"terms of that field: fuzzy terms then apply to text and string columns",
                )
            regexes.append(fuzzy_regex(term.lower() if lowercases(tokenizer) else term, d, start))
        if fielded:
            edits.append((start, end, regexes[0]))
        else:
            alts = [f"{f}:{r}" for f, r in zip(targets, regexes)]
            edits.append((start, end, alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")"))
    out, last = [], 0
    for start, end, text in sorted(edits):
        out.append(query[last:start] + text)
        last = end
    return "".join(out) + query[last:], fuzzy_fields


def cjk_bigram_terms(query: str, fields: Mapping[str, tuple[str, str | None]], default_fields: Sequence[str]) -> str:
    """Terms and phrases of `cjk_bigram` fields analyzed as their documents were (analyzers.py):
    a run of CJK characters becomes its overlapping bigrams, searched as a phrase, so `body:東京都`
    is `body:"東京 京都"`. An unfielded term is rewritten when a default field is `cjk_bigram`
    (on other default fields the rewritten phrase matches what the term matched: CJK runs are
    single tokens there)."""
    # lazy: core/schema's analyzers (a layer below expr) load only when a query is rewritten
    from indextables_spark.core.schema.analyzers import CJK_BIGRAM, bigram_text, has_cjk

    if not has_cjk(query) or not any(tok == CJK_BIGRAM for _, tok in fields.values()):
        return query
    toks, _ = lex_query(query)
    edits: list[tuple[int, int, str]] = []
    for prev, tok, in_range in tokens_in_context(toks):
        if tok.kind not in ("word", "phrase") or in_range or not has_cjk(tok.text):
            continue
        field = prev.text if prev is not None and prev.kind == "field" else None
        targets = [field] if field is not None else list(default_fields)
        if not any(fields.get(f, (None, None))[1] == CJK_BIGRAM for f in targets):
            continue
        raw = query[tok.start : tok.end]
        if tok.kind == "word" and (raw.endswith("*") or _FUZZY_RE.match(raw) or BOOST_RE.search(raw)):
            continue  # fuzzy/prefix terms stay terms
        words = bigram_text(tok.text).split()
        text = words[0] if len(words) == 1 and tok.kind == "word" else '"' + " ".join(words) + '"'
        edits.append((tok.start, tok.end, text))
    out, last = [], 0
    for start, end, text in edits:
        out.append(query[last:start] + text)
        last = end
    return "".join(out) + query[last:]


MAX_MIXED_FUZZY_CHARS = 16  # longer ~1 terms exceed Tantivy's regex automaton limit (1,000 states)


def fuzzy_regex(term: str, distance: int, position: int = 0) -> str:
    """A regex term (`/…/`) matching every string within `distance` edits of `term` — deletions,
    insertions, substitutions and transpositions of adjacent characters, as Tantivy's fuzzy terms
    count them — for distance 1 and terms of at most MAX_MIXED_FUZZY_CHARS characters: Tantivy
    compiles regexes to automata of at most 1,000 states, which a distance-2 term of 7 characters
    already exceeds; TermRewriteError otherwise."""
    if distance > 1 or len(term) > MAX_MIXED_FUZZY_CHARS:
        raise TermRewriteError(
            position,
            f"fuzzy term {term!r}~{distance} next to terms of the same field with "
            f"another distance: only ~1 terms of up to {MAX_MIXED_FUZZY_CHARS} "
            f"characters can be (Tantivy makes all terms of a field fuzzy alike); "
            f"give the field's terms one ~N",
        )
    return "/" + _within(term, distance).replace("/", "\\/") + "/"


@functools.lru_cache(maxsize=256)
def _within(term: str, distance: int) -> str:
    """Regex of the strings within `distance` edits of `term`, factored on the first character."""
    if distance == 0:
        return "".join(regex_escape(c) for c in term)
    if not term:
        return ".{0,%d}" % distance
    head, rest = regex_escape(term[0]), term[1:]
    alts = [
        head + _within(rest, distance),  # first character kept
        "." + _within(rest, distance - 1),  # substituted
        _within(rest, distance - 1),  # deleted
        "." + _within(term, distance - 1),
    ]  # a character inserted before it
    if rest:
        alts.append(regex_escape(rest[0]) + head + _within(rest[1:], distance - 1))  # transposed
    return "(" + "|".join(alts) + ")"


def _cidr_range(cidr: str, position: int) -> str:
    """`10.2.0.0/16` as the range `[10.2.0.0 TO 10.2.255.255]` of an IP field."""
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError as e:
        raise TermRewriteError(position, f"{cidr!r} is not an IPv4/IPv6 address block ({e})") from None
    return f"[{net.network_address} TO {net.broadcast_address}]"
