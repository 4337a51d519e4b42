"""A vector search of a table on object storage with an empty cache fetches what it reads
(core/split/cache/file_pages.py): the compressed index and the file's row ids, then the pages of
its candidates' vectors, not the vectors file whole; answers equal a whole fetch's, under
filters, fusion and deletes, and the pages never fetched are never read (holes filled with 0xff,
which reads as NaN)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.core.split.cache import file_pages, sparse
from indextables_spark.core.split.format.bundle import RangeSource, read_footer
from indextables_spark.core.storage import open_storage
from indextables_spark.core.storage.counting import CountingStorage

ROWS, DIMS = 40_000, 64  # above the exact-search threshold (read/vector/nearest.py): the index is searched


def _data() -> tuple[pa.Table, np.ndarray]:
    rng = np.random.default_rng(11)
    centers = rng.standard_normal((40, DIMS)).astype(np.float32) * 4
    x = (centers[rng.integers(0, 40, ROWS)] + rng.standard_normal((ROWS, DIMS))).astype(np.float32)
    words = np.array(["alpha", "beta", "gamma", "delta"], dtype=object)
    return (
        pa.table(
            {
                "id": pa.array(np.arange(ROWS, dtype=np.int64)),
                "body": [f"{w} doc" for w in words[rng.integers(0, 4, ROWS)]],
                "tag": pa.array(rng.integers(0, 100, ROWS, dtype=np.int64)),
                "emb": pa.array(list(x), pa.list_(pa.float32())),
            }
        ),
        x,
    )


OPTIONS = {"spark.indextables.indexing.typemap.body": "text", "spark.indextables.indexing.vector.emb": f"{DIMS},l2"}


def _open(uri: str, options: dict, cache, lazy: str = "true") -> tuple[it.IndexTable, CountingStorage]:
    opts = {**options, "spark.indextables.cache.disk.path": str(cache), "spark.indextables.cache.rows.lazy": lazy}
    storage = CountingStorage(open_storage(uri, opts))
    return it.IndexTable(uri, opts, storage=storage), storage


@pytest.fixture
def vector_table(s3_uri, s3_options):
    data, x = _data()
    it.write_table(s3_uri, data, options={**s3_options, **OPTIONS})
    return s3_uri, s3_options, x


def test_a_cold_vector_search_fetches_the_index_and_its_candidates(vector_table, tmp_path, monkeypatch):
    uri, options, x = vector_table
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    part, storage = _open(uri, options, tmp_path / "part")
    whole, _ = _open(uri, options, tmp_path / "whole", lazy="false")
    (f,) = part.files()
    footer = read_footer(RangeSource(f.size, lambda s, e: storage.read_range(f.path, s, e)), f.path)
    sizes = {b.name: b.length for b in footer.files}
    vectors_file = next(n for n in sizes if n.endswith(".f32"))
    index_file = next(n for n in sizes if n.endswith(".faiss"))
    storage.reset()
    q = x[123] + 0.01  # (3 nearest: 48 candidates, apart in a file of 2,600 pages)
    got = part.search(vector=q, limit=3, columns=["id", "emb"])
    want = whole.search(vector=q, limit=3, columns=["id", "emb"])
    assert got.equals(want) and got.column("id")[0].as_py() == 123
    cold = storage.bytes_read["read_range"]
    # the index whole, the row ids, the candidates' pages: far from the vectors file
    assert cold < sizes[index_file] + 0.2 * sizes[vectors_file], (cold, sizes)
    (d,) = [tmp_path / "part" / n for n in os.listdir(tmp_path / "part") if not n.startswith(".")]
    present = np.unpackbits(
        np.frombuffer((d / (vectors_file + file_pages.PAGES_SUFFIX)).read_bytes(), np.uint8), bitorder="little"
    )
    assert 0 < present.sum() < 0.1 * len(present)
    # the same search again reads nothing more; others read only their own candidates' pages
    storage.reset()
    assert part.search(vector=q, limit=3, columns=["id", "emb"]).equals(want)
    assert storage.bytes_read["read_range"] == 0
    for i, where in [(5, None), (77, "tag < 10"), (901, "tag = 3"), (4000, "body = 'alpha'")]:
        q = x[i] + 0.01
        assert part.search(vector=q, limit=7, where=where, columns=["id", "emb"]).equals(
            whole.search(vector=q, limit=7, where=where, columns=["id", "emb"])
        ), where
    hybrid = dict(vector=x[42], limit=8, columns=["id"], fusion="rrf")
    assert part.search("body:beta", **hybrid).equals(whole.search("body:beta", **hybrid))


def test_deletes_and_a_complete_fetch_after_pages(vector_table, tmp_path, monkeypatch):
    """Pages fetched, then rows deleted (a new version), then the split fetched whole (a read
    that needs everything): every answer equals a whole fetch's."""
    uri, options, x = vector_table
    monkeypatch.setattr(sparse, "HOLE_FILL", b"\xff")
    part, _ = _open(uri, options, tmp_path / "part")
    q = x[300] + 0.01
    first = part.search(vector=q, limit=5, columns=["id"])
    assert first.column("id")[0].as_py() == 300
    it.IndexTable(uri, options).delete("id = 300")
    part, _ = _open(uri, options, tmp_path / "part")
    whole, _ = _open(uri, options, tmp_path / "whole", lazy="false")
    got = part.search(vector=q, limit=5, columns=["id"])
    assert 300 not in got.column("id").to_pylist()
    assert got.equals(whole.search(vector=q, limit=5, columns=["id"]))
    everything = part.to_arrow(columns=["id", "emb"]).sort_by("id")
    assert everything.equals(whole.to_arrow(columns=["id", "emb"]).sort_by("id"))
    assert part.search(vector=x[9], limit=5, columns=["id"]).equals(whole.search(vector=x[9], limit=5, columns=["id"]))
