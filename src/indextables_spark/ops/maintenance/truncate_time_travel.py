"""TRUNCATE INDEXTABLES TIME TRAVEL (core/log/maintenance/maintenance.py removes the old versions): its command."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import ClassVar

from indextables_spark.core.log.maintenance import maintenance
from indextables_spark.ops.command import CommandParser, Context, Target
from indextables_spark.results.state import TruncateTimeTravelResult


@dataclass(frozen=True)
class TruncateTimeTravel:
    """TRUNCATE INDEXTABLES TIME TRAVEL <table> [DRY RUN]: checkpoint at the latest version, then
    delete older version files, checkpoints and states (irreversible: run with dry_run=True first)."""

    result: ClassVar[type[TruncateTimeTravelResult]] = TruncateTimeTravelResult
    path: Target
    _: KW_ONLY
    dry_run: bool = False

    @classmethod
    def parse(cls, p: CommandParser) -> TruncateTimeTravel:
        return cls(p.target(), dry_run=p.dry_run())

    def run(self, ctx: Context) -> TruncateTimeTravelResult:
        return maintenance.truncate_time_travel(ctx.log(self.path), dry_run=self.dry_run)
