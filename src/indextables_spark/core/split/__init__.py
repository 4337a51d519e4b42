"""Splits: one file per split holding a Tantivy index and the rows (Arrow IPC). Spark-free.

Modules:
- `types`      Spark schema JSON → ColumnSpec / Tantivy fields / doc mapping / Arrow schema
- `partitions` partition value strings and Hive-style paths
- `documents`  Arrow rows → Tantivy JSON documents (column-wise)
- `stats`      minValues / maxValues / nullCount of a split
- `bundle`     the single-file format (`...[footer JSON][u64 length][b"ITSPLIT1"]`)
- `builder`    SplitWriter: Arrow batches → uploaded splits → AddFile actions
- `filters`    filter model; exact Arrow evaluation, Tantivy narrowing, data skipping, partition pruning
- `reader`     SplitReader: filtered / searched rows of one extracted split
- `cache`      process-wide local cache of extracted splits (atomic across processes)
- `search`     count_matches over a table's files
"""
