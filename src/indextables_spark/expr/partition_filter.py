"""Partition predicates: a small parser, exact evaluation on a FileEntry table, and manifest
pruning against `partitionBounds` (avro-state-file.md "Read Path", `boundsOverlapFilter`).

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

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.errors import IndexTablesError
from indextables_spark.core.log.actions import Metadata
from indextables_spark.core.log.file_entries import map_values
from indextables_spark.expr.model import (
    And,
    Comparison,
    EqualTo,
    Filter,
    FilterVisitor,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    Or,
    StringMatch,
    columns_of,
)

INTEGRAL_TYPES = frozenset({"byte", "short", "integer", "int", "long", "bigint", "tinyint", "smallint"})
FRACTIONAL_TYPES = frozenset({"float", "double", "real"})


class PartitionFilterError(IndexTablesError):
    """A partition filter that cannot be parsed or names a column that is not a partition column."""


# ---- the filter model's comparisons -------------------------------------------------------------

_CLASS_OF: dict[str, type[Comparison]] = {
    "=": EqualTo,
    "<": LessThan,
    "<=": LessThanOrEqual,
    ">": GreaterThan,
    ">=": GreaterThanOrEqual,
}
_OP_OF: dict[type[Filter], str] = {cls: op for op, cls in _CLASS_OF.items()}
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATED: dict[type[Filter], type[Filter]] = {
    LessThan: GreaterThanOrEqual,
    LessThanOrEqual: GreaterThan,
    GreaterThan: LessThanOrEqual,
    GreaterThanOrEqual: LessThan,
    IsNull: IsNotNull,
    IsNotNull: IsNull,
}


def compare(column: str, op: str, value: Any) -> Filter:
    """`column op value` (op one of = != < <= > >=) in the filter model; != is Not(EqualTo)."""
    return Not(EqualTo(column, value)) if op == "!=" else _CLASS_OF[op](column, value)


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
        return _may_match(_nnf(self.expr), bounds, self.column_types)

    def __str__(self) -> str:
        return self.text or repr(self.expr)


# ---- tokenizer / parser -------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<str>'(?:[^']|'')*')
  | (?P<qid>`(?:[^`]|``)*`|"(?:[^"]|"")*")
  | (?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),])
  | (?P<id>[A-Za-z_][A-Za-z0-9_.]*)
    """,
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN"}


@dataclass
class _Tok:
    kind: str  # str, id, num, op, punct, kw, end
    value: Any
    pos: int


def _tokenize(text: str, what: str = "partition filter") -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            if text[pos] == "'":
                raise PartitionFilterError(f"{what} {text!r}: unterminated string starting at position {pos}")
            raise PartitionFilterError(f"{what} {text!r}: unexpected character {text[pos]!r} at position {pos}")
        kind = m.lastgroup
        raw = m.group()
        if kind == "str":
            out.append(_Tok("str", raw[1:-1].replace("''", "'"), pos))
        elif kind == "qid":
            q = raw[0]
            out.append(_Tok("id", raw[1:-1].replace(q + q, q), pos))
        elif kind == "num":
            val: Any = float(raw) if any(c in raw for c in ".eE") else int(raw)
            out.append(_Tok("num", val, pos))
        elif kind == "op":
            out.append(_Tok("op", {"==": "=", "<>": "!="}.get(raw, raw), pos))
        elif kind == "punct":
            out.append(_Tok("punct", raw, pos))
        elif kind == "id":
            up = raw.upper()
            out.append(_Tok("kw", up, pos) if up in _KEYWORDS else _Tok("id", raw, pos))
        pos = m.end()
    out.append(_Tok("end", None, len(text)))
    return out


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


def partition_column_types(metadata: Metadata) -> dict[str, str]:
    """{partition column: Spark type name} from a Metadata action (string when unknown)."""
    types: dict[str, str] = {}
    try:
        schema = json.loads(metadata.schema_string)
        for f in schema.get("fields", []):
            t = f.get("type")
            types[f.get("name")] = t if isinstance(t, str) else "struct"
    except (ValueError, AttributeError, TypeError):
        pass
    return {c: types.get(c, "string") for c in metadata.partition_columns}


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


def _is_integral(t: str) -> bool:
    return t.lower() in INTEGRAL_TYPES


def _is_numeric(t: str) -> bool:
    tl = t.lower()
    return tl in INTEGRAL_TYPES or tl in FRACTIONAL_TYPES or tl.startswith("decimal")


