"""The Spark Connect harness works: a real Connect server (tests/spark_servers.py) and a client
session on it run a query and a Python UDTF registered from the client."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_connect_session_runs_queries_and_a_client_registered_udtf(connect_spark, spark_connect_server):
    spark = connect_spark
    # a Connect client, not a classic session (no JVM in this process)
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    assert spark_connect_server.process.alive()

    assert spark.range(5).count() == 5
    assert [r.id for r in spark.range(3, 9, 2).collect()] == [3, 5, 7]

    from pyspark.sql.functions import udtf

    @udtf(returnType="n: int, square: int, word: string")
    class Squares:
        def eval(self, start: int, stop: int):
            for n in range(start, stop):
                yield n, n * n, f"w{n}"

    spark.udtf.register("it_harness_squares", Squares)
    rows = spark.sql("SELECT * FROM it_harness_squares(2, 6) ORDER BY n").collect()
    assert [(r.n, r.square, r.word) for r in rows] == [(n, n * n, f"w{n}") for n in range(2, 6)]

    # the UDTF ran in the server's Python workers, with the server's (venv) Python
    @udtf(returnType="exe: string")
    class WhichPython:
        def eval(self):
            import sys

            yield (sys.executable,)

    spark.udtf.register("it_harness_python", WhichPython)
    (exe,) = spark.sql("SELECT * FROM it_harness_python()").first()
    import sys

    assert exe == sys.executable
