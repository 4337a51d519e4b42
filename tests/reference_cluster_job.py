"""A driver program for tests/test_reference_cloud.py, run as its own process (a pytest process may
already hold a local SparkContext, and a process has only one):

    python tests/reference_cluster_job.py MASTER_URL TABLE_URI CONF_JSON OUT_JSON QUERY

Starts a SparkSession on MASTER_URL with the `spark.indextables.*` entries of CONF_JSON as session
conf (the S3 credentials), registers indextables, reads the table IndexTables4Spark wrote (every
row, the rows matching QUERY, a filtered count) and writes them to OUT_JSON.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    master, uri, conf_path, out_path, query = sys.argv[1:6]
    from pyspark.sql import SparkSession

    import indextables_spark as it

    builder = SparkSession.builder.master(master).appName("indextables-reference-read")
    builder = builder.config("spark.cores.max", "2").config("spark.executor.memory", "1g")
    for k, v in json.load(open(conf_path)).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    try:
        it.register(spark)
        df = spark.read.format("indextables").load(uri)
        rows = [r.asDict() for r in df.collect()]
        hits = [r["id"] for r in spark.read.format("indextables").option("query", query).load(uri).collect()]
        over = df.filter("id >= 3").count()
        with open(out_path, "w") as f:
            json.dump({"rows": rows, "hits": hits, "over": over}, f)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
