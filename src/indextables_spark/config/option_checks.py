"""Checks of the options a user gives: a key that names no option is logged once per process with
the closest known key ("did you mean"), and a name that matches nothing is shown with its close
matches (the indexing options' column errors, core/split/format/indexing.py).

Which keys are checked: every `spark.indextables.*` key wherever it comes from (Options.of: the
session conf carries many other keys, only these are ours), and every key of the options a call is
given (`.option()` of a Spark read or write, `IndexTable(path, options)`, `it.write_table(...,
options=)`), where the short names (`query`, `limit`) are accepted too. Unknown options stay
warnings, not errors: a job written for a newer release, or for IndexTables4Spark, keeps running.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import logging
import re
from typing import Any, Iterable, Iterator, Mapping

from indextables_spark.config.registry import PREFIX, closest, spec

# What Spark itself puts among a data source's options (`load(path)`, `save(path)`): no option of ours.
# Spark's own keys: the path, and the reserved table properties a catalog table's CREATE TABLE
# passes with its options (TableCatalog.PROP_*: `owner` comes with every one).
SPARK_KEYS = frozenset(
    {"path", "paths", "owner", "provider", "location", "comment", "external", "is_managed_location", "collation"}
)

log = logging.getLogger(__name__)

_warned: set[str] = set()  # short keys already logged by this process (lower-cased)
# Options checked in another process already (a Spark driver after `register`: spark/register.py
# marks the options it passes with `optionsChecked`): nothing is logged again here.
_checked_elsewhere = contextvars.ContextVar("indextables_options_checked_elsewhere", default=False)
CHECKED = PREFIX + "optionsChecked"


@contextlib.contextmanager
def checked_elsewhere(checked: bool = True) -> Iterator[None]:
    """While inside, unknown keys are not logged (`checked`: the options carry CHECKED)."""
    token = _checked_elsewhere.set(checked or _checked_elsewhere.get())
    try:
        yield
    finally:
        _checked_elsewhere.reset(token)


def close_matches(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to a mistyped name (compared in any case), best first."""
    by_lower: dict[str, str] = {}
    for c in candidates:
        by_lower.setdefault(c.lower(), c)
    return [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """` (did you mean 'a' or 'b'?)`, or '' when nothing is close."""
    near = close_matches(name, candidates)
    return f" (did you mean {' or '.join(repr(c) for c in near)}?)" if near else ""


def warn_unknown(key: str) -> None:
    """Log a key that names no registered option, once per process and short key (`qurey` and
    `spark.indextables.qurey` are one key), with the closest known key in the form it was given."""
    prefixed = key[: len(PREFIX)].lower() == PREFIX
    short = key[len(PREFIX) :].lower() if prefixed else key.lower()
    if short in _warned or spec(short) is not None or _checked_elsewhere.get():
        return
    _warned.add(short)
    near = closest(short)
    hint = f" (did you mean {PREFIX if prefixed else ''}{near}?)" if near else ""
    log.warning("indextables: unknown option %s%s: it is ignored", shown_key(key), hint)


def shown_key(key: str) -> str:
    """An option's key as a message may show it: up to its first character that no key has (a
    `key=value` or `key value` given as a key would show the value, which may be a secret)."""
    name = _KEY_CHARACTERS.match(key)
    shown = name.group(0) if name else ""
    return shown if shown == key else f"{shown!r} (followed by {len(key) - len(shown)} characters not shown)"


_KEY_CHARACTERS = re.compile(r"[\w.\-<>]*")


def warn_unknown_options(options: Mapping[str, Any] | None) -> None:
    """Each key of the options a call was given that names no option (with or without the prefix;
    Spark's own `path` excepted): logged once per process."""
    for key in options or ():
        if str(key).lower() not in SPARK_KEYS:
            warn_unknown(str(key))
