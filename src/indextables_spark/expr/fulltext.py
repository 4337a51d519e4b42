"""A full-text query analysed for one set of indexed fields: FullTextQuery.

What every later step of a search needs of the query text, worked out once (per read and doc
mapping: expr/search_query.py's SearchQuery carries it) instead of parsing the text again, or
reading the Debug form of a Tantivy query, at every step:
- the text Tantivy's parser takes (the rewrites of expr/query_rewrite.py applied) and its fuzzy
  fields;
- its syntax tree (Tantivy's own grammar: `tantivy.parse_query`), so the query's leaves are known:
  the fields (and positions) it reads, for fetching only those index sections
  (core/split/cache/sparse.py); whether counting its matches is cheap (term lookups only:
  core/split/read/query_parsing.py's query_hits); the terms whose document frequencies BM25 uses (term and
  phrase leaves), for scoring with corpus-wide statistics (core/split/read/corpus_stats.py);
- the query text with each scored leaf boosted (`boosted_text`), so that a split's idf becomes
  the table's: the tree is written back as query text with the boosts and parsed by Tantivy's
  parser, so the matching is the parser's own.

Which leaves BM25 scores (tantivy 0.27): a literal that becomes a TermQuery (one token) or a
PhraseQuery (several, or quoted; slop included): idf = ln(1 + (N - n + 0.5) / (n + 0.5)) of its
term, summed over a phrase's terms. Prefix phrases, fuzzy terms, regexes, ranges, term sets, exists
and all-queries score a constant (1 times their boosts), whatever the statistics.
"""

from __future__ import annotations

import decimal
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from indextables_spark.core.schema import analyzers
from indextables_spark.core.schema.types import ColumnSpec, IndexedField
from indextables_spark.errors import QueryParseError
from indextables_spark.expr.compact_query import compact_terms
from indextables_spark.expr.query_errors import format_query_error
from indextables_spark.expr.query_rewrite import (
    TermRewriteError,
    cjk_bigram_terms,
    fuzzy_and_prefix_terms,
    negations_as_prefix,
)

if TYPE_CHECKING:
    import tantivy

# leaf kinds
TERM = "term"  # one token: a TermQuery (BM25)
PHRASE = "phrase"  # several tokens, or quoted with a slop: a PhraseQuery (BM25 with the summed idf)
CONSTANT = "constant"  # scores 1 (times boosts): prefix phrase, fuzzy, regex, range, set, exists, all
NONE = "none"  # matches nothing (no token)
# the field types whose terms the statistics know how to look up (doc_freq of a typed value)
_TYPED = {"i64": int, "u64": int, "f64": float, "bool": None}


@dataclass(frozen=True)
class QueryLeaf:
    """One leaf of the query on one Tantivy field (an unfielded literal is one leaf per default field)."""

    field: str  # the Tantivy field (a json field's name, without the path)
    kind: str  # TERM | PHRASE | CONSTANT | NONE
    terms: tuple[Any, ...] = ()  # TERM / PHRASE: the terms, as `Searcher.doc_freq` takes them
    path: str | None = None  # `field.path` of a json leaf (`doc_freq` takes it so)
    positions: bool = False  # reads the field's positions (phrases, prefix phrases, regex phrases)
    cheap: bool = False  # counting its matches is a term lookup (a term, a term set)
    exact_stats: bool = True  # False: a scored leaf whose terms the statistics cannot look up
    node: str = "literal"  # the grammar's node kind: literal | range | set | regex | exists | all | ...

    @property
    def scored(self) -> bool:
        return self.kind in (TERM, PHRASE)

    @property
    def lookup_field(self) -> str:
        return self.path or self.field


