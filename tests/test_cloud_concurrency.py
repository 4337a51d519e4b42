"""Concurrent committers on one table on S3 and Azure: 4 processes × 20 commits each.

Proves, per backend: versions are contiguous, every add is present exactly once, and no version
file was ever overwritten — (1) each version file holds exactly the add its committer believes it
committed there, (2) across all processes every version key was created by exactly one successful
conditional write and never by a plain put, and (3) on S3 (a versioned bucket) the store holds one
object version per version file. Automatic checkpoints stay on (every 10 versions), so the
processes also race on writing the Avro state.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Iterable

import pytest
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from test_commit_concurrency import N_COMMITS, N_PROCS, create_table, run_processes
from test_state_write import live_paths, replay_paths

import indextables_spark as it
from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.core.log.model.paths import LOG_DIR, parse_version_name, version_key
from indextables_spark.config.options import Options
from indextables_spark.core.storage import FileInfo, Storage, open_storage

pytestmark = pytest.mark.cloud


class RecordingStorage(Storage):
    """Delegates to a real storage and records the writes of version files."""

    def __init__(self, inner: Storage):
        self.inner = inner
        self.uri = inner.uri
        self.created: list[str] = []  # version keys this process created (put_if_absent → True)
        self.plain_puts: list[str] = []  # version keys written with an unconditional put (must stay empty)

    @staticmethod
    def _is_version(key: str) -> bool:
        return key.startswith(LOG_DIR + "/") and parse_version_name(key[len(LOG_DIR) + 1 :]) is not None

    def read(self, key: str) -> bytes:
        return self.inner.read(key)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner.read_range(key, start, end)

    def put(self, key: str, data: bytes) -> None:
        if self._is_version(key):
            self.plain_puts.append(key)
        self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        won = self.inner.put_if_absent(key, data)
        if won and self._is_version(key):
            self.created.append(key)
        return won

    def list(self, prefix: str) -> list[FileInfo]:
        return self.inner.list(prefix)

    def delete(self, keys: Iterable[str]) -> None:
        self.inner.delete(keys)

    def stat(self, key: str) -> FileInfo | None:
        return self.inner.stat(key)

    def upload_file(self, key: str, local_path: str) -> None:
        self.inner.upload_file(key, local_path)

    def download_file(self, key: str, local_path: str) -> None:
        self.inner.download_file(key, local_path)


def _committer(uri: str, worker: int, options: dict, q) -> None:
    opts = Options.of(options, {"transaction.retry.maxAttempts": "200", "transaction.retry.maxDelayMs": "1000"})
    storage = RecordingStorage(open_storage(uri, opts))
    t = it.IndexTable(uri, opts, storage=storage)
    claims: dict[int, str] = {}
    for i in range(N_COMMITS):
        path = f"splits/w{worker}-{i}.split"
        claims[
            t.transaction().add_files([AddFile(path, {}, size=100 + i, modification_time=0, num_records=1)]).commit()
        ] = path
    q.put((worker, claims, storage.created, storage.plain_puts))


def run_recorded_committers(uri: str, options: dict) -> list[tuple]:
    return run_processes(_committer, uri, options)


@pytest.fixture
def versioned_s3_target(cloud_backend):
    """S3: a bucket of its own with versioning on (every overwrite would leave a second version)."""
    if cloud_backend.kind != "s3":
        yield cloud_backend, None
        return
    import boto3

    opts = cloud_backend.options
    client = boto3.client(
        "s3",
        endpoint_url=opts["spark.indextables.s3.endpoint"],
        aws_access_key_id=opts["spark.indextables.aws.accessKey"],
        aws_secret_access_key=opts["spark.indextables.aws.secretKey"],
        region_name=opts["spark.indextables.aws.region"],
    )
    bucket = f"indextables-race-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    yield type(cloud_backend)("s3", f"s3://{bucket}/race", dict(opts)), (client, bucket)
    versions = client.list_object_versions(Bucket=bucket)
    objs = [
        {"Key": v["Key"], "VersionId": v["VersionId"]}
        for v in versions.get("Versions", []) + versions.get("DeleteMarkers", [])
    ]
    for i in range(0, len(objs), 1000):
        client.delete_objects(Bucket=bucket, Delete={"Objects": objs[i : i + 1000], "Quiet": True})
    client.delete_bucket(Bucket=bucket)


def test_racing_committers_on_object_stores(versioned_s3_target):
    target, s3 = versioned_s3_target
    create_table(target.uri, target.options)
    results = run_recorded_committers(target.uri, target.options)
    n = N_PROCS * N_COMMITS
    expected_versions = list(range(1, n + 1))

    # every version claimed by exactly one committer, contiguous 1..n
    claims = {}
    for worker, worker_claims, _created, _puts in results:
        assert len(worker_claims) == N_COMMITS, f"worker {worker} returned the same version twice"
        for v, path in worker_claims.items():
            assert v not in claims, f"version {v} claimed by two committers: {claims[v]} and {path}"
            claims[v] = path
    assert sorted(claims) == expected_versions

    # each version file holds exactly the add its committer committed there (nothing overwritten)
    t = it.IndexTable(target.uri, target.options)
    assert t.version() == n
    for v in expected_versions:
        adds = [a.path for a in t.log.read_actions(v) if isinstance(a, AddFile)]
        assert adds == [claims[v]], f"version {v}: {adds} != {[claims[v]]}"

    # every version key created by exactly one successful conditional write, none by a plain put
    created = Counter(k for r in results for k in r[2])
    assert created == Counter(version_key(v) for v in expected_versions)
    assert [k for r in results for k in r[3]] == []

    # every add present exactly once; the (raced) Avro state agrees with replaying the log
    paths = sorted(f.path for f in t.snapshot().files)
    assert paths == sorted(f"splits/w{w}-{i}.split" for w in range(N_PROCS) for i in range(N_COMMITS))
    assert live_paths(t) == replay_paths(t)
    assert set(t.log.listing().state_manifests) >= {10, 20, 30, 40, 50, 60, 70}

    if s3 is not None:  # the server's own record: one object version per version file
        client, bucket = s3
        pages = client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=f"race/{LOG_DIR}/")
        per_key = Counter(v["Key"] for page in pages for v in page.get("Versions", []))
        version_files = {k: c for k, c in per_key.items() if parse_version_name(k.rsplit("/", 1)[-1]) is not None}
        assert len(version_files) == n + 1 and set(version_files.values()) == {1}, version_files
