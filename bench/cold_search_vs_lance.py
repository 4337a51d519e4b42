"""Cold and warm top-10 full-text searches on object storage: indextables vs Lance, on the same
documents, behind the same latency proxy, in the same run (issue #46).

    .venv/bin/python bench/cold_search_vs_lance.py [--rows 1000000] [--splits 10] [--runs 3]
        [--latencies 20,0] [--warm-repeats 20] [--keep-data DIR] [--s3-endpoint URL]
        [--ours-only | --lance-only] [--pythonpath DIR[,DIR...]] [--requests] [--json PATH]

    # two checkouts of our code on one table (each searched by its own fresh processes):
    .venv/bin/python bench/cold_search_vs_lance.py --keep-data /tmp/cold-46 \\
        --pythonpath /path/to/old-checkout/src,/path/to/new-checkout/src

Data: --rows short documents (`id` int64, `text` of 8-20 words drawn from a Zipf-like vocabulary of
synthetic words; seeded numpy) with planted terms: a rare term (~0.01% of the rows: ~100 at 1M), a
medium term (~1%: ~10,000), two terms of ~3% each for an AND query, and a two-word phrase (~0.1% of
the rows hold it; each of its words is also planted alone in ~1%). The hits each query must find
are counted from the generator.

Tables, on a moto S3 server (our own, scripts/moto_server.py, or --s3-endpoint):
- ours:  `it.write_table("s3://<bucket>/ours", docs, options={"indexing.typemap.text": "text",
         "write.chunkRows": rows / splits})`: --splits splits, `text` indexed with the default
         tokenizer, `id` a default column.
- Lance: `lance.write_dataset(docs, "s3://<bucket>/lance", storage_options=...)` then
         `create_scalar_index("text", "INVERTED", with_position=True, stem=False,
         remove_stop_words=False)` (positions for the phrase; no stemming and no stop words, like
         Tantivy's default tokenizer, so both sides match the same rows).
--keep-data DIR copies the written objects to DIR (with the parameters that made them); a later run
with the same --rows/--splits loads them into a fresh moto server instead of writing again (with
--s3-endpoint, a bucket still on that server is used as it is).

The proxy (bench/s3_proxy.py): every search reads S3 through an HTTP proxy in this process that
serves object GET/HEAD (Range honoured) from memory (moto reads the whole object for every ranged
GET, under a lock: that would bill moto's work), forwards everything else (listings, ...) to moto,
adds a fixed delay to every request (--latencies, ms, each in turn: ~20 ms models S3's first byte,
0 shows the CPU/bandwidth floor) and records every request (key, byte range, body bytes).

Queries, top 10 by score, returning `id` and `text` (and the score):
- ours:  `IndexTable(uri, s3 options + {"cache.disk.path": <empty temp dir>}).search(q,
         columns=["id", "text"], limit=10)` with q `text:<rare>`, `text:<medium>`,
         `text:<a> AND text:<b>`, `text:"<w1> <w2>"`
- Lance: `lance.dataset(uri, storage_options=...).to_table(full_text_query=Q, columns=["id", "text"],
         limit=10)` with Q `MatchQuery(term, "text")`, `MatchQuery("<a> <b>", "text",
         operator=FullTextOperator.AND)`, `PhraseQuery("<w1> <w2>", "text")` (lance.query).

Cold: each query in a fresh process (a subprocess; for ours with PYTHONPATH=<checkout src>: the
worktree of this script by default, or each of --pythonpath in turn) with an empty split cache
(and TMPDIR) in a new temp dir, deleted afterwards; --runs times, interleaved between the sides.
Reported: the query's time (min-max over the runs; imports and process start excluded, the table
opened before), the time to open the table (ours: `IndexTable(...)` + `snapshot()`, the
transaction log; Lance: `lance.dataset(...)`, its manifest), and what the proxy served for
open + query: requests, body bytes (MB and % of the side's table: the sum of its objects' sizes).
Warm: in the first cold run's process, after the cold query, the same query --warm-repeats more
times (median; the requests they make are counted too).

Breakdown: each request of OUR side is mapped to what it read: transaction log files, or, inside a
split, the bundled file its byte range overlaps (by extension: .term, .idx, .pos, .fieldnorm, .fast,
.store, meta.json; rows.arrow, the split footer, other), from the splits' footers
(core/split/format/bundle.py `read_footer`); printed per query next to the table's own bytes of
each kind (bytes, and the requests touching the kind; a request over several kinds counts for
each), and the bytes read more than once (overlapping ranges of one object). Lance's objects get the
same by file (manifest, index files, data). --requests prints every request of our first cold run of
each query with what it read.

The numbers: "cold" is what a new process (a fresh executor, a serverless function) pays for its
first search of a table it has not read; "fetched" is what such a search costs in object-store
traffic; "warm" is the steady state of a long-running process. Ratios are ours / Lance (below 1:
ours is faster / fetches less). The bytes and requests do not depend on the machine; the times do
(both sides and the proxy share its cores: compare sides within one run, not across runs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from s3_proxy import Request, S3Proxy, cold_child, lance_storage_options, s3_options

if TYPE_CHECKING:
    import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULT_MARK = "@@cold-search-result@@ "
SEED = 46
GENERATOR = 1  # bump when the documents change: a --keep-data copy of other documents is not reused
LIMIT = 10
OURS_PREFIX, LANCE_PREFIX = "ours", "lance"
LOG_DIR = "_transaction_log/"

RARE, MEDIUM, AND_A, AND_B, PHRASE = "zanzibar", "harbor", "copper", "lantern", ("quiet", "river")
PLANTED = {RARE: 1e-4, MEDIUM: 1e-2, AND_A: 0.03, AND_B: 0.03, PHRASE[0]: 1e-2, PHRASE[1]: 1e-2}
PHRASE_SHARE = 1e-3
KIND_ORDER = [
    "log",
    "footer",
    "meta.json",
    ".term",
    ".idx",
    ".pos",
    ".fieldnorm",
    ".fast",
    ".store",
    ".del",
    ".layout",
    "rows.arrow",
    "other",
]


@dataclass(frozen=True)
class Query:
    name: str
    ours: str  # our query syntax
    lance: dict[str, str]  # {"kind": "match" | "and" | "phrase", "text": ...}: built in Lance's process


QUERIES = [
    Query("rare", f"text:{RARE}", {"kind": "match", "text": RARE}),
    Query("medium", f"text:{MEDIUM}", {"kind": "match", "text": MEDIUM}),
    Query("AND", f"text:{AND_A} AND text:{AND_B}", {"kind": "and", "text": f"{AND_A} {AND_B}"}),
    Query("phrase", f'text:"{PHRASE[0]} {PHRASE[1]}"', {"kind": "phrase", "text": " ".join(PHRASE)}),
]


@dataclass(frozen=True)
class Side:
    label: str  # "ours", "ours:<checkout>", "lance"
    kind: str  # "ours" | "lance"
    pythonpath: str | None = None


@dataclass
class Run:
    """One cold run (fresh process) of one query on one side, at one latency."""

    open_s: float
    query_s: float
    hits: int | None
    top_ids: list[int]
    top_words: list[int]  # words in each of the top 10 texts (ties of BM25 on short texts)
    module: str
    requests: dict[str, int]  # phase -> requests (phases: open, query, warm)
    nbytes: dict[str, int]  # phase -> response body bytes
    kinds: dict[str, list[int]]  # kind -> [bytes, requests] of open + query
    reread: int  # bytes of open + query fetched more than once (overlapping ranges of one object)
    warm_s: list[float] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)  # open + query requests (the first run only)

    @property
    def cold_requests(self) -> int:
        return self.requests.get("open", 0) + self.requests.get("query", 0)

    @property
    def cold_bytes(self) -> int:
        return self.nbytes.get("open", 0) + self.nbytes.get("query", 0)


# ---- the documents -------------------------------------------------------------------------------------


def documents(rows: int, seed: int = SEED) -> tuple[pa.Table, dict[str, int]]:
    """`rows` documents (id, text) and the rows each query of QUERIES matches."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    planted = [RARE, MEDIUM, AND_A, AND_B, *PHRASE]
    vocab: list[str] = []
    seen = set(planted)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    while len(vocab) < 5000:
        w = "".join(rng.choice(letters, rng.integers(3, 10)))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    ids = {w: len(vocab) + i for i, w in enumerate(planted)}
    vocab += planted
    zipf = 1.0 / (np.arange(5000) + 10.0)
    lengths = rng.integers(8, 21, rows)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    words = rng.choice(5000, size=int(lengths.sum()), p=zipf / zipf.sum()).astype(np.int32)

    def docs(share: float) -> np.ndarray:
        return rng.choice(rows, size=max(1, round(rows * share)), replace=False)

    for w, share in PLANTED.items():
        d = docs(share)
        words[starts[d] + rng.integers(0, lengths[d])] = ids[w]
    d = docs(PHRASE_SHARE)
    at = starts[d] + rng.integers(0, lengths[d] - 1)
    words[at], words[at + 1] = ids[PHRASE[0]], ids[PHRASE[1]]

    def has(w: str) -> np.ndarray:
        return np.add.reduceat((words == ids[w]).astype(np.int32), starts) > 0

    doc_of = np.repeat(np.arange(rows), lengths)
    pair = (words[:-1] == ids[PHRASE[0]]) & (words[1:] == ids[PHRASE[1]]) & (doc_of[:-1] == doc_of[1:])
    hits = {
        "rare": int(has(RARE).sum()),
        "medium": int(has(MEDIUM).sum()),
        "AND": int((has(AND_A) & has(AND_B)).sum()),
        "phrase": int(np.unique(doc_of[:-1][pair]).size),
    }
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    tokens = pa.ListArray.from_arrays(offsets, pa.array(vocab).take(pa.array(words)))
    text = pc.binary_join(tokens, " ")
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "text": text}), hits