@dataclass(frozen=True)
class FullTextQuery:
    """A query text as the splits of one doc mapping run it (built by expr/search_query.py)."""

    text: str  # as given
    parser_text: str  # what Tantivy's parser takes (query_rewrite.py's rewrites applied)
    fuzzy_fields: Mapping[str, tuple[bool, int, bool]]
    default_fields: tuple[str, ...]
    ast: Any  # the grammar's tree of parser_text (plain dicts and lists: it pickles)
    leaves: tuple[QueryLeaf, ...]  # in tree order (`render` walks the tree the same way)

    @property
    def fields(self) -> frozenset[str]:
        """Tantivy fields whose term dictionaries and postings the query reads."""
        return frozenset(leaf.field for leaf in self.leaves)

    @property
    def position_fields(self) -> frozenset[str]:
        """Tantivy fields whose positions the query reads."""
        return frozenset(leaf.field for leaf in self.leaves if leaf.positions)

    @property
    def countable(self) -> bool:
        """Counting the matches costs term lookups only (no phrase, regex, range, fuzzy or scan):
        worth doing before reading them (core/split/search's `matching`)."""
        return all(leaf.cheap or leaf.kind == NONE for leaf in self.leaves)

    @property
    def scored_fields(self) -> frozenset[str]:
        """Tantivy fields whose term dictionaries the statistics of `scored_terms` read."""
        return frozenset(leaf.field for leaf in self.leaves if leaf.scored and leaf.terms)

    @property
    def scored_terms(self) -> frozenset[tuple[str, Any]]:
        """(lookup field, term) of every term a scored leaf's idf reads."""
        return frozenset((leaf.lookup_field, t) for leaf in self.leaves if leaf.scored for t in leaf.terms)

    @property
    def exact_stats(self) -> bool:
        """Every scored leaf's terms can be looked up (else those leaves keep the split's idf)."""
        return all(leaf.exact_stats for leaf in self.leaves if leaf.scored)

    def boosted_text(self, weights: Mapping[int, float]) -> str:
        """The parser text with leaf i (index into `leaves`) boosted by weights[i] (a text the
        grammar refuses has no leaves: it stays as it is, and its parse raises QueryParseError)."""
        if self.ast is None:
            return self.parser_text
        return render(self.ast, iter(range(len(self.leaves))), self.default_fields, weights)


def default_fields(specs: Sequence[ColumnSpec]) -> list[str]:
    """Fields searched by query terms without a field: tokenized text, else raw strings."""
    return _default_fields(_indexed(specs))


def _indexed(specs: Sequence[ColumnSpec]) -> tuple[IndexedField, ...]:
    return tuple(f for s in specs for f in s.indexed_fields)


def _default_fields(fields: Sequence[IndexedField]) -> list[str]:
    text = [f.name for f in fields if f.type == "text" and not f.exact]
    return text or [f.name for f in fields if f.exact]


def rewrite(specs: Sequence[ColumnSpec], query: str) -> tuple[str, dict[str, tuple[bool, int, bool]]]:
    """(parser text, fuzzy fields) of a query: query_rewrite.py's rewrites; QueryParseError with
    the position of a term that cannot be rewritten."""
    return _rewrite(_indexed(specs), query)


def _rewrite(fields: Sequence[IndexedField], query: str) -> tuple[str, dict[str, tuple[bool, int, bool]]]:
    field_info = {f.name: (f.type, f.tokenizer) for f in fields}
    defaults = _default_fields(fields)
    try:
        text = compact_terms(negations_as_prefix(query), fields)
        return fuzzy_and_prefix_terms(cjk_bigram_terms(text, field_info, defaults), field_info, defaults)
    except TermRewriteError as e:
        raise QueryParseError(
            format_query_error(query, e.position, e.reason, e.reason), query=query, position=e.position, reason=e.reason
        ) from None


def indexed_fields(specs: Sequence[ColumnSpec]) -> tuple[IndexedField, ...]:
    """The Tantivy fields of column specs: what a query's analysis depends on (expr/search_query.py
    keeps one analysis per set of them)."""
    return _indexed(specs)


def rewritten(fields: Sequence[IndexedField], query: str) -> tuple[str, dict[str, tuple[bool, int, bool]]]:
    """(parser text, fuzzy fields) of a query on these indexed fields (`rewrite`)."""
    return _rewrite(fields, query)


