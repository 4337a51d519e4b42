"""Which ANN library a split's vector index should use (#38): usearch, faiss-cpu, hnswlib vs Lance.

    python3 -m venv /tmp/venv38 && /tmp/venv38/bin/pip install numpy pylance usearch faiss-cpu hnswlib pyarrow
    /tmp/venv38/bin/python bench/vector_index_choice.py [--vectors 1000000] [--dims 128] [--splits 8]
        [--queries 200] [--dir /tmp/indextables-vector-bench] [--candidates faiss-hnsw,...] [--reuse] [--cos]

Not part of the package and not run by the tests: it needs packages the project does not depend on.

Data (fixed seeds): --vectors float32 vectors of --dims dimensions in 1,000 clusters: centre N(0, 1) per
dimension, plus within-cluster noise with a decaying spectrum (standard deviation ~ (j + 1) ** -0.25 along
the j-th axis of one random rotation, scaled to an RMS of 0.3, like the PCA spectrum of real embeddings;
isotropic 128-d noise would be an unrealistically hard case for every graph index). Every row has `tag`
uniform in 0..99: `tag < 1` is the 1% allow-list, `tag < 10` the 10% one (independent of the vectors, the
hard case for filtering). Queries: --queries rows of the data plus fresh noise of the same spectrum (near
the data, not in it). Ground truth: exact top-10 with numpy, in 100k-row chunks, unfiltered and under
each allow-list, for L2 and (with --cos) cosine.

Ours (usearch, faiss, hnswlib): the rows are cut into --splits equal parts, each with its own index file
(as each split will carry its own); a query searches every part, one after another, on one thread, and
the global top-10 is the merge of the parts' top-10 by distance. Queries run against the index files as
a split reader would open them: usearch `Index.restore(path, view=True)` (memory-mapped), faiss
`read_index(path, IO_FLAG_MMAP_IFC | IO_FLAG_READ_ONLY)` (vectors mapped, graph links read), hnswlib
`load_index` (read into memory; it cannot map). Quantized indexes (usearch f16/i8, faiss HNSW over 8-bit
SQ) re-rank each part's k * refine candidates exactly from the stored float32 vectors (in a split those
come from its Arrow row store), so their results carry exact distances. (usearch's i8 normalizes each
vector before quantizing, so under L2 it only ranks candidates; the re-rank makes the answer exact.)
Lance: one dataset of all vectors, its vector index (IVF_PQ: num_partitions n / 4096, num_sub_vectors
dims / 8, swept nprobes x refine_factor; IVF_HNSW_SQ: Lance's default partitions and graph, swept ef x
refine_factor), queried with `dataset.to_table(nearest={...}, columns=["id"])`, one query at a time
(Lance's own thread pool may use both cores for one query; ours use one).

Measured per candidate: index build time (all cores) and index size on disk, both per million vectors;
for a sweep of its search-time knob: recall@10, median and p95 latency of single queries. Filtered search
(1% and 10%) at the knobs around the first that reaches recall 0.95 unfiltered: faiss HNSW/IVF with
`SearchParametersHNSW/IVF(sel=IDSelectorBitmap)` (at 1x, 4x and 16x that ef / nprobe), hnswlib with its
`filter=` callable, usearch (its Python API has no predicate) by over-fetching k / selectivity * 2
candidates and dropping the rest, Lance with `filter="tag < N", prefilter=True` (a BITMAP scalar index on
tag), and exact brute force with numpy over the allowed rows of each part (cost per allowed vector
printed). "full" is the share of queries that got k rows back. Open: the time to open one part's index
file cold (evicted from the page cache with posix_fadvise DONTNEED) and warm, and the first query after a
cold open; for Lance the dataset (a new dataset object has a new index cache: its first query loads it).

Compressed indexes (the index kinds of a vector column, core/split/format/vector_kinds.py): faiss
inverted files over codes with no float32 copy — faiss-ivfpq (IndexIVFPQ, dims / 8 sub-quantizers of
8 bits), faiss-ivfpqfs (IndexIVFPQFastScan, dims / 4 of 4 bits), faiss-ivfsq8 (8-bit scalar
quantizer), faiss-ivfrabitq / faiss-ivfrabitqfs (RaBitQ, one bit a dimension) — with nlist = 2 sqrt(n)
per part trained on 64 vectors a list, and HNSW over codes (faiss-hnswsq: 8-bit, faiss-hnswpq: dims /
8 PQ codes); each re-ranks its part's k * refine candidates exactly from the float32 vectors (the
split's vectors file), knob (nprobe or ef, refine). Filtered: the selection as an IDSelectorBitmap,
at 1x, 4x and 16x the knob that reached 0.95 unfiltered. Run with Lance for the same-run reference:

    PYTHONPATH=<pylance> python bench/vector_index_choice.py --candidates faiss-ivfpq,faiss-ivfpqfs,\
        faiss-ivfrabitq,faiss-ivfrabitqfs,faiss-ivfsq8,faiss-hnswsq,faiss-hnswpq,lance-ivfpq

The default candidates leave out usearch-f32 (usearch-i8 with re-ranking is as accurate, twice as small
and builds faster), usearch-f16 and faiss-ivf; name them with --candidates. Builds dominate the run time:
at 1M on 2 cores Lance IVF_HNSW_SQ takes ~8 min, each of ours 2-4 min (usearch-f32 9 min), the queries
~5 min in all; the full set took 32 min here with other work on the machine (load 4-5). --reuse opens the
index files of an earlier run (same --dir, --vectors, --splits) to re-measure queries without building.
Other cuts: one graph setting per library (M / connectivity 16, ef_construction / expansion_add 128), one
IVF size each, filtered runs at one to three knobs, cosine (--cos) off by default and then only for
usearch f32/i8 and Lance IVF_HNSW_SQ. "ms/part" = median / --splits: about the latency when the parts are
searched by parallel tasks, as Spark does with splits.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
os.environ.setdefault("LANCE_LOG", "error")

K = 10
SELECTIVITIES = {"1%": 1, "10%": 10}  # tag < N
ALL = (
    "usearch-f32,usearch-f16,usearch-i8,faiss-hnsw,faiss-hnswsq,faiss-ivf,hnswlib,lance-ivfpq,lance-hnswsq,"
    "faiss-hnswpq,faiss-ivfpq,faiss-ivfpqfs,faiss-ivfsq8,faiss-ivfrabitq,faiss-ivfrabitqfs"
)
DEFAULT = "usearch-i8,faiss-hnsw,faiss-hnswsq,hnswlib,lance-ivfpq,lance-hnswsq"
BRUTE = "numpy-brute"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- data


def make_data(n, d, nq, clusters=1000, seed=38):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, d), dtype=np.float32)
    rot, _ = np.linalg.qr(rng.standard_normal((d, d)))
    spectrum = 1.0 / (np.arange(d) + 1.0) ** 0.25
    spectrum = (0.3 * spectrum / np.sqrt((spectrum**2).mean())).astype(np.float32)  # RMS 0.3 per dimension
    mix = (spectrum[:, None] * rot.T).astype(np.float32)  # noise = z @ mix, z ~ N(0, I)

    def noise(m):
        return rng.standard_normal((m, d), dtype=np.float32) @ mix

    labels = rng.integers(0, clusters, n)
    x = np.empty((n, d), np.float32)
    for s in range(0, n, 100_000):
        e = min(n, s + 100_000)
        x[s:e] = centers[labels[s:e]] + noise(e - s)
    tag = rng.integers(0, 100, n).astype(np.int32)
    q = x[rng.choice(n, nq, replace=False)] + noise(nq)
    return x, q.astype(np.float32), tag


def normalized(a):
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def exact_topk(x, q, masks, k=K):
    """{name: ids (nq, k)} of the exact L2 top-k under each mask (None = all rows). Cosine: pass normalized."""
    nq = len(q)
    best = {m: (np.full((nq, 0), np.inf, np.float32), np.zeros((nq, 0), np.int64)) for m in masks}
    for s in range(0, len(x), 100_000):
        xc = x[s : s + 100_000]
        dist = (xc * xc).sum(1)[None, :] - 2.0 * (q @ xc.T)
        for name, mask in masks.items():
            dm = dist if mask is None else np.where(mask[s : s + len(xc)][None, :], dist, np.inf)
            kk = min(k, dm.shape[1])
            part = np.argpartition(dm, kk - 1, axis=1)[:, :kk]
            bd, bi = best[name]
            cd = np.concatenate([bd, np.take_along_axis(dm, part, 1)], 1)
            ci = np.concatenate([bi, part + s], 1)
            o = np.argsort(cd, 1, kind="stable")[:, :k]
            best[name] = (np.take_along_axis(cd, o, 1), np.take_along_axis(ci, o, 1))
    return {m: best[m][1] for m in masks}


def recall(found, truth):
    return float(np.mean([len(set(f[f >= 0].tolist()) & set(t.tolist())) / len(t) for f, t in zip(found, truth)]))


def merge(ds, ids, k=K):
    """Global top-k of the parts' (distances, global ids), each a 1-D array."""
    d = np.concatenate(ds)
    i = np.concatenate(ids)
    if len(d) > k:
        p = np.argpartition(d, k - 1)[:k]
        d, i = d[p], i[p]
    o = np.argsort(d, kind="stable")
    out = np.full(k, -1, np.int64)
    out[: len(o)] = i[o]
    return out


