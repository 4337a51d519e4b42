"""Launching driver programs on a standalone cluster (tests/spark_servers.py starts it), for every
cluster test: a job of tests/cluster_jobs.py (`run_job`), a spark-submit command (`spark_submit`),
or any driver process (`run`: its own process group, killed on timeout or when the test run is
interrupted, so no driver outlives its test)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster_jobs import CLUSTER_CONF
from spark_servers import die_with_parent, log_tail, spark_home

ROOT = Path(__file__).resolve().parent.parent
JOBS = Path(__file__).with_name("cluster_jobs.py")
JOB_TIMEOUT = 900


def driver_env(tmp: Path) -> dict[str, str]:
    """A driver process's environment: the venv's Python for the workers, its own temp dir."""
    (tmp / "driver-tmp").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SPARK_HOME": spark_home(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TMPDIR": str(tmp / "driver-tmp"),
    }


def run(cmd: list[str], env: dict[str, str], log: Path, cwd: Path = ROOT) -> tuple[int, str]:
    """Run a driver process (own process group, killed on timeout); (exit code, stdout)."""
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(cwd),
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        try:
            out, _ = proc.communicate(timeout=JOB_TIMEOUT)
        except BaseException as e:  # timeout, or the test run interrupted: no orphan driver
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                pytest.fail(f"{cmd[:3]} did not finish in {JOB_TIMEOUT} s; its log:\n{log_tail(log)}")
            raise
    return proc.returncode, out.decode(errors="replace")


def run_job(job: str, master_url: str, uri: str, conf: dict[str, str], tmp: Path, *args: str) -> dict[str, Any]:
    """Run `job` of tests/cluster_jobs.py on the cluster at `master_url` against the table at `uri`,
    with `conf` (`spark.indextables.*` only: the job's session conf); what the job wrote (OUT_JSON).
    A failed job fails the test with its output and the tail of its log (tmp/driver.log)."""
    conf_file, out_file, log = tmp / "conf.json", tmp / "out.json", tmp / "driver.log"
    conf_file.write_text(json.dumps(conf))
    cmd = [sys.executable, str(JOBS), job, master_url, uri, str(conf_file), str(out_file), *args]
    code, out = run(cmd, driver_env(tmp), log)
    assert code == 0, f"{job} job exited with {code}; stdout:\n{out}\nstderr:\n{log_tail(log)}"
    result: dict[str, Any] = json.loads(out_file.read_text())
    return result


def spark_submit(
    master_url: str, conf: dict[str, str], script: Path, *args: str, archives: str | None = None
) -> list[str]:
    """The spark-submit command running `script` with `args` on the cluster: CLUSTER_CONF, then
    `conf`, as --conf; `archives`: --archives."""
    cmd = [f"{spark_home()}/bin/spark-submit", "--master", master_url]
    if archives is not None:
        cmd += ["--archives", archives]
    for k, v in {**CLUSTER_CONF, **conf}.items():
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, str(script), *args]
