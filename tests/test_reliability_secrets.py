"""Secrets: credentials given as options are never written into the table, logged (at any level,
ours or the SDKs'), or shown (reprs, results, error messages, CLI output). Every byte of output and
every file the operations produced is searched for the secret values."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import uuid

import pytest

import indextables_spark as it
from indextables_spark.errors import IndexTablesError

sys.path.insert(0, os.path.dirname(__file__))
from cmd_helpers import append, rows  # noqa: E402


def _exercise(uri: str, options: dict, tmp_path) -> list[str]:
    """Real operations; returns every text they showed (results, reprs, errors)."""
    shown: list[str] = []
    opts = {
        **options,
        "spark.indextables.cache.disk.path": str(tmp_path / "cache"),
        "spark.indextables.purge.retentionCheckEnabled": "false",
    }
    # The Spark writer's own functions (plan on the driver, splits in a task, commit).
    append(uri, rows(30), options=opts)
    append(uri, rows(30, start=30), options=opts)
    t = it.IndexTable(uri, opts)
    shown += [repr(t), repr(t.options), repr(t.storage), str(t.storage.uri)]
    shown.append(json.dumps(t.maintenance.checkpoint(), default=str))
    shown.append(json.dumps(t.maintenance.merge_splits(), default=str))
    shown.append(json.dumps(t.maintenance.purge(older_than_hours=0), default=str))
    shown.append(json.dumps(t.inspect.state(), default=str))
    shown.append(json.dumps(t.inspect.history(), default=str))
    shown.append(str(t.inspect.transaction_log(include_all=True).to_pylist()))
    shown.append(str(t.count(query="alpha")))
    shown.append(str(t.snapshot().metadata))
    # Errors: a version that does not exist, a table that does not exist, bad credentials.
    for fn in (lambda: t.snapshot(999), lambda: it.IndexTable(uri + "-missing", opts).snapshot()):
        with pytest.raises(IndexTablesError) as e:
            fn()
        shown += [str(e.value), repr(e.value)]
    return shown


def _cli(uri: str, options: dict) -> str:
    args = [sys.executable, "-m", "indextables_spark.frontends.cli", "describe-state", uri, "--json"]
    for k, v in options.items():
        args += ["-o", f"{k}={v}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr + " ".join(a for a in args if "=" not in a)


def _all_stored_bytes(target) -> list[tuple[str, bytes]]:
    s = target.open()
    return [(i.key, s.read(i.key)) for i in s.list("")]


def _local_files(root) -> list[tuple[str, bytes]]:
    out = []
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out.append((p, fh.read()))
    return out


@pytest.mark.cloud
@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_credentials_are_never_written_logged_or_shown(kind, request, tmp_path, capfd):
    from conftest import _target

    target = _target(kind, request)
    if kind == "s3":
        # moto accepts any key pair: use unique, greppable ones.
        secrets = [f"AKIA{uuid.uuid4().hex[:16].upper()}", f"secret-{uuid.uuid4().hex}", f"token-{uuid.uuid4().hex}"]
        options = {
            **target.options,
            "spark.indextables.aws.accessKey": secrets[0],
            "spark.indextables.aws.secretKey": secrets[1],
            "spark.indextables.aws.sessionToken": secrets[2],
        }
    else:
        conn = target.options["spark.indextables.azure.connectionString"]
        key = next(p.split("=", 1)[1] for p in conn.split(";") if p.startswith("AccountKey="))
        secrets = [key, key[:24]]
        options = dict(target.options)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        shown = _exercise(target.uri, options, tmp_path)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    shown.append(_cli(target.uri, options))
    out, err = capfd.readouterr()
    texts = {
        "log records (DEBUG, every logger)": stream.getvalue(),
        "stdout": out,
        "stderr": err,
        "results, reprs, errors, CLI": "\n".join(shown),
    }
    assert len(stream.getvalue()) > 1000, "the operations logged (almost) nothing: the test would prove nothing"
    files = _all_stored_bytes(target) + _local_files(tmp_path)
    assert any(k.endswith(".split") for k, _ in files) and any("_transaction_log" in k for k, _ in files)
    leaks = []
    for secret in secrets:
        for name, text in texts.items():
            if secret in text:
                i = text.index(secret)
                leaks.append(f"{name}: ...{text[max(0, i - 80) : i]}<SECRET>...")
        for key, data in files:
            if secret.encode() in data:
                leaks.append(f"file {key}")
    assert not leaks, "\n".join(leaks[:20])