def evict(path):
    """Drop a file's (or a directory's files') pages from the page cache, as after a reboot."""
    paths = [path] if os.path.isfile(path) else [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def run_queries(fn, q, truth):
    """(recall, median ms, p95 ms, share of queries with k rows) of fn(query) -> ids, one query at a time."""
    fn(q[0])  # warm-up
    times, found = [], []
    for v in q:
        t0 = time.perf_counter()
        ids = fn(v)
        times.append(time.perf_counter() - t0)
        found.append(ids)
    found = np.array(found)
    times.sort()
    full = float(np.mean((found >= 0).sum(1) == K))
    return recall(found, truth), 1e3 * statistics.median(times), 1e3 * times[int(0.95 * (len(times) - 1))], full


# ----------------------------------------------------------------------------------------- candidates


class Parts:
    """The data cut into equal parts (splits) with per-part allow-lists."""

    def __init__(self, x, tag, splits):
        self.x = x
        self.bounds = np.linspace(0, len(x), splits + 1).astype(np.int64)
        self.allowed = {}  # sel -> [(local ids, bool mask, packed bitmap)] per part
        for sel, n in SELECTIVITIES.items():
            lst = []
            for s, e in self.ranges():
                m = tag[s:e] < n
                lst.append((np.flatnonzero(m), m, np.packbits(m, bitorder="little")))
            self.allowed[sel] = lst

    def ranges(self):
        return list(zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist()))


