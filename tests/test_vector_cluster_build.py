"""On the tests' standalone cluster (two 1-core workers), a Spark write builds each split's vector
index in the executor task that writes the split: not on the driver, not in a later job (issue
"Vectors at lake scale", item 3). Checked from outside the product, with what Spark and the table
already record:

- Spark's status API (tests/cluster_tasks.py): the write is one job of one stage, a task per
  partition, run by the executors, as the same write with the column stored only;
- the table's log: each split's add carries its build time (tag `vectorIndexBuildMs`, set by the
  writer) and its modificationTime (set after the split's upload); the split's row count names its
  partition, so its task. The build ended before the upload, so [modificationTime − build,
  modificationTime] lies within that task's run;
- each split's footer holds the index; the commit (made by the driver after the tasks) adds up the
  builds, and the store-only write has neither the index nor the tag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cluster_jobs import DIMS
from cluster_launch import run_job
from cluster_tasks import GroupRun, split_builds

import indextables_spark as it
from indextables_spark.core.log.model.actions import AddFile, CommitInfo
from indextables_spark.core.split.format.bundle import read_footer

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _written(uri: str) -> tuple[list[AddFile], CommitInfo]:
    """The adds and the commitInfo of the table's latest version (the write)."""
    log = it.IndexTable(uri).log
    actions = log.read_actions(log.latest_version())
    commit = next(a for a in actions if isinstance(a, CommitInfo))
    return [a for a in actions if isinstance(a, AddFile)], commit


def _vector_files(uri: str, add: AddFile) -> list[str]:
    footer = read_footer(str(Path(uri) / add.path), add.path)
    return sorted(b.name for b in footer.files if b.name.startswith("vectors."))


def test_each_split_index_is_built_by_the_task_writing_it(standalone_cluster: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "tables")
    result = run_job("vector_build", standalone_cluster.master_url, uri, {}, tmp_path)
    sizes = result["sizes"]
    indexed, stored = GroupRun.from_json(result["indexed"]), GroupRun.from_json(result["stored"])

    # one job of one stage, a task per partition, on both executors; the index adds no job, stage or task
    assert len(indexed.jobs) == 1 and len(indexed.stages) == 1, result["indexed"]
    assert sorted(t.partition for t in indexed.tasks) == list(range(len(sizes)))
    executors = {t.executor for t in indexed.tasks}
    assert "driver" not in executors and len(executors) == 2, indexed.tasks
    assert (len(stored.jobs), len(stored.stages), len(stored.tasks)) == (1, 1, len(sizes))

    adds, commit = _written(uri + "/indexed")
    builds = split_builds(adds, indexed.tasks, sizes)
    assert [b.rows for b in builds] == sizes  # a split a task
    for b in builds:
        assert b.build_ms > 0, b
        # built, then bundled and uploaded, within the run of the task of its partition
        assert b.task.launch_ms <= b.modified_ms - b.build_ms and b.modified_ms <= b.task.end_ms, b
        assert _vector_files(uri + "/indexed", next(a for a in adds if a.path == b.path)) == [
            "vectors.0.f32",
            "vectors.0.faiss",
        ]
    # the driver commits after the tasks, and only adds up what they report
    assert commit.timestamp >= max(t.end_ms for t in indexed.tasks)
    params = commit.operation_parameters
    assert params["vectorIndexBuildMs"] == sum(b.build_ms for b in builds)
    assert params["numVectorIndexedSplits"] == len(sizes)
    table = it.IndexTable(uri + "/indexed")
    assert table.count() == sum(sizes)
    near = table.search(vector=[0.0] * DIMS, limit=3, columns=["id"])
    assert near.num_rows == 3

    plain, plain_commit = _written(uri + "/stored")
    assert sorted(a.num_records for a in plain) == sorted(sizes)
    assert all(not a.tags for a in plain) and "vectorIndexBuildMs" not in plain_commit.operation_parameters
    assert all(_vector_files(uri + "/stored", a) == [] for a in plain)
