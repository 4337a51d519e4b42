"""Every ```python and ```sql example of the documentation (docs/**/*.md) runs, so none goes stale.

Each page's examples run in order in one namespace (as a reader would type them into one session),
in a fresh temporary working directory, with `it` (indextables_spark) and `spark` (the suite's
local session, tests/conftest.py) defined. A ```sql block's statements (`;`-separated) run through
`it.sql(spark, …)`, which hands anything but a command text to `spark.sql`. A block prints what
the comments of its `print(…)  # …` lines say it prints. The Spark-free page's
`$ indextables describe` (a ```console block) is run through the CLI after its quickstart and
compared with the output the page shows.

What a page's examples take for granted is made before they run, by the page's entry in SETUP
below: the tables they read (`path`, `/data/docs`, …: sample documents written with
`it.write_table`), the DataFrames and values they name without defining (`df`, `arrow_table`,
`adds`, …). Paths are rewritten, visibly, by REWRITES: a table path such as `/data/docs`,
`s3://bucket/…` or `/tmp/…` becomes one under the page's temporary directory (on the
object-stores page, `s3://bucket/…` becomes the moto bucket and the S3-compatible endpoint the moto
server's; `az://container/…` Azurite's container), and a few literals the examples cannot know
(the time of `timestampAsOf`) are replaced; the rewrites a page got are in its failure message.

An example that cannot run as it is (a shell command is not Python; real cloud accounts; a fragment
of a larger file) carries a marker on the line before its fence:

    <!-- docs-test: skip: <why> -->

SKIPPED lists every such marker with its reason, so a new one is a visible change of this file;
`test_skipped_examples_are_listed` prints the counts of run and skipped examples.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pytest

import indextables_spark as it

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!--\s*docs-test:\s*skip:\s*(?P<reason>.+?)\s*-->")
RUN_LANGS = ("python", "sql")


@dataclass
class Block:
    page: str  # relative to docs/
    line: int  # 1-based line of the fence
    lang: str
    code: str
    skip: str | None  # the marker's reason


def blocks_of(page: str, text: str) -> list[Block]:
    """The fenced code blocks of a page, with the skip marker on the line before each (if any)."""
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        lang = (m.group("info").split() or [""])[0].lower()
        out.append(Block(page, line, lang, m.group("body"), marker.group("reason") if marker else None))
    return out


def pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))}


def runnable(page: str) -> list[Block]:
    return [b for b in blocks_of(page, pages()[page]) if b.lang in RUN_LANGS]


# Every skip marker in docs/: (page, first line of the block) -> why it does not run here.
SKIPPED: dict[tuple[str, str], str] = {
    ("architecture.md", "    Operation("): "run by tests/test_commands_registry.py",
    ("architecture.md", "    def describe_partitions("): "run by tests/test_commands_registry.py",
    ("guide/object-stores-and-credentials.md", 'it.IndexTable("abfss://data@myaccount'): "a real Azure account",
    ("guide/deployment.md", "import os"): "a cluster (tests/test_packed_env.py runs it as spark-submit --archives)",
    ("guide/vector-search.md", "SELECT id, _distance FROM indextables_vector_search("): (
        "a 64-dimension vector literal does not fit a page (tests/test_vector_search.py runs these)"
    ),
}


def sql_statements(code: str) -> list[str]:
    """The statements of a ```sql block: split at `;` outside quotes, `--` comments dropped."""
    out, cur, quote = [], [], None
    for line in code.splitlines():
        if quote is None and line.strip().startswith("--"):
            continue
        for ch in line + "\n":
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"`":
                quote = ch
            elif ch == ";":
                out.append("".join(cur).strip())
                cur = []
                continue
            cur.append(ch)
    out.append("".join(cur).strip())
    return [s for s in out if s]


