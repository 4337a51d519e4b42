"""A write's indexing options checked against the table: the columns they name, and what the table
recorded at its creation (core/split/format/indexing.py reads both forms of the options).

A table's indexing settings are its own: every split of a column is indexed one way, so a query
means the same on all of them. A write that gives an option naming a column the table lacks is
refused, naming the close matches; a write that gives, for a column the table already has, an
indexing setting other than the recorded one (or than the default, when none is recorded) is
refused, naming the column, the option, the table's value and the write's. A write that repeats
the recorded settings, or gives none, indexes the table's way. What a write may add is recorded
by its commit: the settings of the columns it adds (mergeSchema, overwriteSchema; a column whose
type changes counts as added) and a vector column declared later. The options that do not change
how a column is indexed (statistics, Bloom filters, the writer's memory, split sizes) may differ
write by write.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from indextables_spark.config.options import PREFIX, Options
from indextables_spark.core.schema.types import atomic_kind
from indextables_spark.core.split.format.indexing import (
    TOKEN_LENGTH_KEY,
    IndexingConfig,
    Setting,
    recorded_settings,
    token_length,
    vector_settings,
)
from indextables_spark.core.split.format.vector_kinds import spec_text
from indextables_spark.errors import InvalidOptionError

_NGRAM_DEFAULTS = {"min": 2, "max": 3}  # column_specs._tokenizer's bounds of an `ngram` column
_COLUMN_LISTS = (
    ("indexing.fastfields",),
    ("indexing.nonfastfields",),
    ("indexing.storeonly", "indexing.storeonlyfields"),
)
_FIXED_HINT = (
    "a table's indexing settings are fixed when it is created, so that its splits are searched alike: leave "
    "the option out to write the table's setting, or write the rows to a new table to index them differently"
)


def check_option_columns(given: Options, fields: Sequence[Mapping[str, Any]]) -> None:
    """Every column the write's own indexing options name is one of the table's (InvalidOptionError
    naming the option and the close matches); a table's recorded settings are not checked here."""
    columns = [str(f["name"]) for f in fields]
    IndexingConfig.of(given, columns).check_columns(columns, every=True)


def recorded_changes(
    path: str,
    configuration: Mapping[str, str],
    given: Options,
    fields: Sequence[Mapping[str, Any]],
    old_fields: Sequence[Mapping[str, Any]],
    operation: str = "write",
) -> dict[str, str]:
    """Check the indexing options of a write to a table (`fields`: the columns it writes,
    `old_fields`: the table's before it) against the settings the table recorded; returns the
    settings its commit adds to the table's metadata. InvalidOptionError lists every change
    (`operation`: what gives the options, for the message)."""
    recorded = Options.of(recorded_settings(configuration))
    columns = [str(f["name"]) for f in fields]
    old = {str(f["name"]).lower(): f["type"] for f in old_fields}
    added_columns = {str(f["name"]).lower() for f in fields if old.get(str(f["name"]).lower(), f) != f["type"]}
    kinds = {str(f["name"]).lower(): atomic_kind(f["type"]) for f in fields}
    table = IndexingConfig.of(recorded, columns)
    asked = IndexingConfig.of(given, columns)
    changes: list[str] = []
    added: dict[str, str] = {}

    def is_added(col: str) -> bool:
        return col in added_columns or col.split(".")[0] in added_columns

    def per_column(
        family: str,
        mine: Mapping[str, Setting],
        theirs: Mapping[str, Setting],
        default: Callable[[str], str | None],
        same: Callable[[Setting, str], bool] = lambda s, v: s.value == v,
    ) -> None:
        for col, s in sorted(mine.items()):
            if col not in kinds and col.split(".")[0] not in kinds:
                continue  # no column of the table: check_option_columns refuses it where it must
            if is_added(col):
                _record(added, recorded, given, family, col, s)
                continue
            had = theirs.get(col)
            was = had.value if had is not None else default(col)
            if was is not None and not same(s, was):
                where = f"recorded as {had.key}" if had is not None else "the default: the table records none"
                changes.append(f"column {col!r}: option {s.key} gives {s.value!r}, the table's is {was!r} ({where})")

    per_column(
        "indexing.typemap", asked.typemap, table.typemap, lambda c: "string" if kinds.get(c) == "string" else None
    )
    per_column("indexing.tokenizer", asked.tokenizer, table.tokenizer, lambda c: "default")
    per_column("indexing.indexrecordoption", asked.record, table.record, lambda c: table.default_record)
    per_column(
        "indexing.tokenLength",
        asked.token_lengths,
        table.token_lengths,
        lambda c: str(table.default_token_length) if table.default_token_length is not None else "builtin",
        lambda s, v: token_length(s.value, s.key) == token_length(v, s.key),
    )
    for which, default in _NGRAM_DEFAULTS.items():
        family = f"indexing.ngram.{which}"
        mine = {c: Setting(v.strip(), f"{family}.{c}") for c, v in given.with_prefix(family).items()}
        theirs = {c: Setting(v.strip(), f"{family}.{c}") for c, v in recorded.with_prefix(family).items()}
        per_column(family, mine, theirs, _constant(str(default)), lambda s, v: _number(s.value) == _number(v))
    changes += _table_wide(given, recorded, table, asked)
    changes += _column_lists(given, recorded, is_added, added)
    if changes:
        raise InvalidOptionError(
            f"table {path}: the indexing options of this {operation} differ from the table's: {'; '.join(changes)} ({_FIXED_HINT})"
        )
    _check_index_only_unchanged(path, recorded, Options.of(recorded, given))
    added.update(_added_vector_settings(path, recorded, given))
    return added


