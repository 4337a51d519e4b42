"""The table's description and listings: `describe_table` (DESCRIBE TABLE), `describe` (DESCRIBE
STATE, TRANSACTION LOG), `history`, `files`, `component_sizes`. Layer: after maintenance/, before
cluster/."""
