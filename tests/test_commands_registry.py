"""docs/architecture.md "Adding an operation": the example module and row, added as the page says,
give the operation to every front end (SQL text, executor, CLI, table function, IndexTable.maintenance)."""

from __future__ import annotations

import json
import pathlib
import re
import sys
import textwrap
import types

import pytest

import indextables_spark as it
from indextables_spark.api import maintenance
from indextables_spark.frontends import cli
from indextables_spark.frontends.execute import execute
from indextables_spark.frontends.sql_parser import CommandSyntaxError, parse_command
from indextables_spark.ops import registry
from indextables_spark.spark.maintenance_functions import function_class

from cmd_helpers import small_splits_table

PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def page_example() -> tuple[str, str, str]:
    """The module, the row and the maintenance method of the page's section (its first three Python blocks)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Adding an operation") :]
    module, row, method = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[:3]
    return module, row, method


@pytest.fixture
def partitions_operation(monkeypatch):
    module_text, row_text, method_text = page_example()
    module = types.ModuleType("indextables_spark.ops.inspect.partitions")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(module_text, "docs/architecture.md: ops/inspect/partitions.py", "exec"), module.__dict__)
    row = eval(row_text.strip().rstrip(","), vars(registry))
    monkeypatch.setattr(registry, "OPERATIONS", (*registry.OPERATIONS, row))
    # the method, in api/maintenance.py's namespace with the result class imported at its top
    namespace = {**vars(maintenance), "PartitionRow": module.PartitionRow}
    exec(compile(textwrap.dedent(method_text), "docs/architecture.md: api/maintenance.py", "exec"), namespace)
    monkeypatch.setattr(maintenance.MaintenanceTable, row.method, namespace[row.method], raising=False)
    return module


def test_the_documented_operation_reaches_every_front_end(partitions_operation, tmp_path, capsys):
    path = str(tmp_path / "t")
    small_splits_table(path, 2)  # 3 days, 2 splits each
    want = [({"day": f"2024-01-0{d}"}, 2) for d in (1, 2, 3)]

    res = execute(parse_command(f"DESCRIBE INDEXTABLES PARTITIONS '{path}'"))
    assert res.name == "DESCRIBE PARTITIONS" and res.table.column_names == [
        "partition_values",
        "splits",
        "records",
        "bytes",
    ]
    rows = it.IndexTable(path).maintenance.describe_partitions()
    assert [(r.partition_values, r.splits) for r in rows] == want
    assert sum(r.records for r in rows) == it.IndexTable(path).count()

    assert cli.main(["describe-partitions", path, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(r["partitionValues"], r["splits"]) for r in printed] == want

    udtf = function_class(partitions_operation.DescribePartitions, {})
    assert [(r[0], r[1]) for r in udtf().eval(path=path)] == want

    with pytest.raises(
        CommandSyntaxError,
        match="expected TABLE, STATE, TRANSACTION LOG, DISK CACHE, STORAGE STATS, ENVIRONMENT, COMPONENT SIZES or PARTITIONS",
    ):
        parse_command(f"DESCRIBE INDEXTABLES PARTITION '{path}'")
