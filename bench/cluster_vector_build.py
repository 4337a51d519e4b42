"""A vector column's index built on a standalone Spark cluster, against Lance's IVF_PQ index of the
same vectors in the same run (issue "Vectors at lake scale", item 3).

    .venv/bin/pip install -e '.[bench]'      # pylance
    .venv/bin/python bench/cluster_vector_build.py [--vectors 1000000] [--dims 128] [--partitions 8]
        [--runs 3] [--dir /tmp/indextables-cluster-build] [--keep]

The cluster is the tests' (tests/spark_servers.py: one Master and two Workers of one core each on
127.0.0.1, started from the installed pyspark), the driver session the tests' cluster jobs' one
(tests/cluster_jobs.py `session`, with the driver's status API on: tests/cluster_tasks.py). The
machine has 2 cores: the two executors, the driver, the master and Lance share them. The vectors
(`--vectors` of `--dims` dimensions around 1,000 Gaussian centres, fixed seeds) are generated in
the executors, `--partitions` partitions of distinct sizes, and written through
`df.write.format("indextables")`:

- with the index: `indexing.vector.emb = "<dims>,cosine"` (the default kind, `ivf_pq`);
- stored only: `indexing.storeonly = emb` (the same write without the index).

After a warm-up write (the executors' Python workers start and import faiss and tantivy), `--runs`
rounds of the stored-only write then the indexed one, each a job group of its own. Then Lance, the
cluster stopped: the same vectors, made again in this process, `lance.write_dataset`, and `--runs`
times `create_index("emb", "IVF_PQ", metric="cosine", num_partitions=256, num_sub_vectors=dims /
8)` (as bench/vector_search_vs_lance.py), timed alone.

Printed: the cores and the load average (at the start, after each step, at the end); each write's
seconds; the build per million vectors (medians of the rounds) — ours the indexed write minus the
stored-only one (wall seconds on the cluster: its two executors build in parallel) — against
Lance's index build, and their ratio; the splits' own build times (each split's
`vectorIndexBuildMs` tag: time in its task) added up per executor, against Lance's; then per task
of the last indexed write (the driver's status API; each split matched to its task by its row
count): its executor, rows, run time and the split's build time, and per executor its tasks and
build seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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
    SplitBuild,
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


def lance_build(sizes: list[int], dims: int, where: str, runs: int) -> tuple[float, list[float]]:
    """(write seconds, IVF_PQ index seconds of each run) of Lance over the same vectors."""
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
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ds.create_index(
            "emb", "IVF_PQ", metric="cosine", num_partitions=partitions, num_sub_vectors=max(1, dims // 8), replace=True
        )
        times.append(time.perf_counter() - t0)
        print(f"Lance IVF_PQ index: {times[-1]:.1f} s, load {load()}")
    return written, times


def written_adds(uri: str) -> list[AddFile]:
    log = it.IndexTable(uri).log
    return [a for a in log.read_actions(log.latest_version()) if isinstance(a, AddFile)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--partitions", type=int, default=8, help="tasks of each write (a split each)")
    ap.add_argument("--dir", default="/tmp/indextables-cluster-build")
    ap.add_argument("--runs", type=int, default=3, help="rounds of the two writes, and Lance's index builds")
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
        runs: dict[str, list[tuple[float, GroupRun, list[SplitBuild]]]] = {"stored": [], "indexed": []}
        for r in range(args.runs):  # the two writes alternate: a change of load slows both alike
            for name, options in (("stored", stored_only), ("indexed", vector)):
                uri = str(base / f"{name}-{r}")
                seconds, group = run_group(spark, f"{name}-{r}", lambda uri=uri, o=options: write(uri, o, df))
                builds = split_builds(written_adds(uri), group.tasks, sizes) if name == "indexed" else []
                runs[name].append((seconds, group, builds))
                print(f"round {r + 1}, write {name}: {seconds:.1f} s ({len(group.tasks)} tasks), load {load()}")
                if not args.keep:
                    shutil.rmtree(uri)
        spark.stop()
    finally:
        cluster.stop()
    load_after_spark = load()
    lance_write, lance_runs = lance_build(sizes, dims, str(base / "lance"), args.runs)
    load_end = load()

    millions = n / 1e6
    stored_s = statistics.median(t for t, _, _ in runs["stored"])
    indexed_s = statistics.median(t for t, _, _ in runs["indexed"])
    lance_index = statistics.median(lance_runs) / millions
    ours = (indexed_s - stored_s) / millions
    # the builds' task time per executor: what each executor spent building, the two in parallel
    executors = len({t.executor for _, g, _ in runs["indexed"] for t in g.tasks})
    per_executor = statistics.median(sum(b.build_ms for b in bs) for _, _, bs in runs["indexed"]) / 1000
    per_executor /= executors * millions
    print(
        f"{n:,} vectors of {dims} dimensions, cosine; {args.partitions} partitions (a task and a split each); "
        f"medians of {args.runs} rounds"
    )
    print(
        f"build per million vectors: ours {ours:.1f} s on the cluster (write with the index "
        f"{indexed_s / millions:.1f} s, stored only {stored_s / millions:.1f} s); Lance IVF_PQ index "
        f"{lance_index:.1f} s (its write {lance_write / millions:.1f} s); ours / Lance {ours / lance_index:.2f}x"
    )
    print(
        f"the splits' own build times (their vectorIndexBuildMs) per executor: {per_executor:.1f} s per million "
        f"vectors over {executors} executors; / Lance {per_executor / lance_index:.2f}x"
    )
    print(f"load average after the Spark writes: {load_after_spark}; at the end: {load_end}")
    builds = runs["indexed"][-1][2]
    print("per task (the last indexed write): partition, executor, rows, task s, its split's build s")
    for b in builds:
        t = b.task
        print(
            f"  {t.partition:3d}  executor {t.executor:>3s}  {b.rows:9,d}  {t.duration_ms / 1000:7.1f}  "
            f"{b.build_ms / 1000:7.1f}"
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
        "indexed_s": [t for t, _, _ in runs["indexed"]],
        "stored_s": [t for t, _, _ in runs["stored"]],
        "lance_write_s": lance_write,
        "lance_index_s": lance_runs,
        "split_builds_ms": [[b.build_ms for b in bs] for _, _, bs in runs["indexed"]],
    }
    print(json.dumps(summary))
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
