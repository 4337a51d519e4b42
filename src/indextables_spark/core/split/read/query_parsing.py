"""Query text → the Tantivy query of a split (parsed once per doc mapping and text: fulltext.py's
FullTextQuery says what the text is), errors with positions, the query boosted for corpus-wide
BM25 statistics (corpus_stats.py), counting a query's matches where that is cheap, checking a
query without opening a split."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Sequence

from indextables_spark.core.schema import analyzers
from indextables_spark.core.schema.types import ColumnSpec
from indextables_spark.config.options import Options
from indextables_spark.core.split.cache.open_splits import SplitHandles, handles, searcher_of
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.column_specs import column_specs, table_options
from indextables_spark.core.split.format.doc_mapping import (
    doc_mapping_from_specs,
    specs_from_doc_mapping,
    tantivy_schema,
)
from indextables_spark.core.split.reference.reference import specs_for_doc_mapping
from indextables_spark.core.split.read.corpus_stats import CorpusStats, leaf_weights, split_stats
from indextables_spark.expr.fulltext import FullTextQuery, full_text_query
from indextables_spark.errors import QueryParseError
from indextables_spark.expr.query_errors import format_query_error, locate_query_error
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.read.snapshot import Snapshot


def parse_query(index: tantivy.Index, specs: Sequence[ColumnSpec], query: str) -> tantivy.Query:
    """The Tantivy query of `query` on an index with these column specs; QueryParseError names
    the query, the position of the fault and the searchable fields."""
    fq = full_text_query(specs, query)
    return _parse(index, specs, fq, fq.parser_text)


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


MAX_PARSED = 1024  # parsed queries kept (per doc mapping and query text, boosted ones too)
_parsed: LruCache[tantivy.Query] = LruCache(MAX_PARSED)


def parsed_query(h: SplitHandles, query: str) -> tantivy.Query:
    """parse_query on a split's index, cached per doc mapping and query text: every split of a
    table written with one doc mapping has the same Tantivy schema (field ids) and tokenizers, so
    the parsed query is the same object for all (a table of 27 splits parsed it 27 times per
    search). Errors are not cached (they are raised again)."""
    key = (h.mapping_key, query)
    q = _parsed.get(key)
    return q if q is not None else _parsed.put_if_absent(key, parse_query(h.index, h.specs, query))


_scored: LruCache[tantivy.Query] = LruCache(4 * MAX_PARSED)


def scored_query(h: SplitHandles, local_dir: str, query: str, corpus: CorpusStats | None) -> tantivy.Query:
    """The split's query scoring with the corpus's statistics (corpus_stats.py): each scored leaf
    boosted by idf(corpus) / idf(split). Without a corpus, or where they agree, `parsed_query`.
    Kept per split, query and statistics (a service repeats its queries on one table version)."""
    if corpus is None:
        return parsed_query(h, query)
    key = (h.mapping_key, local_dir, query, corpus.key)
    got = _scored.get(key)
    if got is not None:
        return got
    fq = full_text_query(h.specs, query, h.mapping_key)
    weights = leaf_weights(fq, split_stats(searcher_of(h, local_dir), fq), corpus)
    if not weights:
        return _scored.put_if_absent(key, parsed_query(h, query))
    text = fq.boosted_text(weights)
    return _scored.put_if_absent(key, _parse(h.index, h.specs, fq, text))


def query_hits(local_dir: str, query: str) -> int | None:
    """Documents of an extracted split matching the query text (parsed as SplitReader does; rows
    deleted by delete logs included), or None when counting it is not cheap (term lookups and
    their boolean combinations: FullTextQuery.countable; phrases, regexes, ranges and scans
    evaluate every candidate document, and counting them before the search would do that work
    twice: a phrase over two 500k-row splits, 60 -> 100 ms): a split with none is not opened
    further. Costs the parse cache and Tantivy's count (a term missing from the term dictionary:
    ~1 us)."""
    h = handles(local_dir)
    searcher = searcher_of(h, local_dir)
    if searcher.num_docs == 0:  # search(limit=0) panics
        return 0
    q = parsed_query(h, query)
    if not full_text_query(h.specs, query, h.mapping_key).countable:
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


def check_table_query(
    snapshot: Snapshot, opts: Options, query: str, files: list[AddFile] | None = None, every: bool = False
) -> None:
    """Raise QueryParseError for a query the splits cannot parse, without opening one: checked
    against the doc mapping of each split (`files`, default all live ones); every=True → invalid for
    any of them (what a read of those splits would hit), else only when invalid for all of them
    (a table whose newer splits gained a column may still be read by partitions that have it)."""
    if files is None:  # the Arrow column: no AddFile objects built for a large table
        refs = set(snapshot.files_table.column("docMappingRef").unique().to_pylist())
    else:
        refs = {f.doc_mapping_ref for f in files}
    mappings = [m for m in (snapshot.doc_mapping(r) for r in sorted(r for r in refs if r)) if m]
    candidates = [specs_for_doc_mapping(m, snapshot.schema_json, snapshot.partition_columns) for m in mappings] or [
        column_specs(snapshot.schema_json, snapshot.partition_columns, table_options(snapshot, opts))
    ]
    errors: list[QueryParseError] = []
    for specs in candidates:
        try:
            check_query(specs, query)
        except QueryParseError as e:
            if every:
                raise
            errors.append(e)
    if len(errors) == len(candidates):
        raise errors[0]
