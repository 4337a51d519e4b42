"""The command-text parser: every command form, what is not ours, and syntax errors with positions."""

from __future__ import annotations

import pytest

from indextables_spark.errors import IndexTablesError
from indextables_spark.frontends.sql_parser import CommandSyntaxError, parse_command
from indextables_spark.ops.cluster.cache import DescribeDiskCache, FlushDiskCache, PrewarmCache
from indextables_spark.ops.maintenance.checkpoint import Checkpoint, Compact
from indextables_spark.ops.companion.build import BuildCompanion
from indextables_spark.ops.maintenance.convert import Convert
from indextables_spark.ops.write.delete import Delete
from indextables_spark.ops.inspect.describe import DescribeState, DescribeTransactionLog
from indextables_spark.ops.maintenance.drop_partitions import DropPartitions
from indextables_spark.ops.maintenance.merge_splits import MergeSplits
from indextables_spark.ops.maintenance.purge import Purge
from indextables_spark.ops.command import TableName, signature
from indextables_spark.ops.registry import OPERATIONS, operation_of
from indextables_spark.ops.maintenance.repair import RepairTransactionLog
from indextables_spark.ops.maintenance.truncate_time_travel import TruncateTimeTravel

G = 1 << 30
M = 1 << 20


@pytest.mark.parametrize(
    "text, expected",
    [
        ("CHECKPOINT INDEXTABLES '/t'", Checkpoint("/t")),
        ('checkpoint indextable "s3://b/t";', Checkpoint("s3://b/t")),
        (
            "  Compact IndexTables 'abfss://c@a.dfs.core.windows.net/t'  ",
            Compact("abfss://c@a.dfs.core.windows.net/t"),
        ),
        ("DESCRIBE INDEXTABLES STATE '/t'", DescribeState("/t")),
        ("desc indextables state '/it''s'", DescribeState("/it's")),
        ("DESCRIBE INDEXTABLES TRANSACTION LOG '/t'", DescribeTransactionLog("/t")),
        ("describe indextables transaction log '/t' include all", DescribeTransactionLog("/t", include_all=True)),
        ("MERGE SPLITS '/t'", MergeSplits("/t")),
        ("MERGE SPLITS '/t' TARGET SIZE 100M", MergeSplits("/t", target_size=100 * M)),
        (
            "merge splits '/t' target size 2 G max dest splits 5",
            MergeSplits("/t", target_size=2 * G, max_dest_splits=5),
        ),
        (
            "MERGE SPLITS '/t' WHERE date = '2024-01-01' AND (region IN ('a', 'b') OR x > 3) TARGET SIZE 1G "
            "MAX SOURCE SPLITS PER MERGE 100",
            MergeSplits(
                "/t",
                "date = '2024-01-01' AND (region IN ('a', 'b') OR x > 3)",
                target_size=G,
                max_source_splits_per_merge=100,
            ),
        ),
        (
            "MERGE SPLITS '/t' MAX SOURCE SPLITS PER MERGE 10 WHERE d = 'target size'",
            MergeSplits("/t", "d = 'target size'", max_source_splits_per_merge=10),
        ),
        ("PURGE INDEXTABLE '/t'", Purge("/t")),
        ("PURGE INDEXTABLES '/t' OLDER THAN 7 DAYS", Purge("/t", older_than_hours=168.0)),
        (
            "purge indextable '/t' older than 36 hours transaction log retention 2 days dry run",
            Purge("/t", older_than_hours=36.0, tx_log_retention_hours=48.0, dry_run=True),
        ),
        ("PURGE INDEXTABLE '/t' DRY RUN OLDER THAN 1.5 DAY", Purge("/t", older_than_hours=36.0, dry_run=True)),
        ("TRUNCATE INDEXTABLES TIME TRAVEL '/t'", TruncateTimeTravel("/t")),
        ("truncate indextables time travel '/t' dry run;", TruncateTimeTravel("/t", dry_run=True)),
        (
            "DROP INDEXTABLES PARTITIONS FROM '/t' WHERE year > '2020' OR month BETWEEN 1 AND 6",
            DropPartitions("/t", "year > '2020' OR month BETWEEN 1 AND 6"),
        ),
        (
            "REPAIR INDEXFILES TRANSACTION LOG '/t/_transaction_log' AT LOCATION '/t/_repaired'",
            RepairTransactionLog("/t/_transaction_log", "/t/_repaired"),
        ),
    ],
)
def test_commands_parse(text, expected):
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",
        "select * from t where x = 'CHECKPOINT INDEXTABLES'",
        "MERGE INTO t USING s ON t.id = s.id",
        "DROP TABLE t",
        "DESCRIBE TABLE t",
        "TRUNCATE TABLE t",
        "REPAIR TABLE t",
        "CHECKPOINTS",
        "with x as (select 1) select * from x",
        "select 'unterminated",
    ],
)
def test_other_text_is_not_ours(text):
    assert parse_command(text) is None


