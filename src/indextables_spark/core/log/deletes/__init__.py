"""Row-level deletes: `delete_logs` (delete log files written and validated, which apply to a
split, applied to rows, shipped to Spark tasks), `sidecar` (the binary frame of our auxiliary
files: delete logs, and core/split/format/bloom.py's Bloom filters). Layer: after model/ only."""
