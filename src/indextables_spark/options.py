"""Table options: the spec's `spark.indextables.*` keys, given in full or without the prefix.

Keys are case-insensitive (Spark lower-cases data source option keys).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from .errors import InvalidOptionError

PREFIX = "spark.indextables."

# Option names whose values are secrets: never logged, stored or shown.
SECRET_KEYS = frozenset(
    k.lower()
    for k in (
        "aws.accessKey",
        "aws.secretKey",
        "aws.sessionToken",
        "azure.accountKey",
        "azure.connectionString",
        "azure.clientSecret",
        "azure.bearerToken",
        "azure.sasToken",
    )
)


def short_key(key: str) -> str:
    """An option key without the `spark.indextables.` prefix, lower-cased (how Options stores it)."""
    k = key.lower()
    return k[len(PREFIX):] if k.startswith(PREFIX) else k


@dataclass(frozen=True)
class Options(Mapping[str, str]):
    """Case-insensitive option map; keys are stored without the `spark.indextables.` prefix."""

    values: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, *sources: Mapping[str, Any] | None) -> "Options":
        """Merge sources left to right (later wins)."""
        merged: dict[str, str] = {}
        for src in sources:
            if not src:
                continue
            items = src.values.items() if isinstance(src, Options) else src.items()
            for k, v in items:
                if v is None:
                    continue
                merged[short_key(str(k))] = v if isinstance(v, str) else _to_str(v)
        return cls(merged)

    def __getitem__(self, key: str) -> str:
        return self.values[short_key(key)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(short_key(key), default)

    def get_int(self, key: str, default: int) -> int:
        raw = self.values.get(short_key(key))
        if raw is None or raw == "":
            return default
        try:
            return int(_strip_size(raw))
        except ValueError:
            raise InvalidOptionError(f"option {key!r}: expected an integer, got {raw!r}") from None

    def get_float(self, key: str, default: float) -> float:
        raw = self.values.get(short_key(key))
        if raw is None or raw == "":
            return default
        try:
            return float(raw)
        except ValueError:
            raise InvalidOptionError(f"option {key!r}: expected a number, got {raw!r}") from None

    def get_bool(self, key: str, default: bool) -> bool:
        raw = self.values.get(short_key(key))
        if raw is None or raw == "":
            return default
        low = raw.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise InvalidOptionError(f"option {key!r}: expected true or false, got {raw!r}")

    def get_size(self, key: str, default: int) -> int:
        """A byte size such as `100M`, `2G`, `512k` or a plain number of bytes."""
        raw = self.values.get(short_key(key))
        if raw is None or raw == "":
            return default
        return parse_size(raw, key)

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """Options under `prefix.` (prefix removed), e.g. with_prefix('indexing.typemap')."""
        p = short_key(prefix).rstrip(".") + "."
        return {k[len(p):]: v for k, v in self.values.items() if k.startswith(p)}

    def redacted(self) -> dict[str, str]:
        return {k: ("***" if k in SECRET_KEYS else v) for k, v in self.values.items()}

    def __repr__(self) -> str:  # never show secrets
        return f"Options({self.redacted()!r})"


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _strip_size(raw: str) -> str:
    return raw.strip()


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def parse_size(raw: str, what: str = "size") -> int:
    s = raw.strip().lower()
    num = s.rstrip("kmgb")
    unit = s[len(num):]
    try:
        if unit not in _UNITS:
            raise ValueError
        return int(float(num) * _UNITS[unit])
    except (ValueError, OverflowError):   # OverflowError: "inf", "1e400"
        raise InvalidOptionError(f"option {what!r}: expected a size like 100M or 2G, got {raw!r}") from None


def session_options(spark: Any) -> dict[str, str]:
    """The `spark.indextables.*` entries of a SparkSession's conf (classic or Spark Connect).

    Duck-typed (no pyspark import): over Connect `spark.conf.getAll` (a dict; the server leaves out
    secret values, see sessions.py); in classic sessions one JSON string from the JVM. Data sources, table functions and executors never see the session
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
    if callable(entries):   # older clients exposed a method
        entries = entries()
    return {str(k): str(v) for k, v in dict(entries).items() if str(k).lower().startswith(PREFIX)}
