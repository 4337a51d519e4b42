"""A split's nearest-neighbour index of a vector column (`indexing.vector.<col>`): two files bundled
with the split's index files, described in the split footer under `vectors`:

- `vectors.<n>.f32`: the vectors themselves, `[row ids: count x i64 LE][vectors: count x dims x
  f32 LE]`, rows in row id order (a row whose vector is NULL is not there): exact distances for
  re-ranking and for searches among few rows, read memory-mapped. For an `array<float>` column it
  is the column's only copy: the row store holds the column as empty lists (`"rowStore": false`)
  and reads take its values from here (cache/vector_rows.py);
- `vectors.<n>.faiss`: a faiss index of those vectors in the same order, of the column's kind
  (vector_kinds.py: `ivf_pq` codes by default, or `hnsw` with its own float32 copy; a cosine
  index holds the normalised vectors, an `hnsw` dot graph lifted ones: vector_space.py, the
  footer's `mipsNorm`), opened memory-mapped (`IO_FLAG_MMAP_IFC`); its
  labels are positions in the vectors file. A split of fewer than MIN_INDEXED vectors of a kind
  that trains (ivf_pq) has none (`"file": ""`): it is always compared exactly.

    "vectors": {"<column>": {"file": "vectors.0.faiss", "vectors": "vectors.0.f32", "dims": 128,
                              "metric": "cosine", "count": 125000, "library": "faiss 1.15.1",
                              "kind": "ivf_pq", "nlist": 354, "m": 128, "rowStore": false}}

A footer without `kind` (splits written before the kinds) is an `hnsw` graph with `m` and
`efConstruction`, and its row store holds the column.

Why faiss (bench/vector_index_choice.py: 1M x 128 in 8 parts, 2 cores): at recall >= 0.95 its HNSW
answered in 1.1 ms where usearch took 1.6 and Lance's best index 5.3; it built in 199 s per million
vectors (usearch 542, Lance's HNSW 470), opens a part memory-mapped in 4 ms and can filter by a
bitmap inside the graph search; its compressed indexes (IVF-PQ, SQ, RaBitQ) share that interface.
MIT; wheels for CPython 3.10+ on manylinux_2_28 x86_64/aarch64, macOS arm64 and Windows.

Distances (smaller is nearer): cosine 1 - cos(a, b); l2 the squared Euclidean distance; dot the
negated inner product -a.b.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indextables_spark.core.schema.types import VectorSpec
from indextables_spark.core.split.format.vector_kinds import DEFAULT_KIND, KINDS, LEGACY_KIND
from indextables_spark.core.split.format.vector_space import (
    LIFT_KEY,
    index_vectors,
    lift_norm,
    lift_of,
    lifts,
    metric_scale,
    query_vectors,
)
from indextables_spark.errors import SchemaMismatchError, SplitFormatError

VECTORS_KEY = "vectors"  # split footer key
KIND_KEY = "kind"
ROW_STORE_KEY = "rowStore"  # false: the row store holds the column as empty lists, its values are here
_BASE_KEYS = ("file", "vectors", "dims", "metric", "count", "library")
MIN_INDEXED = 1_000  # fewer vectors of a kind that trains: no index file (always compared exactly)
TRAIN_PER_LIST = 32  # training vectors per inverted list (a sample of the split's vectors)
KMEANS_ITERATIONS = 10  # of the inverted file's and the quantizers' k-means


# Makes byte ranges of one of a split's files present in its directory, by file name: a split
# directory fetched in part from object storage (cache/file_pages.py).
RangeFetch = Callable[[str, list[tuple[int, int]]], object]

VECTOR_FILE_PREFIX = (
    "vectors."  # every vector index file's name starts so (cache/sparse.py leaves them to vector reads)
)


def index_file_names(ordinal: int) -> tuple[str, str]:
    """(graph file, vectors file) of a split's `ordinal`-th vector column (column names need not be
    safe file names: bundle.py; the footer maps each column to its files)."""
    return f"{VECTOR_FILE_PREFIX}{ordinal}.faiss", f"{VECTOR_FILE_PREFIX}{ordinal}.f32"


@dataclass(frozen=True)
class VectorIndexInfo:
    """What the split footer records of one vector column's index."""

    column: str
    file: str  # the graph
    vectors_file: str
    spec: VectorSpec
    count: int  # vectors indexed (rows with a vector)
    library: str
    params: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """The index kind (vector_kinds.py); a footer without one holds today's `hnsw`."""
        return str(self.params.get(KIND_KEY, LEGACY_KIND))

    @property
    def lift(self) -> float | None:
        """The norm an `hnsw` dot graph lifted its vectors to (vector_space.py); None: not lifted."""
        return lift_of(self.params)

    @property
    def in_row_store(self) -> bool:
        """Whether the split's row store holds the column's values (else only the vectors file)."""
        return bool(self.params.get(ROW_STORE_KEY, True))

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "vectors": self.vectors_file,
            "dims": self.spec.dims,
            "metric": self.spec.metric,
            "count": self.count,
            "library": self.library,
            **self.params,
        }

    @classmethod
    def of_footer(cls, raw: Mapping[str, Any], where: str) -> dict[str, VectorIndexInfo]:
        """The vector indexes a split footer (its JSON) describes, by column."""
        out = {}
        for column, d in (raw.get(VECTORS_KEY) or {}).items():
            try:
                out[column] = cls(
                    str(column),
                    str(d["file"]),
                    str(d["vectors"]),
                    VectorSpec(int(d["dims"]), str(d["metric"])),
                    int(d["count"]),
                    str(d["library"]),
                    {k: v for k, v in d.items() if k not in _BASE_KEYS},
                )
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise SplitFormatError(
                    f"split {where}: its footer's vector index of {column!r} is invalid ({e})"
                ) from None
        return out


