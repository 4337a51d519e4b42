"""Every ```python and ```sql example of the documentation (docs/**/*.md) runs, so none goes stale.

Each page's examples run in order in one namespace (as a reader would type them into one session),
in a fresh temporary working directory; `spark` is the suite's local session (tests/conftest.py),
which the examples' `SparkSession.builder.getOrCreate()` returns. A ```sql block's statements
(`;`-separated) run through `it.sql(spark, …)`, which hands anything but a command text to
`spark.sql`. A block prints what the page shows: the ```text block right after it (blank lines and
a line such as "prints" may stand between them), else the comments of its `print(…)  # …` lines.
The Spark-free page's `$ indextables describe` (a ```console block) is run through the CLI after
its quickstart and compared with the output the page shows.

Every guide page opens with an example that runs on its own (issue 51, item 5): its first
```python block makes everything it uses (the session, the table, its rows) and shows what it
prints. That block runs first, in a namespace holding nothing but the names it makes, before
anything else is made for the page; `test_guide_page_opens_with_an_example_that_runs_on_its_own`
checks, without Spark, that it reads no name it does not define. NO_OPENING lists the guide pages
that cannot open so, each with why (the page says so too).

What a page's later examples take for granted is made after its opening, by the page's entry in
SETUP: the tables they read (`path`, …: sample documents written with `it.write_table`), the
DataFrames and values they name without defining (`arrow_table`, `s3_options`, …), and `it` and
`spark` for a page that does not make them. The fewer names SETUP makes, the more the test proves
a page runs as a reader runs it; a name both SETUP and the page's opening make fails the test.
Paths are rewritten, visibly, by each entry's rewrites: `tempfile.mkdtemp()` makes its directory
under the test's temporary directory, and a table path such as `/data/docs` or `s3://bucket/…`
becomes one under it (on the object-stores page, `s3://bucket/…` becomes the moto bucket and the
S3-compatible endpoint the moto server's; `az://container/…` Azurite's container); the rewrites a
page got are in its failure message.

An example that cannot run as it is (a shell command is not Python; real cloud accounts; a fragment
of a larger file) carries a marker on the line before its fence:

    <!-- docs-test: skip: <why> -->

SKIPPED lists every such marker with its reason, so a new one is a visible change of this file;
`test_skipped_examples_are_listed` prints the counts of run and skipped examples.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import io
import os
import pathlib
import re
import subprocess
import symtable
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


# what may stand between an example and the ```text block of its output: blank lines, and one line
# that starts with "prints" or ends in "prints" / "prints:"
OUTPUT_LEAD = re.compile(r"\s*(?:(?:prints\b[^\n]*|[^\n]*\bprints:?)[ \t]*\n)?\s*", re.IGNORECASE)


@dataclass
class Block:
    page: str  # relative to docs/
    line: int  # 1-based line of the fence
    lang: str
    code: str
    skip: str | None  # the marker's reason
    output: list[str] | None = None  # the lines of the ```text block right after it: what it prints


def blocks_of(page: str, text: str) -> list[Block]:
    """The fenced code blocks of a page, with the skip marker on the line before each (if any), and
    for each ```python / ```sql block the ```text block that shows its output (if any)."""
    out: list[Block] = []
    end = -1  # where the previous block ended
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        lang = (m.group("info").split() or [""])[0].lower()
        shows = out and lang == "text" and out[-1].lang in RUN_LANGS and OUTPUT_LEAD.fullmatch(text[end : m.start()])
        if shows:
            out[-1].output = m.group("body").splitlines()
        out.append(Block(page, line, lang, m.group("body"), marker.group("reason") if marker else None))
        end = m.end() + 1
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


def shown_output(b: Block) -> list[str] | None:
    """What the page says a block prints: its ```text block (the lines, trailing blanks aside), else
    its `print(…)  # …` comments; None when it says neither. Not both: one of them would go unchecked."""
    comments = stated_output(b.code)
    if b.output is None:
        return comments or None
    assert not comments, f"docs/{b.page}:{b.line}: print comments and a ```text block of output: keep one"
    return trimmed(b.output)


def trimmed(lines: list[str]) -> list[str]:
    """Lines without trailing blanks, and without the blank lines at the end (`df.show()` ends in one)."""
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


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


# Each page's SETUP entry is two steps: the first only rewrites paths, the second makes what the
# page's examples take for granted. A guide page's first example (`opening`) runs between the two,
# in a namespace of its own names only, so it cannot lean on what the second step makes.


def rewrites_local(*prefixes: str) -> Callable[[Page], None]:
    return lambda p: p.local(*prefixes)


def rewrites_quickstart(p: Page) -> None:
    # Spark's Python workers started before the test changed directory: an absolute path
    p.rewrites.append(('"quickstart-docs"', f'"{p.tmp}/quickstart-docs"'))
    p.rewrites.append(("(path 'quickstart-docs')", f"(path '{p.tmp}/quickstart-docs')"))


def rewrites_reference(p: Page) -> None:
    # the fixture the CONVERT example copies, as a reader in a checkout of the repository names it
    p.rewrites.append(('"tests/data/', f'"{ROOT}/tests/data/'))


def rewrites_object_stores(p: Page) -> None:
    s3_bucket = p.request.getfixturevalue("s3_bucket")
    s3_endpoint = p.request.getfixturevalue("s3_endpoint")
    container = p.request.getfixturevalue("azure_container")
    prefix = f"docs-{os.urandom(4).hex()}"
    p.rewrites += [
        ("s3://bucket/", f"s3://{s3_bucket}/{prefix}/"),
        ("http://minio.internal:9000", s3_endpoint),
        ("az://container/", f"az://{container}/{prefix}/"),
    ]


def session(p: Page) -> None:
    """`it` and `spark`, for a page whose examples do not make them."""
    p.names.update(it=it, spark=p.spark)


def setup_aggregations(p: Page) -> None:
    # the second example's table `path` (its first example is the opening) and its optional `spark`
    p.names.update(path=make_table(str(p.tmp / "docs")), spark=p.spark)


def setup_spark_free(p: Page) -> None:
    # the quickstart and the surface at a glance write and read their own table (`articles`)
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
    # the second example's sources: a Delta table on "S3", an Iceberg catalog `prod`
    pytest.importorskip("deltalake")
    pytest.importorskip("pyiceberg")
    from deltalake import write_deltalake
    from pyiceberg.catalog.sql import SqlCatalog

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


def setup_object_stores(p: Page) -> None:
    from conftest import S3_TEST_ACCESS_KEY, S3_TEST_SECRET_KEY

    session(p)
    conn = p.request.getfixturevalue("azure_connection_string")
    p.names.update(access_key=S3_TEST_ACCESS_KEY, secret_key=S3_TEST_SECRET_KEY, conn=conn, df=spark_docs(p.spark))
    make_table(p.path("az://container/tables/docs"), options={"azure.connectionString": conn})


def setup_vectors(p: Page) -> None:
    p.names["spark"] = p.spark  # the Spark examples after the Spark-free opening


def nothing(p: Page) -> None:
    pass


# page -> (its path rewrites, what its examples take for granted)
SETUP: dict[str, tuple[Callable[[Page], None], Callable[[Page], None]]] = {
    "guide/writing.md": (rewrites_local("s3://bucket/"), nothing),
    "guide/reading-and-querying.md": (nothing, nothing),
    "guide/sql.md": (nothing, nothing),
    "guide/search-and-relevance.md": (nothing, nothing),
    "guide/aggregations.md": (nothing, setup_aggregations),
    "guide/streaming.md": (nothing, nothing),
    "guide/spark-free-api.md": (rewrites_local("/data/"), setup_spark_free),
    "guide/companion-indexes.md": (rewrites_local("s3://lake/", "/idx/"), setup_companion),
    "guide/indextables4spark-tables.md": (rewrites_reference, nothing),
    "guide/maintenance.md": (nothing, nothing),
    "guide/deletes-transactions-bloom.md": (nothing, nothing),
    "guide/object-stores-and-credentials.md": (rewrites_object_stores, setup_object_stores),
    "architecture.md": (nothing, nothing),
    "guide/vector-search.md": (rewrites_local("/data/"), setup_vectors),
    "quickstart.md": (rewrites_quickstart, nothing),
}

# Guide pages whose first example cannot run on its own, and why (each page says so too). Every
# other guide page opens with an example that makes all it uses and shows what it prints.
NO_OPENING: dict[str, str] = {
    "guide/object-stores-and-credentials.md": "a bucket or container of the reader's and its credentials",
    "guide/deployment.md": "a cluster",
}


def guide_pages() -> list[str]:
    return sorted(page for page in pages() if page.startswith("guide/"))


def opening(page: str) -> Block | None:
    """A guide page's first ```python block, which must run on its own (None: not a guide page, or one
    in NO_OPENING)."""
    if page not in set(guide_pages()) - set(NO_OPENING):
        return None
    return next((b for b in blocks_of(page, pages()[page]) if b.lang == "python"), None)


def free_names(code: str) -> set[str]:
    """The names `code` reads that neither it defines (assigns, imports, def, class) nor Python has."""
    top = symtable.symtable(code, "<example>", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    read: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        for s in table.get_symbols():
            if s.is_referenced() and (table is top or s.is_global()):
                read.add(s.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return read - defined - set(dir(builtins))


PAGES_WITH_EXAMPLES = sorted(page for page in pages() if any(b.skip is None for b in runnable(page)))


# --- the tests ---------------------------------------------------------------------------------------


def test_every_page_with_examples_has_a_setup():
    assert set(PAGES_WITH_EXAMPLES) <= set(SETUP), "add the page to SETUP"


@pytest.mark.parametrize("page", guide_pages())
def test_guide_page_opens_with_an_example_that_runs_on_its_own(page):
    """Its first ```python block (test_page_examples_run runs it in a namespace of its own names
    only) reads no name it does not define, and shows what it prints."""
    if page in NO_OPENING:
        first = next((b for b in blocks_of(page, pages()[page]) if b.lang == "python"), None)
        missing = free_names(first.code) if first is not None and first.skip is None else {"(skipped)"}
        assert missing, f"docs/{page} opens with an example that runs on its own: take it out of NO_OPENING"
        return
    first = opening(page)
    assert first is not None, f"docs/{page} has no ```python example"
    assert first.skip is None, f"docs/{page}:{first.line}: the opening example is skipped ({first.skip})"
    before = [b for b in blocks_of(page, pages()[page]) if b.lang in RUN_LANGS and b.line < first.line]
    assert not before, f"docs/{page}: a ```{before[0].lang} example before the opening ```python one"
    missing = free_names(first.code)
    assert not missing, f"docs/{page}:{first.line}: the first example uses {sorted(missing)} without making them"
    assert shown_output(first), f"docs/{page}:{first.line}: the first example shows no output"


