"""Error types. Every error names the thing at fault (file, option, column, version)."""
from __future__ import annotations


class IndexTablesError(Exception):
    """Base class of every error raised by indextables_spark."""


class TableNotFoundError(IndexTablesError):
    pass


class TableExistsError(IndexTablesError):
    pass


class ConcurrentModificationError(IndexTablesError):
    pass


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


class QueryParseError(IndexTablesError):
    pass


class StorageError(IndexTablesError):
    pass


class FileNotFoundInStorageError(StorageError):
    pass


class PathEscapeError(IndexTablesError):
    """A path recorded in the log points outside the table root."""


class SplitFormatError(IndexTablesError):
    pass
