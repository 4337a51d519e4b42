"""Tables holding splits the reference implementation (IndexTables4Spark) wrote: every write route
refuses them before writing anything (ReferenceTableError naming the table and CONVERT), and
CONVERT INDEXTABLES TABLE rewrites their splits into ours in one commit that keeps the history and
time travel (ops/maintenance/convert.py, core/log/commit/reference_splits.py).

The fixture tables are read-only test data: every test works on a copy under tmp_path.
"""

from __future__ import annotations

from collections import Counter

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.frontends import cli
from indextables_spark.ops.maintenance import convert as convert_mod
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import parse_command
from indextables_spark.ops.maintenance.convert import Convert
from indextables_spark.errors import ConcurrentModificationError, ReferenceTableError
from indextables_spark.core.log.model.actions import CommitInfo
from indextables_spark.core.log.model.doc_mapping import is_reference_doc_mapping
from indextables_spark.core.log.commit.reference_splits import reference_split_paths
from indextables_spark.core.log.commit.transaction import now_ms

ROOT = Path(__file__).parent / "data" / "reference_v0.5.4"
CONVERTED = ["04_partitioned", "06_schema_dedup", "14_after_merge", "17_truncated_log"]


def _copy(name: str, tmp_path: Path) -> str:
    dest = tmp_path / name
    shutil.copytree(ROOT / name, dest)
    return str(dest)


def _files(path: str) -> dict[str, int]:
    """Every file of the table directory (relative path -> size)."""
    out = {}
    for d, _dirs, names in os.walk(path):
        for n in names:
            p = os.path.join(d, n)
            out[os.path.relpath(p, path)] = os.path.getsize(p)
    return out


def _splits(path: str) -> set[str]:
    return {p for p in _files(path) if p.endswith(".split")}


def _rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def _string_column(t: it.IndexTable) -> str:
    snap = t.snapshot()
    return next(
        f["name"]
        for f in snap.schema_json["fields"]
        if f["type"] == "string" and f["name"] not in snap.partition_columns
    )


def _new_rows(t: it.IndexTable, n: int = 3) -> pa.Table:
    """Rows of the table's schema with fresh ids (append after CONVERT)."""
    base = t.to_arrow().sort_by("id")
    top = max(base.column("id").to_pylist())
    cols = {}
    for f in base.schema:
        if f.name == "id":
            cols["id"] = pa.array([top + 1 + i for i in range(n)], f.type)
        elif pa.types.is_string(f.type):
            cols[f.name] = pa.array([f"appended{i}" if f.name != "date" else "2024-01-01" for i in range(n)])
        else:
            cols[f.name] = pa.array([base.column(f.name)[0].as_py()] * n, f.type)
    return pa.table(cols, schema=base.schema)


# ---- the doc mapping test lives in the log layer --------------------------------------------------


def test_reference_doc_mapping_is_told_apart_in_the_log_layer():
    ref = '[{"name":"id","type":"i64","fast":true},{"name":"t","type":"text","tokenizer":"raw"}]'
    ours = '[{"name":"id","type":"i64","column":"id","kind":"i64"},{"name":"__row","type":"u64","hidden":true}]'
    assert is_reference_doc_mapping(ref) and not is_reference_doc_mapping(ours)
    assert not is_reference_doc_mapping(None) and not is_reference_doc_mapping("") and not is_reference_doc_mapping("{")
    from indextables_spark.core.split.reference.reference import is_reference_doc_mapping as split_layer

    for text in (ref, ours, "[]", "not json"):
        assert split_layer(text) == is_reference_doc_mapping(text)


