"""Indexing throughput benchmark (1M rows, 8-word title, 50-word body). Opt-in:

INDEXTABLES_SPLIT_BENCH=1 .venv/bin/python -m pytest tests/test_split_bench.py -s -q
"""

from __future__ import annotations

import os
import random
import time

import pyarrow as pa
import pytest

from indextables_spark.config.options import Options
from indextables_spark.core.split.write.builder import SplitWriter
from indextables_spark.core.split.cache.cache import get_cache
from indextables_spark.expr.model import EqualTo
from indextables_spark.core.split.read.reader import SplitReader
from indextables_spark.core.storage.local import LocalStorage
from indextables_spark.expr.search_query import SearchQuery

pytestmark = pytest.mark.skipif(not os.environ.get("INDEXTABLES_SPLIT_BENCH"), reason="opt-in benchmark")

N = int(os.environ.get("INDEXTABLES_SPLIT_BENCH_ROWS", "1000000"))


def field(name, t):
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


def test_index_1m_rows(tmp_path):
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(20000)] + ["spark", "tantivy", "search"]
    schema = {
        "type": "struct",
        "fields": [
            field("id", "long"),
            field("title", "string"),
            field("body", "string"),
            field("year", "integer"),
            field("tag", "string"),
        ],
    }
    chunk = 100_000
    t0 = time.perf_counter()
    batches = []
    for start in range(0, N, chunk):
        n = min(chunk, N - start)
        batches.append(
            pa.record_batch(
                {
                    "id": pa.array(range(start, start + n), pa.int64()),
                    "title": pa.array([" ".join(rng.choices(vocab, k=8)) for _ in range(n)]),
                    "body": pa.array([" ".join(rng.choices(vocab, k=50)) for _ in range(n)]),
                    "year": pa.array([2000 + i % 25 for i in range(n)], pa.int32()),
                    "tag": pa.array([f"t{i % 100}" for i in range(n)]),
                }
            )
        )
    print(f"\ngenerated {N} rows in {time.perf_counter() - t0:.1f}s")
    storage = LocalStorage(str(tmp_path / "t"))
    w = SplitWriter(
        storage, schema, [], Options.of({"indexing.typemap.title": "text", "indexing.typemap.body": "text"})
    )
    t0 = time.perf_counter()
    for b in batches:
        for piece in b.to_batches() if isinstance(b, pa.Table) else [b]:
            for start in range(0, piece.num_rows, 10_000):  # Spark hands over 10k-row batches
                w.write_batch(piece.slice(start, 10_000))
    adds = w.finish()
    elapsed = time.perf_counter() - t0
    size = sum(a.size for a in adds)
    print(
        f"indexed {N} docs in {elapsed:.1f}s: {N / elapsed:,.0f} docs/s; split {size / 2**20:.0f} MiB "
        f"(uncompressed rows {sum(a.uncompressed_size_bytes for a in adds) / 2**20:.0f} MiB)"
    )
    cache = get_cache({"cache.disk.path": str(tmp_path / "cache")})
    r = SplitReader(cache.local_dir(storage, adds[0]))
    print(f"segments: {r.index.searcher().num_segments}")
    t0 = time.perf_counter()
    hits = r.count(query=SearchQuery("body:spark"))
    t1 = time.perf_counter()
    rows = sum(b.num_rows for b in r.read(query=SearchQuery("body:spark AND body:tantivy"), columns=["id"]))
    t2 = time.perf_counter()
    exact = sum(b.num_rows for b in r.read([EqualTo("tag", "t7")]))
    t3 = time.perf_counter()
    print(
        f"count body:spark = {hits} in {(t1 - t0) * 1000:.1f} ms; read 2-term AND ({rows} rows) "
        f"{(t2 - t1) * 1000:.1f} ms; read tag = 't7' ({exact} rows, all columns) {(t3 - t2) * 1000:.1f} ms"
    )
