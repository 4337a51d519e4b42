"""api/maintenance.py against ops/registry.py: `t.maintenance` has one typed method per operation row
with a `method`, taking the command's fields after the table (same names, kinds, defaults and
types; a size field also takes a text such as "100M") plus `spark=` and `progress=`, and returning
what the command's `run` returns."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

from indextables_spark.api.maintenance import MaintenanceTable
from indextables_spark.ops import registry

# Methods that are this API's alone (no SQL text, command line or table function): not registry rows.
OWN = {"gc_state"}
ROWS = [op for op in registry.OPERATIONS if op.method]


def public_methods() -> set[str]:
    return {name for name, v in vars(MaintenanceTable).items() if not name.startswith("_") and callable(v)}


def test_the_methods_are_the_registry_rows():
    assert public_methods() - OWN == {op.method for op in ROWS}
    assert OWN <= public_methods()
    assert not OWN & {op.method for op in ROWS}


def test_every_method_has_a_docstring_and_takes_spark_and_progress():
    for name in public_methods():
        method = getattr(MaintenanceTable, name)
        assert (method.__doc__ or "").strip(), name
        params = list(inspect.signature(method).parameters.values())[-2:]
        assert [(p.name, p.kind, p.default) for p in params] == [
            ("spark", inspect.Parameter.KEYWORD_ONLY, None),
            ("progress", inspect.Parameter.KEYWORD_ONLY, None),
        ], name


@pytest.mark.parametrize("op", ROWS, ids=[op.method or "" for op in ROWS])
def test_method_parameters_are_the_command_fields(op: registry.Operation):
    command = op.load()
    build = getattr(command, "for_table", None)  # the table is not the command's first field
    made_by = build if build is not None else command
    want = list(inspect.signature(made_by).parameters.values())[1:]  # the table fills the first
    method = getattr(MaintenanceTable, op.method or "")
    got = list(inspect.signature(method).parameters.values())[1:-2]  # self; spark, progress
    assert [(p.name, p.kind, p.default) for p in got] == [(p.name, p.kind, p.default) for p in want]

    # (for_table names the log's class for the type checker only)
    log_class = typing.get_type_hints(MaintenanceTable.__init__)["log"]
    want_types = typing.get_type_hints(made_by, localns={"TransactionLog": log_class})
    got_types = typing.get_type_hints(method)
    sizes = (
        set()
        if build is not None
        else {f.name for f in dataclasses.fields(command) if f.metadata.get("unit") == "size"}  # type: ignore[arg-type]
    )
    for p in want:
        expected = want_types[p.name] | str if p.name in sizes else want_types[p.name]
        assert got_types[p.name] == expected, p.name
    assert got_types["return"] == typing.get_type_hints(command.run)["return"]
