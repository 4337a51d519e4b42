"""The two tiers (tests/tiers.py) split the suite: every test is in exactly one, selected by the
marker expressions the Makefile runs them with; and every prefix the tier list names still
names a test (a renamed file would otherwise silently move its tests to the fast tier). The
integration tier's pytest-xdist groups reach the scheduler: each group runs in one process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tiers import INTEGRATION_TESTS

ROOT = Path(__file__).resolve().parents[1]


def make_variable(name: str) -> str:
    """The value of `NAME := value` in the Makefile."""
    m = re.search(rf"^{name}\s*:?=\s*(.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert m is not None, f"the Makefile sets no {name}"
    return m.group(1).strip()


def collected(*args: str) -> set[str]:
    """Node ids pytest collects from tests/ (tests/smoke is the smoke steps' own) with `args`."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--ignore=tests/smoke"]
        + list(args)
        + ["tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 5), proc.stdout[-3000:] + proc.stderr[-3000:]  # 5: none selected
    return {line for line in proc.stdout.splitlines() if "::" in line}


def test_every_test_is_in_exactly_one_tier():
    fast_expr, integration_expr = make_variable("FAST_TIER"), make_variable("INTEGRATION_TIER")
    everything = collected()
    fast = collected("-m", fast_expr)
    integration = collected("-m", integration_expr)
    assert len(everything) > 1000 and fast and integration
    assert not fast & integration, sorted(fast & integration)[:20]
    assert fast | integration == everything, sorted(everything - fast - integration)[:20]
    for prefix in INTEGRATION_TESTS:
        assert any(n.startswith(prefix) for n in integration), f"tests/tiers.py names {prefix}, which names no test"


# Skips every test before its fixtures are set up (no server starts) and names the process it ran in.
PROBE = """
import os
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    pytest.skip("ran in " + os.environ["PYTEST_XDIST_WORKER"] + " as " + item.nodeid)
"""


def test_integration_groups_each_run_in_one_process(tmp_path):
    """`--dist loadgroup` sends each tests/tiers.py group whole to one process. It reads the
    xdist_group marks that tests/conftest.py adds (so that hook must run before pytest-xdist's) and
    passes them on as a `@group` suffix of the node id (which pytest 9.2 no longer reads: pyproject.toml
    pins 9.1); when either breaks, nothing fails but every test becomes a group of its own."""
    (tmp_path / "group_probe.py").write_text(PROBE)
    files = ["tests/test_vector_search.py", "tests/test_spark_connect_harness.py", "tests/test_spark_streaming.py"]
    cmd = [sys.executable, "-m", "pytest", "-p", "group_probe", "-p", "no:cacheprovider", "-m", "integration"]
    cmd += ["-n", "2", "--dist", "loadgroup", "-rs", *files]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    ran = {m[2]: m[1] for m in re.finditer(r"ran in (gw\d+) as (.+?)\s*$", proc.stdout, re.M)}
    assert ran, proc.stdout[-3000:] + proc.stderr[-3000:]
    by_group: dict[str, set[str]] = {}
    for nodeid, worker in ran.items():
        _, sep, group = nodeid.rpartition("@")
        assert sep, f"{nodeid}: no group in its node id"
        by_group.setdefault(group, set()).add(worker)
    assert set(by_group) == {"spark connect server", "standalone cluster", "tests/test_spark_streaming.py"}, by_group
    assert all(len(workers) == 1 for workers in by_group.values()), by_group
    connect = {n.split("::")[0] for n in ran if n.endswith("@spark connect server")}
    assert connect == {"tests/test_vector_search.py", "tests/test_spark_connect_harness.py"}
