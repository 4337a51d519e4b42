"""Row-level deletes without Spark: the three delete log kinds, reads after a delete equal an
independent evaluation of the predicate on the original rows, deletes survive checkpoints,
compaction and MERGE SPLITS, old readers refuse tables with delete logs, format validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.ops.write.delete import DeletePredicateError, delete
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.errors import CorruptStateError
from indextables_spark.core.log.model.actions import EQUALITY, POSITIONAL, PRIMARY_KEY, DeleteLog
from indextables_spark.core.log.deletes.delete_logs import (
    encode_delete_log,
    load_split_deletes,
    positional_table,
    read_delete_log,
)
from indextables_spark.core.log.model.protocol_gate import DELETION_LOGS, check_readable
from indextables_spark.core.log.deletes.sidecar import encode_frame
from indextables_spark.expr.search_query import SearchQuery

sys.path.insert(0, os.path.dirname(__file__))
from cmd_helpers import WORDS, append  # noqa: E402
from git_history import older_source  # noqa: E402

REGIONS = ("eu", "us", "ap", None)


def docs(n: int, start: int = 0) -> pa.Table:
    """Rows with NULLs in `views` and `region` (for SQL three-valued logic), partitioned by day."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": pa.array([" ".join(WORDS[(i * k + k) % len(WORDS)] for k in range(1, 4)) for i in ids]),
            "views": pa.array([None if i % 11 == 0 else (i * 37) % 1000 for i in ids], pa.int64()),
            "region": pa.array([REGIONS[i % 4] for i in ids], pa.string()),
            "day": pa.array([f"2024-01-0{1 + i % 3}" for i in ids], pa.string()),
        }
    )


def make_table(path: str, n: int = 240, writes: int = 2, options: dict | None = None) -> it.IndexTable:
    per = n // writes
    for w in range(writes):
        append(path, docs(per, start=w * per), options=options)
    return it.IndexTable(path)


def visible(t: it.IndexTable, version: int | None = None) -> list[tuple]:
    """Every live row (deletes applied), partition column included, sorted by id."""
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    snap = t.snapshot(version)
    out = []
    for f in snap.files:
        reader = SplitReader(get_cache(t.options).local_dir(t.storage, f))
        deletes = load_split_deletes(t.storage, snap.deletes_for(f), f.num_records, f.path)
        for b in reader.read(deletes=deletes):
            out.extend((r["id"], r["body"], r["views"], r["region"], f.partition_values["day"]) for r in b.to_pylist())
    return sorted(out)


def as_rows(data: pa.Table) -> list[tuple]:
    return sorted((r["id"], r["body"], r["views"], r["region"], r["day"]) for r in data.to_pylist())


def remaining(rows: list[tuple], pred) -> list[tuple]:
    """SQL DELETE semantics: a row goes only when the predicate is TRUE (NULL keeps it)."""
    return [r for r in rows if pred(dict(zip(("id", "body", "views", "region", "day"), r))) is not True]


def _lt(a, b):
    return None if a is None or b is None else a < b


def _eq(a, b):
    return None if a is None or b is None else a == b


def _and(*xs):
    if any(x is False for x in xs):
        return False
    return None if any(x is None for x in xs) else True


def _or(*xs):
    if any(x is True for x in xs):
        return True
    return None if any(x is None for x in xs) else False


def _not(x):
    return None if x is None else not x


# (predicate text, the same predicate in Python with SQL three-valued logic)
PREDICATES = [
    ("views < 300", lambda r: _lt(r["views"], 300)),
    ("region = 'eu' AND views >= 500", lambda r: _and(_eq(r["region"], "eu"), _not(_lt(r["views"], 500)))),
    (
        "day = '2024-01-02' OR views BETWEEN 100 AND 200",
        lambda r: _or(r["day"] == "2024-01-02", _and(_not(_lt(r["views"], 100)), _not(_lt(200, r["views"])))),
    ),
    ("region NOT IN ('eu', 'us')", lambda r: _not(_or(_eq(r["region"], "eu"), _eq(r["region"], "us")))),
    ("region IS NULL OR id < 10", lambda r: _or(r["region"] is None, r["id"] < 10)),
    ("NOT (views != 37) AND day <> '2024-01-03'", lambda r: _and(_eq(r["views"], 37), r["day"] != "2024-01-03")),
]


