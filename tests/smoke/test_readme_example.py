"""The README's first Python example (its Quickstart), run as a user runs it: saved as a script and
started with this venv's Python in an empty directory. `make smoke` runs it on every supported
Python and on the oldest pyspark, so a README edit that breaks the example, or an install that
cannot run it, fails here.

The example states its output: the comment after each `print(...)` is the line it prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"


def first_python_block(markdown: str) -> str:
    m = re.search(r"^```python\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)
    if m is None:
        raise AssertionError(f"{README} has no ```python block")
    return m.group(1)


def stated_output(code: str) -> list[str]:
    """The trailing comment of each line that starts with `print(`: the output the README shows."""
    out = []
    for line in code.splitlines():
        m = re.match(r"print\(.*\)\s+#\s*(.+)$", line)
        if m:
            out.append(m.group(1).strip())
    return out


def test_stated_output_is_read_from_print_comments():
    code = 'x = 1  # not output\nprint(x)  # 1\nprint("a  # b")  # a  # b\n'
    assert stated_output(code) == ["1", "a  # b"]


def run_readme_example(python: str, cwd: Path) -> None:
    """Runs the README's first example as a script in `cwd` with `python` (Spark's workers too) and
    checks that it prints what its comments state. tests/smoke/test_sdist_install.py runs it too."""
    code = first_python_block(README.read_text(encoding="utf-8"))
    expected = stated_output(code)
    assert expected, "the README's first example states no output (a `print(...)  # output` line)"
    script = cwd / "readme_example.py"
    script.write_text(code, encoding="utf-8")
    # what an activated venv gives a user: Spark's Python workers run this interpreter too (and the
    # package comes from its install, not from a PYTHONPATH)
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the README example failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}"
    assert proc.stdout.splitlines() == expected, proc.stderr[-3000:]
    # `it.register` replaces the source Spark found by itself without a WARN per name
    # (spark/source_registration.py)
    assert "WARN DataSourceManager" not in proc.stderr, proc.stderr[-3000:]


def test_readme_first_example_runs(tmp_path):
    run_readme_example(sys.executable, tmp_path)
