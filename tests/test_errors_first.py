"""A newcomer's mistakes (issue 51, item 1): the package's message comes first or within the first
lines on every route, and names the next step where there is one."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import indextables_spark as it
from cmd_helpers import rows
from indextables_spark.errors import InvalidOptionError, TableNotFoundError, UnsupportedTypeError


def test_spark_shows_the_message_within_its_first_lines(spark, tmp_path):
    """Spark wraps the worker's traceback, message last: only the data source's entry frame is left
    above it (it was 26 lines of the package's frames)."""
    missing = str(tmp_path / "missing")
    with pytest.raises(Exception) as e:
        spark.read.format("indextables").load(missing).collect()
    lines = str(e.value).splitlines()
    at = next(i for i, line in enumerate(lines) if f"no indextables table at {missing}" in line)
    assert at <= 3 and "TableNotFoundError" in lines[at], lines[:8]
    it.write_table(str(tmp_path / "t"), rows(20), options={"spark.indextables.indexing.typemap.body": "text"})
    with pytest.raises(Exception) as e:  # a bad query: raised when Spark plans the read
        spark.read.format("indextables").option("query", "body:(").load(str(tmp_path / "t")).count()
    lines = str(e.value).splitlines()
    assert any("body:(" in line for line in lines[:6]), lines[:8]


def test_other_formats_name_the_companion_command(tmp_path):
    from deltalake import write_deltalake

    delta, parquet, empty = tmp_path / "delta", tmp_path / "parquet", tmp_path / "empty"
    write_deltalake(str(delta), pa.table({"a": [1]}))
    os.makedirs(parquet / "day=1")
    pq.write_table(pa.table({"a": [1]}), str(parquet / "day=1" / "f.parquet"))
    for path, kind in ((delta, "DELTA"), (parquet, "PARQUET")):
        with pytest.raises(TableNotFoundError, match=f"BUILD INDEXTABLES COMPANION FOR {kind} '{path}'"):
            it.IndexTable(str(path)).count()
    with pytest.raises(TableNotFoundError) as e:
        it.IndexTable(str(empty)).count()
    assert "COMPANION" not in str(e.value)


def test_a_vector_search_without_vectors_names_the_option(tmp_path):
    path = str(tmp_path / "t")
    it.write_table(path, rows(10))
    with pytest.raises(InvalidOptionError, match=r"indexing\.vector\.<column>=<dimensions>"):
        it.IndexTable(path).search(vector=[0.1, 0.2], limit=3)


def test_an_unsupported_type_names_the_cast(tmp_path):
    with pytest.raises(UnsupportedTypeError, match=r"cast the column to int64 .* or to decimal\(20, 0\)"):
        it.write_table(str(tmp_path / "t"), pa.table({"id": pa.array([1, 2], pa.uint64())}))


def test_a_companion_source_however_spelled(tmp_path, monkeypatch, caplog):
    from deltalake import write_deltalake

    monkeypatch.chdir(tmp_path)
    write_deltalake("data/events", rows(30))
    first = it.build_companion("data/events", "index", format="delta", indexing={"body": "text"})
    assert first["status"] == "SUCCESS"
    for spelled in (
        str(tmp_path / "data" / "events"),
        "data/events/",
        f"file://{tmp_path}/data/events",
        "./data/events",
    ):
        res = it.build_companion(spelled, "index", format="delta", indexing={"body": "text"})
        assert res["status"] == "NO_ACTION", spelled
    # a streaming sync of another table at that location: its error is raised once, not logged first
    write_deltalake("data/other", rows(5))
    caplog.set_level(logging.ERROR, logger="indextables_spark")
    sync = it.start_companion_sync("data/other", "index", format="delta", poll_interval=0.1)
    with pytest.raises(Exception, match="companion index of delta table") as e:
        sync.await_termination(timeout=60)
    assert "holds nothing of this source yet" in str(e.value)
    assert not [r for r in caplog.records if "companion index of delta table" in r.getMessage()]
