"""Corpus-wide BM25 statistics: a query's scores as if the table version's rows were one split.

Tantivy scores each split with its own statistics (document count N, each term's document
frequency n, each field's average length), so a term rare in one split inflates every score there
and a table's top-n changes with its partitioning, appends and MERGE SPLITS. As Elasticsearch's
`dfs_query_then_fetch` does, a search first gathers the statistics of every live split of the
version read (`table_stats`: N from each split, n by term lookups in each split's term dictionary
for the terms the query's scored leaves read — expr/fulltext.py), then each split scores with them
(`leaf_weights`): tantivy-py cannot take statistics from outside, so each scored leaf (a term, a
phrase) is boosted by idf(table) / idf(split), which makes its idf the table's exactly.

What stays each split's own: the average field length (`avgdl` in BM25's length normalisation),
which no query form can change. Splits of similar rows have averages within a fraction of a
percent of the table's; the residual is measured in tests/test_relevance_corpus.py and docs/guide/
search-and-relevance.md, "Corpus-wide relevance". Rows deleted by delete logs are counted, as Lucene and Elasticsearch
count deleted documents until a merge drops them: they are in the term dictionaries, and
discounting them would need their postings (a pass over the data). Json-field leaves (the parser
types their terms) keep the split's idf.

Cost per query: one term lookup per scored term in every live split (splits pruned by partition
or data skipping included: the table's statistics are all its rows'), on splits the cache holds or
fetches: of a remote split only the term dictionaries of the scored fields and what opening it
reads (cache/sparse.py's `postings=False`: no postings, positions or fast field columns; a split
the search reads has them fetched then, its dictionaries not again; one the search read first has
them already). The
statistics of a table version and query text are kept per process; each split's query boosted with
them is the value's (expr/search_query.py's SearchQuery.tantivy_query, kept per boosts).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from indextables_spark.config.options import Options
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.core.split.cache.open_splits import handles, searcher_of
from indextables_spark.core.split.read.split_threads import fetch_missing, map_chunks
from indextables_spark.core.storage.base import Storage
from indextables_spark.errors import InvalidOptionError
from indextables_spark.expr.fulltext import FullTextQuery
from indextables_spark.expr.search_query import SearchQuery
from indextables_spark.util.lru import LruCache

if TYPE_CHECKING:
    import tantivy
    from indextables_spark.core.log.model.actions import AddFile

STATISTICS_OPTION = "search.statistics"
TABLE = "table"  # corpus-wide (the default)
SPLIT = "split"  # each split's own (the scores of 0.2 and before)
MODES = (TABLE, SPLIT)


@dataclass(frozen=True)
class CorpusStats:
    """Document count and per-term document frequencies of a set of splits (one split, or all the
    live splits of a table version) for one query's scored terms."""

    num_docs: int
    doc_freqs: Mapping[tuple[str, Any], int]  # (field or json path, term) -> documents holding it

    @functools.cached_property
    def key(self) -> tuple[Any, ...]:
        """A hashable identity (its terms in a stable order: to_json)."""
        return (self.num_docs, tuple(sorted(self.doc_freqs.items(), key=repr)))

    def to_json(self) -> dict[str, Any]:
        """For shipping to Spark tasks (InputPartition pickles it; terms keep their JSON types)."""
        return {"numDocs": self.num_docs, "docFreqs": [[f, t, n] for (f, t), n in self.key[1]]}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CorpusStats:
        return CorpusStats(int(d["numDocs"]), {(f, t): int(n) for f, t, n in d["docFreqs"]})


def combine(parts: list[CorpusStats]) -> CorpusStats:
    """The statistics of the union of the splits (sums, as Tantivy sums over segments)."""
    freqs: dict[tuple[str, Any], int] = {}
    for p in parts:
        for k, n in p.doc_freqs.items():
            freqs[k] = freqs.get(k, 0) + n
    return CorpusStats(sum(p.num_docs for p in parts), freqs)


def split_stats(searcher: tantivy.Searcher, query: FullTextQuery) -> CorpusStats:
    """The statistics of one split (its Tantivy searcher) for the query's scored terms."""
    return CorpusStats(int(searcher.num_docs), {(f, t): int(searcher.doc_freq(f, t)) for f, t in query.scored_terms})


