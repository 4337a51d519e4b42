"""Credentials never leak: not into anything written under the table, not into log records (ours
or the storage SDKs' at DEBUG), exception texts, reprs, results of the commands, or CLI output.

Distinctive secret values are used: on S3 an access key, secret key and session token of our own
(moto accepts any); on Azure the account key of a connection string (Azurite's development key,
which is what authenticates every request here) and, in the Spark test, a SAS token. `leaks()`
gathers every object under a table — version files gunzipped, Avro state manifests and manifests
decoded, splits as raw bytes — and reports where any secret (raw, URL-encoded or URL-decoded)
appears. test_cloud_spark.py runs the same check on a Spark round trip.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import secrets as _random
import traceback
from urllib.parse import quote, unquote

import pytest
from cloud_helpers import wipe_cloud_tables  # noqa: F401  (autouse: deletes what each test wrote)
from cmd_helpers import append, rows
from faults import AzureFaults, S3Faults

import indextables_spark as it
from indextables_spark.frontends import cli
from indextables_spark.errors import IndexTablesError, InvalidOptionError, StorageError
from indextables_spark.config.options import Options
from indextables_spark.core.storage import open_storage

pytestmark = pytest.mark.cloud


def s3_secrets() -> dict[str, str]:
    tag = _random.token_hex(6).upper()
    return {
        "spark.indextables.aws.accessKey": f"AKIAIT{tag}",
        "spark.indextables.aws.secretKey": f"itSecret/{_random.token_urlsafe(24)}+Key",
        "spark.indextables.aws.sessionToken": f"itSessionToken{_random.token_urlsafe(30)}",
    }


def secret_options(target) -> tuple[dict[str, str], list[str]]:
    """The target's options with distinctive credentials, and the secret values to look for."""
    if target.kind == "s3":
        creds = s3_secrets()
        return {**target.options, **creds}, list(creds.values())
    cs = target.options["spark.indextables.azure.connectionString"]
    key = next(p.split("=", 1)[1] for p in cs.split(";") if p.startswith("AccountKey="))
    return dict(target.options), [key, cs]


def forms(secret: str) -> set[str]:
    return {f for f in (secret, quote(secret, safe=""), unquote(secret)) if len(f) >= 6}


def find_secrets(text: str | bytes, secret_values, where: str) -> list[str]:
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    return [f"{where}: contains {s[:4]}…" for s in secret_values for f in forms(s) if f.encode() in data]


def object_texts(storage) -> dict[str, bytes]:
    """Every object under the storage root as searchable bytes (decompressed/decoded views added)."""
    import fastavro

    out: dict[str, bytes] = {}
    for info in storage.list(""):
        data = storage.read(info.key)
        views = [data]
        if data[:2] == b"\x1f\x8b":
            views.append(gzip.decompress(data))
        if data[:4] == b"Obj\x01":
            reader = fastavro.reader(io.BytesIO(data))
            views.append(json.dumps(reader.writer_schema).encode())
            views.append(json.dumps(reader.metadata, default=str).encode())
            views += [json.dumps(r, default=str).encode() for r in reader]
        out[info.key] = b"\n".join(views)
    return out


def leaks(storage, secret_values, texts: dict[str, str] | None = None) -> list[str]:
    """Where any secret shows up: objects under the storage root and the given texts."""
    found: list[str] = []
    objects = object_texts(storage)
    assert objects, f"nothing written under {storage.uri}"
    for key, data in objects.items():
        found += find_secrets(data, secret_values, storage.full_uri(key))
    for where, text in (texts or {}).items():
        found += find_secrets(text, secret_values, where)
    return found


def exception_text(e: BaseException) -> str:
    """The full traceback text, chained causes included."""
    return "".join(traceback.format_exception(e))