def of_tree(
    fields: Sequence[IndexedField], query: str, text: str, fuzzy: Mapping[str, tuple[bool, int, bool]], ast: Any
) -> FullTextQuery:
    """The FullTextQuery of `query` on splits with these indexed fields, from its parser text and
    fuzzy fields (`rewritten`) and the grammar's tree of that text (None: the grammar refuses it;
    then it has no leaves, and building its Tantivy query raises QueryParseError locating the
    fault). Built by expr/search_query.py only: a read analyses its text once per doc mapping."""
    defaults = tuple(_default_fields(fields))
    indexed = {f.name: f for f in fields}
    leaves = tuple(_leaves(ast, defaults, indexed, fuzzy)) if ast is not None else ()
    return FullTextQuery(query, text, fuzzy, defaults, ast, leaves)


# ---- the leaves of a tree ----------------------------------------------------------------------


def _field_of(name: str, indexed: Mapping[str, IndexedField]) -> tuple[IndexedField | None, str | None]:
    """(the Tantivy field, the json path `field.path` or None) a literal's field name names."""
    if name in indexed:
        return indexed[name], None
    head = name.split(".", 1)[0]
    f = indexed.get(head)
    return (f, name) if f is not None and f.type == "json" else (None, None)


def _leaves(
    node: Any, defaults: Sequence[str], indexed: Mapping[str, IndexedField], fuzzy: Mapping[str, Any]
) -> Iterator[QueryLeaf]:
    kind = node["type"]
    if kind == "bool":
        for _, child in node["clauses"]:
            yield from _leaves(child, defaults, indexed, fuzzy)
    elif kind == "boost":
        yield from _leaves(node["underlying"], defaults, indexed, fuzzy)
    elif kind == "literal":
        names = [node["field_name"]] if node["field_name"] is not None else list(defaults)
        for name in names:
            yield _literal_leaf(node, name, indexed, fuzzy)
    elif kind in ("range", "set", "regex", "exists"):
        # unfielded (`[1 TO 2]`, `IN [a b]`, `/ab/`): the parser applies it to the default fields
        for field_name in [node["field"]] if node["field"] is not None else list(defaults):
            f, path = _field_of(field_name, indexed)
            name = f.name if f is not None else field_name
            yield QueryLeaf(name, CONSTANT, path=path, cheap=kind == "set", node=kind)
    else:  # "all" (and kinds a newer grammar may add): reads no field's terms
        yield QueryLeaf("", CONSTANT, exact_stats=kind == "all", node=kind)


def _literal_leaf(node: Any, name: str, indexed: Mapping[str, IndexedField], fuzzy: Mapping[str, Any]) -> QueryLeaf:
    f, path = _field_of(name, indexed)
    phrase = node["phrase"]
    if f is None:  # an unknown field: the parser refuses the query (query_parsing)
        return QueryLeaf(name, NONE)
    if f.type == "json":
        # json terms carry their path and a type the parser infers; their idf stays the split's
        quoted = node["delimiter"] != "none"
        return QueryLeaf(
            f.name, PHRASE if quoted else TERM, (), path, positions=quoted, cheap=not quoted, exact_stats=False
        )
    if f.type != "text":
        value = _typed(f.type, phrase)
        if value is None:
            return QueryLeaf(f.name, TERM, (), cheap=True, exact_stats=False)
        return QueryLeaf(f.name, TERM, (value,), cheap=True)
    tokens = tuple(t for t in analyzers_tokens(f, phrase))
    if node["prefix"]:
        return QueryLeaf(f.name, CONSTANT, positions=True)
    if not tokens:
        return QueryLeaf(f.name, NONE)
    if len(tokens) == 1:
        if f.name in fuzzy:
            return QueryLeaf(f.name, CONSTANT)
        return QueryLeaf(f.name, TERM, tokens, cheap=True)
    return QueryLeaf(f.name, PHRASE, tokens, positions=True)


def _typed(ftype: str, text: str) -> Any:
    """The value of a literal on a number or bool field, as doc_freq takes it (None: unknown)."""
    try:
        if ftype == "bool":
            low = text.strip().lower()
            return True if low == "true" else False if low == "false" else None
        conv = _TYPED.get(ftype)
        return conv(text) if conv is not None else None
    except ValueError:
        return None


def analyzers_tokens(f: IndexedField, text: str) -> list[str]:
    """The tokens a text field's analyzer makes of `text` (what the parser looks up)."""
    if f.exact or f.tokenizer == "raw":
        return [text]
    return list(_analyzer(f.index_tokenizer or "default").analyze(text))


