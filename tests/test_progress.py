"""Progress of long operations (api/progress.py): the `progress=` callback of writes, companion
builds and merges hears `done` grow to `total` in the operation's unit; by default a bar is drawn
on stderr only when stderr is a terminal; `progress=False` draws none."""

from __future__ import annotations

import io
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import indextables_spark as it
from cmd_helpers import rows, small_splits_table
from indextables_spark.api.progress import TerminalBars, progress_to
from indextables_spark.errors import InvalidOptionError

FAST = {"write.chunkRows": "100", "write.parallelism": "2"}  # 300 rows: three chunks


def _grows(events: list[it.Progress], operation: str, total: int | None, unit: str) -> None:
    """The reports of one operation: 0 first, `done` strictly growing, `total` last (when known)."""
    assert events and {(e.operation, e.total, e.unit) for e in events} == {(operation, total, unit)}
    assert events[0].done == 0
    assert all(a.done < b.done for a, b in zip(events, events[1:])), events


def test_a_write_reports_the_rows_written(tmp_path):
    events: list[it.Progress] = []
    res = it.write_table(str(tmp_path / "t"), rows(300), partition_by="day", options=FAST, progress=events.append)
    _grows(events, "writing", 300, "rows")
    assert events[-1].done == 300 == res.rows_written and len(events) == 4  # 0, then each chunk
    # a RecordBatchReader: the rows are not known in advance
    data = rows(250, start=300)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=50))
    events.clear()
    it.IndexTable(str(tmp_path / "t"), FAST).write(reader, progress=events.append)
    _grows(events, "writing", None, "rows")
    assert events[-1].done == 250


def test_a_companion_build_reports_the_files_indexed(tmp_path):
    src, loc = str(tmp_path / "src"), str(tmp_path / "idx")
    for i in range(4):  # 4 files per day partition, 12 in all
        pq.write_to_dataset(
            rows(30, start=30 * i), src, partition_cols=["day"], basename_template=f"f{i}-{{i}}.parquet"
        )
    events: list[it.Progress] = []
    res = it.build_companion(
        src,
        loc,
        format="parquet",
        indexing={"body": "text"},
        target_input_size=1,  # one file per group: a report per file
        options={"companion.parallelism": "1"},  # indexed in this process
        progress=events.append,
    )
    assert res.files_indexed == 12
    _grows(events, "indexing", 12, "files")
    assert events[-1].done == 12 and len(events) == 13


def test_a_merge_reports_the_splits_merged(tmp_path):
    path = str(tmp_path / "t")
    small_splits_table(path, 3)  # 3 splits in each of 3 day partitions
    events: list[it.Progress] = []
    res = it.IndexTable(path).maintenance.merge_splits(progress=events.append)
    assert res.merge_groups == 3
    _grows(events, "merging", 9, "splits")
    assert events[-1].done == 9 and len(events) == 4  # 0, then each group


class _Stderr(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_the_default_draws_a_bar_only_on_a_terminal(tmp_path, monkeypatch):
    terminal = _Stderr(True)
    monkeypatch.setattr(sys, "stderr", terminal)
    it.write_table(str(tmp_path / "a"), rows(300), options=FAST)
    assert "writing" in terminal.getvalue() and "300/300" in terminal.getvalue() and "rows" in terminal.getvalue()

    quiet = _Stderr(True)
    monkeypatch.setattr(sys, "stderr", quiet)
    it.write_table(str(tmp_path / "b"), rows(300), options=FAST, progress=False)
    assert quiet.getvalue() == ""

    piped = _Stderr(False)  # pytest's capture, a pipe, a notebook's stream, a Spark worker
    monkeypatch.setattr(sys, "stderr", piped)
    it.write_table(str(tmp_path / "c"), rows(300), options=FAST)
    it.IndexTable(str(tmp_path / "c")).maintenance.merge_splits()
    assert piped.getvalue() == ""


def test_progress_to_and_the_bars():
    with progress_to(False) as none:
        assert none is None
    own = [].append
    with progress_to(own) as given:
        assert given is own
    with pytest.raises(InvalidOptionError, match="progress must be a callable"):
        with progress_to(True):  # type: ignore[arg-type]
            pass
    from rich.console import Console

    buf = io.StringIO()
    bars = TerminalBars(Console(file=buf, force_terminal=True, width=100))
    bars(it.Progress("writing", 1, 2, "rows"))  # outside its block: nothing
    assert buf.getvalue() == ""
    with bars:
        bars(it.Progress("writing", 0, None, "rows"))  # no total: a bar without an end
        bars(it.Progress("writing", 5, None, "rows"))
    assert "writing" in buf.getvalue() and "5" in buf.getvalue()