class Ours:
    """One index per part; subclasses: build_part, save, open_part, search_part, knobs."""

    name = ""
    knob_name = "ef"
    ext = "idx"

    def __init__(self, parts, metric, root):
        self.parts, self.metric, self.root = parts, metric, root
        self.indexes = []

    def path(self, p):
        return os.path.join(self.root, f"{self.name}-{self.metric}-{p}.{self.ext}")

    def build(self, reuse=False):
        t = 0.0
        size = 0
        n = len(self.parts.ranges())
        if reuse and all(os.path.exists(self.path(p)) for p in range(n)):
            self.indexes = [self.open_part(self.path(p)) for p in range(n)]
            return math.nan, sum(du(self.path(p)) for p in range(n))
        for p, (s, e) in enumerate(self.parts.ranges()):
            t0 = time.perf_counter()
            ix = self.build_part(self.parts.x[s:e])
            t += time.perf_counter() - t0
            self.save(ix, self.path(p))
            del ix
            size += du(self.path(p))
        self.indexes = [self.open_part(self.path(p)) for p in range(len(self.parts.ranges()))]
        return t, size

    def exact(self, xs, v):
        """Exact distances of rows xs to v in the metric (cos: data and queries are normalized; L2 order)."""
        diff = xs - v
        return np.einsum("ij,ij->i", diff, diff)

    def search(self, v, knob):
        ds, ids = [], []
        for (s, _), ix in zip(self.parts.ranges(), self.indexes):
            d, i = self.search_part(ix, v, knob, s)
            ds.append(d)
            ids.append(i + s)
        return merge(ds, ids)

    def search_filtered(self, v, knob, sel):
        ds, ids = [], []
        for p, ((s, _), ix) in enumerate(zip(self.parts.ranges(), self.indexes)):
            d, i = self.search_part_filtered(ix, v, knob, s, self.parts.allowed[sel][p], sel)
            ds.append(d)
            ids.append(i + s)
        return merge(ds, ids)

    def search_part_filtered(self, ix, v, knob, s, allowed, sel):
        """Default: over-fetch k / selectivity * 2 and keep the allowed ones."""
        frac = SELECTIVITIES[sel] / 100.0
        e = s + len(allowed[1])
        want = min(e - s, int(math.ceil(K / frac * 2)))
        d, i = self.search_part(ix, v, knob, s, count=want)
        keep = allowed[1][i]
        d, i = d[keep][:K], i[keep][:K]
        return d, i


class USearch(Ours):
    ext = "usearch"

    def __init__(self, parts, metric, root, dtype, knobs):
        super().__init__(parts, metric, root)
        self.dtype = dtype
        self.name = f"usearch-{dtype}"
        self.knobs = knobs

    def build_part(self, xs):
        from usearch.index import Index

        ix = Index(
            ndim=xs.shape[1],
            metric="cos" if self.metric == "cos" else "l2sq",
            dtype=self.dtype,
            connectivity=16,
            expansion_add=128,
            expansion_search=64,
        )
        ix.add(np.arange(len(xs), dtype=np.uint64), xs, threads=0)
        return ix

    def save(self, ix, path):
        ix.save(path)

    def open_part(self, path):
        from usearch.index import Index

        return Index.restore(path, view=True)

    def search_part(self, ix, v, knob, s, count=K):
        ef, refine = knob if isinstance(knob, tuple) else (knob, 1)
        ix.expansion_search = ef
        if self.dtype == "f32":
            m = ix.search(v, count, threads=1)
            return m.distances.astype(np.float32), m.keys.astype(np.int64)
        m = ix.search(v, max(count, K * refine), threads=1)
        i = m.keys.astype(np.int64)
        d = self.exact(self.parts.x[s + i], v)  # exact re-rank from the stored float32 vectors
        o = np.argsort(d)[:count]
        return d[o], i[o]