@pytest.mark.parametrize(
    "text, position, fragment",
    [
        (
            "CHECKPOINT INDEXTABLES /t",
            23,
            "expected a quoted table path or a table name, found '/' (put the path in quotes)",
        ),
        ("CHECKPOINT TABLE '/t'", 11, "expected INDEXTABLES, found 'TABLE'"),
        ("CHECKPOINT INDEXTABLES '/t", 23, "unterminated quoted text"),
        ("CHECKPOINT INDEXTABLES ''", 23, "the path is empty"),
        ("CHECKPOINT INDEXTABLES '/t' NOW", 28, "unexpected 'NOW' after the end of the command"),
        (
            "DESCRIBE INDEXTABLES STATUS '/t'",
            21,
            "expected TABLE, STATE, TRANSACTION LOG, DISK CACHE, STORAGE STATS, ENVIRONMENT or COMPONENT SIZES",
        ),
        ("DESCRIBE INDEXTABLES TRANSACTION LOG '/t' INCLUDE SOME", 50, "expected ALL, found 'SOME'"),
        ("MERGE SPLITS '/t' TARGET SIZE 10X", 30, "unknown size unit 'X'"),
        ("MERGE SPLITS '/t' TARGET SIZE big", 30, "expected a size such as 100M"),
        ("MERGE SPLITS '/t' MAX DEST SPLITS 0", 34, "MAX DEST SPLITS must be at least 1"),
        ("MERGE SPLITS '/t' MAX DEST SPLITS 2.5", 34, "expected a whole number for MAX DEST SPLITS"),
        ("MERGE SPLITS '/t' MAX SOURCE SPLITS PER MERGE 1", 18, "must be at least 2"),
        ("MERGE SPLITS '/t' MAX SPLITS 3", 22, "expected DEST SPLITS or SOURCE SPLITS PER MERGE after MAX"),
        ("MERGE SPLITS '/t' WHERE (a = 1", 30, "missing ')'"),
        ("MERGE SPLITS '/t' WHERE a = 1) TARGET SIZE 1G", 29, "unbalanced ')'"),
        ("MERGE SPLITS '/t' WHERE TARGET SIZE 1M", 24, "expected a partition predicate after WHERE"),
        ("MERGE SPLITS '/t' TARGET SIZE 1M TARGET SIZE 2M", 33, "TARGET SIZE is given twice"),
        ("MERGE SPLITS '/t' LIMIT 3", 18, "expected WHERE, TARGET SIZE"),
        ("PURGE INDEXTABLE '/t' OLDER THAN 7 WEEKS", 35, "expected DAYS or HOURS after OLDER THAN 7"),
        ("PURGE INDEXTABLE '/t' OLDER THAN seven DAYS", 33, "expected a number after OLDER THAN"),
        ("PURGE INDEXTABLE '/t' DRY RUN DRY RUN", 30, "DRY RUN is given twice"),
        ("PURGE INDEXTABLE '/t' NOW", 22, "expected OLDER THAN, TRANSACTION LOG RETENTION or DRY RUN"),
        ("TRUNCATE INDEXTABLES TIME '/t'", 26, "expected TRAVEL"),
        ("DROP INDEXTABLES PARTITIONS FROM '/t'", 37, "needs a WHERE clause"),
        ("DROP INDEXTABLES PARTITIONS '/t' WHERE a = 1", 28, "expected FROM"),
        ("REPAIR INDEXFILES TRANSACTION LOG '/t/_transaction_log' TO '/x'", 56, "expected AT"),
        # table names and the TANTIVY4SPARK keyword
        ("PURGE TANTIVY4SPARK db.t", 6, "expected INDEXTABLE, found 'TANTIVY4SPARK'"),
        ("MERGE SPLITS WHERE a = 1", 13, "expected a quoted table path or a table name before WHERE"),
        ("MERGE SPLITS", 12, "expected a quoted table path or a table name, found end of input"),
        ("MERGE SPLITS s3://b/t", 15, "unexpected ':' in a table name (put a table path in quotes)"),
        ("MERGE SPLITS a.b.c.d", 13, "a table name has at most 3 parts"),
        ("MERGE SPLITS db.", 16, "expected a name part after '.', found end of input"),
        ("MERGE SPLITS db.'t'", 16, "expected a name part after '.'"),
        ("DROP TANTIVY4SPARK PARTITIONS FROM db.t", 39, "needs a WHERE clause"),
        ("CHECKPOINT TANTIVY4SPARK db.t NOW", 30, "unexpected 'NOW' after the end of the command"),
    ],
)
def test_syntax_errors_name_the_position(text, position, fragment):
    with pytest.raises(CommandSyntaxError) as ei:
        parse_command(text)
    e = ei.value
    assert isinstance(e, IndexTablesError)
    assert e.position == position, str(e)
    assert fragment in str(e)
    assert f"at position {position} " in str(e)
    # the message shows the line with a caret under the position
    line, caret = str(e).splitlines()[-2:]
    assert caret.index("^") == line.index(text[:1]) + position


