"""What a selective query costs per split: one Spark task's read of its splits in-process, and the
query through Spark, on an existing table (e.g. search_vs_parquet.py's 512-split tables).

    .venv/bin/python bench/task_overhead.py --table /tmp/b1m512/it [--query body:zephyr] [--runs 8] [--version N]

To compare two versions of the code on the same table, run it again with
`PYTHONPATH=<a git worktree of the other commit>/src`.

Prints:
- the index alone: the Spark-free count of the query over every split, the index's own share of
  any read of those rows; and the Spark-free `IndexTable.search` returning them (every column);
- in-process: the data source planned as Spark's planner worker plans it (schema, reader,
  partitions), then the first task's `read()`, median of --runs after a warm-up, and per split;
- through Spark (local[2]): `count()` and `select("id").collect()` medians after warming every
  Python worker, and a trivial Python data source's `count()` / `collect()` (2 rows, 2 tasks) as
  the floor of any read through the Python Data Source API.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time

from bench_common import local_spark, median_time


def index_alone(path: str, query: str, runs: int, version: int | None) -> None:
    import indextables_spark as it
    from indextables_spark.core.split.read.search import count_matches

    table = it.IndexTable(path)
    snap = table.snapshot(version)
    t = median_time(lambda: count_matches(table.storage, snap, snap.files, query, table.options), runs)
    n = count_matches(table.storage, snap, snap.files, query, table.options)
    print(f"index alone: {n:,} matches in {len(snap.files)} splits: {t * 1000:.1f} ms")
    rows = table.search(query, version=version)  # the rows too: this process opens every split once
    t = median_time(lambda: table.search(query, version=version), runs)
    print(f"Spark-free IndexTable.search (rows of every column): {rows.num_rows:,} rows in {t * 1000:.1f} ms")


def in_process(path: str, query: str, runs: int, version: int | None) -> None:
    from pyspark.sql.types import StructType, _parse_datatype_string

    from indextables_spark.spark.datasource import IndexTablesDataSource

    options = {"path": path, "query": query} | ({"versionAsOf": str(version)} if version is not None else {})
    source = IndexTablesDataSource(options)
    schema = source.schema()
    if not isinstance(schema, StructType):
        schema = _parse_datatype_string(schema)
    planned = source.reader(schema)
    parts = planned.partitions()
    # what an executor gets: the pickled reader and one partition
    reader, part = pickle.loads(pickle.dumps(planned)), pickle.loads(pickle.dumps(parts[0]))
    n_splits = len(part.files)

    def task() -> int:
        return sum(b.num_rows for b in reader.read(part))

    rows = task()  # opens the splits (a warm worker has them open)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        task()
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    print(
        f"in-process task: {n_splits} splits, {rows:,} rows: {t * 1000:.1f} ms "
        f"({t * 1e6 / max(1, n_splits):.0f} us per split); task partition {len(pickle.dumps(parts[0])):,} bytes pickled"
    )


def through_spark(path: str, query: str, runs: int, version: int | None) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    spark = local_spark()
    reader = spark.read.format("indextables").option("query", query)
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    for _ in range(2 * spark.sparkContext.defaultParallelism):  # every worker opens every split
        df.count()
    count = median_time(df.count, runs)
    collect = median_time(lambda: df.select("id").collect(), runs)

    class _Two(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_two_rows"

        def schema(self) -> str:
            return "id long"

        def reader(self, schema):
            return _TwoReader()

    class _TwoReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition):
            yield (partition.value,)

    spark.dataSource.register(_Two)
    two = spark.read.format("bench_two_rows").load()
    floor_count = median_time(two.count, runs)
    floor_collect = median_time(lambda: two.select("id").collect(), runs)
    print(f"through Spark: count() {count:.3f} s, collect() {collect:.3f} s")
    print(f"any Python data source (2 rows, 2 tasks): count() {floor_count:.3f} s, collect() {floor_collect:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", required=True)
    ap.add_argument("--query", default="body:zephyr")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--version", type=int, default=None, help="time travel (e.g. 0: a table before MERGE SPLITS)")
    args = ap.parse_args()
    index_alone(args.table, args.query, args.runs, args.version)
    in_process(args.table, args.query, args.runs, args.version)
    through_spark(args.table, args.query, args.runs, args.version)


if __name__ == "__main__":
    main()