def test_settings_keep_the_reference_tokenizers():
    mapping = json.dumps(
        [
            {"name": "id", "type": "i64"},
            {"name": "title", "type": "text", "tokenizer": "raw"},
            {"name": "body", "type": "text", "tokenizer": "default"},
            {"name": "stem", "type": "text", "tokenizer": "en_stem"},
            {"name": "addr", "type": "ip"},
        ]
    )
    schema = {
        "type": "struct",
        "fields": [
            {"name": n, "type": t, "nullable": True, "metadata": {}}
            for n, t in [
                ("id", "long"),
                ("title", "string"),
                ("body", "string"),
                ("stem", "string"),
                ("addr", "string"),
                ("day", "string"),
            ]
        ],
    }
    got = convert_mod.split_settings(mapping, schema, ["day"])
    assert got == {
        "indexing.typemap.title": "string",
        "indexing.typemap.body": "text",
        "indexing.tokenizer.body": "default",
        "indexing.typemap.stem": "text",
        "indexing.tokenizer.stem": "en_stem",
        # tantivy4java's plain tokenizers drop tokens of 255+ bytes (other limits: `<tok>_limit_<n>`)
        "indexing.tokenLength.body": "255",
        "indexing.tokenLength.stem": "255",
        "indexing.typemap.addr": "ip",
    }
    # what the table records already wins, column by column
    recorded = convert_mod.recorded_settings({"spark.indextables.indexing.typemap.Body": "text_and_string"}, got)
    assert "spark.indextables.indexing.typemap.body" not in recorded
    assert "spark.indextables.indexing.tokenizer.body" not in recorded
    assert "spark.indextables.indexing.tokenLength.body" not in recorded
    assert recorded["spark.indextables.indexing.tokenLength.stem"] == "255"
    assert recorded["spark.indextables.indexing.tokenizer.stem"] == "en_stem"


# ---- refusal ----------------------------------------------------------------------------------------


def _refused(excinfo, path: str, reference: int, live: int) -> None:
    e = excinfo.value
    msg = str(e)
    assert isinstance(e, ReferenceTableError) and isinstance(e, it.IndexTablesError)
    assert path in msg and f"{reference} of its {live} live splits" in msg
    assert "IndexTables4Spark" in msg and "cannot open our split format" in msg
    assert f"CONVERT INDEXTABLES TABLE '{path}'" in msg and "maintenance.convert()" in msg
    assert f"indextables convert {path}" in msg
    assert e.table_path == path and e.reference_splits == reference and e.live_splits == live


def test_every_write_route_is_refused_before_writing(tmp_path):
    path = _copy("04_partitioned", tmp_path)
    t = it.IndexTable(path)
    before_files = _files(path)
    rows = t.to_arrow()
    for mode in ("append", "overwrite"):
        with pytest.raises(ReferenceTableError) as e:
            it.write_table(path, rows, mode=mode)
        _refused(e, path, 3, 3)
    with pytest.raises(ReferenceTableError) as e:
        t.write(rows)
    _refused(e, path, 3, 3)
    with pytest.raises(ReferenceTableError) as e:
        t.delete("id = 1")
    _refused(e, t.storage.uri, 3, 3)
    with pytest.raises(ReferenceTableError) as e:
        execute(parse_command(f"DELETE FROM INDEXTABLES '{path}' WHERE id = 1"))
    _refused(e, t.storage.uri, 3, 3)
    with pytest.raises(ReferenceTableError) as e:
        t.maintenance.merge_splits()
    _refused(e, t.storage.uri, 3, 3)
    with pytest.raises(ReferenceTableError) as e:  # the whole table counts, not only the WHERE's partitions
        t.maintenance.merge_splits("date = '2024-01-01'")
    _refused(e, t.storage.uri, 3, 3)
    from indextables_spark.ops.maintenance.merge_plan import MergeConfig, plan_merge

    with pytest.raises(ReferenceTableError):  # merge-on-write plans with the same function
        plan_merge(t.log, None, MergeConfig.from_options(t.options))
    # the Spark writers plan with writer.plan_write on the driver: the same refusal
    from indextables_spark.core.schema.arrow_types import spark_schema_json
    from indextables_spark.config.options import Options
    from indextables_spark.ops.write.write import plan_write

    with pytest.raises(ReferenceTableError):
        plan_write(t.log, Options(), spark_schema_json(rows.schema), False)
    # nothing was written: no split, no delete log, no version file
    assert _files(path) == before_files
    # log-only operations and reads stay allowed
    assert t.maintenance.checkpoint()["status"] == "SUCCESS"
    assert t.inspect.state()["numFiles"] == 3 and t.count() == 5
    dropped = t.maintenance.drop_partitions("date = '2024-01-03'")
    assert dropped["splitsRemoved"] == 1
    assert _splits(path) == {p for p in before_files if p.endswith(".split")}