def _literal_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        s = str(value).strip()
        return int(s) if re.fullmatch(r"[-+]?\d+", s) else float(s)
    except ValueError:
        return None


# Not expr.skipping.prune_partition (Spark-typed values, exact, one partition at a time): this
# compares parsed literals leniently (year = '10'; text when not numbers) over the whole table.
class _Evaluator(FilterVisitor[Any]):
    """Exact evaluation on the partition values of a FileEntry table (Kleene logic)."""

    def __init__(self, table: pa.Table, types: Mapping[str, str]):
        self.pv = table.column("partitionValues")
        self.types = types
        self.n = table.num_rows
        self._text: dict[str, pa.Array] = {}
        self._num: dict[str, pa.Array | None] = {}

    def text(self, col: str) -> pa.ChunkedArray:
        if col not in self._text:
            self._text[col] = map_values(self.pv, col)
        return self._text[col]

    def numeric(self, col: str) -> pa.Array | None:
        if col not in self._num:
            arr = self.text(col)
            target = pa.int64() if _is_integral(self.types.get(col, "")) else pa.float64()
            try:
                self._num[col] = pc.cast(pc.utf8_trim_whitespace(arr), target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                try:
                    self._num[col] = pc.cast(pc.utf8_trim_whitespace(arr), pa.float64())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    self._num[col] = None  # not numbers after all: compare as text
        return self._num[col]

    def operand(self, col: str, value: Any) -> tuple[pa.Array, pa.Scalar]:
        """(column array, literal scalar) compared in the column's type."""
        if _is_numeric(self.types.get(col, "string")):
            num = self.numeric(col)
            lit = _number(value)
            if num is not None and lit is not None:
                typ = num.type
                if pa.types.is_integer(typ) and isinstance(lit, float):
                    num = pc.cast(num, pa.float64())
                    typ = pa.float64()
                return num, pa.scalar(lit, typ)
        return self.text(col), pa.scalar(_literal_text(value), pa.string())

    def visit_comparison(self, e: Comparison) -> pa.Array:
        op = _OP_OF.get(type(e))
        if op is None:
            raise TypeError(f"partition filters have no {type(e).__name__} ({e!r})")
        arr, lit = self.operand(e.column, e.value)
        fn = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}[op]
        return fn(arr, lit)

    def visit_in(self, e: In) -> pa.Array:
        parts = [self.visit(EqualTo(e.column, v)) for v in e.values]
        out = parts[0]
        for p in parts[1:]:
            out = pc.or_kleene(out, p)
        return out

    def visit_is_null(self, e: IsNull) -> pa.Array:
        return pc.is_null(self.text(e.column))

    def visit_is_not_null(self, e: IsNotNull) -> pa.Array:
        return pc.is_valid(self.text(e.column))

    def visit_and(self, e: And) -> pa.Array:
        return pc.and_kleene(self.visit(e.left), self.visit(e.right))

    def visit_or(self, e: Or) -> pa.Array:
        return pc.or_kleene(self.visit(e.left), self.visit(e.right))

    def visit_not(self, e: Not) -> pa.Array:
        return pc.invert(self.visit(e.child))

    def visit_string_match(self, e: StringMatch) -> pa.Array:
        raise TypeError(f"partition filters have no LIKE ({e!r})")


def filter_mask(files_table: pa.Table, predicate: PartitionPredicate) -> pa.Array:
    """Boolean mask (unknown → False) of the rows whose partition values satisfy the predicate."""
    if files_table.num_rows == 0:
        return pa.array([], pa.bool_())
    mask = _Evaluator(files_table, predicate.column_types).visit(predicate.expr)
    return pc.fill_null(mask, False)


def filter_files_table(files_table: pa.Table, predicate: PartitionPredicate | None) -> pa.Table:
    """The rows of a FileEntry table whose partition values satisfy the predicate (exact)."""
    if predicate is None or files_table.num_rows == 0:
        return files_table
    return files_table.filter(filter_mask(files_table, predicate))


# ---- manifest pruning -------------------------------------------------------------------------------


