"""Opening a table's log in few dependent round trips, and the staleness window of reads of the
latest version (`read.stalenessLimit`), on a storage that behaves like a distant object store
(tests/slow_storage.py: every request delayed, calls recorded, dependent rounds counted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pyarrow as pa
import pytest
from slow_storage import SlowStorage

import indextables_spark as it
from indextables_spark.config.options import Options
from indextables_spark.config.units import UnitError, parse_millis
from indextables_spark.core.log.read.table_log import TransactionLog
from indextables_spark.core.storage import open_storage
from indextables_spark.errors import InvalidOptionError, VersionNotFoundError
from indextables_spark.spark.options import resolve_options

LOG = "_transaction_log/"
DELAY = 0.05  # long enough that thread scheduling never looks like a dependent round
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows(v: int) -> pa.Table:
    return pa.table({"id": [v * 10 + i for i in range(10)], "body": [f"hello world {v} {i}" for i in range(10)]})


def make_table(path: str, versions: int, **options: str) -> str:
    t = it.IndexTable(path, {"indexing.typemap.body": "text", **options})
    for v in range(versions):
        t.write(rows(v))
    return path


def slow_table(path: str, options: dict[str, str] | None = None, delay: float = DELAY) -> it.IndexTable:
    """A table read through a SlowStorage (its own log: IndexTable(storage=...) shares none)."""
    return it.IndexTable(path, options, storage=SlowStorage(open_storage(path), delay))


def slow(t: it.IndexTable) -> SlowStorage:
    assert isinstance(t.storage, SlowStorage)
    return t.storage


def same_snapshot(a, b) -> None:
    assert a.version == b.version
    assert a.metadata == b.metadata and a.protocol == b.protocol
    assert a.files_table.sort_by("path").equals(b.files_table.sort_by("path"))
    assert a.skips == b.skips and a.schema_registry == b.schema_registry
    assert a.source == b.source


# ---- dependent rounds of a cold open ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "versions, options, rounds, source",
    [
        (1, {}, 2, "log"),  # list + _last_checkpoint, then version 0
        (5, {}, 2, "log"),  # list + _last_checkpoint, then versions 0-4 together
        (12, {"checkpoint.interval": "10"}, 3, "avro-state"),  # + the state manifest with 11, then its manifests
        (12, {"checkpoint.interval": "10", "state.format": "json"}, 2, "json"),
    ],
)
def test_cold_open_takes_few_dependent_rounds(tmp_path, versions, options, rounds, source):
    path = make_table(str(tmp_path / "t"), versions, **options)
    t = slow_table(path)
    snap = t.snapshot()
    assert slow(t).rounds(LOG) == rounds, slow(t).ops(LOG)
    assert snap.source == source and snap.version == versions - 1
    # the same snapshot as a plain local read (no overlap at all)
    plain = TransactionLog(open_storage(path), Options.of({"state.read.parallelism": "1"}))
    same_snapshot(snap, plain.snapshot())
    # a cold search: the log's rounds do not grow with the splits it then reads
    t2 = slow_table(path, {"cache.disk.path": str(tmp_path / "cache")})
    assert t2.search("hello").num_rows == 10 * versions
    assert slow(t2).rounds(LOG) == rounds


def test_time_travel_and_header_take_the_same_rounds(tmp_path):
    path = make_table(str(tmp_path / "t"), 14, **{"checkpoint.interval": "5"})
    plain = TransactionLog(open_storage(path))
    for version in (3, 7, 12, 13):
        t = slow_table(path)
        snap = t.snapshot(version)
        same_snapshot(snap, plain.snapshot(version))
        assert slow(t).rounds(LOG) <= 3
    t = slow_table(path)
    assert t.schema().names == ["id", "body"]
    assert slow(t).rounds(LOG) == 2  # the state manifest carries the metadata: no manifest is read
    assert plain.header() == t.log.header()


def test_an_unusable_state_still_falls_back(tmp_path, caplog):
    """The version files fetched for the newest state are reused when it turns out unusable."""
    path = make_table(str(tmp_path / "t"), 12, **{"checkpoint.interval": "5"})
    storage = open_storage(path)
    plain = TransactionLog(storage).snapshot()
    storage.put("_transaction_log/state-v00000000000000000010/_manifest.avro", b"not avro")
    t = slow_table(path)
    snap = t.snapshot()
    assert snap.version == 11 and snap.source == "avro-state"
    assert snap.files_table.sort_by("path").equals(plain.files_table.sort_by("path"))
    assert "falling back" in caplog.text


def test_a_missing_version_file_is_named(tmp_path):
    path = make_table(str(tmp_path / "t"), 4)
    os.remove(os.path.join(path, "_transaction_log", "00000000000000000001.json"))
    with pytest.raises(VersionNotFoundError, match="00000000000000000001"):
        slow_table(path).snapshot()


# ---- the staleness window ----------------------------------------------------------------------------------------


def lists(t: it.IndexTable) -> int:
    return sum(1 for op, _ in slow(t).ops() if op == "list")


def test_warm_searches_do_not_list_within_the_window(tmp_path):
    path = make_table(str(tmp_path / "t"), 2)
    t = slow_table(path, {"cache.disk.path": str(tmp_path / "cache")})
    assert t.search("hello").num_rows == 20
    slow(t).reset()
    t0 = time.perf_counter()
    for _ in range(5):
        assert t.search("hello").num_rows == 20
        assert t.count() == 20 and len(t.files()) == 2 and t.schema().names == ["id", "body"]
    assert lists(t) == 0 and slow(t).ops() == []  # no request at all: the snapshot and the splits are reused
    assert time.perf_counter() - t0 < 0.5


def test_the_window_ends(tmp_path):
    path = make_table(str(tmp_path / "t"), 1)
    t = slow_table(path, {"read.stalenessLimit": "150ms"})
    t.snapshot()
    slow(t).reset()
    t.snapshot()
    assert lists(t) == 0
    time.sleep(0.2)
    t.snapshot()
    assert lists(t) == 1


def test_a_zero_window_lists_every_read(tmp_path):
    path = make_table(str(tmp_path / "t"), 1)
    t = slow_table(path, {"read.stalenessLimit": "0"})
    for _ in range(3):
        t.snapshot()
    assert lists(t) == 3


def test_local_tables_list_every_read(tmp_path):
    from indextables_spark.core.storage.counting import CountingStorage

    path = make_table(str(tmp_path / "t"), 1)
    counting = CountingStorage(open_storage(path))
    t = it.IndexTable(path, {"read.stalenessLimit": "1m"}, storage=counting)
    for _ in range(3):
        t.snapshot()
    assert counting.requests["list"] == 3


def test_explicit_versions_and_writers_always_list(tmp_path):
    path = make_table(str(tmp_path / "t"), 2)
    t = slow_table(path, {"read.stalenessLimit": "1m"})
    t.snapshot()
    slow(t).reset()
    t.snapshot(version=0)
    t.snapshot(version=1)
    assert t.version() == 1
    assert lists(t) == 3


def commit_elsewhere(path: str, v: int) -> None:
    """A commit by another process."""
    code = (
        "import sys, pyarrow as pa, indextables_spark as it\n"
        f"it.IndexTable(sys.argv[1], {{'indexing.typemap.body': 'text'}}).write("
        f"pa.table({{'id': [{v}], 'body': ['hello from elsewhere']}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
    subprocess.run([sys.executable, "-c", code, path], check=True, env=env)


def test_other_processes_commits_are_seen_after_the_window_or_a_refresh(tmp_path):
    path = make_table(str(tmp_path / "t"), 1)
    t = slow_table(path, {"read.stalenessLimit": "10m", "cache.disk.path": str(tmp_path / "cache")})
    assert t.search("hello").num_rows == 10
    commit_elsewhere(path, 100)
    assert t.snapshot().version == 0  # within the window: the listing is reused
    assert t.search("hello").num_rows == 10
    assert t.snapshot(version=1).num_files == 2  # an explicit version lists
    assert t.version() == 1
    assert t.refresh() is t
    assert t.snapshot().version == 1 and t.search("hello").num_rows == 11


def test_this_processs_commits_are_seen_at_once(tmp_path):
    path = make_table(str(tmp_path / "t"), 1)
    reader = it.IndexTable(path, {"read.stalenessLimit": "10m"}, storage=SlowStorage(open_storage(path), 0.001))
    assert reader.snapshot().version == 0
    # through another log of the same table (other options: another shared log; another storage object)
    writer = it.IndexTable(path, {"indexing.typemap.body": "text", "checkpoint.interval": "3"})
    writer.write(rows(1))
    assert reader.snapshot().version == 1
    with writer.transaction() as tx:
        tx.write(rows(2))
    assert reader.snapshot().version == 2 and reader.count() == 30
    writer.delete("id < 5")
    assert reader.snapshot().version == 3 and reader.count() == 25


def test_shared_logs_keep_the_window_across_table_objects(tmp_path):
    """IndexTable objects of the same path and options share one log, so one listing."""
    from indextables_spark.core.log.maintenance import shared_logs

    path = make_table(str(tmp_path / "t"), 1)
    opts = {"read.stalenessLimit": "10m"}
    first = it.IndexTable(path, opts)
    log = first.log
    assert it.IndexTable(path, opts).log is log
    slow_log = shared_logs.log_with_maintenance(SlowStorage(open_storage(path), 0.001), Options.of(opts))
    slow_log.snapshot(stale_ok=True)
    assert slow_log.snapshot(stale_ok=True) is slow_log.snapshot(stale_ok=True)
    assert sum(1 for op, _ in slow_log.storage.ops() if op == "list") == 1  # type: ignore[attr-defined]


def test_spark_reads_list_unless_the_window_is_set(tmp_path):
    path = make_table(str(tmp_path / "t"), 1)
    assert resolve_options({"path": path}).get_duration_ms("read.stalenessLimit") == 0
    assert resolve_options({"path": path, "read.stalenessLimit": "2s"}).get_duration_ms("read.stalenessLimit") == 2000
    conf: dict[str, str] = {}  # a session conf as Spark Connect's RuntimeConf answers: getAll, get, set
    fake_session = SimpleNamespace(
        conf=SimpleNamespace(getAll=conf, get=lambda key, default=None: conf.get(key, default), set=conf.__setitem__)
    )
    assert it.IndexTable(path, spark=fake_session).log.staleness_limit_ms == 0
    assert it.IndexTable(path, {"read.stalenessLimit": "3s"}, spark=fake_session).log.staleness_limit_ms == 3000
    assert it.IndexTable(path).log.staleness_limit_ms == 1000  # the default


@pytest.mark.parametrize(
    "text, ms",
    [("0", 0), ("250", 250), ("500ms", 500), ("2s", 2000), ("1.5 S", 1500), ("1m", 60_000), ("1h", 3_600_000)],
)
def test_durations(text, ms):
    assert parse_millis(text) == ms
    assert Options.of({"read.stalenessLimit": text}).get_duration_ms("read.stalenessLimit") == ms


@pytest.mark.parametrize("text", ["-1", "soon", "2 weeks", "1e400"])
def test_bad_durations_are_refused(text):
    with pytest.raises(UnitError):
        parse_millis(text)
    with pytest.raises(InvalidOptionError, match="stalenessLimit"):
        Options.of({"read.stalenessLimit": text}).get_duration_ms("read.stalenessLimit")


def test_a_relative_path_names_the_table_of_the_current_directory(tmp_path, monkeypatch):
    """The shared log of a relative path follows the process's directory: after a chdir the same
    relative path is another table (it was the first directory's, by the path string)."""
    import pyarrow as pa

    import indextables_spark as it

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "a")
    it.write_table("t", pa.table({"id": [1, 2, 3]}))
    assert it.IndexTable("t").count() == 3
    monkeypatch.chdir(tmp_path / "b")
    it.write_table("t", pa.table({"id": [7]}))
    assert it.IndexTable("t").count() == 1
    assert it.IndexTable(str(tmp_path / "a" / "t")).count() == 3
