"""The package's errors raised in Spark's Python workers show their message after one frame.

Spark sends a worker's whole traceback to the JVM, which wraps it in its own error
(`PYTHON_DATA_SOURCE_ERROR`, `PythonException`) with the message last: a missing table took 26
lines. An IndexTablesError names what is at fault, and its frames inside the package only push its
message down, so the data source's entry points drop them. Any other exception (a bug) keeps its
whole traceback."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from indextables_spark.errors import IndexTablesError

C = TypeVar("C", bound=type)


def short_tracebacks(*methods: str) -> Callable[[C], C]:
    """A class decorator: the named methods (defined by the class itself) raise the package's
    errors without the frames beneath them."""

    def decorate(cls: C) -> C:
        for name in methods:
            setattr(cls, name, _shortened(cls.__dict__[name]))
        return cls

    return decorate


def _shortened(fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(fn):  # a reader's read(): the error comes while Spark iterates

        @functools.wraps(fn)
        def iterate(*args: Any, **kwargs: Any) -> Any:
            try:
                yield from fn(*args, **kwargs)
            except IndexTablesError as e:
                raise e.with_traceback(None) from None

        return iterate

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except IndexTablesError as e:
            raise e.with_traceback(None) from None

    return call
