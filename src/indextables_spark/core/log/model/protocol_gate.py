"""What this implementation can read and write (docs/reference/table-format.md, "Protocol versions")."""

from __future__ import annotations

from indextables_spark.core.log.model.actions import Protocol
from indextables_spark.errors import ProtocolVersionError

MAX_READER_VERSION = 4
MAX_WRITER_VERSION = 4
# A table with delete logs requires this reader and writer feature: a reader without it would
# return deleted rows, a writer without it would drop the delete logs from the state it writes.
DELETION_LOGS = "deletionLogs"
KNOWN_READER_FEATURES = frozenset({"avroState", "multiPartCheckpoint", "schemaDeduplication", DELETION_LOGS})
KNOWN_WRITER_FEATURES = KNOWN_READER_FEATURES

# What new tables are created with.
CURRENT_PROTOCOL = Protocol(
    min_reader_version=4,
    min_writer_version=4,
    reader_features=["avroState", "schemaDeduplication"],
    writer_features=["avroState", "schemaDeduplication"],
)


def with_features(protocol: Protocol, *features: str) -> Protocol:
    """The protocol plus reader and writer features (itself when it has them already)."""
    r = set(protocol.reader_features or [])
    w = set(protocol.writer_features or [])
    if r.issuperset(features) and w.issuperset(features):
        return protocol
    return Protocol(
        protocol.min_reader_version, protocol.min_writer_version, sorted(r.union(features)), sorted(w.union(features))
    )


def _check(
    where: str, role: str, verb: str, version: int, max_version: int, features: list[str] | None, known: frozenset[str]
) -> None:
    """One side (reader or writer) of the protocol against what this implementation supports."""
    if version > max_version:
        raise ProtocolVersionError(
            f"{where}: table requires {role} version {version}; "
            f"this indextables_spark {verb} up to version {max_version}"
        )
    unknown = sorted(set(features or []) - known)
    if unknown:
        raise ProtocolVersionError(f"{where}: table requires unsupported {role} features {unknown}")


def check_readable(protocol: Protocol, where: str) -> None:
    _check(
        where,
        "reader",
        "reads",
        protocol.min_reader_version,
        MAX_READER_VERSION,
        protocol.reader_features,
        KNOWN_READER_FEATURES,
    )


def check_writable(protocol: Protocol, where: str) -> None:
    check_readable(protocol, where)
    _check(
        where,
        "writer",
        "writes",
        protocol.min_writer_version,
        MAX_WRITER_VERSION,
        protocol.writer_features,
        KNOWN_WRITER_FEATURES,
    )