def stated_output(code: str) -> list[str]:
    """The trailing comment of each line that starts with `print(`: the output the page shows."""
    return [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+#\s*(.+)$", code, re.MULTILINE)]


# --- sample tables ----------------------------------------------------------------------------------

WORDS = "spark sql data lake river search kestrel timeout error warn spam falcon index query".split()
TEXT = {"indexing.typemap.body": "text", "indexing.typemap.title": "text", "indexing.typemap.tags": "text"}


def sample_docs(n: int = 240, start: int = 0) -> pa.Table:
    """Documents with every column the examples name: text (`body`, `title`, `tags`), raw strings,
    numbers, dates, a struct, and the partition columns `date` and `region`."""
    ids = range(start, start + n)

    def words(i: int, k: int, salt: int) -> str:
        return " ".join(WORDS[(i * (salt + 3) + j * (salt + 5)) % len(WORDS)] for j in range(k))

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "title": [("spark " if i % 4 == 0 else "warning ") + words(i, 4, 1) for i in ids],
            "body": [words(i, 12, 2) + (" data lake" if i % 5 == 0 else "") for i in ids],
            "tags": [("sql news" if i % 3 == 0 else "blog") for i in ids],
            "tag": [("news", "blog", "docs")[i % 3] for i in ids],
            "status": [("active", "closed")[i % 2] for i in ids],
            "author": [f"author{i % 17}" for i in ids],
            "message": [("timeout at " if i % 6 == 0 else "ok ") + words(i, 3, 4) for i in ids],
            "host": [f"host{i % 3}" for i in ids],
            "views": pa.array([(i * 397) % 5000 for i in ids], pa.int64()),
            "score": pa.array([(i % 100) / 100 for i in ids], pa.float64()),
            "year": pa.array([2023 + i % 3 for i in ids], pa.int32()),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=45 * (i % 8)) for i in ids], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=7 * i) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "uid": [f"{i:08x}-c0ffee" for i in ids],
            "sku": [f"A-{i % 10}" for i in ids],
            "store": pa.array([i % 8 for i in ids], pa.int64()),
            "user": pa.array(
                [{"name": ("alice", "bob", "carol")[i % 3], "age": 20 + i % 50} for i in ids],
                pa.struct([("name", pa.string()), ("age", pa.int64())]),
            ),
            "date": [("2024-01-01", "2024-01-02")[i % 2] for i in ids],
            "region": [("eu", "us")[(i // 2) % 2] for i in ids],
        }
    )


def make_table(
    path: str,
    versions: int = 1,
    options: dict[str, str] | None = None,
    partition_by: tuple[str, ...] = ("date", "region"),
) -> str:
    """A table of sample documents at `path` (partitioned by date and region), in `versions` commits."""
    it.write_table(path, sample_docs(), partition_by=list(partition_by), options={**TEXT, **(options or {})})
    for v in range(1, versions):
        it.write_table(path, sample_docs(8, start=1000 + 8 * v), options=options)
    return path


def staged_adds(table: str, tmp: pathlib.Path) -> list[Any]:
    """AddFiles of splits written into `table`'s directory but not committed to it."""
    staged = make_table(str(tmp / "staged"))
    for part in pathlib.Path(staged).iterdir():
        if part.name != "_transaction_log":
            shutil.copytree(part, pathlib.Path(table) / part.name, dirs_exist_ok=True)
    return it.IndexTable(staged).files()


def spark_docs(spark: Any, n: int = 60) -> Any:
    """The sample documents as a Spark DataFrame."""
    return spark.createDataFrame(sample_docs(n).to_pandas())


# --- per-page setup ---------------------------------------------------------------------------------


@dataclass
class Page:
    """What one page's examples run with."""

    tmp: pathlib.Path
    spark: Any
    request: pytest.FixtureRequest
    names: dict[str, Any] = field(default_factory=dict)
    rewrites: list[tuple[str, str]] = field(default_factory=list)

    def local(self, *prefixes: str) -> None:
        """Rewrite each prefix (`/data/`, `s3://bucket/`) to a directory of the page's tmp."""
        for p in prefixes:
            name = re.sub(r"[^a-zA-Z0-9]+", "-", p).strip("-")
            self.rewrites.append((p, f"{self.tmp}/{name}/"))

    def path(self, example_path: str) -> str:
        """Where `example_path` (as the page writes it) lands after the rewrites."""
        return rewrite(example_path, self.rewrites)


def rewrite(code: str, rewrites: list[tuple[str, str]]) -> str:
    for old, new in rewrites:
        code = code.replace(old, new)
    return code


def setup_writing(p: Page) -> None:
    p.local("s3://bucket/")
    p.names["df"] = spark_docs(p.spark)


def setup_reading(p: Page) -> None:
    path = make_table(str(p.tmp / "docs"), versions=13)  # the examples travel to version 12
    p.names["path"] = path
    # a time at which the table exists (the page's literal is a date before this run)
    p.rewrites.append(("2026-01-01T00:00:00Z", dt.datetime.now(dt.timezone.utc).isoformat()))


def setup_sql(p: Page) -> None:
    p.local("/data/", "s3://bucket/")
    path = make_table(p.path("/data/docs"))
    make_table(p.path("s3://bucket/docs"))
    p.spark.createDataFrame(it.IndexTable(path).to_arrow().slice(0, 5)).createOrReplaceTempView("staging")


def setup_path_table(p: Page) -> None:
    p.names["path"] = make_table(str(p.tmp / "docs"))


def setup_streaming(p: Page) -> None:
    p.names["src"] = make_table(str(p.tmp / "src"), versions=3)
    p.names["dst"] = str(p.tmp / "dst")
    p.local("/chk/")


def setup_quickstart(p: Page) -> None:
    # Spark's Python workers started before the test changed directory: an absolute path
    p.rewrites.append(('"quickstart-docs"', f'"{p.tmp}/quickstart-docs"'))
    p.rewrites.append(("(path 'quickstart-docs')", f"(path '{p.tmp}/quickstart-docs')"))


def setup_spark_free(p: Page) -> None:
    # the quickstart and the surface at a glance write and read their own table (`articles`)
    p.local("/data/")
    make_table(p.path("/data/docs"), versions=4, partition_by=("day",))  # the write examples' partitioning
    data = sample_docs(20, start=5000)
    p.names.update(
        arrow_table=data,
        reader=pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=5)),
        df_pandas=data.to_pandas(),
        t2=data.select(["id", "body", "day"]),  # a new schema, same partitioning
        t3=data.append_column("lang", pa.array(["en"] * data.num_rows)),
        t4=data,
        arrow_schema=data.schema,
    )


