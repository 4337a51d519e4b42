"""Shared by the test_cloud_* modules."""

from __future__ import annotations

import contextlib

import pytest


@pytest.fixture(autouse=True)
def wipe_cloud_tables(request):
    """After a test on S3/Azure, delete everything it wrote under its table root: the emulators keep
    objects in memory for the whole session, and moto's listings get slower as a bucket grows."""
    names = [n for n in ("cloud_backend", "storage_backend") if n in request.fixturenames]
    target = request.getfixturevalue(names[0]) if names else None
    yield
    if target is None or target.kind == "local":
        return
    storage = target.open()
    storage.delete([f.key for f in storage.list("")])


@contextlib.contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Set Spark session conf entries for the block, unset them afterwards."""
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k in conf:
            spark.conf.unset(k)