def _constant(value: str) -> Callable[[str], str]:
    return lambda _column: value


def _number(text: str) -> int | str:
    """An ngram bound compared as a number (`02` is `2`); a text that is none stays itself (refused later)."""
    try:
        return int(text)
    except ValueError:
        return text


def _record(added: dict[str, str], recorded: Options, given: Options, family: str, col: str, s: Setting) -> None:
    """Record a setting of a column the write adds, in the form it was given: a per-column key as
    it is, a column of a list form added to the table's list of that key (whose other columns keep
    their setting)."""
    key = PREFIX + s.key.lower()  # as a table's creation records its keys (Options keeps them lower-cased)
    if s.key.lower() == f"{family}.{col}".lower():
        added[key] = given[s.key]
        return
    listed = added.get(key) or recorded.values.get(s.key.lower()) or ""
    cols = [c.strip() for c in listed.split(",") if c.strip()]
    added[key] = ",".join(cols + ([col] if col not in {c.lower() for c in cols} else []))


def _table_wide(given: Options, recorded: Options, table: IndexingConfig, asked: IndexingConfig) -> list[str]:
    """The settings of every text column: their record option and token length."""
    out = []
    key = "indexing.text.indexRecordOption"
    if given.get_str(key) is not None and asked.default_record != table.default_record:
        out.append(f"option {key} gives {asked.default_record!r}, the table's is {table.default_record!r}")
    raw = given.get_str(TOKEN_LENGTH_KEY)
    if raw is not None and token_length(raw, TOKEN_LENGTH_KEY) != table.default_token_length:
        out.append(f"option {TOKEN_LENGTH_KEY} gives {raw!r}, the table's is {recorded.get_str(TOKEN_LENGTH_KEY)!r}")
    return out


def _column_lists(
    given: Options, recorded: Options, is_added: Callable[[str], bool], added: dict[str, str]
) -> list[str]:
    """The comma lists (fast, not fast, stored only): a write's list replaces the table's, so it
    names the same columns the table had; the columns it adds are recorded with it."""
    out = []
    for keys in _COLUMN_LISTS:
        mine = [k for k in keys if given.get_str(k) is not None]
        if not mine:
            continue
        asked = {c for k in mine for c in _names(given.get_str(k))}
        table = {c for k in keys for c in _names(recorded.get_str(k))}
        if {c for c in asked if not is_added(c)} != {c for c in table if not is_added(c)}:
            shown = " and ".join(f"option {k} gives {given.get_str(k)!r}" for k in mine)
            out.append(f"{shown}, the table's {' / '.join(keys)} names {sorted(table) or 'no column'}")
        elif any(is_added(c) for c in asked):
            added.update({PREFIX + k: str(given.get_str(k)) for k in mine})
    return out


def _names(value: str | None) -> set[str]:
    return {c.strip().lower() for c in (value or "").split(",") if c.strip()}


def _check_index_only_unchanged(path: str, recorded: Options, settings: Options) -> None:
    """Which columns the rows leave out (indexing.indexonlyfields) is the table's, fixed at creation:
    readers decide from the recorded setting which filters only the index may answer."""
    had = set(IndexingConfig.of(recorded).index_only)
    asked = set(IndexingConfig.of(settings).index_only)
    if asked != had:
        raise InvalidOptionError(
            f"table {path}: option indexing.indexonlyfields names {sorted(asked) or 'no column'}, but the table "
            f"was created with {sorted(had) or 'none'} (columns its rows leave out are fixed when a table "
            f"is created; leave the option out to write the table's setting)"
        )


def _added_vector_settings(path: str, recorded: Options, given: Options) -> dict[str, str]:
    """The vector columns this write declares that the table does not (recorded by its commit:
    the splits written before are searched exactly from their rows, core/split/read/reader.py);
    InvalidOptionError when it declares a recorded one otherwise (a column's vectors are compared
    in one metric and dimension across the table)."""
    had = vector_settings(recorded)
    added = {}
    for column, (spec, key) in vector_settings(given).items():
        before = had.get(column)
        text = given.get_str(key) or spec_text(spec.dims, spec.metric, spec.kind, spec.params)
        if before is None:
            added[PREFIX + key] = text
        elif before[0] != spec:
            raise InvalidOptionError(
                f"table {path}: option {key} = '{text}', but the table declares '{recorded.get_str(before[1])}' (a "
                f"vector column keeps its dimensions, metric and index kind; leave the option out to write the table's)"
            )
    return added
