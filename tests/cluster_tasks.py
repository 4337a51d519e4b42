"""Where a Spark write's work ran, seen from outside the product: the tasks of a job group as the
driver's status REST API lists them (executor, partition, launch and duration), and each split of
the write matched to the task that wrote it. Used by the `vector_build` cluster job
(tests/cluster_jobs.py, checked by tests/test_vector_cluster_build.py) and by
bench/cluster_vector_build.py.

Vectors are generated in the executors (`generated_vectors`): partition i of the DataFrame holds
`sizes[i]` rows, all sizes distinct, so a split's row count names the partition — and so the task —
that wrote it (one split per task: the partitions are far below the target split size). The
same vectors come out of `partition_vectors` anywhere (Lance's copy in the bench).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

CENTRES = 1000  # cluster centres of the generated vectors (as bench/vector_search_vs_lance.py's data)
CHUNK_ROWS = 10_000  # rows per generated Arrow batch


def ui_conf() -> dict[str, str]:
    """Spark conf of a driver whose status REST API the helpers read: its UI on a free port (it
    binds where SPARK_LOCAL_IP says: 127.0.0.1 for the tests' drivers, tests/cluster_launch.py)."""
    from spark_servers import free_port

    return {"spark.ui.enabled": "true", "spark.ui.port": str(free_port()), "spark.ui.showConsoleProgress": "false"}


def distinct_sizes(total: int, partitions: int) -> list[int]:
    """`partitions` distinct row counts adding up to `total` (each within `partitions` of the mean)."""
    mean = total // partitions
    rest = [mean - i for i in range(1, partitions)]
    return [total - sum(rest), *rest]


def partition_vectors(sizes: Sequence[int], i: int, dims: int, seed: int = 38) -> Iterator[tuple[Any, Any]]:
    """(ids, float32 vectors) of partition i in chunks: vectors around CENTRES Gaussian centres
    (the centres from `seed`, partition i's points from `seed + 1 + i`), ids numbering every
    partition's rows in order."""
    import numpy as np

    centres = np.random.default_rng(seed).standard_normal((CENTRES, dims)).astype(np.float32) * 3
    rng = np.random.default_rng(seed + 1 + i)
    first = sum(sizes[:i])
    for start in range(0, sizes[i], CHUNK_ROWS):
        n = min(CHUNK_ROWS, sizes[i] - start)
        x = centres[rng.integers(0, CENTRES, n)] + rng.standard_normal((n, dims)).astype(np.float32)
        yield np.arange(first + start, first + start + n, dtype=np.int64), x


def generated_vectors(spark: Any, sizes: Sequence[int], dims: int, seed: int = 38) -> Any:
    """A DataFrame `id long, emb array<float>` of len(sizes) partitions, partition i holding
    partition_vectors(sizes, i, ...), generated in the executors."""
    from pyspark import cloudpickle

    # the executors' Python cannot import this module (tests/ is not on their path): ship its code
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    sizes = list(sizes)

    def generate(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for b in batches:
            for i in b.column(0).to_pylist():
                for ids, x in partition_vectors(sizes, i, dims, seed):
                    emb = pa.ListArray.from_arrays(
                        pa.array(range(0, len(x) * dims + 1, dims), pa.int32()), pa.array(x.ravel(), pa.float32())
                    )
                    yield pa.RecordBatch.from_arrays([pa.array(ids), emb], ["id", "emb"])

    # one row a partition (its index): range splits evenly, so partition i holds the number i
    return spark.range(0, len(sizes), 1, len(sizes)).mapInArrow(generate, "id long, emb array<float>")


@dataclass(frozen=True)
class TaskRun:
    """One successful task of a stage, from the status API."""

    stage: int
    partition: int  # the task's index in its stage: the partition it wrote
    executor: str  # "driver" for a task run in the driver (local mode)
    host: str
    launch_ms: int
    duration_ms: int
    run_ms: int  # executorRunTime

    @property
    def end_ms(self) -> int:
        return self.launch_ms + self.duration_ms


@dataclass(frozen=True)
class GroupRun:
    """What a job group ran: its jobs, their stages, the stages' successful tasks."""

    jobs: list[int]
    stages: list[int]
    tasks: list[TaskRun]

    def to_json(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "stages": self.stages, "tasks": [t.__dict__ for t in self.tasks]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GroupRun:
        return cls(d["jobs"], d["stages"], [TaskRun(**t) for t in d["tasks"]])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def _epoch_ms(text: str) -> int:
    """The status API's time ("2026-12-03T11:18:40.123GMT") in ms since the epoch."""
    t = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=dt.timezone.utc)
    return round(t.timestamp() * 1000)


def group_run(spark: Any, group: str, timeout: float = 60.0) -> GroupRun:
    """The jobs of job group `group` (all finished), their stages and successful tasks, once the
    driver's status store has heard every task end (its listener runs behind the scheduler)."""
    sc = spark.sparkContext
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    deadline = time.monotonic() + timeout
    while True:
        jobs = [j for j in _get(f"{api}/jobs") if j.get("jobGroup") == group]
        done = all(j["status"] != "RUNNING" and j["numActiveTasks"] == 0 for j in jobs)
        if jobs and done:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the jobs of group {group!r} did not finish in {timeout} s: {jobs}")
        time.sleep(0.2)
    stages = sorted(s for j in jobs for s in j["stageIds"])
    tasks = []
    for sid in stages:
        for attempt in _get(f"{api}/stages/{sid}"):
            if attempt["status"] == "SKIPPED":
                continue
            listed = _get(f"{api}/stages/{sid}/{attempt['attemptId']}/taskList?length=100000")
            tasks += [
                TaskRun(
                    stage=sid,
                    partition=int(t["index"]),
                    executor=str(t["executorId"]),
                    host=str(t["host"]),
                    launch_ms=_epoch_ms(t["launchTime"]),
                    duration_ms=int(t["duration"]),
                    run_ms=int(t.get("taskMetrics", {}).get("executorRunTime", 0)),
                )
                for t in listed
                if t["status"] == "SUCCESS"
            ]
    return GroupRun(sorted(j["jobId"] for j in jobs), stages, tasks)


def run_group(spark: Any, group: str, action: Any) -> tuple[float, GroupRun]:
    """Run `action()` as job group `group`: (its wall seconds, what the group ran)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    t0 = time.perf_counter()
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return time.perf_counter() - t0, group_run(spark, group)


@dataclass(frozen=True)
class SplitBuild:
    """A split of a write, its vector index build (its add's `vectorIndexBuildMs` tag) and the task
    that wrote it."""

    path: str
    rows: int
    modified_ms: int  # the add's modificationTime: set by the writer after the split's upload
    build_ms: int
    task: TaskRun


def split_builds(adds: Sequence[Any], tasks: Sequence[TaskRun], sizes: Sequence[int]) -> list[SplitBuild]:
    """Each split of a write (AddFile actions) with the task that wrote it: the one of the
    partition whose size is its row count (distinct_sizes)."""
    by_partition = {t.partition: t for t in tasks}
    out = []
    for a in adds:
        task = by_partition[list(sizes).index(a.num_records)]
        build = int((a.tags or {}).get("vectorIndexBuildMs", -1))
        out.append(SplitBuild(a.path, a.num_records, a.modification_time, build, task))
    return sorted(out, key=lambda s: s.task.partition)
