"""BUILD INDEXTABLES COMPANION's column selection: `INCLUDE COLUMNS (…)` / `EXCLUDE COLUMNS (…)`
and `HASHED FASTFIELDS INCLUDE|EXCLUDE (…)`, parsed and checked as IndexTables4Spark does
(SyncToExternalCommand.scala: the rules of docs/reference/sql-commands.md, "Selective Column
Indexing").

A column left out of the index is kept as a stored-only column (`indexing.storeonly`): its values
are still read from the source's Parquet files, and filters on it are decided on those rows (the
reference defers them to Spark); it cannot be searched or aggregated from the index.

HASHED FASTFIELDS chooses, in the reference, which string columns get a `_phash_<col>` u64 fast
field (xxHash64 of the value) so that its HYBRID fast-field mode can aggregate them without
reading Parquet. Our companion splits keep every string column's fast field in the split (the
aggregations it serves run on them), so the clause is checked and recorded but changes no split.

The selection is recorded in the companion table's metadata and reused by later builds that do
not give the clause (the reference's `indextables.companion.includeColumns` & co., under our
`spark.indextables.` prefix).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from indextables_spark.config.options import PREFIX
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from indextables_spark.ops.command import CommandParser

log = logging.getLogger(__name__)

CONFIG_INCLUDE = PREFIX + "companion.includeColumns"
CONFIG_EXCLUDE = PREFIX + "companion.excludeColumns"
CONFIG_HASHED_INCLUDE = PREFIX + "companion.hashedFastfieldsInclude"
CONFIG_HASHED_EXCLUDE = PREFIX + "companion.hashedFastfieldsExclude"
_SHOWN = 20  # columns listed in an error (the reference's "showing 20 of N")


@dataclass(frozen=True)
class ColumnSelection:
    """The clauses as given (column names as written; empty: not given)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    hashed_include: tuple[str, ...] = ()
    hashed_exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.include and self.exclude:
            raise InvalidOptionError("INCLUDE COLUMNS and EXCLUDE COLUMNS are mutually exclusive")
        if self.hashed_include and self.hashed_exclude:
            raise InvalidOptionError("HASHED FASTFIELDS takes INCLUDE or EXCLUDE, not both")


@dataclass(frozen=True)
class ResolvedSelection:
    """What a build indexes: the data columns kept out of the index, and what to record."""

    skipped: tuple[str, ...]  # data columns not indexed (stored only), schema spelling
    configuration: dict[str, str]  # recorded in the companion table's metadata


def _csv(config: Mapping[str, str], key: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in (config.get(key) or "").split(",") if c.strip())


def _duplicates(cols: Sequence[str], clause: str) -> None:
    seen: set[str] = set()
    for c in cols:
        if c.lower() in seen:
            raise InvalidOptionError(f"Duplicate column '{c}' in {clause}.")
        seen.add(c.lower())


def _available(data: Sequence[str]) -> str:
    shown = ", ".join(data[:_SHOWN])
    return shown if len(data) <= _SHOWN else f"{shown}, ... (showing {_SHOWN} of {len(data)})"


def resolve(
    selection: ColumnSelection,
    schema_json: Mapping[str, Any],
    partition_columns: Sequence[str],
    indexing: Mapping[str, str] | None,
    stored: Mapping[str, str] | None,
) -> ResolvedSelection:
    """Check the clauses against the source schema (and INDEXING MODES), fall back to the
    selection a previous build recorded (`stored`: the companion table's configuration, None
    for a new table), and say which columns stay out of the index."""
    fields = {f["name"].lower(): f for f in schema_json.get("fields") or []}
    parts = {p.lower() for p in partition_columns}
    data = [f["name"] for f in schema_json.get("fields") or [] if f["name"].lower() not in parts]
    config = stored or {}
    include, exclude = selection.include, selection.exclude
    if not include and not exclude and stored is not None:
        # restored from a previous build: columns dropped from the source since are skipped
        include = tuple(c for c in _csv(config, CONFIG_INCLUDE) if c.lower() in fields)
        exclude = tuple(c for c in _csv(config, CONFIG_EXCLUDE) if c.lower() in fields)
        if _csv(config, CONFIG_INCLUDE) and not include:
            raise InvalidOptionError(
                f"All stored INCLUDE COLUMNS ({', '.join(_csv(config, CONFIG_INCLUDE))}) have been dropped from the "
                f"source schema. Cannot continue incremental sync — drop the companion index and rebuild with a new "
                f"INCLUDE COLUMNS clause."
            )
    elif stored is not None:
        for clause, given, key in (("INCLUDE", include, CONFIG_INCLUDE), ("EXCLUDE", exclude, CONFIG_EXCLUDE)):
            before = {c.lower() for c in _csv(config, key)}
            if given and before and before != {c.lower() for c in given}:
                log.warning(
                    "%s COLUMNS changed since last sync. Old splits may have different indexed columns.", clause
                )
    _duplicates(include, "INCLUDE COLUMNS")
    _duplicates(exclude, "EXCLUDE COLUMNS")
    for clause, cols in (("INCLUDE COLUMNS", include), ("EXCLUDE COLUMNS", exclude)):
        for c in cols:
            if c.lower() in parts:
                log.warning(
                    "Column '%s' is a partition column — partition columns are indexed automatically. Ignoring in %s.",
                    c,
                    clause,
                )
    inc = [c for c in include if c.lower() not in parts]
    exc = [c for c in exclude if c.lower() not in parts]
    if selection.include and not inc:
        raise InvalidOptionError(
            "INCLUDE COLUMNS contains only partition columns. Partition columns are always indexed — specify at "
            "least one non-partition column."
        )
    for clause, named in (("INCLUDE COLUMNS", inc), ("EXCLUDE COLUMNS", exc)):
        for c in named:
            if c.lower() not in fields:
                raise InvalidOptionError(
                    f"Column '{c}' in {clause} does not exist in source schema. Available columns: {_available(data)}"
                )
    inc_l, exc_l = {c.lower() for c in inc}, {c.lower() for c in exc}
    skipped = tuple(c for c in data if (inc_l and c.lower() not in inc_l) or c.lower() in exc_l)
    if (inc or exc) and len(skipped) == len(data):
        raise InvalidOptionError(
            "INCLUDE/EXCLUDE COLUMNS results in zero indexed columns. At least one non-partition column must be indexed."
        )
    _check_modes(indexing or {}, inc, exc)
    hashed_inc, hashed_exc = selection.hashed_include, selection.hashed_exclude
    if not hashed_inc and not hashed_exc and stored is not None:
        hashed_inc, hashed_exc = _csv(config, CONFIG_HASHED_INCLUDE), _csv(config, CONFIG_HASHED_EXCLUDE)
    _check_hashed(hashed_inc + hashed_exc, fields, inc, exc, indexing or {})
    out = {
        CONFIG_INCLUDE: ",".join(inc),
        CONFIG_EXCLUDE: ",".join(exc),
        CONFIG_HASHED_INCLUDE: ",".join(hashed_inc),
        CONFIG_HASHED_EXCLUDE: ",".join(hashed_exc),
    }
    return ResolvedSelection(skipped, {k: v for k, v in out.items() if v or k in config})


