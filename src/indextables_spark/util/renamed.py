"""Renamed arguments: an old name keeps working for a while, with a FutureWarning naming the new
one; both given with different values is an error naming both (e.g. it.search_join's `column=`,
now `vector_column=`, the name of every route's vector column)."""

from __future__ import annotations

import os
import sys
import warnings
from typing import TypeVar

from indextables_spark.errors import InvalidOptionError

T = TypeVar("T")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def renamed(where: str, new_name: str, new: T | None, old_name: str, old: T | None) -> T | None:
    """The value of an argument renamed from `old_name` to `new_name` in `where` (a function's or
    a SQL function's name): `new`, else `old` with a FutureWarning attributed to the first caller
    outside this package (the user's line, however many of our frames are between). Both given
    and different: InvalidOptionError naming both."""
    if old is None:
        return new
    if new is not None and new != old:
        raise InvalidOptionError(
            f"{where}: {old_name}={old!r} and {new_name}={new!r} disagree; {old_name} is the old name of "
            f"{new_name}: give {new_name} only"
        )
    warnings.warn(
        f"{where}: {old_name} is deprecated and will be removed; use {new_name} (the same value)",
        FutureWarning,
        stacklevel=_outside_stacklevel(),
    )
    return old


def _outside_stacklevel() -> int:
    """warnings.warn's stacklevel, called from renamed(), of the first frame outside the package."""
    level, frame = 2, sys._getframe(2)  # 1: renamed, 2: its caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
