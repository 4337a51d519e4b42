"""A vector column's index built on a standalone Spark cluster, against Lance's IVF_PQ index of the
same vectors in the same run (issue "Vectors at lake scale", item 3).

    .venv/bin/pip install -e '.[bench]'      # pylance
    .venv/bin/python bench/cluster_vector_build.py [--vectors 1000000] [--dims 128] [--partitions 8]
        [--dir /tmp/indextables-cluster-build] [--keep]

The cluster is the tests' (tests/spark_servers.py: one Master and two Workers of one core each on
127.0.0.1, started from the installed pyspark), the driver session the tests' cluster jobs' one
(tests/cluster_jobs.py `session`, with the driver's status API on: tests/cluster_tasks.py). The
vectors (`--vectors` of `--dims` dimensions around 1,000 Gaussian centres, fixed seeds) are
generated in the executors, `--partitions` partitions of distinct sizes, and written through
`df.write.format("indextables")`:

- with the index: `indexing.vector.emb = "<dims>,cosine"` (the default kind, `ivf_pq`);
- stored only: `indexing.storeonly = emb` (the same write without the index).

After a warm-up write (the executors' Python workers start and import faiss and tantivy), the
stored-only write, then the indexed one, each as a job group. Lance: the same vectors, made again in
this process, `lance.write_dataset`, then `create_index("emb", "IVF_PQ", metric="cosine",
num_partitions=256, num_sub_vectors=dims / 8)` (as bench/vector_search_vs_lance.py), timed alone.

Printed: the cores and the load average (at the start, after the Spark writes, at the end); each
write's seconds; the build per million vectors — ours the indexed write minus the stored-only one
(wall seconds on the cluster: its two executors build in parallel), and the splits' own build
times added up (each split's `vectorIndexBuildMs` tag: time in its task) — against Lance's index
build per million, and their ratio; then per task (the driver's status API; each split matched to
its task by its row count): its executor, rows, run time and the split's build time, and per
executor the tasks and build seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the tests' cluster launch code

from cluster_jobs import session  # noqa: E402
from cluster_tasks import (  # noqa: E402
    GroupRun,
    distinct_sizes,
    generated_vectors,
    partition_vectors,
    run_group,
    split_builds,
    ui_conf,
)
from spark_servers import StandaloneCluster, spark_home  # noqa: E402

import indextables_spark as it  # noqa: E402
from indextables_spark.core.log.model.actions import AddFile  # noqa: E402


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f}"


def lance_build(sizes: list[int], dims: int, where: str) -> tuple[float, float]:
    """(write seconds, IVF_PQ index seconds) of Lance over the same vectors."""
    import lance
    import numpy as np
    import pyarrow as pa

    parts = [c for i in range(len(sizes)) for c in partition_vectors(sizes, i, dims)]
    ids = np.concatenate([p[0] for p in parts])
    x = np.concatenate([p[1] for p in parts])
    emb = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel(), pa.float32()), dims)
    table = pa.table({"id": ids, "emb": emb})
    t0 = time.perf_counter()
    lance.write_dataset(table, where)
    written = time.perf_counter() - t0
    ds = lance.dataset(where)
    partitions = max(1, min(256, len(ids) // 39))
    t0 = time.perf_counter()
    ds.create_index("emb", "IVF_PQ", metric="cosine", num_partitions=partitions, num_sub_vectors=max(1, dims // 8))
    return written, time.perf_counter() - t0


def written_adds(uri: str) -> list[AddFile]:
    log = it.IndexTable(uri).log
    return [a for a in log.read_actions(log.latest_version()) if isinstance(a, AddFile)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--partitions", type=int, default=8, help="tasks of each write (a split each)")
    ap.add_argument("--dir", default="/tmp/indextables-cluster-build")
    ap.add_argument("--keep", action="store_true", help="keep the tables and the cluster's logs")
    args = ap.parse_args()
    n, dims = args.vectors, args.dims
    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    (base / "driver-tmp").mkdir(parents=True)
    cores = os.cpu_count()
    print(
        f"machine: {cores} cores, shared by the cluster's two 1-core executors, its driver and master, and "
        f"Lance; load average at the start: {load()}"
    )
    sizes = distinct_sizes(n, args.partitions)
    # the driver's environment of the tests' cluster jobs (tests/cluster_launch.py driver_env)
    os.environ.update(
        SPARK_HOME=spark_home(),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        TMPDIR=str(base / "driver-tmp"),
    )
    cluster = StandaloneCluster(base / "cluster", workers=2, cores=1, memory="2g").start()
    try:
        conf = base / "conf.json"
        conf.write_text("{}")
        spark = session(cluster.master_url, str(conf), "vector-build-bench", ui_conf())
        spark.sparkContext.setLogLevel("ERROR")
        it.register(spark)
        vector = {"spark.indextables.indexing.vector.emb": f"{dims},cosine"}
        stored_only = {"spark.indextables.indexing.storeonly": "emb"}

        def write(uri: str, options: dict[str, str], df: Any) -> None:
            df.write.format("indextables").options(**options).mode("overwrite").save(uri)

        warm = generated_vectors(spark, distinct_sizes(4_000, 2), dims)
        run_group(spark, "warm-up", lambda: write(str(base / "warm"), vector, warm))
        df = generated_vectors(spark, sizes, dims)
        runs: dict[str, tuple[float, GroupRun]] = {}
        for name, options in (("stored", stored_only), ("indexed", vector)):
            runs[name] = run_group(spark, name, lambda name=name, options=options: write(str(base / name), options, df))
            print(f"write {name}: {runs[name][0]:.1f} s ({len(runs[name][1].tasks)} tasks), load {load()}")
        spark.stop()
    finally:
        cluster.stop()
    load_after_spark = load()
    lance_write, lance_index = lance_build(sizes, dims, str(base / "lance"))
    load_end = load()

    millions = n / 1e6
    (stored_s, _), (indexed_s, indexed) = runs["stored"], runs["indexed"]
    builds = split_builds(written_adds(str(base / "indexed")), indexed.tasks, sizes)
    ours = (indexed_s - stored_s) / millions
    tagged = sum(b.build_ms for b in builds) / 1000 / millions
    print(f"{n:,} vectors of {dims} dimensions, cosine; {args.partitions} partitions (a task and a split each)")
    print(
        f"build per million vectors: ours {ours:.1f} s on the cluster (write with the index {indexed_s / millions:.1f} s, "
        f"stored only {stored_s / millions:.1f} s); the splits' builds added up {tagged:.1f} s of task time; "
        f"Lance IVF_PQ index {lance_index / millions:.1f} s (its write {lance_write / millions:.1f} s); "
        f"ours / Lance {ours / (lance_index / millions):.2f}x"
    )
    print(f"load average after the Spark writes: {load_after_spark}; at the end: {load_end}")
    print("per task (the indexed write): partition, executor, rows, task s, its split's build s")
    for b in builds:
        t = b.task
        print(
            f"  {t.partition:3d}  executor {t.executor:>3s}  {b.rows:9,d}  {t.duration_ms / 1000:7.1f}  {b.build_ms / 1000:7.1f}"
        )
    for ex in sorted({b.task.executor for b in builds}):
        mine = [b for b in builds if b.task.executor == ex]
        print(
            f"  executor {ex}: {len(mine)} tasks, {sum(b.task.duration_ms for b in mine) / 1000:.1f} s of tasks, "
            f"{sum(b.build_ms for b in mine) / 1000:.1f} s of index builds"
        )
    summary = {
        "vectors": n,
        "dims": dims,
        "partitions": args.partitions,
        "cores": cores,
        "indexed_s": indexed_s,
        "stored_s": stored_s,
        "lance_write_s": lance_write,
        "lance_index_s": lance_index,
        "split_builds_ms": [b.build_ms for b in builds],
    }
    print(json.dumps(summary))
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
