"""The executor split cache with remote splits on S3 and Azure.

Requests are counted on the real SDK path (tests/faults.py with no faults). A remote split is
downloaded once per machine: repeated reads and 8 racing threads cause one download, two racing
processes (sharing the cache directory, as Python workers of one executor do) one download and
one extraction between them, and a later process finds it on disk. A watcher checks that no
half-written split directory is ever visible. With a small `cache.disk.maxSize` the least recently
used split is evicted, and the usage stays within the bound.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time

import pyarrow as pa
import pytest
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from faults import AzureFaults, S3Faults

from indextables_spark.core.log.model.actions import AddFile
from indextables_spark.config.options import Options
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import SplitCache, get_cache
from indextables_spark.core.split.cache import open_splits
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.storage import open_storage
from indextables_spark.expr.search_query import SearchQuery

pytestmark = pytest.mark.cloud

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "body", "type": "string", "nullable": True, "metadata": {}},
    ],
}
ROWS = 3000


def write_remote_splits(storage, n: int) -> list[AddFile]:
    out = []
    for k in range(n):
        w = SplitWriter(storage, SCHEMA, [], Options.of({"indexing.typemap.body": "text"}))
        w.write_batch(
            pa.record_batch(
                {
                    "id": pa.array(range(k * ROWS, (k + 1) * ROWS), pa.int64()),
                    "body": [f"word{i % 50} split{k} common text" for i in range(ROWS)],
                }
            )
        )
        out.extend(w.finish())
    return out


def counting_storage(target):
    """The target's storage with every request counted (S3: GetObject/HeadObject; Azure: GET/HEAD)."""
    if target.kind == "s3":
        faults = S3Faults()
        return target.open(event_handlers=faults.handlers()), faults, ("GetObject", "HeadObject")
    faults = AzureFaults()
    return target.open(client_kwargs={"transport": faults}), faults, ("GET", "HEAD")


def downloads(faults, ops) -> int:
    return sum(faults.calls[o] for o in ops)


def snapshot_tree(path: str) -> dict[str, int]:
    """File sizes in a split directory (Tantivy's transient `.tantivy-*.lock` files of readers left out)."""
    out = {}
    for d, _dirs, files in os.walk(path):
        for f in files:
            if f.startswith(".tantivy-"):
                continue
            p = os.path.join(d, f)
            try:
                out[os.path.relpath(p, path)] = os.path.getsize(p)
            except FileNotFoundError:
                out[os.path.relpath(p, path)] = -1
    return out


def _fetch_in_child(uri, options, cache_dir, add_json, barrier, results) -> None:
    storage = open_storage(uri, options)
    add = AddFile.from_json(add_json)
    cache = get_cache({"cache.disk.path": cache_dir})
    barrier.wait()
    path = cache.local_dir(storage, add)
    results.put((path, SplitReader(path).count(query=SearchQuery("common")), cache.downloads))


