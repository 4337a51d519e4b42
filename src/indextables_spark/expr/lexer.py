"""THE lexer of the package's SQL-ish texts (partition filters and predicates: partition_filter.py;
the SQL commands: frontends/sql_parser.py; the literal arguments of table-function calls in
spark.sql text: spark/table_functions.py): tokens with their positions, read by each parser its
own way. What differs between the languages is a `Lexicon`; quoting (a doubled quote stands for
one) and whitespace are shared. `lex` reads a whole text; `token_at` one token where a parser
stands (a call's arguments inside a larger statement)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

OPERATORS = ("<=", ">=", "<>", "!=", "==", "=", "<", ">")


@dataclass(frozen=True)
class Lexicon:
    """What one language's tokens look like."""

    number: str  # regex of a number
    word: str  # regex of a word (an unquoted name or keyword)
    punct: str  # the punctuation characters
    double_quoted: str  # what "…" is: "string" or "ident"
    other: bool = False  # an unexpected character is an "other" token (the parser decides), not a LexError
    backslash_escapes: bool = False  # in strings, as Spark SQL literals: \n \t \r \0, \x is x
    operators: tuple[str, ...] = OPERATORS


@dataclass(frozen=True)
class Token:
    kind: str  # string, ident (a quoted name), number, word, op, punct, other, end
    text: str  # the raw text (quotes included)
    pos: int  # character offset in the text
    value: str  # the content of a string or quoted name (a doubled quote as one); else the raw text


class LexError(Exception):
    """A character no token starts with (at `pos`); the caller words the message."""

    def __init__(self, pos: int, char: str):
        super().__init__(f"unexpected character {char!r} at position {pos}")
        self.pos = pos
        self.char = char


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def _quoted(quote: str, escapes: bool) -> str:
    q = re.escape(quote)
    return f"{q}(?:[^{q}\\\\]|\\\\.|{q}{q})*{q}" if escapes else f"{q}(?:[^{q}]|{q}{q})*{q}"


@functools.lru_cache(maxsize=None)
def _pattern(lexicon: Lexicon) -> re.Pattern[str]:
    esc = lexicon.backslash_escapes
    double = _quoted('"', esc)
    strings = [_quoted("'", esc)] + ([double] if lexicon.double_quoted == "string" else [])
    idents = [_quoted("`", False)] + ([double] if lexicon.double_quoted == "ident" else [])
    operators = sorted(lexicon.operators, key=len, reverse=True)  # the longest first: `<=` before `<`
    parts = [
        r"(?P<ws>\s+)",
        f"(?P<string>{'|'.join(strings)})",
        f"(?P<ident>{'|'.join(idents)})",
        f"(?P<number>{lexicon.number})",
        f"(?P<word>{lexicon.word})",
        f"(?P<op>{'|'.join(map(re.escape, operators))})",
        f"(?P<punct>[{re.escape(lexicon.punct)}])",
    ] + ([r"(?P<other>.)"] if lexicon.other else [])
    return re.compile("|".join(parts), re.DOTALL)


def _value(kind: str, raw: str, lexicon: Lexicon) -> str:
    """A string's or quoted name's content (a doubled quote as one; escapes read where the language has them)."""
    body = raw[1:-1].replace(raw[0] * 2, raw[0])
    if kind == "string" and lexicon.backslash_escapes:
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body, flags=re.DOTALL)
    return body


def _match(text: str, pos: int, lexicon: Lexicon) -> tuple[Token | None, int]:
    """(the token at pos or None for whitespace, the position after it); LexError if none starts there."""
    m = _pattern(lexicon).match(text, pos)
    if not m:
        raise LexError(pos, text[pos])
    kind, raw = m.lastgroup or "", m.group()
    if kind == "ws":
        return None, m.end()
    value = _value(kind, raw, lexicon) if kind in ("string", "ident") else raw
    return Token(kind, raw, pos, value), m.end()


def lex(text: str, lexicon: Lexicon) -> list[Token]:
    """The tokens of text (whitespace dropped), ending with an "end" token at len(text)."""
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        token, pos = _match(text, pos, lexicon)
        if token is not None:
            out.append(token)
    out.append(Token("end", "", len(text), ""))
    return out


def token_at(text: str, pos: int, lexicon: Lexicon) -> Token | None:
    """The token at pos (whitespace before it skipped), "end" at the end of text, None where no token starts."""
    while pos < len(text):
        try:
            token, pos = _match(text, pos, lexicon)
        except LexError:
            return None
        if token is not None:
            return token
    return Token("end", "", len(text), "")


def end_of(token: Token) -> int:
    """The position just after a token."""
    return token.pos + len(token.text)
