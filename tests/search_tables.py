"""Helpers for the search/aggregation tests: write real tables without a SparkSession.

The write path is the Spark writer's own (plan_write → write_splits → commit_write), run in this
process, so tables are identical to `df.write.format("indextables")` output.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any, Mapping

import pyarrow as pa

import indextables_spark as it

from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.config.options import Options
from indextables_spark.ops.write.write import commit_write
from indextables_spark.spark.writer import plan_write, write_splits
from indextables_spark.core.schema.arrow_types import arrow_schema

UTC = dt.timezone.utc
TAGS = ["news", "blog", "docs", "forum", None]
REGIONS = ["eu", "us", "apac"]
WORDS = [
    "spark",
    "sql",
    "search",
    "engine",
    "data",
    "lake",
    "tantivy",
    "index",
    "stream",
    "query",
    "Spark",
    "SQL-engine",
    "lakehouse",
    "quasar",
]


def write_table(
    path: str, table: pa.Table, schema, options: Mapping[str, Any] | None = None, batch_rows: int = 500
) -> int:
    """Write `table` (Arrow, columns of the pyspark StructType `schema`) as one commit; returns
    the version. Options: e.g. partitionBy, write.targetSplitSize (to get many splits)."""
    opts = Options.of(options)
    plan, read_version, _ = plan_write(path, opts, schema, False)
    msg = write_splits(path, opts, plan, iter(table.to_batches(max_chunksize=batch_rows)))
    return commit_write(
        it.IndexTable(path, opts).log, plan, read_version, False, [AddFile.from_json(d) for d in msg.adds]
    )


def docs_schema():
    from pyspark.sql.types import (
        DateType,
        DecimalType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            StructField("id", LongType()),
            StructField("body", StringType()),
            StructField("tag", StringType()),
            StructField("views", LongType()),
            StructField("score", DoubleType()),
            StructField("day", DateType()),
            StructField("ts", TimestampType()),
            StructField("price", DecimalType(10, 2)),
            StructField("title", StringType()),
            StructField("region", StringType()),
        ]
    )


def docs(n: int, seed: int = 3) -> pa.Table:
    """Documents with every column kind the aggregations touch (nulls included)."""
    rng = random.Random(seed)

    def maybe(v, p=0.05):
        return None if rng.random() < p else v

    rows = {
        "id": list(range(n)),
        "body": [maybe(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))) for _ in range(n)],
        "tag": [rng.choice(TAGS) for _ in range(n)],
        "views": [maybe(rng.randint(0, 10_000)) for _ in range(n)],
        "score": [maybe(round(rng.random() * 100, 3)) for _ in range(n)],
        "day": [maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 200))) for _ in range(n)],
        "ts": [
            maybe(dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=rng.randint(0, 200 * 86400)))
            for _ in range(n)
        ],
        "price": [maybe(decimal.Decimal(rng.randint(0, 100_000)) / 100) for _ in range(n)],
        "title": [f"title {rng.randint(0, 50)}" for _ in range(n)],
        "region": [rng.choice(REGIONS) for _ in range(n)],
    }
    return pa.Table.from_pydict(rows, schema=arrow_schema(docs_schema().jsonValue()))


DOCS_OPTIONS = {
    "partitionBy": "region",
    "write.targetSplitSize": "40K",
    "spark.indextables.indexing.typemap.body": "text",
    "spark.indextables.indexing.typemap.title": "text_and_string",
}
