"""Transaction log actions on the wire (docs/reference/table-format.md, "Actions"): `{"<kind>": {...}}`
in version files.

What the reference implementation (IndexTables4Spark) reads, and hence what we write into version
files (`action_to_json` with the file's version, `wire_actions`). Paths below are in
indextables/indextables_spark under src/main/scala/io/indextables/spark/ (tag v0.5.4, the version
that wrote tests/data/reference_v0.5.4) and in indextables/tantivy4java under native/src/txlog/:

- v0.5.4 (the Scala log; case classes in `transaction/Actions.scala`, `LastCheckpointInfo` in
  `transaction/TransactionLogCheckpoint.scala`, read with `util/JsonUtil.scala`'s
  `new ObjectMapper().registerModule(DefaultScalaModule)`): Jackson's default
  FAIL_ON_UNKNOWN_PROPERTIES is on (only `transaction/avro/StateManifestIO.scala`'s own mapper
  turns it off), so a field the case class does not declare makes the action unreadable. The
  default `OptimizedTransactionLog.readActionsFromLocalFile` then logs an error and *drops that
  line* (an add we wrote would vanish for it); `TransactionLog.parseActionsFromStream`,
  `TransactionLogCheckpoint.parseActionLine` and PURGE's checkpoint reader throw. Unknown action
  kinds: skipped with a warning by the default path (`parseAction` → None), "Unknown action type"
  in those others. A missing `Option` field reads as None and `null` is accepted for every
  `Option`; the reference itself writes `null`s (Jackson's default inclusion:
  `"readerFeatures":null`, `"parts":null`).
- current (the log moved to tantivy4java's Rust `actions.rs` / `version_file.rs`): serde without
  deny_unknown_fields, so unknown fields and unknown action keys are ignored; required: add
  {path, size, modificationTime}, remove {path}, mergeskip {path, skipTimestamp, reason}, protocol
  {minReaderVersion, minWriterVersion}, metaData {id, schemaString}; `partitionValues` and
  `configuration` are `HashMap<String, String>`: a `null` value in them fails the whole file. It
  writes no nulls (`skip_serializing_if`).

Hence in version files: only the fields of the reference's AddAction / RemoveAction / SkipAction /
ProtocolAction / MetadataAction, no nulls, a null partition value as a missing key (as in the Avro
state), and an add's addedAtVersion / addedAtTimestamp (ours, not reference fields) only where a
reader cannot derive them from the file (its version, its commitInfo timestamp: `derive_added_at`)
— so not in ordinary commits. Our own action kinds (commitInfo, deleteLog, statsFiles) stay: the
reference's default reader skips them (a table with delete logs is not for it anyway). The hotcache
offsets are kept as read; the reference itself opens a split from its footer offsets
(`search/SplitSearchEngine.scala`: "Hotcache methods deprecated ... using footer offsets").
"""

from __future__ import annotations

from typing import Any, Iterable

from indextables_spark.core.log.model.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeleteLog,
    Metadata,
    Protocol,
    RemoveFile,
    SkipAction,
    StatsFiles,
)
from indextables_spark.errors import CorruptStateError

_WIRE_KEY: dict[type[Action], str] = {
    AddFile: "add",
    RemoveFile: "remove",
    Protocol: "protocol",
    Metadata: "metaData",
    SkipAction: "mergeskip",
    CommitInfo: "commitInfo",
    DeleteLog: "deleteLog",
    StatsFiles: "statsFiles",
}
_FROM_WIRE: dict[str, type[Action]] = {v: k for k, v in _WIRE_KEY.items()}
# The reference's current Scala serializer (ActionJsonSerializer.actionsToJsonLines) names a skip
# "skip"; its readers accept "skip" and "mergeskip". We write "mergeskip" (what v0.5.4 and the Rust
# port read) and accept both.
_FROM_WIRE["skip"] = SkipAction


def _wire_add(d: dict[str, Any], version: int | None, commit_timestamp: int | None) -> dict[str, Any]:
    """An add as the reference reads it in a version file of `version` (see the module docstring)."""
    pv = d.get("partitionValues")
    if pv:
        d["partitionValues"] = {k: v for k, v in pv.items() if v is not None}
    if version is not None and d.get("addedAtVersion") == version:
        del d["addedAtVersion"]
        if commit_timestamp is not None and d.get("addedAtTimestamp") == commit_timestamp:
            del d["addedAtTimestamp"]
    return d


def action_to_json(action: Action, version: int | None = None, commit_timestamp: int | None = None) -> dict[str, Any]:
    """The wire form of an action: `{"<kind>": {...}}`.

    With `version` (the version file it goes into; `commit_timestamp`: that file's commitInfo
    timestamp) an add omits addedAtVersion / addedAtTimestamp when they equal those — our readers
    derive them from the version file, the reference's v0.5.4 reader refuses fields it does not
    know — and null partition values are written as missing keys (the reference's Rust reader
    cannot read a null map value). Without `version` (checkpoints, repair) they are kept."""
    body = action.to_json()
    if isinstance(action, AddFile):
        body = _wire_add(body, version, commit_timestamp)
    elif isinstance(action, RemoveFile) and body.get("partitionValues"):
        body["partitionValues"] = {k: v for k, v in body["partitionValues"].items() if v is not None}
    return {_WIRE_KEY[type(action)]: body}


def wire_actions(actions: Iterable[Action], version: int | None = None) -> list[dict[str, Any]]:
    """The wire form of the actions of one version file (`version`, when known)."""
    acts = list(actions)
    ts = next((a.timestamp for a in acts if isinstance(a, CommitInfo) and a.timestamp), None)
    return [action_to_json(a, version, ts) for a in acts]


def derive_added_at(actions: list[Action], version: int) -> list[Action]:
    """The inverse of `wire_actions`: adds (and delete logs) of version file `version` that do
    not record addedAtVersion / addedAtTimestamp get the file's version and its commitInfo
    timestamp (reference files have no commitInfo: the timestamp stays unknown here)."""
    ts = next((a.timestamp for a in actions if isinstance(a, CommitInfo) and a.timestamp), None)
    for a in actions:
        if isinstance(a, (AddFile, DeleteLog)):
            if a.added_at_version is None:
                a.added_at_version = version
            if a.added_at_timestamp is None and ts is not None:
                a.added_at_timestamp = ts
    return actions


def action_from_json(obj: dict[str, Any], where: str) -> Action | None:
    """Parse one wire action. Unknown action kinds are ignored (forward compatibility)."""
    if not isinstance(obj, dict) or len(obj) != 1:
        raise CorruptStateError(f"{where}: expected an object with one action key, got {str(obj)[:200]}")
    ((key, body),) = obj.items()
    cls = _FROM_WIRE.get(key)
    if cls is None:
        return None
    if not isinstance(body, dict):
        raise CorruptStateError(f"{where}: action {key!r} is not an object")
    return cls.from_json(body)
