"""A newcomer's first hour (issue 51, item 6), scripted: what someone new does in an empty working
directory, each step as they run it, and what they read.

1. The README's Quickstart, saved as a script and run with `python`: it prints what the README says
   it prints; then `indextables describe` on the table it wrote.
2. The Spark-free quickstart of docs/guide/spark-free-api.md as a script, then `indextables describe`
   on its table: the output fits 80 columns and names the columns, the rows and the splits.
3. The usual mistakes, each answered by the package's own message among the first lines (on a Spark
   route: within the first lines of the exception Spark raises, not after its frames) naming the
   next step: another format's table read as an index (the companion command, which then works),
   a vector search without vector columns, a uint64 column, a mistyped option, a companion source
   spelled two ways, a query syntax error, a delete's result.
4. The results say what happened in one short line: a delete's, a snapshot's, a change set's.

The scripts and the command line run in processes of their own (`sys.executable`, the console
script next to it); the Spark mistakes run in the suite's session, as in a notebook. Those two
Spark tests are in the integration tier (tests/tiers.py), the Spark-free steps in the fast one.
tests/test_docs_examples.py checks every page's examples; this file is the sequence and the output.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.config import option_checks
from indextables_spark.errors import InvalidOptionError, QueryParseError, TableNotFoundError, UnsupportedTypeError
from indextables_spark.results import DeleteResult
from test_docs_examples import runnable, stated_output

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
FIRST_LINES = 6  # where the package's message must be, in what the user reads first


def user_env() -> dict[str, str]:
    """What an activated venv gives a user: this Python for Spark's workers too; a pipe, 80 columns."""
    env = {**os.environ, "COLUMNS": "80", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    env.pop("FORCE_COLOR", None)
    return env


def run_script(home: Path, name: str, code: str) -> subprocess.CompletedProcess[str]:
    """`python <name>` in `home`, the script saved there first."""
    (home / name).write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, name], cwd=home, env=user_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"python {name} failed (exit {done.returncode}):\n{done.stderr[-6000:]}"
    return done


def indextables(home: Path, *argv: str) -> list[str]:
    """The `indextables` command (the console script next to this Python, else `python -m`)."""
    script = Path(sys.executable).with_name("indextables")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "indextables_spark.frontends.cli"]
    done = subprocess.run([*cmd, *argv], cwd=home, env=user_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"indextables {' '.join(argv)} failed:\n{done.stderr[-3000:]}"
    return done.stdout.rstrip("\n").splitlines()


def value_of(lines: list[str], key: str) -> str:
    """The value of `key` in `indextables describe`'s first section (`key  value`)."""
    return next(line.split(None, 1)[1] for line in lines if line.split(None, 1)[:1] == [key])


def first_python_block(markdown: str) -> str:
    m = re.search(r"^```python\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)
    assert m is not None, "the README has no ```python block"
    return m.group(1)


def the_message_comes_first(error: BaseException, *parts: str) -> list[str]:
    """The first lines of the error as the user reads it, each of `parts` among them."""
    lines = str(error).splitlines()[:FIRST_LINES]
    for part in parts:
        assert any(part in line for line in lines), f"{part!r} not in the first {FIRST_LINES} lines:\n" + "\n".join(
            lines
        )
    return lines


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The newcomer's working directory: fresh and empty, the current directory of the steps."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    return home


def fits_80_columns(lines: list[str]) -> None:
    wide = [line for line in lines if len(line) > 80]
    assert not wide, f"wider than 80 columns: {wide}"


# ---- 1 and 2: the two quickstarts, then `indextables describe` -------------------------------------------


@pytest.mark.spark
def test_1_the_readme_quickstart_prints_what_it_says(home):
    code = first_python_block((ROOT / "README.md").read_text(encoding="utf-8"))
    expected = stated_output(code)
    assert expected, "the README's Quickstart states no output (`print(...)  # output` lines)"
    done = run_script(home, "quickstart.py", code)
    assert done.stdout.splitlines() == expected, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    # and what it wrote, described from a shell
    shown = indextables(home, "describe", "quickstart-docs")
    fits_80_columns(shown)
    assert value_of(shown, "num_rows") == "3" and value_of(shown, "num_partitions") == "2", shown


def test_2_the_spark_free_quickstart_then_describe(home):
    quickstart = runnable("guide/spark-free-api.md")[0]
    expected = stated_output(quickstart.code)
    assert expected, "the Spark-free quickstart states no output"
    done = run_script(home, "spark_free.py", quickstart.code)
    assert done.stdout.splitlines() == expected, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[-3000:]

    shown = indextables(home, "describe", "articles")
    fits_80_columns(shown)
    assert shown[0] == "DESCRIBE TABLE"
    # the rows and splits
    assert value_of(shown, "num_rows") == "3" and value_of(shown, "num_deleted_rows") == "1"
    assert value_of(shown, "num_splits") == "1" and value_of(shown, "last_operation") == "DELETE"
    # the schema: each column, its type and its indexing
    at = shown.index("columns")
    assert shown[at + 1].split() == ["name", "type", "nullable", "indexing"]
    columns = {line.split()[0]: line.split(None, 3)[1:] for line in shown[at + 2 : at + 6]}
    assert columns["body"] == ["string", "True", "text (tokenizer default)"], shown
    assert columns["id"][0] == "long" and columns["views"][0] == "long" and columns["tag"][0] == "string"


# ---- 3: the mistakes, without Spark ---------------------------------------------------------------------

DOCS = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "body": ["search a data lake", "a kestrel over the river", "the river feeds the lake"],
    }
)
TEXT = {"indexing.typemap.body": "text"}