# ---- the tables on S3 ----------------------------------------------------------------------------------


@dataclass
class Data:
    bucket: str
    hits: dict[str, int]
    sizes: dict[str, int]  # prefix -> bytes of its objects
    keys: list[str]  # every object of the bucket ("bucket/key")
    reused: str  # how the tables got there


def list_objects(endpoint: str, bucket: str, prefix: str = "") -> dict[str, int]:
    """key -> size of the objects of `bucket` under `prefix` (straight from the emulator)."""
    from cloud_bench import s3_client

    out: dict[str, int] = {}
    for page in s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


def write_tables(endpoint: str, bucket: str, rows: int, splits: int) -> dict[str, int]:
    """Generate the documents and write both tables; returns the hits per query."""
    import lance

    import indextables_spark as it

    t0 = time.perf_counter()
    docs, hits = documents(rows)
    print(f"documents: {rows:,} generated in {time.perf_counter() - t0:.1f}s; hits {hits}", flush=True)
    t0 = time.perf_counter()
    opts = {**s3_options(endpoint), "indexing.typemap.text": "text", "write.chunkRows": str(-(-rows // splits))}
    it.write_table(f"s3://{bucket}/{OURS_PREFIX}", docs, options=opts)
    print(f"ours written in {time.perf_counter() - t0:.1f}s", flush=True)
    t0 = time.perf_counter()
    ds = lance.write_dataset(docs, f"s3://{bucket}/{LANCE_PREFIX}", storage_options=lance_storage_options(endpoint))
    t1 = time.perf_counter()
    ds.create_scalar_index("text", "INVERTED", with_position=True, stem=False, remove_stop_words=False)
    print(
        f"Lance written in {t1 - t0:.1f}s + INVERTED index {time.perf_counter() - t1:.1f}s",
        flush=True,
    )
    return hits


def prepare(args: argparse.Namespace, endpoint: str) -> Data:
    """The two tables on the emulator: reused (--keep-data), reloaded from --keep-data, or written."""
    from cloud_bench import new_bucket, s3_client

    params = {"rows": args.rows, "splits": args.splits, "seed": SEED, "generator": GENERATOR}
    manifest_path = os.path.join(args.keep_data, "manifest.json") if args.keep_data else None
    manifest = None
    if manifest_path and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
        if manifest["params"] != params:
            print(f"--keep-data {args.keep_data} holds other tables ({manifest['params']}): writing again")
            manifest = None
    client = s3_client(endpoint)
    if manifest is not None:
        bucket = manifest["bucket"]
        objects_dir = os.path.join(args.keep_data, "objects")
        on_server = _bucket_exists(client, bucket) and list_objects(endpoint, bucket) == manifest["objects"]
        if on_server:
            how = f"reused from bucket {bucket} on {endpoint}"
        else:
            t0 = time.perf_counter()
            if not _bucket_exists(client, bucket):
                new_bucket(endpoint, bucket)
            for key in manifest["objects"]:
                client.upload_file(os.path.join(objects_dir, key), bucket, key)
            how = f"loaded from {args.keep_data} in {time.perf_counter() - t0:.1f}s"
        hits = manifest["hits"]
    else:
        bucket = new_bucket(endpoint)
        hits = write_tables(endpoint, bucket, args.rows, args.splits)
        how = "written now"
        if args.keep_data:
            objects_dir = os.path.join(args.keep_data, "objects")
            shutil.rmtree(objects_dir, ignore_errors=True)
            objects = list_objects(endpoint, bucket)
            for key in objects:
                path = os.path.join(objects_dir, key)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                client.download_file(bucket, key, path)
            with open(manifest_path or "", "w") as f:
                json.dump({"params": params, "bucket": bucket, "hits": hits, "objects": objects}, f)
            how += f", kept in {args.keep_data}"
    objects = list_objects(endpoint, bucket)
    sizes = {p: sum(n for k, n in objects.items() if k.startswith(p + "/")) for p in (OURS_PREFIX, LANCE_PREFIX)}
    return Data(bucket, hits, sizes, [f"{bucket}/{k}" for k in objects], how)


def _bucket_exists(client: Any, bucket: str) -> bool:
    try:
        client.head_bucket(Bucket=bucket)
        return True
    except Exception:
        return False


def drop_bucket(endpoint: str, bucket: str) -> None:
    from cloud_bench import s3_client

    client = s3_client(endpoint)
    keys = list(list_objects(endpoint, bucket))
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]]})
    client.delete_bucket(Bucket=bucket)