def test_the_commit_refuses_as_a_safety_net(tmp_path):
    path = _copy("04_partitioned", tmp_path)
    other = str(tmp_path / "ours")
    it.write_table(
        other,
        pa.table({"id": pa.array([9], pa.int32()), "text": ["x"], "score": [1.0], "date": ["2024-01-09"]}),
        partition_by=["date"],
    )
    ours = it.IndexTable(other).snapshot().files[0]
    t = it.IndexTable(path)
    version = t.version()
    with pytest.raises(ReferenceTableError) as e:
        t.transaction().add_files([ours]).commit()
    _refused(e, t.storage.uri, 3, 3)
    from indextables_spark.core.log.deletes.delete_logs import positional_table, write_delete_log

    log_ = write_delete_log(
        t.storage, "POSITIONAL", positional_table(pa.array([0], pa.int64())), split_path=t.snapshot().files[0].path
    )
    with pytest.raises(ReferenceTableError):
        t.transaction(operation="DELETE").add_delete_log(log_).commit()
    assert t.version() == version
    # removes alone (log-only) commit
    v = t.transaction(operation="DROP").remove_files([t.snapshot().files[0].path]).commit()
    assert v == version + 1


def test_a_concurrent_reference_add_is_not_rebased_over(tmp_path):
    path = _copy("04_partitioned", tmp_path)
    t = it.IndexTable(path)
    ref_add = t.snapshot().files[0]
    t.maintenance.convert()
    txn = t.transaction()  # reads the converted table
    new = _new_rows(t, 1)
    # a writer of ours stages a split; meanwhile the reference re-adds one of its splits
    from indextables_spark.config.options import Options
    from indextables_spark.ops.write.write import plan_write, write_splits
    from indextables_spark.core.schema.arrow_types import spark_schema_json

    plan, _, _ = plan_write(t.log, Options(), spark_schema_json(new.schema), False)
    written = write_splits(t.storage, plan, iter(new.to_batches()))
    v = t.version() + 1
    ref_add.data_change = True
    assert t.log.write_version(v, [CommitInfo(timestamp=now_ms(), operation="WRITE"), ref_add])
    with pytest.raises(ReferenceTableError, match="committed concurrently"):
        txn.add_files([it.AddFile.from_json(d) for d in written.adds]).commit()


