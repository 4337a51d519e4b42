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
    # ops/'s sub-packages, one way: the registry (ops/registry.py, every front end's rows; with
    # ops/command.py, what a command is), writing rows, the companion, the table's maintenance, its
    # listings, the processes' caches and reports
    ("ops.registry", 17),
    ("ops.write", 18),
    ("ops.companion", 19),
    ("ops.maintenance", 20),
    ("ops.inspect", 21),
    ("ops.cluster", 22),
    ("ops", 17),
    ("api", 23),
    ("frontends.cli", 26),
    ("frontends", 24),
    ("spark", 25),
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


# ---- prose about the layers ----------------------------------------------------------------------

# A layer named in a comment or docstring: a folder or module path of the package (`ops/`,
# `core/split/read`, `ops/registry.py`, `errors.py`), a bare folder name that is no English word,
# or "this module" (the module the text is in). Other words are never read as layers.
_NAME = re.compile(r"(?<![\w./-])(this module|[a-z_]+(?:/[a-z_]+)*(?:/|\.py)?)(?![\w/-]|\.\w)")
_BARE = {"expr", "ops", "api", "frontends", "util"}
_RELATION = re.compile(r"\b(above|below)\b")
_NEGATION = re.compile(r"\b(not|never|no longer|nor)\b|n't\b")
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n\s*\n|:\s+")


def layer_named(token: str, own: str, mods: dict[str, str]) -> int | None:
    """The layer a token names, or None when it names none (conservatively)."""
    if token == "this module":
        return layer(own)
    folder, py = token.endswith("/"), token.endswith(".py")
    parts = token.removesuffix(".py").rstrip("/").split("/")
    if parts == ["core"] or parts[0] not in {m.split(".")[0] for m in mods if m}:
        return None  # core/ spans layers; not a folder of the package
    if len(parts) == 1 and not (folder or py) and parts[0] not in _BARE:
        return None  # `errors`, `results`, `config`, `spark` are words too
    dotted = ".".join(parts)
    if dotted not in mods:
        return None
    return layer(dotted)


def layer_contradictions(text: str, own: str, mods: dict[str, str]) -> list[str]:
    """Sentences of `text` placing a layer above or below another against LAYERS: the nearest layer
    named before "above"/"below" and the nearest after it, in one sentence without a negation."""
    wrong = []
    for sentence in _SENTENCE.split(" ".join(text.split())):
        for rel in _RELATION.finditer(sentence):
            left = [m for m in _NAME.finditer(sentence, 0, rel.start()) if layer_named(m[1], own, mods) is not None]
            right = [m for m in _NAME.finditer(sentence, rel.end()) if layer_named(m[1], own, mods) is not None]
            if not left or not right:
                continue
            a, b = left[-1], right[0]
            if _NEGATION.search(sentence, a.end(), b.start()):
                continue
            ra, rb = layer_named(a[1], own, mods), layer_named(b[1], own, mods)
            assert ra is not None and rb is not None
            if ra != rb and (ra > rb) != (rel[1] == "above"):
                wrong.append(sentence)
    return wrong


