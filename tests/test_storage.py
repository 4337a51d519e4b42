"""The Storage contract on local disk, S3 (moto server) and Azure Blob (Azurite), plus retries,
fault injection and credential handling of the cloud backends."""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import S3_TEST_SECRET_KEY, StorageTarget
from faults import AzureFaults, S3Faults
from indextables_spark.errors import (
    FileNotFoundInStorageError,
    IndexTablesError,
    InvalidOptionError,
    PathEscapeError,
    StorageError,
)
from indextables_spark.config.options import Options
from indextables_spark.core.storage import open_storage
from indextables_spark.core.storage.azure import AzureStorage
from indextables_spark.config.redaction import redact_uri
from indextables_spark.core.storage.retry import RetryPolicy, is_transient
from indextables_spark.core.storage.s3 import S3Storage

AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _parallel(fn, items, workers=16):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


# --- the contract, on every backend ----------------------------------------------------------------


def test_put_and_read_round_trip(storage_backend: StorageTarget):
    s = storage_backend.open()
    payload = bytes(range(256)) * 10
    s.put("a/b/c.bin", payload)
    s.put("empty", b"")
    assert s.read("a/b/c.bin") == payload
    assert s.read("empty") == b""
    s.put("a/b/c.bin", b"replaced")
    assert s.read("a/b/c.bin") == b"replaced"
    assert s.exists("a/b/c.bin") and not s.exists("a/b/c")
    assert s.full_uri("a/b/c.bin") == storage_backend.uri + "/a/b/c.bin"


def test_put_if_absent_creates_once_and_keeps_the_first_content(storage_backend: StorageTarget):
    s = storage_backend.open()
    assert s.put_if_absent("_transaction_log/00000000000000000000.json", b"first") is True
    assert s.put_if_absent("_transaction_log/00000000000000000000.json", b"second") is False
    assert s.read("_transaction_log/00000000000000000000.json") == b"first"
    # put() still replaces unconditionally
    s.put("_transaction_log/00000000000000000000.json", b"third")
    assert s.put_if_absent("_transaction_log/00000000000000000000.json", b"fourth") is False
    assert s.read("_transaction_log/00000000000000000000.json") == b"third"


def test_concurrent_put_if_absent_has_exactly_one_winner(storage_backend: StorageTarget):
    s = storage_backend.open()
    for round_ in range(3):
        key = f"race/{round_:02d}.json"
        barrier = threading.Barrier(8)
        results: dict[int, bool] = {}

        def attempt(i: int) -> None:
            barrier.wait()
            results[i] = s.put_if_absent(key, f"writer-{i}-".encode() * 1000)

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for i, won in results.items() if won]
        assert len(results) == 8
        assert len(winners) == 1, f"round {round_}: winners {winners}"
        assert s.read(key) == f"writer-{winners[0]}-".encode() * 1000


def test_read_range(storage_backend: StorageTarget):
    s = storage_backend.open()
    data = bytes(i % 251 for i in range(10_000))
    s.put("splits/x.split", data)
    assert s.read_range("splits/x.split", 0, 10) == data[:10]
    assert s.read_range("splits/x.split", 5000, 5123) == data[5000:5123]
    assert s.read_range("splits/x.split", 9990, 10_000) == data[9990:]
    assert s.read_range("splits/x.split", 9990, 20_000) == data[9990:]  # clipped at the end
    assert s.read_range("splits/x.split", 10_000, 10_010) == b""  # starts at the end
    assert s.read_range("splits/x.split", 50_000, 60_000) == b""  # past the end
    assert s.read_range("splits/x.split", 7, 7) == b""  # empty range
    with pytest.raises(FileNotFoundInStorageError, match="missing.split"):
        s.read_range("splits/missing.split", 0, 10)


