"""How many threads search a set of splits, and fetching the splits the cache lacks in parallel
first (downloads are I/O; searching small splits is mostly Python). Fetching the row store parts
of a query's matches too is prefetch.py (it reads the splits: this module stays below reader.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from indextables_spark.config.options import Options
from indextables_spark.core.split.cache.cache import Reads, get_cache
from indextables_spark.core.split.cache.fetch_plan import IndexQuery
from indextables_spark.core.storage.base import Storage
from indextables_spark.util.pools import shared_pool

if TYPE_CHECKING:
    from indextables_spark.core.log.model.actions import AddFile

MAX_THREADS = 4  # Tantivy releases the GIL while searching; downloads are I/O
SMALL_SPLIT_ROWS = 10_000  # splits this small on average are searched in one thread (search_threads)
# matches (of splits the query was counted in) below which the splits are read in one thread: the
# work per match is mostly Python (man pages partitioned by language, 27 splits: 234 matches
# 2.5 -> 1.3 ms, 7,928 matches 11.2 -> 5.7 ms in one thread instead of two)
THREADED_MATCHES = 50_000
FETCH_SPLITS = 16  # splits fetched at once (each a few dependent rounds of requests: latency, not work)
FETCH_THREADS = 16  # splits whose rows are gathered at once (remote row stores: latency, not work)

T = TypeVar("T")


def search_threads(files: Sequence[AddFile]) -> int:
    """Threads to search `files` with once they are cached. Searching a small split is mostly
    Python, and threads then only take turns on the GIL, each turn waiting for the other thread:
    512 splits of 2,000 rows take 56 ms in one thread, 83 ms in two. Bigger splits spend their
    time in Tantivy and Arrow, which release the GIL: a phrase over 16 splits of 600,000 rows,
    388 ms in one thread, 225 ms in up to four."""
    if len(files) < 2:
        return 1
    counts = [f.num_records for f in files if f.num_records is not None]
    if counts and sum(counts) < SMALL_SPLIT_ROWS * len(counts):
        return 1
    return max(1, min(MAX_THREADS, os.cpu_count() or 1, len(files)))


def matched_threads(files: Sequence[AddFile], weights: Sequence[int] | None) -> int:
    """search_threads, or one thread when the query's matches per split (`weights`, when known)
    add up to less than THREADED_MATCHES."""
    if weights is not None and sum(weights) < THREADED_MATCHES:
        return 1
    return search_threads(files)


def in_threads(purpose: str, threads: int) -> Callable[[Callable[[int], T], list[int]], list[T]]:
    """A map of a function over items in up to `threads` threads of the `purpose` pool (in this
    thread for one), results in item order."""

    def run(fn: Callable[[int], T], items: list[int]) -> list[T]:
        if threads <= 1 or len(items) <= 1:
            return [fn(i) for i in items]
        return list(shared_pool(purpose, threads).map(fn, items))

    return run


def map_chunks(
    fn: Callable[[list[Any]], list[T]], files: Sequence[AddFile], weights: Sequence[int] | None = None
) -> list[T]:
    """`fn` over contiguous chunks of `files`, one chunk per thread (search_threads), the results
    concatenated in file order. With `weights` (the query's matches per split, known from
    SearchPlan.matching), one thread unless they add up to THREADED_MATCHES, and chunks of about
    equal weight (a table partitioned by a skewed column has a few big splits among many small
    ones: equal numbers of splits per thread left one thread doing both big ones)."""
    threads = matched_threads(files, weights)
    if threads == 1:
        return fn(list(files))
    if weights is not None:
        total, acc, cuts = sum(weights) + len(weights), 0, [0]
        for i, w in enumerate(weights):
            acc += w + 1
            if acc >= total * len(cuts) / threads and i + 1 < len(files):
                cuts.append(i + 1)
        cuts.append(len(files))
        chunks = [list(files[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
    else:
        size = -(-len(files) // threads)
        chunks = [list(files[i : i + size]) for i in range(0, len(files), size)]
    return [r for part in shared_pool("search", MAX_THREADS).map(fn, chunks) for r in part]


def fetch_missing(
    storage: Storage,
    options: Options | None,
    files: Sequence[AddFile],
    query: IndexQuery | None = None,
    then: Callable[[str], None] | None = None,
    *,
    postings: bool = True,
    reads: Reads | None = None,
) -> None:
    """Fetch the splits the cache lacks into it, in parallel threads (downloads are I/O), before
    they are searched in fewer threads (map_chunks). With `query` (the only thing the read asks
    of the index: a SearchQuery, or an IndexRead with the pushed filters' columns), only what it reads of remote index files (with `postings` False, what looking
    up its scored terms reads: corpus_stats.py); `reads`: what else it asks of the index (a
    reference split's dictionaries: SplitCache.local_dir); `then` runs on each fetched split's
    directory in its fetching thread (prefetch.py: the row store parts of the matches)."""

    cache = get_cache(options)
    missing = [f for f in files if not cache.is_cached(storage, f, query, postings=postings, reads=reads)]

    def fetch(f: AddFile) -> None:
        local = cache.local_dir(storage, f, query, postings=postings, reads=reads)
        if then is not None:
            then(local)

    if len(missing) == 1:
        fetch(missing[0])
    elif missing:
        list(shared_pool("fetch", FETCH_SPLITS).map(fetch, missing))
