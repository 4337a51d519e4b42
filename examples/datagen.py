"""Generated sample documents, shared by the quickstart, the spark-submit example and the benches."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

VOCAB = (
    "data lake spark search index query table split tantivy arrow parquet stream batch engine "
    "cluster storage object cloud vector token phrase filter range partition schema commit version "
    "snapshot manifest checkpoint compaction merge purge retention bloom skip score relevance "
    "distributed parallel executor driver worker cache footer offset column row field document "
    "analytics pipeline ingestion latency throughput scalable durable atomic consistent isolated"
).split()
RARE = ["zephyr", "quasar", "nebula", "obsidian", "labyrinth"]
REGIONS = ["us-east", "us-west", "eu-central", "ap-south"]
TAGS = ["news", "blog", "docs", "forum", "wiki", "code"]


def documents(n: int, seed: int = 42, start: int = 0) -> pa.Table:
    """n documents: id, title, body, tags, views, score, day, ts, region (vectorised with numpy)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(VOCAB, dtype=object)
    title_words = vocab[rng.integers(0, len(VOCAB), size=(n, 8))]
    body_words = vocab[rng.integers(0, len(VOCAB), size=(n, 50))]
    # ~0.5% of documents mention one rare word, so rare-term queries select a small fraction
    rare_rows = rng.random(n) < 0.005
    body_words[rare_rows, 3] = np.array(RARE, dtype=object)[rng.integers(0, len(RARE), size=int(rare_rows.sum()))]
    titles = [" ".join(r) for r in title_words]
    bodies = [" ".join(r) for r in body_words]
    tag_idx = rng.integers(0, len(TAGS), size=(n, 2))
    tags = [[TAGS[a], TAGS[b]] for a, b in tag_idx]
    days = np.datetime64("2024-01-01") + rng.integers(0, 366, size=n).astype("timedelta64[D]")
    ts = np.datetime64("2024-01-01T00:00:00", "us") + rng.integers(0, 366 * 86400 * 10**6, size=n).astype("timedelta64[us]")
    return pa.table({
        "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "title": pa.array(titles, pa.string()),
        "body": pa.array(bodies, pa.string()),
        "tags": pa.array(tags, pa.list_(pa.string())),
        "views": pa.array(rng.integers(0, 100_000, size=n, dtype=np.int64)),
        "score": pa.array(rng.random(n)),
        "day": pa.array(days, pa.date32()),
        "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "region": pa.array(np.array(REGIONS, dtype=object)[rng.integers(0, len(REGIONS), size=n)], pa.string()),
    })


def spark_dataframe(spark, n: int, partitions: int = 4, seed: int = 42):
    """The same documents as a Spark DataFrame, generated on executors (no driver-side data)."""
    per = -(-n // partitions)

    def gen(batches):
        for b in batches:
            for p in b.column(0).to_pylist():
                count = max(0, min(per, n - p * per))
                if count:
                    yield from documents(count, seed=seed + p, start=p * per).to_batches()

    schema = ("id long, title string, body string, tags array<string>, views long, score double, "
              "day date, ts timestamp, region string")
    return spark.range(partitions, numPartitions=partitions).select("id").mapInArrow(gen, schema)
