"""IndexTable.explain: what a read does with its query and filters (answered by the index, narrowed
by it, left to the rows), its Tantivy query, and how many splits each pruning step keeps."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

from indextables_spark.core.split.format.doc_mapping import tantivy_schema
from indextables_spark.core.split.read.file_pruning import prune_files, spark_type_names
from indextables_spark.core.split.read.query_parsing import query_for_specs
from indextables_spark.core.split.read.search import SearchPlan
from indextables_spark.core.split.read.tantivy_query import build_query
from indextables_spark.expr.model import Filter, render

if TYPE_CHECKING:
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
    tantivy_query: str | None  # the query the splits run (user query AND narrowing)
    splits_total: int
    splits_after_partition_pruning: int
    splits_after_data_skipping: int  # min/max statistics
    splits_after_bloom_filters: int  # the splits read

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def explain(plan: SearchPlan) -> SearchExplanation:
    """The SearchExplanation of a plan (the same pruning and translation a read does)."""

    types = {c: t for c, t in spark_type_names(plan.snapshot).items() if c in plan.parts}
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
        import tantivy  # lazy: keeps `import indextables_spark.core.split.read.search_explain` free of tantivy

        parts = [tantivy.Query.boolean_query([(tantivy.Occur.Must, p) for p in parts])]
    return answered, narrowed, rows_only, (repr(parts[0]) if parts else None)
