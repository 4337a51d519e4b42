"""Query text → the Tantivy query of a split (parsed once per doc mapping and text), errors with
positions; counting a query's matches where that is cheap; checking a query without opening a split."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Sequence

from indextables_spark.core.schema import analyzers
from indextables_spark.core.schema.types import ColumnSpec
from indextables_spark.core.split.cache.open_splits import SplitHandles, handles, searcher_of
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.doc_mapping import (
    doc_mapping_from_specs,
    specs_from_doc_mapping,
    tantivy_schema,
)
from indextables_spark.errors import QueryParseError
from indextables_spark.expr.query_errors import format_query_error, locate_query_error
from indextables_spark.expr.query_rewrite import (
    TermRewriteError,
    cjk_bigram_terms,
    fuzzy_and_prefix_terms,
    negations_as_prefix,
)
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import tantivy


def default_fields(specs: Sequence[ColumnSpec]) -> list[str]:
    """Fields searched by query terms without a field: tokenized text, else raw strings."""
    text = [f.name for s in specs for f in s.indexed_fields if f.type == "text" and not f.exact]
    return text or [f.name for s in specs for f in s.indexed_fields if f.exact]


def parse_query(index: tantivy.Index, specs: Sequence[ColumnSpec], query: str) -> tantivy.Query:
    """The Tantivy query of `query` on an index with these column specs; QueryParseError names
    the query, the position of the fault and the searchable fields."""
    fields = default_fields(specs)
    try:
        field_info = {f.name: (f.type, f.tokenizer) for s in specs for f in s.indexed_fields}
        text, fuzzy = fuzzy_and_prefix_terms(
            cjk_bigram_terms(negations_as_prefix(query), field_info, fields), field_info, fields
        )
    except TermRewriteError as e:
        raise QueryParseError(
            format_query_error(query, e.position, e.reason, e.reason), query=query, position=e.position, reason=e.reason
        ) from None
    with tantivy_call(f"parsing query {query!r}"):
        try:
            if text == query and not fuzzy:
                return index.parse_query(text, fields)
            return index.parse_query(text, fields, fuzzy_fields=fuzzy or None, allow_regexes="/" in text)
        except ValueError as e:
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


MAX_PARSED = 256  # parsed queries kept (per doc mapping and query text)
_parsed: LruCache[tantivy.Query] = LruCache(MAX_PARSED)


def parsed_query(h: SplitHandles, query: str) -> tantivy.Query:
    """parse_query on a split's index, cached per doc mapping and query text: every split of a
    table written with one doc mapping has the same Tantivy schema (field ids) and tokenizers, so
    the parsed query is the same object for all (a table of 27 splits parsed it 27 times per
    search). Errors are not cached (they are raised again)."""
    key = (h.mapping_key, query)
    q = _parsed.get(key)
    return q if q is not None else _parsed.put_if_absent(key, parse_query(h.index, h.specs, query))


# Query kinds whose count costs little next to reading their matches: term lookups and their
# boolean combinations (a term missing from the split: ~1 us). Phrases, regexes (prefix and fuzzy
# terms), ranges, scans and all-queries evaluate every candidate document: counting them before
# the search would do that work twice (a phrase over two 500k-row splits: 60 -> 100 ms).
COUNTED_KINDS = frozenset(
    {"TermQuery", "TermSetQuery", "BooleanQuery", "BoostQuery", "ConstScoreQuery", "DisjunctionMaxQuery", "EmptyQuery"}
)
_QUERY_KIND = re.compile(r"\b([A-Z][A-Za-z]*Query)\b")
_countable: dict[tuple[Any, str], bool] = {}


def query_hits(local_dir: str, query: str) -> int | None:
    """Documents of an extracted split matching the query text (parsed as SplitReader does; rows
    deleted by delete logs included), or None when counting it is not cheap (COUNTED_KINDS): a
    split with none is not opened further. Costs a dict lookup, the parse cache and Tantivy's
    count (a term missing from the term dictionary: ~1 us)."""
    h = handles(local_dir)
    searcher = searcher_of(h, local_dir)
    if searcher.num_docs == 0:  # search(limit=0) panics
        return 0
    q = parsed_query(h, query)
    key = (h.mapping_key, query)
    countable = _countable.get(key)
    if countable is None:
        countable = set(_QUERY_KIND.findall(repr(q))) <= COUNTED_KINDS
        if len(_countable) >= MAX_PARSED:
            _countable.clear()
        _countable[key] = countable
    if not countable:
        return None
    try:
        return int(searcher.search(q, 1, count=True).count)
    except BaseException:  # converted as tantivy_call does (entered only on failure: it costs ~2 us)
        with tantivy_call(f"searching split {local_dir}"):
            raise


def query_for_specs(specs: Sequence[ColumnSpec], query: str) -> tantivy.Query:
    """The Tantivy query of `query` for splits indexed with these specs, without opening a split
    (QueryParseError when invalid)."""

    specs = list(specs)
    return parse_query(_empty_index(doc_mapping_from_specs(specs)), specs, query)


def check_query(specs: Sequence[ColumnSpec], query: str) -> None:
    """Raise QueryParseError if `query` is invalid for splits indexed with these specs, without
    opening any split: lets the driver refuse a bad query before a task runs."""
    query_for_specs(specs, query)


@functools.lru_cache(maxsize=32)
def _empty_index(doc_mapping: str) -> tantivy.Index:
    """An in-memory index with the Tantivy schema of a doc mapping (parsing needs only the schema)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.read.query_parsing` free of tantivy

    specs = specs_from_doc_mapping(doc_mapping)
    index = tantivy.Index(tantivy_schema(specs))
    analyzers.register(index, (f.index_tokenizer for s in specs for f in s.indexed_fields))
    return index


def all_of(*queries: Any) -> Any:
    """The conjunction of the queries that are not None (None when none is)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.read.query_parsing` free of tantivy

    parts = [q for q in queries if q is not None]
    if len(parts) < 2:
        return parts[0] if parts else None
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, q) for q in parts])
