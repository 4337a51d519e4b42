"""SplitCache: atomic extraction across processes and threads, remote downloads, eviction, checks."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import threading
import time

import pyarrow as pa
import pytest

from indextables_spark.errors import FileNotFoundInStorageError, SplitFormatError
from indextables_spark.config.options import Options
from indextables_spark.core.split.cache import cache as cache_mod
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import SplitCache, get_cache
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.storage.local import LocalStorage
from indextables_spark.expr.search_query import SearchQuery

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "body", "type": "string", "nullable": True, "metadata": {}},
    ],
}


class RemoteLikeStorage(LocalStorage):
    """Local files that pretend to be remote (no local_path): exercises the download path."""

    def __init__(self, root: str, delay: float = 0.0):
        super().__init__(root, uri="remote://" + root)
        self.delay = delay

    def local_path(self, key: str):
        return None

    def download_file(self, key: str, local_path: str) -> None:
        time.sleep(self.delay)  # widen the race window
        super().download_file(key, local_path)


def write_splits(storage, n_splits=1, rows=2000):
    out = []
    for k in range(n_splits):
        w = SplitWriter(storage, SCHEMA, [], Options.of({"indexing.typemap.body": "text"}))
        w.write_batch(
            pa.record_batch(
                {
                    "id": pa.array(range(k * rows, (k + 1) * rows), pa.int64()),
                    "body": [f"word{i % 50} common text" for i in range(rows)],
                }
            )
        )
        out.extend(w.finish())
    return out


def _fetch_in_child(root, cache_dir, add_json, barrier, results):
    from indextables_spark.core.log.model.actions import AddFile

    storage = RemoteLikeStorage(root, delay=0.3)
    add = AddFile.from_json(add_json)
    barrier.wait()
    cache = get_cache({"cache.disk.path": cache_dir})
    path = cache.local_dir(storage, add)
    r = SplitReader(path)
    results.put((path, r.count(query=SearchQuery("body:word7")), sum(b.num_rows for b in r.read()), cache.downloads))


def test_two_processes_fetch_the_same_split(tmp_path):
    root = str(tmp_path / "t")
    (add,) = write_splits(LocalStorage(root))
    cache_dir = str(tmp_path / "cache")
    ctx = mp.get_context("spawn")  # Tantivy writers/threads are not fork-safe
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_fetch_in_child, args=(root, cache_dir, add.to_json(), barrier, results)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert got[0][:3] == got[1][:3] == (got[0][0], 40, 2000)
    assert sorted(g[3] for g in got) == [0, 1]  # one downloads (file lock), the other finds its directory
    entries = [e for e in os.listdir(cache_dir) if e != ".locks"]
    assert entries == [os.path.basename(got[0][0])]  # one directory, no temp leftovers


def test_threads_fetch_once(tmp_path):
    storage = RemoteLikeStorage(str(tmp_path / "t"), delay=0.2)
    (add,) = write_splits(LocalStorage(storage.root))
    cache = SplitCache(str(tmp_path / "cache"))
    paths = []
    threads = [threading.Thread(target=lambda: paths.append(cache.local_dir(storage, add))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and cache.downloads == 1
    assert sorted(os.listdir(cache.root)) == [".locks", os.path.basename(paths[0])]
    # a second call is served from disk
    assert cache.local_dir(storage, add) == paths[0] and cache.downloads == 1
    assert not os.path.exists(os.path.join(paths[0], ".download"))


def test_local_storage_extracts_without_download(tmp_path):
    storage = LocalStorage(str(tmp_path / "t"))
    (add,) = write_splits(storage)
    cache = get_cache(Options.of({"spark.indextables.cache.disk.path": str(tmp_path / "cache")}))
    assert cache is get_cache({"cache.disk.path": str(tmp_path / "cache")})  # process-wide per root
    d = cache.local_dir(storage, add)
    assert {"meta.json", "rows.arrow", "footer.json"} <= set(os.listdir(d))
    assert SplitReader(d).count() == 2000


def test_eviction_keeps_dirs_in_use(tmp_path):
    storage = LocalStorage(str(tmp_path / "t"))
    adds = write_splits(storage, n_splits=4)
    cache = SplitCache(str(tmp_path / "cache"))
    cache.grace_seconds = 0
    first = cache.local_dir(storage, adds[0])
    reader = SplitReader(first)  # in use by this process
    one = cache.usage_bytes()
    cache.max_bytes = int(one * 2.5)
    second = cache.local_dir(storage, adds[1])
    time.sleep(0.01)
    third = cache.local_dir(storage, adds[2])
    time.sleep(0.01)
    fourth = cache.local_dir(storage, adds[3])
    assert os.path.isdir(first) and os.path.isdir(fourth)
    assert not (os.path.isdir(second) and os.path.isdir(third))
    assert cache.usage_bytes() <= cache.max_bytes
    assert reader.count() == 2000
    # an evicted split is fetched again on demand
    assert SplitReader(cache.local_dir(storage, adds[1])).count() == 2000


def test_the_cache_leaves_min_free_space_on_its_disk(tmp_path):
    """Under `cache.disk.maxSize`, the cache still evicts when its disk would keep less than
    `cache.disk.minFreeSpace` free (a full disk fails every write on the machine, not just ours)."""
    storage = LocalStorage(str(tmp_path / "t"))
    adds = write_splits(storage, n_splits=3)
    cache = get_cache({"cache.disk.path": str(tmp_path / "cache")})
    assert cache.min_free_bytes == 2 * 1024**3 and cache.max_bytes == 10 * 1024**3  # the defaults
    cache.grace_seconds = 0
    first = cache.local_dir(storage, adds[0])
    one = cache.usage_bytes()
    free = shutil.disk_usage(cache.root).free
    # as if the disk had room for about one more split beyond the floor: the oldest goes
    cache = get_cache({"cache.disk.path": str(tmp_path / "cache"), "cache.disk.minFreeSpace": str(free - one // 2)})
    assert cache.limit_bytes(one) < 2 * one
    time.sleep(0.01)
    second = cache.local_dir(storage, adds[1])
    assert os.path.isdir(second) and not os.path.isdir(first)
    assert cache.describe()["limit"] == cache.limit_bytes(cache.usage_bytes()) < cache.max_bytes
    # a floor larger than the disk's free space empties what is not in use, never below zero
    cache.min_free_bytes = free * 2
    assert cache.limit_bytes(one) == 0


def test_a_split_found_cached_is_not_evicted_before_its_caller_opens_it(tmp_path, monkeypatch):
    """Another thread fetching into a full cache must not evict a split between local_dir
    finding it and its caller opening it (seen counting a 10M table whose splits outgrew the
    cache: "missing footer.json (not an extracted split)")."""
    storage = LocalStorage(str(tmp_path / "t"))
    adds = write_splits(storage, n_splits=2)
    cache = SplitCache(str(tmp_path / "cache"))
    cache.grace_seconds = 0.05
    first = cache.local_dir(storage, adds[0])
    cache.max_bytes = cache.usage_bytes()  # room for one split
    time.sleep(0.1)  # its earlier use is past the grace period
    real_isdir = os.path.isdir
    fired = []

    def isdir(path):
        found = real_isdir(path)
        if path == first and not fired:  # right after the check: another thread's fetch
            fired.append(True)
            cache.local_dir(storage, adds[1])
        return found

    monkeypatch.setattr(os.path, "isdir", isdir)
    got = cache.local_dir(storage, adds[0])
    monkeypatch.undo()
    assert fired and got == first
    assert SplitReader(got).count() == 2000


def test_a_split_evicted_by_another_process_right_after_the_check_is_fetched_again(tmp_path, monkeypatch):
    """Another process may evict a split between this one finding it and using it: local_dir
    notices and fetches it again instead of handing out a directory that is gone."""
    storage = LocalStorage(str(tmp_path / "t"))
    adds = write_splits(storage, n_splits=1)
    cache = SplitCache(str(tmp_path / "cache"))
    first = cache.local_dir(storage, adds[0])
    real_isdir = os.path.isdir
    fired = []

    def isdir(path):
        found = real_isdir(path)
        if path == first and not fired:  # what an evicting process does, right after the check
            fired.append(True)
            trash = os.path.join(cache.root, ".trash-other-process")
            os.rename(first, trash)
            shutil.rmtree(trash)
        return found

    monkeypatch.setattr(os.path, "isdir", isdir)
    got = cache.local_dir(storage, adds[0])
    monkeypatch.undo()
    assert fired and got == first and os.path.isdir(got)
    assert SplitReader(got).count() == 2000


def test_stale_temp_dirs_are_cleaned(tmp_path, monkeypatch):
    storage = LocalStorage(str(tmp_path / "t"))
    adds = write_splits(storage, n_splits=2)
    cache = SplitCache(str(tmp_path / "cache"))
    stale = os.path.join(cache.root, ".tmp-deadbeef")
    os.makedirs(stale)
    os.utime(stale, (time.time() - 10_000, time.time() - 10_000))
    cache.max_bytes = 0  # force an eviction pass
    cache.grace_seconds = 0
    cache.local_dir(storage, adds[0])
    assert not os.path.exists(stale)


def test_mismatching_or_missing_split_is_an_error(tmp_path):
    storage = LocalStorage(str(tmp_path / "t"))
    (add,) = write_splits(storage)
    cache = SplitCache(str(tmp_path / "cache"))
    wrong = type(add)(**{**add.__dict__, "size": add.size + 1})
    with pytest.raises(SplitFormatError, match="log records"):
        cache.local_dir(storage, wrong)
    missing = type(add)(**{**add.__dict__, "path": "splits/nope.split"})
    with pytest.raises(FileNotFoundInStorageError, match="nope.split"):
        cache.local_dir(storage, missing)
    # a corrupt split file is refused with the split's name, nothing is cached
    with open(storage.local_path(add.path), "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"garbage!")
    with pytest.raises(SplitFormatError, match=add.path):
        cache.local_dir(storage, add)
    assert os.listdir(cache.root) == [".locks"]  # the fetch lock files only


def test_default_root_is_under_tmpdir(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(cache_mod.tempfile, "tempdir", None)
    assert cache_mod.cache_root(Options()) == os.path.join(str(tmp_path), "indextables-cache")
    shutil.rmtree(os.path.join(str(tmp_path), "indextables-cache"), ignore_errors=True)
