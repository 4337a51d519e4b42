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
  azure_connection_string, azure_endpoint, azure_container, azure_options   (session) likewise
                                                for Azurite.
  spark            (session) local[2] SparkSession with indextables registered.
"""
from __future__ import annotations

import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

ENV_S3_ENDPOINT = "INDEXTABLES_TEST_S3_ENDPOINT"
ENV_AZURE_ENDPOINT = "INDEXTABLES_TEST_AZURE_ENDPOINT"
ENV_AZURE_CONNECTION_STRING = "INDEXTABLES_TEST_AZURE_CONNECTION_STRING"
ENV_LOCAL_ONLY = "INDEXTABLES_TEST_LOCAL_ONLY"

# moto accepts any credentials; these are not secrets.
S3_TEST_ACCESS_KEY = "indextables-test-access"
S3_TEST_SECRET_KEY = "indextables-test-secret"
S3_TEST_REGION = "us-east-1"

SESSION_TAG = uuid.uuid4().hex[:8]


@dataclass
class StorageTarget:
    """A fresh, empty table root on one backend."""

    kind: str                      # "local" | "s3" | "azure"
    uri: str                       # table root URI (local: a path)
    options: dict[str, str] = field(default_factory=dict)

    def open(self, **kwargs: Any):
        """The Storage for this root. kwargs (cloud only) go to the backend's constructor."""
        from indextables_spark.options import Options
        from indextables_spark.storage import open_storage

        if not kwargs:
            return open_storage(self.uri, self.options)
        if self.kind == "s3":
            from indextables_spark.storage.s3 import S3Storage

            return S3Storage(self.uri, Options.of(self.options), **kwargs)
        if self.kind == "azure":
            from indextables_spark.storage.azure import AzureStorage

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
        "s3", endpoint_url=s3_endpoint, aws_access_key_id=S3_TEST_ACCESS_KEY,
        aws_secret_access_key=S3_TEST_SECRET_KEY, region_name=S3_TEST_REGION,
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


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cloud),
                        pytest.param("azure", marks=pytest.mark.cloud)])
def storage_backend(request: pytest.FixtureRequest) -> StorageTarget:
    return _target(request.param, request)


@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.cloud), pytest.param("azure", marks=pytest.mark.cloud)])
def cloud_backend(request: pytest.FixtureRequest) -> StorageTarget:
    return _target(request.param, request)


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
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("indextables-tests")
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
        .getOrCreate()
    )
    it_register.register(session)
    yield session
    session.stop()
