"""CHECKPOINT and COMPACT (core/log/maintenance/maintenance.py writes the state): their commands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from indextables_spark.core.log.maintenance import maintenance
from indextables_spark.results.state import CheckpointResult
from indextables_spark.ops.command import Context
from indextables_spark.ops.table_commands import TableCommand


@dataclass(frozen=True)
class Checkpoint(TableCommand):
    """CHECKPOINT INDEXTABLES <table>: the V4 Avro state at the latest version (a JSON checkpoint
    with state.format=json); upgrades V1–V3 tables to protocol V4 first."""

    result: ClassVar[type[CheckpointResult]] = CheckpointResult

    def run(self, ctx: Context) -> CheckpointResult:
        return maintenance.checkpoint(ctx.log(self.path))


@dataclass(frozen=True)
class Compact(TableCommand):
    """COMPACT INDEXTABLES <table>: rewrite the state cleanly (partition-sorted manifests, no tombstones)."""

    result: ClassVar[type[CheckpointResult]] = CheckpointResult

    def run(self, ctx: Context) -> CheckpointResult:
        return maintenance.compact(ctx.log(self.path))
