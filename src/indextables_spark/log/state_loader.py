"""Finding the base state for a snapshot: the newest checkpoint or Avro state at or below a version.

The V4 state layer (checkpoints, Avro state) plugs in here; without any checkpoint the whole log
is replayed from version 0.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .table_log import BaseState, TransactionLog


def load_base_state(log: "TransactionLog", version: int) -> "BaseState | None":
    return None


def latest_checkpoint_version(log: "TransactionLog") -> int | None:
    return None


def after_commit(log: "TransactionLog", version: int) -> None:
    """Post-commit work (automatic checkpoints)."""
    return None
