"""`spark.sql` bridge for temporary views over indextables tables (installed by register()).

`CREATE TEMPORARY VIEW v USING indextables OPTIONS (path '…')` made by Spark itself pins one planned
read of the table (see register.py). We create such views ourselves instead, from a guarded read
that keeps the virtual `_indexall` column (so `WHERE _indexall = 'body:spark'` passes a full-text
query), and we carry out `INSERT INTO|OVERWRITE v …` on them as indextables writes.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

from indextables_spark.api.table import IndexTable
from indextables_spark.config.options import pack_secrets, session_options
from indextables_spark.config.sessions import functions
from indextables_spark.errors import InvalidOptionError, SchemaMismatchError
from indextables_spark.spark.guard import VIRTUAL_COLUMNS, guarded
from indextables_spark.spark.patching import own

_IDENT = r"(?:`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)"
_CREATE = re.compile(
    rf"^\s*CREATE\s+(?P<replace>OR\s+REPLACE\s+)?(?:GLOBAL\s+)?TEMP(?:ORARY)?\s+VIEW\s+"
    rf"(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_IDENT})\s+USING\s+(?P<fmt>[A-Za-z0-9_.]+)"
    rf"(?:\s+OPTIONS\s*\((?P<opts>.*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_INSERT = re.compile(
    rf"^\s*INSERT\s+(?P<mode>INTO|OVERWRITE)\s+(?:TABLE\s+)?(?P<name>{_IDENT})\s*(?P<rest>.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True)
class ViewSource:
    path: str
    options: dict[str, str]


_views: dict[str, ViewSource] = {}
_lock = threading.Lock()


def _unquote_ident(name: str) -> str:
    return name[1:-1] if name.startswith("`") else name


def parse_options(text: str | None) -> dict[str, str]:
    """`key 'value', 'k2' = "v2", k.3 true` → dict (Spark's OPTIONS clause)."""
    if not text or not text.strip():
        return {}
    token = re.compile(r"""\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`([^`]*)`|([A-Za-z0-9_.\-]+)|(=)|(,))""")
    pos = 0
    items: list[list[str]] = []
    current: list[str] = []
    while pos < len(text):
        m = token.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise InvalidOptionError(f"cannot parse OPTIONS near position {pos}: {text[pos : pos + 30]!r}")
        pos = m.end()
        s1, s2, s3, bare, eq, comma = m.groups()
        if comma:
            items.append(current)
            current = []
        elif eq:
            continue
        else:
            value = next(v for v in (s1, s2, s3, bare) if v is not None)
            current.append(value.replace("\\'", "'").replace('\\"', '"'))
    if current:
        items.append(current)
    out: dict[str, str] = {}
    for item in items:
        if len(item) != 2:
            raise InvalidOptionError(f"OPTIONS entries must be `key value`, got {' '.join(item)!r}")
        out[item[0]] = item[1]
    return out


def try_handle(spark: Any, text: str, is_ours: Callable[[str | None], bool]) -> Any:
    """Handle the statement if it is about indextables views; None to let Spark run it."""
    m = _CREATE.match(text)
    if m and is_ours(m.group("fmt")):
        return _create_view(spark, m)
    _refuse_view_options(text)
    m = _INSERT.match(text)
    if m:
        src = view_source(spark, m.group("name"))
        if src is not None:
            name = _unquote_ident(m.group("name")).lower()
            return _insert(spark, src, name, m.group("mode").upper() == "OVERWRITE", m.group("rest"))
    return None


# After a table reference, these words start the next clause: the reference has no alias.
_CLAUSE_WORDS = frozenset(
    """where join inner left right full cross semi anti on using group order having limit
union intersect except minus window cluster distribute sort lateral natural pivot unpivot tablesample
offset qualify""".split()
)


def split_view_references(spark: Any, text: str) -> str:
    """Give every `FROM|JOIN <indextables view>` of a statement its own relation when a view is
    referenced more than once.

    Spark 4.3 keeps a Python data source's planned read (pushed filters, partitions) on the
    relation; two scans of one relation in one query (self-join, self-union, ...) both run the
    plan pushed last, i.e. with the other scan's filters: wrong rows. Each reference after the
    first becomes a fresh view over a new read of the same table, aliased with the view's name so
    `v.col` still resolves.
    """
    from indextables_spark.spark.table_functions import (
        skip_quoted,  # lazy: keeps `import indextables_spark.spark.sql_bridge` free of pyarrow
    )

    with _lock:
        views = dict(_views)
    if not views or not any(n in text.lower() for n in views):
        return text
    refs: list[tuple[int, int, str]] = []  # (start, end, view name)
    i, prev_word = 0, ""
    while i < len(text):
        j = skip_quoted(text, i) if text[i] != "`" else i
        if j != i:
            i, prev_word = j, ""
            continue
        m = re.compile(_IDENT).match(text, i) if (text[i].isalpha() or text[i] in "_`") else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_.")):
            word = _unquote_ident(m.group(0))
            after = text[m.end() :].lstrip()
            if prev_word in ("from", "join") and word.lower() in views and not after.startswith((".", "(")):
                refs.append((i, m.end(), word.lower()))
            prev_word = word.lower()
            i = m.end()
            continue
        if not text[i].isspace():
            prev_word = ""
        i += 1
    counts: dict[str, int] = {}
    for _, _, v in refs:
        counts[v] = counts.get(v, 0) + 1
    if all(c < 2 for c in counts.values()):
        return text

    out: list[str] = []
    last = 0
    seen: dict[str, int] = {}
    for start, end, v in refs:
        if counts[v] < 2:
            continue
        seen[v] = seen.get(v, 0) + 1
        fresh = f"__indextables_{v}_ref{seen[v]}"
        guarded(raw_load(spark, views[v].options)).createOrReplaceTempView(fresh)
        nxt = re.match(r"\s*(\w+)", text[end:])
        has_alias = nxt is not None and nxt.group(1).lower() not in _CLAUSE_WORDS
        out.append(text[last:start] + f"`{fresh}`" + ("" if has_alias else f" AS `{v}`"))
        last = end
    out.append(text[last:])
    return "".join(out)


def _refuse_view_options(text: str) -> None:
    """Spark silently ignores `FROM view WITH (options)` on a view: refuse instead of a wrong answer."""
    with _lock:
        names = list(_views)
    for name in names:
        if re.search(rf"(?<![A-Za-z0-9_`]){re.escape(name)}`?\s+WITH\s*\(", text, re.IGNORECASE):
            raise InvalidOptionError(
                f"options on the indextables view {name} (`{name} WITH (...)`) would be ignored by Spark; "
                f"pass a full-text query with `WHERE _indexall = '<query>'`, or read with "
                f"spark.read.format('indextables').option(...)"
            )


def _is_temp_view(spark: Any, name: str) -> bool:
    # getTable resolves temporary views first (~5 ms; listing every table costs ~150 ms)
    if not spark.catalog.tableExists(name):
        return False
    return bool(spark.catalog.getTable(name).isTemporary)


def _create_view(spark: Any, m: re.Match[str]) -> Any:
    name = _unquote_ident(m.group("name"))
    opts = parse_options(m.group("opts"))
    path = opts.get("path") or next((v for k, v in opts.items() if k.lower() == "path"), None)
    if not path:
        raise InvalidOptionError(f"CREATE TEMPORARY VIEW {name} USING indextables needs OPTIONS (path '…')")
    if _is_temp_view(spark, name.lower()):
        if m.group("ine"):
            return spark.createDataFrame([], "x int").limit(0).select()
        if not m.group("replace"):
            raise InvalidOptionError(f"temporary view {name} already exists (use CREATE OR REPLACE)")
    ranked = sorted(k for k in opts if k.lower() in ("limit", "orderby"))
    if ranked:
        # A view cannot hold a top n: filters of later queries would land above the limit.
        raise InvalidOptionError(
            f"CREATE TEMPORARY VIEW {name}: option(s) {ranked} are not supported on views; create the view with "
            f"OPTIONS (path '…', withScore 'true') and query it with "
            f"WHERE _indexall = '<query>' ORDER BY _score DESC LIMIT n"
        )
    df = guarded(raw_load(spark, opts))
    df.createOrReplaceTempView(name)
    with _lock:
        _views[name.lower()] = ViewSource(path, opts)
    return spark.createDataFrame([], "x int").select()


def _insert(spark: Any, src: ViewSource, name: str, overwrite: bool, rest: str) -> Any:
    cols_m = re.match(r"^\((?P<cols>[^)]*)\)\s*(?P<q>.*)$", rest, re.DOTALL)
    target_cols = None
    query = rest
    if cols_m and not re.match(r"^\(\s*(SELECT|VALUES)\b", rest, re.IGNORECASE):
        target_cols = [_unquote_ident(c.strip()) for c in cols_m.group("cols").split(",") if c.strip()]
        query = cols_m.group("q")
    return insert_dataframe(spark, src, name, overwrite, spark.sql(query), target_cols)


def view_names() -> set[str]:
    """Names (lower case) of the indextables views created in this process (some may be dropped)."""
    with _lock:
        return set(_views)


def view_source(spark: Any, name: str) -> ViewSource | None:
    """The table behind one of our temporary views (None for any other name)."""
    key = _unquote_ident(name).lower()
    with _lock:
        src = _views.get(key)
    return src if src is not None and _is_temp_view(spark, key) else None


def insert_dataframe(
    spark: Any,
    src: ViewSource,
    name: str,
    overwrite: bool,
    data: Any,
    target_cols: list[str] | None = None,
    write_options: dict[str, str] | None = None,
) -> Any:
    """INSERT INTO|OVERWRITE of `data` into the view's table: columns by position (or by the
    `target_cols` list), cast to the table's types, written with `save()` (so merge-on-write runs)."""

    table = IndexTable(src.path, src.options)
    schema = table.snapshot().schema
    names = [f.name for f in schema.fields]
    virtual = [c for c in data.columns if c in VIRTUAL_COLUMNS]
    src_cols = (
        [c for c in data.columns if c not in VIRTUAL_COLUMNS]
        if len(data.columns) == len(names) + len(virtual)
        else data.columns
    )
    if target_cols is not None:
        missing = [c for c in names if c not in target_cols]
        if missing or len(target_cols) != len(src_cols):
            raise SchemaMismatchError(
                f"INSERT INTO {name}: columns {target_cols} must name every table column {names} once"
            )
        by_name = dict(zip(target_cols, src_cols))
        ordered = [by_name[c] for c in names]
    else:
        if len(src_cols) != len(names):
            raise SchemaMismatchError(
                f"INSERT INTO {name}: the query gives {len(src_cols)} columns, the table has {len(names)} {names}"
            )
        ordered = src_cols
    sf = functions(spark)
    out = data.select([sf.col(f"`{c}`").cast(f.dataType).alias(f.name) for c, f in zip(ordered, schema.fields)])
    write_opts = {**{k: v for k, v in src.options.items() if k.lower() != "path"}, **(write_options or {})}
    out.write.format("indextables").options(**write_opts).mode("overwrite" if overwrite else "append").save(src.path)
    return spark.createDataFrame([], "x int").select()


def raw_load(spark: Any, options: dict[str, Any]) -> Any:
    """An indextables read with the `_indexall` column, unguarded (for views: guard it)."""
    from indextables_spark.spark.datasource import (
        FORMAT_NAME,  # lazy: pyspark is imported only when a Spark session runs this
    )
    from indextables_spark.spark.read_options import (
        load_options,  # lazy: pyspark is imported only when a Spark session runs this
    )

    reader = spark.read
    own(type(reader), "format")(reader, FORMAT_NAME)
    set_option = own(type(reader), "option")
    # secrets under a name Spark's plans and SQL tab redact (config/options.py pack_secrets)
    for k, v in pack_secrets({**session_options(spark), **load_options(spark, options), **options}).items():
        set_option(reader, k, v)
    return own(type(reader), "load")(reader)
