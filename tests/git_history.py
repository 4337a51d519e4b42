"""The code of an older commit of this repository, from git history, for tests that run it in a
process of its own (tests/test_deletes.py, tests/test_old_tables.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def older_source(commit: str, root: Path) -> Path:
    """The commit's `src` extracted under `root` (`git archive`); the test is skipped when the
    clone lacks the commit (a shallow clone)."""
    found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone's history")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root / "src"
