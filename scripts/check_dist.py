#!/usr/bin/env python3
"""Checks what `make dist` built (after `twine check`): one wheel and one sdist of the version
pyproject.toml and `indextables_spark.__version__` declare; the wheel holds every file under src/
(the packages, py.typed; no __pycache__) and the license; the sdist holds those, what building
needs (pyproject.toml, README.md, LICENSE), CHANGELOG.md, and no tests.

    python scripts/check_dist.py [DIST_DIR]   (default: dist)
"""

from __future__ import annotations

import re
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what the sdist holds besides src/: building needs the first three; the rest setuptools writes
SDIST_TOP = {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "PKG-INFO", "setup.cfg"}


def source_files() -> set[str]:
    """Every file under src/ a build packages, relative to src/."""
    src = ROOT / "src"
    return {
        p.relative_to(src).as_posix()
        for p in src.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not any(x.endswith(".egg-info") for x in p.parts)
    }


def main(dist: Path) -> list[str]:
    errors: list[str] = []
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    init = (ROOT / "src/indextables_spark/__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"', init, re.MULTILINE)
    if m is None or m.group(1) != version:
        errors.append(f"indextables_spark.__version__ is {m and m.group(1)!r}, pyproject.toml says {version!r}")
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if [w.name for w in wheels] != [f"indextables_spark-{version}-py3-none-any.whl"]:
        errors.append(f"expected one wheel of {version}, found {[w.name for w in wheels]}")
    if [s.name for s in sdists] != [f"indextables_spark-{version}.tar.gz"]:
        errors.append(f"expected one sdist of {version}, found {[s.name for s in sdists]}")
    if errors:
        return errors
    src = source_files()

    with zipfile.ZipFile(wheels[0]) as z:
        names = set(z.namelist())
    info = f"indextables_spark-{version}.dist-info/"
    packaged = {n for n in names if not n.startswith(info)}
    if packaged != src:
        errors.append(f"wheel: missing {sorted(src - packaged)}, not in src/ {sorted(packaged - src)}")
    if info + "licenses/LICENSE" not in names:
        errors.append("wheel: no dist-info/licenses/LICENSE")

    top = f"indextables_spark-{version}/"
    with tarfile.open(sdists[0]) as t:
        files = {m.name.removeprefix(top) for m in t.getmembers() if m.isfile()}
    in_src = {f.removeprefix("src/") for f in files if f.startswith("src/") and ".egg-info/" not in f}
    if in_src != src:
        errors.append(f"sdist: missing {sorted(src - in_src)}, not in src/ {sorted(in_src - src)}")
    others = {f for f in files if not f.startswith("src/")}
    if others != SDIST_TOP:
        errors.append(f"sdist: missing {sorted(SDIST_TOP - others)}, unexpected {sorted(others - SDIST_TOP)}")
    if not errors:
        print(
            f"check_dist: {wheels[0].name} ({wheels[0].stat().st_size:,} bytes, {len(names)} files), "
            f"{sdists[0].name} ({sdists[0].stat().st_size:,} bytes, {len(files)} files): "
            f"{len(src)} files of src/ in each"
        )
    return errors


if __name__ == "__main__":
    problems = main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "dist"))
    for p in problems:
        print(f"check_dist: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)
