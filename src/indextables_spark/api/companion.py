"""`it.build_companion`: BUILD INDEXTABLES COMPANION from Python (ops/companion/build.py), with the
progress of its indexing shown as every long operation's (api/progress.py)."""

from __future__ import annotations

from typing import Any

from indextables_spark.api.progress import progress_to
from indextables_spark.ops.companion.arguments import signature_of
from indextables_spark.ops.companion.build import build_companion as _build_companion
from indextables_spark.results.maintenance import CompanionBuildResult
from indextables_spark.results.record import ProgressArg


def build_companion(
    *args: Any,
    from_version: int | None = None,
    from_snapshot: int | None = None,
    dry_run: bool = False,
    progress: ProgressArg = None,
    **kwargs: Any,
) -> CompanionBuildResult:
    """`it.build_companion(source, location, format="delta", indexing=None, where=None, spark=None,
    options=None, *, catalog=None, catalog_type=None, target_input_size=None, include_columns=(),
    exclude_columns=(), hashed_fastfields_include=(), hashed_fastfields_exclude=(),
    from_version=None, from_snapshot=None, dry_run=False, progress=None)`, BUILD INDEXTABLES
    COMPANION: build or sync the companion index at `location` of the `format` table `source`,
    pointing at its Parquet files instead of copying its rows (ops/companion/build.py). The
    arguments but the last four are CompanionArguments' (ops/companion/arguments.py);
    from_version (Delta) / from_snapshot (Iceberg): the source version to index.

    progress: a callback receiving `Progress("indexing", done, total, "files")` as the source
    files are indexed (`total`: the files this build indexes); None (default): a progress bar on
    stderr when stderr is a terminal, nothing otherwise; False: nothing.
    Returns what was (or, with dry_run, would be) done."""
    with progress_to(progress) as callback:
        return _build_companion(
            *args, from_version=from_version, from_snapshot=from_snapshot, dry_run=dry_run, progress=callback, **kwargs
        )


# help() and inspect show the real parameters: CompanionArguments' fields, then the keyword-only ones
build_companion.__signature__ = signature_of(build_companion)  # type: ignore[attr-defined]
