"""S3 object reads as presigned GETs (core/storage/s3_reads.py), against the moto server: the
same bytes and errors as the SDK's, the SDK answering what the lean path does not take."""

from __future__ import annotations

import os

import pytest
from fault_proxy import FaultProxy

from indextables_spark.core.storage.s3 import S3Storage
from indextables_spark.errors import FileNotFoundInStorageError

pytestmark = pytest.mark.cloud

BODY = os.urandom(300_000)
PRESIGNED = "X-Amz-Signature="  # in the query of a presigned request


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
    reads = lean._lean()
    key = lean._object_key("d/blob.bin")
    url = reads.urls.get(key)[0]
    lean.read_range("d/blob.bin", 7, 9)
    assert reads.urls.get(key)[0] == url and "X-Amz-Signature" in url


def test_missing_objects_fail_as_through_the_sdk(s3_uri, s3_options):
    lean, sdk = _both(s3_uri, s3_options)
    for s in (lean, sdk):
        with pytest.raises(FileNotFoundInStorageError, match="d/none.bin"):
            s.read_range("d/none.bin", 0, 10)
        with pytest.raises(FileNotFoundInStorageError, match="d/none.bin"):
            s.read("d/none.bin")


def test_what_the_lean_path_is_refused_the_sdk_answers(s3_uri, s3_options, s3_endpoint):
    S3Storage(s3_uri, s3_options).put("d/blob.bin", BODY)
    with FaultProxy(s3_endpoint) as proxy:
        proxy.rule("status", path=PRESIGNED, times=None, status=403)  # presigned URLs only
        s = S3Storage(s3_uri, {**s3_options, "spark.indextables.s3.endpoint": proxy.endpoint})
        assert s.read_range("d/blob.bin", 10, 20) == BODY[10:20]  # the SDK's answer
        assert s._lean().urls.get(s._object_key("d/blob.bin")) is None  # dropped: signed anew next time
        assert [f.key for f in s.list("d/")] == ["d/blob.bin"]
        assert proxy.count(path=PRESIGNED) == 2 and len(proxy.requests) == 4


def test_fault_injecting_handlers_keep_reads_in_the_sdk(s3_uri, s3_options):
    seen = []
    s = S3Storage(s3_uri, s3_options, event_handlers=[("before-send.s3", lambda **kw: seen.append(1))])
    s.put("d/x.bin", b"abc")
    assert not s.presigned
    seen.clear()
    assert s.read_range("d/x.bin", 1, 3) == b"bc" and seen


def test_listings_match_the_sdk_and_reads_need_no_client(s3_uri, s3_options):
    small = {**s3_options, "spark.indextables.s3.listPageSize": "3"}  # pages of 3: continuation tokens
    lean = S3Storage(s3_uri, small)
    sdk = S3Storage(s3_uri, {**small, "spark.indextables.s3.presignedReads": "false"})
    names = ["l/a b.txt", "l/plus+sign", "l/ünïcode/ß.bin", "l/x%20y", "l/q?=&.bin", "l/deep/er/k", "l/z"]
    for n in names:
        sdk.put(n, n.encode())
    fresh = S3Storage(s3_uri, small)
    listed = fresh.list("l/")
    assert [f.key for f in listed] == sorted(names) == [f.key for f in sdk.list("l/")]
    assert [f.size for f in listed] == [f.size for f in sdk.list("l/")]
    assert all(abs(a.modified_ms - b.modified_ms) < 1000 for a, b in zip(listed, sdk.list("l/")))
    assert [fresh.read(n) for n in names] == [n.encode() for n in names]
    assert fresh.read_range("l/z", 0, 1) == b"l"
    assert fresh._client is None  # opened, listed and read without building a boto3 client
    assert lean.list("nothing/") == []


@pytest.mark.parametrize("kind", ["503", "drop"])
def test_transient_faults_on_the_lean_path_are_retried(s3_uri, s3_options, s3_endpoint, kind):
    S3Storage(s3_uri, s3_options).put("f/blob.bin", BODY)
    with FaultProxy(s3_endpoint) as proxy:
        rule = proxy.rule(kind, method="GET", times=3)
        opts = {
            **s3_options,
            "spark.indextables.s3.endpoint": proxy.endpoint,
            "spark.indextables.storage.retry.baseDelayMs": "1",
        }
        s = S3Storage(s3_uri, opts)
        assert s.read_range("f/blob.bin", 100, 50_000) == BODY[100:50_000]
        assert [f.key for f in s.list("f/")] == ["f/blob.bin"]
        assert rule.hits == 3 and proxy.count(path=PRESIGNED) >= 3  # the faults met presigned requests, and passed


