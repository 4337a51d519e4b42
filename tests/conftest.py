"""Shared fixtures: storage targets on local disk, S3 (moto) and Azure (Azurite); a SparkSession.

The emulators are started by `make test` (scripts/emulators.sh), which exports:

  INDEXTABLES_TEST_S3_ENDPOINT              e.g. http://127.0.0.1:PORT (moto S3; any access key works)
  INDEXTABLES_TEST_AZURE_ENDPOINT           e.g. http://127.0.0.1:PORT/devstoreaccount1 (Azurite)
  INDEXTABLES_TEST_AZURE_CONNECTION_STRING  the devstoreaccount1 development connection string

Without them the S3/Azure tests FAIL with instructions, unless INDEXTABLES_TEST_LOCAL_ONLY=1,
which skips them instead.

Fixtures:
  storage_backend  (function; params "local", "s3", "azure") -> StorageTarget: a fresh, empty
                   table root (`.uri`), the options to reach it (`.options`), `.kind`, and
                   `.open(**kwargs)` -> Storage (kwargs go to S3Storage/AzureStorage, e.g.
                   event_handlers= / client_kwargs= for fault injection).
  cloud_backend    (function; params "s3", "azure") -> StorageTarget, same as above.
  s3_endpoint, s3_bucket, s3_options            (session) endpoint URL, a bucket made for this
                                                session, base options (credentials, endpoint).
  s3_uri           (function) a fresh table root on S3, deleted afterwards; s3_module_uri (module) the
                   same for a module whose tests only read the table written there once.
  azure_connection_string, azure_endpoint, azure_container, azure_options   (session) likewise
                                                for Azurite.
  spark            (session) local[2] SparkSession with indextables registered.
  unregistered     (function) that session with indextables' wrappers removed during the test.
  spark_connect_server (session) a Spark Connect server started from pyspark (tests/spark_servers.py).
  connect_spark    (session) a Spark Connect client session on it (pyspark's Connect flag is set only
                   while a test using it runs).
  standalone_cluster (session) a Master + two 1-core Workers; spark_cluster (session) its master URL.
  The servers start on first use only; mark tests using them `spark`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tiers import INTEGRATION_FIXTURES, INTEGRATION_TESTS, heavy_first, heavy_group_first, xdist_group

ENV_S3_ENDPOINT = "INDEXTABLES_TEST_S3_ENDPOINT"
ENV_AZURE_ENDPOINT = "INDEXTABLES_TEST_AZURE_ENDPOINT"
ENV_AZURE_CONNECTION_STRING = "INDEXTABLES_TEST_AZURE_CONNECTION_STRING"
ENV_LOCAL_ONLY = "INDEXTABLES_TEST_LOCAL_ONLY"

# moto accepts any credentials; these are not secrets.
S3_TEST_ACCESS_KEY = "indextables-test-access"
S3_TEST_SECRET_KEY = "indextables-test-secret"
S3_TEST_REGION = "us-east-1"

SESSION_TAG = uuid.uuid4().hex[:8]

# OpenMP threads (faiss's vector index builds and searches) sleep while they wait for work instead of
# spinning: the suite runs two pytest processes, each with its write threads and Spark's workers, on
# few cores, where spinning threads took the CPU from the rest (the vector tests ran 3-4x slower on a
# loaded 2-core machine). Set here, before faiss loads; the processes the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@dataclass
class StorageTarget:
    """A fresh, empty table root on one backend."""

    kind: str  # "local" | "s3" | "azure"
    uri: str  # table root URI (local: a path)
    options: dict[str, str] = field(default_factory=dict)

    def open(self, **kwargs: Any):
        """The Storage for this root. kwargs (cloud only) go to the backend's constructor."""
        from indextables_spark.config.options import Options
        from indextables_spark.core.storage import open_storage

        if not kwargs:
            return open_storage(self.uri, self.options)
        if self.kind == "s3":
            from indextables_spark.core.storage.s3 import S3Storage

            return S3Storage(self.uri, Options.of(self.options), **kwargs)
        if self.kind == "azure":
            from indextables_spark.core.storage.azure import AzureStorage

            return AzureStorage(self.uri, Options.of(self.options), **kwargs)
        raise TypeError(f"local storage takes no constructor arguments, got {sorted(kwargs)}")

    def child(self, name: str) -> "StorageTarget":
        """Another fresh root below this one (for tests that need several tables)."""
        return StorageTarget(self.kind, self.uri.rstrip("/") + "/" + name, dict(self.options))

    def with_options(self, **extra: str) -> "StorageTarget":
        return StorageTarget(self.kind, self.uri, {**self.options, **extra})