def _check_modes(indexing: Mapping[str, str], inc: Sequence[str], exc: Sequence[str]) -> None:
    for field in indexing:
        _check_selected(field, "INDEXING MODES", inc, exc)


def _check_selected(field: str, clause: str, inc: Sequence[str], exc: Sequence[str]) -> None:
    """InvalidOptionError (the reference's texts) when `field` of `clause` is not among the
    INCLUDE COLUMNS or is among the EXCLUDE COLUMNS."""
    if inc and field.lower() not in {c.lower() for c in inc}:
        raise InvalidOptionError(
            f"Field '{field}' in {clause} is not in INCLUDE COLUMNS. Included columns: {', '.join(inc)}"
        )
    if field.lower() in {c.lower() for c in exc}:
        raise InvalidOptionError(f"Field '{field}' in {clause} is in EXCLUDE COLUMNS and will not be indexed.")


def _check_hashed(
    hashed: Sequence[str],
    fields: Mapping[str, Any],
    inc: Sequence[str],
    exc: Sequence[str],
    indexing: Mapping[str, str],
) -> None:
    modes = {k.lower(): v for k, v in indexing.items()}
    for field in hashed:
        _check_selected(field, "HASHED FASTFIELDS", inc, exc)
        f = fields.get(field.lower())
        if f is not None and f["type"] != "string":
            t = f["type"] if isinstance(f["type"], str) else f["type"].get("type")
            raise InvalidOptionError(
                f"Field '{field}' in HASHED FASTFIELDS has type {t}. Hashed fast fields require string type."
            )
        if modes.get(field.lower(), "").strip().lower() == "text":
            raise InvalidOptionError(
                f"Field '{field}' cannot be in both HASHED FASTFIELDS and INDEXING MODES with 'text' mode. Hashed "
                f"fast fields store a hash of the raw string value, which is incompatible with tokenized text fields."
            )


def string_list(p: CommandParser, clause: str) -> tuple[str, ...]:
    """`( 'a', 'b', … )` of a CommandParser: quoted (or bare / backquoted) column names."""
    t = p.next()
    if not (t.kind == "punct" and t.text == "("):
        raise p.error(f"expected '(' after {clause}, found {t.describe()}", t)
    out: list[str] = []
    while True:
        name = p.next()
        if name.kind not in ("str", "word", "bq"):
            raise p.error(f"expected a column name in {clause}, found {name.describe()}", name)
        out.append(name.value if name.kind == "str" else name.text.strip("`"))
        sep = p.next()
        if sep.kind == "punct" and sep.text == ")":
            return tuple(out)
        if not (sep.kind == "punct" and sep.text == ","):
            raise p.error(f"expected ',' or ')' in {clause}, found {sep.describe()}", sep)


def indexing_modes(p: CommandParser) -> tuple[tuple[str, str], ...]:
    """INDEXING MODES ('col':'mode', …) of BUILD INDEXTABLES COMPANION; names and modes quoted or bare."""
    t = p.next()
    if not (t.kind == "punct" and t.text == "("):
        raise p.error(f"expected '(' after INDEXING MODES, found {t.describe()}", t)
    out: list[tuple[str, str]] = []
    while True:
        name = p.next()
        if name.kind not in ("str", "word", "bq"):
            raise p.error(f"expected a column name in INDEXING MODES, found {name.describe()}", name)
        colon = p.next()
        if colon.text != ":":
            raise p.error(f"expected ':' after the column name in INDEXING MODES, found {colon.describe()}", colon)
        mode = p.next()
        if mode.kind not in ("str", "word"):
            raise p.error(
                f"expected an indexing mode (text, string, …) in INDEXING MODES, found {mode.describe()}", mode
            )
        col = name.value if name.kind == "str" else name.text.strip("`")
        out.append((col, mode.value if mode.kind == "str" else mode.text.lower()))
        sep = p.next()
        if sep.kind == "punct" and sep.text == ")":
            return tuple(out)
        if not (sep.kind == "punct" and sep.text == ","):
            raise p.error(f"expected ',' or ')' in INDEXING MODES, found {sep.describe()}", sep)
