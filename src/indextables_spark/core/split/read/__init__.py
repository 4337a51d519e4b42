"""Reading splits: `plan` (ReadPlan: one read decided once, run split by split by every reader),
`tantivy_query` (filters → Tantivy queries), `query_parsing` (query text → Tantivy query),
`corpus_stats` (corpus-wide BM25 statistics), `reader` (SplitReader: one split's filtered or
searched rows), `split_rows` (rows of many splits joined with partition values), `skipping` (min/max and partition skipping),
`file_pruning` (partition pruning, data skipping, Bloom filters), `groups` (splits in units of
work), `search` (SearchPlan: counts and reads over a table's files), `search_explain`,
`split_threads` (threads per search, fetching missing splits in parallel), `prefetch` (fetching
with the row store parts of a query's matches), `vector/` (vector search: the query, one split's
candidates, the fusion, a table's answer). Layer: after cache/, before aggregate/."""