def library_name() -> str:
    import faiss  # lazy: loaded by splits with vector columns only

    return f"faiss {faiss.__version__}"


def build_index(
    row_ids: np.ndarray, matrix: np.ndarray, spec: VectorSpec, index_path: str, vectors_path: str
) -> tuple[dict[str, Any], bool]:
    """Write the vectors file and the index of these vectors (row ids increasing) of `spec`'s
    kind; returns (the index's footer params: `kind` and the parameters it was built with,
    whether an index file was written: not for fewer than MIN_INDEXED vectors of a kind that trains)."""
    import faiss  # lazy: loaded by splits with vector columns only

    ids = np.ascontiguousarray(row_ids, dtype="<i8")
    vectors = np.ascontiguousarray(matrix, dtype="<f4")
    with open(vectors_path, "wb") as f:
        f.write(ids.tobytes())
        f.write(vectors.tobytes())
    kind = spec.kind or DEFAULT_KIND
    if KINDS[kind].trains and len(ids) < MIN_INDEXED:
        return {KIND_KEY: kind}, False
    lift = lift_norm(vectors) if lifts(kind, spec.metric) else None  # (vector_space.py)
    index, used = _new_index(faiss, kind, spec, len(ids), lift is not None)
    data = index_vectors(vectors, spec.metric, lift)
    if not index.is_trained:
        index.train(_training_sample(data, TRAIN_PER_LIST * int(used.get("nlist", 1))))
    if len(ids):
        index.add(data)
    faiss.write_index(index, index_path)
    return {KIND_KEY: kind, **used, **({LIFT_KEY: lift} if lift is not None else {})}, True


