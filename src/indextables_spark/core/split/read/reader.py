"""SplitReader: rows of one extracted split, narrowed by Tantivy, filtered exactly with Arrow.

Path of a read with filters or a query:
1. Tantivy query = the read's SearchQuery on this split (expr/search_query.py: the text AND the
   struct-field narrowing) AND the narrowing query of the filters (tantivy_query.py's build_query).
2. Matching row ids come back sorted (ours: as the sort key of `search(order_by_field="__row")`).
3. Rows are taken by id (ours: from the IPC record batches holding them, `take` per batch).
4. `arrow_mask` applies the filters exactly (the narrowing is only a superset).
With filters only and a narrowing that keeps most rows, a plain scan + mask is cheaper and is used.
Steps 2 and 3 are the split's layout, asked of its cache/row_access.SplitRows (ours, or the
document store of a split the reference implementation wrote), never decided here.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema.types import VectorSpec, index_only_columns
from indextables_spark.core.split.cache.file_pages import page_fetch
from indextables_spark.core.split.cache.open_splits import handles, register_reader, searcher_of, unregister_reader
from indextables_spark.core.split.format._tantivy import tantivy_call
from indextables_spark.core.split.format.bundle import extracted_source
from indextables_spark.expr.fulltext import default_fields
from indextables_spark.core.split.read.query_parsing import all_of, scored_query
from indextables_spark.core.split.read.index_only import index_only_filters, index_only_query
from indextables_spark.core.split.read.tantivy_query import build_query
from indextables_spark.errors import SchemaMismatchError, SplitFormatError
from indextables_spark.expr.arrow_eval import arrow_mask
from indextables_spark.expr.model import Filter, columns_of, render
from indextables_spark.expr.values import UnsupportedFilterError

if TYPE_CHECKING:
    import tantivy

    from indextables_spark.core.log.deletes.delete_logs import SplitDeletes
    from indextables_spark.core.split.format.vector_index import VectorIndex
    from indextables_spark.core.split.read.corpus_stats import CorpusStats
    from indextables_spark.expr.search_query import SearchQuery


DEFAULT_BATCH_SIZE = 10_000
SCORE_COLUMN = "_score"
DISTANCE_COLUMN = "_distance"  # a vector search's exact distance (read/vector/nearest.py)
ROW_ID_COLUMN = "_rowid"  # a row's position in its split (hybrid search joins its two rankings on it)
SCAN_FRACTION = 0.5  # narrowing keeps more than this share of rows → scan instead


def _rechunk(batches: Iterator[pa.RecordBatch], batch_size: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of at most batch_size rows (small pieces are coalesced)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for b in batches:
        if b.num_rows == 0:
            continue
        pending.append(b)
        rows += b.num_rows
        if rows >= batch_size:
            table = pa.Table.from_batches(pending, schema=schema)
            while table.num_rows >= batch_size:
                yield from table.slice(0, batch_size).combine_chunks().to_batches(max_chunksize=batch_size)
                table = table.slice(batch_size)
            pending = table.to_batches()
            rows = table.num_rows
    if len(pending) == 1:  # the usual end of a selective search: nothing to join
        yield pending[0]
    elif rows:
        yield pa.concat_batches(pending)


def top_column(path: str, names_by_lower: Mapping[str, str]) -> str:
    """The lower-cased name of the column a filter's column path reads: the path itself when a
    column has that name, else its first segment (`user.address.city` reads `user`)."""
    key = path.strip("`").lower()
    return key if key in names_by_lower else key.split(".", 1)[0]


class SplitReader:
    """Reads one extracted split directory (see cache.SplitCache.local_dir), opened once per process
    (open_splits.py)."""

    def __init__(self, local_dir: str):
        self.local_dir = os.path.abspath(local_dir)
        h = handles(self.local_dir)
        self.footer = h.footer
        self.specs = h.specs
        self.index = h.index
        self._handles = h
        assert h.rows is not None  # set when the split is opened
        self.rows = h.rows  # where the rows come from, how documents name them (row_access.py)
        self.schema: pa.Schema = h.rows.schema
        self.num_rows = h.rows.num_rows
        self._specs_by_name = {s.name: s for s in self.specs}
        # indexed, not in the row store (indexing.indexonlyfields): filters on them are the index's
        self.index_only = index_only_columns(self.specs)
        # (Tantivy query, its matches) when the caller counted them already (search.SearchPlan):
        # matching_rows then skips its own count of that query
        self.hits_hint: tuple[Any, int] | None = None
        register_reader(self.local_dir)
        weakref.finalize(self, unregister_reader, self.local_dir)

    # -- queries -------------------------------------------------------------------------------

    def default_fields(self) -> list[str]:
        return default_fields(self.specs)

    def tantivy_query(self, query: SearchQuery, scored: bool = False) -> tantivy.Query | None:
        """The read's query on this split (the text AND the narrowing it can search, None: neither;
        the text alone `scored`)."""
        return query.tantivy_query(self.index, self.specs, self._handles.mapping_key, scored=scored)

    def _row_filters(self, filters: Sequence[Filter]) -> tuple[tantivy.Query | None, list[Filter]]:
        """(the index's exact answer to the filters on index-only columns, the filters the rows
        check): the rows hold no index-only column, so its filters never reach `arrow_mask`."""
        if not self.index_only:
            return None, list(filters)
        on, rest = index_only_filters(filters, self._specs_by_name)
        where = f"split {self.local_dir}"
        return (index_only_query(self.index.schema, on, self._specs_by_name, where) if on else None), rest

    def _plan(
        self, filters: Sequence[Filter], query: SearchQuery | None
    ) -> tuple[list[Filter], tuple[Any, bool, bool]]:
        """(the filters the rows check, the search plan: tantivy query or None, narrowing exact,
        has a query that must run). A user query always runs; so do the filters on index-only
        columns (_row_filters), which join the plan as a query since the rows cannot check them."""
        forced, filters = self._row_filters(filters)
        narrow, exact = build_query(self.index.schema, filters, self.specs) if filters else (None, True)
        user = self.tantivy_query(query) if query is not None else None
        return filters, (all_of(user, narrow, forced), exact, user is not None or forced is not None)

    def search_plan(
        self, filters: Sequence[Filter], query: SearchQuery | None
    ) -> tuple[list[Filter], tuple[Any, bool, bool]]:
        """`_plan` of filters on columns the split holds (SchemaMismatchError naming one it lacks)."""
        self._check_filter_columns(filters)
        return self._plan(filters, query)

    def exact_query(self, filters: Sequence[Filter], query: SearchQuery | None) -> tantivy.Query | None:
        """The Tantivy query of `query` AND `filters` when the index alone selects exactly their
        rows (None: every document), for steps that never see the rows (aggregations);
        UnsupportedFilterError naming a filter the index only narrows or cannot express."""
        forced, rest = self._row_filters(filters)
        parts = []
        for f in rest:
            q, exact = build_query(self.index.schema, [f], self.specs)
            if q is None or not exact:
                raise UnsupportedFilterError(
                    f"filter {render(f)}: the index of split {self.local_dir} does not select its rows exactly, "
                    f"and this step reads the index alone"
                )
            parts.append(q)
        selection: tantivy.Query | None = all_of(
            self.tantivy_query(query) if query is not None else None, *parts, forced
        )
        return selection

    def searcher(self) -> Any:  # a tantivy.Searcher (Any: tantivy's stubs lack SearchResult.count)
        return searcher_of(self._handles, self.local_dir)

    def matching_rows(
        self, plan: tuple[tantivy.Query | None, bool, bool], scan_fraction: float = SCAN_FRACTION
    ) -> list[int] | None:
        """Sorted row ids that may match, or None to scan every row (a narrowing alone that keeps
        more than `scan_fraction` of them)."""
        q, _exact, has_user = plan
        if q is None:
            return None
        searcher = self.searcher()
        n = searcher.num_docs
        if n == 0:  # search(limit=0) panics
            return []
        with tantivy_call(f"searching split {self.local_dir}"):
            # The matches, when known (counted by the caller: search.SearchPlan.matching, or here
            # for a narrowing alone, to choose between searching and scanning): the ordered search
            # then asks for exactly them instead of a top-n of every document.
            hint = self.hits_hint
            hits = hint[1] if hint is not None and hint[0] is q else None
            if hits is None and not has_user:
                hits = searcher.search(q, 1, count=True).count
                if hits > scan_fraction * n:
                    return None
            if hits == 0:
                return []
            limit = n if hits is None else hits
            rows = self.rows.sorted_rows(searcher, q, limit)
        if rows and rows[-1] >= self.num_rows:
            raise self._beyond_rows(rows[-1])
        return rows

    def _beyond_rows(self, row: int) -> SplitFormatError:
        """What a damaged split whose index names a row beyond its row store raises."""
        return SplitFormatError(
            f"split directory {self.local_dir}: index row id {row} is beyond the {self.num_rows} stored rows"
        )

    # -- rows ----------------------------------------------------------------------------------

    def _check_columns(self, names: Sequence[str], what: str) -> None:
        stored = self.schema.names
        missing = [c for c in names if c not in stored]
        if missing:
            raise SchemaMismatchError(
                f"{what} {missing} not stored in split {self.local_dir} "
                f"(stored columns: {stored}; partition columns are not stored in splits)"
            )

    def _check_filter_columns(self, filters: Sequence[Filter]) -> None:
        if not filters:
            return
        stored = {n.lower() for n in self.schema.names} | self.index_only
        unknown = sorted(
            c for c in set().union(*(columns_of(f) for f in filters)) if c.strip("`").lower() not in stored
        )
        if unknown:
            self._check_columns(unknown, "filter columns")

    def take(self, rows: list[int], columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Rows (sorted ids) gathered batch by batch (only `columns`, when given)."""
        if rows and rows[-1] >= self.num_rows:
            raise self._beyond_rows(rows[-1])
        return (b for _, b in self.rows.take(rows, columns))

    def source(
        self,
        rows: list[int] | None,
        with_ids: bool,
        columns: Sequence[str] | None = None,
        dead: np.ndarray | None = None,
    ) -> Iterator[tuple[pa.Array | None, pa.RecordBatch]]:
        """(row ids or None, batch): every batch when rows is None (but those all of whose rows
        are `dead`: deleted), else the given rows."""
        if rows is not None:
            yield from self.rows.take(rows, columns)
            return
        yield from self.rows.scan(with_ids, columns, dead)

    def needed_columns(
        self, names: Sequence[str], filters: Sequence[Filter], deletes: SplitDeletes | None
    ) -> list[str]:
        """`names` plus the stored columns the filters and the equality deletes read."""
        by_lower = {c.lower(): c for c in self.schema.names}
        extra = {by_lower[k] for f in filters for c in columns_of(f) if (k := top_column(c, by_lower)) in by_lower}
        if deletes is not None:
            extra |= {c for _, t in deletes.equalities for c in t.column_names if c in by_lower.values()}
        return list(names) + sorted(extra - set(names))

    def _masked(
        self,
        filters: Sequence[Filter],
        query: SearchQuery | None,
        deletes: SplitDeletes | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Checks and plans now (errors surface at the call), then yields the filtered batches."""
        filters, plan = self.search_plan(list(filters or []), query)
        return self._filtered(filters, plan, deletes, columns=columns)

    def _filtered(
        self,
        filters: list[Filter],
        plan: tuple[tantivy.Query | None, bool, bool],
        deletes: SplitDeletes | None = None,
        with_ids: bool = False,
        columns: Sequence[str] | None = None,
        scan_fraction: float = SCAN_FRACTION,
    ) -> Iterator[Any]:
        """Batches (or (row ids, batch) pairs) of the rows matching the plan and the filters
        exactly, minus deleted rows (deletes: log.delete_logs.SplitDeletes); with `columns`, the
        batches hold those columns (which must include what the filters and deletes read)."""
        rows = self.matching_rows(plan, scan_fraction)
        if deletes is not None and rows is not None:
            rows = deletes.without_positions(rows)
        dead = deletes.positions if deletes is not None else None
        for ids, b in self.source(rows, with_ids or deletes is not None, columns, dead):
            keep = deletes.keep_mask(b, ids) if deletes is not None else None
            if filters:
                m = arrow_mask(b, filters)
                keep = m if keep is None else pc.and_(keep, m)
            if keep is not None:
                b = b.filter(keep)
                ids = ids.filter(keep) if with_ids and ids is not None else None
            if b.num_rows:
                yield (ids, b) if with_ids else b

    def read(
        self,
        filters: Sequence[Filter] | None = None,
        query: SearchQuery | None = None,
        columns: Sequence[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        deletes: SplitDeletes | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows satisfying the filters (exactly) and matching the query, in row order, without
        the rows deleted by `deletes` (log.delete_logs.SplitDeletes of this split, or None)."""
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        names = list(columns) if columns is not None else self.schema.names
        self._check_columns(names, "columns")
        schema = pa.schema([self.schema.field(c) for c in names])
        filters = list(filters or [])
        needed = self.needed_columns(names, filters, deletes)
        projected = (b.select(names) for b in self._masked(filters, query, deletes, columns=needed))
        return _rechunk(projected, batch_size, schema)

    def count(
        self,
        filters: Sequence[Filter] | None = None,
        query: SearchQuery | None = None,
        deletes: SplitDeletes | None = None,
    ) -> int:
        filters = list(filters or [])
        dead = int(np.searchsorted(deletes.positions, self.num_rows)) if deletes is not None else 0
        if not filters and query is None and (deletes is None or deletes.only_positions):
            return self.num_rows - dead
        self._check_filter_columns(filters)
        filters, plan = self._plan(filters, query)
        q, exact, _ = plan
        if q is not None and exact and deletes is not None and deletes.only_positions:
            # the matching row ids (never None: the plan has a query), minus the deleted ones
            rows = self.matching_rows((q, exact, True)) or []
            return len(deletes.without_positions(rows))
        if q is not None and exact and deletes is None:
            searcher = self.searcher()
            if searcher.num_docs == 0:
                return 0
            with tantivy_call(f"counting matches in split {self.local_dir}"):
                return int(searcher.search(q, 1, count=True).count)
        return sum(b.num_rows for b in self._filtered(filters, plan, deletes))

    def search_scored(
        self,
        query: SearchQuery,
        limit: int | None = None,
        filters: Sequence[Filter] | None = None,
        columns: Sequence[str] | None = None,
        deletes: SplitDeletes | None = None,
        corpus: CorpusStats | None = None,
        row_ids: bool = False,
    ) -> pa.Table:
        """Rows matching the query and the filters (exactly), best first, with a float32 `_score`
        column (and their row ids as `_rowid` with `row_ids`); at most `limit` rows (all matches
        when None). With `corpus` (the statistics of
        every live split of the table version: corpus_stats.py), BM25 scores with those instead
        of the split's own, so scores of different splits compare.

        The filters narrow the search before ranking (with score 0, so they do not change the
        ranking); when that narrowing is a superset, top-k is fetched with a growing k until
        `limit` rows pass the exact check or every match was seen.
        """
        import tantivy  # lazy: keeps `import indextables_spark.core.split.read.reader` free of tantivy

        filters = list(filters or [])
        names = list(columns) if columns is not None else self.schema.names
        self._check_columns(names, "columns")
        self._check_filter_columns(filters)
        extra = [pa.field(ROW_ID_COLUMN, pa.int64())] if row_ids else []
        out_schema = pa.schema([self.schema.field(c) for c in names] + [pa.field(SCORE_COLUMN, pa.float32())] + extra)
        needed = self.needed_columns(names, filters, deletes)
        if limit is not None and limit <= 0:
            return out_schema.empty_table()
        user = scored_query(self._handles, self.local_dir, query, corpus)
        forced, filters = self._row_filters(filters)
        narrow, exact = build_query(self.index.schema, filters, self.specs) if filters else (None, True)
        # the index's exact answer on index-only columns joins the narrowing (no score either)
        narrow = all_of(narrow, forced)
        q = (
            user
            if narrow is None
            else tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, user), (tantivy.Occur.Must, tantivy.Query.const_score_query(narrow, 0.0))]
            )
        )
        searcher = self.searcher()
        n = searcher.num_docs
        if n == 0:  # search(limit=0) panics
            return out_schema.empty_table()
        want = n if limit is None else min(limit, n)
        k = want if (exact or not filters) and deletes is None else min(n, max(2 * want, 64))
        while True:
            with tantivy_call(f"searching split {self.local_dir}"):
                hits = searcher.search(q, k, count=False).hits
                scores = [h[0] for h in hits]
                rows = self.rows.hit_rows(searcher, [h[1] for h in hits])
            table = self._rows_in_order(rows, needed)
            table = table.append_column(SCORE_COLUMN, pa.array(scores, pa.float32()))
            if row_ids:
                table = table.append_column(ROW_ID_COLUMN, pa.array(rows, pa.int64()))
            if deletes is not None:  # deleted rows drop out; k grows until `want` rows remain
                keep = deletes.keep_mask(table, pa.array(rows, pa.int64()))
                table = table if keep is None else table.filter(keep)
            if filters:
                table = table.filter(arrow_mask(table, filters))
            if table.num_rows >= want or len(hits) < k or k >= n:
                table = table.select(names + [SCORE_COLUMN] + ([ROW_ID_COLUMN] if row_ids else []))
                return table.slice(0, want) if limit is not None else table
            k = min(n, 4 * k)

    def vector_index(self, column: str, spec: VectorSpec | None = None) -> VectorIndex | None:
        """The split's nearest-neighbour index of a vector column (opened once per process); None
        when the split holds no vectors of it (written before the column existed). A split written
        before the column was declared a vector (`spec`, the table's declaration) has its vectors
        read from its rows and compared exactly, as Lance searches fragments its index lacks."""
        h = self._handles
        index = h.vector_indexes.get(column)
        if index is None:
            from indextables_spark.core.split.format.vector_index import (
                VectorIndex,  # lazy: vector tables only
                VectorIndexInfo,
            )

            where = extracted_source(self.local_dir)
            info = VectorIndexInfo.of_footer(self.footer.raw if self.footer is not None else {}, where).get(column)
            if info is not None:
                index = VectorIndex.open(self.local_dir, info, where, page_fetch(self.local_dir, info))
            elif column not in self.schema.names:
                return None
            elif spec is None:
                raise SplitFormatError(f"split {where}: column {column!r} has no vector index")
            else:
                index = VectorIndex.flat(column, spec, self.rows.scan(True, [column]), where)
            index = h.vector_indexes.setdefault(column, index)
        return index  # type: ignore[no-any-return]

    def rows_local(self, rows: list[int], names: Sequence[str]) -> bool:
        """Whether rows_in_order of these rows reads nothing from object storage."""
        return self.rows.local(sorted(rows), names) if rows and names else True

    def rows_in_order(self, rows: list[int], names: Sequence[str]) -> pa.Table:
        """The rows with these ids, in the given order."""
        return self._rows_in_order(rows, names)

    def _rows_in_order(self, rows: list[int], names: Sequence[str]) -> pa.Table:
        """The rows with these ids, in the given order (gathered in row order, then permuted)."""
        schema = pa.schema([self.schema.field(c) for c in names])
        if not rows:
            return schema.empty_table()
        ids = pa.array(rows, pa.int64())
        if max(rows) >= self.num_rows:
            raise self._beyond_rows(max(rows))
        if not names:  # no column: only the number of rows (a table of none keeps it)
            return pa.table({"_": pa.nulls(len(rows))}).select([])
        order = pc.sort_indices(ids)
        sorted_ids = ids.take(order).to_pylist()
        taken = pa.Table.from_batches(list(self.take(sorted_ids, names)), schema=schema)
        # taken[i] is row sorted_ids[i] = rows[order[i]]: invert the permutation
        inverse = pc.sort_indices(order)
        return taken.take(inverse)

    def snippets(self, query: SearchQuery, column: str, values: pa.Array, max_chars: int = 150) -> pa.Array:
        """HTML snippets (`<b>` around matched terms) of `values` of a string column for the
        query; null where the value has no match."""
        import tantivy  # lazy: keeps `import indextables_spark.core.split.read.reader` free of tantivy

        spec = self._specs_by_name.get(column)
        field = spec.value_field if spec is not None else None
        if field is None or field.type != "text":
            searchable = sorted(
                s.name for s in self.specs if s.value_field is not None and s.value_field.type == "text"
            )
            raise SchemaMismatchError(
                f"snippet column {column!r} is not an indexed string column of split "
                f"{self.local_dir} (string columns: {searchable})"
            )
        q = self.tantivy_query(query, scored=True)
        assert q is not None  # (scored: a query or an error)
        searcher = self.searcher()
        with tantivy_call(f"building snippets of column {column!r} in split {self.local_dir}"):
            gen = tantivy.SnippetGenerator.create(searcher, q, self.index.schema, field.name)
            gen.set_max_num_chars(max_chars)
            out: list[str | None] = []
            for v in values.to_pylist():  # per row: only the rows a search returns
                if v is None:
                    out.append(None)
                    continue
                doc = tantivy.Document()
                doc.add_text(field.name, v)
                snippet = gen.snippet_from_doc(doc)
                out.append(snippet.to_html() if snippet.highlighted() else None)
        return pa.array(out, pa.string())
