"""Partition predicates: a small parser, exact evaluation on a FileEntry table (through
arrow_eval.py), and manifest pruning against `partitionBounds` (partition_bounds.py).

Grammar (case-insensitive keywords):

    expr       := or_expr
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := not_expr ("AND" not_expr)*
    not_expr   := "NOT" not_expr | primary
    primary    := "(" expr ")" | predicate
    predicate  := column op literal | literal op column
                | column ["NOT"] "IN" "(" literal ("," literal)* ")"
                | column "IS" ["NOT"] "NULL"
                | column ["NOT"] "BETWEEN" literal "AND" literal
    op         := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    literal    := 'text' (quote doubled to escape) | number | TRUE | FALSE
    column     := name | `quoted name` | "quoted name"

The parser builds the filter model (indextables_spark/expr/model.py, the tree Spark's pushed
filters and the split readers use): `a != 1` is Not(EqualTo), `a IS NOT NULL` IsNotNull, BETWEEN
the AND of two bounds. Literals stay as parsed (str, int, float, bool); DELETE converts them to
the column types (expr/where.py).

Partition values are stored as strings. Columns whose Spark type (from the table's schemaString)
is numeric are compared numerically when filtering files exactly; for manifest pruning, bounds are
lexicographic string min/max (what every writer stores), so numeric columns are pruned only by
equality/IN on the canonical text of the value, never by ranges. SQL three-valued logic: a
comparison with a missing (null) partition value is unknown, and unknown rows are not selected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.errors import IndexTablesError
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.lexer import LexError, Lexicon, Token, lex
from indextables_spark.expr.model import (
    And,
    Comparison,
    EqualTo,
    Filter,
    FilterRewriter,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThanOrEqual,
    Not,
    Or,
    StringMatch,
    columns_of,
)
from indextables_spark.expr.partition_bounds import may_match
from indextables_spark.expr.partition_values import (
    CLASS_OF,
    OP_OF,
    is_integral,
    is_numeric,
    literal_text,
    map_values,
    number,
)


class PartitionFilterError(IndexTablesError):
    """A partition filter that cannot be parsed or names a column that is not a partition column."""


# ---- the filter model's comparisons -------------------------------------------------------------


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def compare(column: str, op: str, value: Any) -> Filter:
    """`column op value` (op one of = != < <= > >=) in the filter model; != is Not(EqualTo)."""
    return Not(EqualTo(column, value)) if op == "!=" else CLASS_OF[op](column, value)


@dataclass(frozen=True)
class PartitionPredicate:
    """A parsed partition filter plus the Spark types of the partition columns it may use."""

    expr: Filter
    column_types: Mapping[str, str]
    text: str = ""

    @property
    def columns(self) -> set[str]:
        return columns_of(self.expr)

    def may_match(self, bounds: Mapping[str, tuple[str | None, str | None]] | None) -> bool:
        """False only when no file summarised by these partition bounds can satisfy the filter."""
        if bounds is None:
            return True
        return may_match(self.expr, bounds, self.column_types)

    def __str__(self) -> str:
        return self.text or repr(self.expr)


# ---- tokenizer / parser -------------------------------------------------------------------------

_LEXICON = Lexicon(
    number=r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?",
    word=r"[A-Za-z_][A-Za-z0-9_.]*",
    punct="(),",
    double_quoted="ident",
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN"}


@dataclass
class _Tok:
    kind: str  # str, id, num, op, punct, kw, end
    value: Any
    pos: int


def _tokenize(text: str, what: str = "partition filter") -> list[_Tok]:
    try:
        tokens = lex(text, _LEXICON)
    except LexError as e:
        if e.char == "'":
            raise PartitionFilterError(f"{what} {text!r}: unterminated string starting at position {e.pos}") from None
        raise PartitionFilterError(f"{what} {text!r}: unexpected character {e.char!r} at position {e.pos}") from None
    return [_tok(t) for t in tokens]


def _tok(t: Token) -> _Tok:
    if t.kind == "string":
        return _Tok("str", t.value, t.pos)
    if t.kind == "ident":
        return _Tok("id", t.value, t.pos)
    if t.kind == "number":
        return _Tok("num", float(t.text) if any(c in t.text for c in ".eE") else int(t.text), t.pos)
    if t.kind == "op":
        return _Tok("op", {"==": "=", "<>": "!="}.get(t.text, t.text), t.pos)
    if t.kind == "word":
        up = t.text.upper()
        return _Tok("kw", up, t.pos) if up in _KEYWORDS else _Tok("id", t.text, t.pos)
    return _Tok(t.kind, None if t.kind == "end" else t.text, t.pos)  # punct, end


class _Parser:
    def __init__(
        self,
        text: str,
        columns: Mapping[str, str],
        what: str = "partition filter",
        column_kind: str = "partition column",
    ):
        self.text = text
        self.what = what  # names the text in errors
        self.column_kind = column_kind  # what the known columns are ("partition column", "column")
        self.toks = _tokenize(text, what)
        self.i = 0
        self.columns = columns
        self._lower = {c.lower(): c for c in columns}

    def error(self, msg: str, tok: _Tok | None = None) -> PartitionFilterError:
        tok = tok or self.peek()
        where = "end of input" if tok.kind == "end" else f"position {tok.pos}"
        return PartitionFilterError(f"{self.what} {self.text!r}: {msg} at {where}")

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def next(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept_kw(self, kw: str) -> bool:
        t = self.peek()
        if t.kind == "kw" and t.value == kw:
            self.i += 1
            return True
        return False

    def expect_punct(self, p: str) -> None:
        t = self.next()
        if t.kind != "punct" or t.value != p:
            raise self.error(f"expected {p!r}", t)

    def parse(self) -> Filter:
        if self.peek().kind == "end":
            raise self.error("empty filter")
        e = self.or_expr()
        if self.peek().kind != "end":
            raise self.error(f"unexpected {self.describe(self.peek())}")
        return e

    @staticmethod
    def describe(t: _Tok) -> str:
        if t.kind == "str":
            return f"string '{t.value}'"
        return repr(t.value) if t.kind != "end" else "end of input"

    def or_expr(self) -> Filter:
        e = self.and_expr()
        while self.accept_kw("OR"):
            e = Or(e, self.and_expr())
        return e

    def and_expr(self) -> Filter:
        e = self.not_expr()
        while self.accept_kw("AND"):
            e = And(e, self.not_expr())
        return e

    def not_expr(self) -> Filter:
        if self.accept_kw("NOT"):
            return Not(self.not_expr())
        return self.primary()

    def primary(self) -> Filter:
        t = self.peek()
        if t.kind == "punct" and t.value == "(":
            self.next()
            e = self.or_expr()
            self.expect_punct(")")
            return e
        return self.predicate()

    def column(self, t: _Tok) -> str:
        name = self.columns and (t.value if t.value in self.columns else self._lower.get(str(t.value).lower()))
        if not name:
            known = ", ".join(self.columns) or "none"
            raise PartitionFilterError(
                f"{self.what} {self.text!r}: column {t.value!r} at position {t.pos} is not a "
                f"{self.column_kind} ({self.column_kind}s: {known})"
            )
        return name

    def literal(self) -> Any:
        t = self.next()
        if t.kind in ("str", "num"):
            return t.value
        if t.kind == "kw" and t.value in ("TRUE", "FALSE"):
            return t.value == "TRUE"
        if t.kind == "kw" and t.value == "NULL":
            raise self.error("comparison with NULL is never true; use IS NULL / IS NOT NULL", t)
        raise self.error(f"expected a literal value, got {self.describe(t)}", t)

    def predicate(self) -> Filter:
        t = self.next()
        if t.kind == "id":
            col = self.column(t)
            nxt = self.peek()
            if nxt.kind == "op":
                self.next()
                return compare(col, nxt.value, self.literal())
            if self.accept_kw("IS"):
                negated = self.accept_kw("NOT")
                if not self.accept_kw("NULL"):
                    raise self.error("expected NULL after IS")
                return IsNotNull(col) if negated else IsNull(col)
            negated = self.accept_kw("NOT")
            if self.accept_kw("IN"):
                self.expect_punct("(")
                values = [self.literal()]
                while self.peek().kind == "punct" and self.peek().value == ",":
                    self.next()
                    values.append(self.literal())
                self.expect_punct(")")
                e: Filter = In(col, tuple(values))
                return Not(e) if negated else e
            if self.accept_kw("BETWEEN"):
                lo = self.literal()
                if not self.accept_kw("AND"):
                    raise self.error("expected AND in BETWEEN")
                hi = self.literal()
                e = And(GreaterThanOrEqual(col, lo), LessThanOrEqual(col, hi))
                return Not(e) if negated else e
            raise self.error(f"expected a comparison operator, IN, BETWEEN or IS after column {col!r}")
        if t.kind in ("str", "num") or (t.kind == "kw" and t.value in ("TRUE", "FALSE")):
            value = t.value if t.kind != "kw" else t.value == "TRUE"
            op = self.next()
            if op.kind != "op":
                raise self.error("expected a comparison operator", op)
            ct = self.next()
            if ct.kind != "id":
                raise self.error(f"expected a {self.column_kind}", ct)
            return compare(self.column(ct), _FLIP[op.value], value)
        raise self.error(f"expected a predicate, got {self.describe(t)}", t)


def parse_partition_filter(
    text: str | PartitionPredicate,
    partition_columns: Sequence[str] | Mapping[str, str],
    column_types: Mapping[str, str] | None = None,
) -> PartitionPredicate:
    """Parse a filter over partition columns. partition_columns: names, or {name: Spark type}."""
    if isinstance(text, PartitionPredicate):
        return text
    if not isinstance(text, str):
        raise PartitionFilterError(f"partition filter must be a string, got {type(text).__name__}")
    if isinstance(partition_columns, Mapping):
        types = {str(k): str(v) for k, v in partition_columns.items()}
    else:
        types = {str(c): "string" for c in partition_columns}
    if column_types:
        for k, v in column_types.items():
            if k in types:
                types[k] = str(v)
    expr = _Parser(text, types).parse()
    return PartitionPredicate(expr, types, text)


def parse_predicate(text: str, column_types: Mapping[str, str], what: str = "predicate") -> Filter:
    """Parse the same grammar over any columns ({name: Spark type}); errors name `what`."""
    if not isinstance(text, str):
        raise PartitionFilterError(f"{what} must be a string, got {type(text).__name__}")
    return _Parser(text, {str(k): str(v) for k, v in column_types.items()}, what, "column").parse()


# ---- exact evaluation on a FileEntry table --------------------------------------------------------


# Not core.split.read.skipping.prune_partition (Spark-typed values, exact, one partition at a time): this
# compares parsed literals leniently (year = '10'; text when not numbers) over the whole table.
class _TypedLeaves(FilterRewriter):
    """The predicate over typed columns of a FileEntry table's partition values, for arrow_eval:
    a leaf on a numeric column (by its Spark type) reads the values as numbers when they all are
    and the literal is one (as floats when either is fractional), otherwise as text against the
    literal's text. `columns` holds the arrays the rewritten leaves name."""

    def __init__(self, table: pa.Table, types: Mapping[str, str]):
        self.pv = table.column("partitionValues")
        self.types = types
        self.columns: dict[str, pa.Array] = {}
        self._numbers: dict[str, pa.Array | None] = {}

    def text(self, col: str) -> str:
        name = "text:" + col
        if name not in self.columns:
            self.columns[name] = map_values(self.pv, col)
        return name

    def numbers(self, col: str) -> pa.Array | None:
        if col not in self._numbers:
            trimmed = pc.utf8_trim_whitespace(self.columns[self.text(col)])
            target = pa.int64() if is_integral(self.types.get(col, "")) else pa.float64()
            try:
                self._numbers[col] = pc.cast(trimmed, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                try:
                    self._numbers[col] = pc.cast(trimmed, pa.float64())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    self._numbers[col] = None  # not numbers after all: compare as text
        return self._numbers[col]

    def operand(self, col: str, value: Any) -> tuple[str, Any]:
        """(name of the column array, literal) compared in the column's type."""
        if is_numeric(self.types.get(col, "string")):
            numbers = self.numbers(col)
            literal = number(value)
            if numbers is not None and literal is not None:
                if pa.types.is_integer(numbers.type) and not isinstance(literal, float):
                    self.columns["int:" + col] = numbers
                    return "int:" + col, literal
                if "float:" + col not in self.columns:
                    self.columns["float:" + col] = pc.cast(numbers, pa.float64())
                return "float:" + col, float(literal)
        return self.text(col), literal_text(value)

    def visit_comparison(self, e: Comparison) -> Filter:
        if type(e) not in OP_OF:
            raise TypeError(f"partition filters have no {type(e).__name__} ({e!r})")
        name, literal = self.operand(e.column, e.value)
        return type(e)(name, literal)

    def visit_in(self, e: In) -> Filter:
        parts = [self.visit(EqualTo(e.column, v)) for v in e.values]
        out = parts[0]
        for p in parts[1:]:
            out = Or(out, p)
        return out

    def visit_is_null(self, e: IsNull) -> Filter:
        return IsNull(self.text(e.column))

    def visit_is_not_null(self, e: IsNotNull) -> Filter:
        return IsNotNull(self.text(e.column))

    def visit_string_match(self, e: StringMatch) -> Filter:
        raise TypeError(f"partition filters have no LIKE ({e!r})")


def filter_mask(files_table: pa.Table, predicate: PartitionPredicate) -> pa.Array:
    """Boolean mask (unknown → False) of the rows whose partition values satisfy the predicate."""
    if files_table.num_rows == 0:
        return pa.array([], pa.bool_())
    leaves = _TypedLeaves(files_table, predicate.column_types)
    expr = leaves.visit(predicate.expr)
    return arrow_mask(pa.table(leaves.columns), [expr])


def filter_files_table(files_table: pa.Table, predicate: PartitionPredicate | None) -> pa.Table:
    """The rows of a FileEntry table whose partition values satisfy the predicate (exact)."""
    if predicate is None or files_table.num_rows == 0:
        return files_table
    return files_table.filter(filter_mask(files_table, predicate))


# ---- manifest pruning -------------------------------------------------------------------------------


class HasPartitionBounds(Protocol):
    """What manifest pruning reads of a manifest (state_manifest.ManifestInfo)."""

    @property
    def partition_bounds(self) -> Mapping[str, tuple[str | None, str | None]] | None: ...


ManifestT = TypeVar("ManifestT", bound=HasPartitionBounds)


def prune_manifests(manifests: Iterable[ManifestT], predicate: PartitionPredicate | None) -> list[ManifestT]:
    """The manifests (objects with .partition_bounds) that may hold files matching the predicate."""
    if predicate is None:
        return list(manifests)
    return [m for m in manifests if predicate.may_match(m.partition_bounds)]
