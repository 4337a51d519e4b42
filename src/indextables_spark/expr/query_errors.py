"""Where an invalid full-text query goes wrong: a character position and a short reason.

tantivy-py's `Index.parse_query` rejects a query without saying where. This module finds the place:

1. `parse_query_lenient` reports most syntax errors with a position (a UTF-8 byte offset, converted
   here to a character offset): unclosed `(` or quote, stray `)`, a leading `AND`/`OR`, ...
2. Some syntax errors only the strict parser sees: an operator at the end (`a AND`), two operators in
   a row (`a OR OR b`), a quote inside a word (`don't`). They are found by scanning the query.
3. An unknown field (`Field does not exist: 'foo'`) is found as its `foo:` outside quoted phrases.
4. A value that does not parse as its field's type (`n:abc`, `n:>=x`, `n:[1 TO x]`, `n:IN [1 x]`,
   `n:(1 OR x)`) is found from the field types (Tantivy field name -> text|json|i64|u64|f64|bool|date).

Anything else gets no position. Nothing here raises: a failure to locate is just "no position".
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

OPERATORS = frozenset({"AND", "OR", "NOT"})
_COMPARATORS = (">=", "<=", ">", "<")

_POSITION_RE = re.compile(r"^(?:Syntax Error: )?(?P<what>.*?) at position (?P<pos>\d+)$", re.S)
_UNKNOWN_FIELD_RE = re.compile(r"^Field does not exist: '(?P<field>.*)'$", re.S)
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_UINT_RE = re.compile(r"^\+?[0-9]+$")
# Rust's f64::from_str: decimal with optional exponent, or inf / infinity / nan (any case).
_FLOAT_RE = re.compile(r"^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)$", re.I)
_RFC3339_RE = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_BOOST_RE = re.compile(r"\^[0-9.]+$")

# error class -> the field types whose values it is about, and how a bad value is described
_TYPED = {
    "int": ({"i64", "u64"}, "an integer"),
    "float": ({"f64"}, "a number"),
    "bool": ({"bool"}, "true or false"),
    "date": ({"date"}, "an RFC 3339 date-time"),
}
_CLASS_OF_LENIENT = {
    "ExpectedIntError": "int",
    "ExpectedFloatError": "float",
    "ExpectedBoolError": "bool",
    "DateFormatError": "date",
}
_CLASS_OF_MESSAGE = (
    ("Expected a valid integer", "int"),
    ("Expected a float value", "float"),
    ("Expected a bool value", "bool"),
    ("The date field has an invalid format", "date"),
)


@dataclass(frozen=True)
class _Tok:
    kind: str  # word | phrase | field | ( | ) | [ | ]
    start: int  # character offsets in the query
    end: int
    text: str  # unescaped: the word, the phrase's content, the field's name


def _lex(query: str) -> tuple[list[_Tok], list[int]]:
    """Tokens of a query as Tantivy's grammar splits it (approximately), and stray quotes (positions)."""
    toks: list[_Tok] = []
    stray: list[int] = []
    n = len(query)
    i = 0
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c in "()":
            toks.append(_Tok(c, i, i + 1, c))
            i += 1
        elif c in "[{":
            toks.append(_Tok("[", i, i + 1, c))
            i += 1
        elif c in "]}":
            toks.append(_Tok("]", i, i + 1, c))
            i += 1
        elif (
            c in "+-"
            and i + 1 < n
            and not query[i + 1].isspace()
            and (i == 0 or query[i - 1].isspace() or query[i - 1] in "([")
        ):
            i += 1  # occur prefix: +a, -a, -"a b", -(a b)
        elif c in "\"'":
            j = i + 1
            text = []
            while j < n and query[j] != c:
                if query[j] == "\\" and j + 1 < n:
                    j += 1
                text.append(query[j])
                j += 1
            toks.append(_Tok("phrase", i, min(j + 1, n), "".join(text)))
            i = j + 1
        elif c == ":":
            i += 1  # a colon after a space: "a : b"
        else:
            j = i
            text = []
            while j < n and not query[j].isspace() and query[j] not in "()[]{}:":
                if query[j] == "\\" and j + 1 < n:
                    j += 1
                elif query[j] in "\"'":
                    stray.append(j)
                text.append(query[j])
                j += 1
            k = j
            while k < n and query[k].isspace():
                k += 1
            if k < n and query[k] == ":":  # field: (Tantivy allows "n :x" and "n: x")
                toks.append(_Tok("field", i, j, "".join(text)))
                j = k + 1
            else:
                toks.append(_Tok("word", i, j, "".join(text)))
            i = j
    return toks, stray


