"""The reference's search operators as one Tantivy query (Spark-free; used by SQL and DataFrames).

    col TEXTSEARCH 'q'    q on a tokenized text column (refused on raw strings, numbers, ...)
    col FIELDMATCH 'q'    q on a column indexed whole: raw strings, numbers, dates, booleans
    col indexquery 'q'    q with `col` as the default field, no type check
    * TEXTSEARCH|FIELDMATCH|indexquery 'q', indexqueryall('q'), _indexall indexquery 'q'
                          q over every default field (TEXTSEARCH/FIELDMATCH checked on each)

A condition is one operator or AND/OR/NOT of conditions (`Search`); it compiles to one query text
in which each operator's query is scoped to its column (`col:(q)`: Tantivy's grammar lets a
field-qualified term inside q override that default, as the reference's parseQuery(q, [col])
does). Spark gets a condition as the value of the `_indexall = '…'` filter, encoded (`encode`) so
that the reader checks the types against the splits it reads, whatever route built the filter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence, Union

from indextables_spark.core.schema.types import ColumnSpec
from indextables_spark.errors import QueryParseError

KINDS = ("textsearch", "fieldmatch", "indexquery")
ALL_FIELDS = "*"  # the column of `* TEXTSEARCH 'q'`, `indexqueryall('q')`
_MARK = "\x01indextables-search:"  # starts an encoded condition in an `_indexall` value


class SearchOperatorError(QueryParseError):
    """A search operator used on a column its kind does not fit (names the column and its indexing)."""


@dataclass(frozen=True)
class Op:
    kind: str  # textsearch | fieldmatch | indexquery
    column: str  # a column name, or ALL_FIELDS
    query: str


@dataclass(frozen=True)
class AndS:
    parts: tuple["Search", ...]


@dataclass(frozen=True)
class OrS:
    parts: tuple["Search", ...]


@dataclass(frozen=True)
class NotS:
    child: "Search"


Search = Union[Op, AndS, OrS, NotS]


def _tokenized(spec: ColumnSpec) -> bool:
    return any(f.type == "text" and not f.exact for f in spec.indexed_fields)


def _indexing(spec: ColumnSpec) -> str:
    if _tokenized(spec):
        tok = next(f.tokenizer for f in spec.indexed_fields if f.type == "text" and not f.exact)
        return f"tokenized text (tokenizer {tok!r})"
    if spec.exact_field is not None:
        return "a raw string (indexed whole)"
    return f"{spec.kind} (indexed whole)"


def check(op: Op, specs: Sequence[ColumnSpec]) -> None:
    """SearchOperatorError when the operator does not fit its column(s), as the reference checks."""
    if op.kind not in KINDS:
        raise SearchOperatorError(f"unknown search operator {op.kind!r}; expected one of {', '.join(KINDS)}")
    name = op.kind.upper()
    if op.column == ALL_FIELDS:
        if op.kind == "indexquery":
            return
        text = [s for s in specs if not s.partition and (s.exact_field is not None or _tokenized(s))]
        wrong = [s.name for s in text if _tokenized(s) != (op.kind == "textsearch")]
        if not text:
            raise SearchOperatorError(
                f"* {name} '{op.query}': the table has no text columns; use `* indexquery` to search without "
                f"a type check"
            )
        if wrong:
            other = "FIELDMATCH" if op.kind == "textsearch" else "TEXTSEARCH"
            what = "not tokenized" if op.kind == "textsearch" else "tokenized"
            raise SearchOperatorError(
                f"* {name} '{op.query}': column(s) {wrong} are {what}; use `{wrong[0]} {other} '…'`, or "
                f"`* indexquery '…'` to search every field without a type check"
            )
        return
    spec = _spec(op, specs)
    if op.kind == "indexquery":
        return
    if op.kind == "textsearch" and not _tokenized(spec):
        raise SearchOperatorError(
            f"cannot use TEXTSEARCH on column {spec.name!r}: it is {_indexing(spec)}, not tokenized; use "
            f"FIELDMATCH, or index it as text (option indexing.typemap.{spec.name}=text)",
            query=op.query,
        )
    if op.kind == "fieldmatch" and _tokenized(spec):
        raise SearchOperatorError(
            f"cannot use FIELDMATCH on column {spec.name!r}: it is {_indexing(spec)}; use TEXTSEARCH, or "
            f"index it whole (option indexing.typemap.{spec.name}=string)",
            query=op.query,
        )


def _spec(op: Op, specs: Sequence[ColumnSpec]) -> ColumnSpec:
    by_name = {s.name.lower(): s for s in specs}
    spec = by_name.get(op.column.lower())
    if spec is None:
        raise SearchOperatorError(
            f"{op.kind.upper()} on column {op.column!r}: no such column (columns: {[s.name for s in specs]})",
            query=op.query,
        )
    if spec.partition:
        raise SearchOperatorError(
            f"{op.kind.upper()} on column {spec.name!r}: a partition column is not in the index; compare it "
            f"with = / IN instead",
            query=op.query,
        )
    if spec.value_field is None:
        raise SearchOperatorError(f"{op.kind.upper()} on column {spec.name!r}: the column is not indexed")
    return spec


def to_query(search: Search, specs: Sequence[ColumnSpec]) -> str:
    """The Tantivy query text of a condition (every operator checked against `specs`)."""
    if isinstance(search, Op):
        check(search, specs)
        if not search.query.strip():
            raise SearchOperatorError(f"{search.kind.upper()} on {search.column!r}: the query is empty")
        if search.column == ALL_FIELDS:
            return search.query  # as written (error positions point into it)
        field = _spec(search, specs).value_field
        assert field is not None
        return f"{field.name}:({search.query})"
    if isinstance(search, AndS):
        return " AND ".join(_grouped(p, specs) for p in search.parts)
    if isinstance(search, OrS):
        return " OR ".join(_grouped(p, specs) for p in search.parts)
    # NOT alone matches nothing in Tantivy: everything except the child
    return f"* AND NOT {_grouped(search.child, specs)}"


def _grouped(search: Search, specs: Sequence[ColumnSpec]) -> str:
    text = to_query(search, specs)
    return text if isinstance(search, Op) and search.column != ALL_FIELDS else f"({text})"


# ---- the `_indexall` value that carries a condition to the reader ---------------------------------


def _to_json(search: Search) -> object:
    if isinstance(search, Op):
        return {"op": search.kind, "column": search.column, "query": search.query}
    if isinstance(search, AndS):
        return {"and": [_to_json(p) for p in search.parts]}
    if isinstance(search, OrS):
        return {"or": [_to_json(p) for p in search.parts]}
    return {"not": _to_json(search.child)}


def _from_json(v: object) -> Search:
    if not isinstance(v, dict) or len(v) not in (1, 3):
        raise SearchOperatorError(f"malformed search condition: {v!r}")
    if "op" in v:
        return Op(str(v["op"]), str(v["column"]), str(v["query"]))
    if "and" in v:
        return AndS(tuple(_from_json(p) for p in v["and"]))
    if "or" in v:
        return OrS(tuple(_from_json(p) for p in v["or"]))
    if "not" in v:
        return NotS(_from_json(v["not"]))
    raise SearchOperatorError(f"malformed search condition: {v!r}")


def encode(search: Search) -> str:
    """The `_indexall` filter value carrying this condition (`decode` turns it into the query)."""
    return _MARK + json.dumps(_to_json(search), separators=(",", ":"), ensure_ascii=False)


def decode(value: str, specs: Sequence[ColumnSpec]) -> str:
    """The query text of an `_indexall` value: an encoded condition (checked against `specs`), or
    a query as the user wrote it (`WHERE _indexall = 'body:spark'`)."""
    if not value.startswith(_MARK):
        return value
    try:
        tree = json.loads(value[len(_MARK) :])
    except json.JSONDecodeError as e:
        raise SearchOperatorError(f"malformed search condition {value[len(_MARK) :][:80]!r}: {e}") from None
    return to_query(_from_json(tree), specs)


def describe(search: Search) -> str:
    """The condition as the SQL operators write it (messages, EXPLAIN)."""
    if isinstance(search, Op):
        q = search.query.replace("'", "\\'")
        return f"{search.column} {search.kind.upper()} '{q}'"
    if isinstance(search, AndS):
        return "(" + " AND ".join(describe(p) for p in search.parts) + ")"
    if isinstance(search, OrS):
        return "(" + " OR ".join(describe(p) for p in search.parts) + ")"
    return f"NOT {describe(search.child)}"