def test_3a_another_format_names_the_companion_command_which_works(home):
    from deltalake import write_deltalake

    write_deltalake("events", DOCS)
    with pytest.raises(TableNotFoundError) as e:
        it.IndexTable("events").count()
    first = the_message_comes_first(e.value, "BUILD INDEXTABLES COMPANION FOR DELTA 'events'", "it.build_companion(")[0]
    # the call it names, as the user copies it, with an index path of theirs
    call = re.search(r"it\.build_companion\([^)]*\)", first)
    assert call is not None and "<index path>" in call.group(0) and "<column>" in call.group(0), first
    built = eval(call.group(0).replace("<index path>", "events-index").replace("<column>", "body"), {"it": it})
    assert built["status"] == "SUCCESS"
    assert it.IndexTable("events-index").count() == 3
    # the column it names is searched by words, as a newcomer's first query does
    assert sorted(it.IndexTable("events-index").search("body:river").column("id").to_pylist()) == [2, 3]


def test_3b_a_vector_search_without_vector_columns_names_the_option(home):
    it.write_table("docs", DOCS, options=TEXT)
    with pytest.raises(InvalidOptionError) as e:
        it.IndexTable("docs").search(vector=[0.1, 0.2], limit=3)
    the_message_comes_first(e.value, "has no vector column", "indexing.vector.<column>=<dimensions>")


def test_3c_a_uint64_column_names_the_cast(home):
    with pytest.raises(UnsupportedTypeError) as e:
        it.write_table("counters", pa.table({"id": pa.array([1, 2], pa.uint64())}))
    the_message_comes_first(e.value, "uint64", "cast the column to int64")
    assert not it.IndexTable("counters").exists()


