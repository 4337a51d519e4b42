"""The transaction logs of the 17 tables IndexTables4Spark v0.5.4 wrote (tests/data/reference_v0.5.4),
against an independent decode: `_last_checkpoint` and version files with json/gzip, the state and
its manifests with fastavro — none of this package's decoders on the expected side. Then damaged
copies (an error naming the file, or the exact answer; never other files), the fields of the
reference's FileEntry through our compaction, and what we write as the reference reads it (the
field lists of its v0.5.4 case classes, `transaction/Actions.scala`, read by a Jackson mapper that
refuses unknown fields: see core/log/model/actions.py). No Spark."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import fastavro
import pytest

import indextables_spark as it
from indextables_spark.errors import IndexTablesError
from indextables_spark.core.log.model.action_wire import action_to_json
from indextables_spark.core.log.model.actions import AddFile, RemoveFile, SkipAction
from indextables_spark.core.log.maintenance.maintenance import compact
from indextables_spark.core.log.maintenance.shared_logs import log_with_maintenance
from indextables_spark.core.log.commit.synthetic import commit_files, create_table, synthetic_adds
from indextables_spark.core.storage import open_storage

FIXTURES = Path(__file__).parent / "data" / "reference_v0.5.4"
TABLES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name[:2].isdigit())
LOG = "_transaction_log"


def test_all_seventeen_fixture_tables_are_here():
    assert len(TABLES) == 17


# ---- independent decode -------------------------------------------------------------------------


def framed_lines(path: Path) -> list[dict[str, Any]]:
    """A version file as the reference writes it: 0x01, codec 0x01 (gzip), the gzip stream."""
    data = path.read_bytes()
    assert data[:2] == b"\x01\x01", path
    return [json.loads(line) for line in gzip.decompress(data[2:]).decode("utf-8").splitlines() if line.strip()]


def avro_records(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


def state_dirs(root: Path) -> dict[int, Path]:
    return {int(p.name[len("state-v") :]): p for p in (root / LOG).glob("state-v*") if (p / "_manifest.avro").exists()}


def version_files(root: Path) -> dict[int, Path]:
    return {int(p.name[:20]): p for p in (root / LOG).glob("[0-9]" * 20 + ".json")}


@dataclass
class Expected:
    version: int
    entries: dict[str, dict[str, Any]]  # live FileEntry records by path
    metadata: dict[str, Any]  # the metaData action in force

    @property
    def partition_values(self) -> dict[str, dict[str, str]]:
        return {p: e["partitionValues"] for p, e in self.entries.items()}


def expected_state(root: Path, version: int | None = None) -> Expected:
    log = root / LOG
    if version is None:
        lc = json.loads((log / "_last_checkpoint").read_text())
        assert lc["format"] == "avro-state"
        version, state = lc["version"], log / lc["stateDir"]
    else:
        state = log / f"state-v{version:020d}"
    (sm,) = avro_records(state / "_manifest.avro")
    assert sm["stateVersion"] == version
    entries: dict[str, dict[str, Any]] = {}
    for m in sm["manifests"]:
        shared = m["path"].startswith("manifests/") or m["path"].startswith("state-v")
        recs = avro_records((log if shared else state) / m["path"])
        assert len(recs) == m["numEntries"]
        for r in recs:
            entries[r["path"]] = r
    for t in sm["tombstones"]:
        entries.pop(t, None)
    assert len(entries) == sm["numFiles"]
    return Expected(version, entries, metadata_at(root, version))


def metadata_at(root: Path, version: int) -> dict[str, Any]:
    """The newest metaData at or below `version`: a state's embedded one or a version file's
    (the reference's getMetadata order)."""
    states, files = state_dirs(root), version_files(root)
    for v in sorted(set(states) | set(files), reverse=True):
        if v > version:
            continue
        if v in states:
            (sm,) = avro_records(states[v] / "_manifest.avro")
            if sm["metadata"]:
                md = json.loads(sm["metadata"])
                return md.get("metaData", md)
        if v in files:
            for a in framed_lines(files[v]):
                if "metaData" in a:
                    return a["metaData"]
    raise AssertionError(f"{root}: no metadata at or below version {version}")


def assert_snapshot_is(snap: Any, exp: Expected) -> None:
    assert snap.version == exp.version
    files = {f.path: f for f in snap.files}
    assert set(files) == set(exp.entries)
    assert {p: dict(f.partition_values) for p, f in files.items()} == exp.partition_values
    for p, e in exp.entries.items():
        f = files[p]
        assert (f.size, f.num_records, f.footer_start_offset, f.footer_end_offset, f.doc_mapping_ref) == (
            e["size"],
            e["numRecords"],
            e["footerStartOffset"],
            e["footerEndOffset"],
            e["docMappingRef"],
        )
    assert snap.num_records == sum(e["numRecords"] for e in exp.entries.values())
    assert snap.schema_json == json.loads(exp.metadata["schemaString"])
    assert list(snap.partition_columns) == list(exp.metadata["partitionColumns"])


# ---- reading: latest version and time travel ---------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_snapshot_equals_the_independent_decode(name):
    root = FIXTURES / name
    exp = expected_state(root)
    # the table's version: its newest state or version file (here: the newest state)
    assert exp.version == max(set(state_dirs(root)) | set(version_files(root)))
    assert_snapshot_is(it.IndexTable(str(root)).snapshot(), exp)


@pytest.mark.parametrize("name", TABLES)
def test_time_travel_to_every_state(name):
    root = FIXTURES / name
    t = it.IndexTable(str(root))
    for k in sorted(state_dirs(root)):
        assert_snapshot_is(t.snapshot(version=k), expected_state(root, k))


# ---- damaged copies ------------------------------------------------------------------------------


def _bad_gzip(b: bytes) -> bytes:
    return b[:2] + b"\x1f\x8b\x08\x00" + bytes(x ^ 0x5A for x in b[6:])


def _codec_07(b: bytes) -> bytes:
    return b"\x01\x07" + b[2:]


def _marker_only(b: bytes) -> bytes:
    return b"\x01"


def _half(b: bytes) -> bytes:
    return b[: len(b) // 2]


def _flip_sync_marker(b: bytes) -> bytes:
    """The last byte of an Avro container is the last byte of its last block's sync marker."""
    return b[:-1] + bytes([b[-1] ^ 0xFF])


def _flip_block_payload_start(b: bytes) -> bytes:
    """The first bytes after the header's sync marker: the block's count/size and the start of
    its compressed data (the zstd frame magic)."""
    sync = b[-16:]
    start = b.index(sync) + 16
    out = bytearray(b)
    for i in range(start, start + 6):
        out[i] ^= 0xFF
    return bytes(out)


def _a_manifest(name: str) -> str:
    """The path (under _transaction_log/) of the last manifest of the table's latest state."""
    log = FIXTURES / name / LOG
    (sm,) = avro_records(log / json.loads((log / "_last_checkpoint").read_text())["stateDir"] / "_manifest.avro")
    return str(sm["manifests"][-1]["path"])


V0 = "00000000000000000000.json"
DAMAGES: list[tuple[str, str, Callable[[bytes], bytes]]] = [
    *[
        (t, V0, d)
        for t in ("02_five_appends", "04_partitioned", "13_after_purge")
        for d in (_bad_gzip, _codec_07, _marker_only)
    ],
    ("02_five_appends", "state-v00000000000000000005/_manifest.avro", _half),
    ("17_truncated_log", "state-v00000000000000000009/_manifest.avro", _half),
    ("04_partitioned", "state-v00000000000000000001/_manifest.avro", _flip_sync_marker),
    ("04_partitioned", _a_manifest("04_partitioned"), _half),
    ("04_partitioned", _a_manifest("04_partitioned"), _flip_sync_marker),
    ("09_partitioned_multi_append", _a_manifest("09_partitioned_multi_append"), _flip_block_payload_start),
    ("06_schema_dedup", _a_manifest("06_schema_dedup"), _flip_block_payload_start),
]


def outcome(root: Path, rel: str, exp: Expected) -> str:
    """'error' (an IndexTablesError naming the damaged file) or 'exact' (the undamaged answer);
    anything else fails."""
    try:
        snap = it.IndexTable(str(root)).snapshot()
    except IndexTablesError as e:
        assert rel in str(e).replace(os.sep, "/"), f"error does not name {rel}: {e!r}"
        return "error"
    assert_snapshot_is(snap, exp)
    return "exact"


@pytest.mark.parametrize(
    "name,rel,damage", DAMAGES, ids=[f"{n}-{r.split('/')[-1]}-{d.__name__.strip('_')}" for n, r, d in DAMAGES]
)
def test_damaged_file_gives_an_error_naming_it_or_the_exact_answer(name, rel, damage, tmp_path, caplog):
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    exp = expected_state(FIXTURES / name)
    target = root / LOG / rel
    target.write_bytes(damage(target.read_bytes()))
    got = outcome(root, rel, exp)
    # 13_after_purge: its metadata is also in state-v0, which the reader finds before version 0.
    # The others: the damaged file is needed (no version file or older state can stand in for it);
    # where the reader tried a fallback first, it said so, naming the file.
    assert got == ("exact" if (name, rel) == ("13_after_purge", V0) else "error")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert all(rel in w.replace(os.sep, "/") for w in warned if "falling back" in w), warned


def test_every_flipped_byte_of_a_manifest_we_wrote_is_detected(tmp_path):
    """Our manifests carry zstd frame checksums, so a damaged block fails instead of decoding to
    other entries. (A manifest the reference wrote has none — Avro's CodecFactory.zstandardCodec
    default — so some flips inside its compressed literals cannot be detected by any reader.)
    Read at the manifest level: a whole snapshot would fall back to the older state plus the
    version file and give the exact answer."""
    from indextables_spark.core.log.state.manifest import read_manifest

    name = "09_partitioned_multi_append"
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    compact(log_with_maintenance(open_storage(str(root))))
    exp = expected_state(root)
    (sm,) = avro_records(root / LOG / f"state-v{exp.version:020d}" / "_manifest.avro")
    (m,) = sm["manifests"]
    storage = open_storage(str(root))
    key = f"{LOG}/{m['path']}"
    pristine = (root / key).read_bytes()
    assert {r["path"] for r in avro_records(root / key)} == set(exp.entries)
    header_end = pristine.index(pristine[-16:]) + 16
    want = read_manifest(storage, key, m["numEntries"]).to_pylist()
    tally = {"error": 0, "same": 0, "DIFFERENT": 0}
    for pos in range(header_end, len(pristine), 3):
        b = bytearray(pristine)
        b[pos] ^= 0x01
        (root / key).write_bytes(bytes(b))
        try:
            got = read_manifest(storage, key, m["numEntries"]).to_pylist()
        except IndexTablesError as e:
            assert m["path"] in str(e)
            tally["error"] += 1
        else:  # a bit zstd does not use (the content checksum matched): the same entries
            tally["same" if got == want else "DIFFERENT"] += 1
    (root / key).write_bytes(pristine)
    assert tally["DIFFERENT"] == 0 and tally["error"] > 0.95 * sum(tally.values()), tally


# ---- the reference's FileEntry fields through our compaction ------------------------------------


@pytest.mark.parametrize(
    "name", ["06_schema_dedup", "09_partitioned_multi_append", "12_partition_drop", "14_after_merge"]
)
def test_compaction_keeps_every_field_of_the_reference_file_entries(name, tmp_path):
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    before = expected_state(root)
    res = compact(log_with_maintenance(open_storage(str(root))))
    after = expected_state(root)
    if name in ("12_partition_drop", "14_after_merge"):  # one clean manifest: nothing to rewrite
        assert res.status == "SKIPPED" and after == before
        return
    assert res.status == "SUCCESS" and res.compacted
    # the reference's V4 (no features listed) is Avro state already: no upgrade version, the state
    # of the latest version is rewritten in place
    assert after.version == before.version
    assert set(after.entries) == set(before.entries)
    for path, orig in before.entries.items():
        new = after.entries[path]
        # every field the reference wrote, including those we only carry (hotcache offsets are
        # absent from its v0.5.4 FileEntry schema: None on both sides)
        for k in ("footerStartOffset", "footerEndOffset", "hotcacheStartOffset", "hotcacheLength", "docMappingRef"):
            assert new.get(k) == orig.get(k), (path, k)
        assert {k: new.get(k) for k in orig} == orig, path
    (sm,) = avro_records(root / LOG / f"state-v{after.version:020d}" / "_manifest.avro")
    refs = {e["docMappingRef"] for e in after.entries.values()}
    assert refs <= set(sm["schemaRegistry"])
    assert_snapshot_is(it.IndexTable(str(root)).snapshot(), after)


# ---- what we write, as the reference reads it ----------------------------------------------------

# The fields of the reference's v0.5.4 case classes (transaction/Actions.scala; LastCheckpointInfo in
# transaction/TransactionLogCheckpoint.scala). Its util/JsonUtil.scala mapper keeps Jackson's
# FAIL_ON_UNKNOWN_PROPERTIES: any other field makes the action (or the _last_checkpoint) unreadable.
REFERENCE_FIELDS = {
    "protocol": {"minReaderVersion", "minWriterVersion", "readerFeatures", "writerFeatures"},
    "metaData": {
        "id",
        "name",
        "description",
        "format",
        "schemaString",
        "partitionColumns",
        "configuration",
        "createdTime",
    },
    "add": {
        "path",
        "partitionValues",
        "size",
        "modificationTime",
        "dataChange",
        "stats",
        "tags",
        "minValues",
        "maxValues",
        "numRecords",
        "footerStartOffset",
        "footerEndOffset",
        "hotcacheStartOffset",
        "hotcacheLength",
        "hasFooterOffsets",
        "timeRangeStart",
        "timeRangeEnd",
        "splitTags",
        "deleteOpstamp",
        "numMergeOps",
        "docMappingJson",
        "docMappingRef",
        "uncompressedSizeBytes",
        "companionSourceFiles",
        "companionDeltaVersion",
        "companionFastFieldMode",
    },  # fmt: skip
    "remove": {"path", "deletionTimestamp", "dataChange", "extendedFileMetadata", "partitionValues", "size", "tags"},
    "mergeskip": {"path", "skipTimestamp", "reason", "operation", "partitionValues", "size", "retryAfter", "skipCount"},
}
LAST_CHECKPOINT_FIELDS = {
    "version",
    "size",
    "sizeInBytes",
    "numFiles",
    "createdTime",
    "parts",
    "checkpointId",
    "format",
    "stateDir",
}
OUR_KINDS = {"commitInfo", "deleteLog", "statsFiles"}  # skipped by the reference's default reader


def _no_nulls(x: Any) -> bool:
    if isinstance(x, dict):
        return all(v is not None and _no_nulls(v) for v in x.values())
    if isinstance(x, list):
        return all(v is not None and _no_nulls(v) for v in x)
    return True


def test_our_version_files_are_what_the_reference_reads(tmp_path):
    t = it.IndexTable(str(tmp_path / "ours"), {"checkpoint.interval": "2"})  # a state at version 2
    create_table(t)
    commit_files(t, synthetic_adds(0, 3))
    adds = synthetic_adds(3, 2)
    adds[0].partition_values = {"date": None}  # a null partition value
    adds[1].hotcache_start_offset, adds[1].hotcache_length = 100, 50
    adds[1].time_range_start, adds[1].delete_opstamp, adds[1].companion_fast_field_mode = (
        "2024-01-01T00:00:00Z",
        0,
        "HYBRID",
    )
    first, skipped = (f.path for f in t.snapshot().files[:2])
    txn = t.transaction()
    txn.add_files(adds).remove_files([first])
    txn.add_skips([SkipAction(skipped, 5, "because", "merge", retry_after=9, skip_count=2)])
    assert txn.commit() == 2
    log = Path(t.path) / LOG
    files = version_files(Path(t.path))
    assert sorted(files) == [0, 1, 2] and 2 in state_dirs(Path(t.path))
    for v, path in files.items():
        assert path.read_bytes()[:4] == b"\x01\x01\x1f\x8b"  # CompressionUtils framing + gzip
        for line in framed_lines(path):
            ((kind, body),) = line.items()
            if kind in OUR_KINDS:
                continue
            assert set(body) <= REFERENCE_FIELDS[kind], (v, kind, set(body) - REFERENCE_FIELDS[kind])
            assert _no_nulls(body), (v, line)  # the Rust port's maps refuse null values
    lc = json.loads((log / "_last_checkpoint").read_text())
    assert set(lc) <= LAST_CHECKPOINT_FIELDS and lc["format"] == "avro-state"
    # and we read back what was meant: addedAtVersion/Timestamp from the file, the null value
    commits = {
        v: next(a["commitInfo"]["timestamp"] for a in framed_lines(p) if "commitInfo" in a) for v, p in files.items()
    }
    snap = it.IndexTable(t.path).snapshot(version=2)  # from the state: the Avro round trip
    assert snap.source == "avro-state"
    got = {f.path: f for f in snap.files}
    assert first not in got and set(snap.skips) == {skipped}
    for a in adds:
        f = got[a.path]
        assert (f.added_at_version, f.added_at_timestamp) == (2, commits[2])
    assert got[adds[0].path].partition_values.get("date") is None
    g = got[adds[1].path]
    assert (
        g.hotcache_start_offset,
        g.hotcache_length,
        g.time_range_start,
        g.delete_opstamp,
        g.companion_fast_field_mode,
    ) == (
        100,
        50,
        "2024-01-01T00:00:00Z",
        0,
        "HYBRID",
    )
    for a in t.log.read_actions(2):  # and from the version file
        if isinstance(a, AddFile):
            assert (a.added_at_version, a.added_at_timestamp) == (2, commits[2])


def test_a_reference_add_survives_our_model_field_for_field():
    """An add as v0.5.4's Jackson writes it (every field, nulls included) → AddFile → the add we
    write into a version file: the same fields and values, without the nulls."""
    ref = {
        "path": "date=2024-01-01/part-1.split",
        "partitionValues": {"date": "2024-01-01"},
        "size": 5671,
        "modificationTime": 1775007206490,
        "dataChange": True,
        "stats": None,
        "tags": {"k": "v"},
        "minValues": {"id": "1"},
        "maxValues": {"id": "2"},
        "numRecords": 2,
        "footerStartOffset": 2332,
        "footerEndOffset": 5671,
        "hotcacheStartOffset": 2332,
        "hotcacheLength": 3339,
        "hasFooterOffsets": True,
        "timeRangeStart": "2024-01-01T00:00:00Z",
        "timeRangeEnd": None,
        "splitTags": ["a", "b"],
        "deleteOpstamp": 0,
        "numMergeOps": 0,
        "docMappingJson": None,
        "docMappingRef": "z7TwwZ-tDWGD-uX5",
        "uncompressedSizeBytes": 2332,
        "companionSourceFiles": None,
        "companionDeltaVersion": None,
        "companionFastFieldMode": "DISABLED",
    }
    assert set(ref) == REFERENCE_FIELDS["add"]
    a = AddFile.from_json(ref)
    a.added_at_version, a.added_at_timestamp = 7, 123  # as a commit of version 7 sets them
    assert action_to_json(a, version=7, commit_timestamp=123) == {
        "add": {k: v for k, v in ref.items() if v is not None}
    }
    # outside a version file (a JSON checkpoint, repair) the derived fields stay
    assert action_to_json(a)["add"]["addedAtVersion"] == 7
    rm = {"path": "p.split", "deletionTimestamp": 5, "dataChange": True, "extendedFileMetadata": True,
          "partitionValues": {"date": "x"}, "size": 9, "tags": None}  # fmt: skip
    assert action_to_json(RemoveFile.from_json(rm)) == {"remove": {k: v for k, v in rm.items() if v is not None}}
    sk = {"path": "p.split", "skipTimestamp": 5, "reason": "r", "operation": "merge", "partitionValues": {"d": "1"},
          "size": 9, "retryAfter": 10, "skipCount": 2}  # fmt: skip
    assert action_to_json(SkipAction.from_json(sk)) == {"mergeskip": sk}


def test_our_file_entry_schema_begins_with_the_references():
    """Field for field (name, type, default, field id, order) the reference's v0.5.4 FileEntry as
    its manifests declare it; our additions follow, optional with defaults."""
    from indextables_spark.core.log.state.avro_codec import FILE_ENTRY_AVRO_SCHEMA

    def fields(schema: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(f["name"], json.dumps(f["type"]), f.get("default", "-"), f["field-id"]) for f in schema["fields"]]

    with open(FIXTURES / "04_partitioned" / LOG / _a_manifest("04_partitioned"), "rb") as f:
        ref = fastavro.reader(f).writer_schema
    assert ref["name"] == "io.indextables.state.FileEntry"
    ours = fields(FILE_ENTRY_AVRO_SCHEMA)
    assert ours[: len(ref["fields"])] == fields(ref)
    assert all(default is None for _, _, default, _ in ours[len(ref["fields"]) :])
