"""What this implementation can read and write (protocol.md "Protocol Versions")."""
from __future__ import annotations

from ..errors import ProtocolVersionError
from .actions import Protocol

MAX_READER_VERSION = 4
MAX_WRITER_VERSION = 4
KNOWN_READER_FEATURES = frozenset({"avroState", "multiPartCheckpoint", "schemaDeduplication"})
KNOWN_WRITER_FEATURES = KNOWN_READER_FEATURES

# What new tables are created with.
CURRENT_PROTOCOL = Protocol(
    min_reader_version=4,
    min_writer_version=4,
    reader_features=["avroState", "schemaDeduplication"],
    writer_features=["avroState", "schemaDeduplication"],
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
