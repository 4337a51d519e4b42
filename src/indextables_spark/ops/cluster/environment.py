"""DESCRIBE INDEXTABLES ENVIRONMENT: properties of the driver and of each executor host, one row
each (host, role, property_type, property_name, property_value), secrets redacted.

The reference lists the Spark and Hadoop configuration of the driver and of every executor JVM,
and tantivy4java's native memory figures. What decides this package's behaviour is in Python, so
the rows are what the Python processes see:
- `spark` (driver, with a SparkSession): the session's conf (`spark.conf.getAll`); Spark Connect
  servers return no secret values to clients in the first place;
- `indextables` (driver): the `spark.indextables.*` options the command ran with (the session's
  conf and the options given: the command line's `-o`, `options=`);
- `python`: the interpreter (version, implementation, executable, platform, CPUs);
- `package`: the versions of this package and of what it runs on (pyspark, tantivy, pyarrow,
  faiss, …; absent: no value), the first thing to compare between driver and executors;
- `env`: the process's environment variables that steer Spark, Python and the cloud SDKs
  (`SPARK_*`, `PYSPARK_*`, `JAVA_HOME`, `AWS_*`, `AZURE_*`).
Executor hosts (as a Spark job, with a SparkSession) give `python`, `package` and `env`: their
Python workers have no Spark conf (their options come from the driver). There is no `hadoop` type:
Hadoop's configuration steers nothing here (storage is reached through boto3 and the Azure SDK).
Values are redacted by config/redaction.py: a secret-named property (the reference's
CredentialRedaction words — secret, key, password, token, credential, session —, the registered
secret options, the session's spark.redaction.regex) shows the reference's marker, and any other
value has the secrets inside it hidden (a `--conf k=v` in PYSPARK_SUBMIT_ARGS, `-Dk=v` in
SPARK_SUBMIT_OPTS or spark.driver.extraJavaOptions, the AccountKey of a connection string)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from indextables_spark.config.options import PREFIX, Options
from indextables_spark.config.redaction import redact_value
from indextables_spark.config.registry import spec
from indextables_spark.ops.cluster.executors import Report, by_host, in_spark_task, on_executors, this_process
from indextables_spark.ops.command import CommandParser, Context
from indextables_spark.results.cluster import EnvironmentRow

REDACTED = "***REDACTED***"  # the reference's CredentialRedaction marker
PACKAGES = (
    "indextables_spark",
    "pyspark",
    "tantivy",
    "pyarrow",
    "numpy",
    "faiss-cpu",
    "fastavro",
    "datafusion",
    "zstandard",
    "ducer",
    "boto3",
    "azure-storage-blob",
    "azure-identity",
    "pandas",
    "deltalake",
    "pyiceberg",
)
_ENV_PREFIXES = ("SPARK_", "PYSPARK_", "AWS_", "AZURE_")
_ENV_NAMES = ("JAVA_HOME", "PYTHONPATH")


def redact(name: str, value: str | None, pattern: str | None = None) -> str | None:
    """The value as shown: the reference's marker for a secret's name, else secrets inside hidden."""
    return redact_value(name, value, REDACTED, pattern)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def process_properties() -> Report:
    """This process's `python`, `package` and `env` properties: {"props": [[type, name, value]]}."""
    props: list[tuple[str, str, str | None]] = [
        ("python", "python.version", platform.python_version()),
        ("python", "python.implementation", platform.python_implementation()),
        ("python", "python.executable", sys.executable),
        ("python", "platform", platform.platform()),
        ("python", "os.cpu_count", str(os.cpu_count())),
    ]
    props += [("package", dist, _version(dist)) for dist in PACKAGES]
    props += [("env", k, os.environ[k]) for k in sorted(os.environ) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES]
    return {"props": [[t, n, redact(n, v)] for t, n, v in props]}


def _option_name(short: str) -> str:
    """An option's full key as the registry spells it (Options keeps them lower-cased)."""
    known = spec(short)
    return PREFIX + (known.key if known is not None and "<" not in known.key else short)


def _session_conf(spark: Any) -> dict[str, str]:
    conf = spark.conf.getAll  # a property in pyspark 4 (a dict), a method before
    values = conf() if callable(conf) else conf
    return {str(k): str(v) for k, v in dict(values).items()}


def _row(host: str, role: str, type_: str, name: str, value: str | None) -> EnvironmentRow:
    return EnvironmentRow(host=host, role=role, property_type=type_, property_name=name, property_value=value)


def environment(options: Options, spark: Any = None) -> list[EnvironmentRow]:
    """The driver's rows (this process), then each executor host's when `spark` is given."""
    me = this_process(process_properties)
    role = "worker" if in_spark_task() else "driver"
    rows = []
    if spark is not None:
        conf = _session_conf(spark)
        pattern = conf.get("spark.redaction.regex")
        rows += [_row(me["host"], role, "spark", k, redact(k, v, pattern)) for k, v in sorted(conf.items())]
    if role == "driver":
        rows += [
            _row(me["host"], role, "indextables", _option_name(k), redact(_option_name(k), v))
            for k, v in sorted(options.values.items())
        ]
    rows += [_row(me["host"], role, t, n, v) for t, n, v in me["props"]]
    if spark is None:
        return rows
    for host, procs in by_host(on_executors(spark, process_properties)):
        seen: dict[tuple[str, str, str | None], None] = {}
        for p in procs:  # the processes of a host mostly agree: each property once per value
            seen.update(dict.fromkeys((t, n, v) for t, n, v in p["props"]))
        rows += [_row(host, "worker", t, n, v) for t, n, v in seen]
    return rows


@dataclass(frozen=True)
class DescribeEnvironment:
    """DESCRIBE INDEXTABLES ENVIRONMENT: the driver's Spark conf and options, and the Python,
    package versions and environment of the driver and of each executor host (as a Spark job,
    when a SparkSession is given); secrets redacted."""

    result: ClassVar[type[EnvironmentRow]] = EnvironmentRow

    @classmethod
    def parse(cls, p: CommandParser) -> DescribeEnvironment:
        return cls()

    def run(self, ctx: Context) -> list[EnvironmentRow]:
        return environment(ctx.options, ctx.spark)
