"""Table maintenance on top of commits: `state_writer` (V4 Avro states written, incremental or
compacted), `last_checkpoint` (`_last_checkpoint` moved forward, legacy JSON checkpoints written),
`gc` (retention and garbage collection of states and manifests), `maintenance` (checkpoint,
compact, protocol upgrade, truncate time travel, the post-commit hook), `shared_logs` (a table's log
opened with that hook, one per table and options in a process). The last layer of core/log."""