def test_3d_a_mistyped_option(home, caplog):
    # a column the table does not have: refused, naming the column meant
    with pytest.raises(InvalidOptionError) as e:
        it.write_table("docs", DOCS, options={"spark.indextables.indexing.typemap.bdy": "text"})
    the_message_comes_first(e.value, "indexing.typemap.bdy names 'bdy' (did you mean 'body'?)")
    # an option the package does not know: one warning, however often it is given
    option_checks._warned.discard("indexing.typmap.body")  # once per process: forget earlier tests' warning
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            it.write_table("docs", DOCS, options={**TEXT, "spark.indextables.indexing.typmap.body": "text"})
    warned = [r.getMessage() for r in caplog.records if "indexing.typmap.body" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "(did you mean spark.indextables.indexing.typemap.body?)" in warned[0] and "ignored" in warned[0]
    assert "\n" not in warned[0]


def test_3e_a_companion_source_spelled_two_ways_is_one_source(home):
    from deltalake import write_deltalake

    write_deltalake("data/clicks", DOCS)
    first = it.build_companion("data/clicks", "clicks-index", format="delta", indexing={"body": "text"})
    assert first["status"] == "SUCCESS"
    for spelled in (str(home / "data" / "clicks"), str(home / "data" / "clicks") + "/", "data/clicks/"):
        again = it.build_companion(spelled, "clicks-index", format="delta", indexing={"body": "text"})
        assert again["status"] == "NO_ACTION", (spelled, again)  # a sync of the same companion: nothing new
    write_deltalake("data/clicks", DOCS, mode="append")
    synced = it.build_companion(str(home / "data" / "clicks") + "/", "clicks-index", format="delta")
    assert synced["status"] == "SUCCESS" and it.IndexTable("clicks-index").count() == 6


def test_3f_a_query_syntax_error_shows_where_and_the_fields(home):
    it.write_table("docs", DOCS, options=TEXT)
    with pytest.raises(QueryParseError) as e:
        it.IndexTable("docs").search("body:(lake")
    lines = the_message_comes_first(e.value, "invalid query 'body:(lake'", "searchable fields: body, id")
    shown = next(i for i, line in enumerate(lines) if line.strip() == "body:(lake")
    assert lines[shown + 1].strip() == "^" and lines[shown + 1].index("^") == lines[shown].index("(lake") + 5


# ---- 3g and 4: results that say what happened ------------------------------------------------------------


def test_3g_4_results_are_one_short_line(home):
    it.write_table("docs", DOCS, options=TEXT)
    t = it.IndexTable("docs")
    deleted = t.delete("id >= 2")
    assert isinstance(deleted, DeleteResult)
    text = repr(deleted)
    assert "\n" not in text and len(text) < 300, text
    assert "version=1" in text and "deleted_rows=2" in text, text
    for obj in (t.snapshot(), t.changes_since(0)):
        assert "\n" not in repr(obj) and len(repr(obj)) < 300, repr(obj)
    assert repr(t.snapshot()).startswith("Snapshot(version=1, ")
    assert "delete_logs=1" in repr(t.changes_since(0))


# ---- 3 on Spark: the same mistakes in a notebook's session ---------------------------------------------


def spark_shows(error: BaseException, without_spark: BaseException) -> list[str]:
    """The lines of the error Spark raised, checked to show the package's message, the one the same
    mistake raises without Spark, whole: its first line among the first lines, the others after it."""
    lines, message = str(error).splitlines(), str(without_spark).splitlines()
    at = next((i for i, line in enumerate(lines) if message[0] in line), None)
    assert at is not None and at < FIRST_LINES, f"not in the first {FIRST_LINES} lines: {message[0]!r}\n{error}"
    assert type(without_spark).__name__ in lines[at], lines[at]
    assert lines[at + 1 : at + len(message)] == message[1:], str(error)
    return lines[at : at + len(message)]


@pytest.mark.spark
def test_3_the_mistakes_in_a_spark_notebook(spark, tmp_path, caplog):
    from deltalake import write_deltalake

    # paths as a notebook has them: absolute (Spark's workers do not share this process's directory)
    events, docs, index = (str(tmp_path / name) for name in ("events", "docs", "events-index"))
    write_deltalake(events, DOCS)

    def reader():  # a fresh reader each time: options set on one stay on it
        return spark.read.format("indextables")

    # (a) a Delta table read as an index: the command, which then works
    with pytest.raises(Exception) as e:
        reader().load(events).collect()
    with pytest.raises(TableNotFoundError) as plain:
        it.IndexTable(events).count()
    shown = spark_shows(e.value, plain.value)
    assert "it.build_companion(" in shown[0]
    command = re.search(
        r"BUILD INDEXTABLES COMPANION FOR DELTA '[^']*' INDEXING MODES \('<column>':'text'\) AT LOCATION '<index path>'",
        shown[0],
    )
    assert command is not None, shown
    spark.sql(command.group(0).replace("<index path>", index).replace("<column>", "body")).collect()
    assert reader().load(index).count() == 3
    assert reader().option("query", "body:river").load(index).count() == 2  # searched by words

    spark.createDataFrame(DOCS.to_pylist(), "id long, body string").write.format("indextables").option(
        "spark.indextables.indexing.typemap.body", "text"
    ).save(docs)

    # (b) a vector search on a table without vector columns
    with pytest.raises(Exception) as e:
        reader().option("vector", "[0.1, 0.2]").load(docs).collect()
    with pytest.raises(InvalidOptionError) as plain:
        it.IndexTable(docs).search(vector=[0.1, 0.2], limit=3)
    assert "indexing.vector.<column>=<dimensions>" in spark_shows(e.value, plain.value)[0]

    # (d) a mistyped column in an option: refused; an unknown option: warned once
    typo = {"spark.indextables.indexing.typemap.bdy": "text"}
    more = spark.createDataFrame([(4, "lake")], "id long, body string")
    with pytest.raises(Exception) as e:
        more.write.format("indextables").mode("append").options(**typo).save(docs)
    with pytest.raises(InvalidOptionError) as plain:
        it.write_table(docs, pa.table({"id": [4], "body": ["lake"]}), options=typo)
    assert "(did you mean 'body'?)" in spark_shows(e.value, plain.value)[0]
    option_checks._warned.discard("qurey")  # once per process: forget earlier tests' warning
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            reader().option("spark.indextables.qurey", "body:lake").load(docs).collect()
    warned = [r.getMessage() for r in caplog.records if "qurey" in r.getMessage()]
    assert len(warned) == 1 and "(did you mean spark.indextables.query?)" in warned[0], warned

    # (f) a query syntax error: the query with a caret under the fault, the fields it can search
    with pytest.raises(Exception) as e:
        reader().option("query", "body:(lake").load(docs).collect()
    with pytest.raises(QueryParseError) as plain:
        it.IndexTable(docs).search("body:(lake")
    shown = spark_shows(e.value, plain.value)
    assert shown[2].strip() == "^" and "searchable fields: body, id" in shown[3], shown
