"""The Tantivy query builder: a query matching a SUPERSET of the rows that satisfy the filters
(narrowing; exact where it can say so), on tokenized text columns through the terms a string
filter implies (text.py), on compact string columns through hashes. The index's exact answer to
filters on index-only columns: index_only.py."""

from __future__ import annotations

import decimal
import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from indextables_spark.core.schema import compact_strings
from indextables_spark.core.schema.types import (
    STRING_KINDS,
    ColumnSpec,
    IndexedField,
    specs_by_name,
)
from indextables_spark.core.split.write.documents import TRUNCATE_CHARS, exact_term, f64_key
from indextables_spark.expr.model import (
    Leaf,
    StringMatch,
    And,
    EqualNullSafe,
    EqualTo,
    Filter,
    FilterVisitor,
    In,
    IsNotNull,
    IsNull,
    Not,
    Or,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from indextables_spark.expr.text import pattern_terms, regex_escape
from indextables_spark.expr.text import supported as text_supported
from indextables_spark.expr.values import (
    COMPARISONS,
    I64_MAX,
    I64_MIN,
    OP_CODES,
    STRING_MATCHES,
    IncompatibleValue,
    column_value,
    lookup_spec,
)

if TYPE_CHECKING:
    import tantivy


_DECIMAL_MARGIN = 1e-9  # relative; decimal → f64 conversion errors are ~1e-16
_MAX_PATTERN_CHARS = 256  # longer regexes are not worth compiling


class FilterQueryBuilder(FilterVisitor["tuple[tantivy.Query | None, bool]"]):
    """Query builder bound to one index schema: (query or None, exact) per filter."""

    def __init__(self, schema: tantivy.Schema, specs: Mapping[str, ColumnSpec]) -> None:
        import tantivy  # function-level: tantivy loads only when a query is built (cheap import)

        self.t = tantivy
        self.schema = schema
        self.specs = specs

    # helpers
    def all(self) -> tantivy.Query:
        return self.t.Query.all_query()

    def fast(self, field_name: str) -> bool:
        """Is the Tantivy field fast (exists queries need it; indexing.nonfastfields takes it away)?"""
        return any(f.fast for s in self.specs.values() for f in s.indexed_fields if f.name == field_name)

    def empty(self) -> tantivy.Query:
        return self.t.Query.empty_query()

    def must(self, qs: Iterable[tantivy.Query]) -> tantivy.Query:
        return self.t.Query.boolean_query([(self.t.Occur.Must, q) for q in qs])

    def should(self, qs: Iterable[tantivy.Query]) -> tantivy.Query:
        return self.t.Query.boolean_query([(self.t.Occur.Should, q) for q in qs])

    def must_not(self, q: tantivy.Query) -> tantivy.Query:
        return self.t.Query.boolean_query([(self.t.Occur.Must, self.all()), (self.t.Occur.MustNot, q)])

    def i64_range(
        self, field: str, lo: int | None, hi: int | None, inc_lo: bool = True, inc_hi: bool = True
    ) -> tantivy.Query:
        return self.t.Query.range_query(
            self.schema,
            field,
            self.t.FieldType.Integer,
            lo,
            hi,
            include_lower=inc_lo if lo is not None else True,
            include_upper=inc_hi if hi is not None else True,
        )

    def f64_range(self, field: str, lo: float | None, hi: float | None) -> tantivy.Query:
        if lo is None and hi is None:
            return self.t.Query.exists_query(field)
        return self.t.Query.range_query(self.schema, field, self.t.FieldType.Float, lo, hi)

    # translation: (query or None, exact)
    def build(self, f: Filter) -> tuple[tantivy.Query | None, bool]:
        return self.visit(f)

    def visit_and(self, f: And) -> tuple[tantivy.Query | None, bool]:
        (left, le), (right, re_) = self.visit(f.left), self.visit(f.right)
        if left is None or right is None:
            return (left if right is None else right), False
        return self.must([left, right]), le and re_

    def visit_or(self, f: Or) -> tuple[tantivy.Query | None, bool]:
        (left, le), (right, re_) = self.visit(f.left), self.visit(f.right)
        if left is None or right is None:
            return None, False
        return self.should([left, right]), le and re_

    def visit_not(self, f: Not) -> tuple[tantivy.Query | None, bool]:
        q, exact = self.visit(f.child)
        if q is None or not exact:
            return None, False
        child = f.child
        if isinstance(child, (IsNull, IsNotNull, EqualNullSafe)):  # never NULL: NOT is the complement
            return self.must_not(q), True
        # NOT(leaf) is TRUE where the leaf is FALSE: a leaf with a non-NULL value is NULL exactly
        # where its column is, so the complement within the rows that have a value (an exists
        # query: fast fields only). Otherwise the complement keeps NULL rows too: a superset.
        if isinstance(child, COMPARISONS) and getattr(child, "value", None) is None:
            return self.empty(), True  # NOT(c = NULL) is NULL
        if isinstance(child, COMPARISONS + STRING_MATCHES + (In,)) and not (
            isinstance(child, In) and any(v is None for v in child.values)
        ):
            name = self.exists_field(str(getattr(child, "column", "")))
            if name is not None:
                return self.must([self.t.Query.exists_query(name), self.must_not(q)]), True
        return self.must_not(q), False

    def exists_field(self, column: str) -> str | None:
        """The fast field an exists query on the column's values uses (None: it has none)."""
        spec = lookup_spec(self.specs, column)
        if spec is None or spec.partition or spec.kind in ("text", "json"):
            return None
        field = spec.exact_field if spec.kind in STRING_KINDS else spec.value_field
        if field is None or not field.fast or field.max_value_bytes is not None:
            return None  # (a field leaving long values out says nothing of their rows)
        return field.name

    def visit_comparison(self, f: Leaf) -> tuple[tantivy.Query | None, bool]:
        spec = lookup_spec(self.specs, f.column)
        if spec is None or spec.partition or not spec.indexed_fields:
            return None, False
        try:
            return self.leaf(f, spec)
        except IncompatibleValue:
            return None, False

    visit_in = visit_is_null = visit_is_not_null = visit_string_match = visit_comparison

    def leaf(self, f: Leaf, spec: ColumnSpec) -> tuple[tantivy.Query | None, bool]:
        if spec.string_mode is not None:
            return self.compact(f, spec)
        kind = spec.kind
        field = spec.exact_field if kind in STRING_KINDS else spec.value_field
        if kind == "text":
            return self.text(f, spec), False
        if kind == "json" or field is None:
            return None, False
        name = field.name
        if field.max_value_bytes is not None and not self.holds_values(f, field.max_value_bytes):
            # a reference split's raw field: a value that long is not in its index, so neither a
            # term nor a pattern nor an exists query can find (or rule out) the row
            return None, False
        if isinstance(f, (IsNull, IsNotNull)):
            return self.exists(f, name) if field.fast else (None, False)
        if isinstance(f, STRING_MATCHES):
            return self.pattern(f, spec, name)
        if isinstance(f, In):
            return self.in_(f, spec, name)
        if f.value is None:
            if isinstance(f, EqualNullSafe):
                return self.exists(IsNull(f.column), name) if field.fast else (None, False)
            return self.empty(), True
        op = OP_CODES[type(f)]
        v = column_value(kind, spec.spark_type, f.value)
        if kind in ("i64", "date", "timestamp"):
            return self.int_cmp(op, name, v), True
        if kind == "bool":
            if op == "eq":
                return self.t.Query.term_query(self.schema, name, v), True
            return None, False
        if kind in STRING_KINDS:
            if op != "eq":
                return None, False
            term = exact_term(v)
            return self.t.Query.term_query(self.schema, name, term), term == v and not spec.terms_truncated
        if kind == "f64":
            if not math.isfinite(v):
                return None, False  # (ours index NaN/inf as the f64 extremes, others as they are)
            k = f64_key(v)
            lo, hi = {"eq": (k, k), "gt": (k, None), "ge": (k, None), "lt": (None, k), "le": (None, k)}[op]
            return self.f64_range(name, lo, hi), False
        if kind == "decimal":
            if not math.isfinite(float(v)):
                return None, False
            lo, hi = _decimal_bounds(v)
            lo, hi = {"eq": (lo, hi), "gt": (lo, None), "ge": (lo, None), "lt": (None, hi), "le": (None, hi)}[op]
            return self.f64_range(name, lo, hi), False
        return None, False

    def compact(self, f: Leaf, spec: ColumnSpec) -> tuple[tantivy.Query | None, bool]:
        """A filter on a compact string column (core/schema/compact_strings.py): = / <=> / IN
        narrow by the hashes of the values (exact_only) or by the terms of the stripped values and
        the hashes of their pattern matches (text_* modes); never exact (hashes collide, stripped
        text loses the matches), so the rows re-check. exact_only with a fast hash field answers
        IS [NOT] NULL exactly. Anything else (ranges, LIKE) is not narrowed: the rows decide."""
        mode = compact_strings.parse_mode(spec.string_mode or "")
        hashes = spec.hash_field
        if isinstance(f, (IsNull, IsNotNull)) or (isinstance(f, EqualNullSafe) and f.value is None):
            if mode.hashed_whole and hashes is not None and hashes.fast:
                return self.exists(f if not isinstance(f, EqualNullSafe) else IsNull(f.column), hashes.name)
            return None, False
        if isinstance(f, In):
            values = [v for v in f.values if v is not None]
        elif isinstance(f, (EqualTo, EqualNullSafe)):
            if f.value is None:
                return self.empty(), True
            values = [f.value]
        else:
            return None, False
        if not all(isinstance(v, str) for v in values):
            return None, False
        if not values:
            return self.empty(), True
        if mode.hashed_whole:
            assert hashes is not None
            codes = sorted({compact_strings.string_hash(v) for v in values})
            return self.t.Query.term_set_query(self.schema, hashes.name, codes), False
        maybe = [self.stripped_value(v, spec, mode, hashes) for v in values]
        parts = [p for p in maybe if p is not None]
        if len(parts) < len(maybe):
            return None, False
        return (parts[0] if len(parts) == 1 else self.should(parts)), False

    def stripped_value(
        self, value: str, spec: ColumnSpec, mode: compact_strings.StringMode, hashes: IndexedField | None
    ) -> tantivy.Query | None:
        """Rows whose (text_* mode) column may equal `value`: the terms of its stripped text and,
        for *_exactonly, the hashes of its matches; None when that implies nothing."""
        field = spec.value_field
        qs = []
        if field is not None and field.tokenizer is not None and text_supported(field.tokenizer):
            q = self.text_terms(compact_strings.strip(mode, value), field.name, field.tokenizer, True, True, spec)
            if q is not None:
                qs.append(q)
        if hashes is not None:
            qs += [
                self.t.Query.term_query(self.schema, hashes.name, compact_strings.string_hash(m))
                for m in sorted(set(compact_strings.matches(mode, value)))
            ]
        if not qs:
            return None
        return qs[0] if len(qs) == 1 else self.must(qs)

    @staticmethod
    def holds_values(f: Leaf, limit: int) -> bool:
        """Whether a field indexing only values shorter than `limit` UTF-8 bytes answers the leaf:
        = and IN of short enough strings (NULL-only comparisons too); no pattern, no IS [NOT] NULL."""
        if isinstance(f, (IsNull, IsNotNull)) or isinstance(f, STRING_MATCHES):
            return False
        values = f.values if isinstance(f, In) else [f.value]
        if isinstance(f, EqualNullSafe) and f.value is None:
            return False
        return all(v is None or (isinstance(v, str) and len(v.encode("utf-8")) < limit) for v in values)

    def text(self, f: Leaf, spec: ColumnSpec) -> tantivy.Query | None:
        """Narrowing (never exact) of a string filter on a tokenized column by the terms its
        value implies (text.py); None when it implies none."""
        field = spec.value_field
        tok = field.tokenizer if field is not None else None
        if field is None or tok is None or not text_supported(tok):
            return None
        if isinstance(f, In):
            # NULL in the list never makes a row match (x IN (.., NULL) is true only on a match).
            values = [v for v in f.values if v is not None]
            if not values or not all(isinstance(v, str) for v in values):
                return None
            parts = [self.text_terms(v, field.name, tok, True, True, spec) for v in values]
            queries = [p for p in parts if p is not None]
            return None if len(queries) < len(parts) else self.should(queries)
        anchors = {
            EqualTo: (True, True),
            EqualNullSafe: (True, True),
            StringStartsWith: (True, False),
            StringEndsWith: (False, True),
            StringContains: (False, False),
        }.get(type(f))
        if anchors is None or not isinstance(f, (EqualTo, EqualNullSafe, *STRING_MATCHES)):
            return None
        if not isinstance(f.value, str):
            return None
        return self.text_terms(f.value, field.name, tok, *anchors, spec)

    def text_terms(
        self, value: str, name: str, tok: str, left: bool, right: bool, spec: ColumnSpec
    ) -> tantivy.Query | None:
        limit = spec.value_field.token_limit if spec.value_field is not None else None
        implied = pattern_terms(value, tok, left, right, spec.fully_tokenized, limit)
        if implied.empty:
            return None
        qs = [self.t.Query.term_query(self.schema, name, t) for t in implied.terms]
        qs += [self.t.Query.regex_query(self.schema, name, r) for r in implied.regexes]
        return qs[0] if len(qs) == 1 else self.must(qs)

    def exists(self, f: Leaf, name: str) -> tuple[tantivy.Query | None, bool]:
        q = self.t.Query.exists_query(name)
        return (q if isinstance(f, IsNotNull) else self.must_not(q)), True

    def int_cmp(self, op: str, name: str, v: int) -> tantivy.Query:
        if v > I64_MAX or v < I64_MIN:
            above = v > I64_MAX
            if op == "eq" or (op in ("gt", "ge")) == above:
                return self.empty()
            if not self.fast(name):  # (indexing.nonfastfields) every value: a range over them all
                return self.i64_range(name, I64_MIN, I64_MAX)
            return self.t.Query.exists_query(name)
        if op == "eq":
            return self.t.Query.term_query(self.schema, name, v)
        return {
            "gt": lambda: self.i64_range(name, v, None, inc_lo=False),
            "ge": lambda: self.i64_range(name, v, None),
            "lt": lambda: self.i64_range(name, None, v, inc_hi=False),
            "le": lambda: self.i64_range(name, None, v),
        }[op]()

    def in_(self, f: In, spec: ColumnSpec, name: str) -> tuple[tantivy.Query | None, bool]:
        kind = spec.kind
        vals = [column_value(kind, spec.spark_type, v) for v in f.values if v is not None]
        if not vals:
            return self.empty(), True
        if kind in ("i64", "date", "timestamp"):
            vals = [v for v in vals if I64_MIN <= v <= I64_MAX]
            return (self.t.Query.term_set_query(self.schema, name, vals) if vals else self.empty()), True
        if kind == "bool":
            return self.t.Query.term_set_query(self.schema, name, sorted(set(vals))), True
        if kind in STRING_KINDS:
            terms = [exact_term(v) for v in vals]
            exact = terms == vals and not spec.terms_truncated
            return self.t.Query.term_set_query(self.schema, name, terms), exact
        if len(vals) > 64:
            return None, False
        if kind == "f64":
            if not all(math.isfinite(v) for v in vals):
                return None, False
            return self.should([self.f64_range(name, f64_key(v), f64_key(v)) for v in vals]), False
        if kind == "decimal":
            if not all(math.isfinite(float(v)) for v in vals):
                return None, False
            return self.should([self.f64_range(name, *_decimal_bounds(v)) for v in vals]), False
        return None, False

    def pattern(self, f: StringMatch, spec: ColumnSpec, name: str) -> tuple[tantivy.Query | None, bool]:
        p = f.value
        if not isinstance(p, str) or len(p) > _MAX_PATTERN_CHARS:
            return None, False
        if p == "":
            return (self.t.Query.exists_query(name), True) if self.fast(name) else (None, False)
        esc = regex_escape(p)
        if isinstance(f, StringStartsWith):
            # Cut terms keep their first TRUNCATE_CHARS characters, so prefixes still match.
            return self.t.Query.regex_query(self.schema, name, "(?s)" + esc + ".*"), len(p) <= TRUNCATE_CHARS
        if spec.terms_truncated:
            return None, False
        regex = "(?s).*" + esc if isinstance(f, StringEndsWith) else "(?s).*" + esc + ".*"
        return self.t.Query.regex_query(self.schema, name, regex), True


def _decimal_bounds(v: decimal.Decimal) -> tuple[float, float]:
    """An f64 interval surely holding the indexed (f64-converted) value of any decimal equal to v."""
    x = float(v)
    margin = abs(x) * _DECIMAL_MARGIN + 1e-300
    return x - margin, x + margin


def build_query(
    schema: tantivy.Schema, filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]
) -> tuple[tantivy.Query | None, bool]:
    """(query or None, exact): exact means the query matches exactly the rows passing the filters."""
    q = FilterQueryBuilder(schema, specs_by_name(specs))
    parts: list[Any] = []
    exact = True
    for f in filters:
        sub, e = q.build(f)
        if sub is None:
            exact = False
        else:
            parts.append(sub)
            exact = exact and e
    if not parts:
        return None, not filters
    return (parts[0] if len(parts) == 1 else q.must(parts)), exact


def tantivy_query(
    index: tantivy.Index, filters: Sequence[Filter], specs: Mapping[str, ColumnSpec] | Iterable[ColumnSpec]
) -> tantivy.Query | None:
    """A Tantivy query matching a superset of the rows satisfying the filters; None = no narrowing."""
    q, _ = build_query(index.schema, filters, specs)
    return q
