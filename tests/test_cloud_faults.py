"""Fault injection at the table level on S3 and Azure (no Spark).

The real SDKs talk to the emulators through tests/faults.py, which fails a fraction of the requests
the way a service or a network does (503/500 answers, closed connections, lost answers of writes
that did reach the service). A fixed sequence — real splits written with SplitWriter, commits
through IndexTable.transaction(), checkpoints, compaction, and reads (snapshots, pruned listings,
change feed, full-text counts, every row through the split cache) — must give identical results
with ~25% transient faults as without any. With permanent errors (HTTP 403) starting at various
points of the sequence, the failing call raises a StorageError naming the URI and the log is never
half-committed: version files stay contiguous, every version reads, the latest is the last commit
that returned, and the state agrees with the version files.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from cmd_helpers import TEXT_OPTIONS, rows
from faults import AzureFaults, S3Faults
from test_state_write import live_paths, replay_paths

import indextables_spark as it
from indextables_spark.errors import CorruptStateError, FileNotFoundInStorageError, IndexTablesError, StorageError
from indextables_spark.core.log.model.actions import Metadata
from indextables_spark.core.log.model.doc_mapping import registry_key
from indextables_spark.core.log.model.protocol_gate import CURRENT_PROTOCOL
from indextables_spark.core.log.commit.transaction import new_table_id
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.storage import LocalStorage

pytestmark = pytest.mark.cloud

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("body", "string"), ("views", "long"), ("region", "string"), ("day", "string"))
    ],
}
PARTITIONS = ["day"]
FAST_RETRIES = {
    "spark.indextables.storage.retry.maxAttempts": "15",
    "spark.indextables.storage.retry.baseDelayMs": "1",
    "spark.indextables.storage.retry.maxDelayMs": "20",
    "spark.indextables.checkpoint.enabled": "false",
    "spark.indextables.state.compaction.tombstoneThreshold": "0.9",  # checkpoint-2 stays incremental
}


def faulty_storage(target, **fault_kwargs):
    if target.kind == "s3":
        faults = S3Faults(**fault_kwargs)
        return target.open(event_handlers=faults.handlers()), faults
    faults = AzureFaults(**fault_kwargs)
    return target.open(client_kwargs={"transport": faults}), faults


class Splits:
    """Real splits built once with SplitWriter on local disk; each table gets them by upload through
    its own (possibly faulty) storage, so the sequence spends its time in storage calls."""

    def __init__(self, root: str):
        self.local = LocalStorage(root)
        self.doc_mapping, self.doc_mapping_ref = "", ""
        self.sets: dict[str, list[it.AddFile]] = {}
        for name, data in (
            ("a", rows(30, start=0)),
            ("b", rows(30, start=30)),
            ("c", rows(30, start=60)),
            ("r", rows(9, start=1000, days=1)),
            ("x", rows(3, start=5000, days=1)),
        ):
            writer = SplitWriter(self.local, SCHEMA, PARTITIONS, TEXT_OPTIONS)
            writer.write_batch(data)
            self.sets[name] = writer.finish()
            self.doc_mapping, self.doc_mapping_ref = writer.doc_mapping, writer.doc_mapping_ref

    def upload(self, table: it.IndexTable, name: str) -> list[it.AddFile]:
        adds = self.sets[name]
        for a in adds:
            table.storage.upload_file(a.path, self.local.local_path(a.path))
        return [dataclasses.replace(a) for a in adds]


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> Splits:
    return Splits(str(tmp_path_factory.mktemp("splits")))


def create(table: it.IndexTable, splits: Splits) -> int:
    meta = Metadata(
        id=new_table_id(),
        schema_string=json.dumps(SCHEMA),
        partition_columns=PARTITIONS,
        configuration={**TEXT_OPTIONS, registry_key(splits.doc_mapping_ref): splits.doc_mapping},
    )
    return (
        table.transaction(version=-1)
        .set_protocol(CURRENT_PROTOCOL)
        .set_metadata(meta)
        .with_operation("CREATE TABLE")
        .commit()
    )


def by_content(files) -> list[tuple]:
    """Files without their random names: (partition, rows, size) sorted."""
    return sorted((f.partition_values.get("day"), f.num_records, f.size) for f in files)


def all_rows(table: it.IndexTable, version: int | None = None) -> list[tuple]:
    from indextables_spark.core.split.cache.cache import get_cache
    from indextables_spark.core.split.read.reader import SplitReader

    out = []
    for f in table.snapshot(version).files:
        reader = SplitReader(get_cache(table.options).local_dir(table.storage, f))
        out += [
            (r["id"], r["body"], r["views"], r["region"], f.partition_values["day"])
            for b in reader.read()
            for r in b.to_pylist()
        ]
    return sorted(out)


def scenario_steps(table: it.IndexTable, splits: Splits):
    """The write sequence as (name, step) pairs; each step returns a comparable result."""

    def append(name):
        return lambda: table.transaction().add_files(splits.upload(table, name)).commit()

    def replace_first_day():
        first_day = sorted((f for f in table.snapshot(1).files), key=lambda f: f.partition_values["day"])[0]
        adds = splits.upload(table, "r")
        return table.transaction().add_files(adds).remove_files([first_day.path]).commit()

    def checkpoint():
        r = table.maintenance.checkpoint()
        return r["version"], r["numFiles"], r["numTombstones"]

    def compact():
        r = table.maintenance.compact()
        return r["version"], r["numFiles"], r["numTombstones"], r["compacted"]

    return [
        ("create", lambda: create(table, splits)),
        ("append-1", append("a")),
        ("append-2", append("b")),
        ("checkpoint-1", checkpoint),
        ("append-3", append("c")),
        ("replace", replace_first_day),
        ("checkpoint-2", checkpoint),
        ("compact", compact),
    ]


def reads(table: it.IndexTable) -> list:
    snap = table.snapshot()
    ch = table.changes_since(2)
    return [
        table.version(),
        snap.num_files,
        by_content(snap.files),
        [table.snapshot(v).num_files for v in range(table.version() + 1)],
        by_content(table.files("day = '2024-01-02'")),
        by_content(ch.adds),
        len(ch.removes),
        [(h["version"], h["operation"], h["numAddedFiles"], h["numRemovedFiles"]) for h in table.inspect.history()],
        table.count(),
        table.count(query="body:alpha"),
        table.count(query="body:zulu AND body:kilo"),
        all_rows(table),
        all_rows(table, 2),
        table.inspect.state()["numFiles"],
    ]


def run_scenario(table: it.IndexTable, splits: Splits) -> list:
    return [step() for _name, step in scenario_steps(table, splits)] + reads(table)


def test_transient_faults_give_identical_results(cloud_backend, splits, tmp_path):
    target = cloud_backend.with_options(**FAST_RETRIES)
    opts = {**target.options, "spark.indextables.cache.disk.path": str(tmp_path / "cache")}

    clean = target.child("clean")
    expected = run_scenario(it.IndexTable(clean.uri, opts), splits)
    assert expected[:8] == [0, 1, 2, (2, 6, 0), 3, 4, (4, 9, 1), (4, 9, 0, True)]

    faulty = target.child("faulty")
    storage, faults = faulty_storage(faulty, rate=0.25, seed=11, lose_answers=4)
    got = run_scenario(it.IndexTable(faulty.uri, opts, storage=storage), splits)
    assert got == expected
    assert faults.requests > 150 and faults.faults >= faults.requests * 0.15, (faults.faults, faults.requests)
    assert faults.lost == 4
    # and the faulty table reads the same through a clean client
    assert reads(it.IndexTable(faulty.uri, opts)) == expected[8:]


def _committed_versions(target) -> list[int]:
    return it.IndexTable(target.uri, target.options).log.list_versions()


def test_permanent_errors_fail_cleanly_with_nothing_half_committed(cloud_backend, splits, tmp_path):
    target = cloud_backend.with_options(**FAST_RETRIES)
    opts = {**target.options, "spark.indextables.cache.disk.path": str(tmp_path / "cache")}

    # requests of a fault-free run, to place the failures across the whole sequence
    probe = target.child("probe")
    storage, counter = faulty_storage(probe)
    table = it.IndexTable(probe.uri, opts, storage=storage)
    for _name, step in scenario_steps(table, splits):
        step()
    total = counter.requests
    expected_files = by_content(it.IndexTable(probe.uri, opts).snapshot().files)

    outcomes = []
    for n, fraction in enumerate((0.15, 0.4, 0.6, 0.85)):
        k = int(total * fraction)
        run = target.child(f"fail-after-{k}")
        holder: list = []
        storage, faults = faulty_storage(run, permanent_status=403, only=lambda op, h=holder, k=k: h[0].requests > k)
        holder.append(faults)
        table = it.IndexTable(run.uri, opts, storage=storage)
        last_version, failed = -1, None
        for name, step in scenario_steps(table, splits):
            try:
                result = step()
            except IndexTablesError as e:
                failed = (name, e)
                break
            if name in ("create", "append-1", "append-2", "append-3", "replace"):
                last_version = result
        assert failed is not None, f"a 403 after request {k} of {total} did not fail the sequence"
        name, error = failed
        # a clean error naming the table's URI and the status, not mistaken for a missing file or corruption
        assert isinstance(error, StorageError) and not isinstance(
            error, (FileNotFoundInStorageError, CorruptStateError)
        )
        assert run.uri in str(error) and "403" in str(error), str(error)
        outcomes.append(name)

        # nothing half-committed: contiguous versions up to the last commit that returned
        reader = it.IndexTable(run.uri, opts)
        assert _committed_versions(run) == list(range(last_version + 1)), (name, k)
        assert reader.version() == last_version
        for v in range(last_version + 1):
            reader.snapshot(v)  # every version reads
        if last_version >= 0:
            assert live_paths(reader) == replay_paths(reader)  # a state written half way is never used
            rows_now = all_rows(reader)
            assert len(rows_now) == reader.count() == sum(f.num_records for f in reader.snapshot().files)
            # the table can be continued by a healthy writer after the failure
            assert reader.transaction().add_files(splits.upload(reader, "x")).commit() == last_version + 1
    assert len(set(outcomes)) >= 3, outcomes  # the failures hit different kinds of steps

    # reads with a 403: the error names the URI; the table is not reported missing or corrupt
    storage, _faults = faulty_storage(probe, permanent_status=403)
    denied = it.IndexTable(probe.uri, opts, storage=storage)
    for call in (denied.snapshot, denied.version, lambda: denied.count(query="body:alpha")):
        with pytest.raises(StorageError, match="403") as info:
            call()
        assert probe.uri in str(info.value)
        assert not isinstance(info.value, (FileNotFoundInStorageError, CorruptStateError))
    assert by_content(it.IndexTable(probe.uri, opts).snapshot().files) == expected_files
