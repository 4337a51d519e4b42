"""Schema (doc mapping) deduplication: canonical JSON, SHA-256, base64, 16 characters."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from typing import Any

REGISTRY_PREFIX = "docMappingSchema."


def canonicalize(value: Any) -> Any:
    """Sort object keys; sort arrays whose items are all objects with a "name" by name."""
    if isinstance(value, dict):
        return {k: canonicalize(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        items = [canonicalize(v) for v in value]
        if items and all(isinstance(v, dict) and "name" in v for v in items):
            items.sort(key=lambda v: str(v["name"]))
        return items
    return value


def canonical_json(doc_mapping_json: str) -> str:
    return json.dumps(canonicalize(json.loads(doc_mapping_json)), separators=(",", ":"), ensure_ascii=False)


def doc_mapping_hash(doc_mapping_json: str) -> str:
    digest = hashlib.sha256(canonical_json(doc_mapping_json).encode("utf-8")).digest()
    return base64.b64encode(digest).decode("ascii")[:16]


def registry_key(ref: str) -> str:
    return REGISTRY_PREFIX + ref


def is_reference_doc_mapping(doc_mapping: str | None) -> bool:
    """A doc mapping the reference implementation (IndexTables4Spark) wrote: a JSON array of
    Quickwit field mappings (`name`, `type`), without the `column` every field of ours names.
    None/empty/unparsable: False (unknown)."""
    if not doc_mapping:
        return False
    return _is_reference_text(doc_mapping)


@functools.lru_cache(maxsize=1024)  # every commit asks about the table's registry entries
def _is_reference_text(doc_mapping: str) -> bool:
    try:
        items = json.loads(doc_mapping)
    except (TypeError, ValueError):
        return False
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(d, dict) and "name" in d and "type" in d and "column" not in d for d in items)
    )