def test_names_an_example_does_not_make():
    code = "import os\nx = 1\ndef f(a):\n    return a + x + y\nprint([z for z in w], os.sep, len(spark.conf))\n"
    assert free_names(code) == {"y", "w", "spark"}


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
    text = "```python\ndf.show()\n```\n\nprints\n\n```text\n+--+\n|id|  \n\n```\n\n```text\nnot output\n```\n"
    a, b, c = blocks_of("p.md", text)
    assert a.output == ["+--+", "|id|  ", ""] and shown_output(a) == ["+--+", "|id|"]
    assert b.output is None and c.output is None  # only a ```text block right after an example is its output


def _indextables_conf(spark: Any) -> dict[str, str]:
    return {k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.indextables.")}


def run_block(b: Block, p: Page, namespace: dict[str, Any]) -> None:
    """Run one example (after the page's rewrites) in `namespace`; it prints what the page shows."""
    code = rewrite(b.code, p.rewrites)
    where = f"docs/{b.page}:{b.line}"
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            if b.lang == "python":
                exec(compile(code, where, "exec"), namespace)
            else:
                for statement in sql_statements(code):
                    it.sql(p.spark, statement).collect()
    except Exception as e:
        raise AssertionError(f"{where} failed (rewrites: {p.rewrites}):\n{code}") from e
    expected = shown_output(b)
    if expected is not None:
        assert trimmed(out.getvalue().splitlines()) == expected, where


@pytest.mark.spark
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_page_examples_run(page, spark, tmp_path, request, monkeypatch):
    p = Page(tmp_path, spark, request)
    conf_before = _indextables_conf(spark)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    rewrites, setup = SETUP[page]
    first = opening(page)
    try:
        # the examples' new directories: under the test's (tempfile.tempdir stays: Spark's Python
        # workers and this process meet in tempfile.gettempdir(), spark/guard.py)
        p.rewrites.append(("tempfile.mkdtemp()", f"tempfile.mkdtemp(dir={str(tmp_path)!r})"))
        rewrites(p)
        # a module of its own, so that classes the examples define (dataclasses) find their module
        module = types.ModuleType("docs_example_" + re.sub(r"\W", "_", page))
        monkeypatch.setitem(sys.modules, module.__name__, module)
        namespace = module.__dict__
        made_by_setup = False
        for b in runnable(page):
            if b.skip is not None:
                continue
            if not made_by_setup and (first is None or b.line != first.line):  # the opening: with nothing made
                setup(p)
                clash = set(p.names) & set(namespace)
                assert not clash, f"SETUP makes {sorted(clash)}, which docs/{page}'s first example makes itself"
                namespace.update(p.names)
                made_by_setup = True
            run_block(b, p, namespace)
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
            "DROP VIEW IF EXISTS events",
            "DROP TABLE IF EXISTS logs.events",
            "DROP DATABASE IF EXISTS logs",
        ):
            with contextlib.suppress(Exception):  # what the examples created in the session
                spark.sql(statement)