class _NegationNormalForm(FilterVisitor[Filter]):
    """NOT pushed down to the leaves (valid under three-valued logic for these predicates)."""

    def __init__(self, negate: bool = False):
        self.negate = negate

    def visit_not(self, e: Not) -> Filter:
        return _NegationNormalForm(not self.negate).visit(e.child)

    def visit_and(self, e: And) -> Filter:
        left, right = self.visit(e.left), self.visit(e.right)
        return Or(left, right) if self.negate else And(left, right)

    def visit_or(self, e: Or) -> Filter:
        left, right = self.visit(e.left), self.visit(e.right)
        return And(left, right) if self.negate else Or(left, right)

    def _leaf(self, e: Comparison | In | IsNull | IsNotNull | StringMatch) -> Filter:
        if not self.negate:
            return e
        if type(e) in _NEGATED:  # x < v → x >= v, IS NULL → IS NOT NULL (the same fields)
            return _NEGATED[type(e)](*vars(e).values())
        return Not(e)  # EqualTo, In: keep a leaf-level Not

    def visit_comparison(self, e: Comparison) -> Filter:
        return self._leaf(e)

    def visit_in(self, e: In) -> Filter:
        return self._leaf(e)

    def visit_is_null(self, e: IsNull) -> Filter:
        return self._leaf(e)

    def visit_is_not_null(self, e: IsNotNull) -> Filter:
        return self._leaf(e)

    def visit_string_match(self, e: StringMatch) -> Filter:
        return self._leaf(e)


def _nnf(e: Filter, negate: bool = False) -> Filter:
    return _NegationNormalForm(negate).visit(e)


def _bound_text(col_type: str, value: Any) -> str | None:
    """The text a partition value equal to `value` has, or None when that text is not certain."""
    t = col_type.lower()
    if _is_integral(t):
        n = _number(value)
        if n is None or (isinstance(n, float) and not n.is_integer()):
            return None
        return str(int(n))
    if _is_numeric(t):
        return None  # float/decimal text forms vary (1.0 vs 1): never prune on them
    return _literal_text(value)


def _leaf_bounds(
    column: str, value: Any, bounds: Mapping[str, tuple[str | None, str | None]], types: Mapping[str, str]
) -> tuple[str, str, str] | None:
    """(min, max, the text of value) when the column has bounds and the value a certain text."""
    b = bounds.get(column)
    if b is None or b[0] is None or b[1] is None:
        return None  # unknown column or null bounds: never pruned
    s = _bound_text(types.get(column, "string"), value)
    return None if s is None else (b[0], b[1], s)


class _MayMatch(FilterVisitor[bool]):
    """Can a manifest whose partition bounds are these hold a matching file? (NOT already pushed
    to the leaves by _nnf.) IS [NOT] NULL and LIKE never prune."""

    def __init__(self, bounds: Mapping[str, tuple[str | None, str | None]], types: Mapping[str, str]):
        self.bounds, self.types = bounds, types

    def visit_and(self, e: And) -> bool:
        return self.visit(e.left) and self.visit(e.right)

    def visit_or(self, e: Or) -> bool:
        return self.visit(e.left) or self.visit(e.right)

    def visit_comparison(self, e: Comparison) -> bool:
        op = _OP_OF.get(type(e))
        if op is None:
            return True
        t = _leaf_bounds(e.column, e.value, self.bounds, self.types)
        if t is None:
            return True
        lo, hi, s = t
        if op == "=":
            return lo <= s <= hi
        col_type = self.types.get(e.column, "string")
        if _is_numeric(col_type) or col_type.lower() == "boolean":
            return True  # lexicographic bounds say nothing about numeric order
        return {"<": lo < s, "<=": lo <= s, ">": hi > s, ">=": hi >= s}[op]

    def visit_in(self, e: In) -> bool:
        return any(self.visit(EqualTo(e.column, v)) for v in e.values)

    def visit_not(self, e: Not) -> bool:
        if isinstance(e.child, EqualTo):
            t = _leaf_bounds(e.child.column, e.child.value, self.bounds, self.types)
            return t is None or not (t[0] == t[1] == t[2])
        if isinstance(e.child, In):
            return all(self.visit(Not(EqualTo(e.child.column, v))) for v in e.child.values)
        return True

    def visit_is_null(self, e: IsNull) -> bool:
        return True

    def visit_is_not_null(self, e: IsNotNull) -> bool:
        return True

    def visit_string_match(self, e: StringMatch) -> bool:
        return True


def _may_match(e: Filter, bounds: Mapping[str, tuple[str | None, str | None]], types: Mapping[str, str]) -> bool:
    return _MayMatch(bounds, types).visit(e)


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
