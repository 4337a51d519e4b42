"""Table options: the `spark.indextables.*` keys (docs/configuration.md), given in full or without
the prefix.

Keys are case-insensitive (Spark lower-cases data source option keys).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, TypeVar, cast, overload

from indextables_spark.config import units
from indextables_spark.config.redaction import redact_mapping, remember_secrets, secret_option
from indextables_spark.config.registry import PREFIX as PREFIX  # the options' public name for it
from indextables_spark.config.option_checks import warn_unknown
from indextables_spark.config.registry import spec
from indextables_spark.errors import IndexTablesError, InvalidOptionError

SECRETS_OPTION = PREFIX + "secrets"  # secret options packed for Spark (pack_secrets)
_REGISTERED = object()  # "the registry's default" (config/registry.py)
_T = TypeVar("_T")
_D = TypeVar("_D")  # a default given to Options.get_<kind>


class UnregisteredOptionError(IndexTablesError):
    """The package read an option that config/registry.py does not list (a bug, not a user error)."""


def _default(key: str) -> Any:
    found = spec(short_key(key))
    if found is None:
        raise UnregisteredOptionError(f"option {key!r} is read but not listed in config/registry.py")
    return found.default


def pack_secrets(options: Mapping[str, str]) -> dict[str, str]:
    """Options as handed to Spark: the secret-named ones packed as JSON into SECRETS_OPTION, whose
    name Spark's default spark.redaction.regex (`secret|password|token|access.?key`) redacts in
    plans and the SQL tab (it would show an `azure.accountKey` or a connection string).
    Options.of unpacks them."""
    secret = {k: v for k, v in options.items() if secret_option(k)}
    if not secret:
        return dict(options)
    shown = {k: v for k, v in options.items() if k not in secret}
    return {**shown, SECRETS_OPTION: json.dumps(secret, sort_keys=True)}


def _unpacked(src: Mapping[str, Any]) -> Mapping[str, Any]:
    packed = next((v for k, v in src.items() if str(k).lower() == SECRETS_OPTION), None)
    if packed is None:
        return src
    try:
        secret = json.loads(packed)
    except ValueError:
        raise InvalidOptionError(f"option {SECRETS_OPTION} is set by the package, not by hand: not JSON") from None
    # the packed values were the session's: options given explicitly win, as when they are copied
    return {**secret, **{k: v for k, v in src.items() if str(k).lower() != SECRETS_OPTION}}


def short_key(key: str) -> str:
    """An option key without the `spark.indextables.` prefix, lower-cased (how Options stores it)."""
    k = key.lower()
    return k[len(PREFIX) :] if k.startswith(PREFIX) else k


@dataclass(frozen=True)
class Options(Mapping[str, str]):
    """Case-insensitive option map; keys are stored without the `spark.indextables.` prefix."""

    values: dict[str, str] = field(default_factory=dict)  # type: ignore[assignment]  # shadows Mapping.values(): the public field name

    @classmethod
    def of(cls, *sources: Mapping[str, Any] | None) -> "Options":
        """Merge sources left to right (later wins). A `spark.indextables.*` key the registry does
        not know is logged once per process, with the closest known key (config/option_checks.py;
        keys without the prefix are checked where a call is given them: warn_unknown_options)."""
        merged: dict[str, str] = {}
        for src in sources:
            if not src:
                continue
            if isinstance(src, Options):  # checked, and its secrets remembered, when it was built
                merged.update(src.values)
                continue
            given: dict[str, str] = {}
            for k, v in _unpacked(src).items():
                if v is None:
                    continue
                key = str(k)
                if key[: len(PREFIX)].lower() == PREFIX:
                    warn_unknown(key)
                given[short_key(key)] = v if isinstance(v, str) else _to_str(v)
            remember_secrets(v for k, v in given.items() if secret_option(k))  # hidden in every text shown
            merged.update(given)
        return cls(merged)

    def __getitem__(self, key: str) -> str:
        return self.values[short_key(key)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        """The option's text as given, else `default` (None: unset; registered keys only)."""
        _default(key)
        return self.values.get(short_key(key), default)

    # Each get_<kind>(key) is the option parsed, else its registered default; get_<kind>(key, d):
    # else d (None too: an unset option).
    @overload
    def get_int(self, key: str) -> int: ...
    @overload
    def get_int(self, key: str, default: _D) -> int | _D: ...
    def get_int(self, key: str, default: object = _REGISTERED) -> object:
        return self._parsed(key, default, _int)

    @overload
    def get_float(self, key: str) -> float: ...
    @overload
    def get_float(self, key: str, default: _D) -> float | _D: ...
    def get_float(self, key: str, default: object = _REGISTERED) -> object:
        return self._parsed(key, default, _float)

    @overload
    def get_bool(self, key: str) -> bool: ...
    @overload
    def get_bool(self, key: str, default: _D) -> bool | _D: ...
    def get_bool(self, key: str, default: object = _REGISTERED) -> object:
        return self._parsed(key, default, _bool)

    @overload
    def get_size(self, key: str) -> int: ...
    @overload
    def get_size(self, key: str, default: _D) -> int | _D: ...
    def get_size(self, key: str, default: object = _REGISTERED) -> object:
        """A byte size such as `100M`, `2G`, `512k` or a plain number of bytes."""
        return self._parsed(key, default, parse_size)

    @overload
    def get_duration_ms(self, key: str) -> int: ...
    @overload
    def get_duration_ms(self, key: str, default: _D) -> int | _D: ...
    def get_duration_ms(self, key: str, default: object = _REGISTERED) -> object:
        """A duration such as `0`, `500ms`, `2s` or `1m` (a plain number is milliseconds) → milliseconds."""
        return self._parsed(key, default, _millis)

    def _parsed(self, key: str, default: object, parse: Callable[[str, str], _T]) -> _T:
        """parse(text, key) of the option; unset or empty: `default` (the registered one unless given)."""
        raw = self.values.get(short_key(key))
        if raw is None or raw == "":
            return cast(_T, _default(key) if default is _REGISTERED else default)
        return parse(raw, key)

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """Options under `prefix.` (prefix removed), e.g. with_prefix('indexing.typemap')."""
        p = short_key(prefix).rstrip(".") + "."
        return {k[len(p) :]: v for k, v in self.values.items() if k.startswith(p)}

    def redacted(self) -> dict[str, str]:
        """The options as shown (config/redaction.py): secret-named ones ***, secrets in values too."""
        return redact_mapping(self.values)

    def __repr__(self) -> str:  # never show secrets
        return f"Options({self.redacted()!r})"


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _int(raw: str, key: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidOptionError(f"option {key!r}: expected an integer, got {raw!r}") from None


def _float(raw: str, key: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise InvalidOptionError(f"option {key!r}: expected a number, got {raw!r}") from None


def _bool(raw: str, key: str) -> bool:
    low = raw.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise InvalidOptionError(f"option {key!r}: expected true or false, got {raw!r}")


def _millis(raw: str, key: str) -> int:
    try:
        return units.parse_millis(raw)
    except units.UnitError as e:
        raise InvalidOptionError(f"option {key!r}: {e}") from None


def parse_size(raw: str, what: str = "size") -> int:
    """A size (config/units.py's grammar: `100M`, `2 G`, `1T`, bytes) → bytes; InvalidOptionError names `what`."""
    try:
        return units.parse_size(raw)
    except units.UnitError as e:
        raise InvalidOptionError(f"option {what!r}: {e}") from None


def session_options(spark: Any) -> dict[str, str]:
    """The `spark.indextables.*` entries of a SparkSession's conf (classic or Spark Connect).

    Duck-typed (no pyspark import): over Connect `spark.conf.getAll` (a dict; the server leaves out
    secret values, see config/sessions.py); in classic sessions one JSON string from the JVM. Data sources, table functions and executors never see the session
    conf, so callers copy these entries into options (explicit options win)."""
    if spark is None:
        return {}
    if not type(spark).__module__.startswith("pyspark.sql.connect") and hasattr(spark, "_jvm"):
        # classic: one JSON string from the JVM (`getAll` makes a Py4J round trip per entry,
        # 10-60 ms, paid by every read and write); the mapper is kept on the session
        import json

        mapper = spark.__dict__.get("_it_json_mapper")
        if mapper is None:
            mapper = spark.__dict__["_it_json_mapper"] = spark._jvm.com.fasterxml.jackson.databind.ObjectMapper()
        entries = json.loads(mapper.writeValueAsString(spark.conf._jconf.getAllAsJava()))
        return {k: str(v) for k, v in entries.items() if k.lower().startswith(PREFIX)}
    entries = spark.conf.getAll
    if callable(entries):  # older clients exposed a method
        entries = entries()
    return {str(k): str(v) for k, v in dict(entries).items() if str(k).lower().startswith(PREFIX)}
