"""Row stores read by ranges (core/split/cache/lazy_rows.py): every read answers exactly as with the row store
extracted whole, fetches only the columns and batches asked for, works from several threads and
from a process that did not fetch the split, and fails clearly without a registered source.
Local tables with `cache.rows.lazy=true` (the same code path as remote splits, whose default it
is); tests/test_cloud_split_cache.py covers S3 and Azure."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import SplitFormatError
from indextables_spark.core.storage import open_storage
from indextables_spark.core.storage.counting import CountingStorage

N = 30_000


def docs(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "body": [f"w{i % 97} common {'rare' if i % 1000 == 7 else 'plain'} text{i % 13}" for i in ids],
            "title": [None if i % 17 == 0 else f"title {i % 101}" for i in ids],
            "views": pa.array([None if i % 19 == 0 else (i * 37) % 5000 for i in ids], pa.int64()),
            "tags": [[f"t{i % 5}", f"u{i % 3}"] for i in ids],
            "region": [("eu", "us", "ap")[i % 3] for i in ids],
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("lazy") / "t")
    opts = {"indexing.typemap.body": "text", "write.chunkRows": "10000"}
    it.write_table(path, docs(0, N), partition_by=["region"], options=opts)
    more = docs(N, 5000).append_column("extra", pa.array([f"x{i}" for i in range(5000)]))
    it.write_table(path, more, options={**opts, "mergeSchema": "true"})
    t = it.IndexTable(path)
    t.delete(where="views < 40")  # positional deletes
    t.delete(where="id IN (7, 1007, 2007)")  # more of them, on rare rows
    return path


def opened(path: str, cache_dir: str, lazy: str) -> it.IndexTable:
    return it.IndexTable(path, {"cache.disk.path": cache_dir, "cache.rows.lazy": lazy})


def canonical(t: pa.Table) -> list:
    return sorted(t.to_pylist(), key=lambda r: (r.get("id"), r.get("_score")))


QUESTIONS = [
    ("search", dict(query="body:rare", columns=["id", "title"])),
    ("search", dict(query="body:rare OR body:w5", where="views > 100 AND title IS NOT NULL", columns=None)),
    ("search", dict(query="body:common", limit=25, columns=["id", "extra", "tags"])),
    ("search", dict(query="body:rare", snippets=["body"], columns=["id"])),
    ("to_arrow", dict(where="region = 'eu' AND id % 7 = 3", columns=["id", "views", "extra"])),
    ("to_arrow", dict(where="title = 'title 5'", columns=None)),
]


def test_answers_equal_whole_row_store(table, tmp_path):
    whole = opened(table, str(tmp_path / "whole"), "false")
    lazy = opened(table, str(tmp_path / "lazy"), "true")
    for kind, kwargs in QUESTIONS:
        args = dict(kwargs)
        if kind == "to_arrow" and "where" in args and "%" in args["where"]:
            args["where"] = "region = 'eu' AND id < 4000"
        a = getattr(whole, kind)(**args)
        b = getattr(lazy, kind)(**args)
        assert a.schema == b.schema and canonical(a) == canonical(b), (kind, args)
        assert canonical(getattr(lazy, kind)(**args)) == canonical(a)  # again, warm
    assert lazy.count("body:rare") == whole.count("body:rare")
    agg = {"v": {"stats": {"field": "views"}}, "r": {"terms": {"field": "title", "size": 5}}}
    assert it.IndexTable(table, {"cache.disk.path": str(tmp_path / "lazy"), "cache.rows.lazy": "true"}).aggregate(
        agg
    ) == it.IndexTable(table, {"cache.disk.path": str(tmp_path / "whole"), "cache.rows.lazy": "false"}).aggregate(agg)
    lazy_dirs = [os.path.join(tmp_path / "lazy", d) for d in os.listdir(tmp_path / "lazy") if not d.startswith(".")]
    assert lazy_dirs and all(not os.path.exists(os.path.join(d, "rows.arrow")) for d in lazy_dirs)
    assert all(
        os.path.exists(os.path.join(d, "rows.arrow"))
        for d in (os.path.join(tmp_path / "whole", x) for x in os.listdir(tmp_path / "whole") if not x.startswith("."))
    )


def test_fetches_only_the_columns_and_batches_asked_for(table, tmp_path):
    def fresh(name):
        opts = {"cache.disk.path": str(tmp_path / name), "cache.rows.lazy": "true"}
        storage = CountingStorage(open_storage(table, opts))
        return it.IndexTable(table, opts, storage=storage), storage

    t, storage = fresh("count")
    t.count("body:rare")  # opens every split: index files + IPC footers
    opening = storage.bytes_read["read_range"]
    t, storage = fresh("all")
    t.to_arrow()  # every column of every batch
    everything = storage.bytes_read["read_range"] - opening
    from indextables_spark.core.split.format.bundle import read_footer

    row_stores = sum(read_footer(t.storage.local_path(f.path), f.path).rows.length for f in t.files())
    assert 0.8 * row_stores < everything <= row_stores

    t, storage = fresh("ids")
    got = t.search("body:rare", columns=["id"])
    ids = storage.bytes_read["read_range"] - opening
    assert got.num_rows > 0 and 0 < ids < 0.25 * everything, (ids, everything)
    storage.reset()
    assert canonical(t.search("body:rare", columns=["id"])) == canonical(got)
    assert storage.total_bytes_read == 0 and storage.requests["read_range"] == 0  # warm: nothing fetched
    t.to_arrow(columns=["id", "title"])  # title too now, every batch: fetched once
    assert storage.bytes_read["read_range"] > 0
    storage.reset()
    t.to_arrow(columns=["title", "id"])
    assert storage.total_bytes_read == 0


def test_threads_and_a_second_process(table, tmp_path):
    cache_dir = str(tmp_path / "c")
    t = opened(table, cache_dir, "true")
    want = canonical(opened(table, str(tmp_path / "w"), "false").to_arrow(columns=["id", "title", "tags"]))
    results, errors = [], []

    def read():
        try:
            results.append(canonical(opened(table, cache_dir, "true").to_arrow(columns=["id", "title", "tags"])))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and all(r == want for r in results)
    assert not [
        n
        for d in os.listdir(cache_dir)
        if not d.startswith(".")
        for n in os.listdir(os.path.join(cache_dir, d, "rows.d"))
        if ".tmp-" in n
    ]
    # another process finds the directories made here (no row store in them) and reads through them
    code = (
        "import json, sys, indextables_spark as it\n"
        f"t = it.IndexTable({table!r}, {{'cache.disk.path': {cache_dir!r}, 'cache.rows.lazy': 'true'}})\n"
        "rows = t.to_arrow(columns=['id', 'views']).num_rows\n"
        "from indextables_spark.core.split.cache.cache import get_cache\n"
        "print(json.dumps([rows, get_cache(t.options).downloads]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == f"[{len(want)}, 0]"
    assert t.count() == len(want)


def test_without_a_registered_source_the_error_says_so(table, tmp_path):
    from indextables_spark.core.split.cache import lazy_rows
    from indextables_spark.core.split.read import reader as reader_module
    from indextables_spark.core.split.cache import open_splits
    from indextables_spark.core.split.cache.cache import get_cache

    t = opened(table, str(tmp_path / "c"), "true")
    add = t.files()[0]
    local = get_cache(t.options).local_dir(t.storage, add)
    open_splits.forget(local)
    with lazy_rows._sources_lock:
        lazy_rows._sources.pop(os.path.abspath(local))
    with pytest.raises(SplitFormatError, match="fetched by ranges and no storage is registered"):
        reader_module.SplitReader(local)
    get_cache(t.options).local_dir(t.storage, add)  # the cache registers it again on every hand-out
    assert reader_module.SplitReader(local).num_rows == add.num_records


def test_option_is_checked(table):
    with pytest.raises(it.IndexTablesError, match="cache.rows.lazy"):
        it.IndexTable(table, {"cache.rows.lazy": "sometimes"}).search("body:rare")


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> str:
    """One split of 60,000 rows of ~120 bytes: ~30 record batches."""
    path = str(tmp_path_factory.mktemp("wide") / "t")
    ids = list(range(60_000))
    body = [f"w{i % 89} filler {'needle' if i % 6000 == 11 else 'hay'} " + "x" * (60 + i % 40) for i in ids]
    it.write_table(
        path, pa.table({"id": pa.array(ids, pa.int64()), "body": body}), options={"indexing.typemap.body": "text"}
    )
    return path


def test_a_top_n_fetches_the_rows_of_its_winners_only(wide, tmp_path):
    """Two phases: scores and row ids first, then only the winners' batches, in one round."""
    from indextables_spark.core.split.format.bundle import read_footer

    whole = opened(wide, str(tmp_path / "whole"), "false").search(
        "body:needle OR body:w3", columns=["id", "body"], limit=10
    )
    opts = {"cache.disk.path": str(tmp_path / "lazy"), "cache.rows.lazy": "true"}
    storage = CountingStorage(open_storage(wide, opts))
    t = it.IndexTable(wide, opts, storage=storage)
    t.count("body:needle")  # the index and the row store's footer
    storage.reset()
    got = t.search("body:needle OR body:w3", columns=["id", "body"], limit=10)
    assert got.to_pylist() == whole.to_pylist() and got.num_rows == 10
    (add,) = t.files()
    footer = read_footer(t.storage.local_path(add.path), add.path)
    per_batch = footer.rows.length / len(footer.batch_rows)
    assert len(footer.batch_rows) >= 20
    # at most one range (metadata and both columns) per winning batch
    assert storage.requests["read_range"] <= 10
    assert storage.bytes_read["read_range"] <= 10 * 1.2 * per_batch


