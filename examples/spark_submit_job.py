"""A spark-submit job: append generated documents to a table, then search it.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit --properties-file conf/spark-defaults.conf \
        --conf spark.pyspark.python=$PWD/.venv/bin/python examples/spark_submit_job.py /tmp/it-table

On a standalone cluster with the table on S3 (credentials and endpoint as session conf):

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit --master spark://host:7077 \
        --conf spark.pyspark.python=$PWD/.venv/bin/python --conf spark.sql.python.filterPushdown.enabled=true \
        --conf spark.indextables.aws.accessKey=... --conf spark.indextables.aws.secretKey=... \
        --conf spark.indextables.aws.region=us-east-1 examples/spark_submit_job.py s3://bucket/prefix
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
    # Partition columns go as the `partitionBy` option (Spark refuses .partitionBy() for Python data
    # sources). Credentials, endpoint, ... come from the spark.indextables.* conf (--conf).
    spark_dataframe(spark, 20_000).write.format("indextables").mode("append").option("partitionBy", "region").option(
        "spark.indextables.indexing.typemap.body", "text"
    ).save(path)
    hits = spark.read.format("indextables").option("query", "body:nebula").load(path)
    table = it.IndexTable(path, spark=spark)  # the Spark-free API, with the session's conf as options
    print(f"table {path} version {table.version()}: {hits.count()} documents mention 'nebula'")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/indextables-job-table")
