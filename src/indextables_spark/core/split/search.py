"""Spark-free reading of a table's splits: counting (IndexTable.count), searching and reading rows
(IndexTable.search/to_arrow/to_batches), and the split-level pieces the Spark reader shares."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

import pyarrow as pa

from indextables_spark.config.options import Options
from indextables_spark.expr.model import Filter
from indextables_spark.core.storage.base import Storage
from indextables_spark.core.split.cache import get_cache
from indextables_spark.util.pools import shared_pool
from indextables_spark.core.split.reader import SCORE_COLUMN, SplitReader

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.log.actions import AddFile
    from indextables_spark.core.log.delete_logs import SplitDeletes
    from indextables_spark.core.split.types import ColumnSpec

MAX_THREADS = 4  # Tantivy releases the GIL while searching; downloads are I/O
SMALL_SPLIT_ROWS = 10_000  # splits this small on average are searched in one thread (search_threads)
# matches (of splits the query was counted in) below which the splits are read in one thread: the
# work per match is mostly Python (man pages partitioned by language, 27 splits: 234 matches
# 2.5 -> 1.3 ms, 7,928 matches 11.2 -> 5.7 ms in one thread instead of two)
THREADED_MATCHES = 50_000

T = TypeVar("T")


def search_threads(files: Sequence[Any]) -> int:
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


def map_chunks(
    fn: Callable[[list[Any]], list[T]], files: Sequence[Any], weights: Sequence[int] | None = None
) -> list[T]:
    """`fn` over contiguous chunks of `files`, one chunk per thread (search_threads), the results
    concatenated in file order. With `weights` (the query's matches per split, known from
    SearchPlan.matching), one thread unless they add up to THREADED_MATCHES, and chunks of about
    equal weight (a table partitioned by a skewed column has a few big splits among many small
    ones: equal numbers of splits per thread left one thread doing both big ones)."""
    threads = search_threads(files)
    if weights is not None and sum(weights) < THREADED_MATCHES:
        threads = 1
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
    files: Sequence[Any],
    query: str | None = None,
    columns: Sequence[str] | None = None,
) -> None:
    """Fetch the splits the cache lacks into it, in parallel threads (downloads are I/O), before
    they are searched in fewer threads (map_chunks). With `query` (the only thing the read asks
    of the index), only what it reads of remote index files; with `columns` too, the row store
    parts of its matches (sparse.prefetch_rows)."""
    from indextables_spark.core.split.sparse import prefetch_rows

    cache = get_cache(options)
    missing = [f for f in files if not cache.is_cached(storage, f, query)]

    def fetch(f: Any) -> None:
        local = cache.local_dir(storage, f, query)
        if query is not None and columns is not None:
            prefetch_rows(local, query, columns)

    if len(missing) == 1:
        fetch(missing[0])
    elif missing:
        list(shared_pool("fetch", MAX_THREADS).map(fetch, missing))


def count_split(
    storage: Storage,
    add_file: Any,
    query: str | None,
    options: Options | None,
    filters: Sequence[Filter] = (),
    delete_logs: Sequence[Any] = (),
) -> int:
    """Matching rows of one split, minus the rows its delete logs (log.actions.DeleteLog) delete."""
    from indextables_spark.core.log.delete_logs import load_split_deletes

    deletes = load_split_deletes(storage, delete_logs, add_file.num_records, add_file.path)
    if (
        query is None
        and not filters
        and add_file.num_records is not None
        and (deletes is None or deletes.only_positions)
    ):
        return int(add_file.num_records) - (int(deletes.positions.size) if deletes is not None else 0)
    reader = SplitReader(get_cache(options).local_dir(storage, add_file))
    return reader.count(list(filters), query, deletes)


def count_matches(
    storage: Storage,
    snapshot: Any,
    files: Sequence[Any],
    query: str | None,
    options: Options | dict[str, Any] | None = None,
    filters: Sequence[Filter] = (),
) -> int:
    """Rows of `files` matching the query text (and filters); the snapshot is the table version read."""
    opts = options if isinstance(options, Options) else Options.of(options)
    files = list(files)
    if not files:
        return 0

    def counts(chunk: list[Any]) -> list[int]:
        return [
            count_split(storage, f, query, opts, filters, snapshot.deletes_for(f) if snapshot is not None else ())
            for f in chunk
        ]

    if query is not None or filters:  # else the log's row counts may answer without any split
        fetch_missing(storage, opts, files)
    return sum(map_chunks(counts, files))


# ---- Spark-free search / read of a set of splits (IndexTable.search, to_arrow, to_batches) --------

SNIPPET_COLUMN = "_snippet"


class SearchPlan:
    """What one Spark-free read needs: the snapshot read, the output schema, the filters split into
    partition-only conjuncts (exact pruning), pushable data filters, and the rest (exact, Arrow)."""

    def __init__(
        self,
        storage: Storage,
        snapshot: Any,
        options: Options,
        conjuncts: Sequence[Filter],
        query: str | None,
        columns: Sequence[str] | None,
        snippets: Sequence[str] | None = None,
    ):
        from indextables_spark.errors import SchemaMismatchError

        self.storage, self.snapshot, self.query = storage, snapshot, query
        self.options, self.schema, self.specs = _table_layout(snapshot, options)
        names = self.schema.names
        if columns is not None:
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise SchemaMismatchError(f"columns {unknown} are not in the table (columns: {names})")
        self.columns = list(columns) if columns is not None else list(names)
        self.snippets = tuple(snippets or ())
        unstored = [c for c in self.snippets if any(s.index_only and s.name == c for s in self.specs)]
        if unstored:
            from indextables_spark.expr.filters import UnsupportedFilterError

            raise UnsupportedFilterError(
                f"snippets of {unstored}: index-only columns (indexing.indexonlyfields) keep no text to cut "
                f"snippets from"
            )
        self.parts = list(snapshot.partition_columns)
        from indextables_spark.expr.model import columns_of
        from indextables_spark.expr.filters import check_index_only, supports

        parts = set(self.parts)
        self.conjuncts = list(conjuncts)
        # filters on index-only columns: the index answers them exactly, or the read fails now
        index_only = check_index_only(self.conjuncts, self.specs, f"a read of {storage.uri}")
        self.part_only = [f for f in self.conjuncts if columns_of(f) <= parts]
        self.data_only = [f for f in self.conjuncts if not (columns_of(f) & parts)]
        self.pushed = [f for f in self.data_only if any(f is g for g in index_only) or supports(f, self.specs)]
        self.exact = [f for f in self.conjuncts if not any(f is g for g in self.part_only)]
        # what the split search does not apply exactly: conditions mixing partition and data columns,
        # filters the split cannot take (checked with Arrow on rows with partition values attached)
        self.post = [f for f in self.exact if not any(f is g for g in self.pushed)]
        # data columns read from a split: the projection, the snippet fields, the filter columns
        from indextables_spark.expr.filters import struct_column, where_narrowing

        filter_cols = {struct_column(c, names) or c for f in self.exact for c in columns_of(f)}
        # struct-field conditions narrow unscored reads through the json field (checked on the rows too)
        specs_by_name = {s.name: s for s in self.specs}
        self.narrowing = [q for f in self.data_only if (q := where_narrowing(f, specs_by_name, names)) is not None]
        self.read_names = [
            c for c in names if c not in parts and (c in self.columns or c in self.snippets or c in filter_cols)
        ]
        self.types = {f.name: f.type for f in self.schema}
        self.cache = get_cache(self.options)
        self._hits: dict[str, tuple[str, int]] = {}  # split path -> (its directory, query matches)
        # only the query text goes to the index (no pushed filter, narrowing or snippet): a remote
        # split's index files may be fetched only as far as it reads them (SplitCache.local_dir)
        alone = query is not None and not self.pushed and not self.narrowing and not self.snippets
        self.index_query = query if alone else None

    def live_files(self) -> list[AddFile]:
        """Partition pruning, min/max data skipping and Bloom filters, as the Spark reader's planner."""
        types = {c: t for c, t in _spark_types(self.snapshot).items() if c in self.parts}
        return prune_files(
            self.storage.uri, self.options, self.snapshot, self.part_only, self.data_only, self.parts, types, self.specs
        )[0]

    def matching(self, files: Sequence[Any]) -> list[Any]:
        """The cached splits among `files` whose index matches the query (every one without a
        query, with a struct-field narrowing, which joins the query text, or with a query not
        cheap to count: reader.query_hits): a split without a match costs its cache entry, the
        parsed query of its doc mapping (cached) and Tantivy's count (a few microseconds), and is
        not opened further. Filters and deletes only remove rows, so they cannot make a split
        without a query match return rows. The counts are kept for the reads (matching_rows does
        not count again) and for map_chunks."""
        if self.query is None or self.narrowing:
            return list(files)
        from indextables_spark.core.split.query_parsing import query_hits

        kept = []
        for f in files:
            local = self.cache.local_dir(self.storage, f, self.index_query)
            n = query_hits(local, self.query)
            if n is None:
                kept.append(f)
            elif n:
                self._hits[f.path] = (local, n)
                kept.append(f)
        return kept

    def match_counts(self, files: Sequence[Any]) -> list[int] | None:
        """The query's matches in each of `files` (all counted by `matching`), else None."""
        counts = [self._hits.get(f.path) for f in files]
        return [c[1] for c in counts if c is not None] if all(c is not None for c in counts) else None

    def check_query(self, files: Sequence[Any]) -> None:
        """QueryParseError for a query one of the splits read cannot parse (as the Spark reader)."""
        if self.query is None:
            return
        from indextables_spark.core.split.query_parsing import check_query
        from indextables_spark.core.split.reference import specs_for_doc_mapping

        refs = sorted({f.doc_mapping_ref for f in files if f.doc_mapping_ref})
        mappings = [m for m in (self.snapshot.doc_mapping(r) for r in refs) if m]
        snap = self.snapshot
        for specs in [specs_for_doc_mapping(m, snap.schema_json, snap.partition_columns) for m in mappings] or [
            self.specs
        ]:
            check_query(specs, self.query)

    def out_schema(self, scored: bool) -> pa.Schema:
        fields = [self.schema.field(c) for c in self.columns]
        if scored:
            fields.append(pa.field(SCORE_COLUMN, pa.float32()))
        if self.snippets:
            t = pa.string() if len(self.snippets) == 1 else pa.map_(pa.string(), pa.string())
            fields.append(pa.field(SNIPPET_COLUMN, t))
        return pa.schema(fields)

    # ---- one split ----------------------------------------------------------------------------
    def _full_schema(self, scored: bool) -> pa.Schema:
        """The columns a split's rows are completed to: partition and read columns (+ `_score`)."""
        fields = [f for f in self.schema if f.name in self.parts or f.name in self.read_names]
        return pa.schema(fields + ([pa.field(SCORE_COLUMN, pa.float32())] if scored else []))

    def _full(self, table: pa.Table | pa.RecordBatch, add: Any) -> pa.Table:
        """Rows of a split with the partition values and the columns the split lacks (NULL) attached."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        out: pa.Table = with_partition_values(
            [(add, table)], self._full_schema(SCORE_COLUMN in table.schema.names), self.parts
        )
        return out

    def _finish(self, table: pa.Table, split: SplitReader | None, scored: bool, post: Sequence[Filter]) -> pa.Table:
        """The post filters applied, the snippets (from `split`, given when there are snippet
        fields) attached, the output columns selected."""
        from indextables_spark.expr.filters import arrow_mask

        if post and table.num_rows:
            table = table.filter(arrow_mask(table, list(post)))
        if self.snippets:
            snip = snippet_column(split, table, self.query, self.snippets)
            table = table.append_column(SNIPPET_COLUMN, snip)
        return table.select(
            self.columns + ([SCORE_COLUMN] if scored else []) + ([SNIPPET_COLUMN] if self.snippets else [])
        )

    def _open(self, add: Any) -> tuple[SplitReader, SplitDeletes | None]:
        from indextables_spark.core.log.delete_logs import load_split_deletes

        known = self._hits.get(add.path)
        split = SplitReader(
            known[0] if known is not None else self.cache.local_dir(self.storage, add, self.index_query)
        )
        if known is not None and self.query is not None:
            split.hits_hint = (split.parse_query(self.query), known[1])
        deletes = load_split_deletes(self.storage, self.snapshot.deletes_for(add), split.num_rows, add.path)
        return split, deletes

    def _split_batches(self, add: Any, batch_rows: int) -> tuple[SplitReader, Iterator[pa.RecordBatch]]:
        """(the split, its rows matching the query and the filters in row order, data columns only)."""
        from indextables_spark.expr.filters import with_narrowing

        split, deletes = self._open(add)
        query = with_narrowing(self.query, self.narrowing, split.specs)
        return split, split_rows(split, self.pushed, query, self.read_names, self.types, batch_rows, deletes)

    def read_split(self, add: Any, batch_rows: int = 65536) -> Iterator[pa.Table]:
        """Rows of one split matching the query and the filters, in row order (no score)."""
        split, batches = self._split_batches(add, batch_rows)
        for batch in batches:
            out = self._finish(self._full(batch, add), split, False, self.post)
            if out.num_rows:
                yield out

    def read_splits(self, files: Sequence[Any], batch_rows: int = 65536) -> Iterator[pa.Table]:
        """Rows of the splits matching the query and the filters, split by split in row order (no
        score). The splits' rows are joined before their partition values are attached and the
        rest of the filters run, as a Spark task does: with hundreds of splits of a few matches
        each, per-split work is the cost. Snippets are made split by split (from its index)."""
        if self.snippets:
            for add in files:
                yield from self.read_split(add, batch_rows)
            return
        data = pa.schema([self.schema.field(c) for c in self.read_names])

        def pieces() -> Iterator[tuple[Any, pa.RecordBatch]]:
            for add in files:
                for batch in self._split_batches(add, batch_rows)[1]:
                    yield add, batch if batch.schema.equals(data) else conform(batch, data)

        for batch in joined(pieces(), batch_rows, self._full_schema(False), self.parts):
            out = self._finish(pa.Table.from_batches([batch]), None, False, self.post)
            if out.num_rows:
                yield out

    def search_split(self, add: Any, limit: int | None) -> pa.Table:
        """Matches of one split with `_score`, best first (at most `limit` when the filters all
        go to the split; else every match, cut after the exact filters)."""
        if self.query is None:
            from indextables_spark.errors import InvalidOptionError

            raise InvalidOptionError("a scored search needs a query")
        split, deletes = self._open(add)
        present = set(split.schema.names)
        names = [c for c in self.read_names if c in present]
        present |= {s.name for s in split.specs if s.index_only}  # their filters are the index's
        pushed = [f for f in self.pushed if columns_of_all(f) <= present]
        residual = [f for f in self.exact if not any(f is g for g in pushed)]
        table = split.search_scored(self.query, None if residual else limit, pushed, names, deletes=deletes)
        table = self._full(table, add)
        if residual and table.num_rows:
            from indextables_spark.expr.filters import arrow_mask

            table = table.filter(arrow_mask(table, residual))
            if limit is not None:
                table = table.slice(0, limit)
        return self._finish(table, split, True, ())


_Layout = tuple[Options, pa.Schema, list["ColumnSpec"]]
_last_layout: tuple[()] | tuple[Any, Options, _Layout] = ()  # (snapshot, options, layout)


def _table_layout(snapshot: Any, options: Options) -> _Layout:
    """(read options = table configuration + `options`, Arrow schema, column specs) of a snapshot.
    The last one is kept: a service searching one table asks for the same snapshot per request."""
    global _last_layout
    last = _last_layout
    if last and last[0] is snapshot and last[1] is options:
        return last[2]
    from indextables_spark.core.split.arrow_types import arrow_schema
    from indextables_spark.core.split.column_specs import column_specs, table_options

    opts = table_options(snapshot, options)
    layout = (
        opts,
        arrow_schema(snapshot.schema_json),
        column_specs(snapshot.schema_json, list(snapshot.partition_columns), opts),
    )
    _last_layout = (snapshot, options, layout)
    return layout


@dataclass(frozen=True)
class SearchExplanation:
    """What a read of a table does with a query and filters (IndexTable.explain): which conditions
    the index answers, which it narrows and the rows re-check, which only the rows decide; the
    Tantivy query of the index side; and how many splits each pruning step kept."""

    version: int
    query: str | None
    partition_filters: tuple[str, ...]  # exact, on the log's partition values: prune splits
    index_answered: tuple[str, ...]  # the index selects exactly their rows (counts use it alone)
    index_narrowed: tuple[str, ...]  # the index selects a superset, the rows re-check
    rows_only: tuple[str, ...]  # evaluated on the rows only (no index form)
    tantivy_query: str | None  # the query the splits run (user query AND narrowing)
    splits_total: int
    splits_after_partition_pruning: int
    splits_after_data_skipping: int  # min/max statistics
    splits_after_bloom_filters: int  # the splits read

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def explain(plan: SearchPlan) -> SearchExplanation:
    """The SearchExplanation of a plan (the same pruning and translation a read does)."""
    from indextables_spark.expr.model import render

    types = {c: t for c, t in _spark_types(plan.snapshot).items() if c in plan.parts}
    files, (n_total, n_parts, n_stats) = prune_files(
        plan.storage.uri, plan.options, plan.snapshot, plan.part_only, plan.data_only, plan.parts, types, plan.specs
    )
    plan.check_query(files)
    answered, narrowed, rows_only, tq = index_translation(plan.specs, plan.query, plan.exact, plan.pushed)
    return SearchExplanation(
        plan.snapshot.version,
        plan.query,
        tuple(render(f) for f in plan.part_only),
        tuple(render(f) for f in answered),
        tuple(render(f) for f in narrowed),
        tuple(render(f) for f in rows_only),
        tq,
        n_total,
        n_parts,
        n_stats,
        len(files),
    )


def index_translation(
    specs: Sequence[Any], query: str | None, filters: Sequence[Filter], pushed: Sequence[Filter]
) -> tuple[list[Filter], list[Filter], list[Filter], str | None]:
    """How a read's filters meet the index: (those it selects exactly, those it narrows and the rows
    re-check, those only the rows decide — every filter not in `pushed` among them — and the repr of
    the Tantivy query the splits run: the query AND the narrowing). Used by both explains."""
    from indextables_spark.expr.filters import build_query
    from indextables_spark.core.split.query_parsing import query_for_specs
    from indextables_spark.core.split.doc_mapping import tantivy_schema

    stored = [s for s in specs if not s.partition]
    schema = tantivy_schema(stored)
    answered: list[Filter] = []
    narrowed: list[Filter] = []
    rows_only: list[Filter] = []
    parts: list[tantivy.Query] = [query_for_specs(stored, query)] if query is not None else []
    for f in filters:
        q, exact = build_query(schema, [f], specs) if any(f is g for g in pushed) else (None, False)
        if q is None:
            rows_only.append(f)
        else:
            parts.append(q)
            (answered if exact else narrowed).append(f)
    if len(parts) > 1:
        import tantivy

        parts = [tantivy.Query.boolean_query([(tantivy.Occur.Must, p) for p in parts])]
    return answered, narrowed, rows_only, (repr(parts[0]) if parts else None)


def columns_of_all(f: Filter) -> set[str]:
    from indextables_spark.expr.model import columns_of

    return {c.strip("`") for c in columns_of(f)}


def _spark_types(snapshot: Any) -> dict[str, str]:
    out = {}
    for f in snapshot.schema_json.get("fields", []):
        t = f.get("type")
        out[f["name"]] = t if isinstance(t, str) else str(t.get("type"))
    return out


def snippet_column(split: Any, table: pa.Table, query: str | None, fields: Sequence[str]) -> pa.Array:
    """`_snippet` as the Spark reader's snippetFields: one field → its snippet, several → a map
    field → snippet (fields without a match left out)."""
    if query is None:
        from indextables_spark.errors import InvalidOptionError

        raise InvalidOptionError("snippets need a query")

    def values(c: str) -> pa.Array:
        col = table.column(c)
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col

    snippets = {c: split.snippets(query, c, values(c)) for c in fields}
    if len(fields) == 1:
        return snippets[fields[0]]
    return pa.array(
        [{c: s[i].as_py() for c, s in snippets.items() if s[i].is_valid} for i in range(table.num_rows)],
        pa.map_(pa.string(), pa.string()),
    )


def search_table(plan: SearchPlan, limit: int | None = None) -> pa.Table:
    """Every match of the plan's splits (fetched in parallel, searched in map_chunks); with a query
    and a limit, the global top `limit` by `_score`, best first."""
    files = plan.live_files()
    plan.check_query(files)
    scored = plan.query is not None and limit is not None
    schema = plan.out_schema(scored)
    if (limit is not None and limit <= 0) or not files:
        return schema.empty_table()
    # (a scored read takes the rows of its top matches only: no prefetch of every match's rows)
    fetch_missing(plan.storage, plan.options, files, plan.index_query, None if scored else plan.read_names)
    files = plan.matching(files)
    weights = plan.match_counts(files)
    if scored:
        tables = map_chunks(lambda chunk: [plan.search_split(f, limit) for f in chunk], files, weights)
    else:
        tables = map_chunks(lambda chunk: list(plan.read_splits(chunk)), files, weights)
    if not tables:
        return schema.empty_table()
    out = pa.concat_tables([t.cast(schema) if not t.schema.equals(schema) else t for t in tables])
    if scored and limit is not None:  # (scored implies a limit)
        out = top_n(out, limit)
    elif limit is not None:
        out = out.slice(0, limit)
    return out.combine_chunks()


def stream_table(plan: SearchPlan, batch_rows: int = 65536) -> pa.RecordBatchReader:
    """The plan's rows split by split (one split's matches in memory at a time), in row order."""
    files = plan.live_files()
    plan.check_query(files)
    schema = plan.out_schema(False)

    def gen() -> Iterator[pa.RecordBatch]:
        for f in files:
            if plan.query is not None and not plan.matching([f]):
                continue
            for t in plan.read_split(f, batch_rows):
                yield from t.cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, gen())


# ---- split-level pieces shared with the Spark reader (spark/reader.py) ------------------------------


def prune_files(
    table_path: str,
    options: Options,
    snapshot: Any,
    partition_filters: Sequence[Filter],
    data_filters: Sequence[Filter],
    partition_columns: Sequence[str],
    partition_types: dict[str, str],
    specs: Any,
) -> tuple[list[AddFile], tuple[int, int, int]]:
    """The splits a read opens: partition pruning (filters over partition columns only), min/max
    data skipping and Bloom filters (filters over data columns only). Returns (files, (splits in
    the snapshot, after partition pruning, after data skipping))."""
    from indextables_spark.core.split.bloom import skip_by_blooms
    from indextables_spark.expr.filters import skip_split

    n_total = snapshot.num_files
    if partition_filters:
        files = _partition_pruned(snapshot, partition_filters, partition_columns, partition_types)
    else:
        files = snapshot.files
    n_parts = len(files)
    if data_filters:
        from indextables_spark.core.split.reference import written_by_reference

        files = [f for f in files if not skip_split(f, data_filters, specs, written_by_reference(snapshot, f))]
    n_stats = len(files)
    files = skip_by_blooms(table_path, options, snapshot, files, data_filters)
    return files, (n_total, n_parts, n_stats)


def _partition_pruned(
    snapshot: Any, filters: Sequence[Filter], partition_columns: Sequence[str], partition_types: dict[str, str]
) -> list[AddFile]:
    """The snapshot's files whose partition may match, with the filters evaluated once per distinct
    partition (Spark semantics, filters.prune_partition) and AddFile objects built only for the
    files kept: a 100,000-split table with 100 partitions plans in milliseconds instead of the
    0.8 s that building every AddFile costs."""
    import pyarrow.compute as pc

    from indextables_spark.core.log.file_entries import table_to_add_files
    from indextables_spark.expr.filters import prune_partition

    table = snapshot.files_table
    if table.num_rows == 0 or not partition_columns:
        return [
            f
            for f in snapshot.files
            if prune_partition(f.partition_values, filters, partition_columns, partition_types)
        ]
    values, index = snapshot.partition_index
    verdicts = pa.array([prune_partition(v, filters, partition_columns, partition_types) for v in values], pa.bool_())
    keep = pc.take(verdicts, index)
    return table_to_add_files(table.filter(keep))


def split_rows(
    split: SplitReader,
    filters: Sequence[Filter],
    query: str | None,
    names: Sequence[str],
    types: dict[str, pa.DataType],
    batch_rows: int,
    deletes: Any = None,
) -> Iterator[pa.RecordBatch]:
    """Rows of one split matching the query and the (data-column) filters exactly, in row order,
    columns `names`. A split written before columns were added to the table (mergeSchema) has them
    NULL in every row (typed from `types`); filters on them are applied after they are attached."""
    from indextables_spark.expr.model import columns_of
    from indextables_spark.expr.filters import arrow_mask

    stored = set(split.schema.names)
    # index-only columns read as NULL, but their filters are the index's (the split reader's)
    nulls = {n.lower() for n in names if n not in stored}
    absent = nulls - split.index_only
    if not nulls:
        for batch in split.read(filters, query, names, batch_rows, deletes=deletes):
            if batch.num_rows:
                yield batch
        return
    on_absent = [f for f in filters if any(c.strip("`").lower() in absent for c in columns_of(f))]
    others = [f for f in filters if not any(f is g for g in on_absent)]
    present = [n for n in names if n in stored]
    for batch in split.read(others, query, present, batch_rows, deletes=deletes):
        if not batch.num_rows:
            continue
        arrays, fields = [], []
        for n in names:
            if n in stored:
                arrays.append(batch.column(batch.schema.get_field_index(n)))
                fields.append(batch.schema.field(n))
            else:
                arrays.append(pa.nulls(batch.num_rows, types[n]))
                fields.append(pa.field(n, types[n]))
        full = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        if on_absent:
            full = full.filter(arrow_mask(full, on_absent))
        if full.num_rows:
            yield full


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch with `schema`'s types and nullability (a split written with an older type of a
    column, e.g. int before a widening, or a non-nullable field)."""
    cols = [c if c.type.equals(f.type) else c.cast(f.type) for c, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def joined(
    pieces: Iterator[tuple[AddFile, pa.RecordBatch]], rows: int, target: pa.Schema, partition_columns: Sequence[str]
) -> Iterator[pa.RecordBatch]:
    """Batches of `target` from the splits' data batches: small ones joined up to `rows` rows
    (order kept; joined pieces must share one schema), their partition values attached once per
    joined batch. A selective read finds a few rows in each of many splits, and every batch a
    Python data source yields pays its own Arrow serialization and JVM conversion (512 splits:
    ~440 batches of a few rows per query); attaching partition values per split cost as much as
    searching it."""
    pending: list[tuple[AddFile, pa.RecordBatch]] = []
    count = 0
    for add, b in pieces:
        if b.num_rows == 0:
            continue
        if b.num_rows >= rows // 2:  # big enough on its own: no copy
            if pending:
                yield with_partition_values(pending, target, partition_columns)
                pending, count = [], 0
            yield with_partition_values([(add, b)], target, partition_columns)
            continue
        pending.append((add, b))
        count += b.num_rows
        if count >= rows:
            yield with_partition_values(pending, target, partition_columns)
            pending, count = [], 0
    if pending:
        yield with_partition_values(pending, target, partition_columns)


def with_partition_values(
    pieces: Sequence[tuple[AddFile, Any]], target: pa.Schema, partition_columns: Sequence[str]
) -> Any:
    """The pieces' rows (RecordBatches sharing a schema, or one Table) as `target`: each row with
    its split's partition values, the data columns cast to the target's types where a split
    stored another (an older type), and target columns the data lacks NULL (`_indexall`, columns
    added after the split was written). A RecordBatch for batches, a Table for a Table."""
    import numpy as np

    from indextables_spark.core.split.partitions import partition_value_array

    data = pieces[0][1] if len(pieces) == 1 else pa.concat_batches([b for _, b in pieces])
    n = data.num_rows
    names = data.schema.names
    parts = set(partition_columns)
    cols = []
    for f in target:
        if f.name in parts:
            values = [add.partition_values.get(f.name) for add, _ in pieces]
            distinct = list(dict.fromkeys(values))
            if len(distinct) == 1:
                cols.append(partition_value_array(distinct[0], f.type, n))
            else:
                at = {v: i for i, v in enumerate(distinct)}
                each = pa.concat_arrays([partition_value_array(v, f.type, 1) for v in distinct])
                which = np.repeat([at[v] for v in values], [b.num_rows for _, b in pieces])
                cols.append(each.take(pa.array(which)))
        elif f.name in names:
            col = data.column(names.index(f.name))
            cols.append(col if col.type.equals(f.type) else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    if isinstance(data, pa.Table):
        return pa.Table.from_arrays(cols, schema=target)
    return pa.RecordBatch.from_arrays(cols, schema=target)


def top_n(table: pa.Table, limit: int) -> pa.Table:
    """The `limit` best rows of per-split top-n results, by `_score` descending."""
    return table.sort_by([(SCORE_COLUMN, "descending")]).slice(0, limit)
