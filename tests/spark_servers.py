"""Real Spark servers for the tests, started from the installed pyspark distribution (no downloads).

- `ConnectServer`: a Spark Connect server (`spark-submit --class ...SparkConnectServer`, local[2])
  on a free 127.0.0.1 port; clients connect with `SparkSession.builder.remote(server.url)`.
- `StandaloneCluster`: one Master and N Workers (`spark-class org.apache.spark.deploy...`), each
  worker with its own work dir, SPARK_LOCAL_DIRS and TMPDIR (so the executors' default split cache,
  `$TMPDIR/indextables-cache`, is per worker: `worker.cache_dir`); sessions and spark-submit use
  `cluster.master_url`.

Every server runs in its own process group with its own log file; `stop()` kills the group
(SIGTERM, then SIGKILL) by pid. Every started server is also stopped at interpreter exit (atexit),
and on Linux it gets SIGTERM when the process that started it dies (PR_SET_PDEATHSIG, kept across
the scripts' `exec` into java), so even a test run killed with SIGKILL leaves none behind (a
stopping master/worker JVM takes its executors along). A server that exits or does not answer
during start-up raises `ServerStartError` with the tail of its log.

Ports: each one is a port the OS hands out free, checked again (nothing answers there) right
before the server starts; the readiness poll also checks that our process is still alive, so a
stale server on the same port cannot pass for ours.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

START_TIMEOUT = float(os.environ.get("INDEXTABLES_SPARK_SERVER_START_TIMEOUT", "180"))
# The test JVMs (the local session's, the Connect server's, a cluster job's driver and executors:
# tests/cluster_jobs.py CLUSTER_CONF) run each piece of Spark's code a few times on few cores: no C2
# compiler threads optimizing it (C1 compiles only) and one collector thread. A Spark-heavy part of
# the fast tier ran 15% faster so in one process (75 -> 63 s), the JVM's CPU time of a short
# session 25 -> 15 s.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LOG_TAIL_LINES = 60


def spark_home() -> str:
    """The installed pyspark package directory: it holds bin/, jars/ (Connect server jar included)."""
    import pyspark

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    if not os.path.exists(os.path.join(home, "bin", "spark-submit")):
        raise FileNotFoundError(f"{home}/bin/spark-submit not found: is pyspark installed from the full distribution?")
    return home


def venv_python() -> str:
    return sys.executable


class ServerStartError(RuntimeError):
    pass


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (the OS picks it; checked once more)."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not port_answers(port):
            return port
    raise ServerStartError("no free TCP port found on 127.0.0.1")


def port_answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


def check_free(*ports: int) -> None:
    for p in ports:
        if port_answers(p):
            raise ServerStartError(f"port {p} on 127.0.0.1 is already in use")


def log_tail(path: str | os.PathLike, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return f"(log {path} unreadable: {e})"
    return "\n".join(text.splitlines()[-lines:])


def die_with_parent():
    """A Popen `preexec_fn`: the child gets SIGTERM when the thread that started it dies (Linux
    PR_SET_PDEATHSIG); None elsewhere. Start servers from the main thread."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return preexec


# ---- one server process ---------------------------------------------------------------------------

_running: set["ServerProcess"] = set()
_running_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _running_lock:
        procs = list(_running)
    for p in procs:
        p.stop()


atexit.register(_stop_all_at_exit)