# ---- what a request read -------------------------------------------------------------------------------


class Kinds:
    """Maps a request's (key, byte range) to kinds of bytes: for our table the transaction log or the
    parts of a split (from its footer), for Lance's its files by role."""

    def __init__(self, proxy: S3Proxy, keys: Iterable[str], bucket: str):
        from indextables_spark.core.split.format.bundle import read_footer

        self.bucket = bucket
        self.parts: dict[str, list[tuple[int, int, str]]] = {}
        self.table: dict[str, Counter[str]] = {OURS_PREFIX: Counter(), LANCE_PREFIX: Counter()}
        for key in keys:
            data = proxy.object_bytes(key)
            assert data is not None, key
            rel = key[len(bucket) + 1 :]
            if rel.startswith(OURS_PREFIX + "/") and rel.endswith(".split"):
                footer = read_footer(data, key)
                parts = [(b.offset, b.offset + b.length, _file_kind(b.name)) for b in footer.files]
                parts.append((footer.rows.offset, footer.rows.offset + footer.rows.length, "rows.arrow"))
                parts.append((footer.footer_start, len(data), "footer"))
                parts.sort()
                self.parts[key] = parts
                covered = 0
                for s, e, kind in parts:
                    self.table[OURS_PREFIX][kind] += e - s
                    covered += e - s
                self.table[OURS_PREFIX]["other"] += len(data) - covered
            else:
                side = OURS_PREFIX if rel.startswith(OURS_PREFIX + "/") else LANCE_PREFIX
                self.table[side][self.kind_of(key)] += len(data)

    def kind_of(self, key: str) -> str:
        """The kind of a whole object (not a split)."""
        rel = key[len(self.bucket) + 1 :]
        side, _, rest = rel.partition("/")
        if side == OURS_PREFIX:
            return "log" if rest.startswith(LOG_DIR) else "other"
        top, _, name = rest.partition("/")
        if top == "_indices":
            name = name.rpartition("/")[2]
            return "index " + "".join("N" if c.isdigit() else c for c in name)
        return {"_versions": "manifest", "data": "data", "_transactions": "transactions"}.get(top, top or rest)

    def add(self, out: dict[str, list[int]], r: Request) -> None:
        """Count request r's body bytes (and the request) under the kinds it read."""
        parts = self.parts.get(r.key)
        if parts is None or r.start is None or r.end is None:
            if r.method != "GET":
                kind = r.method
            elif "list-type" in r.query or "/" not in r.key:
                kind = "list"
            else:
                kind = self.kind_of(r.key)
            _bump(out, kind, r.nbytes)
            return
        touched: Counter[str] = Counter()
        covered = 0
        for s, e, kind in parts:
            n = min(e, r.end) - max(s, r.start)
            if n > 0:
                touched[kind] += n
                covered += n
        if r.end - r.start > covered:
            touched["other"] += r.end - r.start - covered
        for kind, n in touched.items():
            _bump(out, kind, n)


