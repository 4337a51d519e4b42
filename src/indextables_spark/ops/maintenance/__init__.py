"""The table's upkeep: `checkpoint` (CHECKPOINT, COMPACT), `merge_splits` (with `merge_plan` and
`merge_rewrite`), `purge`, `truncate_time_travel`, `drop_partitions`, `repair`, `convert`,
`post_write` (merge- and purge-on-write). Layer: after companion/ (MERGE SPLITS re-indexes
companion splits), before inspect/."""
