"""What this implementation can read and write (protocol.md "Protocol Versions")."""

from __future__ import annotations

from indextables_spark.core.log.actions import Protocol
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


def check_readable(protocol: Protocol, where: str) -> None:
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise ProtocolVersionError(
            f"{where}: table requires reader version {protocol.min_reader_version}; "
            f"this indextables_spark reads up to version {MAX_READER_VERSION}"
        )
    unknown = sorted(set(protocol.reader_features or []) - KNOWN_READER_FEATURES)
    if unknown:
        raise ProtocolVersionError(f"{where}: table requires unsupported reader features {unknown}")


def check_writable(protocol: Protocol, where: str) -> None:
    check_readable(protocol, where)
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise ProtocolVersionError(
            f"{where}: table requires writer version {protocol.min_writer_version}; "
            f"this indextables_spark writes up to version {MAX_WRITER_VERSION}"
        )
    unknown = sorted(set(protocol.writer_features or []) - KNOWN_WRITER_FEATURES)
    if unknown:
        raise ProtocolVersionError(f"{where}: table requires unsupported writer features {unknown}")