def test_multi_line_positions():
    text = "MERGE SPLITS '/t'\n  TARGET SIZE 5Q"
    with pytest.raises(CommandSyntaxError, match=r"line 2, column 15\): unknown size unit 'Q'"):
        parse_command(text)


# ---- the reference's TANTIVY4SPARK keyword and table names ----------------------------------------


def T(*parts: str) -> TableName:
    return TableName(parts)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("CHECKPOINT TANTIVY4SPARK '/t'", Checkpoint("/t")),
        ("compact tantivy4spark db.t", Compact(T("db", "t"))),
        ("DESCRIBE TANTIVY4SPARK STATE t", DescribeState(T("t"))),
        (
            "DESC Tantivy4Spark TRANSACTION LOG spark_catalog.db.t INCLUDE ALL",
            DescribeTransactionLog(T("spark_catalog", "db", "t"), include_all=True),
        ),
        (
            "MERGE SPLITS db.t WHERE day = '2024-01-01' TARGET SIZE 1G",
            MergeSplits(T("db", "t"), "day = '2024-01-01'", target_size=G),
        ),
        ("MERGE SPLITS `my db`.`t``1`", MergeSplits(T("my db", "t`1"))),
        ("MERGE SPLITS `where` MAX DEST SPLITS 2", MergeSplits(T("where"), max_dest_splits=2)),
        ("MERGE SPLITS where.t", MergeSplits(T("where", "t"))),  # a clause word followed by '.' is a name
        ("MERGE SPLITS db.2024_t;", MergeSplits(T("db", "2024_t"))),
        ("PURGE INDEXTABLE db.t OLDER THAN 7 DAYS DRY RUN", Purge(T("db", "t"), older_than_hours=168.0, dry_run=True)),
        ("TRUNCATE TANTIVY4SPARK TIME TRAVEL db.t DRY RUN", TruncateTimeTravel(T("db", "t"), dry_run=True)),
        ("DROP TANTIVY4SPARK PARTITIONS FROM db.t WHERE y = 1", DropPartitions(T("db", "t"), "y = 1")),
        ("PREWARM TANTIVY4SPARK CACHE db.t WHERE y = 1", PrewarmCache(T("db", "t"), "y = 1")),
        ("FLUSH TANTIVY4SPARK DISK CACHE", FlushDiskCache()),
        ("DESCRIBE TANTIVY4SPARK DISK CACHE", DescribeDiskCache()),
        ("DELETE FROM TANTIVY4SPARK db.t WHERE id = 3", Delete(T("db", "t"), "id = 3")),
        ("CONVERT TANTIVY4SPARK TABLE t DRY RUN", Convert(T("t"), dry_run=True)),
        (
            "BUILD TANTIVY4SPARK COMPANION FOR DELTA '/src' AT LOCATION '/idx'",
            BuildCompanion("delta", "/src", "/idx"),
        ),
    ],
)
def test_reference_keyword_and_table_names(text, expected):
    assert parse_command(text) == expected


def test_table_name_text():
    assert str(T("spark_catalog", "db", "t")) == "spark_catalog.db.t"
    assert str(T("my db", "t`1")) == "`my db`.`t``1`"


@pytest.mark.parametrize(
    "text",
    [
        # the reference fixes these keywords: PURGE INDEXTABLE, REPAIR INDEXFILES
        "REPAIR TANTIVY4SPARK TRANSACTION LOG '/t/_transaction_log' AT LOCATION '/r'",
        "SELECT * FROM tantivy4spark",
    ],
)
def test_tantivy4spark_where_the_reference_does_not_take_it(text):
    assert parse_command(text) is None


# ---- the registry: what every front end reads ----------------------------------------------------


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_every_row_is_complete(op):
    """Each row's command class loads and fits what the front ends ask of it: its CLI arguments and
    table function arguments are its fields, its SQL head claims a text, its result is a Record."""
    import dataclasses

    from indextables_spark.results.record import Record
    from indextables_spark.frontends.sql_parser import is_command

    command = op.load()
    fields = [f.name for f in dataclasses.fields(command)]
    assert issubclass(command.result, Record) and operation_of(command) is op
    if op.cli:
        assert {a.dest for a in op.cli.args} <= set(fields)
    if op.function:
        assert list(signature(command).parameters) == fields and op.function.startswith("indextables_")
    if op.sql:
        assert is_command(" ".join(w.split("|")[0] for w in op.sql.head.split()))
        assert callable(getattr(command, "parse"))
    names = [o.name for o in OPERATIONS]
    assert names.count(op.name) == 1
