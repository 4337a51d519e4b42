"""The table operations (MERGE SPLITS, PURGE, DROP PARTITIONS, DELETE, ...): one command class each,
one row each in `registry.py`, which every front end reads (SQL, the executor, the command line, the
SQL table functions, `IndexTable.maintenance`).

The sub-packages, by job. Layers (`tests/test_layout.py`), one way: `registry.py`, `command.py` → `write/` →
`companion/` → `maintenance/` → `inspect/` → `cluster/`; each imports only itself and the ones
before it.
- `registry.py`: one row per operation; `command.py`: what a command class is, what it parses and
  runs with; `table_commands.py`: the bases of the commands whose text is `<table> [DRY RUN]`.
- `write/`: changing a table's rows: appends (their schema rules, optimized writes) and DELETE.
- `companion/`: BUILD INDEXTABLES COMPANION: the build, its column selection, which source files
  it indexes, the index that follows its source, the Delta, Iceberg and Parquet sources.
- `maintenance/`: the table's upkeep: CHECKPOINT/COMPACT, MERGE SPLITS, PURGE, TRUNCATE TIME
  TRAVEL, DROP PARTITIONS, REPAIR, CONVERT, and the merge and purge run after writes.
- `inspect/`: the table's listings: DESCRIBE STATE / TRANSACTION LOG, history, files, component sizes.
- `cluster/`: what every process holds: the split cache commands, storage stats, the environment,
  and the Spark job that asks every executor's processes.
"""
