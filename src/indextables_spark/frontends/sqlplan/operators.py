"""The reference's infix search operators as function calls a SQL parser understands.

`body TEXTSEARCH 'q'` is not Spark SQL; sqlglot's Spark tokenizer (which knows strings, quoted
identifiers and comments) finds each `<column or *> TEXTSEARCH|FIELDMATCH|indexquery '<string>'`
and it becomes `indextables_search_op('textsearch', <column>, '<string>')` (`*` becomes the
virtual `_indexall` column, qualified as written: `t.* TEXTSEARCH` → `t._indexall`). The rest of
the text is kept byte for byte, so positions after parsing still point into a text we own.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

OP_FUNCTION = "indextables_search_op"
ALL_FUNCTION = "indexqueryall"
INFIX = ("textsearch", "fieldmatch", "indexquery")
INDEXALL = "_indexall"

_NAME_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER)


@dataclass(frozen=True)
class Rewritten:
    text: str  # the statement with every infix operator as a function call
    operators: int  # how many were rewritten


def tokenize(text: str) -> list[Token] | None:
    try:
        return list(Spark().tokenize(text))
    except TokenError:
        return None


def mentions_operators(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in INFIX) or ALL_FUNCTION in low


def rewrite(text: str) -> Rewritten:
    """The statement with `x TEXTSEARCH 'q'` (FIELDMATCH, indexquery) as function calls."""
    if not mentions_operators(text):
        return Rewritten(text, 0)
    tokens = tokenize(text)
    if tokens is None:
        return Rewritten(text, 0)
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)
    for i, tok in enumerate(tokens):
        if tok.token_type not in _NAME_TOKENS or tok.text.lower() not in INFIX:
            continue
        if i + 1 >= len(tokens) or tokens[i + 1].token_type != TokenType.STRING or i == 0:
            continue
        lhs = _operand_start(tokens, i - 1)
        if lhs is None:
            continue
        start = tokens[lhs].start
        column = text[start : tokens[i - 1].end + 1]
        if tokens[i - 1].token_type == TokenType.STAR:
            column = column[:-1] + INDEXALL  # `*` / `t.*` → the all-fields column
        literal = text[tokens[i + 1].start : tokens[i + 1].end + 1]
        edits.append((start, tokens[i + 1].end + 1, f"{OP_FUNCTION}('{tok.text.lower()}', {column}, {literal})"))
    out, last = [], 0
    for start, end, repl in edits:
        out.append(text[last:start])
        out.append(repl)
        last = end
    out.append(text[last:])
    return Rewritten("".join(out), len(edits))


def _operand_start(tokens: list[Token], j: int) -> int | None:
    """Index of the first token of the column reference ending at token j (`a`, `t.a`, `` `x` ``,
    `*`, `t.*`), or None when token j does not end one."""
    if tokens[j].token_type == TokenType.STAR:
        if j >= 2 and tokens[j - 1].token_type == TokenType.DOT and tokens[j - 2].token_type in _NAME_TOKENS:
            return j - 2
        return j
    if tokens[j].token_type not in _NAME_TOKENS:
        return None
    while j >= 2 and tokens[j - 1].token_type == TokenType.DOT and tokens[j - 2].token_type in _NAME_TOKENS:
        j -= 2
    return j
