"""The source distribution, installed as pip installs it where no wheel fits: `pip install` of the
sdist in a fresh venv builds the wheel from source (setuptools from the index, in an isolated build
environment) and installs it with its dependencies; the README's Quickstart then runs with that
venv's Python, in an empty directory, and prints what its comments state.

`make smoke-sdist` (part of `make smoke`) runs this file with the main venv's Python and
INDEXTABLES_SDIST naming dist/'s sdist; without it, the test builds an sdist of the tree first
(`python -m build --sdist`). The smoke venvs do not run it (they would each build another venv).
Downloads are bounded: the dependencies are held to constraints.txt, and pyspark to the version
the running Python has, so pip takes them from its cache when it has them.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme_example import run_readme_example

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
ENV_SDIST = "INDEXTABLES_SDIST"


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, f"{cmd} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture
def sdist(tmp_path) -> Path:
    if os.environ.get(ENV_SDIST):
        path = Path(os.environ[ENV_SDIST])
        assert path.is_file() and path.name.endswith(".tar.gz"), f"{ENV_SDIST}={path} is not an sdist"
        return path
    run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"), str(ROOT)])
    (path,) = (tmp_path / "dist").glob("*.tar.gz")
    return path


def test_sdist_installs_in_a_fresh_venv_and_runs_the_quickstart(sdist, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    pins = tmp_path / "pyspark-constraint.txt"
    pins.write_text(f"pyspark=={importlib.metadata.version('pyspark')}\n", encoding="utf-8")
    # no PYTHONPATH: the package must come from the venv, not from a tree on the path
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [python, "-m", "pip", "install", "--quiet", str(sdist), "-c", str(ROOT / "constraints.txt"), "-c", str(pins)]
    run(cmd, cwd=tmp_path, env=env)

    work = tmp_path / "work"
    work.mkdir()
    # what the index page shows is what got installed: the version, the license, the typing marker
    probe = (
        "import importlib.metadata as m, importlib.resources as r, indextables_spark as it;"
        "d = m.distribution('indextables_spark');"
        "print(d.version, it.__version__, d.metadata['License-Expression'], it.__file__,"
        " r.files('indextables_spark').joinpath('py.typed').is_file(), sep='\\n')"
    )
    out = run([python, "-c", probe], cwd=work, env=env).stdout.splitlines()
    version, module_version, license_expr, module_file, typed = out
    assert version == module_version, f"the sdist installs {version}, indextables_spark.__version__ is {module_version}"
    assert sdist.name == f"indextables_spark-{version}.tar.gz"
    assert license_expr == "Apache-2.0"
    assert Path(module_file).is_relative_to(venv), f"indextables_spark came from {module_file}, not the venv"
    assert typed == "True"
    assert (venv / "bin" / "indextables").is_file(), "the indextables command was not installed"

    run_readme_example(python, work)
