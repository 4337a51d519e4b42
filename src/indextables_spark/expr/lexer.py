"""THE lexer of the package's SQL-ish texts (partition filters and predicates: partition_filter.py;
the SQL commands: frontends/sql_parser.py): tokens with their positions, read by each parser its
own way. What differs between the languages is a `Lexicon`; quoting (a doubled quote stands for
one), operators and whitespace are shared."""

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


@functools.lru_cache(maxsize=None)
def _pattern(lexicon: Lexicon) -> re.Pattern[str]:
    double = r'"(?:[^"]|"")*"'
    strings = [r"'(?:[^']|'')*'"] + ([double] if lexicon.double_quoted == "string" else [])
    idents = [r"`(?:[^`]|``)*`"] + ([double] if lexicon.double_quoted == "ident" else [])
    parts = [
        r"(?P<ws>\s+)",
        f"(?P<string>{'|'.join(strings)})",
        f"(?P<ident>{'|'.join(idents)})",
        f"(?P<number>{lexicon.number})",
        f"(?P<word>{lexicon.word})",
        f"(?P<op>{'|'.join(map(re.escape, OPERATORS))})",
        f"(?P<punct>[{re.escape(lexicon.punct)}])",
    ] + ([r"(?P<other>.)"] if lexicon.other else [])
    return re.compile("|".join(parts), re.DOTALL)


def lex(text: str, lexicon: Lexicon) -> list[Token]:
    """The tokens of text (whitespace dropped), ending with an "end" token at len(text)."""
    pattern = _pattern(lexicon)
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        m = pattern.match(text, pos)
        if not m:
            raise LexError(pos, text[pos])
        kind, raw = m.lastgroup or "", m.group()
        if kind in ("string", "ident"):
            out.append(Token(kind, raw, pos, raw[1:-1].replace(raw[0] * 2, raw[0])))
        elif kind != "ws":
            out.append(Token(kind, raw, pos, raw))
        pos = m.end()
    out.append(Token("end", "", len(text), ""))
    return out
