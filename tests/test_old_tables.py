"""Tables written by the code of older commits (from git history), read by this code: every read
compared with what that code answers on the same table, and with the exact answer where one is
computable (rows and counts by pyarrow, vector top-k by numpy). Then this code writes to the old
table (append, delete, MERGE SPLITS) and the reads still give the exact answers.

Old writers simulated with today's code (monkeypatched builders) hid a bug here: a cosine graph
written before the vector index kinds compares by inner product, and its estimates were read as
distances, so an unfiltered search of 3+ such splits kept the farthest candidates (fixed with
vector_index.graph_search reading the estimates by the index's own metric). The reads of
tests/old_tables.py catch it: exactBelow=0 sends every split through its graph, and 6 splits pool
more candidates than the table re-ranks (vector/table_search.py TABLE_REFINE).

The older code runs in a subprocess with PYTHONPATH on `git archive <commit> src`; its tables and
answers are made once per session.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pytest

import indextables_spark as it
from indextables_spark.core.split.read.vector.nearest import EXACT_BELOW
from indextables_spark.core.storage import open_storage

sys.path.insert(0, os.path.dirname(__file__))
import old_tables as ot  # noqa: E402
from git_history import older_source  # noqa: E402
from test_vector_search import exact  # noqa: E402

HELPER = Path(__file__).with_name("old_tables.py")
RELEASE = "5392dfd"  # release 0.2.0: no vector columns; BM25 of each split's own statistics
BEFORE_KINDS = "c7f3a95"  # the last commit before the read-path redesign, the vector kinds and split format 2
COMMITS = (RELEASE, BEFORE_KINDS)


def has_vectors(commit: str) -> bool:
    return commit != RELEASE


# The older code's tables: name -> (`secret` index-only, MERGE SPLITS after the delete). MERGE SPLITS
# leaves a table with an index-only column as it is (it rebuilds splits from their rows).
LAYOUTS = {"indexonly": (True, False), "merged": (False, True)}


class OldTable:
    """A table the commit's code wrote (a layout of LAYOUTS), the data it wrote and that code's
    answers to ot.reads."""

    def __init__(self, commit: str, layout: str, root: Path, src: Path):
        self.commit, self.layout, self.root, self.src = commit, layout, root, str(src)
        self.index_only, self.merged = LAYOUTS[layout]
        self.vectors = has_vectors(commit)
        self.data = root / "data"
        self.path = str(root / "table")
        self.batches = [ot.batch(i, i * ot.ROWS_PER_BATCH, ot.ROWS_PER_BATCH, self.vectors) for i in range(ot.BATCHES)]
        self.reads = ot.reads(self.vectors)
        self.answers: dict[str, Any] = {}

    def run_old(self, command: str, **args: Any) -> None:
        run_old(self.src, command, self.root, path=self.path, **args)

    def make(self) -> OldTable:
        """Write the table with the commit's code, and ask it every read."""
        self.data.mkdir()
        for i, b in enumerate(self.batches):
            feather.write_feather(b, str(self.data / f"batch{i}.arrow"))
        self.run_old("write", data=str(self.data), vectors=self.vectors, index_only=self.index_only, merge=self.merged)
        answers = self.root / "answers.json"
        self.run_old("read", reads=self.reads, dialect=self.commit, out=str(answers))
        self.answers = json.loads(answers.read_text())
        return self


