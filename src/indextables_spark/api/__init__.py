"""The Spark-free Python API: `IndexTable` (table.py), its maintenance and inspect namespaces, writes, and the typed
results every operation returns."""
