"""The two tiers (tests/tiers.py) split the suite: every test is in exactly one, selected by the
marker expressions the Makefile runs them with; and every prefix the tier list names still
names a test (a renamed file would otherwise silently move its tests to the fast tier)."""

from __future__ import annotations

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
