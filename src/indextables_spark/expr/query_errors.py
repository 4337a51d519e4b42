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

import re
import unicodedata
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from indextables_spark.expr.query_tokens import BOOST_RE, OPERATORS, QueryToken, lex_query

if TYPE_CHECKING:
    import tantivy

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


def _char_pos(query: str, byte_pos: int) -> int:
    return len(query.encode("utf-8")[:byte_pos].decode("utf-8", "ignore"))


def _lenient_errors(index: tantivy.Index, query: str, default_fields: Sequence[str]) -> list[Any]:
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


def _operator_fault(toks: list[QueryToken]) -> tuple[int, str] | None:
    """The first operator with no term before it, no term after it, or right after another operator
    (or after a field, or a lone `+`/`-`): errors of the strict parser the lenient one lets pass."""
    in_range = False
    prev: QueryToken | None = None
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


def _syntax_reason(query: str, pos: int, what: str, toks: list[QueryToken]) -> str:
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


def _syntax_fault(query: str, toks: list[QueryToken], stray: list[int], lenient: list[Any]) -> tuple[int, str] | None:
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


def _unknown_field(toks: list[QueryToken], field: str | None) -> tuple[int, str] | None:
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
    toks: list[QueryToken], cls: str, field_types: Mapping[str, str], default_fields: Sequence[str]
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
                value = BOOST_RE.sub("", value)
            hit = check(owner, value, start)
            if hit:
                return hit
        pending = None
    return None


def _unfielded_range(toks: list[QueryToken]) -> tuple[int, str] | None:
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
    index: tantivy.Index,
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
    index: tantivy.Index, query: str, default_fields: Sequence[str], message: str, field_types: Mapping[str, str]
) -> tuple[int, str] | None:
    toks, stray = lex_query(query)
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
