"""What modules outside spark/ need from a SparkSession, classic or Spark Connect, duck-typed.

Nothing here imports pyspark, and nothing touches `spark._jvm`, `spark._jsc`, `spark.conf._jconf`
or (in Connect sessions) `spark.sparkContext`: over Spark Connect those raise
JVM_ATTRIBUTE_NOT_SUPPORTED (`is_stopped` reads whether a classic SparkContext still holds its
Java context, without calling it). The session's `spark.indextables.*` conf is
`options.session_options(spark)`; `with_session_options` overlays explicit options on it.

Spark Connect withholds secrets: its server does not return conf entries whose key matches
`spark.redaction.regex` (default `(?i)secret|password|token|access[.]?key`) to clients — `get`
says SQL_CONF_NOT_FOUND, `getAll` leaves them out, `SET` shows "*********(redacted)". So
`spark.indextables.aws.accessKey`, `aws.secretKey`, `aws.sessionToken`, `azure.sasToken`,
`azure.clientSecret`, `azure.bearerToken` set in a Connect session never reach client-side code;
give them as options (or use the default credential chain). `with_session_options` logs a
warning naming such keys when the options do not supply them.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

from indextables_spark.config.options import PREFIX, Options, session_options, short_key
from indextables_spark.config.redaction import redact_text, spark_redaction_regexes
from indextables_spark.errors import IndexTablesError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PARALLELISM = 2


def is_connect(spark: Any) -> bool:
    """A Spark Connect client session (pyspark.sql.connect.*), not a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def functions(spark_or_df: Any) -> Any:
    """`pyspark.sql.functions` for this session's (or DataFrame's) kind. pyspark's dispatching
    module picks classic or Connect by a process-wide flag, which a process holding both kinds
    of session (or a Connect session made before the flag is set) gets wrong."""
    if is_connect(spark_or_df):
        from pyspark.sql.connect import functions as connect_functions  # lazy: pyspark only with a session

        return connect_functions
    from pyspark.sql import functions as classic_functions  # lazy: pyspark only with a session

    return classic_functions


def withheld_conf_keys(spark: Any) -> list[str]:
    """Over Spark Connect: the `spark.indextables.*` keys set in the session whose values the server
    does not return to clients (secrets, see the module doc). [] for classic sessions."""
    if spark is None or not is_connect(spark):
        return []
    visible = {k.lower() for k in session_options(spark)}
    listed = [str(r[0]) for r in spark.sql("SET").collect()]
    return sorted(k for k in listed if k.lower().startswith(PREFIX) and k.lower() not in visible)


def with_session_options(spark: Any, options: Mapping[str, Any] | None = None) -> Options:
    """The session's `spark.indextables.*` conf overlaid with `options` (explicit options win).
    Over Spark Connect, warns about conf keys the server withholds that `options` do not give.
    With a session, `read.stalenessLimit` is 0 unless set: its jobs commit in other processes
    (Python workers), which a reader reusing a recent listing would not see (spark_read_options)."""
    opts = Options.of(session_options(spark), options)
    if spark is not None:
        extend_spark_redaction(spark)
        opts = spark_read_options(opts)
    if spark is not None and is_connect(spark):
        missing = [k for k in withheld_conf_keys(spark) if short_key(k) not in opts.values]
        if missing:
            log.warning(
                "indextables: %s set in the Spark Connect session, but Spark Connect does not return "
                "secret conf values to clients (spark.redaction.regex): give them as options "
                "(IndexTable(path, options, spark=...))",
                ", ".join(missing),
            )
    return opts


def extend_spark_redaction(spark: Any) -> None:
    """Have Spark hide our secret options where it shows them itself (config/redaction.py
    spark_redaction_regexes): the session conf each SQL execution lists in the SQL tab, plans, and
    over Spark Connect the request text of every job in the UI, which holds a read's or write's
    options. The session's own patterns are kept (ours are added as alternatives). Once a session
    (it.register and every call given a session ask for it)."""
    if spark is None or spark.__dict__.get("_it_redaction_extended"):
        return
    for key, ours in spark_redaction_regexes().items():
        current = spark.conf.get(key)  # its value or Spark's default (a default given here would hide that)
        if not current:
            spark.conf.set(key, ours)
        elif ours not in current:
            spark.conf.set(key, f"{current}|{ours}")
    spark.__dict__["_it_redaction_extended"] = True


def spark_read_options(opts: Options) -> Options:
    """`opts` with `read.stalenessLimit` 0 unless set: what reads planned by Spark, or by a process
    whose writes Spark jobs commit elsewhere, use (every read of the latest version lists the log)."""
    if opts.get_str("read.stalenessLimit") is not None:
        return opts
    return Options.of(opts, {"read.stalenessLimit": "0"})


