"""Tables written by the code of an older commit, and the reads tests/test_old_tables.py compares
between that code and this one.

The older code runs this file as a script (`python tests/old_tables.py write|append|read <args.json>`,
PYTHONPATH on the commit's `src`, from `git archive`): it writes the table from the Arrow files the
test generated, or runs the reads and writes their answers as JSON. The test imports it to run the
same reads under this code. So it uses only indextables_spark's public API of every version
compared (IndexTable, write, delete, search, count, to_arrow, aggregate), pyarrow and numpy.

Dialects: "5392dfd" (release 0.2.0: no vector columns, BM25 of each split's own statistics),
"c7f3a95" (vector columns, an HNSW graph per split; search(query, vector=...) without fusion: the
query selects the rows the vectors rank), "new" (this code: BM25 of the table's statistics unless
search.statistics=split; a query and a vector fused by default, fusion="none" the older meaning).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather

import indextables_spark as it  # the older commit's (PYTHONPATH), run as a script; else this code

P = "spark.indextables."
METRICS = ("cosine", "l2", "dot")
DIMS = 8
PARTS = ("a", "b")
TAGS = ("red", "green", "blue", "cyan", "amber")
WORDS = 60  # the title's vocabulary: w0 .. w59, Zipf-like frequencies
ROWS_PER_BATCH = 600  # 300 a partition: 3 batches, 6 splits (the graph path needs 3+ splits)
BATCHES = 3
FIRST_DELETE = "views < 40"  # the older code's positional delete
GRAPH = {P + "search.vector.exactBelow": "0"}  # every split searched through its graph


def table_options(vectors: bool, index_only: bool) -> dict[str, str]:
    """The options a table is created with: a text column, a Bloom filter, `secret` index-only or
    not (MERGE SPLITS leaves a table with index-only columns as it is) and, with vectors, three
    vector columns (no index kind: the older code knows only its HNSW graph) and a compact string
    column (its modes came with the vector columns' commits)."""
    options = {P + "indexing.typemap.title": "text", P + "indexing.bloomfilter.columns": "code"}
    if index_only:
        options[P + "indexing.indexonlyfields"] = "secret"
    if vectors:
        options[P + "indexing.typemap.key"] = "exact_only"
        for metric in METRICS:
            options[P + f"indexing.vector.emb_{metric}"] = f"{DIMS},{metric}"
    return options


def batch(seed: int, first_id: int, rows: int, vectors: bool) -> pa.Table:
    """`rows` rows, ids from `first_id`: every kind of column the compared versions write."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, WORDS + 1, dtype=np.float64)
    p = (1 / ranks) / (1 / ranks).sum()
    titles = [" ".join(f"w{w}" for w in rng.choice(WORDS, size=int(rng.integers(2, 14)), p=p)) for _ in range(rows)]
    ids = np.arange(first_id, first_id + rows, dtype=np.int64)
    columns: dict[str, Any] = {
        "id": pa.array(ids),
        "part": pa.array([PARTS[i % 2] for i in range(rows)]),
        "title": pa.array(titles),
        "tag": pa.array([TAGS[int(t)] for t in rng.integers(0, len(TAGS), rows)]),
        "views": pa.array(rng.integers(0, 1000, rows), pa.int64()),
        "secret": pa.array([f"s{int(s)}" for s in rng.integers(0, 7, rows)]),
        "code": pa.array([f"b{seed}-{i % 40}" for i in range(rows)]),  # a batch's own values (Bloom filter)
        "score": pa.array(rng.random(rows)),
        "flag": pa.array(rng.random(rows) < 0.3),
        "ts": pa.array(  # microseconds since the epoch, in 10 days from 2024-01-01
            1_704_067_200_000_000 + rng.integers(0, 10 * 86_400_000_000, rows), pa.timestamp("us", "UTC")
        ),
        "day": pa.array(19_723 + rng.integers(0, 10, rows).astype(np.int32), pa.date32()),
        "meta": pa.array(
            [{"k": f"k{int(a)}", "n": int(b)} for a, b in zip(rng.integers(0, 4, rows), rng.integers(0, 50, rows))],
            pa.struct([("k", pa.string()), ("n", pa.int64())]),
        ),
    }
    if vectors:
        columns["key"] = pa.array([f"key-{int(k)}" for k in rng.integers(0, 100, rows)])  # exact_only: a hash
        for metric in METRICS:
            x = rng.standard_normal((rows, DIMS)).astype(np.float32)
            if metric == "dot":  # norms that differ: a dot ranking is not a cosine one
                x *= rng.uniform(0.5, 2.0, (rows, 1)).astype(np.float32)
            # a row without a vector is left out of the column's index
            columns[f"emb_{metric}"] = pa.array(list(x), pa.list_(pa.float32()), mask=rng.random(rows) < 0.05)
    # NULLs: SQL's three-valued logic in filters and deletes, missing values in aggregations
    for name in ("tag", "views"):
        columns[name] = pc.if_else(pa.array(rng.random(rows) < 0.05), pa.nulls(rows, columns[name].type), columns[name])
    return pa.table(columns)


def query_vectors(n: int = 3) -> list[list[float]]:
    rng = np.random.default_rng(99)
    return [[float(v) for v in rng.standard_normal(DIMS).astype(np.float32)] for _ in range(n)]


# ---- the reads -------------------------------------------------------------------------------------
# Each read: a name, an operation and its arguments; `options` are the read's own options (the
# table's settings apply). The same list runs under every dialect (run_read adapts the calls).
QUERIES = ("title:w3", "title:w17 OR title:w41", "w8", 'title:"w0 w1"')
WHERES = (
    "views > 500 AND tag = 'red'",
    "tag IN ('blue', 'cyan') AND views BETWEEN 100 AND 600",
    "part = 'b' AND views < 300",
    "secret = 's3'",
    "meta.k = 'k2' AND meta.n > 20",
    "NOT (tag = 'amber') AND title = 'nothing'",
    "code = 'b1-7'",
    "code IN ('b0-3', 'b2-39') OR id BETWEEN 650 AND 700",
    "ts >= '2024-01-05 12:00:00' AND flag = true",
    "day = '2024-01-03' OR score > 0.95",
    "id BETWEEN 650 AND 700 AND views IS NOT NULL",
)
KEY_WHERE = "key = 'key-7' OR key IN ('key-42', 'key-99')"
AGGS: dict[str, Any] = {
    "tags": {"terms": {"field": "tag", "size": 10}},
    "views": {"stats": {"field": "views"}},
    "scores": {"stats": {"field": "score"}},
    "hundreds": {"histogram": {"field": "views", "interval": 100}},
}


def projection(vectors: bool) -> list[str]:
    return ["meta", "id", "ts"] + (["emb_cosine", "key"] if vectors else [])


def reads(vectors: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "count", "op": "count"},
        {"name": "count q0 part a", "op": "count", "query": QUERIES[0], "partition_filter": "part = 'a'"},
        {"name": "search q1 v1", "op": "search", "query": QUERIES[1], "limit": 10, "version": 1},
        {"name": "to_arrow w1 v1", "op": "to_arrow", "where": WHERES[1], "version": 1},
        {"name": "batches q0 w2", "op": "batches", "query": QUERIES[0], "where": WHERES[2]},
        {"name": "aggregate part b", "op": "aggregate", "aggs": AGGS, "partition_filter": "part = 'b'"},
        {"name": "snippets q0", "op": "snippets", "query": QUERIES[0], "limit": 10},
        {"name": "to_arrow w0 columns", "op": "to_arrow", "where": WHERES[0], "columns": projection(vectors)},
        {"name": "search q0 columns", "op": "search", "query": QUERIES[0], "columns": projection(vectors)},
    ]
    for i, q in enumerate(QUERIES):
        out.append({"name": f"count q{i}", "op": "count", "query": q})
        out.append({"name": f"search q{i}", "op": "search", "query": q, "limit": 10})
        out.append({"name": f"search q{i} all", "op": "search", "query": q})
        out.append({"name": f"search q{i} where", "op": "search", "query": q, "where": WHERES[1], "limit": 10})
    for i, w in enumerate(WHERES + ((KEY_WHERE,) if vectors else ())):
        out.append({"name": f"to_arrow w{i}", "op": "to_arrow", "where": w})
    out.append({"name": "to_arrow", "op": "to_arrow"})
    out.append({"name": "aggregate", "op": "aggregate", "aggs": AGGS})
    out.append({"name": "aggregate q0", "op": "aggregate", "aggs": AGGS, "query": QUERIES[0]})
    if vectors:
        for metric in METRICS:
            for j, v in enumerate(query_vectors()):
                for mode, options in (("graph", GRAPH), ("exact", {})):
                    base = {"op": "vector", "vector": v, "column": f"emb_{metric}", "options": options}
                    out.append({**base, "name": f"vector {metric} v{j} {mode}"})
                    out.append({**base, "name": f"vector {metric} v{j} {mode} where", "where": WHERES[0]})
            out.append({"name": f"many {metric}", "op": "many", "vectors": query_vectors(), "column": f"emb_{metric}"})
            v = query_vectors()[0]
            for fusion in ("none", "rrf"):
                out.append(
                    {
                        "name": f"hybrid {metric} {fusion}",
                        "op": "hybrid",
                        "query": QUERIES[1],
                        "vector": v,
                        "column": f"emb_{metric}",
                        "fusion": fusion,
                        "options": GRAPH,
                    }
                )
    return out


def plain(value: Any) -> Any:
    """JSON-able: floats as floats (NaN as None), nested values kept."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return plain(value.item())
    return value


def _ranked(table: pa.Table, column: str) -> list[list[Any]]:
    return [[i, s] for i, s in zip(table.column("id").to_pylist(), table.column(column).to_pylist())]


def run_read(path: str, read: dict[str, Any], dialect: str, options: dict[str, str]) -> Any:
    t = it.IndexTable(path, {**options, **read.get("options", {})})
    op = read["op"]
    if op == "count":
        return t.count(read.get("query"), partition_filter=read.get("partition_filter"))
    if op == "search":
        found = t.search(
            read["query"],
            where=read.get("where"),
            columns=read.get("columns"),
            limit=read.get("limit"),
            version=read.get("version"),
        )
        if read.get("columns"):
            return found.sort_by("id").to_pylist()
        if read.get("limit") is None:
            return sorted(found.column("id").to_pylist())
        return _ranked(found, "_score")
    if op == "snippets":
        found = t.search(read["query"], snippets="title", limit=read["limit"])
        return _ranked(found, "_snippet")
    if op == "to_arrow":
        rows = t.to_arrow(where=read.get("where"), columns=read.get("columns"), version=read.get("version"))
        return rows.sort_by("id").to_pylist()
    if op == "batches":
        stream = t.to_batches(read["query"], where=read.get("where"))
        return sorted(i for b in stream for i in b.column("id").to_pylist())
    if op == "aggregate":
        return t.aggregate(read["aggs"], query=read.get("query"), partition_filter=read.get("partition_filter"))
    if op == "vector":
        found = t.search(vector=read["vector"], vector_column=read["column"], where=read.get("where"), limit=10)
        return _ranked(found, "_distance")
    if op == "many":
        return [_ranked(f, "_distance") for f in t.search_many(vectors=read["vectors"], vector_column=read["column"])]
    if op == "hybrid":
        fusion = read["fusion"]
        if dialect != "new" and fusion == "none":
            fusion = None  # the older search's meaning of no fusion: the query selects the rows
        found = t.search(read["query"], vector=read["vector"], vector_column=read["column"], fusion=fusion, limit=10)
        return _ranked(found, "_score" if fusion not in (None, "none") else "_distance")
    raise ValueError(f"unknown read {op!r}")


def run_reads(path: str, reads_: list[dict[str, Any]], dialect: str, options: dict[str, str]) -> dict[str, Any]:
    """Every read's answer, by name; `options`: every read's (on top of the table's settings)."""
    return {r["name"]: plain(run_read(path, r, dialect, options)) for r in reads_}


def write(path: str, data_dir: str, options: dict[str, str], merge: bool) -> None:
    """The table as the older code writes it: BATCHES appends partitioned by `part` (versions 0 to
    BATCHES - 1), a checkpoint, a positional delete and, with `merge`, MERGE SPLITS."""
    for i in range(BATCHES):
        data = feather.read_table(str(Path(data_dir) / f"batch{i}.arrow"))
        it.IndexTable(path, options).write(data, partition_by="part")
    t = it.IndexTable(path, options)
    t.maintenance.checkpoint()
    t.delete(FIRST_DELETE, kind="positional")
    if merge:
        t.maintenance.merge_splits()


def append(path: str, data_dir: str, options: dict[str, str]) -> None:
    """Every Arrow file of `data_dir` appended, in name order: a split each."""
    for file in sorted(Path(data_dir).glob("*.arrow")):
        it.IndexTable(path, options).write(feather.read_table(str(file)))


def main(argv: list[str]) -> None:
    command, args = argv[1], json.loads(Path(argv[2]).read_text())
    # the code asked for, not an installed copy: the test puts the commit's src on PYTHONPATH
    assert it.__file__.startswith(args["src"]), it.__file__
    if command == "write":
        write(args["path"], args["data"], table_options(args["vectors"], args["index_only"]), args["merge"])
    elif command == "append":
        append(args["path"], args["data"], args["options"])
    elif command == "read":
        Path(args["out"]).write_text(json.dumps(run_reads(args["path"], args["reads"], args["dialect"], {})))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
