"""The per-column indexing options, in both of the forms IndexTables4Spark accepts.

Families such as `indexing.typemap` take either form, told apart by the key's suffix exactly as the
reference tells them apart (IndexTables4SparkOptions.parseDualSyntaxConfig):

- the suffix is one of the family's values (a type, a tokenizer, a record option, a token length):
  the value lists columns, `indexing.typemap.text = "title, body"` (the list form);
- otherwise the suffix is a column and the value its setting, `indexing.typemap.title = "text"`.

So `indexing.typemap.text = "string"` lists a column named `string`, as in the reference. One
case the reference rejects is read per column instead: the suffix is a column of the table and the
value names no column (`indexing.typemap.text = "text_and_string"` for a column `text`, as tables
written before the list forms record it). A column given two different settings (by two keys) is
an error naming both keys; the reference keeps one of them silently.

Token lengths (`indexing.text.maxTokenLength`, `indexing.tokenLength.<col>` /
`indexing.tokenLength.<n> = "a,b"`): a tokenized field drops tokens of that many UTF-8 bytes or
more (Tantivy's RemoveLongFilter), 1–65530 or `min` (1), `legacy` (40), `default` (255),
`tantivy_max` (65530). New tables default to 255 like the reference; `builtin` is each tokenizer's
own limit (40 bytes for `default`, `en_stem`, the stemmers and `cjk`; none below Tantivy's 65530
for `whitespace`), what every table written before this option used: a table whose metadata does
not record `indexing.text.maxTokenLength` is read and appended to that way (`recorded_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from indextables_spark.config.option_checks import did_you_mean
from indextables_spark.config.options import PREFIX, Options
from indextables_spark.core.schema import analyzers, compact_strings
from indextables_spark.core.schema.types import VECTOR_METRICS, VectorSpec
from indextables_spark.core.split.format.vector_kinds import DEFAULT_KIND, KINDS, check_params, parse_kind
from indextables_spark.errors import InvalidOptionError

# Tokenizers Tantivy registers by itself (custom ones are not persisted in an index).
BUILTIN_TOKENIZERS = frozenset({"default", "raw", "en_stem", "whitespace"})
RECORD_OPTIONS = frozenset({"basic", "freq", "position"})
TYPEMAP_VALUES = frozenset({"string", "text", "text_and_string", "ip"})
# compact string modes the list form takes (`indexing.typemap.exact_only = "trace_id,request_id"`);
# the custom ones carry a regex and are given per column (compact_strings.py)
COMPACT_LIST_VALUES = frozenset(
    {compact_strings.EXACT_ONLY, compact_strings.UUID_EXACTONLY, compact_strings.UUID_STRIP}
)
TOKEN_LENGTH_KEY = "indexing.text.maxTokenLength"
TOKEN_LENGTH_NAMES = {"min": 1, "legacy": 40, "default": 255, "tantivy_max": 65530}
BUILTIN = "builtin"  # each tokenizer's own limit (tables written before the option)
MAX_TOKEN_LENGTH = 65530
# Tokenizers whose analyzer drops long tokens (a limit is recorded for their fields); `raw` keeps
# whole values (exact fields cut them to a term length of their own) and n-grams are short.
LIMITED_TOKENIZERS = frozenset({"default", "en_stem", "whitespace", "cjk", "cjk_bigram"})


def limits_tokens(tokenizer: str | None) -> bool:
    if tokenizer in LIMITED_TOKENIZERS:
        return True
    return bool(tokenizer) and str(tokenizer).endswith("_stem") and str(tokenizer)[:-5] in analyzers.STEMMERS


def token_length(raw: str, key: str) -> int | None:
    """The byte limit an option value names (None: `builtin`)."""
    v = raw.strip().lower()
    if v == BUILTIN:
        return None
    if v in TOKEN_LENGTH_NAMES:
        return TOKEN_LENGTH_NAMES[v]
    try:
        n = int(v)
    except ValueError:
        raise InvalidOptionError(
            f"option {key}={raw!r}: expected an integer 1-{MAX_TOKEN_LENGTH} or one of "
            f"{', '.join(sorted(TOKEN_LENGTH_NAMES))}, {BUILTIN}"
        ) from None
    if not 1 <= n <= MAX_TOKEN_LENGTH:
        raise InvalidOptionError(f"option {key}={raw!r}: a token length must be between 1 and {MAX_TOKEN_LENGTH}")
    return n


def _columns(value: str) -> list[str]:
    return [c.strip().lower() for c in value.split(",") if c.strip()]


@dataclass(frozen=True)
class Setting:
    value: str
    key: str  # the option it came from (for messages)
    listed: bool = False  # the column came from a list (checked against the table's columns)


def per_column(
    options: Options, family: str, list_values: Iterable[str], columns: Iterable[str] | None = None
) -> dict[str, Setting]:
    """column (lower-cased) -> its setting in `family` (e.g. `indexing.typemap`), from both forms
    (`columns`: the table's, for the one case the reference rejects, see the module doc)."""
    values = {v.lower() for v in list_values}
    table = {c.lower() for c in columns} if columns is not None else set()
    out: dict[str, Setting] = {}
    for suffix, value in sorted(options.with_prefix(family).items()):
        key = f"{family}.{suffix}"
        listed = suffix in values and not (suffix in table and not set(_columns(value)) & table)
        pairs = [(c, Setting(suffix, key, True)) for c in _columns(value)] if listed else []
        if not listed:
            # (a compact mode's custom regex keeps its case: `text_custom_strip:ORD-\d{8}`)
            v = compact_strings.normalize(value) if compact_strings.is_compact_mode(value) else value.strip().lower()
            pairs = [(suffix, Setting(v, key))]
        for col, setting in pairs:
            prev = out.get(col)
            if prev is not None and prev.value != setting.value:
                raise InvalidOptionError(
                    f"options {prev.key} and {setting.key} give column {col!r} two settings "
                    f"({prev.value!r} and {setting.value!r})"
                )
            out[col] = setting
    return out


def _token_lengths(options: Options) -> dict[str, Setting]:
    """`indexing.tokenLength`: the suffix is a length (a number or a name) or a column."""
    out: dict[str, Setting] = {}
    for suffix, value in sorted(options.with_prefix("indexing.tokenlength").items()):
        key = f"indexing.tokenLength.{suffix}"
        is_length = suffix in TOKEN_LENGTH_NAMES or suffix.lstrip("-").isdigit()
        if is_length:
            token_length(suffix, key)  # validated as a value would be
            pairs = [(c, Setting(suffix, key, True)) for c in _columns(value)]
        else:
            token_length(value, key)
            pairs = [(suffix, Setting(value.strip().lower(), key, True))]
        for col, setting in pairs:
            prev = out.get(col)
            if prev is not None and token_length(prev.value, prev.key) != token_length(setting.value, setting.key):
                raise InvalidOptionError(
                    f"options {prev.key} and {setting.key} give column {col!r} two token lengths "
                    f"({prev.value!r} and {setting.value!r})"
                )
            out[col] = setting
    return out


def column_list(options: Options, *keys: str) -> dict[str, str]:
    """column (lower-cased) -> the key naming it, of comma-list options (aliases in `keys`)."""
    out: dict[str, str] = {}
    for key in keys:
        for c in _columns(options.get_str(key) or ""):
            out.setdefault(c, key)
    return out


def tokenizer_list_values() -> frozenset[str]:
    """Key suffixes of `indexing.tokenizer` that name a tokenizer (the list form)."""

    customs = [n for n in analyzers.custom_names() if "<" not in n]
    return frozenset(BUILTIN_TOKENIZERS | set(customs) | {"ngram"})


@dataclass(frozen=True)
class IndexingConfig:
    """Every per-column indexing setting of a write, resolved from the options."""

    typemap: dict[str, Setting]
    tokenizer: dict[str, Setting]
    record: dict[str, Setting]
    default_record: str
    token_lengths: dict[str, Setting]
    default_token_length: int | None
    fast: dict[str, str]
    non_fast: dict[str, str]
    store_only: dict[str, str]
    index_only: dict[str, str]
    stats_columns: dict[str, str] | None = field(default=None)
    vectors: dict[str, tuple[VectorSpec, str]] = field(default_factory=dict)  # column -> (spec, option key)
    ngram: dict[str, str] = field(default_factory=dict)  # column -> an `indexing.ngram.min/max.<col>` key

    @classmethod
    def of(cls, options: Options, columns: Iterable[str] | None = None) -> "IndexingConfig":
        default_record = (options.get_str("indexing.text.indexRecordOption") or "position").strip().lower()
        if default_record not in RECORD_OPTIONS:
            raise InvalidOptionError(
                f"option indexing.text.indexRecordOption={default_record!r}: expected one of {sorted(RECORD_OPTIONS)}"
            )
        raw_length = options.get_str(TOKEN_LENGTH_KEY)
        default_length = token_length(raw_length, TOKEN_LENGTH_KEY) if raw_length else TOKEN_LENGTH_NAMES["default"]
        stats_raw = options.get_str("dataSkippingStatsColumns")
        return cls(
            typemap=per_column(options, "indexing.typemap", TYPEMAP_VALUES | COMPACT_LIST_VALUES | {"json"}, columns),
            tokenizer=per_column(options, "indexing.tokenizer", tokenizer_list_values(), columns),
            record=per_column(options, "indexing.indexrecordoption", RECORD_OPTIONS, columns),
            default_record=default_record,
            token_lengths=_token_lengths(options),
            default_token_length=default_length,
            fast=column_list(options, "indexing.fastfields"),
            non_fast=column_list(options, "indexing.nonfastfields"),
            store_only=column_list(options, "indexing.storeonly", "indexing.storeonlyfields"),
            index_only=column_list(options, "indexing.indexonlyfields"),
            stats_columns=column_list(options, "dataSkippingStatsColumns") if stats_raw and stats_raw.strip() else None,
            vectors=vector_settings(options),
            ngram={
                c: f"indexing.ngram.{which}.{c}"
                for which in ("max", "min")
                for c in options.with_prefix(f"indexing.ngram.{which}")
            },
        )

    def token_limit(self, column: str, tokenizer: str | None) -> int | None:
        """The recorded byte limit of a field with that tokenizer (None: the tokenizer's own)."""
        if not limits_tokens(tokenizer):
            return None
        s = self.token_lengths.get(column.lower())
        return token_length(s.value, s.key) if s is not None else self.default_token_length

    def check_columns(self, columns: Iterable[str], every: bool = False) -> None:
        """Every column a list form, `tokenLength`, `nonfastfields`, `indexonlyfields` or a vector
        option names is a column of the table (as the reference's validateFieldsExist); with
        `every` (the options a write gives, core/split/format/setting_changes.py) the per-column
        keys and `fastfields` too. Otherwise a per-column key for another column is left alone: a
        table's recorded settings may outlive a column. A struct column's fields pass by its name."""
        columns = list(columns)
        names = {c.lower() for c in columns}
        per_col: list[Mapping[str, Setting]] = [self.typemap, self.tokenizer, self.record, self.token_lengths]
        named = [(c, s.key) for settings in per_col for c, s in settings.items() if every or s.listed]
        named += [(c, k) for keyed in (self.non_fast, self.index_only) for c, k in keyed.items()]
        if every:
            named += [(c, k) for keyed in (self.fast, self.ngram) for c, k in keyed.items()]
        named = [(c, k) for c, k in named if c.split(".")[0] not in names and c not in names]
        named += [(c, k) for c, (_spec, k) in self.vectors.items() if c not in names]  # whole columns only
        wrong = sorted(f"{key} names {c!r}{did_you_mean(c.split('.')[0], columns)}" for c, key in named)
        if wrong:
            raise InvalidOptionError(
                f"indexing options name columns the table does not have: {'; '.join(wrong)} "
                f"(columns: {sorted(columns)}; a key ending in a type, tokenizer, record option or "
                f"token length lists columns in its value)"
            )


VECTOR_KEY = "indexing.vector"
MAX_VECTOR_DIMS = 16_384


def vector_spec(raw: str, key: str) -> VectorSpec:
    """`<dimensions>[,<metric>[,<kind>[,<name>=<value>...]]]` of option `key`: the metric cosine
    (the default), l2 or dot; the index kind and its parameters (vector_kinds.py; none: the
    default kind)."""
    parts = [p.strip().lower() for p in raw.split(",")]
    try:
        dims = int(parts[0])
    except ValueError:
        dims = 0
    if not 1 <= dims <= MAX_VECTOR_DIMS:
        raise InvalidOptionError(
            f"option {key}={raw!r}: expected '<dimensions>[,<metric>[,<index kind>[,<name>=<value>...]]]', "
            f"dimensions 1-{MAX_VECTOR_DIMS}, metric one of {', '.join(VECTOR_METRICS)}, index kind one of "
            f"{', '.join(KINDS)} (e.g. '768,cosine' or '768,cosine,{DEFAULT_KIND},nlist=1024')"
        )
    metric = parts[1] if len(parts) >= 2 else "cosine"
    if metric not in VECTOR_METRICS:
        raise InvalidOptionError(f"option {key}={raw!r}: unknown metric {metric!r} (expected one of {VECTOR_METRICS})")
    kind, params = parse_kind(parts[2:], key, raw)
    check_params(kind, dict(params), dims, key)
    return VectorSpec(dims, metric, kind, params)


def vector_settings(options: Options) -> dict[str, tuple[VectorSpec, str]]:
    """`indexing.vector.<col>` options: column (lower-cased) -> (its spec, the option key)."""
    out = {}
    for col, raw in options.with_prefix(VECTOR_KEY).items():
        key = f"{VECTOR_KEY}.{col}"
        out[col.lower()] = (vector_spec(raw, key), key)
    return out


def recorded_settings(configuration: Mapping[str, str]) -> dict[str, str]:
    """The settings a table records in its metadata (docMappingSchema entries left out), with
    `indexing.text.maxTokenLength = builtin` when the table does not record it: it was created
    before the option existed, and its splits dropped tokens at each tokenizer's own limit."""
    out = {k: v for k, v in configuration.items() if not k.startswith("docMappingSchema.")}
    key = (PREFIX + TOKEN_LENGTH_KEY).lower()
    if not any(k.lower() == key for k in out):
        out[PREFIX + TOKEN_LENGTH_KEY] = BUILTIN
    return out
