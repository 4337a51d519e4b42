"""Error types. Every error names the thing at fault (file, option, column, version)."""

from __future__ import annotations

from typing import Callable

# what an error's text goes through before it is shown: config/redaction.py installs the package's
# one redaction when it is imported (this module, the lowest layer, cannot import it)
_shown: list[Callable[[str], str]] = []


def show_messages_through(redact: Callable[[str], str]) -> None:
    _shown[:] = [redact]


class IndexTablesError(Exception):
    """Base class of every error raised by indextables_spark. Its text never shows a secret
    (config/redaction.py): a message may quote a URL, a connection string or an SDK's error."""

    def __str__(self) -> str:
        text = super().__str__()
        return _shown[0](text) if _shown else text


class TableNotFoundError(IndexTablesError):
    pass


class TableExistsError(IndexTablesError):
    pass


class ConcurrentModificationError(IndexTablesError):
    pass


class CommitRetriesExhaustedError(ConcurrentModificationError):
    """A commit that kept losing to concurrent commits until its retry budget ran out
    (core/log/commit/policy.py): `table_path`, `operation`, `attempts`, `elapsed_s`. Nothing was
    committed; trying again later may succeed."""

    def __init__(
        self,
        *args: object,
        table_path: str | None = None,
        operation: str | None = None,
        attempts: int = 0,
        elapsed_s: float = 0.0,
    ):
        super().__init__(*args)
        self.table_path = table_path
        self.operation = operation
        self.attempts = attempts
        self.elapsed_s = elapsed_s


class ProtocolVersionError(IndexTablesError):
    pass


class CorruptStateError(IndexTablesError):
    pass


class VersionNotFoundError(IndexTablesError):
    pass


class SchemaMismatchError(IndexTablesError):
    pass


class UnsupportedTypeError(IndexTablesError):
    pass


class InvalidOptionError(IndexTablesError):
    pass


class PredicateError(InvalidOptionError):
    """A where / DELETE predicate that cannot be used: a value that does not fit its column, a
    condition in the wrong place."""


class QueryParseError(IndexTablesError):
    """An invalid full-text query: `query` is its text, `position` the 0-based character offset of the
    fault (None when it could not be located), `reason` what is wrong there."""

    def __init__(self, *args: object, query: str | None = None, position: int | None = None, reason: str | None = None):
        super().__init__(*args)
        self.query = query
        self.position = position
        self.reason = reason


class StorageError(IndexTablesError):
    pass


class FileNotFoundInStorageError(StorageError):
    pass


class PathEscapeError(IndexTablesError):
    """A path recorded in the log points outside the table root."""


class SplitFormatError(IndexTablesError):
    pass


class CompanionSourceError(IndexTablesError):
    """A companion index cannot serve rows: a source file it points at is gone or changed, or
    the table is a companion index and the operation would write rows into it."""


class ReferenceTableError(IndexTablesError):
    """A write refused because the table holds splits the reference implementation
    (IndexTables4Spark) wrote: `table_path`, `reference_splits` (how many of the live splits the
    reference wrote), `live_splits`. The fix is CONVERT INDEXTABLES TABLE (ops/maintenance/convert.py)."""

    def __init__(
        self,
        *args: object,
        table_path: str | None = None,
        reference_splits: int | None = None,
        live_splits: int | None = None,
    ):
        super().__init__(*args)
        self.table_path = table_path
        self.reference_splits = reference_splits
        self.live_splits = live_splits
