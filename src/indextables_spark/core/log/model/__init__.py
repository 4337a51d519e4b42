"""What the log records: `actions` (one dataclass per action kind), `action_wire` (their wire form
in version files, as the reference reads it), `codec` (version file encoding: JSON lines, framed
GZIP), `paths` (the names of the files under `_transaction_log/`), `protocol_gate` (what this
implementation reads and writes), `doc_mapping` (doc mapping deduplication: canonical JSON,
hashes). The first layer of core/log."""