def _emulator_env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if value:
        return value
    if os.environ.get(ENV_LOCAL_ONLY) == "1":
        pytest.skip(f"{what} tests skipped: {ENV_LOCAL_ONLY}=1")
    pytest.fail(
        f"{what} emulator not available: environment variable {name} is not set.\n"
        f"Run the whole suite with `make test` (it starts moto S3 and Azurite and exports the variables), "
        f"or start them with `make emulators-start`, then `source .emulators/state/env.sh` and run pytest.\n"
        f"To run only the local tests, set {ENV_LOCAL_ONLY}=1 (the S3/Azure tests are then skipped).",
        pytrace=False,
    )


def _unique_prefix(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-").lower()[:40]
    return f"{name}-{uuid.uuid4().hex[:10]}"


# --- S3 ------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    return _emulator_env(ENV_S3_ENDPOINT, "S3")


@pytest.fixture(scope="session")
def s3_options(s3_endpoint: str) -> dict[str, str]:
    return {
        "spark.indextables.aws.accessKey": S3_TEST_ACCESS_KEY,
        "spark.indextables.aws.secretKey": S3_TEST_SECRET_KEY,
        "spark.indextables.aws.region": S3_TEST_REGION,
        "spark.indextables.s3.endpoint": s3_endpoint,
        "spark.indextables.s3.pathStyleAccess": "true",
        # Fail fast on a dead emulator instead of waiting through long backoffs.
        "spark.indextables.storage.retry.baseDelayMs": "20",
    }


@pytest.fixture(scope="session")
def s3_bucket(s3_endpoint: str) -> str:
    import boto3

    bucket = f"indextables-test-{SESSION_TAG}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=S3_TEST_ACCESS_KEY,
        aws_secret_access_key=S3_TEST_SECRET_KEY,
        region_name=S3_TEST_REGION,
    )
    client.create_bucket(Bucket=bucket)
    return bucket


# --- Azure ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def azure_connection_string() -> str:
    return _emulator_env(ENV_AZURE_CONNECTION_STRING, "Azure")


@pytest.fixture(scope="session")
def azure_endpoint(azure_connection_string: str) -> str:
    """Azurite's blob endpoint, e.g. http://127.0.0.1:PORT/devstoreaccount1."""
    return _emulator_env(ENV_AZURE_ENDPOINT, "Azure")


@pytest.fixture(scope="session")
def azure_options(azure_connection_string: str) -> dict[str, str]:
    return {
        "spark.indextables.azure.connectionString": azure_connection_string,
        "spark.indextables.storage.retry.baseDelayMs": "20",
    }


@pytest.fixture(scope="session")
def azure_container(azure_connection_string: str) -> str:
    from azure.storage.blob import BlobServiceClient

    container = f"indextables-test-{SESSION_TAG}"
    BlobServiceClient.from_connection_string(azure_connection_string).create_container(container)
    return container


# --- storage targets -------------------------------------------------------------------------------


def _target(kind: str, request: pytest.FixtureRequest) -> StorageTarget:
    prefix = _unique_prefix(request)
    if kind == "local":
        tmp = request.getfixturevalue("tmp_path")
        return StorageTarget("local", str(tmp / "table"), {})
    if kind == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return StorageTarget("s3", f"s3://{bucket}/{prefix}", dict(request.getfixturevalue("s3_options")))
    if kind == "azure":
        container = request.getfixturevalue("azure_container")
        return StorageTarget("azure", f"az://{container}/{prefix}", dict(request.getfixturevalue("azure_options")))
    raise ValueError(f"unknown storage backend {kind!r}")