def test_a_body_cut_short_is_no_object_and_throttling_backs_off(s3_uri, s3_options, s3_endpoint):
    """botocore's HTTP session does not check a body's length: the lean path does (a truncated GET or
    listing page is retried, never taken for the object), and a 429 is retried with backoff rather
    than sent on to the SDK at once."""
    S3Storage(s3_uri, s3_options).put("t/blob.bin", BODY)
    with FaultProxy(s3_endpoint) as proxy:
        opts = {
            **s3_options,
            "spark.indextables.s3.endpoint": proxy.endpoint,
            "spark.indextables.storage.retry.baseDelayMs": "1",
        }
        s = S3Storage(s3_uri, opts)
        for fault in ("truncate", "429"):
            proxy.clear()
            rule = proxy.rule(fault, method="GET", times=2)
            assert s.read_range("t/blob.bin", 10, 200_000) == BODY[10:200_000]
            assert s.read("t/blob.bin") == BODY
            assert rule.hits == 2 and proxy.count("GET", PRESIGNED) == 4  # none sent through the SDK
            proxy.clear()
            proxy.rule(fault, method="GET", path="list-type=2")
            assert [f.key for f in s.list("t/")] == ["t/blob.bin"]
            assert proxy.count("GET", "list-type=2") == 2


def test_a_permanent_refusal_fails_at_once_naming_the_object(s3_uri, s3_options, s3_endpoint):
    from indextables_spark.errors import StorageError

    with FaultProxy(s3_endpoint) as proxy:
        proxy.rule("status", times=None, status=403)
        s = S3Storage(s3_uri, {**s3_options, "spark.indextables.s3.endpoint": proxy.endpoint})
        with pytest.raises(StorageError, match="f/blob.bin") as e:
            s.read_range("f/blob.bin", 0, 10)
        assert "403" in str(e.value)
        assert len(proxy.requests) == 2  # the lean GET, then the SDK's answer; no retries


def test_connection_errors_do_not_show_the_signed_url(s3_uri, s3_options):
    import socket
    import traceback

    from indextables_spark.errors import StorageError

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    opts = {
        **s3_options,
        "spark.indextables.s3.endpoint": dead,
        "spark.indextables.aws.sessionToken": "FQoGZXIvYXdzEXAMPLETOKEN",
        "spark.indextables.storage.retry.maxAttempts": "2",
        "spark.indextables.storage.retry.baseDelayMs": "1",
    }
    s = S3Storage(s3_uri, opts)
    with pytest.raises(StorageError, match="cannot read_range") as e:
        s.read_range("d/blob.bin", 0, 10)
    shown = "".join(traceback.format_exception(e.value))
    assert "X-Amz-Signature" not in shown and "EXAMPLETOKEN" not in shown and "X-Amz-Credential" not in shown


def test_a_redirect_sends_every_later_read_to_the_sdk(s3_uri, s3_options, s3_endpoint):
    S3Storage(s3_uri, s3_options).put("r/blob.bin", BODY)
    with FaultProxy(s3_endpoint) as proxy:
        proxy.rule("status", path=PRESIGNED, times=None, status=301)  # "another region"
        s = S3Storage(s3_uri, {**s3_options, "spark.indextables.s3.endpoint": proxy.endpoint})
        assert s.read_range("r/blob.bin", 0, 8) == BODY[:8]  # the lean GET refused, the SDK's answer
        assert s._lean() is None and proxy.count(path=PRESIGNED) == 1
        assert s.read_range("r/blob.bin", 8, 16) == BODY[8:16] and s.read("r/blob.bin") == BODY
        assert proxy.count(path=PRESIGNED) == 1  # no presigned request after the redirect


def test_errors_of_any_kind_lose_the_signed_query():
    from botocore.exceptions import ConnectionClosedError, HTTPClientError, ReadTimeoutError

    from indextables_spark.core.storage.s3_reads import _without_signature

    url = (
        "https://b.s3.us-east-1.amazonaws.com/k?X-Amz-Credential=AKIA%2Fx&X-Amz-Security-Token=TOK&X-Amz-Signature=abc"
    )
    for e in (
        ConnectionClosedError(endpoint_url=url),
        ReadTimeoutError(endpoint_url=url, error=ValueError(f"timed out reading {url}")),
        HTTPClientError(error=ValueError(url)),
        OSError(f"cannot reach {url}"),
    ):
        out = _without_signature(e)
        assert "TOK" not in str(out) and "abc" not in str(out) and "AKIA" not in str(out), (e, out)
        assert isinstance(out, type(e)) or isinstance(out, HTTPClientError)
    plain = OSError("connection reset")
    assert _without_signature(plain) is plain
