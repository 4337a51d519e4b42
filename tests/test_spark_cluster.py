"""indextables on a real standalone cluster (one Master, two 1-core Workers: `standalone_cluster`)
with the table on S3 (moto). Executors are separate JVMs with their own Python workers, temp dirs
and split caches: whatever they need (credentials, endpoint) must travel in options and conf.

1. examples/spark_submit_job.py through `spark-submit --master spark://…` with the credentials
   as `--conf spark.indextables.*`; its printed count equals the Spark-free count, and both
   workers ran tasks.
2. A driver-side session on the cluster (tests/cluster_jobs.py's `write` job in its own process)
   with the credentials only as `spark.indextables.*` session conf: write, read back row by row.
3. BUILD INDEXTABLES COMPANION as a cluster job (its `companion` job), searched through the cluster.

The drivers are launched by tests/cluster_launch.py.
"""

from __future__ import annotations

import re
import sys
import time

import cluster_jobs as job
import pytest
from cluster_launch import ROOT, driver_env, run, run_job, spark_submit
from spark_servers import log_tail

import indextables_spark as it

pytestmark = [pytest.mark.spark, pytest.mark.cloud, pytest.mark.slow]


def apps_since(cluster, t0_ms: int) -> set[str]:
    """Ids of the applications the master has seen start since t0_ms."""
    state = cluster.state()
    return {
        a["id"] for a in state.get("completedapps", []) + state.get("activeapps", []) if a.get("starttime", 0) >= t0_ms
    }


def executor_stderr(worker, app_id: str) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((worker.work_dir / app_id).glob("*/stderr")))


def test_spark_submit_example_on_the_cluster(standalone_cluster, s3_uri, s3_options, tmp_path):
    cluster, uri = standalone_cluster, s3_uri
    cache_before = {w.index: {p for p in w.cache_dir.rglob("*") if p.is_file()} for w in cluster.worker_list}
    conf = {
        **s3_options,  # credentials, endpoint, path style, region: --conf spark.indextables.*
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    cmd = spark_submit(cluster.master_url, conf, ROOT / "examples" / "spark_submit_job.py", uri)

    t0_ms = int(time.time() * 1000) - 1000
    started = time.monotonic()
    code, out = run(cmd, driver_env(tmp_path), tmp_path / "spark-submit.log")
    elapsed = time.monotonic() - started
    assert code == 0, (
        f"spark-submit exited with {code}; stdout:\n{out}\nstderr:\n{log_tail(tmp_path / 'spark-submit.log')}"
    )
    m = re.search(r"version (\d+): (\d+) documents mention 'nebula'", out)
    assert m, f"no result line in the job's output:\n{out}"
    version, printed = int(m.group(1)), int(m.group(2))

    table = it.IndexTable(uri, s3_options)
    expected = table.count(query="body:nebula")
    assert printed == expected and expected > 0
    assert version == table.version() == 0
    assert table.count() == 20_000
    assert table.snapshot().partition_columns == ["region"]
    assert len({f.partition_values["region"] for f in table.snapshot().files}) > 1

    # both workers ran tasks of this application
    (app_id,) = apps_since(cluster, t0_ms)
    for w in cluster.worker_list:
        log = executor_stderr(w, app_id)
        assert re.search(r"Running task \S+ in stage", log), (
            f"worker {w.index} ran no task of {app_id} (executor logs under {w.work_dir / app_id})"
        )
    # the executors' split caches are per worker ($TMPDIR/indextables-cache of each worker)
    new_cache = {
        w.index: {p for p in w.cache_dir.rglob("*") if p.is_file()} - cache_before[w.index] for w in cluster.worker_list
    }
    assert any(new_cache.values()), "no split was cached by any executor"
    print(
        f"spark-submit on the cluster: {elapsed:.1f} s; cached files per worker: "
        f"{ {i: len(v) for i, v in new_cache.items()} }"
    )


def test_driver_session_on_the_cluster_with_session_conf_credentials(standalone_cluster, s3_uri, s3_options, tmp_path):
    cluster, uri = standalone_cluster, s3_uri
    t0_ms = int(time.time() * 1000) - 1000
    result = run_job("write", cluster.master_url, uri, s3_options, tmp_path)  # all spark.indextables.*
    assert result["master"] == cluster.master_url
    assert len(apps_since(cluster, t0_ms)) == 1

    want = [job.to_json_row(r) for r in job.make_rows(0, job.N_ROWS)]
    got = sorted(result["rows"], key=lambda r: r[0])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w, f"row {w[0]}: read {g}, wrote {w}"

    views, body = job.COLUMNS.index("views"), job.COLUMNS.index("body")
    want_hits = [r for r in want if "alpha" in r[body].split() and r[views] > 300]
    assert 0 < len(want_hits) < len(want)
    assert sorted(result["hits"], key=lambda r: r[0]) == want_hits

    table = it.IndexTable(uri, s3_options)  # independently, without Spark
    assert table.count() == job.N_ROWS and table.count(query="body:alpha") == sum(
        "alpha" in r[body].split() for r in want
    )
    assert table.snapshot().partition_columns == ["region"]


def test_companion_build_and_search_on_the_cluster(standalone_cluster, s3_uri, s3_options, tmp_path):
    """BUILD INDEXTABLES COMPANION as a cluster job over a Delta table on S3, searched through the cluster."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from indextables_spark.ops.companion.sources import storage_options_for_deltalake

    cluster, source = standalone_cluster, s3_uri + "/delta"
    want = [job.to_json_row(r) for r in job.make_rows(0, job.N_ROWS)]
    raw = job.make_rows(0, job.N_ROWS)
    data = pa.table({c: [r[i] for r in raw] for i, c in enumerate(job.COLUMNS)})
    write_deltalake(
        source, data, partition_by=["region"], storage_options=storage_options_for_deltalake(source, s3_options)
    )
    result = run_job("companion", cluster.master_url, source, s3_options, tmp_path)
    assert result["build"]["rows_indexed"] == job.N_ROWS
    assert sorted(result["rows"], key=lambda r: r[0]) == want
    views, body = job.COLUMNS.index("views"), job.COLUMNS.index("body")
    want_hits = [r for r in want if "alpha" in r[body].split() and r[views] > 300]
    assert 0 < len(want_hits) and sorted(result["hits"], key=lambda r: r[0]) == want_hits