@dataclass(eq=False)
class ServerProcess:
    """A server command in its own process group, output into `log_path`."""

    name: str
    cmd: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    proc: subprocess.Popen | None = None
    started_s: float | None = None  # seconds from launch until ready

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        with open(self.log_path, "ab") as log:
            log.write(f"# {self.name}: {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )
        with _running_lock:
            _running.add(self)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def fail(self, why: str) -> ServerStartError:
        return ServerStartError(f"{self.name} {why}; last lines of its log {self.log_path}:\n{log_tail(self.log_path)}")

    def wait_until(self, ready, what: str, timeout: float = START_TIMEOUT, t0: float | None = None) -> None:
        """Poll `ready()` until true; raise (with the log tail) when the process exits or time runs out."""
        t0 = time.monotonic() if t0 is None else t0
        deadline = t0 + timeout
        while True:
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise self.fail(f"(pid {self.pid}) exited with code {code} before {what}")
            if ready():
                if self.alive():  # a stale server could answer: ours must still be running
                    self.started_s = time.monotonic() - t0
                    return
            if time.monotonic() > deadline:
                raise self.fail(f"(pid {self.pid}) not ready after {timeout:.0f} s ({what})")
            time.sleep(0.25)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the process group (the JVM and its Python workers), SIGKILL after `timeout`."""
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
            # Children left in the group (Python workers) go too; SIGKILL if the leader ignored TERM.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        finally:
            with _running_lock:
                _running.discard(self)


def _base_env(scratch: Path, python: str | None = None) -> dict[str, str]:
    """Environment of every server: `python` (default: the venv's) for PySpark workers, loopback
    only, a private temp/local dir."""
    for d in ("tmp", "local"):
        (scratch / d).mkdir(parents=True, exist_ok=True)
    python = python or venv_python()
    return {
        "SPARK_HOME": spark_home(),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(scratch / "local"),
        "TMPDIR": str(scratch / "tmp"),
        "SPARK_NO_DAEMONIZE": "1",
    }


# ---- Spark Connect ----------------------------------------------------------------------------------


@dataclass(eq=False)
class ConnectServer:
    """A Spark Connect server (local[N] inside, or `master`) on 127.0.0.1:`port`; `env` is added to
    (and overrides) its environment (e.g. PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON)."""

    base_dir: Path
    master: str = "local[2]"
    extra_conf: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    process: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "connect-server.log"

    @property
    def started_s(self) -> float | None:
        return self.process.started_s if self.process else None

    def start(self, timeout: float = START_TIMEOUT) -> "ConnectServer":
        home = spark_home()
        self.port = self.port or free_port()
        check_free(self.port)
        conf = {
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.sql.python.filterPushdown.enabled": "true",
            "spark.pyspark.python": venv_python(),
            "spark.pyspark.driver.python": venv_python(),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
            **self.extra_conf,
        }
        cmd = [
            f"{home}/bin/spark-submit",
            "--master",
            self.master,
            "--class",
            CONNECT_CLASS,
            "--name",
            "indextables-connect-tests",
        ]
        for k, v in conf.items():
            cmd += ["--conf", f"{k}={v}"]
        cmd.append("spark-internal")
        self.process = ServerProcess(
            "Spark Connect server",
            cmd,
            self.log_path,
            {**_base_env(self.base_dir), **self.env},
            cwd=str(self.base_dir),
        )
        t0 = time.monotonic()
        self.process.start()
        try:
            self.process.wait_until(lambda: port_answers(self.port), f"port {self.port} answered", timeout, t0)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process:
            self.process.stop()


# ---- standalone cluster -----------------------------------------------------------------------------


@dataclass(eq=False)
class Worker:
    index: int
    dir: Path
    webui_port: int
    process: ServerProcess

    @property
    def work_dir(self) -> Path:
        """Where the worker puts `app-*/<executor id>/{stdout,stderr}`."""
        return self.dir / "work"

    @property
    def tmp_dir(self) -> Path:
        return self.dir / "tmp"

    @property
    def cache_dir(self) -> Path:
        """The executors' default indextables split cache (core/split/cache/cache.py: `$TMPDIR/indextables-cache`)."""
        return self.tmp_dir / "indextables-cache"

    def executor_logs(self) -> list[Path]:
        return sorted(self.work_dir.glob("app-*/*/stderr"))


@dataclass(eq=False)
class StandaloneCluster:
    """One Master and `workers` Workers on 127.0.0.1, each worker `cores` cores and `memory`.

    `python`: the Python in the master's and workers' environment (PYSPARK_PYTHON,
    PYSPARK_DRIVER_PYTHON; default the venv's). The executors run the Python the application names
    (`spark.pyspark.python`, PYSPARK_PYTHON of its driver); this is what the cluster's own
    environment offers (tests/test_packed_env.py: a bare venv without the package)."""

    base_dir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    python: str | None = None
    master_port: int | None = None
    master_webui_port: int | None = None
    master: ServerProcess | None = None
    worker_list: list[Worker] = field(default_factory=list)
    started_s: float | None = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def json_url(self) -> str:
        return f"http://127.0.0.1:{self.master_webui_port}/json/"

    def state(self) -> dict:
        """The master's status JSON (workers, aliveworkers, activeapps, completedapps, ...)."""
        with urllib.request.urlopen(self.json_url, timeout=2) as r:
            return json.loads(r.read().decode())

    def _alive_workers(self) -> int:
        try:
            return int(self.state().get("aliveworkers", 0))
        except (OSError, ValueError, urllib.error.URLError):
            return 0

    def start(self, timeout: float = START_TIMEOUT) -> "StandaloneCluster":
        home = spark_home()
        t0 = time.monotonic()
        try:
            self.master_port = self.master_port or free_port()
            self.master_webui_port = self.master_webui_port or free_port()
            check_free(self.master_port, self.master_webui_port)
            mdir = self.base_dir / "master"
            self.master = ServerProcess(
                "Spark master",
                [
                    f"{home}/bin/spark-class",
                    MASTER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.master_port),
                    "--webui-port",
                    str(self.master_webui_port),
                ],
                mdir / "master.log",
                _base_env(mdir, self.python),
                cwd=str(mdir),
            )
            self.master.start()
            self.master.wait_until(lambda: _http_ok(self.json_url), f"{self.json_url} answered", timeout, t0)
            for i in range(self.workers):
                wdir = self.base_dir / f"worker-{i}"
                (wdir / "work").mkdir(parents=True, exist_ok=True)
                ui = free_port()
                check_free(ui)
                proc = ServerProcess(
                    f"Spark worker {i}",
                    [
                        f"{home}/bin/spark-class",
                        WORKER_CLASS,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--webui-port",
                        str(ui),
                        "--work-dir",
                        str(wdir / "work"),
                        self.master_url,
                    ],
                    wdir / "worker.log",
                    _base_env(wdir, self.python),
                    cwd=str(wdir),
                )
                proc.start()
                self.worker_list.append(Worker(i, wdir, ui, proc))
            deadline = t0 + timeout
            while self._alive_workers() < self.workers:
                for p in [self.master] + [w.process for w in self.worker_list]:
                    if not p.alive():
                        raise p.fail(f"(pid {p.pid}) exited with code {p.proc.returncode} during cluster start-up")
                if time.monotonic() > deadline:
                    tails = "\n".join(
                        f"--- {w.process.name} ({w.process.log_path}):\n{log_tail(w.process.log_path, 20)}"
                        for w in self.worker_list
                    )
                    raise self.master.fail(
                        f"has {self._alive_workers()} of {self.workers} workers registered after "
                        f"{timeout:.0f} s\n{tails}\n--- master"
                    )
                time.sleep(0.25)
            self.started_s = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for w in self.worker_list:
            w.process.stop()
        if self.master:
            self.master.stop()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def local_session(app_name: str):
    """The local[2] classic SparkSession the tests use (workers run this very Python)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        # a warehouse of its own: pytest-xdist runs two of these sessions from one working directory
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="indextables-tests-warehouse-"))
        .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
        .getOrCreate()
    )
