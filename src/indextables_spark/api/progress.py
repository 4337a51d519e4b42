"""The progress of long operations as a terminal shows it: what a public `progress=` argument
(results/record.py's ProgressArg) becomes, and the rich progress bars on stderr.

Every long operation takes `progress=`: writes (`it.write_table`, `IndexTable.write`, a
transaction's `write`), companion builds (`it.build_companion`) and the maintenance methods
(`t.maintenance.merge_splits`, …). The operations themselves (ops/, core/) only call a callback
with a `Progress(operation, done, total, unit)`; this module decides which callback: the caller's,
or by default (None) bars on stderr when stderr is a terminal (`sys.stderr.isatty()`) and none
otherwise (pytest, pipes, Spark's Python workers, notebooks: nothing is printed); False: none. The
command line (frontends/cli.py) draws its bars with the same `TerminalBars`.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Iterator

from indextables_spark.errors import InvalidOptionError
from indextables_spark.results.record import Progress, ProgressArg, ProgressCallback

if TYPE_CHECKING:
    from rich.console import Console


class TerminalBars:
    """A ProgressCallback drawing one rich bar per operation (`writing ━━━━━ 200000/1000000 rows
    0:00:03`) on `console` (default: stderr), from the first report until the `with` block ends;
    the bars disappear then (transient). A report outside a `with` block draws nothing."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console
        self.bars: Any = None  # rich.progress.Progress, made on the first report
        self.tasks: dict[str, Any] = {}
        self.open = False

    def __enter__(self) -> TerminalBars:
        self.open = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.open = False
        if self.bars is not None:
            self.bars.stop()
            self.bars = None
        self.tasks = {}

    def __call__(self, p: Progress) -> None:
        if not self.open:
            return
        if self.bars is None:
            self.bars = _bars(self.console)
            self.bars.start()
        total = None if p.total is None else max(p.total, 1)
        task = self.tasks.get(p.operation)
        if task is None:
            task = self.tasks[p.operation] = self.bars.add_task(p.operation, total=total, unit=p.unit)
        self.bars.update(task, completed=p.done, total=total, unit=p.unit)


def _bars(console: Console | None) -> Any:
    from rich.console import Console  # lazy: rich loads when a bar is first drawn
    from rich.progress import (  # lazy: rich loads when a bar is first drawn
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
        console=console if console is not None else Console(stderr=True),
        transient=True,
    )


def stderr_is_terminal() -> bool:
    """Is this process's stderr a terminal? (False for pipes, pytest's capture, notebooks' streams,
    Spark's Python workers; False when it cannot say.)"""
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):  # a stream without isatty, or closed
        return False


@contextlib.contextmanager
def progress_to(progress: ProgressArg) -> Iterator[ProgressCallback | None]:
    """The callback a long operation reports to while the block runs: the caller's callback; for
    None, bars on stderr when it is a terminal (removed when the block ends), else none; for False,
    none."""
    if progress is False:
        yield None
    elif progress is not None:
        if not callable(progress):
            raise InvalidOptionError(
                f"progress must be a callable taking a Progress, None or False, not {type(progress).__name__}"
            )
        yield progress
    elif stderr_is_terminal():
        with TerminalBars() as bars:
            yield bars
    else:
        yield None