def test_list_is_recursive_prefix_filtered_and_sorted(storage_backend: StorageTarget):
    s = storage_backend.open()
    keys = [
        "b.txt",
        "a/1.txt",
        "a/2/deep/x.txt",
        "a/2/y.txt",
        "ab/z.txt",
        "_transaction_log/0001.json",
        "_transaction_log/0002.json",
        "_transaction_log/_last_checkpoint",
    ]
    for i, k in enumerate(keys):
        s.put(k, b"x" * i)
    listed = s.list("")
    assert [f.key for f in listed] == sorted(keys)
    assert {f.key: f.size for f in listed} == {k: i for i, k in enumerate(keys)}
    assert [f.key for f in s.list("a/")] == ["a/1.txt", "a/2/deep/x.txt", "a/2/y.txt"]
    assert [f.key for f in s.list("a")] == ["a/1.txt", "a/2/deep/x.txt", "a/2/y.txt", "ab/z.txt"]
    assert [f.key for f in s.list("_transaction_log/000")] == [
        "_transaction_log/0001.json",
        "_transaction_log/0002.json",
    ]
    assert s.list("nothing/here/") == []
    # a sibling root with a common name prefix is not listed
    sibling = open_storage(storage_backend.uri + "-sibling", storage_backend.options)
    sibling.put("a/other.txt", b"o")
    assert [f.key for f in s.list("a/")] == ["a/1.txt", "a/2/deep/x.txt", "a/2/y.txt"]


def test_list_pagination_and_batch_delete_of_many_keys(storage_backend: StorageTarget):
    # > 1000 keys: S3 answers at most 1000 per page, and deletes at most 1000 per batch; Azure's
    # page size is lowered to 400 here (its default is 5000) and its batches hold 256.
    target = storage_backend.with_options(**{"spark.indextables.azure.listPageSize": "400"})
    counter = None
    if target.kind == "s3":
        counter = S3Faults()
        s = target.open(event_handlers=counter.handlers())
    elif target.kind == "azure":
        counter = AzureFaults()
        s = target.open(client_kwargs={"transport": counter})
    else:
        s = target.open()
    keys = [f"files/part-{i:05d}.split" for i in range(1050)]
    _parallel(lambda k: s.put(k, k.encode()), keys)
    s.put("keep/me.txt", b"keep")
    listed = s.list("files/")
    assert [f.key for f in listed] == keys
    assert all(f.size == len(f.key) for f in listed)
    if target.kind == "s3":
        assert counter.calls["ListObjectsV2"] == 2
    elif target.kind == "azure":
        assert counter.calls["GET comp=list"] == 3

    s.delete(keys + ["files/not-there.split"])
    assert s.list("files/") == []
    assert [f.key for f in s.list("")] == ["keep/me.txt"]
    if target.kind == "s3":
        assert counter.calls["DeleteObjects"] == 2
    elif target.kind == "azure":
        assert counter.calls["POST comp=batch"] == 5  # 1051 blobs in batches of 256


def test_delete_ignores_missing_keys_and_leaves_others(storage_backend: StorageTarget):
    s = storage_backend.open()
    for k in ("d/1", "d/2", "d/3"):
        s.put(k, b"v")
    s.delete(["d/1", "d/missing", "d/1"])
    s.delete([])
    s.delete(["d/3"])
    assert [f.key for f in s.list("d/")] == ["d/2"]
    s.delete(["never/existed"])  # a lone missing key is fine too


def test_stat(storage_backend: StorageTarget):
    s = storage_backend.open()
    before_ms = int(time.time() * 1000)
    s.put("x/y.bin", b"12345")
    info = s.stat("x/y.bin")
    assert info is not None
    assert info.key == "x/y.bin" and info.size == 5
    # object stores keep whole seconds; allow for that and for a little clock skew
    assert before_ms - 5_000 <= info.modified_ms <= int(time.time() * 1000) + 5_000
    assert s.stat("x/none.bin") is None
    assert s.stat("x") is None  # a "directory" is not an object