@pytest.mark.parametrize("text,pred", PREDICATES, ids=[p[0] for p in PREDICATES])
def test_positional_delete_equals_filtering_the_original_rows(tmp_path, text, pred):
    t = make_table(str(tmp_path / "t"))
    before = visible(t)
    assert before == as_rows(pa.concat_tables([docs(120), docs(120, start=120)]))
    res = delete(t.log, text)
    expected = remaining(before, pred)
    assert res.status == "SUCCESS" and res.kind == POSITIONAL
    assert res.deleted_rows == len(before) - len(expected)
    assert visible(t) == expected
    assert t.count() == len(expected)
    assert visible(t, res.read_version) == before  # time travel still sees the rows
    assert DELETION_LOGS in t.snapshot().protocol["readerFeatures"]


def test_full_text_delete_by_query_and_indexall(tmp_path):
    t = make_table(str(tmp_path / "t"))
    before = visible(t)
    v = t.delete(query="body:alpha").version
    step1 = [r for r in before if "alpha" not in r[1].split()]
    assert visible(t) == step1 and step1 != before
    assert t.count(query="body:alpha") == 0
    assert t.count(query="body:bravo") == sum(1 for r in step1 if "bravo" in r[1].split())
    v2 = t.delete("_indexall = 'body:bravo' AND views > 500").version
    assert v2 == v + 1
    step2 = [r for r in step1 if not ("bravo" in r[1].split() and r[2] is not None and r[2] > 500)]
    assert visible(t) == step2
    assert t.count() == len(step2)


def test_delete_takes_a_search_query_value_as_search_does(tmp_path):
    """`query` is a text or an it.SearchQuery, on delete as on search/count: the same rows go, the
    result and the commit record its text, and it joins `_indexall` conditions of `where`."""
    t = make_table(str(tmp_path / "t"))
    before = visible(t)
    res = t.delete(query=it.SearchQuery("body:alpha"))
    assert res.status == "SUCCESS" and res.query == "body:alpha"
    assert t.inspect.history(limit=1)[0].operation_parameters["query"] == "body:alpha"
    step1 = [r for r in before if "alpha" not in r[1].split()]
    assert visible(t) == step1 and step1 != before
    t.delete("_indexall = 'body:bravo'", query=it.SearchQuery("body:charlie"))
    step2 = [r for r in step1 if not {"bravo", "charlie"} <= set(r[1].split())]
    assert visible(t) == step2 and step2 != step1


def test_a_split_whose_rows_all_match_is_removed(tmp_path):
    t = make_table(str(tmp_path / "t"))
    res = delete(t.log, "day = '2024-01-02'")
    assert res.removed_splits == 2 and res.delete_logs == 0
    acts = t.log.read_actions(res.version)
    assert sum(isinstance(a, it.RemoveFile) for a in acts) == 2
    assert all(r[4] != "2024-01-02" for r in visible(t))
    # nothing matches any more: no new version
    res2 = delete(t.log, "day = '2024-01-02'")
    assert res2.status == "NO_ACTION" and res2.version == res.version == t.version()


def test_equality_delete_applies_only_to_rows_that_existed(tmp_path):
    t = make_table(str(tmp_path / "t"))
    res = delete(t.log, "id IN (3, 5, 7, 1000)", kind="equality")
    assert res.kind == EQUALITY and res.splits_scanned == 0 and res.deleted_rows is None
    (log_,) = t.snapshot().delete_logs
    assert log_.kind == EQUALITY and log_.columns == ["id"] and log_.num_entries == 4
    assert {r[0] for r in visible(t)}.isdisjoint({3, 5, 7})
    assert t.count() == 237
    append(t.path, docs(2, start=3))  # ids 3 and 4 written again after the delete
    ids = [r[0] for r in visible(t)]
    assert ids.count(3) == 1 and ids.count(4) == 2 and 5 not in ids


def test_multi_column_equality_delete(tmp_path):
    t = make_table(str(tmp_path / "t"))
    before = visible(t)
    delete(t.log, "region = 'us' AND views = 37", kind="equality")
    delete(t.log, "id = 13 AND region = 'eu'", kind="equality")  # id 13 is in 'us': nothing goes
    expected = [r for r in before if not (r[3] == "us" and r[2] == 37)]
    assert visible(t) == expected and len(expected) < len(before)
    assert t.count() == len(expected)


def test_primary_key_delete(tmp_path):
    t = make_table(str(tmp_path / "t"), options={"spark.indextables.indexing.primaryKey": "id"})
    res = delete(t.log, "id = 10 OR id IN (20, 30)")
    assert res.kind == PRIMARY_KEY and res.splits_scanned == 0
    assert {r[0] for r in visible(t)}.isdisjoint({10, 20, 30}) and t.count() == 237
    append(t.path, docs(1, start=20), options={"spark.indextables.indexing.primaryKey": "id"})
    assert [r[0] for r in visible(t)].count(20) == 1  # the re-inserted key is visible
    # a predicate that is not `key = / IN` is positional
    assert delete(t.log, "id < 2").kind == POSITIONAL
    with pytest.raises(DeletePredicateError, match="primary_key"):
        delete(t.log, "views = 5", kind="primary_key")


