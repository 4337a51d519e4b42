"""Schema (doc mapping) deduplication: canonical JSON, SHA-256, base64, 16 characters."""

from __future__ import annotations

import base64
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
