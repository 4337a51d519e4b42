"""Tantivy query text as tokens (approximately as Tantivy's grammar splits it): what locating a
query error (query_errors.py) and rewriting a query (query_rewrite.py) both read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

OPERATORS = frozenset({"AND", "OR", "NOT"})
BOOST_RE = re.compile(r"\^[0-9.]+$")


@dataclass(frozen=True)
class QueryToken:
    kind: str  # word | phrase | field | ( | ) | [ | ]
    start: int  # character offsets in the query
    end: int
    text: str  # unescaped: the word, the phrase's content, the field's name


def lex_query(query: str) -> tuple[list[QueryToken], list[int]]:
    """Tokens of a query as Tantivy's grammar splits it (approximately), and stray quotes (positions)."""
    toks: list[QueryToken] = []
    stray: list[int] = []
    n = len(query)
    i = 0
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c in "()":
            toks.append(QueryToken(c, i, i + 1, c))
            i += 1
        elif c in "[{":
            toks.append(QueryToken("[", i, i + 1, c))
            i += 1
        elif c in "]}":
            toks.append(QueryToken("]", i, i + 1, c))
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
            toks.append(QueryToken("phrase", i, min(j + 1, n), "".join(text)))
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
                toks.append(QueryToken("field", i, j, "".join(text)))
                j = k + 1
            else:
                toks.append(QueryToken("word", i, j, "".join(text)))
            i = j
    return toks, stray


def tokens_in_context(toks: list[QueryToken]) -> Iterator[tuple[QueryToken | None, QueryToken, bool]]:
    """(previous token, token, inside a range `[… TO …]`) for each token of a query."""
    depth = 0
    for prev, tok in zip([None, *toks], toks):
        if tok.kind == "[":
            depth += 1
        elif tok.kind == "]":
            depth = max(0, depth - 1)
        yield prev, tok, depth > 0
