"""Writing versions: `transaction` (optimistic transactions, conflict resolution), `policy` (the
commit policy: the one retry loop every writer uses, for a time budget, with backoff and jitter),
`reference_splits` (tables holding the reference implementation's splits, and the refusal of
writes that would mix ours in), `synthetic` (synthetic tables for tests and benchmarks, committed
through the real log). Layer: after read/, before maintenance/."""
