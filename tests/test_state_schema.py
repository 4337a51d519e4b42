"""Schema evolution of the FileEntry manifests (docs/reference/table-format.md, "File entries") and
schema deduplication / renormalization ("Schema deduplication", "Renormalization")."""

from __future__ import annotations

import copy
import io
import json

import fastavro
import pytest

import indextables_spark as it
from indextables_spark.errors import CorruptStateError
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.state.avro_codec import FILE_ENTRY_AVRO_SCHEMA, read_header
from indextables_spark.core.log.read.avro_state import read_state_manifest
from indextables_spark.core.log.model.doc_mapping import doc_mapping_hash
from indextables_spark.core.log.state.file_entries import add_files_to_table, table_to_add_files
from indextables_spark.core.log.state.manifest import read_manifest
from indextables_spark.core.log.state.manifest_write import write_manifest
from indextables_spark.core.log.commit.synthetic import commit_files, create_table, synthetic_adds
from indextables_spark.core.storage import LocalStorage

RECORD = {
    "path": "p.split",
    "partitionValues": {"date": "2024-01-01"},
    "size": 10,
    "modificationTime": 5,
    "dataChange": True,
    "stats": None,
    "minValues": {"a": "1"},
    "maxValues": {"a": "9"},
    "numRecords": 3,
    "footerStartOffset": 1,
    "footerEndOffset": 2,
    "hasFooterOffsets": True,
    "splitTags": ["x"],
    "numMergeOps": 1,
    "docMappingRef": "r",
    "uncompressedSizeBytes": 20,
    "addedAtVersion": 4,
    "addedAtTimestamp": 6,
}


def write_with_schema(storage, schema, records, name="manifest-custom.avro"):
    key = f"_transaction_log/manifests/{name}"
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec="zstandard")
    storage.put(key, buf.getvalue())
    return key


@pytest.fixture
def storage(tmp_path):
    return LocalStorage(str(tmp_path))


def test_add_new_field_with_new_field_id_is_ignored_by_our_reader(storage):
    schema = copy.deepcopy(FILE_ENTRY_AVRO_SCHEMA)
    schema["fields"].append({"name": "deleteLogRef", "type": ["null", "string"], "default": None, "field-id": 160})
    key = write_with_schema(storage, schema, [{**RECORD, "deleteLogRef": "dl-1"}])
    t = read_manifest(storage, key, 1)
    assert "deleteLogRef" not in t.column_names
    assert table_to_add_files(t)[0].path == "p.split"


def test_field_id_preservation_in_written_schema(storage):
    key, _ = write_manifest(storage, add_files_to_table([AddFile("a", {}, 1, 1)]), [])
    ids = [f["field-id"] for f in read_header(storage.read(key), key).schema["fields"]]
    v054 = [100, 101, 102, 103, 104, 110, 111, 112, 113, 120, 121, 124, 132, 134, 135, 136, 140, 141, 150, 151, 152]
    assert ids[:21] == v054  # the reference's v0.5.4 FileEntry, in its order
    # appended: the current reference's other FileEntry fields, and the hotcache offsets
    assert ids[21:] == [123, 137, 138, 125, 126]


def test_read_old_schema_with_new_reader(storage):
    """A manifest from an older writer without optional fields: defaults apply."""
    schema = copy.deepcopy(FILE_ENTRY_AVRO_SCHEMA)
    keep = {"path", "partitionValues", "size", "modificationTime", "dataChange", "addedAtVersion", "addedAtTimestamp"}
    schema["fields"] = [f for f in schema["fields"] if f["name"] in keep]
    key = write_with_schema(storage, schema, [{k: RECORD[k] for k in keep}])
    a = table_to_add_files(read_manifest(storage, key, 1))[0]
    assert a.path == "p.split" and a.num_records is None and a.split_tags is None and a.doc_mapping_ref is None
    assert a.has_footer_offsets is False and a.added_at_version == 4


