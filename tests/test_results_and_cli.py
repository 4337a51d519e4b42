"""Issue 51, items 2 and 3: every write and delete returns a result that tells what happened (checked
against what reads see), results and snapshots have one-line reprs, and `indextables describe`
(and DESCRIBE INDEXTABLES TABLE, t.inspect.describe()) describes a table; the command line's text
reads well piped at 80 columns, with one number format."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pyarrow.compute as pc
import pytest

import indextables_spark as it
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.ops.inspect.describe_table import DescribeTable
from indextables_spark.results import DeleteResult, DescribeTableResult, PurgeResult, WriteResult
from indextables_spark.spark.maintenance_functions import function_class

from cmd_helpers import TEXT_OPTIONS, rows

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command line as a pipe sees it: no terminal, COLUMNS=80."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "indextables_spark.frontends.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture
def table(tmp_path) -> it.IndexTable:
    """13,340 rows over 3 days, then 6,675 more: counts above 1,000 in the outputs."""
    path = str(tmp_path / "t")
    it.write_table(path, rows(13_340), partition_by=["day"], options=TEXT_OPTIONS)
    t = it.IndexTable(path)
    t.write(rows(6_675, start=20_000))
    return t


def test_writes_and_deletes_return_what_happened(tmp_path):
    path = str(tmp_path / "t")
    created = it.write_table(path, rows(300), partition_by=["day"], options=TEXT_OPTIONS)
    t = it.IndexTable(path)
    snap = t.snapshot()
    assert isinstance(created, WriteResult) and created.status == "SUCCESS"
    assert (created.version, created.read_version, created.operation, created.mode) == (0, -1, "CREATE TABLE", "append")
    assert created.rows_written == t.to_arrow().num_rows == 300
    assert (created.splits_added, created.bytes_written) == (snap.num_files, snap.total_bytes)
    assert created.partitions_written == 3 and created.splits_removed == 0 and created.duration_ms > 0
    # also a read-only dict of its JSON form, as every result
    assert created["rowsWritten"] == 300 and json.loads(json.dumps(created))["version"] == 0

    before = t.snapshot().num_files
    appended = t.write(rows(50, start=1_000))
    assert (appended.version, appended.read_version, appended.operation) == (1, 0, "WRITE")
    assert appended.version == t.version() and appended.rows_written == t.count() - 300 == 50
    assert appended.splits_added == t.snapshot().num_files - before

    count = t.count()
    deleted = t.delete("id < 10")
    assert isinstance(deleted, DeleteResult) and deleted.status == "SUCCESS" and deleted.version == t.version() == 2
    assert deleted.deleted_rows == count - t.count() == 10 and deleted.read_version == 1
    assert deleted.kind == "POSITIONAL" and deleted["deletedRows"] == 10
    nothing = t.delete("id = 999999")
    assert nothing.status == "NO_ACTION" and nothing.version == t.version() == 2 and nothing.deleted_rows == 0

    replaced = t.write(rows(20), mode="overwrite")
    assert replaced.operation == "OVERWRITE" and replaced.splits_removed == t.snapshot(version=2).num_files
    assert replaced.rows_written == t.count() == 20 and replaced.version == 3

    with t.transaction() as tx:
        staged = tx.write(rows(5, start=500))
    assert staged.status == "STAGED" and staged.version == 3 and staged.rows_written == 5
    assert tx.committed_version == 4 and t.count() == 25
    assert isinstance(it.IndexTable.create(str(tmp_path / "empty"), rows(1).schema), it.IndexTable)


def test_reprs_are_one_short_line(table):
    purge = PurgeResult(
        table_path=table.path,
        status="SUCCESS",
        dry_run=False,
        retention_hours=168.0,
        tx_log_retention_hours=720.0,
        deleted_splits=[f"splits/split-{i}.split" for i in range(10_000)],
    )
    objects = [
        table.snapshot(),
        table.changes_since(0),
        table.changes_since(-1),
        table.files()[0],
        table.delete("id < 3"),
        table.write(rows(1, start=90_000)),
        table.inspect.describe(),
        purge,
    ]
    for obj in objects:
        text = repr(obj)
        assert "\n" not in text and len(text.replace(table.path, "")) < 300, text
    assert len(repr(table.snapshot())) < 300 and len(repr(table.changes_since(0))) < 300
    assert repr(table.snapshot()).startswith("Snapshot(version=3, files=") and "records=20,016" in repr(
        table.snapshot()
    )
    assert "deleted_splits=<10,000 items>" in repr(purge)


def test_describe_tells_what_the_table_holds(table):
    t = table
    t.delete("id < 10")
    d = t.inspect.describe()
    snap = t.snapshot()
    assert isinstance(d, DescribeTableResult)
    assert (d.version, d.oldest_version, d.last_operation, d.checkpoint_version) == (2, 0, "DELETE", None)
    assert d.num_rows == t.count() == 20_005 and d.num_deleted_rows == 10
    assert (d.num_splits, d.total_bytes, d.delete_logs) == (snap.num_files, snap.total_bytes, len(snap.delete_logs))
    assert d.partition_columns == ["day"] and d.num_partitions == 3
    assert [c.name for c in d.columns] == t.schema().names
    indexing = {c.name: c.indexing for c in d.columns}
    assert indexing["body"] == "text (tokenizer default)" and indexing["day"] == "partition"
    assert indexing["id"] == "i64, fast" and d.settings["spark.indextables.indexing.typemap.body"] == "text"
    assert d.last_commit_time == snap.timestamp and d.companion_format is None
    # the SQL text and the command class give the same
    res = execute(parse_command(f"DESCRIBE INDEXTABLES TABLE '{t.path}'"))
    assert res.name == "DESCRIBE TABLE" and res.raw == d and res.table.column_names == d.column_names()
    assert pc.sum(res.table.column("num_rows")).as_py() == 20_005
    udtf = function_class(DescribeTable, {})  # indextables_describe_table(path)
    assert [row[:3] for row in udtf().eval(path=t.path)] == [(t.path, 2, 0)]
    # a checkpoint, then time travel truncated: the oldest readable version moves up
    t.maintenance.checkpoint()
    t.maintenance.truncate_time_travel()
    d = t.inspect.describe()
    assert d.checkpoint_version == d.version == d.oldest_version == 2


def test_describe_on_the_command_line_at_80_columns(table):
    t = table
    proc = cli("describe", t.path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert all(line == line.rstrip() for line in lines) and "─" not in out and "│" not in out  # plain when piped
    assert re.search(r"^num_rows +20,015$", out, re.M) and re.search(r"^num_splits +\d+$", out, re.M)
    assert f"{t.snapshot().total_bytes:,}" in out and str(t.snapshot().total_bytes) not in out
    assert len(TIMESTAMP.findall(out)) == 2  # last commit, created: each whole on its line
    assert re.search(r"^body +string +True +text \(tokenizer default\)$", out, re.M)
    assert re.search(r"^spark\.indextables\.indexing\.typemap\.body +text$", out, re.M)

    described = json.loads(cli("describe", t.path, "--json").stdout)
    assert described == json.loads(json.dumps(t.inspect.describe()))
    assert described["numRows"] == 20_015 and described["columns"][0] == {
        "name": "id",
        "type": "long",
        "nullable": True,
        "indexing": "i64, fast",
    }

    history = cli("history", t.path).stdout
    assert all(len(line) <= 80 for line in history.splitlines())
    assert len(TIMESTAMP.findall(history)) == 2  # one per version, never folded
    assert "13,340" in history and "6,675" in history and "13340" not in history and "6675" not in history


def test_describe_state_of_a_fresh_table(tmp_path):
    path = str(tmp_path / "fresh")
    it.write_table(path, rows(1_500))
    proc = cli("describe-state", path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "no checkpoint yet" in out and not re.search(r"^format +none$", out, re.M)
    n = it.IndexTable(path).snapshot().num_files
    assert re.search(rf"^num_files +{n:,}$", out, re.M) and re.search(r"^versions_since_checkpoint +1$", out, re.M)
    properties = [line for line in out.splitlines()[1:] if line and not line.startswith(" ")]
    assert properties and all(len(line.split()) > 1 for line in properties), out  # no blank values
    state = it.IndexTable(path).inspect.state()
    assert (
        state.format == "none"
        and state.num_files == n
        and state.total_bytes == it.IndexTable(path).snapshot().total_bytes
    )

    empty = str(tmp_path / "empty")
    it.IndexTable.create(empty, rows(1).schema)
    proc = cli("describe", empty)
    assert proc.returncode == 0 and re.search(r"^num_rows +0$", proc.stdout, re.M)
    assert re.search(r"^last_operation +CREATE TABLE$", proc.stdout, re.M)
    missing = cli("describe", str(tmp_path / "missing"))
    assert missing.returncode == 3 and "no indextables table" in missing.stderr


def test_describe_names_a_companion_index_source(tmp_path):
    import pyarrow.parquet as pq

    source = tmp_path / "source"
    source.mkdir()
    pq.write_table(rows(100).drop_columns(["day"]), source / "part-0.parquet")
    built = it.build_companion(str(source), str(tmp_path / "index"), format="parquet")
    d = it.IndexTable(str(tmp_path / "index")).inspect.describe()
    assert (d.companion_format, d.companion_source) == ("parquet", str(source))
    assert d.num_rows == built.rows_indexed == 100 and d.last_operation == "BUILD COMPANION"
    out = cli("describe", str(tmp_path / "index")).stdout
    assert re.search(r"^companion_format +parquet$", out, re.M) and "companion_source" in out