def test_splits_without_a_layout_still_read_by_ranges(wide, tmp_path):
    """A split written before rows.layout: its batches are walked (metadata, then columns)."""
    from indextables_spark.core.split.cache import open_splits
    from indextables_spark.core.split.cache.cache import get_cache

    t = opened(wide, str(tmp_path / "c"), "true")
    (add,) = t.files()
    local = get_cache(t.options).local_dir(t.storage, add)
    os.unlink(os.path.join(local, "rows.layout"))
    open_splits.forget(local)
    want = opened(wide, str(tmp_path / "w"), "false")
    for args in (dict(query="body:needle", columns=["id", "body"]), dict(query="body:w5", limit=7)):
        assert canonical(t.search(**args)) == canonical(want.search(**args))


def test_a_damaged_layout_is_named(wide, tmp_path):
    from indextables_spark.core.split.cache import open_splits
    from indextables_spark.core.split.cache.cache import get_cache

    t = opened(wide, str(tmp_path / "c"), "true")
    (add,) = t.files()
    local = get_cache(t.options).local_dir(t.storage, add)
    with open(os.path.join(local, "rows.layout"), "r+b") as f:
        f.seek(20)
        f.write(b"\x00\x01\x02")
    open_splits.forget(local)
    with pytest.raises(SplitFormatError, match="rows.layout"):
        t.search("body:needle", columns=["id"])