def _bump(out: dict[str, list[int]], kind: str, n: int) -> None:
    entry = out.setdefault(kind, [0, 0])
    entry[0] += n
    entry[1] += 1


def _file_kind(name: str) -> str:
    if name == "meta.json":
        return name
    return "." + name.rsplit(".", 1)[-1] if "." in name else "other"


# ---- the fresh processes -------------------------------------------------------------------------------


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One cold run in this (fresh) process: open the table, the query once (cold), then
    spec["warm"] more times; spec["count"]: the number of matches too (after the timings)."""
    return (_child_ours if spec["side"] == "ours" else _child_lance)(spec)


def _timed(fn: Any, n: int) -> list[float]:
    """Seconds of each of n calls of fn (a warm search repeated)."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _child_ours(spec: dict[str, Any]) -> dict[str, Any]:
    import importlib
    import pkgutil

    import indextables_spark

    # imports are process start-up, not the search: load the package's reading code first
    for name in ("api", "core", "expr", "util"):
        try:
            pkg = importlib.import_module(f"indextables_spark.{name}")
        except ImportError:
            continue
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            try:
                importlib.import_module(m.name)
            except Exception:
                pass
    import boto3  # noqa: F401
    import pandas  # noqa: F401 - pyarrow imports it at its first pa.array(); `import lance` imports it
    import pyarrow  # noqa: F401
    import tantivy  # noqa: F401

    IndexTable = indextables_spark.IndexTable
    opts = {**s3_options(spec["endpoint"]), "cache.disk.path": spec["cache"]}
    q = spec["query"]
    marks = [time.time()]
    p0 = time.perf_counter()
    table = IndexTable(spec["uri"], opts)
    table.snapshot()
    p1 = time.perf_counter()
    marks.append(time.time())
    profile = None
    if spec.get("profile"):
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    result = table.search(q, columns=["id", "text"], limit=LIMIT)
    p2 = time.perf_counter()
    if profile is not None:
        profile.disable()
        profile.dump_stats(spec["profile"])
    marks.append(time.time())
    warm = _timed(lambda: table.search(q, columns=["id", "text"], limit=LIMIT), spec["warm"])
    marks.append(time.time())
    return {
        "open_s": p1 - p0,
        "query_s": p2 - p1,
        "warm_s": warm,
        "marks": marks,
        "top_ids": result.column("id").to_pylist(),
        "top_words": [len(t.split()) for t in result.column("text").to_pylist()],
        "columns": result.column_names,
        "hits": table.count(q) if spec["count"] else None,
        "module": os.path.dirname(indextables_spark.__file__),
    }


