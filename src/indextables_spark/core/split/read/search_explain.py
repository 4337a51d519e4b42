"""What a read does with its query and filters, described from its read plan (core/split/read/
plan.py) — the value every split runs — and the pruning before it: IndexTable.explain
(SearchExplanation) and it.explain(df) (spark/reader.py records the same description)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

from indextables_spark.core.split.format.doc_mapping import tantivy_schema
from indextables_spark.core.split.format.indexing import vector_settings
from indextables_spark.core.split.read.corpus_stats import statistics_mode, table_wide
from indextables_spark.core.split.read.plan import ReadPlan
from indextables_spark.core.split.read.query_parsing import query_for_specs
from indextables_spark.core.split.read.scan import TableScan
from indextables_spark.core.split.read.tantivy_query import build_query
from indextables_spark.expr.model import render

if TYPE_CHECKING:
    from indextables_spark.core.schema.types import ColumnSpec
    import tantivy


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
    struct_field_narrowing: tuple[str, ...]  # queries of the json fields narrowing struct-field conditions
    tantivy_query: str | None  # the query the splits run (user query AND narrowing AND filters)
    statistics: str | None  # what `_score` of a ranked read weighs terms with (`search.statistics`)
    splits_total: int
    splits_after_partition_pruning: int
    splits_after_data_skipping: int  # min/max statistics
    splits_after_bloom_filters: int  # the splits read
    vector_search: str | None = None  # how a vector (or hybrid) search ranks (read/vector/)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def explain(plan: TableScan) -> SearchExplanation:
    """The SearchExplanation of a Spark-free read: the pruning a read does, then its read plan."""

    if plan.pruning is None:  # (a scan whose splits were planned before its query bound counted it)
        plan.live_files()  # (the pruning counted, the query planned for the splits kept)
    assert plan.pruning is not None  # (live_files counted it)
    pruning = plan.pruning
    seen = describe(plan.read, plan.specs, len(plan.snapshot.files))
    return SearchExplanation(
        plan.snapshot.version,
        plan.text,
        tuple(render(f) for f in plan.part_only),
        seen.answered,
        seen.narrowed,
        seen.rows_only,
        plan.read.narrowing,
        seen.tantivy_query,
        seen.statistics,
        pruning.total,
        pruning.after_partitions,
        pruning.after_stats,
        pruning.read,
        seen.vector_search,
    )


@dataclass(frozen=True)
class PlanDescription:
    """How a read plan's conditions meet the index (both explains)."""

    answered: tuple[str, ...]  # filters the index selects exactly
    narrowed: tuple[str, ...]  # filters it narrows, the rows re-check
    rows_only: tuple[str, ...]  # filters only the rows decide (no index form, or the plan's residual)
    tantivy_query: str | None  # repr of the Tantivy query the splits run: query AND narrowing AND filters
    statistics: str | None  # "table (N splits)" / "split" / None without a query
    vector_search: str | None = None  # describe_nearest


def describe(plan: ReadPlan, specs: Sequence[ColumnSpec], splits: int) -> PlanDescription:
    """The PlanDescription of `plan` over a table version of `splits` live splits whose columns
    are `specs` (as a split of the version written with them runs it)."""
    stored = [s for s in specs if not s.partition]
    answered: list[str] = []
    narrowed: list[str] = []
    rows_only = [render(f) for f in plan.residual]
    user = query_for_specs(stored, plan.query) if plan.query is not None else None
    parts: list[tantivy.Query] = [user] if user is not None else []
    schema = tantivy_schema(stored)
    for f in plan.filters:
        q, exact = build_query(schema, [f], specs)
        if q is None:
            rows_only.append(render(f))
        else:
            parts.append(q)
            (answered if exact else narrowed).append(render(f))
    if len(parts) > 1:
        import tantivy  # lazy: keeps `import indextables_spark.core.split.read.search_explain` free of tantivy

        parts = [tantivy.Query.boolean_query([(tantivy.Occur.Must, p) for p in parts])]
    return PlanDescription(
        tuple(answered),
        tuple(narrowed),
        tuple(rows_only),
        repr(parts[0]) if parts else None,
        _statistics(plan, splits),
        describe_nearest(plan, specs),
    )


def describe_nearest(plan: ReadPlan, specs: Sequence[ColumnSpec]) -> str | None:
    """What a vector search does, in words (None for other reads)."""
    from indextables_spark.core.split.read.vector.nearest import REFINE, REFINE_CODES, probes  # lazy: numpy

    nq = plan.nearest
    if nq is None:
        return None
    spec = next((s.vector for s in specs if s.name == nq.column), None)
    declared = vector_settings(plan.options).get(nq.column.lower())
    kind = declared[0].kind if declared is not None else None
    shape = f"{spec.metric}, {spec.dims} dimensions" if spec is not None else "?"
    index = (
        f"an HNSW graph (faiss, efSearch {nq.expansion}) proposes {REFINE} x {nq.wanted} candidates"
        if kind == "hnsw"
        else f"an inverted file of 4-bit codes (faiss, {probes(nq.expansion)} lists probed) proposes "
        f"{REFINE_CODES} x {nq.wanted} candidates"
    )
    selected = [
        w
        for w, on in (("filters", plan.filters or plan.residual), ("the query", nq.fusion is None and plan.text))
        if on
    ]
    text = (
        f"the {nq.k} nearest rows by {nq.column!r} ({shape}): each split's index ({kind or 'as its footer says'}: "
        f"{index}, a split written with another kind searching its own) re-ranked by exact distance, or every "
        f"vector is compared when a split holds at most {nq.exact_below}; a selection is searched in the index "
        f"as a bitmap, or compared exactly when that costs less; "
        + (
            f"rows selected first by {' and '.join(selected)}, deleted rows left out"
            if selected
            else "deleted rows left out"
        )
    )
    if nq.fusion is not None:
        f = nq.fusion
        how = (
            f"rrf (k={f.rrf_k})"
            if f.method == "rrf"
            else f"weighted (text {f.text_weight}, vectors {1 - f.text_weight:g})"
        )
        text += (
            f"; fused with the query's BM25 ranking by {how} over the best {nq.wanted} of each ranking, "
            f"across the table"
        )
    return text


def _statistics(plan: ReadPlan, splits: int) -> str | None:
    if plan.text is None:
        return None
    if table_wide(statistics_mode(plan.options), splits):
        return f"table ({splits} splits)"
    return "split"
