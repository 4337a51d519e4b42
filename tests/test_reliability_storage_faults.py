"""Storage faults survived: a real HTTP proxy (tests/fault_proxy.py) in front of moto S3 and Azurite
injects 503/429 throttling, 500, a connection reset mid-body, a truncated body and a 2 s stall into
each storage operation (a whole read, a ranged read, a split's upload in one PUT, an upload in parts:
a part and the completion, the log's conditional put of a version file, a listing page, a batch
delete), and into an IndexTable write and search.

A fault met once is retried (with backoff: the retries are counted from the storage's debug log)
and the operation gives what a fault-free one gives; a fault that persists ends in a StorageError
naming the object and the attempts; a truncated body is never taken for the object; an upload that
did not complete is never visible, and a write whose split upload failed commits nothing.

INDEXTABLES_STORAGE_FAULT_TABLE=path writes the fault × operation table (what happened, requests and
retries observed) as Markdown to path (RELIABILITY.md holds a copy).
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from cmd_helpers import WORDS, rows
from fault_proxy import FaultProxy

import indextables_spark as it
from indextables_spark.errors import StorageError

pytestmark = pytest.mark.cloud

FAULTS = ("503", "429", "500", "reset", "truncate", "stall")
BODY = os.urandom(200_000)
PARTS = os.urandom(1_500_000)  # an upload in parts (S3: 1 part over a 1M threshold; Azure: 6 blocks)
BLOCKS = 6
FAST = {"spark.indextables.storage.retry.baseDelayMs": "1", "spark.indextables.storage.retry.maxDelayMs": "5"}
# shorter than the proxy's 2 s stall: a stalled answer times out and is retried (only where a stall
# is injected: on a loaded machine an emulator's own pauses come near a second)
STALL_TIMEOUT = {"spark.indextables.storage.readTimeoutMs": "1000"}
IN_PARTS = {
    "spark.indextables.s3.multipartThreshold": "1M",
    "spark.indextables.azure.singlePutMaxSize": "256K",
    "spark.indextables.azure.blockSize": "256K",
    "spark.indextables.azure.uploadConcurrency": "1",  # blocks in order: a rule's first is block 0
}
TABLE: list[dict[str, Any]] = []  # one row per case of the matrix, for the Markdown table


@dataclass
class Rig:
    """A fresh table root on one backend, straight to the emulator (`plain`) and through the proxy."""

    kind: str
    uri: str
    direct: dict[str, str]  # options straight to the emulator
    proxy: FaultProxy
    tmp: Any

    @property
    def plain(self) -> Any:
        from indextables_spark.core.storage import open_storage

        return open_storage(self.uri, self.direct)

    def options(self, **extra: str) -> dict[str, str]:
        """Options through the proxy."""
        where = "s3.endpoint" if self.kind == "s3" else "azure.endpoint"
        return {**self.direct, **FAST, f"spark.indextables.{where}": self.proxy.endpoint, **extra}

    def storage(self, **extra: str) -> Any:
        from indextables_spark.core.storage import open_storage

        return open_storage(self.uri, self.options(**extra))


@pytest.fixture(scope="module")
def proxies() -> Iterator[dict[str, FaultProxy]]:
    """One proxy per emulator for the module: the same endpoint lets the tests share a client."""
    running: dict[str, FaultProxy] = {}
    yield running
    for proxy in running.values():
        proxy.close()


@pytest.fixture
def rig(cloud_backend, request, tmp_path, proxies) -> Rig:
    upstream = (
        cloud_backend.options["spark.indextables.s3.endpoint"]
        if cloud_backend.kind == "s3"
        else request.getfixturevalue("azure_endpoint")
    )
    proxy = proxies.get(upstream) or proxies.setdefault(upstream, FaultProxy(upstream))
    proxy.clear()  # no rule, no request of an earlier test
    return Rig(cloud_backend.kind, cloud_backend.uri, dict(cloud_backend.options), proxy, tmp_path)


@contextmanager
def retries() -> Iterator[list[str]]:
    """The retries RetryPolicy makes in the block (its debug records 'transient ..., retrying')."""
    seen: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "retrying in" in record.getMessage():
                seen.append(record.getMessage())

    logger = logging.getLogger("indextables_spark.core.storage")
    handler, level = Grab(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# -- the operations: each sets up its objects and returns (method, target pattern, act) --------------

Act = Callable[[Any], Any]


def _read(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    rig.plain.put("o/blob.bin", BODY)

    def act(s: Any) -> None:
        assert s.read("o/blob.bin") == BODY

    return "GET", r"/o/blob\.bin", act, {}


def _read_range(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    rig.plain.put("o/blob.bin", BODY)

    def act(s: Any) -> None:
        assert s.read_range("o/blob.bin", 1_000, 150_000) == BODY[1_000:150_000]

    return "GET", r"/o/blob\.bin", act, {}


def _upload(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    local = rig.tmp / "split.bin"
    local.write_bytes(BODY)

    def act(s: Any) -> None:
        s.upload_file("o/part-0.split", str(local))
        assert rig.plain.read("o/part-0.split") == BODY

    return "PUT", r"/o/part-0\.split", act, {}


def _in_parts(rig: Rig) -> tuple[Act, dict[str, str]]:
    local = rig.tmp / "big.bin"
    local.write_bytes(PARTS)

    def act(s: Any) -> None:
        s.upload_file("o/big.split", str(local))
        assert rig.plain.read("o/big.split") == PARTS

    return act, IN_PARTS


def _upload_part(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    act, extra = _in_parts(rig)
    return "PUT", (r"[?&]partNumber=1(&|$)" if rig.kind == "s3" else r"comp=block&"), act, extra


def _complete_upload(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    act, extra = _in_parts(rig)
    return ("POST", r"[?&]uploadId=", act, extra) if rig.kind == "s3" else ("PUT", r"comp=blocklist", act, extra)


VERSION = "_transaction_log/00000000000000000001.json"


def _put_if_absent(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    data = b'{"commitInfo":{"operation":"WRITE"}}\n'

    def act(s: Any) -> None:
        assert s.put_if_absent(VERSION, data) is True  # ours, even when its answer was lost
        assert rig.plain.read(VERSION) == data

    return "PUT", r"/_transaction_log/0+1\.json", act, {}


def _list(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    names = [f"o/l-{i}.bin" for i in range(5)]
    for n in names:
        rig.plain.put(n, n.encode())

    def act(s: Any) -> None:
        assert [f.key for f in s.list("o/")] == names

    return "GET", r"list-type=2|comp=list", act, {}


def _delete(rig: Rig) -> tuple[str, str, Act, dict[str, str]]:
    names = ["o/d-0.bin", "o/d-1.bin"]
    for n in names:
        rig.plain.put(n, b"x")

    def act(s: Any) -> None:
        s.delete(names)
        assert rig.plain.list("o/") == []

    return "POST", r"[?&]delete|comp=batch", act, {}


OPS: dict[str, Callable[[Rig], tuple[str, str, Act, dict[str, str]]]] = {
    "read": _read,
    "read_range": _read_range,
    "upload": _upload,
    "upload_part": _upload_part,
    "complete_upload": _complete_upload,
    "put_if_absent": _put_if_absent,
    "list": _list,
    "delete": _delete,
}


# -- one fault, met once: retried, and the same result -----------------------------------------------


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_met_once_is_retried(rig, fault, op):
    method, pattern, act, extra = OPS[op](rig)
    storage = rig.storage(**extra, **(STALL_TIMEOUT if fault == "stall" else {}))
    rule = rig.proxy.rule(fault, method=method, path=pattern, times=1)
    with retries() as retried:
        act(storage)
    requests = rig.proxy.count(method, pattern)
    assert rule.hits == 1
    # requests without a fault: one, but for Azure's upload in parts, 6 blocks (the rule strikes one)
    base = BLOCKS if rig.kind == "azure" and op == "upload_part" else 1
    if rig.kind == "s3" and fault == "truncate" and method == "PUT":
        # S3's answer to a PUT is its status and headers (the ETag); the empty body cut short
        # changes nothing: the write happened and is taken as done
        assert requests == base and not retried
    elif rig.kind == "azure" and fault in ("reset", "truncate") and op.startswith("read"):
        # azure-storage-blob's downloader reads a body broken off again itself (1 s later)
        assert requests == base + 1 and not retried
    else:
        assert requests == base + 1 and len(retried) == 1, (retried, requests)
    read_back = rig.proxy.count("GET", r"/_transaction_log/0+1\.json") if op == "put_if_absent" else 0
    TABLE.append(
        {
            "kind": rig.kind,
            "op": op,
            "fault": fault,
            "requests": requests,
            "retries": len(retried),
            "read_back": read_back,
        }
    )


def test_a_stall_within_the_read_timeout_is_waited_for(rig):
    """With the default read timeout (60 s) a 2 s stall is no failure: one request, no retry."""
    _, pattern, act, _ = _read_range(rig)
    storage = rig.storage()
    rig.proxy.rule("stall", method="GET", path=pattern)
    with retries() as retried:
        act(storage)
    assert rig.proxy.count("GET", pattern) == 1 and not retried


@pytest.mark.parametrize("cloud_backend", ["s3"], indirect=True)
def test_s3_reads_through_the_sdk_survive_each_fault(rig):
    """The same faults on S3 reads with the lean presigned path off (`s3.presignedReads=false`)."""
    _, pattern, act, _ = _read_range(rig)
    storage = rig.storage(**{"spark.indextables.s3.presignedReads": "false"}, **STALL_TIMEOUT)
    for fault in FAULTS:
        rig.proxy.clear()
        rig.proxy.rule(fault, method="GET", path=pattern)
        with retries() as retried:
            act(storage)
        assert rig.proxy.count("GET", pattern) == 2 and len(retried) == 1, fault


def test_a_conflict_stays_a_conflict(rig):
    """A conditional put that failed (never reached the service) and meets another writer's object
    on retry reports the conflict: the object read back is not ours."""
    rig.plain.put(VERSION, b"theirs\n")
    rig.proxy.rule("503", method="PUT", path=r"/_transaction_log/")
    assert rig.storage().put_if_absent(VERSION, b"ours\n") is False
    assert rig.plain.read(VERSION) == b"theirs\n"


# -- a fault that persists: a clear error naming the object and the attempts --------------------------

PERSISTENT = [(op, "503") for op in OPS] + [
    ("read_range", "429"),
    ("read_range", "500"),
    ("read_range", "reset"),
    ("read_range", "truncate"),
    ("read_range", "stall"),
    ("upload", "reset"),
    ("upload", "500"),
    ("put_if_absent", "reset"),
    ("list", "truncate"),
]
NAMED = {  # the key each operation's error names
    "read": "o/blob.bin",
    "read_range": "o/blob.bin",
    "upload": "o/part-0.split",
    "upload_part": "o/big.split",
    "complete_upload": "o/big.split",
    "put_if_absent": VERSION,
    "list": "o/",
    "delete": "o/d-0.bin",
}


@pytest.mark.parametrize("op,fault", PERSISTENT)
def test_a_persistent_fault_names_the_object_and_the_attempts(rig, op, fault):
    method, pattern, act, extra = OPS[op](rig)
    attempts = 2 if rig.kind == "azure" and fault in ("reset", "truncate") and op.startswith("read") else 3
    storage = rig.storage(
        **extra,
        **{"spark.indextables.storage.retry.maxAttempts": str(attempts)},
        **(STALL_TIMEOUT if fault == "stall" else {}),
    )
    rig.proxy.rule(fault, method=method, path=pattern, times=None)
    with pytest.raises(StorageError) as e:
        act(storage)
    message = str(e.value)
    assert rig.uri.rstrip("/") + "/" + NAMED[op] in message and f"after {attempts} attempts" in message, message
    requests = rig.proxy.count(method, pattern)
    if rig.kind == "azure" and fault in ("reset", "truncate") and op.startswith("read"):
        # within each attempt Azure's blob download reads a body broken off again itself (up to 3
        # requests, 1 s apart); a reset that lands before the headers were read ends the attempt
        assert attempts <= requests <= 3 * attempts and (fault == "reset" or requests == 3 * attempts), requests
    elif rig.kind == "azure" and op == "upload_part":
        # block 0 failed 3 times; the block after it may have started before the upload stopped
        assert requests in (attempts, 2 * attempts), rig.proxy.requests
    else:
        assert requests == attempts, rig.proxy.requests
    if op in ("upload", "upload_part", "complete_upload", "put_if_absent"):
        key = {"upload": "o/part-0.split", "put_if_absent": VERSION}.get(op, "o/big.split")
        assert rig.plain.stat(key) is None  # nothing partial is visible


# -- end to end: IndexTable write and search -----------------------------------------------------------

DATA = rows(120)
QUERY = f"body:{WORDS[1]}"


def _table(rig: Rig, name: str, through_proxy: bool, **extra: str) -> it.IndexTable:
    opts = rig.options(**extra) if through_proxy else dict(rig.direct)
    opts["spark.indextables.indexing.typemap.body"] = "text"
    return it.IndexTable(rig.uri.rstrip("/") + "/" + name, opts)


def _found(t: it.IndexTable) -> list[tuple[Any, ...]]:
    got = t.search(QUERY, columns=["id", "body", "day"], limit=10_000)
    return sorted(zip(*(got.column(c).to_pylist() for c in ("id", "body", "day"))))


def test_write_and_search_through_faults_equal_a_clean_run(rig):
    clean = _table(rig, "clean", through_proxy=False)
    clean.write(DATA, partition_by=["day"])
    expected = _found(clean)
    assert expected and clean.count(QUERY) == len(expected)

    faulty = _table(rig, "faulty", through_proxy=True, **STALL_TIMEOUT)
    splits = r"/faulty/day%3D[^/]+/splits/"
    for fault in ("503", "reset", "429"):  # one fault on each of the three split uploads
        rig.proxy.rule(fault, method="PUT", path=splits)
    rig.proxy.rule("stall", method="PUT", path=r"/faulty/_transaction_log/0+\.json")  # the commit's answer lost
    with retries() as retried:
        faulty.write(DATA, partition_by=["day"])
    assert len(retried) >= 4 and all(r.hits == 1 for r in rig.proxy.rules)
    assert faulty.version() == 0  # the lost answer was our commit: not taken for a conflict, not committed twice
    assert [f.num_records for f in sorted(faulty.files(), key=lambda f: f.path)] == [40, 40, 40]

    rig.proxy.clear()
    for fault in ("truncate", "reset", "500", "503", "stall"):
        rig.proxy.rule(fault, method="GET", path=splits)
    again = _table(rig, "faulty", through_proxy=True, **STALL_TIMEOUT)  # a new reader: no split cached
    with retries() as retried:
        assert _found(again) == expected
    assert again.count(QUERY) == len(expected)
    assert len(retried) >= 3 and sum(r.hits for r in rig.proxy.rules) >= 3


def test_a_failed_split_upload_commits_nothing(rig):
    t = _table(rig, "t", through_proxy=True, **{"spark.indextables.storage.retry.maxAttempts": "3"})
    t.write(DATA.slice(0, 30), partition_by=["day"])
    before = _found(t)
    rig.proxy.rule("reset", method="PUT", path=r"/t/day%3D2024-01-02/splits/", times=None)  # cut mid-upload
    with pytest.raises(StorageError, match=r"cannot write .*/t/day=2024-01-02/splits/.*\.split.* after 3 attempts"):
        t.write(DATA.slice(30), partition_by=["day"])
    log = [f.key for f in rig.plain.list("t/_transaction_log/") if f.key.endswith(".json")]
    assert log == ["t/_transaction_log/00000000000000000000.json"]  # no version 1
    assert t.version() == 0 and _found(t) == before
    live = {f.path for f in t.files()}
    on_store = {f.key[len("t/") :] for f in rig.plain.list("t/") if f.key.endswith(".split")}
    assert on_store == live  # the failed append's uploaded splits deleted again, nothing partial


def test_a_truncated_split_never_gives_rows(rig):
    t = _table(rig, "t", through_proxy=False)
    t.write(DATA, partition_by=["day"])
    reader = _table(rig, "t", through_proxy=True, **{"spark.indextables.storage.retry.maxAttempts": "2"})
    rig.proxy.rule("truncate", method="GET", path=r"/t/day%3D[^/]+/splits/", times=None)
    with pytest.raises(StorageError, match=r"/t/day=2024-01-0\d/splits/.*after 2 attempts"):
        _found(reader)


# -- the table ---------------------------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="module")
def _write_table() -> Iterator[None]:
    yield
    path = os.environ.get("INDEXTABLES_STORAGE_FAULT_TABLE")
    if path and TABLE:
        with open(path, "w") as f:
            f.write(fault_table(TABLE))


def fault_table(cases: list[dict[str, Any]]) -> str:
    """Markdown: a row per operation and store, a column per fault; each cell "ok R / N": the
    operation gave the fault-free result after R requests the proxy saw for it and N retries of
    RetryPolicy ("read back": the conditional put read the object to decide a lost answer)."""
    by = {(c["kind"], c["op"], c["fault"]): c for c in cases}

    def cell(kind: str, op: str, fault: str) -> str:
        c = by.get((kind, op, fault))
        if c is None:
            return "—"
        return f"ok {c['requests']} / {c['retries']}" + (", read back" if c["read_back"] else "")

    lines = ["| operation | store | " + " | ".join(FAULTS) + " |", "|---|---|" + "---|" * len(FAULTS)]
    for op in OPS:
        for kind, store in (("s3", "S3"), ("azure", "Azure")):
            lines.append(f"| {op} | {store} | " + " | ".join(cell(kind, op, f) for f in FAULTS) + " |")
    return "\n".join(lines) + "\n"


def test_fault_table_renders():
    text = fault_table([{"kind": "s3", "op": "read", "fault": "503", "requests": 2, "retries": 1, "read_back": 0}])
    assert "| read | S3 | ok 2 / 1 | — | — | — | — | — |" in text and "| delete | Azure | — |" in text