@pytest.fixture(
    params=["local", pytest.param("s3", marks=pytest.mark.cloud), pytest.param("azure", marks=pytest.mark.cloud)]
)
def storage_backend(request: pytest.FixtureRequest) -> StorageTarget:
    return _target(request.param, request)


@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.cloud), pytest.param("azure", marks=pytest.mark.cloud)])
def cloud_backend(request: pytest.FixtureRequest) -> StorageTarget:
    return _target(request.param, request)


@pytest.fixture
def s3_uri(s3_bucket, s3_options, request):
    """A fresh table root on S3; everything under it is deleted afterwards."""
    yield from _s3_root(s3_bucket, s3_options, request.node.name)


@pytest.fixture(scope="module")
def s3_module_uri(s3_bucket, s3_options, request):
    """A fresh table root on S3 for a whole module (a table its tests only read, written once);
    everything under it is deleted after the module's tests."""
    yield from _s3_root(s3_bucket, s3_options, request.module.__name__)


def _s3_root(bucket: str, options: dict[str, str], name: str):
    from indextables_spark.core.storage import open_storage

    uri = f"s3://{bucket}/{name[:30]}-{uuid.uuid4().hex[:8]}"
    yield uri
    storage = open_storage(uri, options)
    storage.delete([f.key for f in storage.list("")])


# --- Spark -----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    try:
        import indextables_spark.spark.register as it_register
    except ImportError as e:
        pytest.fail(
            f"the spark fixture needs indextables_spark.spark.register (it.register(spark)), which cannot be "
            f"imported: {e}",
            pytrace=False,
        )
    from spark_servers import local_session

    session = local_session("indextables-tests")
    it_register.register(session)
    yield session
    _stop_within(session, STOP_SECONDS)


STOP_SECONDS = 180


