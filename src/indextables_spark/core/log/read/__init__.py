"""The table at a version: `listing` (one listing of `_transaction_log/`, classified), `base_state`
(what loading a checkpoint or state yields; LogReader), `avro_state` (an Avro state read into
Arrow), `json_checkpoint` (legacy JSON checkpoints read), `state_loader` (the newest usable base
found), `replay` (version files replayed onto a base), `snapshot` (Snapshot), `table_log`
(TransactionLog: version files, snapshots, time travel), `freshness` (read.stalenessLimit),
`changes` (the change feed). Layer: after state/, before commit/ (writing states and checkpoints
reads through TransactionLog: maintenance/)."""
