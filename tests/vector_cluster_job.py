"""A driver program for tests/test_vector_search.py, run as its own process (a pytest process may
already hold a local SparkContext, and a process has only one):

    python tests/vector_cluster_job.py MASTER_URL TABLE_URI CONF_JSON OUT_JSON

Starts a SparkSession on MASTER_URL with the `spark.indextables.*` entries of CONF_JSON as session
conf (the S3 credentials), writes a table with a vector column through Spark (the executors build
the splits and their vector indexes), then runs a vector read, a hybrid read and a search join on
the cluster, and writes the answers to OUT_JSON for the test to check against IndexTable.search.
"""

from __future__ import annotations

import json
import sys

DIMS = 16


def vectors(n: int) -> list[list[float]]:
    import numpy as np

    rng = np.random.default_rng(3)
    centres = rng.standard_normal((20, DIMS)) * 3
    x = centres[rng.integers(0, 20, n)] + rng.standard_normal((n, DIMS))
    return [[float(v) for v in row] for row in x.astype("float32")]


def main() -> None:
    master, uri, conf_path, out_path = sys.argv[1:5]
    from pyspark.sql import SparkSession

    import indextables_spark as it

    builder = SparkSession.builder.master(master).appName("indextables-vector-search")
    builder = builder.config("spark.cores.max", "2").config("spark.executor.memory", "1g")
    for k, v in json.load(open(conf_path)).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    try:
        it.register(spark)
        x = vectors(1200)
        rows = [(i, f"doc {i} {'quick' if i % 4 == 0 else 'slow'}", i % 100, x[i]) for i in range(len(x))]
        df = spark.createDataFrame(rows, "id long, body string, sel long, emb array<float>").repartition(2)
        (
            df.write.format("indextables")
            .option("spark.indextables.indexing.vector.emb", f"{DIMS},cosine")
            .option("spark.indextables.indexing.typemap.body", "text")
            .mode("overwrite")
            .save(uri)
        )
        q = ",".join(str(v) for v in x[11])
        near = spark.read.format("indextables").option("vector", q).option("limit", 5).option("where", "sel < 50")
        hybrid = spark.read.format("indextables").options(vector=q, query="body:quick", fusion="rrf", limit="5")
        queries = spark.createDataFrame([(i, x[i * 13]) for i in range(6)], "qid int, vec array<float>")
        joined = it.search_join(queries, uri, vector_col="vec", k=3).select("qid", "_rank", "match_id")
        out = {
            "query": x[11],
            "join_queries": [x[i * 13] for i in range(6)],
            "near": [r["id"] for r in near.load(uri).collect()],
            "hybrid": [r["id"] for r in hybrid.load(uri).collect()],
            "join": sorted([r["qid"], r["_rank"], r["match_id"]] for r in joined.collect()),
        }
        with open(out_path, "w") as f:
            json.dump(out, f)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