def _stop_within(session, seconds: float) -> None:
    """Stop the session, failing (with every Python thread's stack) when stop() does not return in
    `seconds`: a hung stop otherwise held its xdist worker until the suite's timeout (seen once in
    the integration tier after a merge-on-write streaming test; NOTES.md, twenty-fifth session)."""
    import faulthandler
    import threading

    errors: list[BaseException] = []

    def stop() -> None:
        try:
            session.stop()
        except BaseException as e:  # reported below, in the test's process
            errors.append(e)

    t = threading.Thread(target=stop, name="spark-session-stop", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        faulthandler.dump_traceback(all_threads=True)
        pytest.fail(f"SparkSession.stop() did not return within {seconds:.0f} s (every thread's stack above)")
    if errors:
        raise errors[0]


# --- Spark Connect server and standalone cluster (real servers; started once, on first use) -------

_CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"


@pytest.fixture
def unregistered(spark):
    """The `spark` session with indextables' wrappers removed (`it.unregister`) during the test."""
    import indextables_spark as it

    it.unregister(spark)
    try:
        yield spark
    finally:
        it.register(spark)


def _connect_client_missing() -> list[str]:
    import importlib.util

    missing = []
    for module in ("grpc", "grpc_status", "google.rpc", "pandas"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # the parent package ("google") is missing
            found = False
        if not found:
            missing.append(module)
    return missing


def _start_or_fail(server) -> None:
    from spark_servers import ServerStartError

    try:
        server.start()
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory):
    """A Spark Connect server (local[2], filter pushdown on, the venv's Python for its workers) on a
    free port; its log is `server.log_path`."""
    from spark_servers import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        _start_or_fail(server)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connect_spark(spark_connect_server):
    """A Spark Connect client session (`pyspark.sql.connect.session.SparkSession`) on
    `spark_connect_server`.

    pyspark marks the whole process as "Connect mode" when a remote session is created
    (os.environ SPARK_CONNECT_MODE_ENABLED: `pyspark.sql.functions` then build Connect columns and a
    classic `SparkSession.builder...getOrCreate()` refuses to start). So the flag is set only while
    a test that uses this fixture runs (`_spark_connect_mode`, autouse); the classic `spark` fixture
    works before and after."""
    missing = _connect_client_missing()
    if missing:
        pytest.fail(
            f"the Spark Connect client needs {missing} (pip install grpcio grpcio-status "
            f"googleapis-common-protos pandas, or pyspark[connect])",
            pytrace=False,
        )
    # the Connect client's own builder: pyspark's dispatching builder refuses a remote session while
    # a classic one (the `spark` fixture) runs in this process (SESSION_ALREADY_EXIST)
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    before = os.environ.get(_CONNECT_MODE_ENV)
    try:
        session = RemoteSparkSession.builder.remote(spark_connect_server.url).getOrCreate()
    finally:
        _restore_env(_CONNECT_MODE_ENV, before)
    yield session
    os.environ[_CONNECT_MODE_ENV] = "1"
    try:
        session.stop()
    finally:
        _restore_env(_CONNECT_MODE_ENV, before)


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.fixture(autouse=True)
def _spark_connect_mode(request):
    """pyspark's process-wide Connect flag, on only during tests that use `connect_spark`."""
    if "connect_spark" not in request.fixturenames:
        yield
        return
    before = os.environ.get(_CONNECT_MODE_ENV)
    os.environ[_CONNECT_MODE_ENV] = "1"
    try:
        yield
    finally:
        _restore_env(_CONNECT_MODE_ENV, before)


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory):
    """A standalone cluster: one Master, two Workers (1 core, 2g each) on 127.0.0.1, each worker
    with its own work dir, SPARK_LOCAL_DIRS and TMPDIR (so its executors' default split cache is
    `worker.cache_dir`). See tests/spark_servers.py."""
    from spark_servers import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="2g")
    try:
        _start_or_fail(cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_cluster(standalone_cluster) -> str:
    """The master URL (spark://127.0.0.1:PORT) of `standalone_cluster`."""
    return standalone_cluster.master_url


# --- tiers (tests/tiers.py) ---------------------------------------------------------------------------


def in_integration_tier(item: pytest.Item) -> bool:
    """Whether `item` belongs to the integration tier (tests/tiers.py)."""
    if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return any(item.nodeid.startswith(prefix) for prefix in INTEGRATION_TESTS)


ENV_SCRATCH = "INDEXTABLES_TEST_SCRATCH"


def pytest_configure(config: pytest.Config) -> None:
    """One scratch directory per run for what the tests put in the temp dir (tables under tmp_path,
    the split cache's default root, Spark's local dirs, what killed workers leave), removed when
    the run ends: runs on a shared disk must not pile up tens of GB (a CI run failed with ENOSPC).
    xdist workers inherit it from the controller's environment."""
    if hasattr(config, "workerinput") or os.environ.get(ENV_SCRATCH):
        return
    scratch = tempfile.mkdtemp(prefix="indextables-tests-")
    os.environ[ENV_SCRATCH] = os.environ["TMPDIR"] = os.environ["SPARK_LOCAL_DIRS"] = scratch
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    config.stash[_SCRATCH_KEY] = scratch


def pytest_unconfigure(config: pytest.Config) -> None:
    scratch = config.stash.get(_SCRATCH_KEY, None)
    if scratch is not None:
        # a file that a lingering process still writes there is no failure of the run
        shutil.rmtree(scratch, ignore_errors=True)


_SCRATCH_KEY = pytest.StashKey[str]()


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own pytest_collection_modifyitems
# (it appends `@group` to each node id); without it, this hook would run after that one and every
# test would be a group of its own (each worker starting its own Connect server and cluster)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouped = config.pluginmanager.hasplugin("xdist")  # the smoke venvs have no pytest-xdist
    order: dict[str, tuple[int, int]] = {}
    for item in items:
        order[item.nodeid] = (0, heavy_first(item.nodeid))
        if in_integration_tier(item):
            item.add_marker(pytest.mark.integration)
            group = xdist_group(item.nodeid, set(getattr(item, "fixturenames", ())))
            order[item.nodeid] = (1, heavy_group_first(group))
            if grouped:
                item.add_marker(pytest.mark.xdist_group(group))
    # the fast tier's heavy files first, the integration tier's heavy groups first (a tier runs alone);
    # stable: files and groups keep their own order (tests/tiers.py)
    items.sort(key=lambda item: order[item.nodeid])