def _with_context(toks: list[_Tok]) -> Iterator[tuple[_Tok | None, _Tok, bool]]:
    """(previous token, token, inside a range `[… TO …]`) for each token of a query."""
    depth = 0
    for prev, tok in zip([None, *toks], toks):
        if tok.kind == "[":
            depth += 1
        elif tok.kind == "]":
            depth = max(0, depth - 1)
        yield prev, tok, depth > 0


def negations_as_prefix(query: str) -> str:
    """`a AND NOT b` as `a AND -b`. Tantivy parses the former as Must(a) + Must(Bool[MustNot(b)]),
    a purely negative clause that matches nothing, so the whole query matched no document; Lucene,
    Elasticsearch and Quickwit read it as "a and not b", which is what `-b` means to Tantivy."""
    if "NOT" not in query:
        return query
    toks, _ = _lex(query)
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
    from indextables_spark.core.split.analyzers import lowercases
    from indextables_spark.expr.text import regex_escape

    toks, _ = _lex(query)
    edits: list[tuple[int, int, str]] = []
    distances: dict[str, set[int]] = {}
    fuzzy_terms: list[tuple[int, int, str, int, list[str], bool]] = []  # start, end, term, d, targets, fielded
    for prev, tok, in_range in _with_context(toks):
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
        if raw in OPERATORS or raw.startswith("~") or _BOOST_RE.search(raw):
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
    from indextables_spark.core.split.analyzers import CJK_BIGRAM, bigram_text, has_cjk

    if not has_cjk(query) or not any(tok == CJK_BIGRAM for _, tok in fields.values()):
        return query
    toks, _ = _lex(query)
    edits: list[tuple[int, int, str]] = []
    for prev, tok, in_range in _with_context(toks):
        if tok.kind not in ("word", "phrase") or in_range or not has_cjk(tok.text):
            continue
        field = prev.text if prev is not None and prev.kind == "field" else None
        targets = [field] if field is not None else list(default_fields)
        if not any(fields.get(f, (None, None))[1] == CJK_BIGRAM for f in targets):
            continue
        raw = query[tok.start : tok.end]
        if tok.kind == "word" and (raw.endswith("*") or _FUZZY_RE.match(raw) or _BOOST_RE.search(raw)):
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
    from indextables_spark.expr.text import regex_escape

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
    import ipaddress

    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError as e:
        raise TermRewriteError(position, f"{cidr!r} is not an IPv4/IPv6 address block ({e})") from None
    return f"[{net.network_address} TO {net.broadcast_address}]"


def _char_pos(query: str, byte_pos: int) -> int:
    return len(query.encode("utf-8")[:byte_pos].decode("utf-8", "ignore"))


def _lenient_errors(index: Any, query: str, default_fields: Sequence[str]) -> list[Any]:
    try:
        _, errors = index.parse_query_lenient(query, list(default_fields))
        return list(errors)
    except Exception:
        return []
    except BaseException as e:  # pyo3 PanicException derives from BaseException
        if type(e).__name__ == "PanicException":
            return []
        raise


# -- syntax errors --------------------------------------------------------------------------------


def _operator_fault(toks: list[_Tok]) -> tuple[int, str] | None:
    """The first operator with no term before it, no term after it, or right after another operator
    (or after a field, or a lone `+`/`-`): errors of the strict parser the lenient one lets pass."""
    in_range = False
    prev: _Tok | None = None
    for k, t in enumerate(toks):
        if t.kind == "[":
            in_range = True
        elif t.kind == "]":
            in_range = False
        elif t.kind == "word" and t.text in ("+", "-") and not in_range:
            # a lone occur prefix (but "NOT +" and "f:+" search for the term "+")
            if t.text == "-" or prev is None or not (prev.text == "NOT" or prev.kind == "field"):
                return t.start, f"{t.text!r} must be attached to a term ({t.text}term)"
        elif t.kind == "word" and t.text in OPERATORS and not in_range:
            nxt = toks[k + 1] if k + 1 < len(toks) else None
            if prev is not None and prev.kind == "field":
                return t.start, f"{t.text!r} right after '{prev.text}:' (quote it to search for the word)"
            if prev is not None and prev.kind == "word" and prev.text in OPERATORS and t.text != "NOT":
                return t.start, f"{t.text!r} right after {prev.text!r}"
            if t.text != "NOT" and (prev is None or prev.kind == "("):
                return t.start, f"{t.text!r} has no term before it"
            if nxt is None or nxt.kind == ")":
                return t.start, f"{t.text!r} has no term after it"
        prev = t
    return None


