"""The column model every layer above shares: Spark schema JSON ↔ ColumnSpec (types.py) ↔ Arrow
(arrow_types.py), partition values and paths (partitions.py), and the text analyzers (analyzers.py).
It imports nothing of the package but errors.py, so the expressions (expr/), the log and the split
format all build on it."""