def _child_lance(spec: dict[str, Any]) -> dict[str, Any]:
    import lance
    import pyarrow  # noqa: F401
    from lance.query import FullTextOperator, MatchQuery, PhraseQuery

    kind, text = spec["query"]["kind"], spec["query"]["text"]
    if kind == "phrase":
        q: Any = PhraseQuery(text, "text")
    elif kind == "and":
        q = MatchQuery(text, "text", operator=FullTextOperator.AND)
    else:
        q = MatchQuery(text, "text")
    so = lance_storage_options(spec["endpoint"])
    marks = [time.time()]
    p0 = time.perf_counter()
    ds = lance.dataset(spec["uri"], storage_options=so)
    p1 = time.perf_counter()
    marks.append(time.time())
    result = ds.to_table(full_text_query=q, columns=["id", "text"], limit=LIMIT)
    p2 = time.perf_counter()
    marks.append(time.time())
    warm = _timed(lambda: ds.to_table(full_text_query=q, columns=["id", "text"], limit=LIMIT), spec["warm"])
    marks.append(time.time())
    hits = None
    if spec["count"]:
        hits = ds.to_table(full_text_query=q, columns=["id"], limit=None).num_rows
    return {
        "open_s": p1 - p0,
        "query_s": p2 - p1,
        "warm_s": warm,
        "marks": marks,
        "top_ids": result.column("id").to_pylist(),
        "top_words": [len(t.split()) for t in result.column("text").to_pylist()],
        "columns": result.column_names,
        "hits": hits,
        "module": os.path.dirname(lance.__file__),
    }


def cold_run(
    proxy: S3Proxy,
    kinds: Kinds,
    side: Side,
    query: Query,
    uri: str,
    workdir: str,
    warm: int,
    count: bool,
    keep_log: bool,
    profile: str | None = None,
) -> Run:
    """One query of one side in a fresh process with an empty cache; the proxy's requests split by
    phase (open, query, warm) from the process's clock marks."""
    spec = {
        "side": side.kind,
        "uri": uri,
        "query": query.ours if side.kind == "ours" else query.lance,
        "warm": warm,
        "count": count,
        "profile": profile,
    }
    pythonpath = side.pythonpath or os.path.join(ROOT, "src")
    out, log = cold_child(proxy, __file__, spec, workdir, pythonpath, RESULT_MARK, 900, f"{side.label} {query.name}")
    marks = out["marks"]
    requests: Counter[str] = Counter()
    nbytes: Counter[str] = Counter()
    breakdown: dict[str, list[int]] = {}
    kept = []
    ranges: dict[str, list[tuple[int, int]]] = {}
    for r in log:
        phase = "open" if r.t < marks[1] else "query" if r.t <= marks[2] else "warm" if r.t <= marks[3] else "count"
        requests[phase] += 1
        nbytes[phase] += r.nbytes
        if phase in ("open", "query"):
            kinds.add(breakdown, r)
            if r.start is not None and r.end is not None:
                ranges.setdefault(r.key, []).append((r.start, r.end))
            if keep_log:
                kept.append({**asdict(r), "phase": phase})
    return Run(
        out["open_s"],
        out["query_s"],
        out["hits"],
        out["top_ids"],
        out["top_words"],
        out["module"],
        dict(requests),
        dict(nbytes),
        breakdown,
        sum(_overlap(rs) for rs in ranges.values()),
        out["warm_s"],
        kept,
    )


