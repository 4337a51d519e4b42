"""Every `spark.indextables.*` option the package reads: key, type, default, secret or not, one line
of documentation. `Options.get_*` take their defaults from here (a key read without being listed
is a programming error), the configuration table of docs/configuration.md is generated
from it (docs_hooks/options_table.py at `make docs`; a test compares the committed copy), `Options.redacted` hides the
secret ones, and `unknown_keys` names the closest known key for a mistyped one.

Keys ending in `.<col>` (or `.<name>.<key>`) are families: any suffix is accepted.
`reference` names the IndexTables4Spark key an option matches (same meaning, so a job written for
the reference keeps it), shown in that table.

The rows are declared by family, one module each under config/keys/ (indexing, writing, the log,
maintenance commands, reading, streaming, storage); this module joins them into OPTIONS, the one
list every reader of options and the configuration page look a key up in.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable

from indextables_spark.config.keys import indexing, log, maintenance, reading, storage, streaming, writing
from indextables_spark.config.keys.spec import GB, KB, MB, OptionSpec

PREFIX = "spark.indextables."  # every key's, given in full (Options stores keys without it)

OPTIONS: tuple[OptionSpec, ...] = (
    *indexing.OPTIONS,
    *writing.OPTIONS,
    *log.OPTIONS,
    *maintenance.OPTIONS,
    *reading.OPTIONS,
    *streaming.OPTIONS,
    *storage.OPTIONS,
)
"""Every option, family by family in this order (the configuration table's order)."""

_BY_KEY = {o.key.lower(): o for o in OPTIONS if not o.family}
_FAMILIES = [o for o in OPTIONS if o.family]


def spec(key: str) -> OptionSpec | None:
    """The registered option for a key (without the prefix, any case), or None."""
    k = key.lower()
    found = _BY_KEY.get(k)
    if found is not None:
        return found
    return next((o for o in _FAMILIES if k.startswith(o.prefix) and len(k) > len(o.prefix)), None)


def registered_default(key: str) -> Any:
    """The default of a registered option (for the module constants that name it)."""
    found = spec(key)
    if found is None:
        raise KeyError(f"option {key!r} is not in config/registry.py")
    return found.default


SECRET_KEYS = frozenset(o.key.lower() for o in OPTIONS if o.secret)


def closest(key: str) -> str | None:
    """The registered key closest to a mistyped one; a family's key with the mistyped key's own
    tail (`indexing.typmap.body` → `indexing.typemap.body`, not `indexing.typemap.<col>`)."""

    parts = key.split(".")
    names = [o.key for o in OPTIONS if not o.family]
    for o in _FAMILIES:
        fixed = o.prefix.count(".")  # the segments before the first `<...>`
        names.append(o.key if len(parts) <= fixed else o.key[: len(o.prefix)] + ".".join(parts[fixed:]))
    match = difflib.get_close_matches(key, names, n=1, cutoff=0.6) or difflib.get_close_matches(
        key.lower(), [n.lower() for n in names], n=1, cutoff=0.6
    )
    if not match:
        return None
    return next(n for n in names if n.lower() == match[0].lower())


def unknown_keys(keys: Iterable[str]) -> list[tuple[str, str | None]]:
    """(key, closest known key) for each key that is no registered option."""
    return [(k, closest(k)) for k in keys if spec(k) is None]


def markdown_table() -> str:
    """The configuration table (docs/configuration.md)."""

    def default(o: OptionSpec) -> str:
        if o.default is None:
            return "—"
        if o.type == "size" and isinstance(o.default, int) and o.default:
            for unit, n in (("G", GB), ("M", MB), ("K", KB)):
                if o.default % n == 0:
                    return f"`{o.default // n}{unit}`"
        if isinstance(o.default, bool):
            return f"`{str(o.default).lower()}`"
        if o.type == "duration" and isinstance(o.default, int):
            return f"`{o.default // 1000}s`" if o.default and o.default % 1000 == 0 else f"`{o.default}ms`"
        return f"`{o.default}`"

    def reference(o: OptionSpec) -> str:
        """`key` / `key` (remark): the reference's keys as code, a remark after them as text."""
        parts = []
        for part in o.reference.split(" / ") if o.reference else []:
            key, _, remark = part.partition(" (")
            parts.append(f"`{key}`" + (f" ({remark}" if remark else ""))
        return " / ".join(parts)

    lines = [
        "| key | type | default | meaning | IndexTables4Spark key |",
        "|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        if o.readme:
            lines.append(
                f"| `{o.key}` | {o.type}{' (secret)' if o.secret else ''} | {default(o)} | {o.doc} | {reference(o)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
