"""The package's layout rules (docs/architecture.md), checked on the source: module sizes, one LRU,
the layer order, and pyspark kept inside spark/."""

from __future__ import annotations

import ast
import os
import re

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "indextables_spark")
MAX_LINES = 500

# Layers, lowest first: a module may import (at any level, inside functions too) only modules of its
# own layer or of lower ones. The first matching prefix gives a module's layer (docs/architecture.md).
LAYERS = [
    ("errors", 0),
    ("results", 0),
    ("util", 0),
    ("config", 1),
    ("core.schema", 2),
    ("expr", 3),
    ("core.storage", 4),
    # core/log's sub-packages, one way: what the log records, delete logs, the V4 state's files,
    # reading the table at a version, commits, maintenance
    ("core.log.model", 5),
    ("core.log.deletes", 6),
    ("core.log.state", 7),
    ("core.log.read", 8),
    ("core.log.commit", 9),
    ("core.log.maintenance", 10),
    ("core.log", 5),
    # core/split's sub-packages, one way: the split format, writing splits, the reference's
    # splits, the caches, reading, aggregations
    ("core.split.format", 11),
    ("core.split.write", 12),
    ("core.split.reference", 13),
    ("core.split.cache", 14),
    ("core.split.read", 15),
    ("core.split.aggregate", 16),
    ("core.split", 11),
    ("core", 4),
    ("ops", 17),
    ("api", 18),
    ("frontends.cli", 21),
    ("frontends", 19),
    ("spark", 20),
]


def modules() -> dict[str, str]:
    out = {}
    for d, _, files in os.walk(PKG):
        if "__pycache__" in d:
            continue
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, PKG)[:-3].replace(os.sep, ".")
                out[rel.removesuffix("__init__").rstrip(".")] = path
    return out


def imports_of(path: str) -> set[str]:
    """Package modules a module imports, relative to the package (`core.log.model.actions`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("indextables_spark"):
            base = node.module.removeprefix("indextables_spark").lstrip(".")
            found.add(base)
            found.update(f"{base}.{a.name}".lstrip(".") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("indextables_spark").lstrip(".")
                for a in node.names
                if a.name.startswith("indextables_spark.")
            )
    return found


def layer(module: str) -> int | None:
    for prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return None


def test_every_module_has_a_layer():
    mods = [m for m in modules() if m]
    assert [m for m in mods if layer(m) is None] == []


def test_imports_go_down_the_layers():
    mods = modules()
    wrong = []
    for mod, path in mods.items():
        if not mod:
            continue  # the package root re-exports names lazily from every layer
        for target in imports_of(path):
            if target in mods and target and layer(target) > layer(mod):
                wrong.append(f"{mod} -> {target}")
    assert wrong == []


def test_no_import_cycles():
    mods = modules()
    graph = {m: {t for t in imports_of(p) if t in mods and t and t != m} for m, p in mods.items() if m}
    seen: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for t in sorted(graph[m]):
            if seen.get(t) == 1:
                cycles.append(path[path.index(t) :] + [t])
            elif t not in seen:
                visit(t, path + [t])
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [m])
    assert cycles == []


def test_pyspark_only_in_spark_at_module_level():
    leaks = []
    for mod, path in modules().items():
        if mod == "spark" or mod.startswith("spark."):
            continue
        for node in ast.parse(open(path).read()).body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.split(".")[0] == "pyspark" for n in names):
                leaks.append(mod)
    assert leaks == []


def test_modules_stay_small_or_say_why():
    """A module over 500 lines says at its top (docstring or first comments) why it is one module."""
    too_long = []
    for mod, path in modules().items():
        lines = open(path).read().splitlines()
        if len(lines) > MAX_LINES and not re.search(r"\b500 lines\b", "\n".join(lines[:25])):
            too_long.append(f"{mod}: {len(lines)} lines")
    assert too_long == []


def test_one_lru():
    """Per-process caches use util/lru.py's LRU; nothing else keeps its own OrderedDict."""
    owners = [mod for mod, path in modules().items() if "OrderedDict" in open(path).read()]
    assert owners == ["util.lru"]


def test_function_level_imports_say_why():
    """An import inside a function is there to keep a module's import cheap (a heavy library, pyspark)
    or for a reason of its own, and says so in a comment on its lines or the line above."""
    silent = []
    for mod, path in modules().items():
        lines = open(path).read().splitlines()
        for func in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    here = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                    if "#" not in here and not lines[node.lineno - 2].strip().startswith("#"):
                        silent.append(f"{mod}:{node.lineno}")
    assert sorted(set(silent)) == []