def _overlap(ranges: list[tuple[int, int]]) -> int:
    """Bytes of the ranges beyond their union (read more than once)."""
    covered, end = 0, -1
    for s, e in sorted(ranges):
        if e > end:
            covered += e - max(s, end)
            end = e
    return sum(e - s for s, e in ranges) - covered


# ---- the report ----------------------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _secs(xs: Sequence[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.3f}" if hi - lo < 0.0005 else f"{lo:.3f}-{hi:.3f}"


def _warm(runs: list[Run]) -> float:
    xs = [x for r in runs for x in r.warm_s]
    return statistics.median(xs) if xs else float("nan")


def _span(xs: Sequence[int]) -> str:
    return f"{min(xs):,}" if min(xs) == max(xs) else f"{min(xs):,}-{max(xs):,}"


def _prefix(s: Side) -> str:
    return OURS_PREFIX if s.kind == "ours" else LANCE_PREFIX


def _hits(results: dict[float, dict[str, dict[str, list[Run]]]], label: str, query: str) -> str:
    """The match count the side reported (counted in one run), '?' if none did."""
    got = [r.hits for by_side in results.values() for r in by_side[label][query] if r.hits is not None]
    return str(got[0]) if got else "?"


def _cell(what: str, runs: list[Run], table_bytes: int) -> str:
    if what == "cold s":
        return _secs([r.query_s for r in runs])
    if what == "open s":
        return _secs([r.open_s for r in runs])
    if what == "fetched":
        b = max(r.cold_bytes for r in runs)
        return f"{_mb(b)} {b / table_bytes:.1%}"
    if what == "requests":
        return _span([r.cold_requests for r in runs])
    per_query = sum(r.requests.get("warm", 0) for r in runs) / max(1, sum(len(r.warm_s) for r in runs))
    return f"{_warm(runs) * 1000:.1f}" + (f" ({per_query:.0f} req)" if per_query >= 0.5 else "")


def _ratios(a: list[Run], b: list[Run]) -> str:
    """ours / Lance of one query's figures, and how far their top 10s agree."""
    shared = len(set(a[0].top_ids) & set(b[0].top_ids))
    ties = "the same" if sorted(a[0].top_words) == sorted(b[0].top_words) else "different"
    cold = min(r.query_s for r in a) / min(r.query_s for r in b)
    with_open = min(r.query_s + r.open_s for r in a) / min(r.query_s + r.open_s for r in b)
    fetched = max(r.cold_bytes for r in a) / max(1, max(r.cold_bytes for r in b))
    requests = max(r.cold_requests for r in a) / max(1, max(r.cold_requests for r in b))
    return (
        f"cold {cold:.2f}x (with open {with_open:.2f}x), fetched {fetched:.2f}x, requests {requests:.2f}x, "
        f"warm {_warm(a) / _warm(b):.2f}x; top-10 ids in common {shared}/{LIMIT} ({ties} text lengths)"
    )


COLUMNS = ("cold s", "fetched", "requests", "warm ms", "open s")


def report(
    results: dict[float, dict[str, dict[str, list[Run]]]],
    sides: list[Side],
    data: Data,
    kinds: Kinds,
    args: argparse.Namespace,
) -> None:
    """Per latency and per checkout of ours: the table of the issue, the ratios; then the breakdowns."""
    lance = next((s for s in sides if s.kind == "lance"), None)
    for latency, by_side in results.items():
        for our in [s for s in sides if s.kind == "ours"] or [None]:
            shown = [s for s in (our, lance) if s is not None]
            cols = [(f"{'ours' if s.kind == 'ours' else 'Lance'} {what}", s, what) for what in COLUMNS for s in shown]
            widths = [max(len(name), 15) for name, _, _ in cols]
            title = f"{our.label} ({our.pythonpath})" if our is not None else "Lance only"
            print(f"\n== {latency:g} ms per request, {args.rows:,} rows: {title}")
            hits = "hits gen/" + "/".join("ours" if s.kind == "ours" else "Lance" for s in shown)
            print(" | ".join([f"{'query':<8}", f"{hits:<20}"] + [f"{n:>{w}}" for (n, _, _), w in zip(cols, widths)]))
            for q in QUERIES:
                counts = "/".join([str(data.hits[q.name])] + [_hits(results, s.label, q.name) for s in shown])
                cells = [_cell(what, by_side[s.label][q.name], data.sizes[_prefix(s)]) for _, s, what in cols]
                print(" | ".join([f"{q.name:<8}", f"{counts:<20}"] + [f"{c:>{w}}" for c, w in zip(cells, widths)]))
            if our is not None and lance is not None:
                print("ours / Lance:")
                for q in QUERIES:
                    print(f"  {q.name:<8} {_ratios(by_side[our.label][q.name], by_side[lance.label][q.name])}")
    print(
        "\n(hits: rows matching, by the generator / each side; cold s: the query alone, min-max over the runs, "
        "each in a fresh process with an empty cache; fetched: open + query, % of the side's table; warm: median "
        "of the repeats in one process (requests per warm query); open s: opening the table, before the query)"
    )
    first = next(iter(results))
    for s in sides:
        runs = {q.name: results[first][s.label][q.name][0] for q in QUERIES}
        print_breakdown(s, runs, kinds, args)