class FaissHNSW(Ours):
    name = "faiss-hnsw"
    ext = "faiss"
    knobs = [16, 32, 64, 128, 256]

    def build_part(self, xs):
        import faiss

        ix = faiss.IndexHNSWFlat(xs.shape[1], 16)
        ix.hnsw.efConstruction = 128
        ix.add(xs)
        return ix

    def save(self, ix, path):
        import faiss

        faiss.write_index(ix, path)

    def open_part(self, path):
        import faiss

        return faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)

    def params(self, knob, sel=None):
        import faiss

        p = faiss.SearchParametersHNSW(efSearch=knob)
        if sel is not None:
            p.sel = sel
        return p

    def search_part(self, ix, v, knob, s, count=K):
        d, i = ix.search(v[None, :], count, params=self.params(knob))
        return d[0], i[0].astype(np.int64)

    def search_part_filtered(self, ix, v, knob, s, allowed, sel):
        import faiss

        bits = allowed[2]
        selector = faiss.IDSelectorBitmap(len(allowed[1]), faiss.swig_ptr(bits))
        d, i = ix.search(v[None, :], K, params=self.params(knob, selector))
        ok = i[0] >= 0
        return d[0][ok], i[0][ok].astype(np.int64)


class FaissIVF(FaissHNSW):
    name = "faiss-ivf"
    knob_name = "nprobe"
    knobs = [4, 8, 16, 32, 64]

    def build_part(self, xs):
        import faiss

        nlist = max(16, int(2 * math.sqrt(len(xs))))
        quant = faiss.IndexFlatL2(xs.shape[1])
        ix = faiss.IndexIVFFlat(quant, xs.shape[1], nlist)
        ix.cp.min_points_per_centroid = 5
        ix.train(xs[np.random.default_rng(1).choice(len(xs), min(len(xs), 64 * nlist), replace=False)])
        ix.add(xs)
        return ix

    def open_part(self, path):
        import faiss

        return faiss.read_index(path, faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)

    def params(self, knob, sel=None):
        import faiss

        p = faiss.SearchParametersIVF(nprobe=knob)
        if sel is not None:
            p.sel = sel
        return p


class FaissHNSWSQ(FaissHNSW):
    """faiss HNSW over 8-bit scalar-quantized vectors, re-ranked exactly from the stored float32 ones."""

    name = "faiss-hnswsq"
    knob_name = "ef/refine"
    knobs = [(ef, r) for ef in (16, 32, 64, 128) for r in (2, 4)]

    def build_part(self, xs):
        import faiss

        ix = faiss.IndexHNSWSQ(xs.shape[1], faiss.ScalarQuantizer.QT_8bit, 16)
        ix.hnsw.efConstruction = 128
        ix.train(xs)
        ix.add(xs)
        return ix

    def rerank(self, d, i, v, s, count):
        i = i[i >= 0].astype(np.int64)
        d = self.exact(self.parts.x[s + i], v)
        o = np.argsort(d)[:count]
        return d[o], i[o]

    def search_part(self, ix, v, knob, s, count=K):
        ef, refine = knob
        d, i = ix.search(v[None, :], max(count, K * refine), params=self.params(ef))
        return self.rerank(d[0], i[0], v, s, count)

    def search_part_filtered(self, ix, v, knob, s, allowed, sel):
        import faiss

        ef, refine = knob
        selector = faiss.IDSelectorBitmap(len(allowed[1]), faiss.swig_ptr(allowed[2]))
        d, i = ix.search(v[None, :], K * refine, params=self.params(ef, selector))
        return self.rerank(d[0], i[0], v, s, K)