@pytest.mark.slow
def test_upload_and_download_of_a_70mb_file(storage_backend: StorageTarget, tmp_path):
    counter = None
    if storage_backend.kind == "s3":
        counter = S3Faults()
        s = storage_backend.open(event_handlers=counter.handlers())
    elif storage_backend.kind == "azure":
        counter = AzureFaults()
        s = storage_backend.open(client_kwargs={"transport": counter})
    else:
        s = storage_backend.open()
    src = tmp_path / "big.split"
    block = os.urandom(1 << 20)
    with open(src, "wb") as f:
        for i in range(70):
            f.write(bytes([i]) + block[1:])
    size = 70 << 20
    digest = hashlib.sha256(src.read_bytes()).hexdigest()

    s.upload_file("splits/big.split", str(src))
    info = s.stat("splits/big.split")
    assert info is not None and info.size == size
    assert s.read_range("splits/big.split", (33 << 20) - 3, (33 << 20) + 3) == block[-3:] + bytes([33]) + block[1:3]
    if storage_backend.kind == "s3":
        # 64M threshold → multipart with 16M parts: 5 parts
        assert counter.calls["CreateMultipartUpload"] == 1
        assert counter.calls["UploadPart"] == 5
        assert counter.calls["CompleteMultipartUpload"] == 1
        assert counter.calls["PutObject"] == 0
    elif storage_backend.kind == "azure":
        # above 64M → staged 8M blocks and one commit
        assert counter.calls["PUT comp=block"] == 9
        assert counter.calls["PUT comp=blocklist"] == 1

    out = tmp_path / "down" / "copy.split"
    out.parent.mkdir()
    s.download_file("splits/big.split", str(out))
    assert os.path.getsize(out) == size
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
    assert not [p for p in os.listdir(out.parent) if p != "copy.split"]  # no temp files left


def test_missing_file_errors_name_the_uri(storage_backend: StorageTarget, tmp_path):
    s = storage_backend.open()
    uri = storage_backend.uri + "/_transaction_log/00000000000000000007.json"
    for call in (
        lambda: s.read("_transaction_log/00000000000000000007.json"),
        lambda: s.read_range("_transaction_log/00000000000000000007.json", 0, 4),
        lambda: s.download_file("_transaction_log/00000000000000000007.json", str(tmp_path / "f")),
    ):
        with pytest.raises(FileNotFoundInStorageError) as info:
            call()
        assert uri in str(info.value)
        assert isinstance(info.value, IndexTablesError)
    assert not (tmp_path / "f").exists()


def test_keys_escaping_the_root_are_refused(storage_backend: StorageTarget, tmp_path):
    s = storage_backend.open()
    bad = ["../x", "a/../../x", "/etc/passwd", "", "..", "a\\..\\..\\x", "s3://other/x"]
    for key in bad:
        for call in (
            lambda: s.read(key),
            lambda: s.put(key, b"v"),
            lambda: s.put_if_absent(key, b"v"),
            lambda: s.stat(key),
            lambda: s.delete([key]),
            lambda: s.read_range(key, 0, 1),
        ):
            with pytest.raises(PathEscapeError):
                call()
    with pytest.raises(PathEscapeError):
        s.list("../")
    with pytest.raises(PathEscapeError):
        s.delete(["ok-key", "../x"])  # nothing is deleted when one key is bad
    # a key that stays inside after normalisation is fine
    s.put("a/../inside.txt", b"ok")
    assert s.read("inside.txt") == b"ok"
    if storage_backend.kind == "local":
        assert not (tmp_path / "x").exists()


def test_storage_survives_pickling(storage_backend: StorageTarget):
    s = storage_backend.open()
    s.put("p.txt", b"pickled")
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.uri == s.uri and s2.read("p.txt") == b"pickled"


# --- cloud: retries and fault injection ---------------------------------------------------------

FAULT_OPTIONS = {
    # 30% of requests fail: 12 attempts make an operation's failure odds 0.3**12 (~5e-7).
    "spark.indextables.storage.retry.maxAttempts": "12",
    "spark.indextables.storage.retry.baseDelayMs": "2",
    "spark.indextables.storage.retry.maxDelayMs": "20",
    # small multipart / block uploads so that a 3 MB file takes several parts
    "spark.indextables.s3.multipartThreshold": "5M",
    "spark.indextables.s3.multipartPartSize": "5M",
    "spark.indextables.azure.singlePutMaxSize": "1M",
    "spark.indextables.azure.blockSize": "1M",
    "spark.indextables.s3.listPageSize": "7",
    "spark.indextables.azure.listPageSize": "7",
}