def _syntax_reason(query: str, pos: int, what: str, toks: list[_Tok]) -> str:
    if what == "unparsed end of query" and query[pos : pos + 1] == ")":
        return "unmatched ')'"
    if what.startswith("missing delimiter "):
        quote = what[len("missing delimiter ") :].lstrip("\\")
        opened = next(
            (t.start for t in reversed(toks) if t.kind == "phrase" and t.start < pos and query[t.start] == quote), None
        )
        where = f" (opened at position {opened})" if opened is not None else ""
        return f"missing closing {quote}{where}"
    return what


def _syntax_fault(query: str, toks: list[_Tok], stray: list[int], lenient: list[Any]) -> tuple[int, str] | None:
    found: list[tuple[int, str]] = []
    op = _operator_fault(toks)
    if op is not None:
        found.append(op)
    for err in lenient:
        m = _POSITION_RE.match(str(err)) if type(err).__name__ == "SyntaxError" else None
        if m is None:
            continue
        pos, what = min(_char_pos(query, int(m["pos"])), len(query)), m["what"]
        if what.startswith("Found unexpected boolean operator"):
            if op is not None:
                break  # the operator scan found it (at the operator)
            before = [t for t in toks if t.kind == "word" and t.text in OPERATORS and t.start < pos]
            if before:
                pos, what = before[-1].start, f"{before[-1].text!r} has no term before it"
        found.append((pos, _syntax_reason(query, pos, what, toks)))
        break
    if not found and stray:
        found.append((stray[0], "quote inside a word (quote the whole term, or escape it with \\)"))
    return min(found, key=lambda f: f[0]) if found else None


# -- unknown fields and typed values --------------------------------------------------------------


def _unknown_field(toks: list[_Tok], field: str | None) -> tuple[int, str] | None:
    for t in toks:
        if t.kind == "field" and t.text == field:
            return t.start, f"unknown field {field!r}"
    return None


def _field_type(name: str | None, field_types: Mapping[str, str]) -> str | None:
    if name is not None and name in field_types:
        return field_types[name]
    parts = (name or "").split(".")
    for k in range(len(parts) - 1, 0, -1):  # attrs.user: a path inside JSON field attrs
        if field_types.get(".".join(parts[:k])) == "json":
            return "json"
    return None


def _valid(value: str, ftype: str) -> bool:
    if value == "*":
        return True
    if ftype == "i64":
        return bool(_INT_RE.match(value)) and -(2**63) <= int(value) < 2**63
    if ftype == "u64":
        return bool(_UINT_RE.match(value)) and int(value) < 2**64
    if ftype == "f64":
        return bool(_FLOAT_RE.match(value))
    if ftype == "bool":
        return value in ("true", "false")
    if ftype == "date":
        return bool(_RFC3339_RE.match(value))
    return True


def _typed_value(
    toks: list[_Tok], cls: str, field_types: Mapping[str, str], default_fields: Sequence[str]
) -> tuple[int, str] | None:
    """The first value (in query order) of a field of the error's type that does not parse as that type."""
    types, wanted = _TYPED[cls]
    owners: list[str | None] = [None]  # None: the default fields
    pending: str | None = None  # field: waiting for its value
    bracket: tuple[str | None, bool] | None = None  # (owner, is an IN set) inside [...]

    def check(owner: str | None, value: str, start: int) -> tuple[int, str] | None:
        names = [owner] if owner is not None else list(default_fields)
        for name in names:
            ftype = _field_type(name, field_types)
            if ftype in types and not _valid(value, ftype):
                if value == "":
                    return start, f"no value for field {name!r} ({ftype})"
                if _INT_RE.match(value) and ftype in ("i64", "u64"):
                    return start, f"{value!r} is out of range for field {name!r} ({ftype})"
                return start, f"{value!r} is not {wanted} (field {name!r} is {ftype})"
        return None

    for k, t in enumerate(toks):
        owner = pending if pending is not None else owners[-1]
        if bracket is not None:
            if t.kind == "]":
                bracket = None
            elif t.kind in ("word", "phrase") and not (t.kind == "word" and t.text == "TO" and not bracket[1]):
                hit = check(bracket[0], t.text, t.start + (t.kind == "phrase"))
                if hit:
                    return hit
            continue
        if t.kind == "field":
            pending = t.text
            continue
        if t.kind == "(":
            owners.append(owner)
        elif t.kind == ")":
            if len(owners) > 1:
                owners.pop()
        elif t.kind == "[":
            bracket = (owner, False)
        elif (
            t.kind == "word"
            and t.text == "IN"
            and pending is not None
            and k + 1 < len(toks)
            and toks[k + 1].kind == "["
        ):
            bracket = (owner, True)  # the "[" is skipped by the bracket state
            pending = None
            continue
        elif t.kind == "word" and t.text in OPERATORS:
            pass
        elif t.kind == "word" and t.text in _COMPARATORS and pending is not None:
            continue  # "n:>= 5": the value is the next word
        elif t.kind in ("word", "phrase"):
            value, start = t.text, t.start + (t.kind == "phrase")
            if t.kind == "word":
                for c in _COMPARATORS:
                    if value.startswith(c):
                        value, start = value[len(c) :], t.start + len(c)
                        break
                value = _BOOST_RE.sub("", value)
            hit = check(owner, value, start)
            if hit:
                return hit
        pending = None
    return None


