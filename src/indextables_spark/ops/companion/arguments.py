"""A companion build's arguments, declared once: CompanionArguments, what a one-off build
(`it.build_companion`, BUILD INDEXTABLES COMPANION) and a streaming sync (`it.start_companion_sync`,
WITH STREAMING) share. The public functions take them as the dataclass's fields and show them as
their signature (`signature_of`)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import KW_ONLY, dataclass
from typing import Any, Callable, Mapping, Sequence


@dataclass(frozen=True)
class CompanionArguments:
    """What a companion build indexes, and how: the `format` ("delta", "iceberg" or "parquet") table
    `source` (Iceberg: or its identifier, with `catalog`), indexed into the companion index at
    `location`. indexing: {column: mode} as INDEXING MODES (the compact string modes too:
    core/schema/compact_strings.py); where: a partition predicate (only those partitions);
    include_columns / exclude_columns / hashed_fastfields_*: INCLUDE / EXCLUDE COLUMNS and HASHED
    FASTFIELDS INCLUDE / EXCLUDE (ops/companion/columns.py); target_input_size: source bytes per
    companion split (`1G`; default `companion.targetInputSize`); spark: a session whose Spark job
    indexes the files (else local processes); options: `spark.indextables.*` options."""

    source: str
    location: str
    format: str = "delta"
    indexing: Mapping[str, str] | None = None
    where: str | None = None
    spark: Any = None
    options: Mapping[str, Any] | None = None
    _: KW_ONLY
    catalog: str | None = None
    catalog_type: str | None = None
    target_input_size: int | str | None = None
    include_columns: Sequence[str] = ()
    exclude_columns: Sequence[str] = ()
    hashed_fastfields_include: Sequence[str] = ()
    hashed_fastfields_exclude: Sequence[str] = ()

    @classmethod
    def of(cls, values: object, **given: Any) -> CompanionArguments:
        """The arguments from `values`' attributes of these names (a command's fields), `given` first."""
        names = [f.name for f in dataclasses.fields(cls) if f.name not in given and hasattr(values, f.name)]
        return cls(**{n: getattr(values, n) for n in names}, **given)


def signature_of(public: Callable[..., Any]) -> inspect.Signature:
    """The signature a public function taking CompanionArguments' fields as `*args, **kwargs` shows
    (help(), inspect): the fields, then the function's own keyword-only parameters."""
    own = inspect.signature(public)
    extra = [p for p in own.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    fields = list(inspect.signature(CompanionArguments).parameters.values())
    return own.replace(parameters=[*fields, *extra])