def _faulty(target: StorageTarget, **fault_kwargs):
    if target.kind == "s3":
        faults = S3Faults(**fault_kwargs)
        return target.open(event_handlers=faults.handlers()), faults
    faults = AzureFaults(**fault_kwargs)
    return target.open(client_kwargs={"transport": faults}), faults


def _scenario(s, tmp_path, tag: str) -> list:
    """A fixed sequence of every operation; returns a transcript of the results."""
    out: list = []
    big = tmp_path / f"{tag}-upload.bin"
    big.write_bytes(bytes(i % 253 for i in range(11 << 20 if "s3" in tag else 3 << 20)))
    for i in range(20):
        s.put(f"data/{i:03d}.bin", f"payload {i}".encode() * (i + 1))
    out.append([s.put_if_absent(f"_transaction_log/{v:020d}.json", f"v{v}".encode()) for v in range(5)])
    out.append([s.put_if_absent(f"_transaction_log/{v:020d}.json", b"again") for v in range(5)])
    out.append([s.read(f"_transaction_log/{v:020d}.json") for v in range(5)])
    out.append([s.read(f"data/{i:03d}.bin") for i in range(20)])
    out.append([s.read_range(f"data/{i:03d}.bin", 3, 17) for i in range(20)])
    out.append([(f.key, f.size) for f in s.list("")])
    out.append([(f.key, f.size) for f in s.list("data/01")])
    out.append([(info.key, info.size) if (info := s.stat(k)) else None for k in ("data/005.bin", "data/nope")])
    s.delete([f"data/{i:03d}.bin" for i in range(0, 20, 2)] + ["data/nope"])
    out.append([f.key for f in s.list("data/")])
    s.upload_file("splits/up.bin", str(big))
    out.append(s.stat("splits/up.bin").size)
    down = tmp_path / f"{tag}-download.bin"
    s.download_file("splits/up.bin", str(down))
    out.append(hashlib.sha256(down.read_bytes()).hexdigest() == hashlib.sha256(big.read_bytes()).hexdigest())
    with pytest.raises(FileNotFoundInStorageError):
        s.read("data/nope")
    return out


def test_transient_faults_are_retried_with_identical_results(cloud_backend: StorageTarget, tmp_path):
    target = cloud_backend.with_options(**FAULT_OPTIONS)
    clean = target.child("clean").open()
    expected = _scenario(clean, tmp_path, f"{target.kind}-clean")

    faulty, faults = _faulty(target.child("faulty"), rate=0.3, seed=7)
    got = _scenario(faulty, tmp_path, f"{target.kind}-faulty")
    assert got == expected
    assert expected[0] == [True] * 5 and expected[1] == [False] * 5
    assert faults.requests > 100
    if target.kind == "s3":
        assert faults.calls["UploadPart"] >= 3 and faults.calls["ListObjectsV2"] >= 6
    else:
        assert faults.calls["PUT comp=block"] >= 3 and faults.calls["GET comp=list"] >= 6
    assert faults.faults >= faults.requests * 0.15, (faults.faults, faults.requests)


def test_permanent_error_fails_at_once_naming_the_uri(cloud_backend: StorageTarget):
    target = cloud_backend.with_options(**{"spark.indextables.storage.retry.maxAttempts": "5"})
    s, faults = _faulty(target, permanent_status=403)
    for name, call in (
        ("read", lambda: s.read("a/b.json")),
        ("write", lambda: s.put("a/b.json", b"x")),
        ("conditional write", lambda: s.put_if_absent("a/b.json", b"x")),
        ("list", lambda: s.list("a/")),
        ("stat", lambda: s.stat("a/b.json")),
    ):
        before = faults.requests
        with pytest.raises(StorageError) as info:
            call()
        assert faults.requests - before == 1, f"{name}: a 403 must not be retried"
        message = str(info.value)
        assert target.uri in message and "403" in message, message
        assert not isinstance(info.value, FileNotFoundInStorageError)


