"""SearchQuery: THE full-text query of a read, one value from where the read is planned to every split.

A user passes a query text (or a SearchQuery, as Lance's `scanner(full_text_query=str |
FullTextQuery)` takes either) at the API edge only: IndexTable.search / to_batches / count /
aggregate, the Spark reader's `query` option. Where the read is planned (read/query_parsing.py's
`plan_query`: the calling process, or the Spark driver) the value is built once and checked
against the doc mappings of the splits the read touches; below that, nothing takes a query text.
It carries:

- the text, and the struct-field narrowing (expr/struct_narrowing.py's texts) as a conjunction:
  rows are selected by the text AND the narrowing a split can search; scores, counts, snippets and
  corpus statistics use the text alone;
- one analysis per set of indexed fields (a doc mapping: a table whose splits have different doc
  mappings, after a schema change, gets one each): MappingQuery, the FullTextQuery
  (expr/fulltext.py) of both forms — the fields, positions and terms a sparse fetch needs
  (core/split/cache/fetch_plan.py), the fields a reference split transcodes (reference/native.py),
  the terms corpus statistics weigh (read/corpus_stats.py), whether counting is cheap. These
  pickle with the value (ReadPlan ships it to Spark tasks): an executor does not analyse the text
  again (a split whose doc mapping the planner did not see is analysed on first use);
- `tantivy_query`: THE Tantivy query of a split, with BM25 boosts when corpus statistics give
  them. This module is the only code calling Tantivy's query parsers (the grammar's
  `tantivy.parse_query` for the analysis, `Index.parse_query` for the query); built queries are
  kept in one cache, per (doc mapping key, analysed text, boosts): every split of one doc mapping
  shares the Tantivy schema, so the query object too (a table of 27 splits parsed it 27 times).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Hashable, Mapping, Sequence

from indextables_spark.core.schema.types import ColumnSpec, IndexedField
from indextables_spark.errors import InvalidOptionError, QueryParseError
from indextables_spark.expr.fulltext import FullTextQuery, indexed_fields, of_tree, rewritten
from indextables_spark.expr.query_errors import format_query_error, locate_query_error
from indextables_spark.expr.struct_narrowing import narrowed
from indextables_spark.util.lru import LruCache
from indextables_spark.util.tantivy_calls import tantivy_call

if TYPE_CHECKING:
    import tantivy

Fields = tuple[IndexedField, ...]
# (specs of a doc mapping, its empty index made on demand, the key its built queries are kept by)
CheckTarget = tuple[Sequence[ColumnSpec], Callable[[], "tantivy.Index"], Hashable]
# a QueryParseError as a value that pickles: (message, query, position, reason)
Refusal = tuple[str, "str | None", "int | None", "str | None"]


@dataclass(frozen=True)
class MappingQuery:
    """A SearchQuery analysed for the splits of one set of indexed fields (one doc mapping)."""

    scored: FullTextQuery | None  # the text alone (None: no text): scores, counts, snippets, statistics
    rows: FullTextQuery | None  # the text AND the narrowing these splits can search: what selects rows

    def read_fields(self, postings: bool = True) -> frozenset[str] | None:
        """Tantivy fields whose term dictionaries a read of the value opens (with `postings` False,
        only the statistics' term lookups: the scored fields); None when that cannot be told (a
        text the grammar refuses)."""
        fq = self.rows if postings else self.scored
        if fq is None:
            return frozenset()
        if fq.ast is None:
            return None
        return (fq.fields if postings else fq.scored_fields) - {""}


@dataclass(frozen=True)
class SearchQuery:
    """A read's full-text query (see the module docstring). Equal by text and narrowing; the
    analyses ride along."""

    text: str | None
    narrowing: tuple[str, ...] = ()
    # indexed fields -> analysis; a split's doc mapping key -> the same analysis (hashing the
    # fields costs ~6 us a split); the text's check per indexed fields (None: valid)
    _mappings: dict[Fields, MappingQuery] = field(default_factory=dict, compare=False, repr=False)
    _by_key: dict[Hashable, MappingQuery] = field(default_factory=dict, compare=False, repr=False)
    _checked: dict[Fields, Refusal | None] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "narrowing", tuple(self.narrowing))  # (hashable, whatever was given)
        if self.text is not None and not isinstance(self.text, str):
            raise InvalidOptionError(f"a full-text query is a string, got {type(self.text).__name__}")
        if self.text is None and not self.narrowing:
            raise InvalidOptionError("a SearchQuery needs a query text (or a struct-field narrowing)")

    @staticmethod
    def of(query: str | SearchQuery | None, narrowing: Sequence[str] = ()) -> SearchQuery | None:
        """The value of what a user passed (None: no query), with the struct-field narrowing of
        the read added to its own; None when there is neither."""
        if isinstance(query, SearchQuery):  # a user's narrowing stays: the read's joins it
            return query.with_narrowing([*query.narrowing, *(n for n in narrowing if n not in query.narrowing)])
        if query is None and not narrowing:
            return None
        return SearchQuery(query, tuple(narrowing))

    def with_narrowing(self, narrowing: Sequence[str]) -> SearchQuery:
        """This text with that narrowing (its text's checks kept: the narrowing is never checked)."""
        narrowing = tuple(narrowing)
        if narrowing == self.narrowing:
            return self
        return SearchQuery(self.text, narrowing, _checked=dict(self._checked))

    def without_text(self) -> SearchQuery | None:
        """The narrowing alone (a vector search's selection with fusion), or None."""
        return SearchQuery(None, self.narrowing) if self.narrowing else None

    # ---- analyses ------------------------------------------------------------------------------

    def analysis(self, specs: Sequence[ColumnSpec], key: Hashable | None = None) -> MappingQuery:
        """The analysis for splits indexed with these specs (`key`: their doc mapping key, cheaper
        to look up than the fields); one not planned for is made now (QueryParseError for a term
        the rewrites refuse)."""
        if key is not None:
            got = self._by_key.get(key)
            if got is not None:
                return got
        fields = indexed_fields(specs)
        got = self._mappings.get(fields)
        if got is None:
            got = self._mappings.setdefault(fields, self._analyse(fields))
        if key is not None:
            self._by_key[key] = got
        return got

    def _analyse(self, fields: Fields) -> MappingQuery:
        scored = _analysed(fields, self.text) if self.text is not None else None
        rows_text = narrowed(self.text, self.narrowing, fields)
        rows = scored if rows_text == self.text else _analysed(fields, rows_text) if rows_text is not None else None
        return MappingQuery(scored, rows)

    def check(self, targets: Sequence[CheckTarget], every: bool) -> SearchQuery:
        """This value, its text checked (QueryParseError) against each doc mapping of `targets`
        without opening a split: its Tantivy query built on the mapping's empty index. every=True:
        invalid for any of them raises (what a read of those splits would hit); else only invalid
        for all of them (a table whose newer splits gained a column may still be read by
        partitions that have it). A mapping checked before (by this value, or the one it was made
        from by with_narrowing: a Spark read's load() and its planning) is not parsed again."""
        errors: list[Refusal] = []
        for specs, index, key in targets:
            fields = indexed_fields(specs)
            if fields not in self._checked:
                try:
                    self.analysis(specs)  # (both forms, for every split of the mapping)
                    if self.text is not None:
                        self.tantivy_query(index(), specs, key, scored=True)
                    self._checked[fields] = None
                except QueryParseError as e:
                    self._checked[fields] = (str(e), e.query, e.position, e.reason)
            error = self._checked[fields]
            if error is not None:
                if every:
                    raise _error(error)
                errors.append(error)
        if errors and len(errors) == len(targets):
            raise _error(errors[0])
        return self

    # ---- THE Tantivy query ---------------------------------------------------------------------

    def tantivy_query(
        self,
        index: tantivy.Index,
        specs: Sequence[ColumnSpec],
        key: Hashable | None = None,
        *,
        scored: bool = False,
        weights: Mapping[int, float] | None = None,
    ) -> tantivy.Query | None:
        """The Tantivy query of a split (its index, column specs and doc mapping key): the text AND
        the narrowing it can search (None: neither, a narrowing alone the split cannot search), or
        with `scored` the text alone, each scored leaf boosted by `weights` (read/corpus_stats.
        leaf_weights: the table's idf over the split's). Kept per doc mapping key, analysed text
        and boosts; QueryParseError (not kept) names the query, the position of the fault and the
        searchable fields."""
        a = self.analysis(specs, key)
        fq = a.scored if scored else a.rows
        if fq is None:
            if scored:
                raise InvalidOptionError("a scored search needs a query text")
            return None
        boosts = tuple(sorted(weights.items())) if weights else ()
        cache_key = (key if key is not None else indexed_fields(specs), fq.text, boosts)
        got = _built.get(cache_key)
        if got is not None:
            return got
        text = fq.boosted_text(weights) if weights else fq.parser_text
        return _built.put_if_absent(cache_key, _parse(index, specs, fq, text))


MAX_BUILT = 4096  # built Tantivy queries kept (per doc mapping key, analysed text and boosts)
_built: LruCache[tantivy.Query] = LruCache(MAX_BUILT)


def forget_built() -> None:
    """Drop the built Tantivy queries (tests)."""
    _built.clear()


def _error(refusal: Refusal) -> QueryParseError:
    message, query, position, reason = refusal
    return QueryParseError(message, query=query, position=position, reason=reason)


def _analysed(fields: Fields, text: str) -> FullTextQuery:
    """The FullTextQuery of `text` on these indexed fields: rewritten, then the grammar's tree."""
    import tantivy  # lazy: keeps `import indextables_spark.expr.search_query` free of tantivy

    parser_text, fuzzy = rewritten(fields, text)
    try:
        ast = tantivy.parse_query(parser_text)
    except ValueError:
        ast = None
    return of_tree(fields, text, parser_text, fuzzy, ast)


def full_text_query(specs: Sequence[ColumnSpec], text: str) -> FullTextQuery:
    """The analysis of a text alone for these specs (tests, and tools outside a read)."""
    return _analysed(indexed_fields(specs), text)


def _parse(index: tantivy.Index, specs: Sequence[ColumnSpec], fq: FullTextQuery, text: str) -> tantivy.Query:
    """Tantivy's parse of `text` (fq's parser text, or it written back with boosts)."""
    fields = list(fq.default_fields)
    with tantivy_call(f"parsing query {fq.text!r}"):
        try:
            if text == fq.text and not fq.fuzzy_fields:
                return index.parse_query(text, fields)
            return index.parse_query(
                text, fields, fuzzy_fields=dict(fq.fuzzy_fields) or None, allow_regexes="/" in text
            )
        except ValueError as e:
            query = fq.text
            indexed = [f for s in specs for f in s.indexed_fields]
            position, reason = locate_query_error(index, query, fields, e, {f.name: f.type for f in indexed})
            unindexed = sorted(sp.name for sp in specs if not sp.indexed_fields and not sp.partition)
            note = (
                f"(searchable fields: {', '.join(sorted(f.name for f in indexed))}; "
                f"default fields: {', '.join(fields) or 'none'}"
                + (f"; not indexed: {', '.join(unindexed)}" if unindexed else "")
                + ")"
            )
            raise QueryParseError(
                format_query_error(query, position, reason, str(e), note),
                query=query,
                position=position,
                reason=reason if position is not None else None,
            ) from None


__all__ = ["MappingQuery", "SearchQuery", "forget_built", "full_text_query"]
