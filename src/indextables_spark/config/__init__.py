"""Options: the `spark.indextables.*` keys (options.py), the registry of every key the package reads
(registry.py; its rows by family in keys/), sizes and durations (units.py), and a SparkSession
duck-typed: its conf as options, parallelism, tasks (sessions.py)."""