def test_transient_errors_give_up_after_max_attempts(cloud_backend: StorageTarget):
    target = cloud_backend.with_options(
        **{"spark.indextables.storage.retry.maxAttempts": "3", "spark.indextables.storage.retry.baseDelayMs": "1"}
    )
    s, faults = _faulty(target, rate=1.0, kinds=("503",))
    with pytest.raises(StorageError) as info:
        s.read("some/key")
    assert faults.requests == 3
    assert "after 3 attempts" in str(info.value) and "503" in str(info.value)
    assert target.uri + "/some/key" in str(info.value)


def test_conditional_write_whose_answer_was_lost_still_reports_the_win(cloud_backend: StorageTarget):
    target = cloud_backend.with_options(**{"spark.indextables.storage.retry.baseDelayMs": "1"})
    ops = {"s3": "PutObject", "azure": "PUT"}[target.kind]
    s, faults = _faulty(target, lose_answers=1, only=lambda op: op == ops)
    # The first PUT reaches the service, then its answer is lost: the retry finds the object.
    assert s.put_if_absent("_transaction_log/00000000000000000001.json", b"mine") is True
    assert faults.lost == 1
    assert s.read("_transaction_log/00000000000000000001.json") == b"mine"
    # A write whose first attempt failed, finding another writer's object, did not win.
    other = target.open()
    other.put("_transaction_log/00000000000000000002.json", b"theirs")
    s2, faults2 = _faulty(target, fail_first=1, kinds=("closed",), only=lambda op: op == ops)
    assert s2.put_if_absent("_transaction_log/00000000000000000002.json", b"mine") is False
    assert faults2.faults == 1 and faults2.calls[ops] == 2
    assert other.read("_transaction_log/00000000000000000002.json") == b"theirs"


# --- cloud: credentials, URIs, options ------------------------------------------------------------


def test_credentials_never_show_in_uri_repr_or_errors(cloud_backend: StorageTarget):
    target = cloud_backend
    secret = S3_TEST_SECRET_KEY if target.kind == "s3" else AZURITE_KEY
    s, _ = _faulty(target, permanent_status=403)
    assert secret not in s.uri and secret not in repr(s)
    assert secret not in repr(Options.of(target.options))
    with pytest.raises(StorageError) as info:
        s.read("k")
    text = "".join(traceback.format_exception(info.value))
    assert secret not in text


def test_credentials_in_the_path_are_refused_without_echoing_them():
    with pytest.raises(InvalidOptionError) as info:
        open_storage("s3://AKIAEXAMPLE:wJalrXUtnFEMIsecret@bucket/table", {})
    assert "wJalrXUtnFEMIsecret" not in str(info.value) and "bucket/table" in str(info.value)
    with pytest.raises(InvalidOptionError) as info:
        open_storage("abfss://c@acct.dfs.core.windows.net/t?sv=2020&sig=SIGSECRET123", {"azure.accountKey": "k"})
    assert "SIGSECRET123" not in str(info.value)
    assert redact_uri("s3://a:b@bucket/p?x=1") == "s3://***@bucket/p"


def test_s3_option_errors_name_the_option():
    with pytest.raises(InvalidOptionError, match="aws.secretKey"):
        open_storage("s3://bucket/t", {"spark.indextables.aws.accessKey": "AKIA"})
    with pytest.raises(InvalidOptionError, match="multipartPartSize"):
        open_storage("s3://bucket/t", {"spark.indextables.s3.multipartPartSize": "1M"})
    with pytest.raises(InvalidOptionError, match="storage.retry.maxAttempts"):
        open_storage("s3://bucket/t", {"spark.indextables.storage.retry.maxAttempts": "0"})
    with pytest.raises(InvalidOptionError, match="s3.endpoint"):
        open_storage("s3://bucket/t", {"spark.indextables.s3.endpoint": "ftp://x"})


