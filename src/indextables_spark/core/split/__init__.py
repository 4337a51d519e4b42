"""Splits: one file per split holding a Tantivy index and the rows (Arrow IPC). Spark-free.

The sub-packages, by job. Layers (`tests/test_layout.py`), one way: `format/` → `write/` →
`reference/` → `cache/` → `read/` → `aggregate/`; each imports only itself and the ones before it.
- `format/`: what a split is on disk and how its columns are indexed (column specs, doc mapping,
  statistics, Bloom filters, the single-file bundle and its index sections, companion splits).
- `write/`: building splits (Arrow rows → Tantivy documents → uploaded splits → AddFile actions).
- `cache/`: the process-wide caches of extracted and opened splits, and where a split's rows come
  from (ranged reads of the row store, a companion split's source Parquet files).
- `read/`: reading one split and searching a table's splits: filters → Tantivy queries, data
  skipping, file pruning, query texts, rows joined with partition values, threads per search.
- `reference/`: the splits the reference implementation (IndexTables4Spark) wrote.
- `aggregate/`: aggregations answered from the index (requests, per-split partials, results).
"""
