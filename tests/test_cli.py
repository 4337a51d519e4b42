"""The `indextables` command line: outputs (tables, --json), exit codes, progress bars."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

import indextables_spark as it
from indextables_spark.api.progress import TerminalBars
from indextables_spark.frontends import cli

from cmd_helpers import age_tree, read_all, small_splits_table


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "t")
    small_splits_table(path, 3)
    return path


def test_read_only_commands(capsys, table, tmp_path):
    code, out, _ = run_cli(capsys, "describe-state", table)
    assert code == 0 and "DESCRIBE STATE" in out and "needs_compaction" in out and "num_skipped_files" in out
    code, out, _ = run_cli(capsys, "describe-state", table, "--json")
    state = json.loads(out)
    assert code == 0 and state["tableVersion"] == 2 and state["partitionColumns"] == ["day"]
    code, out, _ = run_cli(capsys, "history", table, "--json", "--limit", "2")
    hist = json.loads(out)
    assert [h["version"] for h in hist] == [2, 1] and hist[0]["operation"] == "WRITE"
    code, out, _ = run_cli(capsys, "files", table, "--where", "day = '2024-01-02'", "--json")
    files = json.loads(out)
    assert code == 0 and len(files) == 3 and {f["partitionValues"]["day"] for f in files} == {"2024-01-02"}
    code, out, _ = run_cli(capsys, "describe-log", table, "--all", "--json")
    log_rows = json.loads(out)
    assert code == 0 and {r["action_type"] for r in log_rows} >= {"add", "commit_info", "protocol", "metadata"}
    assert next(r for r in log_rows if r["action_type"] == "add")["partition_values"]["day"].startswith("2024-01-0")
    code, out, _ = run_cli(capsys, "describe-transaction-log", table)
    assert code == 0 and "DESCRIBE TRANSACTION LOG" in out


def test_maintenance_commands(capsys, table, tmp_path):
    t = it.IndexTable(table)
    before = read_all(t)
    code, out, _ = run_cli(capsys, "merge-splits", table, "--target-size", "1G", "--json")
    res = json.loads(out)
    assert code == 0 and res["status"] == "SUCCESS" and res["splitsCreated"] == 3
    assert read_all(it.IndexTable(table)) == before
    code, out, _ = run_cli(capsys, "sql", f"MERGE SPLITS '{table}'")
    assert code == 0 and "NO_ACTION" in out  # already merged
    code, out, _ = run_cli(capsys, "drop-partitions", table, "--where", "day = '2024-01-03'", "--json")
    assert code == 0 and json.loads(out)["splitsRemoved"] == 1
    age_tree(table, 24 * 40)
    code, out, _ = run_cli(
        capsys, "purge", table, "--older-than", "7d", "--tx-log-retention", "30d", "--dry-run", "--json"
    )
    dry = json.loads(out)
    # The 9 merged-away sources go with versions 0..2; the dropped merged split stays (version 3 adds it).
    assert code == 0 and dry["dryRun"] is True and dry["splitsDeleted"] == 9 and dry["versionFilesDeleted"] == 3
    assert os.path.exists(os.path.join(table, dry["deletedSplits"][0]))
    code, out, _ = run_cli(capsys, "purge", table, "--older-than", "168h", "--tx-log-retention", "30d")
    assert code == 0 and "splits_deleted" in out and not os.path.exists(os.path.join(table, dry["deletedSplits"][0]))
    code, out, _ = run_cli(capsys, "checkpoint", table, "--json")
    assert code == 0 and json.loads(out)["status"] == "SUCCESS"
    code, out, _ = run_cli(capsys, "compact", table)
    assert code == 0 and "COMPACT" in out
    code, out, _ = run_cli(capsys, "truncate-time-travel", table, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["dryRun"] is True
    target = str(tmp_path / "repaired")
    code, out, _ = run_cli(capsys, "repair", os.path.join(table, "_transaction_log"), target, "--json")
    assert code == 0 and json.loads(out)["validSplits"] == 2 and os.listdir(target)


def test_exit_codes_and_error_messages(capsys, table, tmp_path):
    code, _, err = run_cli(capsys, "sql", "PURGE INDEXTABLE /nope DRY RUN")
    assert code == cli.EXIT_USAGE and "CommandSyntaxError" in err and "position 17" in err
    code, _, err = run_cli(capsys, "sql", "SELECT 1")
    assert code == cli.EXIT_USAGE and "not an indextables command" in err
    code, _, err = run_cli(capsys, "describe-state", str(tmp_path / "missing"))
    assert code == cli.EXIT_NOT_FOUND and "TableNotFoundError" in err and "missing" in err
    for command in (
        "history",
        "files",
        "describe-log",
        "checkpoint",
        "compact",
        "merge-splits",
        "purge",
        "truncate-time-travel",
    ):
        code, _, err = run_cli(capsys, command, str(tmp_path / "missing"))
        assert code == cli.EXIT_NOT_FOUND, (command, err)
    code, _, err = run_cli(capsys, "purge", table, "--older-than", "2h")
    assert code == cli.EXIT_USAGE and "retentionCheckEnabled=false" in err
    code, out, err = run_cli(
        capsys, "purge", table, "--older-than", "2h", "-o", "purge.retentionCheckEnabled=false", "--json"
    )
    assert code == 0 and json.loads(out)["retentionHours"] == 2.0
    code, _, err = run_cli(capsys, "drop-partitions", table, "--where", "region = 'eu'")
    assert code == cli.EXIT_USAGE and "not a partition column" in err
    code, _, err = run_cli(capsys, "repair", table, str(tmp_path / "r"))
    assert code == cli.EXIT_USAGE and "_transaction_log" in err
    with pytest.raises(SystemExit) as e:  # argparse: bad value / missing argument
        cli.main(["purge", table, "--older-than", "soon"])
    assert e.value.code == cli.EXIT_USAGE
    with pytest.raises(SystemExit) as e:
        cli.main(["drop-partitions", table])
    assert e.value.code == cli.EXIT_USAGE
    capsys.readouterr()


def test_progress_bars_and_installed_entry_point(table):
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with TerminalBars(console) as bars:
        it.IndexTable(table).maintenance.merge_splits(progress=bars)
    assert "merging" in buf.getvalue() and "splits" in buf.getvalue()
    exe = os.path.join(os.path.dirname(sys.executable), "indextables")
    proc = subprocess.run([exe, "describe-state", table, "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["numFiles"] == 3  # the state after the merge
    proc = subprocess.run([exe, "describe-state", table + "-missing"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == cli.EXIT_NOT_FOUND and "no indextables table" in proc.stderr


@pytest.fixture
def docs_table(tmp_path) -> str:
    import pyarrow as pa

    path = str(tmp_path / "docs")
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "body": ["red apple", "red pear", "green apple", "red apple pie", "blue sky", None],
            "tags": [["a", "b"], [], None, ["c"], ["a"], ["z"]],
            "views": pa.array([5, 50, 500, 5000, 50000, 7], pa.int64()),
            "region": ["eu", "us", "eu", "us", "eu", "us"],
        }
    )
    it.write_table(path, data, partition_by=["region"], options={"indexing.typemap.body": "text"})
    return path


def test_search_command_outputs(capsys, docs_table):
    t = it.IndexTable(docs_table)
    code, out, _ = run_cli(capsys, "search", docs_table, "body:red", "--columns", "id,body")
    assert code == 0 and "3 rows" in out and "red apple pie" in out and "green" not in out
    # --json: one object per row, the same rows as IndexTable.search
    code, out, _ = run_cli(capsys, "search", docs_table, "body:apple", "--where", "views > 10", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    expected = t.search("body:apple", where="views > 10").to_pylist()
    assert code == 0 and sorted(r["id"] for r in rows) == sorted(r["id"] for r in expected) == [2, 3]
    assert {r["id"]: r["tags"] for r in rows} == {2: None, 3: ["c"]} and rows[0]["region"] in ("eu", "us")
    # --limit: top n by relevance with _score, best first
    code, out, _ = run_cli(capsys, "search", docs_table, "body:apple OR body:pie", "--limit", "1", "--json")
    (best,) = [json.loads(line) for line in out.splitlines()]
    assert best["id"] == 3 and best["_score"] > 0
    # --csv: a header and one line per row; nested values as JSON; `*` reads every row
    import pyarrow.csv as pcsv

    code, out, _ = run_cli(
        capsys, "search", docs_table, "*", "--where", "region = 'us'", "--csv", "--columns", "id,tags,body"
    )
    got = pcsv.read_csv(io.BytesIO(out.encode()))
    assert code == 0 and got.column_names == ["id", "tags", "body"]
    assert sorted(zip(got.column("id").to_pylist(), got.column("tags").to_pylist())) == [
        (1, "[]"),
        (3, '["c"]'),
        (5, '["z"]'),
    ]
    code, out, _ = run_cli(capsys, "search", docs_table, "body:red", "--snippets", "body", "--json")
    assert code == 0 and all("<b>red</b>" in json.loads(line)["_snippet"] for line in out.splitlines())
    # the terminal table shows at most --max-rows rows and says how many there are
    code, out, _ = run_cli(capsys, "search", docs_table, "*", "--max-rows", "2")
    assert code == 0 and "6 rows (first 2 shown" in out


def test_search_command_errors(capsys, docs_table, tmp_path):
    code, _, err = run_cli(capsys, "search", docs_table, "body:red AND")
    assert code == cli.EXIT_USAGE and "QueryParseError" in err and "'AND' has no term after it" in err
    code, _, err = run_cli(capsys, "search", docs_table, "body:red", "--columns", "id,nope")
    assert code == cli.EXIT_USAGE and "nope" in err
    code, _, err = run_cli(capsys, "search", docs_table, "body:red", "--where", "nope = 1")
    assert code == cli.EXIT_USAGE and "nope" in err
    code, _, err = run_cli(capsys, "search", docs_table, "body:red", "--json", "--csv")
    assert code == cli.EXIT_USAGE and "not both" in err
    code, _, err = run_cli(capsys, "search", str(tmp_path / "missing"), "body:red")
    assert code == cli.EXIT_NOT_FOUND and "missing" in err
    with pytest.raises(SystemExit):
        cli.main(["search", docs_table, "body:red", "--limit", "0"])


def test_search_command_installed_entry_point(docs_table):
    exe = os.path.join(os.path.dirname(sys.executable), "indextables")
    proc = subprocess.run(
        [exe, "search", docs_table, "body:pear", "--csv", "--columns", "id,region"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ['"id","region"', '1,"us"']