def _conf(spark: Any, key: str) -> str | None:
    value = spark.conf.get(key, None)
    return None if value is None else str(value)


def master(spark: Any) -> str:
    """The session's master URL ("local[2]", "spark://host:port", ...), "" when unknown."""
    if spark is None:
        return ""
    value = _conf(spark, "spark.master")
    if value:
        return value
    if not is_connect(spark):
        return spark.sparkContext.master or ""
    return ""


def default_parallelism(spark: Any, default: int = DEFAULT_PARALLELISM) -> int:
    """`spark.default.parallelism` when set; else, in a classic session, the SparkContext's value
    (total executor cores); else N of a `local[N]` master; else `default`."""
    if spark is None:
        return default
    value = _conf(spark, "spark.default.parallelism")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            pass
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    m = master(spark)
    if m.startswith("local[") and m.endswith("]"):
        n = m[len("local[") : -1].split(",")[0]
        if n.isdigit():
            return max(1, int(n))
    return default


def stop_scope(spark: Any) -> Any:
    """What `spark.stop()` ends: a classic session's SparkContext (every classic session of the
    process shares it, and stopping any of them stops it), or the Connect session itself."""
    return spark if is_connect(spark) else spark.sparkContext


def is_stopped(spark: Any) -> bool:
    """Whether `spark` has stopped, from pyspark's own Python state (no call to the JVM or the
    server): a classic SparkContext drops its Java context once stopped, a Connect client closes."""
    if is_connect(spark):
        return bool(spark.is_stopped)
    return getattr(spark.sparkContext, "_jsc", None) is None


def set_job_description(spark: Any, text: str | None) -> None:
    """The description of the Spark jobs this thread starts from now on (Spark UI). Classic
    sessions only: Connect has no job descriptions (its jobs show the client's operation)."""
    if spark is not None and not is_connect(spark):
        spark.sparkContext.setJobDescription(None if text is None else redact_text(text))


@contextlib.contextmanager
def job_description(spark: Any, text: str | None) -> Iterator[None]:
    """set_job_description for the jobs of the block; the previous description is restored when
    the block succeeds (after a failure the context may be gone: nothing is touched)."""
    if spark is None or text is None or is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    previous = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(redact_text(text))  # a statement's text may hold a URL with its SAS
    yield
    sc.setJobDescription(previous)


def run_tasks(spark: Any, fn: Callable[[T], R], items: Iterable[T], description: str | None = None) -> list[R]:
    """`[fn(item) for item in items]` as one Spark job with one task per item, results in item
    order. `fn` is pickled with the job (cloudpickle); items and results must be picklable. An
    exception in `fn` fails the job.

    Classic sessions: an RDD `parallelize(items, n).map(fn)`. Spark Connect (no RDDs): the items
    travel pickled in a DataFrame range-partitioned by their index, a `mapInArrow` runs `fn` in the
    server's Python workers and the results come back pickled; this costs ~0.3–0.6 s more than the
    RDD job (a sampling job and a shuffle), so classic sessions keep the RDD."""
    items = list(items)
    if not items:
        return []
    if not is_connect(spark):
        with job_description(spark, description):
            results: list[R] = spark.sparkContext.parallelize(items, len(items)).map(fn).collect()
            return results
    return _run_tasks_dataframe(spark, fn, items, description)


def _run_tasks_dataframe(spark: Any, fn: Callable[[T], R], items: list[T], description: str | None) -> list[R]:
    import pyarrow as pa  # lazy: keeps `import indextables_spark.config.sessions` free of pyarrow

    table = pa.table(
        {"i": pa.array(range(len(items)), pa.int64()), "item": pa.array([pickle.dumps(x) for x in items], pa.binary())}
    )

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i, raw in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                out = pickle.dumps(fn(pickle.loads(raw)))
                yield pa.RecordBatch.from_arrays(
                    [pa.array([i], pa.int64()), pa.array([out], pa.binary())], names=["i", "result"]
                )

    with job_description(spark, description):
        # Range partitioning on the index: every item is sampled (up to ~50,000 items), so each of
        # the n partitions gets exactly one item (hash or round-robin partitioning may pair some).
        df = spark.createDataFrame(table).repartitionByRange(len(items), "i")
        result = df.mapInArrow(task, "i long, result binary").toArrow()
    by_index = dict(zip(result.column("i").to_pylist(), result.column("result").to_pylist()))
    if len(by_index) != len(items):
        raise IndexTablesError(f"{description or 'Spark job'}: {len(by_index)} results for {len(items)} tasks")
    return [pickle.loads(by_index[i]) for i in range(len(items))]