def run_old(src: str, command: str, root: Path, **args: Any) -> None:
    """tests/old_tables.py's `command` run by the code in `src` (an older commit's), its arguments
    in a JSON file under `root`."""
    payload = root / f"{command}.json"
    payload.write_text(json.dumps({"src": src, **args}))
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run(
        [sys.executable, str(HELPER), command, str(payload)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{src} {command}:\n{out.stdout}\n{out.stderr}"


_sources: dict[str, Path] = {}
_made: dict[tuple[str, str], OldTable] = {}


def source(commit: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The commit's `src`, from git history (once per session; skipped without the commit)."""
    if commit not in _sources:
        _sources[commit] = older_source(commit, tmp_path_factory.mktemp(f"src-{commit}"))
    return _sources[commit]


def made(commit: str, layout: str, tmp_path_factory: pytest.TempPathFactory) -> OldTable:
    """The commit's table of a layout, and that code's answers: made once per session."""
    if (commit, layout) not in _made:
        root = tmp_path_factory.mktemp(f"old-{commit}-{layout}")
        _made[commit, layout] = OldTable(commit, layout, root, source(commit, tmp_path_factory)).make()
    return _made[commit, layout]


@pytest.fixture(params=[f"{c}-{layout}" for c in COMMITS for layout in LAYOUTS])
def old_table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> OldTable:
    commit, layout = request.param.split("-")
    return made(commit, layout, tmp_path_factory)


# ---- exact answers -----------------------------------------------------------------------------------
def tokens(title: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", title.lower())


def query_matches(query: str, titles: list[str]) -> np.ndarray:
    """Which titles match one of ot.QUERIES (terms of `title`, ORs of them, a phrase; the only text
    column, so an unqualified term means it too)."""
    phrase = re.fullmatch(r'title:"(.*)"', query)
    if phrase:
        words = phrase.group(1).split()
        return np.array(
            [any(t[i : i + len(words)] == words for i in range(len(t))) for t in (tokens(x) for x in titles)]
        )
    terms = [term.split(":")[-1] for term in query.split(" OR ")]
    return np.array([any(w in tokens(x) for w in terms) for x in titles])


WHERE_MASKS = {
    ot.WHERES[0]: lambda t: pc.and_(pc.greater(t["views"], 500), pc.equal(t["tag"], "red")),
    ot.WHERES[1]: lambda t: pc.and_(
        pc.is_in(t["tag"], pa.array(["blue", "cyan"])),
        pc.and_(pc.greater_equal(t["views"], 100), pc.less_equal(t["views"], 600)),
    ),
    ot.WHERES[2]: lambda t: pc.and_(pc.equal(t["part"], "b"), pc.less(t["views"], 300)),
    ot.WHERES[3]: lambda t: pc.equal(t["secret"], "s3"),
    ot.WHERES[4]: lambda t: pc.and_(
        pc.equal(pc.struct_field(t["meta"], "k"), "k2"), pc.greater(pc.struct_field(t["meta"], "n"), 20)
    ),
    ot.WHERES[5]: lambda t: pc.and_(pc.not_equal(t["tag"], "amber"), pc.equal(t["title"], "nothing")),
    ot.WHERES[6]: lambda t: pc.equal(t["code"], "b1-7"),
    ot.WHERES[7]: lambda t: pc.or_(
        pc.is_in(t["code"], pa.array(["b0-3", "b2-39"])),
        pc.and_(pc.greater_equal(t["id"], 650), pc.less_equal(t["id"], 700)),
    ),
    ot.WHERES[8]: lambda t: pc.and_(
        pc.greater_equal(t["ts"], pa.scalar(dt.datetime(2024, 1, 5, 12, tzinfo=dt.timezone.utc), t["ts"].type)),
        pc.equal(t["flag"], True),
    ),
    ot.WHERES[9]: lambda t: pc.or_(
        pc.equal(t["day"], pa.scalar(dt.date(2024, 1, 3), pa.date32())), pc.greater(t["score"], 0.95)
    ),
    ot.WHERES[10]: lambda t: pc.and_(
        pc.and_(pc.greater_equal(t["id"], 650), pc.less_equal(t["id"], 700)), pc.is_valid(t["views"])
    ),
    ot.KEY_WHERE: lambda t: pc.is_in(t["key"], pa.array(["key-7", "key-42", "key-99"])),
}


def where_mask(live: pa.Table, where: str | None) -> np.ndarray:
    """The rows `where` keeps: those it is TRUE for (not FALSE or NULL)."""
    if where is None:
        return np.ones(live.num_rows, bool)
    return np.asarray(pc.fill_null(WHERE_MASKS[where](live), False).to_numpy(zero_copy_only=False), bool)


def distances(live: pa.Table, column: str, vector: list[float], mask: np.ndarray, metric: str) -> dict[int, float]:
    """Every row of `mask` holding a vector: its id -> its exact distance (float64)."""
    values = live.column(column).combine_chunks()
    present = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
    flat = pc.list_flatten(values).to_numpy(zero_copy_only=False).astype(np.float64)
    x = np.full((len(values), len(vector)), np.nan)
    x[present] = flat.reshape(-1, len(vector))
    d = exact(x, np.asarray(vector, np.float64), metric)
    ids = live.column("id").to_numpy()
    rows = np.flatnonzero(mask & present)  # (a row without a vector is never found)
    return {int(ids[i]): float(d[i]) for i in rows}


def nearest(
    live: pa.Table, column: str, vector: list[float], mask: np.ndarray, metric: str | None = None, k: int = 10
) -> list[list[Any]]:
    """The exact k nearest rows among `mask`: [[id, distance], ...], ties by id. `metric`: by
    default the column's (emb_<metric>)."""
    found = distances(live, column, vector, mask, metric or column.removeprefix("emb_"))
    return [[i, found[i]] for i in sorted(found, key=lambda i: (found[i], i))[:k]]


def expected_rows(
    live: pa.Table, mask: np.ndarray, index_only: bool, columns: list[str] | None = None
) -> list[dict[str, Any]]:
    """The rows a read returns (of `columns`, default all), ordered by id: an index-only column reads as NULL."""
    rows = live.filter(pa.array(mask)).sort_by("id")
    if columns:
        return json.loads(json.dumps(ot.plain(rows.select(columns).to_pylist())))
    if index_only:
        rows = rows.set_column(rows.schema.get_field_index("secret"), "secret", pa.nulls(rows.num_rows, pa.string()))
    return json.loads(json.dumps(ot.plain(rows.to_pylist())))


def exact_aggregate(live: pa.Table, mask: np.ndarray) -> dict[str, Any]:
    rows = live.filter(pa.array(mask))
    counts = rows.group_by("tag").aggregate([([], "count_all")]).to_pylist()
    buckets = sorted(
        ({"key": c["tag"], "doc_count": c["count_all"]} for c in counts if c["tag"] is not None),
        key=lambda b: (-b["doc_count"], b["key"]),
    )
    views = rows.column("views").drop_null().to_numpy()
    keys, counts_ = np.unique(views // 100 * 100, return_counts=True)
    return {
        "doc_count": rows.num_rows,
        "tags": buckets,
        "views": stats(views),
        "scores": stats(rows.column("score").to_numpy()),
        "hundreds": [{"key": float(k), "doc_count": int(c)} for k, c in zip(keys, counts_)],
    }


def stats(values: np.ndarray) -> dict[str, float]:
    return {
        "count": len(values),
        "min": float(values.min()),
        "max": float(values.max()),
        "sum": float(values.sum()),
        "avg": float(values.mean()),
    }


def check_exact(
    answers: dict[str, Any],
    reads: list[dict[str, Any]],
    history: dict[int | None, pa.Table],
    index_only: bool,
    approximate: bool = False,
) -> None:
    """Every answer against the exact one computed from the rows the table holds (`history`: at a
    read's version, None the latest); a scored search's top 10 against the rows that match (its
    scores are compared with the older code's). `approximate`: the table has splits of this code's
    default vector index (ivf_pq, approximate by design): the reads that walk the indexes
    (ot.GRAPH) find at least 95% of the 10 nearest, each row found with its exact distance."""
    hits = wanted = 0
    for read in reads:
        name, got, op = read["name"], answers[read["name"]], read["op"]
        live = history[read.get("version")]
        ids = live.column("id").to_numpy()
        mask = where_mask(live, read.get("where"))
        if "query" in read:
            mask &= query_matches(read["query"], live.column("title").to_pylist())
        if "partition_filter" in read:  # (only `part = '<value>'`)
            mask &= np.asarray(live.column("part").to_pylist()) == read["partition_filter"].split("'")[1]
        if op == "count":
            assert got == int(mask.sum()), name
        elif op in ("to_arrow", "search") and read.get("columns"):
            assert got == expected_rows(live, mask, index_only, read["columns"]), name
        elif op in ("search", "batches") and read.get("limit") is None:
            assert got == sorted(int(i) for i in ids[mask]), name
        elif op == "search":
            want = min(read["limit"], int(mask.sum()))
            assert len(got) == want and {i for i, _ in got} <= set(ids[mask].tolist()), name
            scores = [s for _, s in got]
            assert scores == sorted(scores, reverse=True), name
        elif op == "snippets":  # the best rows of the query, each with its term highlighted
            want = min(read["limit"], int(mask.sum()))
            assert len(got) == want and {i for i, _ in got} <= set(ids[mask].tolist()), name
            term = read["query"].split(":")[-1]
            assert all(f"<b>{term}</b>" in snippet for _, snippet in got), name
        elif op == "to_arrow":
            assert got == expected_rows(live, mask, index_only), name
        elif op == "aggregate":
            exact = exact_aggregate(live, mask)
            assert got["doc_count"] == exact["doc_count"], name
            assert got["tags"]["buckets"] == exact["tags"], name
            for field in ("views", "scores"):
                assert {k: got[field][k] for k in exact[field]} == pytest.approx(exact[field]), name
            assert got["hundreds"]["buckets"] == exact["hundreds"], name
        elif op == "many":
            for g, v in zip(got, read["vectors"], strict=True):
                assert_nearest(g, nearest(live, read["column"], v, mask), name)
        elif op == "vector" or (op == "hybrid" and read["fusion"] == "none"):  # (the query selects the rows)
            exact = nearest(live, read["column"], read["vector"], mask)
            if approximate and read.get("options") == ot.GRAPH:
                every = distances(live, read["column"], read["vector"], mask, read["column"].removeprefix("emb_"))
                assert len(got) == len(exact) and [d for _, d in got] == sorted(d for _, d in got), name
                assert [d for _, d in got] == pytest.approx([every[i] for i, _ in got], rel=1e-5, abs=1e-5), name
                hits += len({i for i, _ in got} & {i for i, _ in exact})
                wanted += len(exact)
            else:
                assert_nearest(got, exact, name)
    assert hits >= 0.95 * wanted, f"recall@10 {hits / wanted:.3f}"


def assert_nearest(got: list[list[Any]], exact: list[list[Any]], name: str) -> None:
    assert [i for i, _ in got] == [i for i, _ in exact], name  # recall 1.0, in order
    assert [d for _, d in got] == pytest.approx([d for _, d in exact], rel=1e-5, abs=1e-5), name


def same_answers(old: Any, new: Any, tolerance: float = 1e-6) -> bool:
    """Equal, floats within `tolerance` (relative, or absolute below 1)."""
    if isinstance(old, float) or isinstance(new, float):
        if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
            return False
        return abs(old - new) <= tolerance * max(1.0, abs(old))
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(same_answers(a, b, tolerance) for a, b in zip(old, new))
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(same_answers(old[k], new[k], tolerance) for k in old)
    return bool(old == new)


def live_rows(*steps: pa.Table | str) -> pa.Table:
    """The rows the steps leave, in order: a batch appends its rows, a delete (a key of DELETED)
    removes the matching rows of those before it."""
    live: pa.Table | None = None
    for step in steps:
        if isinstance(step, str):
            assert live is not None
            live = live.filter(pc.invert(pc.fill_null(DELETED[step](live), False)))
        else:
            live = step if live is None else pa.concat_tables([live, step])
    assert live is not None
    return live


SECOND_DELETE = "tag = 'green' AND views > 800"
DELETED = {
    ot.FIRST_DELETE: lambda t: pc.less(t["views"], 40),
    SECOND_DELETE: lambda t: pc.and_(pc.equal(t["tag"], "green"), pc.greater(t["views"], 800)),
}


# ---- the tests ---------------------------------------------------------------------------------------
def new_options(commit: str) -> dict[str, str]:
    """This code's reads compared with the commit's: 0.2.0 scored by each split's own statistics
    (the table's since; `search.statistics=split` gives the old scores)."""
    return {ot.P + "search.statistics": "split"} if commit == RELEASE else {}


def differences(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str:
    differ = [n for n in a if not same_answers(a[n], b[n])]
    return "\n".join(f"{n}:\n  {names[0]}: {a[n]}\n  {names[1]}: {b[n]}" for n in differ)


def history(table: OldTable) -> dict[int | None, pa.Table]:
    """The rows at the versions the reads ask for: 1 (two appends) and the latest."""
    return {1: live_rows(*table.batches[:2]), None: live_rows(*table.batches, ot.FIRST_DELETE)}


def test_reads_equal_the_older_codes_and_the_exact_answers(old_table: OldTable, tmp_path: Path) -> None:
    table = old_table
    new = json.loads(json.dumps(ot.run_reads(table.path, table.reads, "new", new_options(table.commit))))
    # (equal to the older code's within 1e-6, so the older code's are exact too)
    assert not (diff := differences(table.answers, new, (table.commit, "this code"))), diff
    check_exact(new, table.reads, history(table), table.index_only)
    # the table is what the reads are meant to exercise: 6 splits and a positional delete log, or 2 merged
    snap = it.IndexTable(table.path).snapshot()
    assert len(snap.files) == (len(ot.PARTS) if table.merged else len(ot.PARTS) * ot.BATCHES)
    assert table.merged or len(snap.delete_logs) >= 1
    # The same writes by this code: the same answers, BM25 of the table's statistics included (the
    # scores 0.2.0 did not compute); not the reads walking the indexes, which are this code's
    # default kind (ivf_pq, approximate) there
    twin = str(tmp_path / "twin")
    ot.write(twin, str(table.data), ot.table_options(table.vectors, table.index_only), table.merged)
    reads = [r for r in table.reads if r.get("options") != ot.GRAPH]
    ours = json.loads(json.dumps(ot.run_reads(twin, reads, "new", {})))
    theirs = new if not new_options(table.commit) else ot.run_reads(table.path, reads, "new", {})
    theirs = {r["name"]: theirs[r["name"]] for r in reads}
    assert not (diff := differences(theirs, ours, ("old table", "this code's table"))), diff


@pytest.mark.parametrize("commit", COMMITS)
def test_reads_of_the_older_tables_on_object_storage(
    commit: str, cloud_backend: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The older code's table copied to S3 / Azure: this code's reads there (ranged fetches of
    splits written without a hotcache or a row layout) answer as the older code did on disk."""
    table = made(commit, "indexonly", tmp_path_factory)
    storage = open_storage(cloud_backend.uri, cloud_backend.options)
    for file in Path(table.path).rglob("*"):
        if file.is_file():
            storage.put(file.relative_to(table.path).as_posix(), file.read_bytes())
    options = {**cloud_backend.options, **new_options(commit)}
    new = json.loads(json.dumps(ot.run_reads(cloud_backend.uri, table.reads, "new", options)))
    assert not (diff := differences(table.answers, new, (f"{commit} on disk", f"this code on {cloud_backend.kind}"))), (
        diff
    )


def test_this_codes_writes_to_the_older_tables(old_table: OldTable, tmp_path: Path) -> None:
    """Append, delete and MERGE SPLITS by this code on the older code's table: the reads give the
    exact answers after each (a table with an index-only column is not merged)."""
    table = old_table
    appended = ot.batch(ot.BATCHES, ot.BATCHES * ot.ROWS_PER_BATCH, ot.ROWS_PER_BATCH, table.vectors)
    rows = {**history(table), None: live_rows(*table.batches, ot.FIRST_DELETE, appended, SECOND_DELETE)}
    path = str(tmp_path / "table")
    shutil.copytree(table.path, path)
    t = it.IndexTable(path)  # no options: the table's own settings (text, index-only, vector columns)
    t.write(appended, partition_by="part", progress=False)
    assert t.delete(SECOND_DELETE).deleted_rows
    approximate = table.vectors  # (the appended splits: this code's default index kind, ivf_pq)
    check_exact(ot.run_reads(path, table.reads, "new", {}), table.reads, rows, table.index_only, approximate)
    before = len(t.snapshot().files)
    merged = t.maintenance.merge_splits(progress=False)
    if table.index_only:
        assert merged.status == "NO_ACTION" and merged.splits_index_only == before
        return
    assert len(t.refresh().snapshot().files) == len(ot.PARTS) < before
    check_exact(ot.run_reads(path, table.reads, "new", {}), table.reads, rows, table.index_only, approximate)


def test_a_large_cosine_table_read_with_the_default_options(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The case users met: 3 splits of more vectors than a split compares exactly (nearest.EXACT_BELOW),
    written before the vector kinds, searched with the default options: this code's and the older
    code's 10 nearest are numpy's."""
    src = str(source(BEFORE_KINDS, tmp_path_factory))  # (skipped without the commit, before any work)
    rows, dims = EXACT_BELOW + 1_000, 16
    data = tmp_path / "data"
    data.mkdir()
    vectors = []
    for i in range(3):
        x = np.random.default_rng(i).standard_normal((rows, dims)).astype(np.float32)
        vectors.append(x)
        ids = pa.array(np.arange(i * rows, (i + 1) * rows, dtype=np.int64))
        feather.write_feather(
            pa.table({"id": ids, "emb": pa.array(list(x), pa.list_(pa.float32()))}), str(data / f"{i}.arrow")
        )
    path = str(tmp_path / "table")
    options = {ot.P + "indexing.vector.emb": f"{dims},cosine"}
    run_old(src, "append", tmp_path, path=path, data=str(data), options=options)
    rng = np.random.default_rng(42)
    reads = [
        {"name": f"v{j}", "op": "vector", "vector": [float(v) for v in rng.standard_normal(dims)], "column": "emb"}
        for j in range(5)
    ]
    answers = tmp_path / "answers.json"
    run_old(src, "read", tmp_path, path=path, reads=reads, dialect=BEFORE_KINDS, out=str(answers))
    old = json.loads(answers.read_text())
    new = json.loads(json.dumps(ot.run_reads(path, reads, "new", {})))
    assert not (diff := differences(old, new, (BEFORE_KINDS, "this code"))), diff
    live = pa.table({"id": pa.array(np.arange(3 * rows)), "emb": pa.array(list(np.concatenate(vectors)))})
    for read in reads:
        exact = nearest(live, "emb", read["vector"], np.ones(3 * rows, bool), "cosine")
        assert_nearest(new[read["name"]], exact, read["name"])
