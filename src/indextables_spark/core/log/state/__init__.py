"""The V4 Avro state's files: `avro_container` (Avro container files: schemas, codecs, framing;
pure Python), `avro_codec` (the column-wise Avro encoder, numpy/pyarrow), `state_manifest` (the
state manifest and `_last_checkpoint`: models, encoding, validation), `file_entries` (FileEntry
records as Arrow tables and AddFile objects), `manifest` (FileEntry manifests read into Arrow),
`manifest_write` (written from Arrow), `state_config` (the state options), `state_compaction`
(when a state is compacted and what compaction does to the live files). Layer: after model/ and
deletes/, before read/."""