def _new_index(faiss: ModuleType, kind: str, spec: VectorSpec, n: int, lifted: bool) -> tuple[Any, dict[str, int]]:
    """An empty faiss index of the kind for n vectors, and the parameters it uses (the given
    ones, the others' defaults: vector_kinds.py). A cosine index holds normalised vectors and
    compares them by L2 (the same order), dot by inner product, or (`lifted`: a graph) by L2 in
    one more dimension (vector_space.py)."""
    given = dict(spec.params)
    d = spec.dims
    metric = faiss.METRIC_INNER_PRODUCT if spec.metric == "dot" else faiss.METRIC_L2
    if kind == "ivf_pq":
        nlist = max(1, min(given.get("nlist") or round(math.sqrt(n)), n // 39))
        m = given.get("m") or d
        quantizer = faiss.IndexFlatIP(d) if spec.metric == "dot" else faiss.IndexFlatL2(d)
        index = faiss.IndexIVFPQFastScan(quantizer, d, nlist, m, 4, metric)
        index.cp.niter = KMEANS_ITERATIONS
        index.cp.min_points_per_centroid = 1  # (trained on TRAIN_PER_LIST a list: no warning)
        index.pq.cp.niter = KMEANS_ITERATIONS
        return index, {"nlist": nlist, "m": m}
    m, ef = given.get("m", 16), given.get("ef_construction", 128)
    index = faiss.IndexHNSWFlat(d + 1, m, faiss.METRIC_L2) if lifted else faiss.IndexHNSWFlat(d, m, metric)
    index.hnsw.efConstruction = ef
    return index, {"m": m, "ef_construction": ef}


def _training_sample(data: np.ndarray, count: int) -> np.ndarray:
    """At most `count` of the vectors (a fixed-seed sample: a split's index is reproducible)."""
    if len(data) <= count:
        return data
    picked = np.sort(np.random.default_rng(38).choice(len(data), count, replace=False))
    return np.ascontiguousarray(data[picked])


class VectorIndex:
    """One split's index of one vector column: its files memory-mapped from the split cache
    (`open`), or, for a split written before the column was declared a vector, its vectors read
    from the rows and no graph (`flat`: every search compares them exactly)."""

    def __init__(
        self,
        info: VectorIndexInfo,
        ids: np.ndarray,
        matrix: np.ndarray,
        graph_path: str | None,
        where: str,
        fetch: RangeFetch | None = None,
    ):
        self.info = info
        self.where = where
        self._fetch = fetch
        # what this process fetched already (or knows present) of a directory held in part
        self._ids_fetched = self._graph_fetched = fetch is None
        self._have: np.ndarray | None = None  # positions whose vectors are present
        self.metric = info.spec.metric
        self._ids = ids
        self.matrix = matrix
        self._graph_path = graph_path
        self._graph: Any = None
        self._norms: np.ndarray | None = None
        # the positions of the last read-only (shared) selection: a cached selection
        # (read/vector/selections.py) is asked for again by the next search under the same filters
        self._last_positions: tuple[np.ndarray, np.ndarray] | None = None
        self._dense: bool | None = None  # every row has a vector: a row id is its position (`dense`)

    @classmethod
    def open(cls, local_dir: str, info: VectorIndexInfo, where: str, fetch: RangeFetch | None = None) -> VectorIndex:
        """The index files of a split (extracted in `local_dir`), checked against the footer.
        `fetch`: the directory may lack parts of them (a split on object storage fetched only as
        far as reads need): the file's row ids, the index file and vectors are fetched when first
        read (`ids`, `fetch_index`, `vectors`) — a search reads the compressed index, the row ids
        and its candidates' vectors, not the vectors file whole."""
        if info.kind not in KINDS:
            raise SplitFormatError(
                f"split {where}: the vector index of {info.column!r} is of kind {info.kind!r}, which this reader "
                f"does not know (kinds: {', '.join(KINDS)})"
            )
        path = os.path.join(local_dir, info.vectors_file)
        n, dims = info.count, info.spec.dims
        expected = n * 8 + n * dims * 4
        try:
            size = os.path.getsize(path)
        except OSError as e:
            raise SplitFormatError(f"split {where}: the vectors of {info.column!r} are missing ({e})") from None
        if size != expected:
            raise SplitFormatError(
                f"split {where}: the vectors file of {info.column!r} has {size} bytes, {n} vectors of {dims} "
                f"dimensions take {expected}"
            )
        if not n:
            return cls(info, np.empty(0, np.int64), np.empty((0, dims), np.float32), None, where)
        # plain ndarrays over the maps: indexing a np.memmap wraps every result in a memmap (~1 ms
        # per gather of 10,000 rows)
        ids = np.asarray(np.memmap(path, dtype="<i8", mode="r", shape=(n,)))
        matrix = np.asarray(np.memmap(path, dtype="<f4", mode="r", offset=n * 8, shape=(n, dims)))
        return cls(info, ids, matrix, os.path.join(local_dir, info.file) if info.file else None, where, fetch)

    @classmethod
    def flat(
        cls, column: str, spec: VectorSpec, batches: Iterable[tuple[pa.Array | None, pa.RecordBatch]], where: str
    ) -> VectorIndex:
        """The vectors of a split's rows without a graph: `batches` are (row ids, the column) in
        row order; SchemaMismatchError naming the row when one is not a vector of the declared
        dimensions with finite components (NULL vectors are left out)."""
        all_ids, parts = [np.empty(0, np.int64)], [np.empty((0, spec.dims), np.float32)]
        for ids, batch in batches:
            assert ids is not None  # asked for with ids
            keep = batch.column(0).is_valid()
            ids, values = ids.filter(keep), batch.column(0).filter(keep)
            if not len(values):
                continue
            lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
            flat = values.flatten()
            bad = np.flatnonzero(lengths != spec.dims)
            if not len(bad) and flat.null_count == 0:
                matrix = flat.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, spec.dims)
                bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
                if not len(bad):
                    all_ids.append(ids.to_numpy().astype(np.int64))
                    parts.append(matrix)
                    continue
            row = ids[int(bad[0]) if len(bad) else 0].as_py()
            raise SchemaMismatchError(
                f"split {where}: row {row} of column {column!r} is not a vector of {spec.dims} finite components "
                f"(the split was written before indexing.vector.{column} was set: rewrite it, e.g. MERGE SPLITS)"
            )
        ids_all = np.concatenate(all_ids)
        info = VectorIndexInfo(column, "", "", spec, len(ids_all), "", {})
        return cls(info, ids_all, np.ascontiguousarray(np.concatenate(parts)), None, where)

    @property
    def has_graph(self) -> bool:
        """Whether the split has an index file to search (else every search compares exactly)."""
        return self._graph_path is not None

    @property
    def holds_vectors(self) -> bool:
        """Whether the index holds float32 vectors (an `hnsw` graph: its candidates are near exact)."""
        return KINDS[self.info.kind].holds_vectors if self.info.kind in KINDS else True

    @property
    def inverted_lists(self) -> int:
        """The inverted file's lists (nlist) of an `ivf_*` kind; 0 for a graph."""
        return int(self.info.params.get("nlist", 0)) if self.info.kind.startswith("ivf") else 0

    def __len__(self) -> int:
        return self.info.count

    @property
    def ids(self) -> np.ndarray:
        """The row ids of the vectors file, in its order (fetched first when the directory lacks them)."""
        if not self._ids_fetched:
            assert self._fetch is not None
            self._fetch(self.info.vectors_file, [(0, self.info.count * 8)])
            self._ids_fetched = True
        return self._ids

    @property
    def dense(self) -> bool:
        """Whether every row has a vector (ids 0..n-1): a row id is then its position."""
        if self._dense is None:
            ids = self.ids
            self._dense = not len(ids) or (int(ids[0]) == 0 and int(ids[-1]) == len(ids) - 1)
        return self._dense

    def lacks_index(self) -> bool:
        """Whether a search would fetch the index file or the row ids first (no I/O here)."""
        return not (self._ids_fetched and (self._graph_fetched or self._graph_path is None))

    @property
    def held_in_part(self) -> bool:
        """Whether its directory may lack parts of its files (fetched as they are read)."""
        return self._fetch is not None

    def lacks_vectors(self, positions: np.ndarray) -> bool:
        """Whether `vectors(positions)` would fetch some of them first (no I/O here)."""
        if self._fetch is None or not len(positions) or not len(self.matrix):
            return False
        return self._have is None or not bool(self._have[positions].all())

    def _graph_size(self) -> int:
        assert self._graph_path is not None
        return os.path.getsize(self._graph_path)

    def vectors(self, positions: np.ndarray | None = None) -> np.ndarray:
        """The vectors at these positions of the vectors file (None: all), fetched first when
        the directory lacks them (`open`'s fetch)."""
        self.fetch_vectors(positions)
        return self.matrix if positions is None else self.matrix[positions]

    def fetch_vectors(self, positions: np.ndarray | None = None) -> None:
        """Fetch the vectors at these positions (None: all) when the directory lacks them."""
        if self._fetch is None or not len(self.matrix):
            return
        n, width = self.info.count, self.info.spec.dims * 4
        if self._have is None:
            self._have = np.zeros(n, bool)
        if positions is None:
            if not self._have.all():
                self._fetch(self.info.vectors_file, [(n * 8, n * 8 + n * width)])
                self._have[:] = True
            return
        lacking = np.unique(np.asarray(positions)[~self._have[positions]])
        if len(lacking):
            starts = n * 8 + lacking.astype(np.int64) * width
            self._fetch(self.info.vectors_file, list(zip(starts.tolist(), (starts + width).tolist())))
            self._have[lacking] = True

    def positions(self, row_ids: np.ndarray) -> np.ndarray:
        """Positions in the vectors file of those of these sorted row ids that have a vector."""
        last = self._last_positions
        if last is not None and last[0] is row_ids:
            return last[1]
        if self.dense:
            ids = np.asarray(row_ids, dtype=np.int64)
            return ids if not len(ids) or ids[-1] < len(self.ids) else ids[ids < len(self.ids)]
        at = np.searchsorted(self.ids, row_ids)
        ok = at < len(self.ids)
        at = at[ok]
        out = np.asarray(at[self.ids[at] == row_ids[ok]], dtype=np.int64)
        if not row_ids.flags.writeable:
            out.flags.writeable = False
            self._last_positions = (row_ids, out)
        return out

    def rough_distances(self, positions: np.ndarray | None, queries: np.ndarray) -> np.ndarray:
        """float32 distances of the vectors at `positions` (None: all) to each of `queries` (a
        matrix, one query a row): (queries x vectors), to pick candidates (`distances` gives the
        exact ones): one matrix product, the vectors' norms computed once per opened index."""
        m = self.vectors(positions)
        q = np.asarray(queries, dtype=np.float32).reshape(-1, self.info.spec.dims)
        dots = np.asarray(q @ m.T, dtype=np.float32)
        if self.metric == "dot":
            return -dots
        if self._norms is None and (positions is None or self._fetch is None):
            every = m if positions is None else self.vectors()
            self._norms = np.sqrt(np.einsum("ij,ij->i", every, every, dtype=np.float32))
        if self._norms is not None:
            norms = (self._norms if positions is None else self._norms[positions])[None, :]
        else:  # (a directory held in part: the norms of these vectors only, not of the file's)
            norms = np.sqrt(np.einsum("ij,ij->i", m, m, dtype=np.float32))[None, :]
        if self.metric == "cosine":
            return np.asarray(1.0 - dots / (norms * np.linalg.norm(q, axis=1)[:, None]), dtype=np.float32)
        return np.asarray(norms * norms - 2 * dots + np.einsum("ij,ij->i", q, q)[:, None], dtype=np.float32)  # l2

    def graph_search(
        self, queries: np.ndarray, count: int, expansion: int, allowed: np.ndarray | None = None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """(row ids, the index's estimates of their distances) of about the `count` nearest
        vectors of each query (a matrix, one query a row; the index's approximate answer,
        searched for all queries in one call), nearest first, among the vectors at the sorted
        positions `allowed` when given: faiss walks the graph (or scans the probed lists) and
        keeps only those (an IDSelectorBitmap), so a selection needs no over-fetch. `expansion`:
        a graph's candidate list (efSearch), an inverted file's probed lists (nprobe). The
        estimates are in the metric's scale (`distances`): exact in float32 for a graph holding
        the vectors, from the codes for a compressed index."""
        if self.info.count == 0 or count <= 0:
            return [(np.empty(0, np.int64), np.empty(0, np.float64)) for _ in range(len(queries))]
        import faiss  # lazy: loaded by splits with vector columns only

        graph = self._open_graph()
        asked = np.asarray(queries, dtype=np.float32).reshape(-1, self.info.spec.dims)
        q = query_vectors(asked, self.metric, self.info.lift)
        if self.inverted_lists:
            params = faiss.SearchParametersIVF(nprobe=min(expansion, self.inverted_lists))  # type: ignore[call-arg]
        else:
            params = faiss.SearchParametersHNSW(efSearch=max(expansion, count))  # type: ignore[attr-defined]
        if allowed is not None:
            bits = np.zeros(self.info.count, dtype=bool)
            bits[allowed] = True
            bitmap = np.packbits(bits, bitorder="little")  # bit i of byte i // 8: faiss's order
            selector = faiss.IDSelectorBitmap(self.info.count, faiss.swig_ptr(bitmap))
            params.sel = selector  # the selector and its bitmap must outlive the search call
        found, labels = graph.search(q, min(count, self.info.count), params=params)
        # (the index's own comparison: a cosine graph written before the kinds compares by inner product)
        by_inner_product = graph.metric_type == faiss.METRIC_INNER_PRODUCT
        estimates = metric_scale(np.asarray(found, np.float64), self.metric, asked, self.info.lift, by_inner_product)
        return [
            (np.asarray(self.ids[row[row >= 0]], dtype=np.int64), est[row >= 0]) for row, est in zip(labels, estimates)
        ]

    def fetch_index(self) -> None:
        """Fetch the index file and the row ids (which its labels are mapped through) when the
        directory lacks them (what `graph_search` reads)."""
        if not self._graph_fetched and self._graph_path is not None:
            assert self._fetch is not None
            self._fetch(self.info.file, [(0, self._graph_size())])
        self._graph_fetched = True
        _ = self.ids

    def _open_graph(self) -> Any:
        if self._graph_path is None:
            raise SplitFormatError(
                f"split {self.where}: {self.info.column!r} has no vector graph (it is searched exactly)"
            )
        if self._graph is None:
            import faiss  # lazy: loaded by splits with vector columns only

            self.fetch_index()  # the compressed index, whole (what opening it reads)
            try:
                graph = faiss.read_index(self._graph_path, faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
            except RuntimeError as e:
                raise SplitFormatError(
                    f"split {self.where}: the vector index of {self.info.column!r} does not open ({e})"
                ) from None
            dims = self.info.spec.dims + (self.info.lift is not None)
            if graph.ntotal != self.info.count or graph.d != dims:
                raise SplitFormatError(
                    f"split {self.where}: the vector index of {self.info.column!r} does not hold the "
                    f"{self.info.count} vectors of {self.info.spec.dims} dimensions its footer records"
                )
            self._graph = graph
        return self._graph


def distances(matrix: np.ndarray, query: np.ndarray, metric: str) -> np.ndarray:
    """Exact distances (float64) of each row of `matrix` to `query` under the metric (module docstring)."""
    m = np.asarray(matrix, dtype=np.float64)
    q = query.astype(np.float64, copy=False)
    if metric == "cosine":
        norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
        return np.asarray(1.0 - (m @ q) / norms)
    if metric == "l2":
        diff = m - q
        return np.asarray(np.einsum("ij,ij->i", diff, diff))
    if metric == "dot":
        return np.asarray(-(m @ q))
    raise ValueError(f"unknown metric {metric!r}")