def test_primary_key_kind_needs_a_declared_key(tmp_path):
    t = make_table(str(tmp_path / "t"))
    with pytest.raises(DeletePredicateError, match="declared key column"):
        delete(t.log, "id = 1", kind="primary_key")
    with pytest.raises(DeletePredicateError, match="partition columns"):
        delete(t.log, "day = '2024-01-01'", kind="equality")


def test_predicate_errors_name_the_column(tmp_path):
    t = make_table(str(tmp_path / "t"), n=30, writes=1)
    with pytest.raises(it.PartitionFilterError, match="'nope'"):
        delete(t.log, "nope = 1")
    with pytest.raises(DeletePredicateError, match="column 'views' of type long"):
        delete(t.log, "views = 'many'")
    with pytest.raises(DeletePredicateError, match="WHERE predicate or a full-text query"):
        delete(t.log)
    with pytest.raises(it.QueryParseError):
        delete(t.log, query="body:(unclosed")
    assert t.version() == 0


def test_deletes_survive_checkpoint_compaction_and_json_checkpoint(tmp_path):
    path = str(tmp_path / "t")
    t = make_table(path)
    delete(t.log, "views < 200")
    delete(t.log, "id IN (101, 102, 103)", kind="equality")
    expected = visible(t)
    n_logs = len(t.snapshot().delete_logs)
    t.maintenance.checkpoint()
    fresh = it.IndexTable(path)
    snap = fresh.snapshot()
    assert snap.source == "avro-state" and len(snap.delete_logs) == n_logs >= 2
    assert visible(fresh) == expected and fresh.count() == len(expected)
    # an incremental state after more deletes, then a compacting one
    delete(fresh.log, "region = 'ap'")
    expected2 = visible(fresh)
    fresh.maintenance.checkpoint()
    fresh.maintenance.compact()
    again = it.IndexTable(path)
    assert again.snapshot().source == "avro-state"
    assert visible(again) == expected2 and again.count() == len(expected2)
    # the legacy JSON checkpoint carries them too
    js = it.IndexTable(path, {"spark.indextables.state.format": "json"})
    gone = expected2[0][0]
    delete(js.log, f"id = {gone}")
    js.maintenance.checkpoint()
    assert js.snapshot().source == "json"
    assert visible(js) == expected2[1:]


def test_merge_splits_rewrites_deletes_away(tmp_path):
    path = str(tmp_path / "t")
    t = make_table(path, n=300, writes=3)
    delete(t.log, "views < 300")
    delete(t.log, "id IN (4, 8, 15, 16, 23, 42)", kind="equality")
    expected = visible(t)
    res = t.maintenance.merge_splits()
    assert res["status"] == "SUCCESS" and res["recordsMerged"] == len(expected)
    snap = t.snapshot()
    assert all(f.num_merge_ops == 1 for f in snap.files) and len(snap.files) == 3
    assert all(not snap.deletes_for(f) for f in snap.files)  # the merged splits hold live rows only
    assert visible(t) == expected and t.count() == len(expected)
    # the compacting checkpoint after the merge keeps no dead delete log
    state = it.IndexTable(path).snapshot()
    assert state.source == "avro-state" and state.delete_logs == []
    assert visible(it.IndexTable(path)) == expected


def test_count_subtracts_deleted_rows_without_opening_positional_only_splits(tmp_path):
    t = make_table(str(tmp_path / "t"))
    delete(t.log, "views < 500")
    n = len(visible(t))
    assert t.count() == n
    assert t.count(partition_filter="day = '2024-01-01'") == sum(1 for r in visible(t) if r[4] == "2024-01-01")
    a, b = [r[0] for r in visible(t)][:2]
    delete(t.log, f"id IN ({a}, {b})", kind="equality")
    assert t.count() == len(visible(t)) == n - 2


def test_sql_delete_statement(tmp_path):
    path = str(tmp_path / "t")
    t = make_table(path)
    before = visible(t)
    res = execute(parse_command(f"DELETE FROM INDEXTABLES '{path}' WHERE region = 'eu' AND views < 500;"))
    row = res.table.to_pylist()[0]
    expected = [r for r in before if not (r[3] == "eu" and r[2] is not None and r[2] < 500)]
    assert row["status"] == "SUCCESS" and row["kind"] == POSITIONAL
    assert row["deleted_rows"] == len(before) - len(expected) and row["version"] == 2
    assert visible(t) == expected


