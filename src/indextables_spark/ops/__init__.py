"""The table operations (MERGE SPLITS, PURGE, DROP PARTITIONS, DELETE, ...): one module each."""
