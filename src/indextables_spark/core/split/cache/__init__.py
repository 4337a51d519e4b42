"""The per-process caches of splits and where their rows come from: `cache` (the local cache of
extracted splits), `sparse` (fetching only the index sections a query reads), `lazy_rows` (the row
store read by ranges), `companion` (companion splits: rows read from a source's Parquet files),
`open_splits` (opened splits kept per process), `split_threads` (threads per search, fetching
missing splits in parallel)."""