def test_s3_missing_bucket_is_named(s3_options: dict[str, str]):
    s = open_storage("s3://indextables-no-such-bucket/t", s3_options)
    with pytest.raises(StorageError, match="bucket 'indextables-no-such-bucket' does not exist"):
        s.list("")
    with pytest.raises(FileNotFoundInStorageError, match="s3://indextables-no-such-bucket/t/k"):
        s.read("k")


def test_s3_uri_forms(s3_bucket: str, s3_options: dict[str, str]):
    a = open_storage(f"s3a://{s3_bucket}/forms/", s3_options)
    assert isinstance(a, S3Storage) and a.uri == f"s3a://{s3_bucket}/forms"
    a.put("k", b"v")
    assert open_storage(f"s3://{s3_bucket}/forms", s3_options).read("k") == b"v"
    whole_bucket = open_storage(f"s3://{s3_bucket}", s3_options)
    assert whole_bucket.read("forms/k") == b"v"


def test_azure_uri_forms_and_credentials(azure_container: str, azure_connection_string: str, azure_endpoint: str):
    endpoint = azure_endpoint
    cs = open_storage(f"az://{azure_container}/forms", {"azure.connectionString": azure_connection_string})
    assert isinstance(cs, AzureStorage) and cs.credential_kind == "connection-string"
    cs.put("k", b"v")
    key_opts = {"spark.indextables.azure.accountKey": AZURITE_KEY, "spark.indextables.azure.endpoint": endpoint}
    for uri in (
        f"abfss://{azure_container}@devstoreaccount1.dfs.core.windows.net/forms",
        f"wasbs://{azure_container}@devstoreaccount1.blob.core.windows.net/forms",
    ):
        s = open_storage(uri, key_opts)
        assert s.credential_kind == "account-key" and s.uri == uri
        assert s.read("k") == b"v"
    named = open_storage(
        f"az://{azure_container}/forms", {**key_opts, "spark.indextables.azure.accountName": "devstoreaccount1"}
    )
    assert named.read("k") == b"v"

    # a SAS token made from the account key
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(
        "devstoreaccount1",
        azure_container,
        account_key=AZURITE_KEY,
        permission=ContainerSasPermissions(read=True, write=True, list=True, delete=True),
        expiry=datetime.now(timezone.utc) + timedelta(hours=1),
    )
    via_sas = open_storage(
        f"az://{azure_container}/forms",
        {"azure.sasToken": sas, "azure.endpoint": endpoint, "azure.accountName": "devstoreaccount1"},
    )
    assert via_sas.credential_kind == "sas"
    assert via_sas.read("k") == b"v" and [f.key for f in via_sas.list("")] == ["k"]
    assert sas not in repr(via_sas)

    # a wrong key is a permanent error naming the URI
    wrong = open_storage(
        f"az://{azure_container}/forms",
        {
            "azure.accountName": "devstoreaccount1",
            "azure.endpoint": endpoint,
            "azure.accountKey": AZURITE_KEY[:-4] + "AAA=",
        },
    )
    with pytest.raises(StorageError, match=f"az://{azure_container}/forms/k") as info:
        wrong.read("k")
    assert AZURITE_KEY[:-4] not in str(info.value)


def test_azure_option_errors_name_the_option():
    with pytest.raises(InvalidOptionError, match="does not name a storage account"):
        open_storage("az://container/t", {})
    with pytest.raises(InvalidOptionError, match="'other'"):
        open_storage("abfss://c@acct.dfs.core.windows.net/t", {"azure.accountName": "other", "azure.accountKey": "k"})
    with pytest.raises(InvalidOptionError, match="azure.clientSecret"):
        open_storage("abfss://c@acct.dfs.core.windows.net/t", {"azure.tenantId": "t", "azure.clientId": "c"})
    with pytest.raises(InvalidOptionError, match="connectionString"):
        open_storage("az://c/t", {"azure.connectionString": "garbage"})
    token = open_storage("abfss://c@acct.dfs.core.windows.net/t", {"azure.bearerToken": "TOKEN-SECRET-123"})
    assert token.credential_kind == "bearer-token" and "TOKEN-SECRET-123" not in repr(token)
    sp = open_storage(
        "abfss://c@acct.dfs.core.windows.net/t",
        {"azure.tenantId": "t", "azure.clientId": "c", "azure.clientSecret": "SP-SECRET"},
    )
    assert sp.credential_kind == "service-principal"
    try:
        import azure.identity  # noqa: F401
    except ImportError:
        with pytest.raises(InvalidOptionError, match="azure-identity"):
            sp.read("k")  # the credential is built on first use
        nothing = open_storage("abfss://c@acct.dfs.core.windows.net/t", {})
        with pytest.raises(InvalidOptionError, match="no Azure credentials"):
            nothing.stat("k")
    else:
        assert type(sp.container_client.credential).__name__ == "ClientSecretCredential"