def test_change_feed_reports_delete_logs(tmp_path):
    t = make_table(str(tmp_path / "t"))
    v = t.version()
    delete(t.log, "views < 100")
    ch = t.changes_since(v)
    assert ch.delete_logs and all(d.kind == POSITIONAL and d.added_at_version == v + 1 for d in ch.delete_logs)
    assert not ch.is_empty


def test_search_scored_leaves_deleted_rows_out(tmp_path):
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    t = make_table(str(tmp_path / "t"), n=120, writes=1)
    f = t.snapshot().files[0]
    reader = SplitReader(get_cache(t.options).local_dir(t.storage, f))
    top = reader.search_scored(SearchQuery("body:charlie"), limit=5, columns=["id"])
    gone = top.column("id").to_pylist()[:3]
    delete(t.log, f"id IN ({', '.join(map(str, gone))})")
    snap = t.snapshot()
    deletes = load_split_deletes(t.storage, snap.deletes_for(f), f.num_records, f.path)
    after = reader.search_scored(SearchQuery("body:charlie"), limit=5, columns=["id"], deletes=deletes)
    assert after.num_rows == min(5, reader.count(query=SearchQuery("body:charlie")) - 3)
    assert set(after.column("id").to_pylist()).isdisjoint(gone)


# ---- the deletionLogs feature and format validation -----------------------------------------------

OLD_RELEASE = "a1ea44f"  # the last commit before delete logs existed


def test_a_reader_without_the_feature_refuses_the_table(tmp_path):
    t = make_table(str(tmp_path / "t"), n=30, writes=1)
    delete(t.log, "id < 5")
    protocol = t.snapshot().protocol_action
    assert DELETION_LOGS in protocol.reader_features and DELETION_LOGS in protocol.writer_features
    # what the reader of the previous release checks: its known features
    import indextables_spark.core.log.model.protocol_gate as gate

    old_features = gate.KNOWN_READER_FEATURES - {DELETION_LOGS}
    unknown = sorted(set(protocol.reader_features) - old_features)
    assert unknown == [DELETION_LOGS]
    check_readable(protocol, "new reader")  # this reader reads it