class FaissHNSWPQ(FaissHNSWSQ):
    """faiss HNSW over PQ codes (dims / 8 sub-quantizers of 8 bits), re-ranked exactly."""

    name = "faiss-hnswpq"
    knobs = [(ef, r) for ef in (32, 64, 128) for r in (4, 10)]

    def build_part(self, xs):
        import faiss

        ix = faiss.IndexHNSWPQ(xs.shape[1], xs.shape[1] // 8, 16)
        ix.hnsw.efConstruction = 128
        ix.train(xs)
        ix.add(xs)
        return ix


class FaissIVFCodes(FaissHNSWSQ):
    """faiss IVF over compressed codes (no float32 copy in the index), each part's k * refine
    candidates re-ranked exactly from the stored float32 vectors. nlist = 2 sqrt(n) per part, trained
    on up to 64 vectors a list; knob (nprobe, refine)."""

    knob_name = "nprobe/refine"
    knobs = [(p, r) for p in (4, 8, 16, 32) for r in (4, 10)]

    def make(self, quantizer, d, nlist):
        raise NotImplementedError

    def build_part(self, xs):
        import faiss

        nlist = max(16, int(2 * math.sqrt(len(xs))))
        ix = self.make(faiss.IndexFlatL2(xs.shape[1]), xs.shape[1], nlist)
        ix.cp.min_points_per_centroid = 5
        ix.train(xs[np.random.default_rng(1).choice(len(xs), min(len(xs), 64 * nlist), replace=False)])
        ix.add(xs)
        return ix

    def params(self, knob, sel=None):
        import faiss

        p = faiss.SearchParametersIVF(nprobe=knob)
        if sel is not None:
            p.sel = sel
        return p


class FaissIVFPQ(FaissIVFCodes):
    name = "faiss-ivfpq"  # dims / 8 sub-quantizers of 8 bits: 16 bytes a 128-d vector

    def make(self, quantizer, d, nlist):
        import faiss

        return faiss.IndexIVFPQ(quantizer, d, nlist, d // 8, 8)


class FaissIVFPQFastScan(FaissIVFCodes):
    name = "faiss-ivfpqfs"  # dims / 4 sub-quantizers of 4 bits (SIMD lookups): 16 bytes a 128-d vector

    def make(self, quantizer, d, nlist):
        import faiss

        return faiss.IndexIVFPQFastScan(quantizer, d, nlist, d // 4, 4)


class FaissIVFSQ8(FaissIVFCodes):
    name = "faiss-ivfsq8"  # one byte a dimension

    def make(self, quantizer, d, nlist):
        import faiss

        return faiss.IndexIVFScalarQuantizer(quantizer, d, nlist, faiss.ScalarQuantizer.QT_8bit)


class FaissIVFRaBitQ(FaissIVFCodes):
    name = "faiss-ivfrabitq"  # one bit a dimension plus two floats a vector

    def make(self, quantizer, d, nlist):
        import faiss

        return faiss.IndexIVFRaBitQ(quantizer, d, nlist)

    def params(self, knob, sel=None):
        import faiss

        p = faiss.IVFRaBitQSearchParameters()
        p.nprobe = knob
        if sel is not None:
            p.sel = sel
        return p


class FaissIVFRaBitQFastScan(FaissIVFRaBitQ):
    name = "faiss-ivfrabitqfs"

    def make(self, quantizer, d, nlist):
        import faiss

        return faiss.IndexIVFRaBitQFastScan(quantizer, d, nlist)


COMPRESSED = {
    "faiss-hnswpq": FaissHNSWPQ,
    "faiss-ivfpq": FaissIVFPQ,
    "faiss-ivfpqfs": FaissIVFPQFastScan,
    "faiss-ivfsq8": FaissIVFSQ8,
    "faiss-ivfrabitq": FaissIVFRaBitQ,
    "faiss-ivfrabitqfs": FaissIVFRaBitQFastScan,
}


class HnswLib(Ours):
    name = "hnswlib"
    ext = "hnsw"
    knobs = [16, 32, 64, 128, 256]

    def build_part(self, xs):
        import hnswlib

        ix = hnswlib.Index(space="l2", dim=xs.shape[1])
        ix.init_index(max_elements=len(xs), M=16, ef_construction=128, random_seed=1)
        ix.set_num_threads(os.cpu_count() or 1)
        ix.add_items(xs, np.arange(len(xs)))
        return ix

    def save(self, ix, path):
        ix.save_index(path)

    def open_part(self, path):
        import hnswlib

        ix = hnswlib.Index(space="l2", dim=self.parts.x.shape[1])
        ix.load_index(path)
        ix.set_num_threads(1)
        return ix

    def search_part(self, ix, v, knob, s, count=K, flt=None):
        ix.set_ef(max(knob, count))
        i, d = ix.knn_query(v[None, :], k=count, filter=flt)
        return d[0], i[0].astype(np.int64)

    def search_part_filtered(self, ix, v, knob, s, allowed, sel):
        m = allowed[1]
        try:
            return self.search_part(ix, v, knob, s, flt=lambda j: bool(m[j]))
        except RuntimeError:  # fewer than k allowed rows reached
            return np.zeros(0, np.float32), np.zeros(0, np.int64)


class Brute(Ours):
    """Exact search over the allowed rows of each part with numpy (the allow-list is the filter)."""

    name = BRUTE

    def __init__(self, parts, metric, root):
        super().__init__(parts, metric, root)
        self.indexes = [None] * len(parts.ranges())

    def search_part_filtered(self, ix, v, knob, s, allowed, sel):
        idx = allowed[0]
        d = self.exact(self.parts.x[s + idx], v)
        kk = min(K, len(d))
        p = np.argpartition(d, kk - 1)[:kk]
        return d[p], idx[p]


class Lance:
    """One Lance dataset of all vectors with one vector index."""

    def __init__(self, x, tag, metric, root, kind):
        self.x, self.tag, self.metric, self.kind = x, tag, metric, kind
        self.name = {"IVF_PQ": "lance-ivfpq", "IVF_HNSW_SQ": "lance-hnswsq"}[kind]
        self.path = os.path.join(root, f"{self.name}-{metric}.lance")
        n = len(x)
        if kind == "IVF_PQ":
            self.knob_name = "nprobes/refine"
            self.knobs = [(p, r) for p in (8, 32) for r in (10, 50, 100, 200)]  # PQ16 needs a large refine
        else:
            self.knob_name = "nprobes/ef/refine"
            self.knobs = None  # after the build: nprobes depends on the partitions Lance chose
        self.num_partitions = max(16, n // 4096) if kind == "IVF_PQ" else None

    def build(self, reuse=False):
        import lance
        import pyarrow as pa

        if reuse and os.path.exists(self.path):
            self.ds = lance.dataset(self.path)
            if any(i["name"] == "vec_idx" for i in self.ds.list_indices()):
                return math.nan, self.opened()
        shutil.rmtree(self.path, ignore_errors=True)
        d = self.x.shape[1]
        tbl = pa.table(
            {
                "id": pa.array(np.arange(len(self.x), dtype=np.int64)),
                "tag": pa.array(self.tag),
                "vec": pa.FixedSizeListArray.from_arrays(pa.array(self.x.reshape(-1)), d),
            }
        )
        ds = lance.write_dataset(tbl, self.path)
        del tbl
        t0 = time.perf_counter()
        kw = {"metric": "cosine" if self.metric == "cos" else "L2"}
        if self.kind == "IVF_PQ":
            kw.update(num_partitions=self.num_partitions, num_sub_vectors=d // 8)
        ds = ds.create_index("vec", self.kind, **kw)
        t = time.perf_counter() - t0
        vec_size = du(os.path.join(self.path, "_indices"))  # the vector index only: the tag index comes next
        ds.create_scalar_index("tag", "BITMAP")
        self.ds = lance.dataset(self.path)
        size = self.opened()
        assert size == vec_size, (size, vec_size)
        return t, size

    def opened(self):
        """Partitions and knobs of the built index; its size on disk."""
        st = self.ds.stats.index_stats("vec_idx")["indices"][0]
        self.partitions = st["num_partitions"]
        log(f"  {self.name}: {self.partitions} partitions, {st.get('sub_index', {}).get('params', '')}")
        if self.knobs is None:
            probes = sorted({1, min(4, self.partitions)})
            self.knobs = [(p, ef, r) for p in probes for ef in (32, 64, 128, 256) for r in (1, 2)]
        uuid = next(str(i["uuid"]) for i in self.ds.list_indices() if i["name"] == "vec_idx")
        return du(os.path.join(self.path, "_indices", uuid))

    def nearest(self, v, knob):
        nn = {"column": "vec", "q": v, "k": K, "nprobes": knob[0]}
        if self.kind == "IVF_PQ":
            nn["refine_factor"] = knob[1]
        else:
            nn["ef"] = knob[1]
            if knob[2] > 1:
                nn["refine_factor"] = knob[2]
        return nn

    def search(self, v, knob, ds=None):
        t = (ds or self.ds).to_table(nearest=self.nearest(v, knob), columns=["id"], disable_scoring_autoprojection=True)
        out = np.full(K, -1, np.int64)
        ids = t.column("id").to_numpy()
        out[: len(ids)] = ids
        return out

    def search_filtered(self, v, knob, sel):
        t = self.ds.to_table(
            nearest=self.nearest(v, knob),
            columns=["id"],
            filter=f"tag < {SELECTIVITIES[sel]}",
            prefilter=True,
            disable_scoring_autoprojection=True,
        )
        out = np.full(K, -1, np.int64)
        ids = t.column("id").to_numpy()
        out[: len(ids)] = ids
        return out


# ------------------------------------------------------------------------------------------------ run


def around_target(rows, target=0.95, extra=2):
    """Knobs for the filtered runs: the first reaching the target recall and the `extra` after it."""
    knobs = [r["knob"] for r in rows]
    first = next((j for j, r in enumerate(rows) if r["recall"] >= target), len(rows) - 1)
    return knobs[first : first + 1 + extra]


def filter_knobs(c, rows):
    """Knobs for the filtered runs: the first reaching recall 0.95 unfiltered (the last if none) and, where
    the knob is a graph ef / IVF nprobe that filtering needs more of, 4x and 16x it. One knob where the
    filter is an over-fetch (usearch: the fetch count, not ef, decides), two for hnswlib (slow callable)."""
    first = around_target(rows, extra=0)[0]
    if isinstance(c, USearch):
        return [first]
    if isinstance(c, HnswLib):
        return [first, first * 4]
    if isinstance(c, FaissHNSWSQ):  # and the IVFs: nprobe, as efSearch, x 4 and x 16
        return [first, (first[0] * 4, first[1]), (first[0] * 16, first[1])]
    if isinstance(c, FaissHNSW):  # and FaissIVF
        return [first, first * 4, first * 16]
    return around_target(rows)


def best_at(rows, target=0.95):
    ok = [r for r in rows if r["recall"] >= target]
    return min(ok, key=lambda r: r["median"]) if ok else None


def open_times(c):
    """(cold open ms, cold first query ms, warm open ms) of part 0's index file."""
    path = c.path(0)
    for _ in range(2):
        evict(path)
        t0 = time.perf_counter()
        ix = c.open_part(path)
        t1 = time.perf_counter()
        c.search_part(ix, c.parts.x[0] + 0.01, c.knobs[0], 0)
        t2 = time.perf_counter()
        del ix
    cold_open, cold_first = t1 - t0, t2 - t1
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        ix = c.open_part(path)
        warm.append(time.perf_counter() - t0)
        del ix
    return 1e3 * cold_open, 1e3 * cold_first, 1e3 * min(warm)


def lance_open_times(c, knob):
    import lance

    v = c.x[0] + 0.01
    evict(c.path)
    t0 = time.perf_counter()
    ds = lance.dataset(c.path)
    t1 = time.perf_counter()
    c.search(v, knob, ds)
    t2 = time.perf_counter()
    ds = lance.dataset(c.path)
    t3 = time.perf_counter()
    c.search(v, knob, ds)
    t4 = time.perf_counter()
    return 1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2), 1e3 * (t4 - t3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--splits", type=int, default=8)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dir", default="/tmp/indextables-vector-bench")
    ap.add_argument("--candidates", default=DEFAULT, help=f"comma list of {ALL}")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="open the index files of an earlier run with the same "
        "--dir, --vectors and --splits instead of building them (build time then not measured)",
    )
    ap.add_argument("--cos", action="store_true", help="also cosine, for usearch-f32/i8 and lance-hnswsq")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    wanted = args.candidates.split(",")
    per_m = 1e6 / args.vectors

    start = time.perf_counter()
    t0 = time.perf_counter()
    x, q, tag = make_data(args.vectors, args.dims, args.queries)
    log(f"data {args.vectors}x{args.dims} + {args.queries} queries: {time.perf_counter() - t0:.1f}s")
    masks = {"all": None, **{s: tag < n for s, n in SELECTIVITIES.items()}}

    results = []  # one dict per (metric, candidate)
    for metric in ["l2"] + (["cos"] if args.cos else []):
        xm, qm = (x, q) if metric == "l2" else (normalized(x), normalized(q))
        t0 = time.perf_counter()
        truth = exact_topk(xm, qm, masks)
        log(f"[{metric}] ground truth: {time.perf_counter() - t0:.1f}s")
        parts = Parts(xm, tag, args.splits)
        cands = []
        for w in wanted:
            if metric == "cos" and w not in ("usearch-f32", "usearch-i8", "lance-hnswsq"):
                continue
            if w == "usearch-f32":
                cands.append(USearch(parts, metric, args.dir, "f32", [16, 32, 64, 128, 256]))
            elif w in ("usearch-f16", "usearch-i8"):
                knobs = [(ef, r) for ef in (32, 64, 128, 256) for r in (2, 4)]
                cands.append(USearch(parts, metric, args.dir, w.split("-")[1], knobs))
            elif w == "faiss-hnsw":
                cands.append(FaissHNSW(parts, metric, args.dir))
            elif w == "faiss-hnswsq":
                cands.append(FaissHNSWSQ(parts, metric, args.dir))
            elif w == "faiss-ivf":
                cands.append(FaissIVF(parts, metric, args.dir))
            elif w in COMPRESSED:
                cands.append(COMPRESSED[w](parts, metric, args.dir))
            elif w == "hnswlib":
                cands.append(HnswLib(parts, metric, args.dir))
            elif w == "lance-ivfpq":
                cands.append(Lance(xm, tag, metric, args.dir, "IVF_PQ"))
            elif w == "lance-hnswsq":
                cands.append(Lance(xm, tag, metric, args.dir, "IVF_HNSW_SQ"))
        import faiss

        faiss.omp_set_num_threads(os.cpu_count() or 1)
        for c in cands:
            is_lance = isinstance(c, Lance)
            t0 = time.perf_counter()
            build_s, size = c.build(args.reuse)
            log(f"[{metric}] {c.name}: built in {build_s:.1f}s, {size / 1e6:.1f} MB ({time.perf_counter() - t0:.1f}s)")
            faiss.omp_set_num_threads(1)
            res = {
                "metric": metric,
                "name": c.name,
                "knob_name": c.knob_name,
                "build": build_s * per_m,
                "size": size * per_m,
                "rows": [],
                "filtered": {},
            }
            for knob in c.knobs:
                r, med, p95, full = run_queries(lambda v: c.search(v, knob), qm, truth["all"])
                res["rows"].append({"knob": knob, "recall": r, "median": med, "p95": p95, "full": full})
                log(f"  {c.name} {c.knob_name}={knob}: recall {r:.3f} median {med:.2f}ms p95 {p95:.2f}ms")
            for sel in SELECTIVITIES:
                res["filtered"][sel] = []
                for knob in filter_knobs(c, res["rows"]):
                    r, med, p95, full = run_queries(lambda v: c.search_filtered(v, knob, sel), qm, truth[sel])
                    res["filtered"][sel].append({"knob": knob, "recall": r, "median": med, "p95": p95, "full": full})
                    log(f"  {c.name} {sel} {c.knob_name}={knob}: recall {r:.3f} median {med:.2f}ms full {full:.2f}")
            if is_lance:
                res["open"] = lance_open_times(c, best_at(res["rows"])["knob"] if best_at(res["rows"]) else c.knobs[-1])
            else:
                res["open"] = open_times(c)
            log(f"  {c.name} open: {res['open']}")
            faiss.omp_set_num_threads(os.cpu_count() or 1)
            results.append(res)
        # exact brute force over the allow-lists
        b = Brute(parts, metric, args.dir)
        res = {"metric": metric, "name": BRUTE, "knob_name": "-", "build": 0.0, "size": 0.0, "rows": [], "filtered": {}}
        for sel in SELECTIVITIES:
            r, med, p95, full = run_queries(lambda v: b.search_filtered(v, None, sel), qm, truth[sel])
            n_allowed = sum(len(a[0]) for a in parts.allowed[sel])
            res["filtered"][sel] = [
                {
                    "knob": "-",
                    "recall": r,
                    "median": med,
                    "p95": p95,
                    "full": full,
                    "ns_per_vector": 1e6 * med / n_allowed,
                }
            ]
            log(f"  {BRUTE} {sel}: recall {r:.3f} median {med:.2f}ms ({1e6 * med / n_allowed:.1f} ns/allowed vector)")
        results.append(res)

    report(results, args)
    print(f"\nwall time {time.perf_counter() - start:.0f}s")


def fmt_build(seconds):
    return "        -" if math.isnan(seconds) else f"{seconds:9.1f}"


def fmt_knob(k):
    return "/".join(str(a) for a in k) if isinstance(k, tuple) else str(k)


def report(results, args):
    print(
        f"\n{args.vectors:,} vectors x {args.dims} dims, {args.splits} parts (ours), {args.queries} queries, "
        f"k={K}; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
    )
    print("\nSweeps (recall@10, median / p95 ms of one query over all parts, one thread for ours):")
    for r in results:
        if not r["rows"]:
            continue
        line = "  ".join(f"{fmt_knob(x['knob'])}:{x['recall']:.3f}@{x['median']:.2f}/{x['p95']:.2f}" for x in r["rows"])
        print(f"  [{r['metric']}] {r['name']:14s} {r['knob_name']}  {line}")
    for metric in sorted({r["metric"] for r in results}):
        rs = [r for r in results if r["metric"] == metric]
        lance_best = [best_at(r["rows"]) for r in rs if r["name"].startswith("lance") and best_at(r["rows"])]
        ref = min((b["median"] for b in lance_best), default=None)
        print(
            f"\n[{metric}] at recall >= 0.95 (x Lance = median latency / best Lance median at >= 0.95"
            f"{'' if ref is None else f', {ref:.2f} ms'}):"
        )
        print(
            f"  {'candidate':14s} {'build s/M':>9s} {'size MB/M':>9s} {'knob':>10s} {'recall':>6s} {'med ms':>7s} "
            f"{'p95 ms':>7s} {'x Lance':>7s} {'ms/part':>7s}"
        )
        for r in rs:
            if not r["rows"]:
                continue
            b = best_at(r["rows"])
            if b is None:
                top = max(r["rows"], key=lambda x: x["recall"])
                print(
                    f"  {r['name']:14s} {fmt_build(r['build'])} {r['size'] / 1e6:9.1f}  never >= 0.95 (best {top['recall']:.3f}"
                    f" at {fmt_knob(top['knob'])}, {top['median']:.2f} ms)"
                )
                continue
            ratio = f"{b['median'] / ref:7.2f}" if ref else "      -"
            part = "      -" if r["name"].startswith("lance") else f"{b['median'] / args.splits:7.3f}"
            print(
                f"  {r['name']:14s} {fmt_build(r['build'])} {r['size'] / 1e6:9.1f} {fmt_knob(b['knob']):>10s} "
                f"{b['recall']:6.3f} {b['median']:7.2f} {b['p95']:7.2f} {ratio} {part}"
            )
        for sel in SELECTIVITIES:
            fl = []
            for r in rs:
                for x in r["filtered"].get(sel, []):
                    fl.append((r["name"], x))
            lance_ok = [x["median"] for n, x in fl if n.startswith("lance") and x["recall"] >= 0.95]
            fref = min(lance_ok, default=None)
            print(
                f"  filtered {sel} (recall, median/p95 ms, share of queries with k rows"
                f"{'' if fref is None else f'; best Lance at >= 0.95: {fref:.2f} ms'}):"
            )
            for n, x in fl:
                extra = f"  {x['ns_per_vector']:.1f} ns/allowed vector" if "ns_per_vector" in x else ""
                print(
                    f"    {n:14s} {fmt_knob(x['knob']):>10s} recall {x['recall']:.3f}  {x['median']:7.2f}/"
                    f"{x['p95']:7.2f}  full {x['full']:.2f}{extra}"
                )
        print(
            "  open one part's index (ms): cold open / first query after it / warm open"
            " (Lance: the whole dataset; cold open, cold query, warm open, warm query)"
        )
        for r in rs:
            if "open" in r:
                print(f"    {r['name']:14s} " + " / ".join(f"{v:.2f}" for v in r["open"]))


if __name__ == "__main__":
    main()