def print_breakdown(side: Side, runs: dict[str, Run], kinds: Kinds, args: argparse.Namespace) -> None:
    """What the first cold run of each query fetched, by kind: bytes (requests touching the kind)."""
    table = kinds.table[_prefix(side)]
    found = {k for r in runs.values() for k in r.kinds} | set(table)
    order = [k for k in KIND_ORDER if k in found] + sorted(found - set(KIND_ORDER))
    total = sum(table.values())
    print(
        f"\nfetched by kind, {side.label} (first cold run of each query, open + query; bytes (requests touching it)):"
    )
    w = 22
    print(f"{'kind':<24}{'table':>{w}}" + "".join(f"{q.name:>{w}}" for q in QUERIES))
    for kind in order:
        cells = []
        for q in QUERIES:
            b, n = runs[q.name].kinds.get(kind, [0, 0])
            cells.append(f"{_mb(b)} ({n})" if n else "-")
        t = table.get(kind, 0)
        print(f"{kind:<24}{(f'{_mb(t)} {t / total:.1%}' if t else '-'):>{w}}" + "".join(f"{c:>{w}}" for c in cells))
    cells = [f"{_mb(r.cold_bytes)} ({r.cold_requests})" for r in runs.values()]
    print(f"{'total':<24}{_mb(total):>{w}}" + "".join(f"{c:>{w}}" for c in cells))
    cells = [_mb(r.reread) if r.reread else "-" for r in runs.values()]
    print(f"{'of which read twice':<24}{'':>{w}}" + "".join(f"{c:>{w}}" for c in cells))
    if args.requests and side.kind == "ours":
        for q in QUERIES:
            print(f"requests of {side.label} {q.name} ({q.ours}), first cold run (ms after the first):")
            t0 = min((r["t"] for r in runs[q.name].log), default=0.0)
            for r in runs[q.name].log:
                at = f"+{(r['t'] - t0) * 1000:5.0f} "
                print("  " + at + _describe(Request(**{k: v for k, v in r.items() if k != "phase"}), r["phase"], kinds))


def _describe(r: Request, phase: str, kinds: Kinds) -> str:
    """One request: phase, method, key, byte range, bytes, the kinds it read."""
    read: dict[str, list[int]] = {}
    kinds.add(read, r)
    what = ", ".join(f"{k} {_mb(n)}" for k, (n, _) in read.items())
    rng = f" [{r.start:,}, {r.end:,})" if r.start is not None else ""
    key = (r.key[len(kinds.bucket) + 1 :] or "(bucket)") + (f"?{r.query}" if r.query else "")
    return f"{phase:<5} {r.method:<4} {key}{rng} {r.nbytes:,} B: {what}"


