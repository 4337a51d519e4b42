"""indextables on a cluster whose workers' Python does not have the package: the package shipped
as a packed environment (docs/guide/deployment.md, "Clusters whose workers do not have the package").

One archive, one cluster, one spark-submit job and one Connect server:

- `packed_env` (module): a clean venv (`python -m venv`) with the package's wheel (built from this
  tree) installed with constraints.txt, packed by venv-pack into env.tar.gz without pyspark (the
  cluster's own pyspark is on the executors' PYTHONPATH); a bare venv for the cluster (checked:
  `import indextables_spark`, pyarrow, tantivy fail there); the driver's Python, a wrapper of this
  venv's Python that exits 97 unless INDEXTABLES_TEST_DRIVER_HOST is set (only the driver's
  processes have it), so a task that ran the driver's Python path on an executor fails as it
  would on a real cluster, where that path does not exist.
- `bare_cluster` (module): a standalone cluster (Master + two 1-core Workers) whose environment's
  Python is the bare venv.
- test_spark_submit_with_archives: `spark-submit --archives env.tar.gz#environment` in client mode
  (PYSPARK_PYTHON=./environment/bin/python, PYSPARK_DRIVER_PYTHON the driver's,
  spark.sql.execution.pyspark.python=./environment/bin/python) running tests/packed_env_job.py:
  the executors' Python, the auto-registered source, then write, search and read back on local
  disk and S3 (moto).
- test_connect_server_with_archives: a Connect server on that cluster whose driver's Python has
  the package (Python data sources are planned there) and whose workers' does not; its own
  `spark.archives` does not reach a session's Python workers (checked), a client's
  `addArtifacts(env.tar.gz#environment, archive=True)` does: the same workload.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_jobs import make_rows, to_json_row
from cluster_launch import run, spark_submit
from spark_servers import ConnectServer, ServerStartError, StandaloneCluster, log_tail, spark_home

pytestmark = [pytest.mark.spark, pytest.mark.cloud, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parent.parent
JOB = Path(__file__).with_name("packed_env_job.py")
N_ROWS = 300  # packed_env_job.N_ROWS
ENV_PYTHON = "./environment/bin/python"
DRIVER_GUARD = "INDEXTABLES_TEST_DRIVER_HOST"
PIP_QUIET = ["--quiet", "--disable-pip-version-check"]


def sh(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert p.returncode == 0, f"{cmd} exited with {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


class PackedEnv:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.archive = base / "env.tar.gz"
        self.bare_python = str(base / "bare" / "bin" / "python")
        self.driver_python = str(base / "driver-python")
        self.timings: dict[str, float] = {}


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory) -> PackedEnv:
    env = PackedEnv(tmp_path_factory.mktemp("packed-env"))
    import pyspark

    t0 = time.monotonic()
    wheels = env.base / "wheel"
    sh([sys.executable, "-m", "build", "--wheel", "--outdir", str(wheels), str(ROOT)])
    (wheel,) = wheels.glob("indextables_spark-*.whl")
    t1 = time.monotonic()
    clean = env.base / "clean"
    sh([sys.executable, "-m", "venv", str(clean)])
    pins = env.base / "pins.txt"  # the pyspark this venv has: from pip's cache, not a download
    pins.write_text(f"pyspark=={pyspark.__version__}\n")
    sh(
        [str(clean / "bin" / "python"), "-m", "pip", "install", *PIP_QUIET, str(wheel)]
        + ["-c", str(ROOT / "constraints.txt"), "-c", str(pins)]
    )
    t2 = time.monotonic()
    # pyspark is a dependency of the package, but every Spark puts its own on the executors'
    # PYTHONPATH (before site-packages): its 400 MB would travel for nothing
    sh(
        [sys.executable, "-m", "venv_pack", "-p", str(clean), "-o", str(env.archive), "-q"]
        + ["--exclude", "lib/python*/site-packages/pyspark/*"]
    )
    t3 = time.monotonic()
    env.timings = {"wheel_s": t1 - t0, "venv_s": t2 - t1, "pack_s": t3 - t2}

    sh([sys.executable, "-m", "venv", "--without-pip", str(env.base / "bare")])
    Path(env.driver_python).write_text(
        "#!/bin/sh\n"
        "# The driver's Python: it exists only where the driver runs (see tests/test_packed_env.py).\n"
        f'if [ -z "${DRIVER_GUARD}" ]; then echo "the driver\'s Python ($0) run outside the driver" >&2; exit 97; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    os.chmod(env.driver_python, 0o755)
    print(
        f"packed env: {env.archive.stat().st_size / 1e6:.1f} MB; wheel {env.timings['wheel_s']:.0f} s, "
        f"venv {env.timings['venv_s']:.0f} s, venv-pack {env.timings['pack_s']:.0f} s"
    )
    return env


@pytest.fixture(scope="module")
def bare_cluster(packed_env, tmp_path_factory):
    cluster = StandaloneCluster(
        tmp_path_factory.mktemp("bare-cluster"), workers=2, cores=1, memory="2g", python=packed_env.bare_python
    )
    try:
        cluster.start()
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    yield cluster
    cluster.stop()


def test_the_workers_python_lacks_the_package(packed_env):
    probe = "import importlib,json\nout={}\nfor m in ('indextables_spark','pyarrow','tantivy','pyspark'):\n"
    probe += "    try: importlib.import_module(m); out[m]='imported'\n"
    probe += "    except ImportError as e: out[m]=type(e).__name__\nprint(json.dumps(out))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    got = json.loads(sh([packed_env.bare_python, "-c", probe], env=env).stdout)
    assert got == dict.fromkeys(("indextables_spark", "pyarrow", "tantivy", "pyspark"), "ModuleNotFoundError")
    listing = sh(["tar", "tzf", str(packed_env.archive)]).stdout.splitlines()
    assert "bin/python" in listing and any("site-packages/indextables_spark/__init__.py" in n for n in listing)
    assert any("site-packages/tantivy/" in n for n in listing) and any("site-packages/pyarrow/" in n for n in listing)
    assert not any("site-packages/pyspark/" in n for n in listing)


def expected(rows: list[list]) -> dict:
    """What `packed_env_job.workload` should find in make_rows(0, N_ROWS)."""
    col = {c: i for i, c in enumerate(("id", "body", "views", "score", "flag", "day", "ts", "tags", "region"))}

    def has(r, word):
        return word in r[col["body"]].split()

    def agg(rs):
        out: dict = {}
        for r in rs:
            n, v = out.get(r[col["region"]], [0, 0])
            out[r[col["region"]]] = [n + 1, v + r[col["views"]]]
        return out

    hits = sorted(r[0] for r in rows if has(r, "alpha") and r[col["views"]] > 300)
    return {
        "rows": rows,
        "hits": hits,
        "columns": sorted(r[0] for r in rows if has(r, "charlie") and r[col["region"]] == "eu"),
        "sql_hits": hits,
        "sql_agg": agg(r for r in rows if has(r, "bravo")),
        "df_agg": agg(r for r in rows if has(r, "delta") and r[col["views"]] < 700),
    }


def check_workload(result: dict, name: str) -> None:
    assert name in result, f"{name} failed: {result.get(name + '_error')}\n{result.get(name + '_traceback')}"
    got = dict(result[name])
    got["rows"] = sorted(got["rows"], key=lambda r: r[0])
    want = expected([to_json_row(r) for r in make_rows(0, N_ROWS)])
    assert all(want[k] for k in want), "every check selects some rows"
    for key in want:
        assert got[key] == want[key], f"{name}: {key} differs"


def check_executors(probes: list[dict], env_dir: str = "environment") -> None:
    assert len(probes) == 2, probes
    for p in probes:
        assert p["executable"].endswith(f"{env_dir}/bin/python"), p
        for module in ("indextables_spark", "pyarrow", "tantivy"):
            assert p[module].startswith(p["prefix"] + "/lib/"), (module, p)


def test_spark_submit_with_archives(packed_env, bare_cluster, s3_uri, s3_options, tmp_path):
    conf = {
        "spark.sql.execution.pyspark.python": ENV_PYTHON,  # the executors' Python for SQL's Python runners
        "spark.task.maxFailures": "1",  # the failure the job expects fails at once
    }
    conf_file, out_file = tmp_path / "conf.json", tmp_path / "out.json"
    conf_file.write_text(json.dumps(s3_options))
    cmd = spark_submit(
        bare_cluster.master_url,
        conf,
        JOB,
        *("submit", str(out_file), str(tmp_path / "tables"), s3_uri, str(conf_file)),
        archives=f"{packed_env.archive}#environment",
    )
    (tmp_path / "driver-tmp").mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "SPARK_HOME": spark_home(),
        # the driver's Python (client mode): the data source is planned there; the executors get
        # ./environment/bin/python from spark.sql.execution.pyspark.python
        "PYSPARK_DRIVER_PYTHON": packed_env.driver_python,
        "PYSPARK_PYTHON": ENV_PYTHON,
        DRIVER_GUARD: "1",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TMPDIR": str(tmp_path / "driver-tmp"),
    }
    started = time.monotonic()
    code, out = run(cmd, env, tmp_path / "spark-submit.log", cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert code == 0, (
        f"spark-submit exited with {code}; stdout:\n{out}\nlog:\n{log_tail(tmp_path / 'spark-submit.log')}"
    )
    result = json.loads(out_file.read_text())

    # the driver: its own Python; the executors: the archive's, unpacked in their working directory
    assert result["driver_executable"] == sys.executable
    assert result["driver_pyspark_python"] == ENV_PYTHON
    assert "executors" in result, result.get("executors_error")
    check_executors(result["executors"])
    for p in result["executors"]:
        assert p["prefix"] == p["cwd"] + "/environment" and str(bare_cluster.base_dir) in p["cwd"], p

    # the source Spark registered by itself works; without spark.sql.execution.pyspark.python its
    # tasks run the driver's Python path (the wrapper refuses, as a missing path would)
    assert result.get("auto") == 20, result.get("auto_error")
    assert "auto_unset_error" in result, "a task ran the driver's Python path on an executor, and it worked"
    executor_logs = "".join(p.read_text(errors="replace") for w in bare_cluster.worker_list for p in w.executor_logs())
    assert "run outside the driver" in executor_logs, result["auto_unset_error"]

    # it.register(spark) planned with the driver's Python (spark/register.py) and left sc.pythonExec as it was
    assert result.get("python_exec_restored") is True, result
    check_workload(result, "local")
    check_workload(result, "s3")
    print(f"spark-submit with the packed environment: {elapsed:.1f} s")


def test_connect_server_with_archives(packed_env, bare_cluster, s3_uri, s3_options, tmp_path):
    server = ConnectServer(
        tmp_path / "connect",
        master=bare_cluster.master_url,
        extra_conf={
            "spark.archives": f"{packed_env.archive}#environment",
            "spark.sql.execution.pyspark.python": ENV_PYTHON,
            "spark.pyspark.python": packed_env.driver_python,
            "spark.pyspark.driver.python": packed_env.driver_python,
            "spark.executor.memory": "1g",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        },
        # the server's driver plans Python data sources with PYSPARK_PYTHON: it must have the package
        env={"PYSPARK_PYTHON": packed_env.driver_python, "PYSPARK_DRIVER_PYTHON": packed_env.driver_python}
        | {DRIVER_GUARD: "1"},
    )
    try:
        server.start()
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        conf_file, out_file = tmp_path / "conf.json", tmp_path / "out.json"
        conf_file.write_text(json.dumps(s3_options))
        started = time.monotonic()
        code, out = run(
            [sys.executable, str(JOB), "connect", server.url, str(out_file), str(tmp_path / "tables"), s3_uri]
            + [str(conf_file), str(packed_env.archive)],
            {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "SPARK_CONNECT_MODE_ENABLED": "1"},
            tmp_path / "client.log",
        )
        elapsed = time.monotonic() - started
        assert code == 0, f"client exited with {code}; stdout:\n{out}\nlog:\n{log_tail(tmp_path / 'client.log')}"
        result = json.loads(out_file.read_text())
        print(json.dumps({k: v for k, v in result.items() if k not in ("local", "s3")}, indent=1)[:6000])
        # the server's own archive is not where a Connect session's Python workers start
        assert "Cannot run program" in result.get("server_archive_error", ""), result.get("server_archive")
        assert "executors" in result, result.get("executors_error")  # after the client's addArtifacts
        check_executors(result["executors"])
        check_workload(result, "local")
        check_workload(result, "s3")
        print(f"Connect client with the server's packed environment: {elapsed:.1f} s")
    finally:
        server.stop()
        tail = log_tail(server.log_path, 5)
        assert not re.search(r"OutOfMemoryError", tail), tail
