"""The transaction log of a table: version files of actions, the V4 Avro state and checkpoints,
snapshots, commits and maintenance. Spark-free.

The sub-packages, by job. Layers (`tests/test_layout.py`), one way: `model/` → `deletes/` →
`state/` → `read/` → `commit/` → `maintenance/`; each imports only itself and the ones before it.
- `model/`: what the log records: the actions, their wire form in version files and the files'
  encoding, the files' names, the protocol this implementation reads and writes, doc mapping hashes.
- `deletes/`: row-level deletes: delete log files (in the frame of our auxiliary files), which
  apply to a split, applying them to rows.
- `state/`: the V4 Avro state's files: Avro containers, the state manifest and `_last_checkpoint`,
  FileEntry manifests (read and written), the state options, when and how a state is compacted.
- `read/`: the table at a version: the log's listing, the base a snapshot starts from (an Avro
  state or a JSON checkpoint), the version files replayed onto it, TransactionLog, freshness, the
  change feed.
- `commit/`: writing versions: optimistic transactions, the commit policy (the one retry loop of
  every writer), the refusal of writes to tables holding
  the reference implementation's splits, synthetic tables for tests and benchmarks.
- `maintenance/`: on top of commits: writing states and checkpoints, `_last_checkpoint`,
  retention and GC, the post-commit hook, the process's shared logs that install it.
"""