# ---- CONVERT ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CONVERTED)
def test_convert_keeps_rows_queries_and_time_travel(name, tmp_path):
    path = _copy(name, tmp_path)
    t = it.IndexTable(path)
    snap = t.snapshot()
    before_version = snap.version
    reference_paths = sorted(f.path for f in snap.files)
    assert sorted(reference_split_paths(snap)) == reference_paths
    rows = t.to_arrow()
    expected = _rows(rows)
    col = _string_column(t)
    value = expected[len(expected) // 2][col]
    query = f'{col}:"{value}"'
    expected_q = sorted(r["id"] for r in expected if r[col] == value)
    median = sorted(r["id"] for r in expected)[len(expected) // 2]
    expected_f = sorted(r["id"] for r in expected if r["id"] > median)
    assert sorted(t.search(query).column("id").to_pylist()) == expected_q

    # DRY RUN changes nothing
    files = _files(path)
    dry = t.maintenance.convert(dry_run=True)
    assert dry["status"] == "DRY_RUN" and dry["referenceSplits"] == len(reference_paths)
    assert sorted(dry["convertedSplits"]) == reference_paths and dry["recordsConverted"] == len(expected)
    assert _files(path) == files and t.version() == before_version

    res = t.maintenance.convert()
    assert res.status == "SUCCESS" and res.version == before_version + 1 and res.read_version == before_version
    assert res.reference_splits == len(reference_paths) and res.splits_created == len(reference_paths)
    assert res.records_converted == len(expected) and res.bytes_written > 0
    after = t.snapshot()
    assert after.version == res.version and not reference_split_paths(after)
    assert after.num_files == len(reference_paths)
    assert all(not f.data_change for f in after.files) and after.num_records == len(expected)
    # every column of every row, the text query and a filter give the same answers
    got = t.to_arrow()
    assert got.schema == rows.schema and _rows(got) == expected
    assert sorted(t.search(query).column("id").to_pylist()) == expected_q
    assert sorted(t.to_arrow(where=f"id > {median}").column("id").to_pylist()) == expected_f
    assert t.count() == len(expected) and t.count(query) == len(expected_q)
    # the indexing settings are recorded; the commit is one CONVERT version
    conf = after.metadata_action.configuration
    assert conf[f"spark.indextables.indexing.typemap.{col}"] == "string"
    entry = t.inspect.history()[0]
    assert entry["operation"] == "CONVERT" and entry["numAddedFiles"] == entry["numRemovedFiles"] == len(
        reference_paths
    )
    # history and time travel: the version before CONVERT still lists and reads the reference splits
    old = t.snapshot(version=before_version)
    assert sorted(f.path for f in old.files) == reference_paths
    assert _rows(t.to_arrow(version=before_version)) == expected
    assert sorted(t.search(query, version=before_version).column("id").to_pylist()) == expected_q
    assert _splits(path) >= set(reference_paths)  # nothing deleted: PURGE removes them after the retention
    # appends work now, indexed by us with the recorded settings; MERGE SPLITS re-indexes the
    # converted splits (the reference's index kept: their own doc mapping) with the appended ones
    new = _new_rows(t)
    v = it.write_table(path, new).version
    assert v == res.version + 1
    everything = sorted(expected + new.to_pylist(), key=lambda r: r["id"])
    assert _rows(t.to_arrow()) == everything
    refs = {f.doc_mapping_ref for f in t.snapshot().files}
    assert len(refs) == 2
    assert sorted(t.search(f'{col}:"appended1"').column("id").to_pylist()) == [new.column("id")[1].as_py()]
    merged = t.maintenance.merge_splits()
    assert merged["status"] == "SUCCESS"
    per_partition = Counter(tuple(sorted((f.partition_values or {}).items())) for f in t.snapshot().files)
    assert set(per_partition.values()) == {1}  # converted and appended splits merged together
    assert _rows(t.to_arrow()) == everything
    assert sorted(t.search(query).column("id").to_pylist()) == expected_q
    # a second CONVERT finds nothing to do
    again = t.maintenance.convert()
    assert again["status"] == "NO_ACTION" and again["version"] is None and t.version() == merged["version"]


def test_convert_leaves_our_splits_alone(tmp_path):
    """A mixed table (made here through CONVERT's own exemption in the commit): our split stays."""
    path = _copy("04_partitioned", tmp_path)
    t = it.IndexTable(path)
    other = str(tmp_path / "ours")
    extra = pa.table(
        {"id": pa.array([100], pa.int32()), "date": ["2024-01-09"], "text": ["ours"], "score": [1.5]},
        schema=t.to_arrow().schema,
    )
    it.write_table(other, extra, partition_by=["date"])
    ours = it.IndexTable(other).snapshot()
    add = ours.files[0]
    shutil.copy(os.path.join(other, add.path), os.path.join(path, "ours.split"))
    import dataclasses

    add = dataclasses.replace(
        add, path="ours.split", doc_mapping_ref=None, doc_mapping_json=ours.doc_mapping(add.doc_mapping_ref)
    )
    t.transaction(operation="CONVERT").add_files([add]).commit()
    expected = _rows(t.to_arrow())
    assert len(expected) == 6
    with pytest.raises(ReferenceTableError) as e:
        t.write(extra)
    _refused(e, path, 3, 4)
    res = t.maintenance.convert()
    assert res.reference_splits == 3 and res.live_splits == 4 and "ours.split" not in res.converted_splits
    assert "ours.split" in {f.path for f in t.snapshot().files}
    assert _rows(t.to_arrow()) == expected


def test_convert_fails_on_a_concurrent_commit_and_deletes_its_splits(tmp_path, monkeypatch):
    path = _copy("04_partitioned", tmp_path)
    t = it.IndexTable(path)
    splits = _splits(path)
    original = convert_mod.convert_split
    calls: list = []
    lock = threading.Lock()

    def concurrent(plan, src):
        out = original(plan, src)
        with lock:
            if not calls:  # another process drops a partition meanwhile
                calls.append(it.IndexTable(path).maintenance.drop_partitions("date = '2024-01-03'"))
        return out

    monkeypatch.setattr(convert_mod, "convert_split", concurrent)
    with pytest.raises(ConcurrentModificationError):
        t.maintenance.convert()
    assert _splits(path) == splits  # the new splits were deleted again
    assert reference_split_paths(t.snapshot())  # nothing converted


def test_convert_command_routes(tmp_path, capsys):
    path = _copy("14_after_merge", tmp_path)
    assert parse_command(f"convert indextables table '{path}' dry run;") == Convert(path, dry_run=True)
    assert parse_command(f"CONVERT INDEXTABLE TABLE '{path}'") == Convert(path)
    from indextables_spark.frontends.sql_parser import CommandSyntaxError

    with pytest.raises(CommandSyntaxError, match="expected TABLE"):
        parse_command(f"CONVERT INDEXTABLES '{path}'")
    res = execute(parse_command(f"CONVERT INDEXTABLES TABLE '{path}' DRY RUN"))
    assert res.name == "CONVERT" and res.table.column("status").to_pylist() == ["DRY_RUN"]
    assert "converted_splits" in res.table.column_names and "settings" in res.table.column_names
    # command line: installed script, JSON
    exe = os.path.join(os.path.dirname(sys.executable), "indextables")
    proc = subprocess.run([exe, "convert", path, "--dry-run", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["status"] == "DRY_RUN"
    # a refused write through the command line: exit code 1, the reason on stderr
    code = cli.main(["sql", f"DELETE FROM INDEXTABLES '{path}' WHERE id = 1"])
    _out, err = capsys.readouterr()
    assert code == cli.EXIT_FAILED and "ReferenceTableError" in err and "CONVERT INDEXTABLES TABLE" in err
    code = cli.main(["convert", path])
    out, _ = capsys.readouterr()
    assert code == 0 and "CONVERT" in out and "SUCCESS" in out
    code = cli.main(["convert", path, "--json"])
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out)["status"] == "NO_ACTION"
    assert it.IndexTable(path).inspect.history()[0]["operation"] == "CONVERT"


# ---- Spark: the writers refuse on the driver; SQL and the table function convert -------------------


@pytest.mark.spark
def test_spark_writers_refuse_and_sql_converts(spark, tmp_path):
    path = _copy("04_partitioned", tmp_path)
    source = _copy("09_partitioned_multi_append", tmp_path)
    splits = _splits(path)
    rows = it.IndexTable(path).to_arrow()
    expected = sorted(tuple(r.values()) for r in rows.to_pylist())
    df = spark.createDataFrame(rows)
    with pytest.raises(Exception, match="CONVERT INDEXTABLES TABLE") as e:  # refused before any task runs
        df.write.format("indextables").mode("append").save(path)
    assert "IndexTables4Spark" in str(e.value)
    # streaming sink: refused when the query starts its writer
    it.IndexTable(source).maintenance.convert()
    stream = (
        spark.readStream.format("indextables")
        .load(source)
        .writeStream.format("indextables")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
    )
    with pytest.raises(Exception, match="CONVERT INDEXTABLES TABLE"):
        stream.start(path).awaitTermination(120)
    assert _splits(path) == splits
    dry = it.sql(spark, f"CONVERT INDEXTABLES TABLE '{path}' DRY RUN").collect()[0]
    assert (
        dry.status == "DRY_RUN"
        and dry.reference_splits == 3
        and dry.settings
        == {
            "spark.indextables.indexing.typemap.text": "string",
            # the reference's token length (its default), recorded for the rewritten splits and appends
            "spark.indextables.indexing.text.maxTokenLength": "default",
        }
    )
    assert spark.sql(f"SELECT * FROM indextables_convert('{path}', true)").collect()[0].status == "DRY_RUN"
    done = spark.sql(f"CONVERT INDEXTABLES TABLE '{path}'").collect()[0]
    assert done.status == "SUCCESS" and done.splits_created == 3
    assert sorted(tuple(r) for r in spark.read.format("indextables").load(path).collect()) == expected
    spark.read.format("indextables").load(path).write.format("indextables").mode("append").save(path)
    assert spark.read.format("indextables").load(path).count() == 2 * len(expected)
