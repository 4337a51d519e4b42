"""The table format and search, Spark-free: `storage/` (one interface, local / S3 / Azure), `log/` (the transaction
log and its state) and `split/` (building, caching and searching splits)."""
