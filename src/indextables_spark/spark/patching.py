"""Wrapping pyspark methods reversibly (what `register` installs and `unregister` removes)."""

from __future__ import annotations

import functools
from typing import Any, Callable

# (class, method name, the class's own attribute before wrapping; None when it was inherited)
_wrapped: list[tuple[type, str, Callable[..., Any] | None]] = []


def own(cls: type, name: str) -> Any:
    """pyspark's own method (under our wrapper, if any)."""
    fn = cls.__dict__.get(name) or getattr(cls, name)
    return getattr(fn, "_indextables_original", fn)


def wrap(cls: type, name: str, make: Callable[[Any], Callable[..., Any]]) -> None:
    """Replace `cls.name` by `make(pyspark's method)`; nothing when the class has no such method."""
    if not hasattr(cls, name):
        return
    original = own(cls, name)
    wrapped: Any = functools.wraps(original)(make(original))
    wrapped._indextables_original = original
    _wrapped.append((cls, name, cls.__dict__.get(name)))
    setattr(cls, name, wrapped)


def wrapped_any() -> bool:
    return bool(_wrapped)


def remove_all() -> None:
    """Restore every wrapped method, last wrapped first."""
    while _wrapped:
        cls, name, original = _wrapped.pop()
        if original is None:
            delattr(cls, name)
        else:
            setattr(cls, name, original)