def idf(doc_freq: int, num_docs: int) -> float:
    """Tantivy's BM25 idf (tantivy/src/query/bm25.rs)."""
    return math.log(1.0 + (num_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def leaf_weights(query: FullTextQuery, local: CorpusStats, corpus: CorpusStats) -> dict[int, float]:
    """Boost of each scored leaf (index into query.leaves) that makes its idf the corpus's: the
    table's idf over the split's. Leaves without a match in the split (a term it lacks) and
    leaves whose weight is 1 are left out."""
    out: dict[int, float] = {}
    for i, leaf in enumerate(query.leaves):
        if not leaf.scored or not leaf.terms:
            continue
        keys = [(leaf.lookup_field, t) for t in leaf.terms]
        if any(local.doc_freqs.get(k, 0) == 0 for k in keys):
            continue  # the leaf matches nothing here
        here = sum(idf(local.doc_freqs[k], local.num_docs) for k in keys)
        table = sum(idf(max(corpus.doc_freqs.get(k, 0), local.doc_freqs[k]), corpus.num_docs) for k in keys)
        if here > 0 and abs(table / here - 1.0) > 1e-7:
            out[i] = table / here
    return out


def statistics_mode(options: Options) -> str:
    """The `search.statistics` option: `table` (corpus-wide, the default) or `split`."""
    mode = (options.get_str(STATISTICS_OPTION) or TABLE).strip().lower()
    if mode not in MODES:
        raise InvalidOptionError(
            f"option {STATISTICS_OPTION}={mode!r}: expected one of {', '.join(MODES)} "
            f"(table: BM25 with the statistics of every live split of the version read; split: each split's own)"
        )
    return mode


def table_wide(mode: str, splits: int) -> bool:
    """Whether a scored read of a version of `splits` live splits weighs terms with the table's
    statistics (mode: statistics_mode's answer); one split's own are the table's."""
    return mode == TABLE and splits > 1


_tables: LruCache[CorpusStats] = LruCache(256)


def forget_table_stats() -> None:
    """Drop the statistics kept per table version and query (benches measure gathering them)."""
    _tables.clear()


def _key(storage: Storage, version: int, files: Sequence[AddFile], query: SearchQuery) -> tuple[Any, ...]:
    # (the first and last paths tell a table written again at the same path, versions restarting)
    return (
        storage.uri,
        version,
        len(files),
        files[0].path if files else "",
        files[-1].path if files else "",
        query.text,
    )


def fetch_for_stats(
    storage: Storage,
    options: Options,
    version: int,
    files: Sequence[AddFile],
    query: SearchQuery,
    read: Sequence[AddFile],
) -> None:
    """Fetch what table_stats looks up in the splits of `files` not in `read` (whose search
    fetches more of them), unless the statistics are kept: run beside the read's own fetch, the
    pruned splits' request rounds overlap it instead of following it."""
    if _tables.get(_key(storage, version, files, query)) is not None:
        return
    reading = {f.path for f in read}
    fetch_missing(storage, options, [f for f in files if f.path not in reading], query, postings=False)


def table_stats(
    storage: Storage, options: Options, version: int, files: Sequence[AddFile], query: SearchQuery
) -> CorpusStats:
    """The statistics of `query`'s scored terms (its text's, analysed per doc mapping: expr/
    search_query.py) over `files` (every live split of the table
    version read): each split's term dictionaries of the scored fields are fetched if the cache
    lacks them (in parallel; a pruned split's postings are never read), looked up per term. Kept
    per table, version and query."""
    key = _key(storage, version, files, query)
    got = _tables.get(key)
    if got is not None:
        return got
    cache = get_cache(options)
    fetch_missing(storage, options, files, query, postings=False)

    def stats(chunk: list[AddFile]) -> list[CorpusStats]:
        out = []
        for add in chunk:
            local = cache.local_dir(storage, add, query, postings=False)
            h = handles(local)
            scored = query.analysis(h.specs, h.mapping_key).scored
            assert scored is not None  # (statistics are gathered for a query text)
            out.append(split_stats(searcher_of(h, local), scored))
        return out

    return _tables.put_if_absent(key, combine(map_chunks(stats, files)))
