"""What every process holds: `cache` (the split cache commands), `storage_stats`, `environment`,
and `executors` (the Spark job asking every executor's processes). Layer: the last of ops/."""
