"""Names of the files under `_transaction_log/`."""

from __future__ import annotations

import re

LOG_DIR = "_transaction_log"
LAST_CHECKPOINT = f"{LOG_DIR}/_last_checkpoint"
MANIFESTS_DIR = f"{LOG_DIR}/manifests"

_VERSION_RE = re.compile(r"^(\d{20})\.json$")


def version_key(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


def parse_version_name(name: str) -> int | None:
    """The version of a version file name (`00000000000000000042.json`), else None."""
    m = _VERSION_RE.match(name)
    return int(m.group(1)) if m else None


def state_dir_name(version: int) -> str:
    return f"state-v{version:020d}"