def test_no_secret_in_objects_logs_errors_reprs_or_outputs(cloud_backend, caplog, capsys, tmp_path):
    caplog.set_level(logging.DEBUG)  # root and every library logger, the storage SDKs included
    opts, secret_values = secret_options(cloud_backend)
    opts["spark.indextables.cache.disk.path"] = str(tmp_path / "cache")
    uri = cloud_backend.uri
    texts: dict[str, str] = {}

    # writes (the Spark writer's own functions), commands and reads
    for w in range(3):
        append(uri, rows(20, start=w * 20), options=opts)
    t = it.IndexTable(uri, opts)
    texts["checkpoint"] = repr(t.maintenance.checkpoint())
    append(uri, rows(5, start=100), options=opts, overwrite=True)  # read through the split cache below
    texts["merge"] = repr(t.maintenance.merge_splits())
    texts["compact"] = repr(t.maintenance.compact())
    texts["describe_state"] = repr(t.inspect.state())
    texts["describe_transaction_log"] = repr(t.inspect.transaction_log(include_all=True).to_pylist())
    texts["history"] = repr(t.inspect.history())
    texts["snapshot"] = repr(t.snapshot().metadata) + repr(t.snapshot().protocol)
    texts["purge"] = repr(t.maintenance.purge(dry_run=True))
    last = rows(5, start=100)
    assert t.count() == 5
    assert t.count(query="body:alpha") == sum("alpha" in b.split() for b in last.column("body").to_pylist())
    texts["reprs"] = " ".join(repr(x) for x in (t, t.storage, Options.of(opts), t.options, t.log))
    texts["str options"] = str(Options.of(opts)) + str(Options.of(opts).redacted())

    # the CLI (options through -o KEY=VALUE)
    flags = [a for k, v in opts.items() for a in ("-o", f"{k}={v}")]
    for command in (
        ["describe-state", uri],
        ["describe-state", uri, "--json"],
        ["history", uri, "--json"],
        ["describe-state", uri + "-missing"],
    ):
        code = cli.main(command + flags)
        out, err = capsys.readouterr()
        texts[f"cli {command}"] = f"{code}\n{out}\n{err}"
    assert '"tableVersion"' in texts[f"cli {['describe-state', uri, '--json']}"]

    # error texts: a missing table, a refused request (HTTP 403), an option error
    with pytest.raises(it.TableNotFoundError) as missing:
        it.IndexTable(uri + "-missing", opts).snapshot()
    texts["missing table"] = exception_text(missing.value)
    if cloud_backend.kind == "s3":
        faults = S3Faults(permanent_status=403)
        denied = cloud_backend.with_options(**opts).open(event_handlers=faults.handlers())
    else:
        faults = AzureFaults(permanent_status=403)
        denied = cloud_backend.with_options(**opts).open(client_kwargs={"transport": faults})
    with pytest.raises(StorageError, match="403") as forbidden:
        it.IndexTable(uri, opts, storage=denied).snapshot()
    texts["403"] = exception_text(forbidden.value)
    broken = {**opts}
    if cloud_backend.kind == "s3":
        del broken["spark.indextables.aws.secretKey"]
    else:
        broken["spark.indextables.azure.connectionString"] = broken["spark.indextables.azure.connectionString"].replace(
            "AccountName=devstoreaccount1;", ""
        )
    with pytest.raises(IndexTablesError) as bad_option:
        open_storage(uri, broken).list("")
    assert isinstance(bad_option.value, (InvalidOptionError, StorageError))
    texts["option error"] = exception_text(bad_option.value)

    # the logs really hold the SDKs' request traces (else the check below would prove little)
    sdk = "botocore" if cloud_backend.kind == "s3" else "azure"
    assert sum(r.name.startswith(sdk) for r in caplog.records) > 50
    assert any(r.name.startswith("indextables_spark") for r in caplog.records)
    texts["log records"] = caplog.text + "\n".join(str(r.msg) + repr(r.args) for r in caplog.records)

    assert leaks(t.storage, secret_values, texts) == []
    # metadata records table settings only, never connection options
    config = t.snapshot().metadata["configuration"]
    assert all(k.startswith(("spark.indextables.indexing.", "docMappingSchema.")) for k in config), sorted(config)