def test_remote_split_cache(cloud_backend, tmp_path):
    target = cloud_backend
    adds = write_remote_splits(target.open(), 4)
    storage, faults, get_ops = counting_storage(target)
    cache_dir = str(tmp_path / "cache")
    cache = SplitCache(cache_dir)

    # 8 threads race on one split; then repeated reads: one download in all
    paths: list[str] = []
    threads = [threading.Thread(target=lambda: paths.append(cache.local_dir(storage, adds[0]))) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(paths) == 8 and len(set(paths)) == 1 and cache.downloads == 1
    fetched = downloads(faults, get_ops)
    assert 1 <= fetched <= 2  # a HEAD (size) and one GET: the split is small
    for _ in range(3):
        assert SplitReader(cache.local_dir(storage, adds[0])).count(query=SearchQuery("split0")) == ROWS
    assert downloads(faults, get_ops) == fetched and cache.downloads == 1

    # two processes race on another split: one download, one extraction, never a partial directory
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(
            target=_fetch_in_child, args=(target.uri, target.options, cache_dir, adds[1].to_json(), barrier, results)
        )
        for _ in range(2)
    ]
    seen: list[tuple[str, dict[str, int]]] = []
    for p in procs:
        p.start()
    while any(p.is_alive() for p in procs):
        for name in os.listdir(cache_dir):
            if not name.startswith("."):
                seen.append((name, snapshot_tree(os.path.join(cache_dir, name))))
        time.sleep(0.002)
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert got[0][:2] == got[1][:2] and got[0][1] == ROWS
    assert sorted(g[2] for g in got) == [0, 1], got  # exactly one of them downloaded
    final = {n: snapshot_tree(os.path.join(cache_dir, n)) for n in os.listdir(cache_dir) if not n.startswith(".")}
    assert sorted(final) == sorted({os.path.basename(paths[0]), os.path.basename(got[0][0])})
    assert any(n == os.path.basename(got[0][0]) for n, _ in seen)
    bad = [(n, sorted(set(final[n].items()) ^ set(tree.items()))) for n, tree in seen if tree != final[n]]
    assert not bad, f"a split directory was visible before it was complete: {bad[:3]}"
    assert not [n for n in os.listdir(cache_dir) if n.startswith((".tmp-", ".trash-"))]

    # LRU eviction under cache.disk.maxSize: fetch 0, 1 (done), touch 0, fetch 2 → 1 is evicted.
    # (Directories with open handles are never evicted: drop this process's handles of split 0.)
    open_splits.forget(paths[0])
    one = cache.usage_bytes() // 2
    small = get_cache({"cache.disk.path": cache_dir, "cache.disk.maxSize": str(int(one * 2.5))})
    small.grace_seconds = 0  # only recency decides here, not "recently handed out"
    assert small.max_bytes == int(one * 2.5)
    time.sleep(0.02)
    small.local_dir(storage, adds[0])  # 0 is now more recent than 1
    time.sleep(0.02)
    dirs = [small.local_dir(storage, a) for a in adds[2:3]]
    assert os.path.isdir(paths[0]) and os.path.isdir(dirs[0]) and not os.path.isdir(got[0][0])
    assert small.usage_bytes() <= small.max_bytes
    time.sleep(0.02)
    d3 = small.local_dir(storage, adds[3])  # 0 is now the least recently used
    assert not os.path.isdir(paths[0]) and os.path.isdir(dirs[0]) and os.path.isdir(d3)
    assert small.usage_bytes() <= small.max_bytes
    # an evicted split is downloaded again on demand and reads the same
    assert SplitReader(small.local_dir(storage, adds[1])).count(query=SearchQuery("split1")) == ROWS


def test_remote_row_store_read_by_ranges(cloud_backend, tmp_path):
    """`cache.rows.lazy=auto` on a remote split at or above cache.rows.lazyMinSplitSize: the index
    files are fetched, the row store is not; reading a column fetches its buffers only, once."""
    from indextables_spark.core.storage.counting import CountingStorage

    target = cloud_backend
    adds = write_remote_splits(target.open(), 1)
    storage = CountingStorage(target.open())
    cache = get_cache({"cache.disk.path": str(tmp_path / "cache"), "cache.rows.lazyMinSplitSize": "0"})
    local = cache.local_dir(storage, adds[0])
    assert not os.path.exists(os.path.join(local, "rows.arrow")) and storage.requests["download_file"] == 0
    reader = SplitReader(local)  # reads the row store's IPC footer
    opened = storage.bytes_read["read_range"]
    ids = pa.Table.from_batches(list(reader.read(query=SearchQuery("split0"), columns=["id"])))
    assert ids.column("id").to_pylist() == list(range(ROWS))
    id_bytes = storage.bytes_read["read_range"] - opened
    bodies = pa.Table.from_batches(list(reader.read(query=SearchQuery("word7"), columns=["body"])))
    assert bodies.num_rows == ROWS // 50 and all("word7 " in b for b in bodies.column("body").to_pylist())
    body_bytes = storage.bytes_read["read_range"] - opened - id_bytes
    from indextables_spark.core.split.format.bundle import load_extracted_footer

    rows_length = load_extracted_footer(local).rows.length
    assert id_bytes > 0 and body_bytes > 0 and id_bytes + body_bytes < rows_length
    before = storage.total_bytes_read
    assert pa.Table.from_batches(list(reader.read(columns=["body", "id"]))).num_rows == ROWS
    assert storage.total_bytes_read == before  # both columns are local now
    # the same split from a cache that fetches whole splits reads the same
    whole = SplitCache(str(tmp_path / "whole"))
    whole.lazy_rows = "false"
    full = SplitReader(whole.local_dir(target.open(), adds[0]))
    assert pa.Table.from_batches(list(full.read(columns=["id", "body"]))).equals(
        pa.Table.from_batches(list(reader.read(columns=["id", "body"])))
    )