def setup_companion(p: Page) -> None:
    pytest.importorskip("deltalake")
    pytest.importorskip("pyiceberg")
    from deltalake import write_deltalake
    from pyiceberg.catalog.sql import SqlCatalog

    p.local("s3://lake/", "/idx/")
    data = sample_docs(120).drop_columns(["user", "tags", "status"])
    data = data.append_column("status", pa.array([(200, 404, 500, 503)[i % 4] for i in range(120)], pa.int64()))
    write_deltalake(p.path("s3://lake/events"), data, partition_by=["day"])
    # an Iceberg catalog "prod" (pyiceberg's sql catalog over SQLite) holding db.events
    warehouse = p.tmp / "warehouse"
    warehouse.mkdir()
    props = {"uri": f"sqlite:///{p.tmp}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = SqlCatalog("prod", **props)
    catalog.create_namespace("db")
    catalog.create_table("db.events", schema=data.schema).append(data)
    for key, value in props.items():
        p.spark.conf.set(f"spark.indextables.iceberg.catalog.prod.{key}", value)
    p.names["s3_options"] = {}  # the local rewrite needs none


def setup_reference(p: Page) -> None:
    p.local("s3://bucket/")
    table = p.tmp / "reference-table"  # a table IndexTables4Spark wrote (tests/data)
    shutil.copytree(ROOT / "tests" / "data" / "reference_v0.5.4" / "04_partitioned", table)
    p.names["path"] = str(table)
    p.rewrites.append(("'/path'", f"'{table}'"))
    make_table(p.path("s3://bucket/events"))
    p.spark.sql(f"CREATE DATABASE IF NOT EXISTS logs LOCATION '{p.tmp}/logs.db'")  # the example's database


def setup_maintenance(p: Page) -> None:
    p.local("s3://bucket/")
    make_table(p.path("s3://bucket/docs"))


def setup_deletes(p: Page) -> None:
    p.local("s3://bucket/")
    t = it.IndexTable(make_table(p.path("s3://bucket/tables/docs"), options={"indexing.primaryKey": "id"}))
    p.names["path"] = str(p.tmp / "bloom")  # the Bloom filter example creates it
    p.names["df"] = spark_docs(p.spark)
    # the transaction example's staged values: splits written but not committed, a delete log
    from indextables_spark.core.log.deletes.delete_logs import write_delete_log

    p.names["adds"] = staged_adds(t.log.storage.uri, p.tmp)
    p.names["log"] = write_delete_log(t.log.storage, "EQUALITY", pa.table({"id": pa.array([3], pa.int64())}))


def setup_object_stores(p: Page) -> None:
    s3_bucket = p.request.getfixturevalue("s3_bucket")
    s3_endpoint = p.request.getfixturevalue("s3_endpoint")
    from conftest import S3_TEST_ACCESS_KEY, S3_TEST_SECRET_KEY

    container = p.request.getfixturevalue("azure_container")
    conn = p.request.getfixturevalue("azure_connection_string")
    prefix = f"docs-{os.urandom(4).hex()}"
    p.rewrites += [
        ("s3://bucket/", f"s3://{s3_bucket}/{prefix}/"),
        ("http://minio.internal:9000", s3_endpoint),
        ("az://container/", f"az://{container}/{prefix}/"),
    ]
    p.names.update(access_key=S3_TEST_ACCESS_KEY, secret_key=S3_TEST_SECRET_KEY, conn=conn, df=spark_docs(p.spark))
    make_table(p.path("az://container/tables/docs"), options={"azure.connectionString": conn})


def setup_architecture(p: Page) -> None:
    pass


def setup_vectors(p: Page) -> None:
    p.local("/data/")


SETUP: dict[str, Callable[[Page], None]] = {
    "guide/writing.md": setup_writing,
    "guide/reading-and-querying.md": setup_reading,
    "guide/sql.md": setup_sql,
    "guide/search-and-relevance.md": setup_path_table,
    "guide/aggregations.md": setup_path_table,
    "guide/streaming.md": setup_streaming,
    "guide/spark-free-api.md": setup_spark_free,
    "guide/companion-indexes.md": setup_companion,
    "guide/indextables4spark-tables.md": setup_reference,
    "guide/maintenance.md": setup_maintenance,
    "guide/deletes-transactions-bloom.md": setup_deletes,
    "guide/object-stores-and-credentials.md": setup_object_stores,
    "architecture.md": setup_architecture,
    "guide/vector-search.md": setup_vectors,
    "quickstart.md": setup_quickstart,
}

PAGES_WITH_EXAMPLES = sorted(page for page in pages() if any(b.skip is None for b in runnable(page)))


# --- the tests ---------------------------------------------------------------------------------------


def test_every_page_with_examples_has_a_setup():
    assert set(PAGES_WITH_EXAMPLES) <= set(SETUP), "add the page to SETUP"


def test_skipped_examples_are_listed():
    found = {}
    run = 0
    for page, text in pages().items():
        for b in blocks_of(page, text):
            if b.lang not in RUN_LANGS:
                assert b.skip is None, f"{page}:{b.line}: a skip marker on a ```{b.lang} block (it never runs)"
                continue
            if b.skip is None:
                run += 1
                continue
            key = next((k for k in SKIPPED if k[0] == page and b.code.startswith(k[1])), None)
            assert key is not None, f"{page}:{b.line}: skipped ({b.skip}) but not listed in SKIPPED"
            found[key] = b.skip
    assert found == SKIPPED
    print(f"docs examples: {run} run, {len(found)} skipped:")
    for (page, _), why in sorted(found.items()):
        print(f"  {page}: {why}")


def test_the_docs_quickstart_is_the_readmes():
    """The README's first ```python block (tests/smoke runs it as a script) is docs/quickstart.md's."""
    first = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
    readme = first.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme is not None
    assert [b.code for b in runnable("quickstart.md")] == [readme.group(1)]


# `$ indextables describe …` in a ```console block, the lines after it its output; the lines whose
# values are the reader's own run (times, the byte count) are compared by their key only
SHELL_DESCRIBE = re.compile(r"^\$ (indextables describe .+)$")
RUN_OWN = re.compile(r"^(last_commit_time|created_at|total_bytes)\s")


def shown_commands(page: str) -> list[tuple[str, list[str]]]:
    """The page's `indextables describe` commands in ```console blocks, each with the output shown."""
    out = []
    for b in blocks_of(page, pages()[page]):
        lines = b.code.rstrip("\n").splitlines()
        if b.lang == "console" and lines and SHELL_DESCRIBE.match(lines[0]):
            out.append((SHELL_DESCRIBE.match(lines[0]).group(1), lines[1:]))
    return out


def test_spark_free_quickstart_describe_prints_what_the_page_shows(tmp_path):
    """The Spark-free page's quickstart, then its `indextables describe`, as a reader runs them: in
    processes of their own in an empty directory (this process keeps one log per table path, and
    the page's path `articles` is relative), the output the page shows."""
    page = "guide/spark-free-api.md"
    commands = shown_commands(page)
    assert commands, f"docs/{page} shows no `$ indextables describe` output"
    env = {**os.environ, "COLUMNS": "100"}
    quickstart = runnable(page)[0]
    done = subprocess.run(
        [sys.executable, "-c", quickstart.code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for command, shown in commands:
        cli = [sys.executable, "-m", "indextables_spark.frontends.cli", *command.split()[1:]]
        done = subprocess.run(cli, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert masked(done.stdout.rstrip("\n").splitlines()) == masked(shown), command


def masked(lines: list[str]) -> list[str]:
    """Output lines, those of values the reader's own run has (RUN_OWN) by their key only."""
    return [ln.split()[0] if RUN_OWN.match(ln) else ln.rstrip() for ln in lines]


def test_blocks_and_markers_are_read():
    text = "x\n<!-- docs-test: skip: needs a cluster -->\n```python\nspark_submit()\n```\n\n```sql\nSELECT 1;\n-- c\nSELECT ';'\n```\n"
    a, b = blocks_of("p.md", text)
    assert (a.lang, a.skip, a.code, a.line) == ("python", "needs a cluster", "spark_submit()\n", 3)
    assert (b.lang, b.skip) == ("sql", None) and sql_statements(b.code) == ["SELECT 1", "SELECT ';'"]


def _indextables_conf(spark: Any) -> dict[str, str]:
    return {k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.indextables.")}


@pytest.mark.spark
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_page_examples_run(page, spark, tmp_path, request, monkeypatch):
    p = Page(tmp_path, spark, request)
    conf_before = _indextables_conf(spark)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    try:
        SETUP.get(page, lambda _: None)(p)
        # a module of its own, so that classes the examples define (dataclasses) find their module
        module = types.ModuleType("docs_example_" + re.sub(r"\W", "_", page))
        monkeypatch.setitem(sys.modules, module.__name__, module)
        namespace = module.__dict__
        namespace.update(it=it, spark=spark, **p.names)
        for b in runnable(page):
            if b.skip is not None:
                continue
            code = rewrite(b.code, p.rewrites)
            where = f"docs/{page}:{b.line}"
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    if b.lang == "python":
                        exec(compile(code, where, "exec"), namespace)
                    else:
                        for statement in sql_statements(code):
                            it.sql(spark, statement).collect()
            except Exception as e:
                raise AssertionError(f"{where} failed (rewrites: {p.rewrites}):\n{code}") from e
            expected = stated_output(b.code)
            if expected:
                assert out.getvalue().splitlines() == expected, where
    finally:
        for q in spark.streams.active:  # streaming examples start queries
            q.awaitTermination(120)
            q.stop()
        it.wait_for_maintenance(timeout=120)
        for k, v in _indextables_conf(spark).items():  # the examples set session conf
            if conf_before.get(k) != v:
                if k in conf_before:
                    spark.conf.set(k, conf_before[k])
                else:
                    spark.conf.unset(k)
        for statement in (
            "DROP VIEW IF EXISTS docs",
            "DROP VIEW IF EXISTS staging",
            "DROP TABLE IF EXISTS logs.events",
            "DROP DATABASE IF EXISTS logs",
        ):
            with contextlib.suppress(Exception):  # what the examples created in the session
                spark.sql(statement)
