"""The reference's bucket functions as functions of the session (after `it.register(spark)`):

    SELECT indextables_histogram(price, 50.0) AS b, COUNT(*) FROM t GROUP BY 1
    SELECT indextables_date_histogram(ts, '1h', '15m') AS h, SUM(n) FROM t GROUP BY 1
    SELECT indextables_range(price, 'cheap', NULL, 50.0, 'dear', 50.0, NULL) AS tier, COUNT(*) FROM t GROUP BY 1

so Spark computes the buckets wherever the index does not answer: a statement the SQL planner
does not take (frontends/sqlplan/aggregate_plan.py), DataFrame code (`expr(...)`), other formats.
Their keys are defined in core/split/aggregate/buckets.py, which computes the same keys for the
index route. The histograms are SQL functions (`CREATE TEMPORARY FUNCTION ... RETURN`: Spark's
own arithmetic, exact on instants whatever the session time zone); `indextables_range` takes any
number of ranges, which a SQL function cannot, so it is a Python UDF calling buckets.range_key.
Named arguments work for the SQL functions (`offset => '6h'`, `min_doc_count => 1`).
"""

from __future__ import annotations

import functools
from typing import Any

from indextables_spark.core.split.aggregate import buckets as bk
from indextables_spark.spark.patching import own

# `q` is (value - offset) / interval; Spark's floor() of a double is a BIGINT (NaN → 0, ±Infinity
# → the long's bounds): rint() keeps it a double, so NaN and ±Infinity keys stay what they are
_Q = "((CAST(col AS DOUBLE) - coalesce(offset, 0D)) / `interval`)"
_FLOOR_Q = f"(rint({_Q}) - IF(rint({_Q}) > {_Q}, 1D, 0D))"
_MIN_DOC = (
    "WHEN min_doc_count IS NULL OR min_doc_count NOT IN (0, 1) THEN raise_error(concat('{fn}: min_doc_count "
    "must be 0 or 1 (GROUP BY returns no empty bucket), got ', coalesce(CAST(min_doc_count AS STRING), 'NULL'), "
    "'; keep larger buckets with HAVING COUNT(*) >= n'))"
)

HISTOGRAM_SQL = f"""CREATE OR REPLACE TEMPORARY FUNCTION {bk.HISTOGRAM}(
  col DOUBLE, `interval` DOUBLE, offset DOUBLE DEFAULT 0D, min_doc_count BIGINT DEFAULT 0)
RETURNS DOUBLE
RETURN CASE
  WHEN NOT coalesce(`interval` > 0D AND `interval` < double('Infinity'), false)
    THEN raise_error(concat('{bk.HISTOGRAM}: the interval must be a positive number, got ',
                            coalesce(CAST(`interval` AS STRING), 'NULL')))
  WHEN offset IS NOT NULL AND (isnan(offset) OR abs(offset) = double('Infinity'))
    THEN raise_error('{bk.HISTOGRAM}: the offset must be a number')
  {_MIN_DOC.format(fn=bk.HISTOGRAM)}
  ELSE {_FLOOR_Q} * `interval` + coalesce(offset, 0D)
END"""

_UNIT = (
    "CASE regexp_extract(d, '(ms|s|m|h|d)$', 1) WHEN 'ms' THEN 1000L WHEN 's' THEN 1000000L "
    "WHEN 'm' THEN 60000000L WHEN 'h' THEN 3600000000L WHEN 'd' THEN 86400000000L END"
)
MICROS_SQL = f"""CREATE OR REPLACE TEMPORARY FUNCTION __indextables_duration_micros(d STRING)
RETURNS BIGINT
RETURN IF(d LIKE '-%', -1L, 1L) * CAST(regexp_extract(d, '([0-9]+)', 1) AS BIGINT) * {_UNIT}"""

_IV = "__indextables_duration_micros(`interval`)"
_OFF = "coalesce(__indextables_duration_micros(offset), 0L)"
DATE_HISTOGRAM_SQL = f"""CREATE OR REPLACE TEMPORARY FUNCTION {bk.DATE_HISTOGRAM}(
  col TIMESTAMP, `interval` STRING, offset STRING DEFAULT NULL, min_doc_count BIGINT DEFAULT 0)
RETURNS TIMESTAMP
RETURN CASE
  WHEN NOT coalesce(`interval` RLIKE '{bk.INTERVAL_PATTERN}', false) OR {_IV} <= 0
    THEN raise_error(concat('{bk.DATE_HISTOGRAM}: invalid interval ', coalesce(`interval`, 'NULL'),
                            '; a number and a unit ms, s, m, h or d (e.g. 1ms, 30s, 15m, 1h, 1d, 7d)'))
  WHEN offset IS NOT NULL AND NOT offset RLIKE '{bk.OFFSET_PATTERN}'
    THEN raise_error(concat('{bk.DATE_HISTOGRAM}: invalid offset ', offset,
                            '; a number and a unit ms, s, m, h or d, maybe negative (e.g. 6h, -30m)'))
  {_MIN_DOC.format(fn=bk.DATE_HISTOGRAM)}
  ELSE timestamp_micros(unix_micros(col) - pmod(unix_micros(col) - {_OFF}, {_IV}))
END"""


@functools.lru_cache(maxsize=256)
def _ranges(spec: tuple[Any, ...]) -> bk.Ranges:
    return bk.ranges(list(spec))


def range_key(value: Any, *spec: Any) -> str | None:
    """indextables_range(value, name1, from1, to1, ...) in a Python worker."""
    return bk.range_key(value, _ranges(tuple(spec)))


def register_bucket_functions(spark: Any) -> None:
    """Define the three functions in this session (temporary: nothing outside it changes)."""
    from pyspark.sql.functions import udf  # lazy: pyspark is imported only when a Spark session runs this
    from pyspark.sql.types import StringType  # lazy: pyspark with a session

    run = own(type(spark), "sql")  # pyspark's own sql(): these texts need none of our routes
    for text in (MICROS_SQL, HISTOGRAM_SQL, DATE_HISTOGRAM_SQL):
        run(spark, text)
    spark.udf.register(bk.RANGE, udf(range_key, StringType(), useArrow=False))