def test_read_new_schema_with_old_reader(storage):
    """Our manifests read with a reader schema that lacks fields (an older reader): unknown
    fields are skipped by Avro schema resolution."""
    key, _ = write_manifest(
        storage,
        add_files_to_table([AddFile("a", {"d": "1"}, 1, 1, num_records=5, added_at_version=1, added_at_timestamp=1)]),
        ["d"],
    )
    old = copy.deepcopy(FILE_ENTRY_AVRO_SCHEMA)
    old["fields"] = old["fields"][:5] + [
        f for f in old["fields"] if f["name"] in ("addedAtVersion", "addedAtTimestamp")
    ]
    with open(storage.local_path(key), "rb") as f:
        recs = list(fastavro.reader(f, reader_schema=fastavro.parse_schema(old)))
    assert recs == [
        {
            "path": "a",
            "partitionValues": {"d": "1"},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
            "addedAtVersion": 1,
            "addedAtTimestamp": 1,
        }
    ]


def test_rename_field_keeps_field_id(storage):
    schema = copy.deepcopy(FILE_ENTRY_AVRO_SCHEMA)
    for f in schema["fields"]:
        if f["field-id"] == 113:
            f["name"] = "recordCount"
    rec = dict(RECORD)
    rec["recordCount"] = rec.pop("numRecords")
    key = write_with_schema(storage, schema, [rec])
    assert table_to_add_files(read_manifest(storage, key, 1))[0].num_records == 3


def test_promote_field_type_int_to_long(storage):
    schema = copy.deepcopy(FILE_ENTRY_AVRO_SCHEMA)
    for f in schema["fields"]:
        if f["name"] == "size":
            f["type"] = "int"
    key = write_with_schema(storage, schema, [RECORD])
    t = read_manifest(storage, key, 1)
    assert str(t.schema.field("size").type) == "int64" and t.column("size")[0].as_py() == 10


def test_missing_required_field_is_an_error_naming_the_file(storage):
    schema = copy.deepcopy(FILE_ENTRY_AVRO_SCHEMA)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "path"]
    key = write_with_schema(storage, schema, [{k: v for k, v in RECORD.items() if k != "path"}], "manifest-nopath.avro")
    with pytest.raises(CorruptStateError, match="manifest-nopath.avro: manifest has no 'path' field"):
        read_manifest(storage, key, 1)


# ---- schema deduplication ---------------------------------------------------------------------------------

MAPPING = [{"name": "title", "type": "text", "tokenizer": "default"}, {"name": "id", "type": "i64"}]


def test_inline_doc_mapping_is_deduplicated_on_commit(tmp_path):
    t = it.IndexTable(str(tmp_path / "d"), {"checkpoint.enabled": "false"})
    create_table(t)
    js = json.dumps(MAPPING)
    files = [AddFile(f"s{i}.split", {"date": "2024-01-01"}, 1, 1, doc_mapping_json=js) for i in range(3)]
    v = commit_files(t, files)
    ref = doc_mapping_hash(js)
    raw = t.log.read_actions(v)
    adds = [a for a in raw if isinstance(a, AddFile)]
    assert all(a.doc_mapping_ref == ref and a.doc_mapping_json is None for a in adds)
    md = [a for a in raw if a.__class__.__name__ == "Metadata"][0]
    assert md.configuration[f"docMappingSchema.{ref}"] == js
    # a second commit with the same schema (keys in another order) adds no metadata action
    reordered = json.dumps([{"type": "i64", "name": "id"}, {"tokenizer": "default", "type": "text", "name": "title"}])
    v2 = commit_files(t, [AddFile("s9.split", {"date": "2024-01-01"}, 1, 1, doc_mapping_json=reordered)])
    assert not [a for a in t.log.read_actions(v2) if a.__class__.__name__ == "Metadata"]
    snap = t.snapshot()
    assert {f.doc_mapping_ref for f in snap.files} == {ref} and snap.doc_mapping(ref) == js
    t.maintenance.checkpoint()
    sm = read_state_manifest(t.storage, t.log.listing().state_manifests[v2])
    assert sm.schema_registry[ref] == js


