"""A read's SearchQuery (expr/search_query.py) planned and run on splits: built and checked once
for the doc mappings of the splits a read touches (`plan_query`, without opening a split), a
split's query boosted for corpus-wide BM25 statistics (corpus_stats.py), counting a query's
matches where that is cheap, the query of a doc mapping's empty index (explain)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Sequence

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
from indextables_spark.expr.search_query import CheckTarget, SearchQuery

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.log.model.actions import AddFile
    from indextables_spark.core.log.read.snapshot import Snapshot


def plan_query(
    snapshot: Snapshot,
    opts: Options,
    query: SearchQuery,
    files: Sequence[AddFile] | None = None,
    every: bool = False,
) -> SearchQuery:
    """The value a read of `files` (default: every live split) runs, analysed for the doc mapping
    of each (SearchQuery.check: QueryParseError for a query the splits cannot parse, without
    opening one; every=True → invalid for any of them, what a read of those splits would hit,
    else only when invalid for all of them)."""
    if files is None:  # the Arrow column: no AddFile objects built for a large table
        refs = set(snapshot.files_table.column("docMappingRef").unique().to_pylist())
    else:
        refs = {f.doc_mapping_ref for f in files}
    mappings = [m for m in (snapshot.doc_mapping(r) for r in sorted(r for r in refs if r)) if m]
    candidates = [specs_for_doc_mapping(m, snapshot.schema_json, snapshot.partition_columns) for m in mappings] or [
        column_specs(snapshot.schema_json, snapshot.partition_columns, table_options(snapshot, opts))
    ]
    return query.check([_target(specs) for specs in candidates], every)


def _target(specs: Sequence[ColumnSpec]) -> CheckTarget:
    """What SearchQuery.check builds a doc mapping's query with: its empty index, made on demand."""
    mapping = doc_mapping_from_specs(list(specs))
    return specs, lambda: _empty_index(mapping), ("empty index", mapping)


def query_for_specs(specs: Sequence[ColumnSpec], query: SearchQuery) -> tantivy.Query | None:
    """The Tantivy query of `query` (the text AND the narrowing they can search; None: neither)
    for splits indexed with these specs, without opening a split (QueryParseError when invalid)."""
    target, index, key = _target(specs)
    return query.tantivy_query(index(), target, key)


def scored_query(h: SplitHandles, local_dir: str, query: SearchQuery, corpus: CorpusStats | None) -> tantivy.Query:
    """The split's query (the text alone) scoring with the corpus's statistics (corpus_stats.py):
    each scored leaf boosted by idf(corpus) / idf(split). Without a corpus, or where they agree,
    the plain query."""
    weights = None
    if corpus is not None:
        fq = query.analysis(h.specs, h.mapping_key).scored
        if fq is not None:  # (else tantivy_query refuses the value: no text)
            weights = leaf_weights(fq, split_stats(searcher_of(h, local_dir), fq), corpus)
    q = query.tantivy_query(h.index, h.specs, h.mapping_key, scored=True, weights=weights)
    assert q is not None  # (scored: a query or an error)
    return q


def query_hits(local_dir: str, query: SearchQuery) -> int | None:
    """Documents of an extracted split matching the query (its Tantivy query, as SplitReader runs
    it; rows deleted by delete logs included), or None when counting it is not cheap (term lookups
    and their boolean combinations: FullTextQuery.countable; phrases, regexes, ranges and scans
    evaluate every candidate document, and counting them before the search would do that work
    twice: a phrase over two 500k-row splits, 60 -> 100 ms): a split with none is not opened
    further. Costs Tantivy's count (a term missing from the term dictionary: ~1 us)."""
    h = handles(local_dir)
    searcher = searcher_of(h, local_dir)
    if searcher.num_docs == 0:  # search(limit=0) panics
        return 0
    q = query.tantivy_query(h.index, h.specs, h.mapping_key)
    rows = query.analysis(h.specs, h.mapping_key).rows
    if q is None or rows is None or not rows.countable:
        return None
    try:
        return int(searcher.search(q, 1, count=True).count)
    except BaseException:  # converted as tantivy_call does (entered only on failure: it costs ~2 us)
        with tantivy_call(f"searching split {local_dir}"):
            raise


@functools.lru_cache(maxsize=32)
def _empty_index(doc_mapping: str) -> tantivy.Index:
    """An in-memory index with the Tantivy schema of a doc mapping (parsing needs only the schema)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.read.query_parsing` free of tantivy

    specs = specs_from_doc_mapping(doc_mapping)
    index = tantivy.Index(tantivy_schema(specs))
    analyzers.register(index, (f.index_tokenizer for s in specs for f in s.indexed_fields))
    return index


def all_of(*queries: tantivy.Query | None) -> tantivy.Query | None:
    """The conjunction of the queries that are not None (None when none is)."""
    import tantivy  # lazy: keeps `import indextables_spark.core.split.read.query_parsing` free of tantivy

    parts = [q for q in queries if q is not None]
    if len(parts) < 2:
        return parts[0] if parts else None
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, q) for q in parts])