@functools.lru_cache(maxsize=64)
def _analyzer(name: str) -> tantivy.TextAnalyzer:
    """Tantivy's analyzer of a tokenizer name, its builtin byte limits included."""
    limit = analyzers.BUILTIN_LIMITS.get(name)
    return analyzers.analyzer(f"{name}_limit_{limit}" if limit is not None else name)


# ---- writing a tree back as query text ---------------------------------------------------------

_SPECIAL = set("+-^`:{}\"'[]()!\\*~/ ")


def _word(text: str) -> str:
    return "".join("\\" + c if c in _SPECIAL or c.isspace() else c for c in text)


def _value(text: str) -> str:
    """A range bound or set element: only what would end it is escaped (`-5` stays a number)."""
    return "".join("\\" + c if c in "[]{}\\" or c.isspace() else c for c in text)


def _quoted(text: str, quote: str) -> str:
    return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


def _number(x: float) -> str:
    """A boost as the grammar reads it: digits and a point, no exponent."""
    return format(decimal.Decimal(repr(float(x))), "f")


def _literal(node: Any, name: str | None) -> str:
    phrase = node["phrase"]
    d = node["delimiter"]
    body = (
        _quoted(phrase, '"')
        if d == "double_quotes"
        else _quoted(phrase, "'")
        if d == "single_quotes"
        else _word(phrase)
    )
    if node["slop"]:
        body += f"~{node['slop']}"
    if node["prefix"]:
        body += "*"
    return (f"{_word(name)}:" if name is not None else "") + body


def _bound(b: Any, low: bool) -> str:
    if b["type"] == "unbounded":
        return "[*" if low else "*]"
    v = _value(b["value"])
    if low:
        return ("[" if b["type"] == "inclusive" else "{") + v
    return v + ("]" if b["type"] == "inclusive" else "}")


def render(node: Any, counter: Iterator[int], defaults: Sequence[str], weights: Mapping[int, float]) -> str:
    """Query text of a tree with leaf i boosted by weights[i] (unfielded literals with a boosted
    leaf are written out per default field, as the parser expands them: a disjunction)."""
    kind = node["type"]
    if kind == "bool":
        clauses = node["clauses"]
        if len(clauses) == 1:
            # The grammar flattens a group of one clause into its parent: a bool of one required or
            # optional clause is that clause; `a OR -b` nests a bool of one negation, which matches
            # nothing and which a boost (any: it scores nothing) keeps nested
            occur, child = clauses[0]
            inner = render(child, counter, defaults, weights)
            return f"(-{inner})^2" if occur == "must_not" else inner
        parts = []
        for occur, child in node["clauses"]:
            prefix = "+" if occur == "must" else "-" if occur == "must_not" else ""
            parts.append(prefix + render(child, counter, defaults, weights))
        return "(" + " ".join(parts) + ")"
    if kind == "boost":
        return "(" + render(node["underlying"], counter, defaults, weights) + f")^{_number(node['boost'])}"
    if kind == "literal":
        if node["field_name"] is not None:
            i = next(counter)
            text = _literal(node, node["field_name"])
            return f"{text}^{_number(weights[i])}" if i in weights else text
        ids = [next(counter) for _ in defaults]
        if not any(i in weights for i in ids):
            return _literal(node, None)
        alts = [
            _literal(node, name) + (f"^{_number(weights[i])}" if i in weights else "") for i, name in zip(ids, defaults)
        ]
        return alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")"
    if kind in ("range", "set", "regex", "exists"):  # constant scores: never boosted, one leaf per field
        for _ in [node["field"]] if node["field"] is not None else defaults:
            next(counter)
        field = f"{_word(node['field'])}:" if node["field"] is not None else ""
        if kind == "range":
            return f"{field}{_bound(node['lower'], True)} TO {_bound(node['upper'], False)}"
        if kind == "set":
            return f"{field} IN [" + " ".join(_value(e) for e in node["elements"]) + "]"
        if kind == "regex":
            pattern: str = node["pattern"]
            return f"{field}/" + pattern.replace("/", "\\/") + "/"
        return f"{field}*"
    next(counter)
    if kind == "all":
        return "*"
    raise QueryParseError(f"query part {node!r} cannot be written back as query text")
