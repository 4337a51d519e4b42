"""Changing a table's rows: `write` (appends and overwrites: Arrow rows → splits → one commit),
`write_schema` (an append's schema rules), `optimize_write` (`write.optimizeWrite.*`: the Spark-free
part), `delete` (row-level DELETE). Layer: after ops/registry.py, before companion/."""
