"""Splits: one file per split holding a Tantivy index and the rows (Arrow IPC). Spark-free.

Writing: `column_specs` / `indexing` (schema + options → ColumnSpecs), `doc_mapping` (specs ↔ the
doc mapping, the Tantivy schema), `documents` (Arrow rows → Tantivy documents), `stats`
(min/max/null counts), `bloom` (Bloom filters), `bundle` / `composite` (the single-file format and
its index sections), `builder` (SplitWriter: Arrow batches → uploaded splits → AddFile actions),
`companion` (splits whose rows stay in a source's Parquet files).
Reading: `cache` (the process-wide local cache of extracted splits), `sparse` (fetching only the
index sections a query reads), `lazy_rows` (the row store read by ranges), `open_splits` (opened
splits kept per process), `query_parsing` (query text → Tantivy query), `reader` (SplitReader: one
split's filtered or searched rows), `split_rows` (rows of many splits joined with partition values).
Searching a table: `file_pruning` (partition pruning, data skipping, Bloom filters),
`split_threads`, `search` (SearchPlan: counts and reads over a table's files), `search_explain`;
`agg_request` / `aggregate` / `agg_result` / `group_aggregate` (aggregations from the index).
The reference implementation's splits: `quickwit`, `reference`.
"""