def test_the_previous_release_refuses_the_table(tmp_path):
    """The real code of the previous release (git history) reading a table with delete logs."""
    old = tmp_path / "old"
    old.mkdir()
    old_src = older_source(OLD_RELEASE, old)
    path = str(tmp_path / "t")
    t = make_table(path, n=30, writes=1)
    delete(t.log, "id < 5")
    code = (
        "import sys, indextables_spark as it\n"
        f"assert it.__file__.startswith({str(old)!r}), it.__file__\n"
        "try:\n"
        f"    it.IndexTable({path!r}).snapshot()\n"
        "    print('READ'); sys.exit(1)\n"
        "except (it.ProtocolVersionError, it.CorruptStateError) as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(old_src)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # Version files are now framed as the reference writes them (0x01 0x01 + gzip, core/log/model/codec.py),
    # which that release cannot decode: it refuses the table naming the file instead.
    assert "deletionLogs" in out.stdout or ("CorruptStateError" in out.stdout and ".json" in out.stdout)
    # and from the Avro state as well
    t.maintenance.checkpoint()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "deletionLogs" in out.stdout, out.stdout + out.stderr


def _log_for(storage, data: bytes, **kw) -> DeleteLog:
    key = "_delete_logs/test.dlog"
    storage.put(key, data)
    return DeleteLog(
        path=key,
        kind=kw.get("kind", POSITIONAL),
        num_entries=kw.get("n", 3),
        size=len(data),
        split_path=kw.get("split", "splits/a.split"),
        columns=kw.get("columns"),
    )


def test_delete_log_readers_check_magic_version_and_checksum(tmp_path):
    from indextables_spark.core.log.deletes import delete_logs as dl

    storage = it.IndexTable(str(tmp_path / "t")).storage
    good = encode_delete_log(POSITIONAL, positional_table([1, 5, 9]), "splits/a.split")
    log_ = _log_for(storage, good)
    assert read_delete_log(storage, log_).column("row").to_pylist() == [1, 5, 9]
    cases = {
        "bad magic": (b"PAR1" + good[4:], r"not a delete log file \(magic b'PAR1' found, expected b'ITDL'\)"),
        "newer format": (encode_frame(dl.MAGIC, 9, {"kind": POSITIONAL}, b""), "delete log format version 9 found"),
        "truncated": (good[:-7], "truncated or corrupt delete log file"),
        "flipped byte": (good[:40] + bytes([good[40] ^ 0xFF]) + good[41:], "checksum mismatch"),
        "empty": (b"", "not a delete log file"),
    }
    for name, (data, pattern) in cases.items():
        dl._cache.clear()
        bad = _log_for(storage, data)
        with pytest.raises(CorruptStateError, match=pattern) as e:
            read_delete_log(storage, bad)
        assert "test.dlog" in str(e.value), name
    dl._cache.clear()
    wrong = _log_for(storage, good, split="splits/b.split")
    with pytest.raises(CorruptStateError, match="splitPath"):
        read_delete_log(storage, wrong)
    with pytest.raises(CorruptStateError, match="format version 2"):
        read_delete_log(storage, DeleteLog.from_json({**log_.to_json(), "formatVersion": 2}))


def test_unknown_delete_log_kind_in_the_log_is_an_error():
    with pytest.raises(CorruptStateError, match="unknown kind 'RANGE'"):
        DeleteLog.from_json({"path": "_delete_logs/x.dlog", "kind": "RANGE", "numEntries": 1, "size": 1})
    with pytest.raises(CorruptStateError, match="needs splitPath"):
        DeleteLog.from_json({"path": "_delete_logs/x.dlog", "kind": POSITIONAL, "numEntries": 1, "size": 1})


def test_state_manifest_keeps_delete_logs_as_its_last_fields(tmp_path):
    from indextables_spark.core.log.state.avro_codec import STATE_MANIFEST_AVRO_SCHEMA

    names = [f["name"] for f in STATE_MANIFEST_AVRO_SCHEMA["fields"]]
    assert names[-2:] == ["deleteLogs", "statsFiles"]
    assert all("default" in f for f in STATE_MANIFEST_AVRO_SCHEMA["fields"][-2:])
    t = make_table(str(tmp_path / "t"), n=30, writes=1)
    delete(t.log, "id < 5")
    t.maintenance.checkpoint()
    from indextables_spark.core.log.read.avro_state import read_state_manifest

    listing = t.log.listing()
    sm = read_state_manifest(t.storage, listing.state_manifests[t.version()])
    assert [json.loads(d)["kind"] for d in sm.delete_logs] == [POSITIONAL] * 3  # one per split (3 days)


class RacingStorage:
    """Local storage on which another writer commits `race()` just before each of our next `times`
    version files."""

    def __new__(cls, root: str, race, times: int = 1):
        from indextables_spark.core.log.model.paths import parse_version_name
        from indextables_spark.core.storage.local import LocalStorage

        class _Racing(LocalStorage):
            def put_if_absent(self, key: str, data: bytes) -> bool:
                nonlocal times
                name = key.rsplit("/", 1)[-1]
                if times and key.startswith("_transaction_log/") and parse_version_name(name) is not None:
                    times -= 1
                    race()
                return super().put_if_absent(key, data)

        return _Racing(root)


def test_a_delete_that_loses_a_race_against_a_merge_is_planned_again(tmp_path):
    path = str(tmp_path / "t")
    t = make_table(path)
    before = visible(t)
    racing = it.IndexTable(path, storage=RacingStorage(path, lambda: it.IndexTable(path).maintenance.merge_splits()))
    res = delete(racing.log, "views < 300")
    assert res.status == "SUCCESS" and res.read_version == 2  # planned again after the merge (version 2)
    assert [h["operation"] for h in t.inspect.history()[:2]] == ["DELETE", "MERGE SPLITS"]
    expected = remaining(before, lambda r: _lt(r["views"], 300))
    assert visible(t) == expected and res.deleted_rows == len(before) - len(expected)
    # the first attempt's delete logs were removed again (never referenced by the log)
    live = {d.path for d in t.snapshot().delete_logs}
    assert {f"_delete_logs/{n}" for n in os.listdir(os.path.join(path, "_delete_logs"))} == live
    # with the fail resolver there is no second attempt
    a, b = [r[0] for r in expected[:2]]
    racing = it.IndexTable(path, storage=RacingStorage(path, lambda: it.IndexTable(path).delete(f"id = {a}")))
    with pytest.raises(it.ConcurrentModificationError, match="resolver 'fail'"):
        delete(racing.log, f"id = {b}", resolver="fail")
    assert [r[0] for r in visible(t)] == [r[0] for r in expected[1:]]
