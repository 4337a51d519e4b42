"""The registry's streaming options (config/registry.py joins the families).

Structured Streaming: the source's starting version and micro-batch sizes, the sink's idempotent
writes.
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("checkpointLocation", "str", None, "streaming checkpoint directory", readme=False),
    OptionSpec("startingVersion", "str", None, "streaming source: the first version read (`latest` or a number)"),
    OptionSpec("maxFilesPerTrigger", "int", 0, "streaming source: splits per micro-batch (0: no limit)"),
    OptionSpec("maxBytesPerTrigger", "size", 0, "streaming source: bytes per micro-batch (0: no limit)"),
    OptionSpec("ignoreDeletes", "bool", False, "streaming source: skip versions that only remove splits"),
    OptionSpec("ignoreChanges", "bool", False, "streaming source: skip rewritten splits"),
    OptionSpec("txnAppId", "str", None, "streaming sink: idempotent writes, with `queryId`", readme=False),
    OptionSpec("queryId", "str", None, "streaming sink: the query id of idempotent writes", readme=False),
)
