"""Options: the `spark.indextables.*` keys (options.py) and the registry of every key the package reads (registry.py)."""
