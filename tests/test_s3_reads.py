"""S3 object reads as presigned GETs (core/storage/s3_reads.py), against the moto server: the
same bytes and errors as the SDK's, the SDK answering what the lean path does not take."""

from __future__ import annotations

import os

import pytest

from indextables_spark.core.storage.s3 import S3Storage, _shared_reads
from indextables_spark.errors import FileNotFoundInStorageError

pytestmark = pytest.mark.cloud

BODY = os.urandom(300_000)


def _both(s3_uri, s3_options):
    lean = S3Storage(s3_uri, s3_options)
    sdk = S3Storage(s3_uri, {**s3_options, "spark.indextables.s3.presignedReads": "false"})
    lean.put("d/blob.bin", BODY)
    return lean, sdk


def test_ranges_and_whole_reads_match_the_sdk(s3_uri, s3_options):
    lean, sdk = _both(s3_uri, s3_options)
    assert lean.presigned and not sdk.presigned
    for a, b in [(0, 1), (5, 70_000), (299_999, 300_000), (123, 300_000), (250_000, 400_000), (300_000, 300_010)]:
        assert lean.read_range("d/blob.bin", a, b) == sdk.read_range("d/blob.bin", a, b) == BODY[a:b], (a, b)
    assert lean.read("d/blob.bin") == sdk.read("d/blob.bin") == BODY
    # the lean path was taken: the object's URL is signed once and kept for its next ranges
    reads = _shared_reads(lean)
    key = (lean.bucket, lean._object_key("d/blob.bin"))
    url, _ = reads.urls.get(key)
    lean.read_range("d/blob.bin", 7, 9)
    assert reads.urls.get(key)[0] == url and "X-Amz-Signature" in url


def test_missing_objects_fail_as_through_the_sdk(s3_uri, s3_options):
    lean, sdk = _both(s3_uri, s3_options)
    for s in (lean, sdk):
        with pytest.raises(FileNotFoundInStorageError, match="d/none.bin"):
            s.read_range("d/none.bin", 0, 10)
        with pytest.raises(FileNotFoundInStorageError, match="d/none.bin"):
            s.read("d/none.bin")


def test_a_refused_url_is_signed_again_and_the_sdk_answers(s3_uri, s3_options):
    lean, _ = _both(s3_uri, s3_options)
    reads = _shared_reads(lean)
    key = (lean.bucket, lean._object_key("d/blob.bin"))
    assert lean.read_range("d/blob.bin", 0, 4) == BODY[:4]
    url, made = reads.urls.get(key)
    # a URL S3 refuses (moto checks no signatures: one of another object, 404): the SDK answers
    bad = url.replace("/d/blob.bin?", "/d/gone.bin?")
    assert bad != url
    reads.urls.put(key, (bad, made))
    assert lean.read_range("d/blob.bin", 10, 20) == BODY[10:20]  # the SDK's answer
    assert reads.urls.get(key) is None  # dropped: the next read signs anew
    assert lean.read_range("d/blob.bin", 20, 30) == BODY[20:30]
    assert reads.urls.get(key)[0] != bad


def test_fault_injecting_handlers_keep_reads_in_the_sdk(s3_uri, s3_options):
    seen = []
    s = S3Storage(s3_uri, s3_options, event_handlers=[("before-send.s3", lambda **kw: seen.append(1))])
    s.put("d/x.bin", b"abc")
    assert not s.presigned
    seen.clear()
    assert s.read_range("d/x.bin", 1, 3) == b"bc" and seen