# ---- main ----------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--splits", type=int, default=10, help="splits of our table")
    ap.add_argument("--runs", type=int, default=3, help="cold runs of each query and side")
    ap.add_argument("--latencies", default="20,0", help="ms added to every request, one pass each (comma list)")
    ap.add_argument("--warm-repeats", type=int, default=20)
    ap.add_argument("--keep-data", metavar="DIR", help="keep the written tables in DIR and reuse them next time")
    ap.add_argument("--s3-endpoint", default=os.environ.get("INDEXTABLES_TEST_S3_ENDPOINT"))
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--ours-only", action="store_true")
    only.add_argument("--lance-only", action="store_true")
    ap.add_argument(
        "--pythonpath",
        help="PYTHONPATH of our side's processes (a checkout's src, or the checkout), a comma list to "
        "compare checkouts on one table (default: this script's checkout)",
    )
    ap.add_argument("--requests", action="store_true", help="print every request of our first cold runs")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers as JSON")
    ap.add_argument(
        "--profile", metavar="DIR", help="our cold queries under cProfile: DIR/<query>-<latency>ms-<run>.prof"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def sides_of(args: argparse.Namespace) -> list[Side]:
    sides: list[Side] = []
    if not args.lance_only:
        paths = [p for p in (args.pythonpath or "").split(",") if p] or [os.path.join(ROOT, "src")]
        for i, p in enumerate(paths):
            p = os.path.abspath(p)
            if os.path.isdir(os.path.join(p, "src", "indextables_spark")):
                p = os.path.join(p, "src")
            if not os.path.isdir(os.path.join(p, "indextables_spark")):
                raise SystemExit(f"--pythonpath {p}: no indextables_spark package there")
            name = os.path.basename(os.path.dirname(p)) if os.path.basename(p) == "src" else os.path.basename(p)
            label = "ours" if len(paths) == 1 else f"ours:{name}" + (f"#{i}" if paths.count(paths[i]) > 1 else "")
            sides.append(Side(label, "ours", p))
    if not args.ours_only:
        sides.append(Side("lance", "lance"))
    return sides


def compiled(sides: list[Side]) -> None:
    """Byte-compile each side's package sources first, as an installed package is (pip compiles
    what it installs): with PYTHONDONTWRITEBYTECODE set, as on some machines, every fresh process
    would otherwise compile every module it imports, and that would be billed to its search."""
    for s in sides:
        if s.kind != "ours":
            continue
        src = s.pythonpath or os.path.join(ROOT, "src")
        for path in src.split(os.pathsep):
            subprocess.run([sys.executable, "-m", "compileall", "-q", path], check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    if args.child:
        print(RESULT_MARK + json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    from cloud_bench import moto_server

    sides = sides_of(args)
    compiled(sides)
    latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
    workdir = tempfile.mkdtemp(prefix="cold-search-vs-lance-")
    proxy = None
    try:
        with moto_server(args.s3_endpoint) as endpoint:
            t0 = time.perf_counter()
            data = prepare(args, endpoint)
            proxy = S3Proxy(endpoint)
            loaded = proxy.preload(data.keys)
            kinds = Kinds(proxy, data.keys, data.bucket)
            n_splits = len([k for k in data.keys if k.endswith(".split")])
            print(
                f"tables ({data.reused}; ready in {time.perf_counter() - t0:.1f}s): ours {n_splits} splits "
                f"{_mb(data.sizes[OURS_PREFIX])}, Lance {_mb(data.sizes[LANCE_PREFIX])}; "
                f"{loaded / 1e6:.0f} MB held by the proxy ({proxy.url} -> {endpoint}); hits {data.hits}",
                flush=True,
            )
            results: dict[float, dict[str, dict[str, list[Run]]]] = {}
            for li, latency in enumerate(latencies):
                proxy.latency_ms = latency
                results[latency] = {s.label: {q.name: [] for q in QUERIES} for s in sides}
                for q in QUERIES:
                    for run in range(args.runs):
                        for s in sides:
                            prefix = OURS_PREFIX if s.kind == "ours" else LANCE_PREFIX
                            r = cold_run(
                                proxy,
                                kinds,
                                s,
                                q,
                                f"s3://{data.bucket}/{prefix}",
                                workdir,
                                args.warm_repeats if run == 0 else 0,
                                count=li == 0 and run == 0,
                                keep_log=run == 0,
                                profile=(
                                    os.path.join(os.path.abspath(args.profile), f"{q.name}-{latency:g}ms-{run}.prof")
                                    if args.profile and s.kind == "ours"
                                    else None
                                ),
                            )
                            results[latency][s.label][q.name].append(r)
                            print(
                                f"  {latency:g} ms {q.name:<7} run {run + 1} {s.label:<12} open {r.open_s:.3f}s "
                                f"query {r.query_s:.3f}s, {r.cold_requests} requests, {_mb(r.cold_bytes)}"
                                + (f", hits {r.hits}" if r.hits is not None else ""),
                                flush=True,
                            )
            for s in sides:
                mods = {r.module for by_q in results[latencies[0]][s.label].values() for r in by_q}
                print(f"{s.label}: {', '.join(sorted(mods))}")
            report(results, sides, data, kinds, args)
            if args.json:
                dump = {
                    "params": {k: v for k, v in vars(args).items() if k != "child"},
                    "data": asdict(data) | {"keys": len(data.keys)},
                    "table_kinds": {k: dict(v) for k, v in kinds.table.items()},
                    "queries": [asdict(q) for q in QUERIES],
                    "sides": [asdict(s) for s in sides],
                    "results": {
                        str(lat): {
                            label: {q: [asdict(r) for r in runs] for q, runs in by_q.items()}
                            for label, by_q in by_side.items()
                        }
                        for lat, by_side in results.items()
                    },
                }
                with open(args.json, "w") as f:
                    json.dump(dump, f, indent=1)
                print(f"raw numbers: {args.json}")
            if args.s3_endpoint and not args.keep_data:
                drop_bucket(endpoint, data.bucket)
    finally:
        if proxy is not None:
            proxy.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