def _unfielded_range(toks: list[_Tok]) -> tuple[int, str] | None:
    """The first range (`[a TO b]`, `{a TO b}`, `IN [a b]`) with no field before it."""
    owners: list[str | None] = [None]
    pending: str | None = None
    for k, t in enumerate(toks):
        owner = pending if pending is not None else owners[-1]
        pending = None
        if t.kind == "field":
            pending = t.text
        elif t.kind == "(":
            owners.append(owner)
        elif t.kind == ")" and len(owners) > 1:
            owners.pop()
        elif t.kind == "word" and t.text == "IN" and k + 1 < len(toks) and toks[k + 1].kind == "[":
            if owner is None:
                return t.start, "a set (IN [...]) needs a field (field:IN [a b])"
            pending = owner
        elif t.kind == "[" and owner is None:
            return t.start, "a range needs a field (field:[a TO b])"
    return None


def _typed_class(message: str) -> str | None:
    return next((cls for prefix, cls in _CLASS_OF_MESSAGE if message.startswith(prefix)), None)


# -- entry points ---------------------------------------------------------------------------------


def locate_query_error(
    index: Any,
    query: str,
    default_fields: Sequence[str],
    error: BaseException | str,
    field_types: Mapping[str, str] | None = None,
) -> tuple[int | None, str]:
    """(0-based character position of the fault or None, short reason) of a query `index.parse_query`
    rejected with `error`. Without a position the reason is Tantivy's message."""
    message = str(error)
    try:
        found = _locate(index, query, default_fields, message, field_types or {})
    except Exception:
        found = None
    return found if found is not None else (None, message)


def _locate(
    index: Any, query: str, default_fields: Sequence[str], message: str, field_types: Mapping[str, str]
) -> tuple[int, str] | None:
    toks, stray = _lex(query)
    lenient = _lenient_errors(index, query, default_fields)
    if message.startswith("Syntax Error"):
        return _syntax_fault(query, toks, stray, lenient)
    m = _UNKNOWN_FIELD_RE.match(message)
    if m is not None:
        hit = _unknown_field(toks, m["field"])
        if hit:
            return hit
    if message.startswith("Unsupported query: Range query need"):
        hit = _unfielded_range(toks)
        if hit:
            return hit
    cls = _typed_class(message)
    if cls is not None:
        hit = _typed_value(toks, cls, field_types, default_fields)
        if hit:
            return hit
    # Tantivy's strict message can name another problem than the one that broke the query
    # ("score:abc" -> "Only excluding terms given"); the lenient parser's errors say which.
    for err in lenient:
        name = type(err).__name__
        hit = None
        if name == "SyntaxError":
            hit = _syntax_fault(query, toks, stray, [err])
        elif name == "FieldDoesNotExistError":
            hit = _unknown_field(toks, getattr(err, "field", None))
        elif name in _CLASS_OF_LENIENT:
            hit = _typed_value(toks, _CLASS_OF_LENIENT[name], field_types, default_fields)
        if hit:
            return hit
    hit = _operator_fault(toks)
    if hit is None and "Only excluding terms" in message:
        # the whole query is at fault, from its start
        hit = (0, "every term is excluded (NOT/-); add one that must match, e.g. '* AND NOT a'")
    return hit


def _width(text: str) -> int:
    """Terminal columns of text (wide East Asian characters take 2, combining marks 0)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def format_query_error(query: str, position: int | None, reason: str, message: str, note: str = "") -> str:
    """The text of a QueryParseError: the query, where and why it is invalid, Tantivy's message, a note.

    invalid query 'body:(a' at position 7 (expected ')'):
      body:(a
             ^
    Syntax Error: body:(a (searchable fields: body, n; default fields: body)
    """
    tail = f"{message} {note}" if note else message
    if position is None:
        return f"invalid query {query!r}: {tail}"
    shown = "".join(" " if unicodedata.category(c) == "Cc" else c for c in query)
    caret = " " * _width(shown[:position]) + "^"
    return f"invalid query {query!r} at position {position} ({reason}):\n  {shown}\n  {caret}\n{tail}"