def prose_of(path: str) -> list[tuple[int, str]]:
    """The comments (consecutive lines joined) and docstrings of a module, with their first line."""
    import io
    import tokenize

    source = open(path).read()
    out: list[tuple[int, str]] = []
    last = -2
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if tok.start[0] == last + 1 and out:
                out[-1] = (out[-1][0], out[-1][1] + " " + text)
            else:
                out.append((tok.start[0], text))
            last = tok.start[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                out.append((node.body[0].lineno, doc))
    return out


def test_layer_prose_is_read_conservatively():
    mods = modules()
    assert layer_contradictions("ops/ sits above api/ (its modules run operations)", "api.table", mods)
    assert layer_contradictions("lazy: ops/ sits above this module.", "api.table", mods)
    assert layer_contradictions("core/split/read is a layer below core/log", "ops.write", mods)
    assert layer_contradictions("frontends sits below `ops/registry.py`", "ops.write", mods)
    for fine in (
        "ops/ sits below api/",
        "core/split is a layer above expr",
        "ops/ never sits above api/",
        "this module stays below reader.py",
        "spark orders NaN above every other double; see api/",
        "errors above the limit go to config",
        "the results below: see spark.sql and ops/",
    ):
        assert layer_contradictions(fine, "api.table", mods) == [], fine


def test_comments_place_the_layers_as_layers_does():
    """A comment or docstring saying a layer sits above or below another agrees with LAYERS."""
    mods = modules()
    wrong = []
    for mod, path in mods.items():
        for line, text in prose_of(path):
            wrong += [f"{mod}:{line}: {s}" for s in layer_contradictions(text, mod, mods)]
    assert wrong == []


# ---- `Any` parameters ---------------------------------------------------------------------------

# A parameter is annotated `Any` only at a real boundary; elsewhere its class (of this package, or
# pyarrow/tantivy/numpy's), a Protocol or a TypeAlias names it. Allowed everywhere: spark/ (pyspark
# objects: sessions, builders, DataFrames, UDF and UDTF arguments, duck-typed Spark filters), a
# parameter named `spark` (a session, classic or Connect) and `*args`/`**kwargs` passed on. Every
# other one is listed here, by kind of boundary, then module (under the package) and parameter names.
ANY_PARAMETERS: dict[str, dict[str, set[str]]] = {
    "a DataFrame or StreamingQuery, classic or Connect (no pyspark outside spark/)": {
        "__init__.py": {"df", "queries"},
        "config/sessions.py": {"spark_or_df"},
        "ops/maintenance/stream_watch.py": {"query"},
    },
    "pyiceberg objects (an optional dependency, imported in functions)": {
        "ops/companion/sources/iceberg_files.py": {
            "data",
            "data_file",
            "delete",
            "delete_file",
            "io",
            "partition",
            "schema",
            "snapshot",
            "table",
        },
    },
    "user data of any kind, checked by the function (rows to write, a query vector, arguments)": {
        "__init__.py": {"data"},
        "api/table.py": {"data", "limit", "vector"},
        "api/transaction.py": {"data"},
        "config/options.py": {"v"},
        "core/split/aggregate/agg_request.py": {"text", "v"},
        "core/split/aggregate/buckets.py": {"interval", "min_doc_count", "n", "offset", "text", "v", "value"},
        "core/split/read/vector/query.py": {"vector"},
        "expr/sql_condition.py": {"pattern"},
        "ops/write/write.py": {"data"},
    },
    "a value of any Spark type (a cell, a literal, a bound, a bucket key, a field's value)": {
        "core/schema/partitions.py": {"value"},
        "core/split/aggregate/agg_result.py": {"k", "key", "u", "v"},
        "core/split/aggregate/aggregate.py": {"key", "v"},
        "core/split/cache/fetch_plan.py": {"value"},
        "core/split/format/stats.py": {"hi", "lo", "v"},
        "core/split/read/skipping.py": {"v"},
        "core/split/reference/reference.py": {"v"},
        "core/split/write/documents.py": {"k", "v"},
        "expr/arrow_eval.py": {"v"},
        "expr/model.py": {"v"},
        "expr/partition_bounds.py": {"value"},
        "expr/partition_filter.py": {"value"},
        "expr/partition_values.py": {"value"},
        "expr/values.py": {"v"},
        "expr/where.py": {"v", "value"},
        "frontends/cli_output.py": {"o", "v"},
        "ops/companion/sources/iceberg.py": {"value"},
        "ops/companion/sources/snapshot.py": {"value"},
        "results/record.py": {"v", "value"},
    },
    "JSON values (log actions, footers, Avro and schema JSON, the query grammar's tree, partials)": {
        "core/log/model/actions.py": {"v"},
        "core/log/model/doc_mapping.py": {"value"},
        "core/log/state/avro_codec.py": {"avro_type"},
        "core/log/state/avro_container.py": {"schema"},
        "core/split/aggregate/aggregate.py": {"p", "r"},
        "core/split/format/bundle.py": {"d"},
        "core/split/format/companion.py": {"d"},
        "core/split/format/nested_names.py": {"d", "v"},
        "expr/fulltext.py": {"ast", "b", "node"},
        "frontends/cli_output.py": {"raw"},
        "ops/companion/nested_fields.py": {"v"},
        "ops/write/write_schema.py": {"t"},
    },
    "a dataclass field's default of any type, a type hint (results/record.py builds result classes)": {
        "results/record.py": {"default", "hint"},
    },
}


def _is_any(annotation: ast.expr | None) -> bool:
    """`Any`, `typing.Any`, `Any | None` or `Optional[Any]` (string annotations read the same)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any" and isinstance(annotation.value, ast.Name) and annotation.value.id == "typing"
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = (annotation.left, annotation.right)
        return any(_is_any(a) for a in sides) and any(isinstance(a, ast.Constant) and a.value is None for a in sides)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        return annotation.value.id == "Optional" and _is_any(annotation.slice)
    return False


def any_parameters() -> set[tuple[str, str]]:
    """(module under the package, parameter name) of every `Any` parameter the rules above do not allow."""
    found = set()
    for path in modules().values():
        rel = os.path.relpath(path, PKG).replace(os.sep, "/")
        if rel.startswith("spark/"):
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in a.posonlyargs + a.args + a.kwonlyargs:  # (*args, **kwargs: passed on)
                    if arg.arg != "spark" and _is_any(arg.annotation):
                        found.add((rel, arg.arg))
    return found


def test_any_parameters_only_at_boundaries():
    """A new `Any` parameter names its class (or joins ANY_PARAMETERS with its kind); a listed one
    that is typed now leaves the list."""
    allowed = {(mod, name) for kind in ANY_PARAMETERS.values() for mod, names in kind.items() for name in names}
    found = any_parameters()
    assert sorted(found - allowed) == [], "Any parameters whose class exists (name it, or list the boundary)"
    assert sorted(allowed - found) == [], "listed in ANY_PARAMETERS but no longer Any"


def test_any_parameters_are_found():
    def annotation(source: str) -> ast.expr | None:
        statement = ast.parse(source).body[0]
        assert isinstance(statement, ast.AnnAssign)
        return statement.annotation

    for source in ("x: Any", "x: typing.Any", "x: Any | None", "x: None | Any", "x: Optional[Any]", "x: 'Any | None'"):
        assert _is_any(annotation(source)), source
    for source in ("x: dict[str, Any]", "x: Any | int", "x: object", "x: 'Anything'"):
        assert not _is_any(annotation(source)), source


# ---- docs/architecture.md's map -----------------------------------------------------------------

ARCHITECTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "architecture.md")


def map_sections() -> dict[str, str]:
    """The map's text per folder ("" the package, "core/split/read/", …), nested folders' lines included."""
    text = open(ARCHITECTURE, encoding="utf-8").read()
    block = re.search(r"```\n(src/indextables_spark/\n.*?)```", text, re.DOTALL)
    assert block, "docs/architecture.md has no map of src/indextables_spark/"
    sections: dict[str, str] = {"": ""}
    stack: list[tuple[int, str]] = []
    for line in block[1].splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        entry = re.match(r" +([\w./]+/)(?=\s|$)", line)
        if entry and indent < 10:  # a folder's first line (its description continues further in)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, (stack[-1][1] if stack else "") + entry[1]))
        for folder in {"", *(p for _, p in stack)}:
            sections[folder] = sections.get(folder, "") + line + "\n"
    return sections


def names(word: str, text: str) -> bool:
    """`text` names `word`: as a word, or through a pattern such as `state_*`."""
    if re.search(r"(?<![\w])" + re.escape(word) + r"(?![\w])", text):
        return True
    return any(word.startswith(prefix) for prefix in re.findall(r"(?<![\w])(\w+)\*", text))


def test_the_architecture_map_names_every_module():
    """Each module's stem (a package's: its folder's name) is in the map's text of the nearest folder
    the map has."""
    sections = map_sections()
    missing = []
    for mod, path in modules().items():
        if not mod:
            continue
        parts = mod.split(".")
        word = parts[-1]
        folder = "/".join(parts[:-1]) + "/" if len(parts) > 1 else ""
        while folder not in sections:
            folder = folder.rstrip("/").rpartition("/")[0] + "/" if "/" in folder.rstrip("/") else ""
        if not names(word, sections[folder]):
            package = " (package)" if os.path.basename(path) == "__init__.py" else ""
            missing.append(f"{mod}{package}: not in the map's {folder or 'top'}")
    assert missing == []
