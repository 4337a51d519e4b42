"""Splits grouped into units of work (Spark tasks, aggregation jobs) of about equal size."""

from __future__ import annotations

from typing import Sequence

from indextables_spark.config.registry import registered_default
from indextables_spark.core.log.model.actions import AddFile

DEFAULT_GROUP_BYTES = registered_default("read.maxPartitionBytes")


def group_by_size(files: Sequence[AddFile], target_bytes: int, min_groups: int) -> list[list[AddFile]]:
    """Splits in k balanced groups (largest first into the lightest group): k is the number of
    target_bytes groups the data needs, at least min_groups (the cores: one wave of tasks), at
    most one split per group."""
    if not files:
        return []
    total = sum(f.size for f in files)
    k = max(1, min(len(files), max(min_groups, -(-total // max(1, target_bytes)))))
    groups: list[list[AddFile]] = [[] for _ in range(k)]
    sizes = [0] * k
    for f in sorted(files, key=lambda f: -f.size):
        i = min(range(k), key=sizes.__getitem__)
        groups[i].append(f)
        sizes[i] += f.size
    return groups