# --- retry policy ---------------------------------------------------------------------------------


def test_retry_policy_options_and_backoff():
    p = RetryPolicy.from_options(
        Options.of(
            {
                "spark.indextables.storage.retry.maxAttempts": "4",
                "storage.retry.baseDelayMs": "100",
                "storage.retry.maxDelayMs": "300",
            }
        )
    )
    assert (p.max_attempts, p.base_delay_ms, p.max_delay_ms) == (4, 100, 300)
    p.rng = lambda: 0.999
    assert [round(p.delay_s(n), 3) for n in (2, 3, 4, 5)] == [0.1, 0.2, 0.3, 0.3]
    p.rng = lambda: 0.0
    assert [round(p.delay_s(n), 3) for n in (2, 3)] == [0.05, 0.1]
    assert RetryPolicy.from_options(Options.of({})).max_attempts == 5

    sleeps: list[float] = []
    p = RetryPolicy(max_attempts=4, base_delay_ms=10, sleep=sleeps.append)
    calls: list[int] = []

    def flaky(attempt: int) -> str:
        calls.append(attempt)
        if attempt < 3:
            raise ConnectionResetError("reset")
        return "ok"

    assert p.run(flaky, "test") == "ok" and calls == [1, 2, 3] and len(sleeps) == 2

    def permanent(attempt: int) -> None:
        calls.append(attempt)
        raise PermissionError("no")

    calls.clear()
    with pytest.raises(PermissionError) as info:
        p.run(permanent, "test")
    assert calls == [1] and info.value.indextables_attempts == 1


def test_transient_classification():
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError, ServiceResponseError
    from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

    def s3_error(status: int, code: str) -> ClientError:
        return ClientError(
            {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
        )

    assert is_transient(s3_error(503, "SlowDown"))
    assert is_transient(s3_error(500, "InternalError"))
    assert is_transient(s3_error(429, "TooManyRequests"))
    assert is_transient(s3_error(400, "RequestTimeout"))
    assert not is_transient(s3_error(403, "AccessDenied"))
    assert not is_transient(s3_error(404, "NoSuchKey"))
    assert not is_transient(s3_error(400, "InvalidArgument"))
    assert is_transient(ConnectionClosedError(endpoint_url="http://x"))
    assert is_transient(EndpointConnectionError(endpoint_url="http://x"))
    assert is_transient(ReadTimeoutError(endpoint_url="http://x"))
    assert is_transient(ServiceResponseError("reset"))
    assert not is_transient(ResourceNotFoundError("gone"))
    busy = HttpResponseError("busy")
    busy.status_code = 503
    assert is_transient(busy)
    forbidden = HttpResponseError("forbidden")
    forbidden.status_code = 403
    assert not is_transient(forbidden)
    assert not is_transient(ValueError("bug"))
    # azure-core: a body broken off mid-read, without a status, and the blob download's wrapping of it
    import requests
    from azure.core.exceptions import DecodeError

    broken = requests.exceptions.ChunkedEncodingError("Connection broken: ConnectionResetError(104)")
    cut = HttpResponseError(broken, error=broken)
    assert cut.status_code is None and is_transient(cut)
    assert is_transient(HttpResponseError(cut, error=cut))
    garbled = DecodeError("not XML")
    assert not is_transient(HttpResponseError(garbled, error=garbled))
