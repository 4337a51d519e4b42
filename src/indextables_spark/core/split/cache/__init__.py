"""The per-process caches of splits and where their rows come from: `cache` (the local cache of
extracted splits; its directory `layout`, the `fetch` of one split, its `eviction`), `sparse`
(fetching only the index sections a query reads), `lazy_rows` (the row store read by ranges),
`companion_rows` (companion splits' rows read from a source's Parquet files; their format is
format/companion.py), `open_splits` (opened splits kept per process), `row_access` (the seam
between readers and a split's rows: ours, or a reference split's documents).
Layer (`tests/test_layout.py`): after format/, write/ and reference/, before read/: nothing here
reads splits through read/."""