def test_registry_only_metadata_changes_do_not_conflict(tmp_path):
    t = it.IndexTable(str(tmp_path / "c"), {"checkpoint.enabled": "false"})
    create_table(t)
    a = t.transaction()
    b = t.transaction()
    a.add_files([AddFile("a.split", {"date": "x"}, 1, 1, doc_mapping_json=json.dumps([{"name": "a"}]))])
    b.add_files([AddFile("b.split", {"date": "x"}, 1, 1, doc_mapping_json=json.dumps([{"name": "b"}]))])
    a.commit()
    b.commit()  # rebased: both registry entries survive
    snap = t.snapshot()
    assert len(snap.metadata_action.doc_mappings) == 3
    assert all(snap.doc_mapping(f.doc_mapping_ref) for f in snap.files)


def test_legacy_inline_doc_mapping_in_version_files_is_carried_into_state(tmp_path):
    from indextables_spark.core.log.model.action_wire import action_to_json

    t = it.IndexTable(str(tmp_path / "l"), {"checkpoint.enabled": "false"})
    create_table(t)
    js = json.dumps(MAPPING)
    line = json.dumps(action_to_json(AddFile("old.split", {"date": "x"}, 1, 1, doc_mapping_json=js)))
    with open(f"{t.path}/_transaction_log/{1:020d}.json", "w") as f:
        f.write(line + "\n")
    t.maintenance.checkpoint()
    s = it.IndexTable(t.path).snapshot()
    ref = doc_mapping_hash(js)
    assert s.source == "avro-state" and s.files[0].doc_mapping_ref == ref and s.doc_mapping(ref) == js


def test_renormalization_above_threshold(tmp_path):
    """Refs computed by other writers over non-canonical JSON are recomputed canonically at
    compaction once more than the threshold of unique refs exist; equal schemas share one ref."""
    t = it.IndexTable(str(tmp_path / "r"), {"checkpoint.enabled": "false", "state.schema.renormalizeThreshold": "2"})
    variants = [
        json.dumps(m)
        for m in (
            [{"name": "title", "type": "text"}, {"name": "id", "type": "i64"}],
            [{"type": "i64", "name": "id"}, {"name": "title", "type": "text"}],
            [{"type": "text", "name": "title"}, {"type": "i64", "name": "id"}],
        )
    ]
    legacy_refs = [f"legacyref{i:07d}" for i in range(3)]  # hashes of a non-canonical form
    conf = {f"docMappingSchema.{r}": v for r, v in zip(legacy_refs, variants)}
    create_table(t, configuration=conf)
    commit_files(t, [AddFile(f"s{i}.split", {"date": "x"}, 1, 1, doc_mapping_ref=legacy_refs[i]) for i in range(3)])
    r = t.maintenance.checkpoint()
    assert r["compacted"] is True
    canon = doc_mapping_hash(variants[0])
    s = it.IndexTable(t.path).snapshot()
    assert {f.doc_mapping_ref for f in s.files} == {canon}
    sm = read_state_manifest(t.storage, t.log.listing().state_manifests[r["version"]])
    assert canon in sm.schema_registry
    assert s.doc_mapping(canon) is not None


def test_below_threshold_refs_are_left_alone(tmp_path):
    t = it.IndexTable(str(tmp_path / "n"), {"checkpoint.enabled": "false"})
    create_table(t, configuration={"docMappingSchema.legacyref0000000": json.dumps(MAPPING)})
    commit_files(t, [AddFile("s.split", {"date": "x"}, 1, 1, doc_mapping_ref="legacyref0000000")])
    t.maintenance.checkpoint()
    assert it.IndexTable(t.path).snapshot().files[0].doc_mapping_ref == "legacyref0000000"


def test_synthetic_tables_roundtrip_every_field(tmp_path):
    t = it.IndexTable(str(tmp_path / "s"), {"checkpoint.enabled": "false"})
    create_table(t)
    files = synthetic_adds(0, 50)
    commit_files(t, files)
    t.maintenance.checkpoint()
    got = {f.path: f for f in it.IndexTable(t.path).snapshot().files}
    for f in files:
        g = got[f.path]
        assert (
            g.size,
            g.min_values,
            g.max_values,
            g.num_merge_ops,
            g.uncompressed_size_bytes,
            g.footer_end_offset,
        ) == (f.size, f.min_values, f.max_values, f.num_merge_ops, f.uncompressed_size_bytes, f.footer_end_offset)
        assert g.added_at_version == 1
