"""A spark-submit job: append generated documents to a table, then search it.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit --properties-file conf/spark-defaults.conf \
        --conf spark.pyspark.python=$PWD/.venv/bin/python examples/spark_submit_job.py /tmp/it-table
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyspark.sql import SparkSession  # noqa: E402

import indextables_spark as it  # noqa: E402
from datagen import spark_dataframe  # noqa: E402


def main(path: str) -> None:
    spark = SparkSession.builder.appName("indextables-job").getOrCreate()
    if spark.conf.get("spark.sql.python.filterPushdown.enabled", "false") != "true":
        raise SystemExit("run with --properties-file conf/spark-defaults.conf (filter pushdown must be enabled)")
    it.register(spark)
    spark_dataframe(spark, 20_000).write.format("indextables").mode("append").partitionBy("region") \
        .option("spark.indextables.indexing.typemap.body", "text").save(path)
    hits = spark.read.format("indextables").option("query", "body:nebula").load(path)
    print(f"table {path} version {it.IndexTable(path).version()}: {hits.count()} documents mention 'nebula'")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/indextables-job-table")
