"""One listing of `_transaction_log/`, classified: version files, JSON checkpoints (single-file and
multi-part), Avro state directories, shared manifests."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from indextables_spark.core.log.model.paths import LOG_DIR, MANIFESTS_DIR, version_key
from indextables_spark.core.storage import FileInfo, Storage

_VERSION_RE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.json$")
_CHECKPOINT_PART_RE = re.compile(r"^(\d{20})\.checkpoint\.([^./]+)\.(\d+)\.json$")
_STATE_RE = re.compile(r"^state-v(\d{20})/(.+)$")


@dataclass
class LogListing:
    versions: list[int] = field(default_factory=list)
    version_info: dict[int, FileInfo] = field(default_factory=dict)
    json_checkpoints: dict[int, str] = field(default_factory=dict)  # version -> key
    checkpoint_parts: dict[int, list[str]] = field(default_factory=dict)  # version -> part keys
    state_manifests: dict[int, str] = field(default_factory=dict)  # version -> _manifest key
    state_files: dict[int, list[FileInfo]] = field(default_factory=dict)  # version -> files in dir
    manifests: list[FileInfo] = field(default_factory=list)  # under manifests/
    last_checkpoint: FileInfo | None = None

    @property
    def latest_version(self) -> int:
        """The newest version the listing shows: a version file, or an Avro state / JSON checkpoint
        newer than every version file. The reference implementation leaves tables whose newest
        versions exist only as `state-vN/` directories (its version files after 0 are gone), so
        the last version file is not always the table's version. Our own writers create a state
        or checkpoint only after its version file, so for our tables this is the last version file."""
        newest = [self.versions[-1]] if self.versions else []
        newest += [max(d) for d in (self.state_manifests, self.json_checkpoints, self.checkpoint_parts) if d]
        return max(newest) if newest else -1

    def has_versions(self, first: int, last: int) -> bool:
        """Are version files first..last (inclusive) all present?"""
        if first > last:
            return True
        vs = self.version_info
        return all(v in vs for v in range(first, last + 1))

    def missing_versions(self, first: int, last: int) -> list[int]:
        return [v for v in range(first, last + 1) if v not in self.version_info]

    def state_dir_info(self, version: int) -> FileInfo | None:
        files = self.state_files.get(version) or []
        key = self.state_manifests.get(version)
        return next((f for f in files if f.key == key), None)


def list_log(storage: Storage) -> LogListing:
    out = LogListing()
    prefix = f"{LOG_DIR}/"
    manifests_prefix = f"{MANIFESTS_DIR}/"
    for info in storage.list(prefix):
        rest = info.key[len(prefix) :]
        if info.key.startswith(manifests_prefix):
            out.manifests.append(info)
            continue
        if "/" not in rest:
            m = _VERSION_RE.match(rest)
            if m:
                v = int(m.group(1))
                out.versions.append(v)
                out.version_info[v] = info
                continue
            m = _CHECKPOINT_RE.match(rest)
            if m:
                out.json_checkpoints[int(m.group(1))] = info.key
                continue
            m = _CHECKPOINT_PART_RE.match(rest)
            if m:
                out.checkpoint_parts.setdefault(int(m.group(1)), []).append(info.key)
                continue
            if rest == "_last_checkpoint":
                out.last_checkpoint = info
            continue
        m = _STATE_RE.match(rest)
        if m:
            v = int(m.group(1))
            out.state_files.setdefault(v, []).append(info)
            name = m.group(2)
            if name == "_manifest.avro":
                out.state_manifests[v] = info.key
            elif name == "_manifest.json" and v not in out.state_manifests:
                out.state_manifests[v] = info.key
    out.versions.sort()
    _fill_version_holes(storage, out)
    for parts in out.checkpoint_parts.values():
        parts.sort()
    return out


def _fill_version_holes(storage: Storage, out: LogListing) -> None:
    """A directory listing taken while files are being created may return a newer version file but
    miss an older one created during the listing (POSIX leaves entries added during readdir
    unspecified; seen on local disk under load). Version files are never created out of order, so
    a hole between the first and last listed version is checked directly before anyone concludes
    that a file is missing."""

    if len(out.versions) < 2 or out.versions[-1] - out.versions[0] + 1 == len(out.versions):
        return
    found = False
    for v in range(out.versions[0], out.versions[-1]):
        if v not in out.version_info:
            info = storage.stat(version_key(v))
            if info is not None:
                out.version_info[v] = info
                found = True
    if found:
        out.versions = sorted(out.version_info)
