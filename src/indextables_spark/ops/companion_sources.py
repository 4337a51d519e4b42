"""What a companion index indexes: the data files of a Delta, Iceberg or Parquet source at one version.

Sources are read with well-kept libraries: `deltalake` (delta-rs) for Delta, `pyiceberg` for
Iceberg, our storage layer plus the Parquet footer for plain Parquet directories (hive
partitions). Each returns a `SourceSnapshot`: the files to index, with what a reader needs to read
them again later (full URI, size) and to rebuild the rows (partition values as strings, as Delta
records them). Credentials: our `spark.indextables.*` options mapped onto deltalake's storage
options and pyiceberg's FileIO properties. Credentials that come from a provider callable, an AWS
profile, an assumed role or an Azure token credential (`azure.authType`) are resolved through our
storage layer and handed over as keys / a bearer token: snapshots taken when the source is opened
(at the start of a build), which the libraries do not refresh. A build longer than their life
would need the libraries' own refresh; our own reads of the data files refresh as usual.

A companion index addresses rows by their position in a data file, so sources whose files do not
hold exactly the live rows are refused: Delta deletion vectors, Iceberg delete files. Delta column
mapping is refused too (the files' column names are not the table's).

    open_source(format, source, *, options, version, catalog, catalog_type) -> SourceSnapshot
    storage_options_for_deltalake(uri, options) -> dict   (deltalake / object_store keys)
    fileio_properties_for_iceberg(uri, options) -> dict   (pyiceberg FileIO properties)
    normalize_schema(schema) -> pa.Schema                  (Arrow types as Spark reads them)
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import quote, unquote, urlsplit

import pyarrow as pa

from indextables_spark.errors import (
    IndexTablesError,
    InvalidOptionError,
    ProtocolVersionError,
    SchemaMismatchError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from indextables_spark.config.options import SECRET_KEYS, Options
from indextables_spark.core.storage.redaction import Redactor, redact_uri

FORMATS = ("delta", "iceberg", "parquet")

INSTALL_HINT = "pip install 'indextables_spark[companion]'"


@dataclass(frozen=True)
class SourceFile:
    key: str  # identity used by sync: the path the source records
    # (Delta/Parquet: relative to the root; Iceberg: absolute)
    uri: str  # full URI / absolute local path to read the file from
    size: int  # bytes, as recorded by the source (checked at read time)
    num_records: int | None  # rows, when the source records it
    partition_values: dict[str, str | None] = field(default_factory=dict)  # partition column -> value as text


@dataclass(frozen=True)
class SourceSnapshot:
    format: str  # "delta" | "iceberg" | "parquet"
    source: str  # what the user named (path or Iceberg identifier)
    root: str  # the table's root URI
    version: int | None  # Delta version / Iceberg snapshot id / None (Parquet)
    schema: pa.Schema  # every column (partition columns included), Arrow types
    # as Spark reads them (string, not large_string; timestamp[us, UTC])
    partition_columns: list[str]
    files: list[SourceFile]


# ------------------------------------------------------------------------------------------------
# entry point
# ------------------------------------------------------------------------------------------------


def open_source(
    format: str,
    source: str,
    *,
    options: "Options | Mapping | None" = None,
    version: int | None = None,
    catalog: str | None = None,
    catalog_type: str | None = None,
) -> SourceSnapshot:
    """The data files of `source` at `version` (Delta version / Iceberg snapshot id; latest when None).

    Iceberg: with `catalog`, `source` is a table identifier ("db.table") of that catalog (its
    properties come from the options `iceberg.catalog.<catalog>.<key>`); without, the path of a
    table metadata JSON file or of a table directory (its newest `metadata/*.metadata.json`)."""
    fmt = _check_format(format)
    if not isinstance(source, str) or not source.strip():
        raise InvalidOptionError(f"companion source: expected a non-empty path or table name, got {source!r}")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise InvalidOptionError(f"companion source {source!r}: version must be an integer, got {version!r}")
    if fmt != "iceberg" and (catalog is not None or catalog_type is not None):
        raise InvalidOptionError(
            f"companion source {source!r}: a catalog is only used by format 'iceberg', not {fmt!r}"
        )
    opts = options if isinstance(options, Options) else Options.of(options)
    if fmt == "delta":
        return _open_delta(source, opts, version)
    if fmt == "iceberg":
        return _open_iceberg(source, opts, version, catalog, catalog_type)
    if version is not None:
        raise InvalidOptionError(
            f"Parquet source {redact_uri(source)}: a plain Parquet directory has no versions (got version {version})"
        )
    return _open_parquet(source, opts)


def _check_format(format: str) -> str:
    fmt = format.strip().lower() if isinstance(format, str) else None
    if fmt not in FORMATS:
        raise InvalidOptionError(
            f"companion source format {format!r} is not supported; use one of {', '.join(FORMATS)}"
        )
    return fmt


def _require(module: str, fmt: str) -> Any:
    """Import an optional dependency; a clear install hint when it is missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise InvalidOptionError(
            f"format {fmt!r} needs the {module.split('.')[0]} package: {INSTALL_HINT} ({e})"
        ) from None


# ------------------------------------------------------------------------------------------------
# schemas
# ------------------------------------------------------------------------------------------------


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """Arrow types as Spark reads them: string/binary/list instead of their large and view variants,
    timestamps in microseconds (tz-aware ones in UTC, naive ones naive), no field or schema
    metadata (Iceberg field ids, pandas metadata). Nullability is kept."""
    return pa.schema([_normalize_field(f) for f in schema])


def _normalize_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _normalize_type(f.type), nullable=f.nullable)


def _normalize_type(t: pa.DataType) -> pa.DataType:
    types = pa.types
    if types.is_large_string(t) or types.is_string_view(t):
        return pa.string()
    if types.is_large_binary(t) or types.is_binary_view(t):
        return pa.binary()
    if types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if types.is_dictionary(t):
        return _normalize_type(t.value_type)
    if (
        types.is_list(t)
        or types.is_large_list(t)
        or types.is_fixed_size_list(t)
        or types.is_list_view(t)
        or types.is_large_list_view(t)
    ):
        return pa.list_(_normalize_field(t.value_field))
    if types.is_map(t):
        return pa.map_(_normalize_field(t.key_field), _normalize_field(t.item_field), keys_sorted=t.keys_sorted)
    if types.is_struct(t):
        return pa.struct([_normalize_field(t.field(i)) for i in range(t.num_fields)])
    return t


# ------------------------------------------------------------------------------------------------
# partition values as text (the way Delta records them)
# ------------------------------------------------------------------------------------------------

_EPOCH = _dt.datetime(1970, 1, 1)


def _partition_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return f"{text}.{value.microsecond:06d}" if value.microsecond else text
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()  # rare (binary partition columns); hex keeps it printable and exact
    return str(value)


# ------------------------------------------------------------------------------------------------
# URIs and credentials
# ------------------------------------------------------------------------------------------------

_S3_SCHEMES = ("s3", "s3a", "s3n")
_AZURE_SCHEMES = ("abfss", "abfs", "wasbs", "wasb", "az", "azure")


def _scheme(uri: str | None) -> str:
    if not uri:
        return ""
    if len(uri) > 2 and uri[1] == ":" and uri[2] in "\\/":  # a Windows drive, not a scheme
        return ""
    try:
        return urlsplit(uri).scheme.lower()
    except ValueError:
        return ""


def _is_local(uri: str) -> bool:
    return _scheme(uri) in ("", "file")


def _local_path(uri: str) -> str:
    """Absolute local path of a plain path or file:// URI."""
    if _scheme(uri) == "file":
        return os.path.abspath(unquote(urlsplit(uri).path))
    return os.path.abspath(uri)


def _http_endpoint(raw: str | None) -> str | None:
    """An endpoint URL, https:// added when the scheme is missing (as our storage backends do)."""
    raw = (raw or "").strip()
    if not raw:
        return None
    return raw if "://" in raw else "https://" + raw


@dataclass(frozen=True)
class _AwsSettings:
    access_key: str | None
    secret_key: str | None
    session_token: str | None
    region: str | None
    endpoint: str | None
    path_style: bool


def _aws_settings(opts: Options, credentials_uri: str | None = None) -> _AwsSettings:
    """With `credentials_uri`, credentials from a provider / profile / assumed role are resolved
    for that path (see the module doc: a snapshot) and replace the static keys."""
    endpoint = _http_endpoint(opts.get_str("s3.endpoint"))
    # our S3 backend falls back to us-east-1 when an endpoint is set without a region (S3-compatible
    # services); without it pyiceberg would look the bucket's region up on AWS
    region = opts.get_str("aws.region") or ("us-east-1" if endpoint else None)
    keys = (opts.get_str("aws.accessKey") or None, opts.get_str("aws.secretKey") or None)
    session_token = opts.get_str("aws.sessionToken") or None
    if credentials_uri is not None and _names_aws_source(opts):
        from indextables_spark.core.storage.aws_auth import aws_credentials_snapshot

        snapshot = aws_credentials_snapshot(opts, credentials_uri, endpoint)
        if snapshot is not None:
            keys, session_token = (snapshot.access_key, snapshot.secret_key), snapshot.session_token
    return _AwsSettings(keys[0], keys[1], session_token, region, endpoint, opts.get_bool("s3.pathStyleAccess"))


@dataclass(frozen=True)
class _AzureSettings:
    account: str | None
    account_key: str | None
    sas_token: str | None
    tenant_id: str | None
    client_id: str | None
    client_secret: str | None
    bearer_token: str | None
    endpoint: str | None  # blob service URL (Azurite: http://host:port/account)
    connection_string: str | None
    suffix: str | None  # endpoint suffix named by the URI (core.windows.net ...)


def _azure_uri_parts(uri: str | None) -> tuple[str | None, str | None, str | None, str]:
    """(container, account, endpoint suffix, path) of an Azure URI; account/suffix None when not in it."""
    if not uri or _scheme(uri) not in _AZURE_SCHEMES:
        return None, None, None, ""
    parts = urlsplit(uri)
    container, account, suffix = parts.netloc, None, None
    if "@" in container:
        container, host = container.split("@", 1)
        labels = host.split(":", 1)[0].split(".")
        account = labels[0] or None
        if len(labels) > 2 and labels[1] in ("dfs", "blob"):
            suffix = ".".join(labels[2:])
    return container or None, account, suffix, parts.path.strip("/")


def _azure_settings(uri: str | None, opts: Options, credentials_uri: str | None = None) -> _AzureSettings:
    """With `credentials_uri`, a provider's or `azure.authType`'s token is fetched for that path
    (see the module doc: a snapshot) and given as the bearer token, in place of the identity's ids."""
    from indextables_spark.core.storage.azure import azure_token_snapshot
    from indextables_spark.core.storage.azure_auth import parse_connection_string

    cs = opts.get_str("azure.connectionString") or None
    conn = parse_connection_string(cs, redact_uri(uri or "")) if cs else {}
    _, uri_account, suffix, _ = _azure_uri_parts(uri)
    account = uri_account or opts.get_str("azure.accountName") or conn.get("accountname")
    endpoint = (opts.get_str("azure.endpoint") or "").strip() or conn.get("blobendpoint")
    if not endpoint and conn.get("endpointsuffix") and account:
        proto = conn.get("defaultendpointsprotocol", "https")
        endpoint = f"{proto}://{account}.blob.{conn['endpointsuffix']}"
    sas = conn.get("sharedaccesssignature") or opts.get_str("azure.sasToken")
    identity = {k: opts.get_str(f"azure.{k}") or None for k in ("tenantId", "clientId", "clientSecret")}
    bearer_token = opts.get_str("azure.bearerToken") or None
    if credentials_uri is not None and (opts.get_str("azure.credentialsProvider") or opts.get_str("azure.authType")):
        snapshot = azure_token_snapshot(credentials_uri, opts)
        if snapshot is not None:  # the libraries would try the identity themselves, or refuse two credentials
            identity = dict.fromkeys(identity)
            bearer_token = snapshot.token
    return _AzureSettings(
        account=account,
        account_key=conn.get("accountkey") or opts.get_str("azure.accountKey") or None,
        sas_token=sas.lstrip("?") if sas else None,
        tenant_id=identity["tenantId"],
        client_id=identity["clientId"],
        client_secret=identity["clientSecret"],
        bearer_token=bearer_token,
        endpoint=_http_endpoint(endpoint).rstrip("/") if endpoint else None,
        connection_string=cs,
        suffix=suffix,
    )


def _set(out: dict[str, str], key: str, value: str | None) -> None:
    if value:
        out[key] = value


def storage_options_for_deltalake(uri: str, options: "Options | Mapping | None") -> dict[str, str]:
    """deltalake (object_store) storage options for `uri` from our options; only keys that are set.

    S3: AWS_* keys (AWS_ALLOW_HTTP for an http endpoint, AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false for
    path-style access). Azure: azure_storage_* keys; object_store reads no connection strings, so
    ours is taken apart (account, key or SAS, BlobEndpoint); `allow_http` for an http endpoint
    such as Azurite's. Local paths need nothing. Credentials from a provider, profile, assumed role
    or azure.authType: their current keys / token, asked for `uri` (a snapshot, see the module doc)."""
    opts = options if isinstance(options, Options) else Options.of(options)
    scheme = _scheme(uri)
    out: dict[str, str] = {}
    if scheme in _S3_SCHEMES:
        s3 = _aws_settings(opts, credentials_uri=uri)
        _set(out, "AWS_ACCESS_KEY_ID", s3.access_key)
        _set(out, "AWS_SECRET_ACCESS_KEY", s3.secret_key)
        _set(out, "AWS_SESSION_TOKEN", s3.session_token)
        _set(out, "AWS_REGION", s3.region)
        _set(out, "AWS_ENDPOINT_URL", s3.endpoint)
        if s3.endpoint and s3.endpoint.lower().startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
        if s3.path_style:
            out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    elif scheme in _AZURE_SCHEMES:
        az = _azure_settings(uri, opts, credentials_uri=uri)
        _set(out, "azure_storage_account_name", az.account)
        _set(out, "azure_storage_account_key", az.account_key)
        if not az.account_key:  # object_store refuses two credentials at once
            _set(out, "azure_storage_sas_key", az.sas_token)
        _set(out, "azure_storage_tenant_id", az.tenant_id)
        _set(out, "azure_storage_client_id", az.client_id)
        _set(out, "azure_storage_client_secret", az.client_secret)
        _set(out, "azure_storage_token", az.bearer_token)
        _set(out, "azure_storage_endpoint", az.endpoint)
        if az.endpoint and az.endpoint.lower().startswith("http://"):
            out["allow_http"] = "true"  # measured: azure_storage_allow_http is not honoured by delta-rs 1.6
    return out


def fileio_properties_for_iceberg(uri: str | None, options: "Options | Mapping | None") -> dict[str, str]:
    """pyiceberg FileIO properties from our options; only keys that are set.

    S3 keys (s3.*) when S3 options are set, ADLS keys (adls.*) when Azure options are set, both when
    both are (a catalog's tables may live anywhere). `uri` names the Azure account when it is an
    abfss://container@account... URI. Azure endpoints become pyarrow's blob/dfs authority + scheme
    (Azurite: http, path-style account); the raw connection string goes along for fsspec (adlfs).
    Credentials from a provider, profile, assumed role or azure.authType: their current keys /
    token (`adls.token`), asked for `uri` (a catalog's warehouse; a snapshot, see the module doc)."""
    opts = options if isinstance(options, Options) else Options.of(options)
    out: dict[str, str] = {}
    credentials_uri = uri or "(Iceberg catalog without a warehouse)"  # what a credentials provider is asked for
    s3 = _aws_settings(opts, credentials_uri=credentials_uri)
    if any((s3.access_key, s3.secret_key, s3.session_token, opts.get_str("aws.region"), s3.endpoint, s3.path_style)):
        _set(out, "s3.access-key-id", s3.access_key)
        _set(out, "s3.secret-access-key", s3.secret_key)
        _set(out, "s3.session-token", s3.session_token)
        _set(out, "s3.region", s3.region)
        _set(out, "s3.endpoint", s3.endpoint)
        if s3.path_style:
            out["s3.force-virtual-addressing"] = "false"
    az = _azure_settings(uri if _scheme(uri) in _AZURE_SCHEMES else None, opts, credentials_uri=credentials_uri)
    if any((az.account, az.account_key, az.sas_token, az.tenant_id, az.client_id, az.bearer_token, az.endpoint)):
        _set(out, "adls.account-name", az.account)
        _set(out, "adls.account-key", az.account_key)
        if not az.account_key:  # pyarrow's AzureFileSystem takes one of them only
            _set(out, "adls.sas-token", az.sas_token)
        _set(out, "adls.tenant-id", az.tenant_id)
        _set(out, "adls.client-id", az.client_id)
        _set(out, "adls.client-secret", az.client_secret)
        _set(out, "adls.token", az.bearer_token)
        _set(out, "adls.connection-string", az.connection_string)
        out.update(_adls_authority(az.endpoint, az.account))
        if "s3.endpoint" not in out and "s3.access-key-id" not in out and _has_adlfs():
            # pyiceberg's pyarrow FileIO reads abfss://container@account… only, and misreads emulator
            # endpoints; its fsspec FileIO (adlfs) takes abfs/az URIs and the connection string
            out["py-io-impl"] = "pyiceberg.io.fsspec.FsspecFileIO"
    return out


def _names_aws_source(opts: Options) -> bool:
    """Whether the options name where S3 credentials come from (provider, profile, role)."""
    return any(
        opts.get_str(k)
        for k in ("aws.credentialsProvider", "aws.credentialsProviderClass", "aws.profile", "aws.roleArn")
    )


def _has_adlfs() -> bool:
    import importlib.util

    return importlib.util.find_spec("adlfs") is not None


def _adls_authority(endpoint: str | None, account: str | None) -> dict[str, str]:
    """pyarrow AzureFileSystem authority/scheme for a blob endpoint. pyarrow builds
    `scheme://<account><authority>` when the authority starts with '.', else
    `scheme://<authority>/<account>` (emulators)."""
    if not endpoint:
        return {}
    parts = urlsplit(endpoint)
    host = parts.netloc
    out: dict[str, str] = {}
    if account and host.lower().startswith(account.lower() + ".blob."):
        suffix = host[len(account) + len(".blob") :]  # ".core.windows.net"
        if suffix != ".core.windows.net":  # the default needs no override
            out["adls.blob-storage-authority"] = ".blob" + suffix
            out["adls.dfs-storage-authority"] = ".dfs" + suffix
    else:
        out["adls.blob-storage-authority"] = host
        out["adls.dfs-storage-authority"] = host
    if parts.scheme.lower() == "http":
        out["adls.blob-storage-scheme"] = "http"
        out["adls.dfs-storage-scheme"] = "http"
    return out


def _deltalake_uri(uri: str, opts: Options) -> str:
    """The table URI in a form delta-rs accepts: local paths absolute, s3n:// as s3://, wasb(s)://
    (unknown to delta-rs) as abfss:// on the dfs endpoint of the same account."""
    scheme = _scheme(uri)
    if scheme in ("", "file"):
        return _local_path(uri)
    if scheme == "s3n":
        return "s3" + uri[len("s3n") :]
    if scheme in ("wasb", "wasbs"):
        return _abfss_uri(uri, opts, f"Delta source {redact_uri(uri)}", "name it in the path").rstrip("/")
    return uri.rstrip("/")


def _abfss_uri(uri: str, opts: Options, what: str, otherwise: str) -> str:
    """An Azure URI as abfss://container@account.dfs.<suffix>/path (the account from the URI or
    the options; InvalidOptionError naming `what` when neither knows it)."""
    container, account, suffix, path = _azure_uri_parts(uri)
    account = account or _azure_settings(uri, opts).account
    if not account:
        raise InvalidOptionError(
            f"{what}: no Azure storage account known; set 'spark.indextables.azure.accountName' or {otherwise}"
        )
    return f"abfss://{container}@{account}.dfs.{suffix or 'core.windows.net'}/{path}"


def _iceberg_uri(uri: str, opts: Options) -> str:
    """A metadata location in a form pyiceberg accepts: local paths absolute, az:// / azure://
    (unknown to pyiceberg) as abfss://container@account.dfs.<suffix>/path."""
    scheme = _scheme(uri)
    if scheme == "":
        return os.path.abspath(uri)
    if scheme in ("az", "azure"):
        return _abfss_uri(
            uri, opts, f"Iceberg source {redact_uri(uri)}", "use abfss://container@account.dfs.core.windows.net/..."
        )
    return uri


def _redactor(opts: Options, *extra: Mapping[str, str]) -> Redactor:
    """Hides our secret option values and secret-looking properties in library error messages."""
    secrets = [v for k, v in opts.items() if k in SECRET_KEYS]
    for props in extra:
        secrets += [
            v
            for k, v in props.items()
            if any(w in k.lower() for w in ("secret", "key", "token", "password", "credential", "connection"))
        ]
    return Redactor(secrets)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _describe(e: BaseException, limit: int = 500) -> str:
    """A library error on one line: delta-rs nests its causes over several lines (with colour codes)."""
    text = " ".join(_ANSI.sub("", str(e)).replace("\u21b3", " ").split())
    text = text or type(e).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _join(root: str, key: str) -> str:
    return root.rstrip("/") + "/" + key


_PATH_SAFE = "/=+,;:@!$&'()*~"


def _file_uri(root: str, key: str) -> str:
    """Where our storage layer (and the libraries) find `key` under `root`: an absolute path for
    local roots; for Azure the key percent-encoded, since Azure URIs are decoded by our backend and
    by object_store (a Delta directory named 'p=x%20y' must be written 'p=x%2520y'); S3 keys are
    taken literally."""
    if "://" in key:  # Delta absolute paths (shallow clones) are read where they are
        return key
    if _is_local(root):
        return os.path.join(_local_path(root), *key.split("/"))
    if _scheme(root) in _AZURE_SCHEMES:
        return _join(root, quote(key, safe=_PATH_SAFE))
    return _join(root, key)


def _iceberg_file_uri(file_path: str) -> str:
    """An Iceberg data file location as a readable URI. Iceberg locations are plain strings, never
    percent-decoded (pyiceberg writes a directory 'p=a%2Fb' for the value 'a/b'): local ones become
    paths (a file:// URI would be decoded), Azure ones get their path encoded (see _file_uri)."""
    scheme = _scheme(file_path)
    if scheme == "file":
        return urlsplit(file_path).path
    if scheme in _AZURE_SCHEMES:
        parts = urlsplit(file_path)
        # adlfs writes abfs://container/path (the account comes from the options): our storage
        # takes that form as az://container/path
        scheme_out = parts.scheme if "@" in parts.netloc else "az"
        return f"{scheme_out}://{parts.netloc}{quote(parts.path, safe=_PATH_SAFE)}"
    return file_path


# ------------------------------------------------------------------------------------------------
# Delta
# ------------------------------------------------------------------------------------------------


def _open_delta(source: str, opts: Options, version: int | None) -> SourceSnapshot:
    deltalake = _require("deltalake", "delta")
    where = redact_uri(source)
    if version is not None and version < 0:
        raise VersionNotFoundError(f"Delta table {where} has no version {version} (versions start at 0)")
    uri = _deltalake_uri(source, opts)
    storage_options = storage_options_for_deltalake(source, opts)
    redact = _redactor(opts, storage_options)
    dt = _load_delta(deltalake, uri, where, version, storage_options, redact)

    metadata = dt.metadata()
    mode = (metadata.configuration or {}).get("delta.columnMapping.mode", "none") or "none"
    if mode.strip().lower() != "none":
        raise ProtocolVersionError(
            f"Delta table {where} uses column mapping (delta.columnMapping.mode={mode}): its data files name columns "
            "differently from the table schema; a companion index cannot be built on it"
        )
    dv_files = _delta_deletion_vector_files(dt, where, redact)
    if dv_files:
        raise ProtocolVersionError(
            f"Delta table {where} (version {dt.version()}) has deletion vectors on {len(dv_files)} file(s), e.g. "
            f"{dv_files[0]}: their rows are partly deleted, so row positions in the files would not match the table; "
            "a companion index cannot be built on it (rewrite those files first, e.g. Spark's REORG TABLE ... APPLY (PURGE))"
        )

    root = _local_path(source) if _is_local(source) else source.rstrip("/")
    partition_columns = list(metadata.partition_columns or [])
    actions = pa.table(dt.get_add_actions(flatten=True))
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    counts = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else [None] * len(paths)
    parts = {
        c: (
            actions.column(f"partition.{c}").to_pylist()
            if f"partition.{c}" in actions.column_names
            else [None] * len(paths)
        )
        for c in partition_columns
    }
    files = []
    for i, raw in enumerate(paths):
        key = unquote(raw)  # the log holds an RFC 2396 URI (a '%20' directory is logged as '%2520')
        files.append(
            SourceFile(
                key=key,
                uri=_file_uri(root, key),
                size=int(sizes[i]),
                num_records=None if counts[i] is None else int(counts[i]),
                partition_values={c: _partition_text(parts[c][i]) for c in partition_columns},
            )
        )
    files.sort(key=lambda f: f.key)
    schema = normalize_schema(pa.schema(dt.schema().to_arrow()))
    return SourceSnapshot("delta", source, root, dt.version(), schema, partition_columns, files)


def _load_delta(
    deltalake: Any, uri: str, where: str, version: int | None, storage_options: dict[str, str], redact: Redactor
) -> Any:
    from deltalake.exceptions import DeltaError, DeltaProtocolError
    from deltalake.exceptions import TableNotFoundError as DeltaTableNotFound

    def load(v: int | None) -> Any:
        return deltalake.DeltaTable(uri, version=v, storage_options=storage_options or None)

    try:
        return load(version)
    except DeltaTableNotFound as e:
        raise TableNotFoundError(f"no Delta table at {where}: {redact(_describe(e))}") from None
    except DeltaProtocolError as e:
        raise ProtocolVersionError(f"Delta table {where}: {redact(_describe(e))}") from None
    except (DeltaError, OSError) as e:
        if version is None:
            raise StorageError(f"cannot open Delta table {where}: {redact(_describe(e))}") from None
        first = e
    # the version failed: tell a missing version from a table that cannot be read at all
    try:
        latest = load(None).version()
    except Exception:
        raise StorageError(
            f"cannot open Delta table {where} at version {version}: {redact(_describe(first))}"
        ) from None
    raise VersionNotFoundError(
        f"Delta table {where} has no version {version} (latest is {latest}; old versions disappear with log "
        f"cleanup): {redact(_describe(first))}"
    ) from None


def _delta_deletion_vector_files(dt: Any, where: str, redact: Redactor) -> list[str]:
    """Files carrying a deletion vector. get_add_actions() does not show them (delta-rs 1.6), so they
    are asked for only when the protocol enables the feature."""
    features = dt.protocol().reader_features or []
    if "deletionVectors" not in features:
        return []
    try:
        found = pa.table(dt.deletion_vectors())
    except Exception as e:  # a vector that cannot be read is still a vector
        raise ProtocolVersionError(
            f"Delta table {where} uses deletion vectors, which could not be read ({redact(_describe(e))}); "
            "a companion index cannot be built on it"
        ) from None
    return sorted(found.column("filepath").to_pylist()) if found.num_rows else []


# ------------------------------------------------------------------------------------------------
# Iceberg
# ------------------------------------------------------------------------------------------------


def _open_iceberg(
    source: str, opts: Options, version: int | None, catalog: str | None, catalog_type: str | None
) -> SourceSnapshot:
    _require("pyiceberg", "iceberg")
    if catalog is not None:
        table, name = _iceberg_from_catalog(source, opts, catalog, catalog_type)
    else:
        table, name = _iceberg_from_metadata(source, opts)

    if version is not None:
        snapshot = table.snapshot_by_id(version)
        if snapshot is None:
            known = [s.snapshot_id for s in table.snapshots()][-5:]
            raise VersionNotFoundError(f"Iceberg table {name} has no snapshot {version} (latest snapshots: {known})")
    else:
        snapshot = table.current_snapshot()
    schema = table.schema()
    if snapshot is not None and snapshot.schema_id is not None:
        schema = table.schemas().get(snapshot.schema_id, schema)  # time travel reads the snapshot's schema
    tasks = _iceberg_tasks(table, snapshot, name) if snapshot is not None else []

    for task in tasks:
        data = task.file
        if task.delete_files:
            raise ProtocolVersionError(
                f"Iceberg table {name} (snapshot {snapshot.snapshot_id}) has delete files for {data.file_path}: "
                "rows deleted by position or equality would still be in the data file, so row positions would not "
                "match the table; a companion index cannot be built on it (rewrite the data files first)"
            )
        fmt = getattr(data.file_format, "name", str(data.file_format))
        if str(fmt).upper() != "PARQUET":
            raise ProtocolVersionError(
                f"Iceberg table {name}: data file {data.file_path} is {fmt}, only Parquet data files can be indexed"
            )

    columns = _iceberg_partition_columns(table, schema, tasks)
    files = [
        SourceFile(
            key=t.file.file_path,
            uri=_iceberg_file_uri(t.file.file_path),
            size=int(t.file.file_size_in_bytes),
            num_records=None if t.file.record_count is None else int(t.file.record_count),
            partition_values={
                col: _iceberg_partition_text(t.file.partition[pos[t.file.spec_id]], ftype)
                for col, ftype, pos in columns
            },
        )
        for t in tasks
    ]
    files.sort(key=lambda f: f.key)
    arrow_schema = normalize_schema(_iceberg_arrow_schema(schema))
    return SourceSnapshot(
        "iceberg",
        source,
        table.location(),
        None if snapshot is None else snapshot.snapshot_id,
        arrow_schema,
        [c for c, _, _ in columns],
        files,
    )


def _iceberg_from_catalog(source: str, opts: Options, catalog: str, catalog_type: str | None) -> tuple[Any, str]:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    if not isinstance(catalog, str) or not catalog.strip():
        raise InvalidOptionError(f"Iceberg source {source!r}: catalog name must be a non-empty string, got {catalog!r}")
    # FileIO credentials first, so explicit catalog properties win; a credentials provider is asked
    # for the catalog's warehouse location (the tables' locations are known only from the catalog)
    catalog_props = opts.with_prefix(f"iceberg.catalog.{catalog}")
    warehouse = catalog_props.get("warehouse")
    props = {**fileio_properties_for_iceberg(warehouse if _scheme(warehouse) else None, opts), **catalog_props}
    if catalog_type:
        props["type"] = catalog_type
    redact = _redactor(opts, props)
    name = f"{catalog}.{source}"
    try:
        cat = load_catalog(catalog, **props)
    except Exception as e:
        keys = sorted(k for k in props if not k.startswith(("s3.", "adls.")))
        raise InvalidOptionError(
            f"cannot load Iceberg catalog {catalog!r} (type {props.get('type', 'not set')}, properties {keys} from the "
            f"options 'spark.indextables.iceberg.catalog.{catalog}.<key>'): {redact(_describe(e))}"
        ) from None
    try:
        return cat.load_table(source), name
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise TableNotFoundError(
            f"no Iceberg table {source!r} in catalog {catalog!r}: {redact(_describe(e))}"
        ) from None
    except ValueError as e:  # e.g. an identifier the catalog cannot parse
        raise InvalidOptionError(f"Iceberg table {name}: {redact(_describe(e))}") from None
    except Exception as e:
        raise StorageError(f"cannot load Iceberg table {name}: {redact(_describe(e))}") from None


def _iceberg_from_metadata(source: str, opts: Options) -> tuple[Any, str]:
    from pyiceberg.table import StaticTable

    location = _iceberg_metadata_location(source, opts)
    props = fileio_properties_for_iceberg(location, opts)
    redact = _redactor(opts, props)
    name = redact_uri(source)
    try:
        return StaticTable.from_metadata(_iceberg_uri(location, opts), properties=props), name
    except FileNotFoundError as e:
        raise TableNotFoundError(
            f"no Iceberg table metadata at {redact_uri(location)}: {redact(_describe(e))}"
        ) from None
    except IndexTablesError:
        raise
    except Exception as e:
        raise StorageError(f"cannot read Iceberg metadata {redact_uri(location)}: {redact(_describe(e))}") from None


_METADATA_VERSION = re.compile(r"^v?(\d+)[-.]")


def _iceberg_metadata_location(source: str, opts: Options) -> str:
    """`source` itself when it names a metadata JSON file, else the newest `metadata/*.metadata.json`
    of that table directory (by the version number that starts its name: 00003-<uuid> or v3)."""
    if source.lower().endswith(".json"):
        return source
    from indextables_spark.core.storage import open_storage

    storage = open_storage(source, opts)
    best: tuple[int, int, str] | None = None
    for info in storage.list("metadata/"):
        name = info.key.rsplit("/", 1)[-1]
        m = _METADATA_VERSION.match(name)
        if "/" in info.key[len("metadata/") :] or not name.endswith(".metadata.json") or not m:
            continue
        cand = (int(m.group(1)), info.modified_ms, info.key)
        best = cand if best is None or cand > best else best
    if best is None:
        raise TableNotFoundError(
            f"no Iceberg table at {redact_uri(source)}: no metadata/*.metadata.json file "
            "(give the metadata file itself, or a catalog)"
        )
    return storage.local_path(best[2]) or storage.full_uri(best[2])


def _iceberg_tasks(table: Any, snapshot: Any, name: str) -> list[Any]:
    try:
        return list(table.scan(snapshot_id=snapshot.snapshot_id).plan_files())
    except ValueError as e:
        if "equality delete" in str(e).lower():  # pyiceberg 0.12 refuses to plan them
            raise ProtocolVersionError(
                f"Iceberg table {name} (snapshot {snapshot.snapshot_id}) has equality delete files: rows deleted "
                "that way would still be in the data files; a companion index cannot be built on it"
            ) from None
        raise StorageError(f"cannot list the files of Iceberg table {name}: {_describe(e)}") from None
    except OSError as e:
        raise StorageError(f"cannot list the files of Iceberg table {name}: {_describe(e)}") from None


def _iceberg_partition_columns(table: Any, schema: Any, tasks: list[Any]) -> list[tuple[str, Any, dict[int, int]]]:
    """(column, Iceberg type, {spec id: position in the file's partition tuple}) for each source column
    of an identity partition field of the table's spec that every file's spec also holds (files
    written before a spec change may lack it: then it is no partition column)."""
    from pyiceberg.transforms import IdentityTransform

    specs = table.specs()
    used_specs = {t.file.spec_id for t in tasks}
    out = []
    for pf in table.spec().fields:
        if not isinstance(pf.transform, IdentityTransform):
            continue
        try:
            source_field = schema.find_field(pf.source_id)
        except ValueError:  # the column was dropped from this snapshot's schema
            continue
        positions: dict[int, int] = {}
        for spec_id in used_specs:
            spec = specs.get(spec_id)
            pos = (
                None
                if spec is None
                else next(
                    (
                        i
                        for i, f in enumerate(spec.fields)
                        if f.source_id == pf.source_id and isinstance(f.transform, IdentityTransform)
                    ),
                    None,
                )
            )
            if pos is None:
                break
            positions[spec_id] = pos
        else:
            out.append((source_field.name, source_field.field_type, positions))
    return out


def _iceberg_partition_text(value: Any, field_type: Any) -> str | None:
    """An identity partition value as Delta would write it: dates/timestamps arrive as numbers."""
    from pyiceberg import types as it

    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if isinstance(field_type, it.DateType):
            return (_EPOCH.date() + _dt.timedelta(days=value)).isoformat()
        if isinstance(field_type, (it.TimestampType, it.TimestamptzType)):
            return _partition_text(_EPOCH + _dt.timedelta(microseconds=value))  # UTC for timestamptz
        if isinstance(field_type, it.TimeType):
            return (_EPOCH + _dt.timedelta(microseconds=value)).time().isoformat()
        nanos = getattr(it, "TimestampNanoType", None), getattr(it, "TimestamptzNanoType", None)
        if any(n is not None and isinstance(field_type, n) for n in nanos):
            return _partition_text(_EPOCH + _dt.timedelta(microseconds=value // 1000))
    return _partition_text(value)


def _iceberg_arrow_schema(schema: Any) -> pa.Schema:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(schema, include_field_ids=False)


# ------------------------------------------------------------------------------------------------
# Parquet directories (hive partitions)
# ------------------------------------------------------------------------------------------------

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_FOOTER_TAIL = 64 << 10  # one ranged read fetches most footers whole
_FOOTER_THREADS = 16
_INT = re.compile(r"[+-]?\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _hidden_segment(segment: str) -> bool:
    """Spark's rule for paths it skips: '_x' (unless a partition 'k=v'), '.x'."""
    return segment.startswith(".") or (segment.startswith("_") and "=" not in segment)


def _is_data_key(key: str) -> bool:
    segments = key.split("/")
    return key.lower().endswith(".parquet") and not any(_hidden_segment(s) for s in segments)


def _hive_partitions(key: str) -> list[tuple[str, str | None]]:
    """(column, value) of the `k=v` directories of a key, decoded (Spark percent-escapes both)."""
    out = []
    for segment in key.split("/")[:-1]:
        if "=" not in segment:
            continue
        k, v = segment.split("=", 1)
        value = unquote(v)
        out.append((unquote(k), None if value in (HIVE_NULL, "") else value))
    return out


def _infer_partition_type(values: list[str | None]) -> pa.DataType:
    """Spark's partition discovery, reduced: integers -> int32 (int64 when too big), ISO dates ->
    date32, anything else -> string; nulls do not count."""
    present = [v for v in values if v is not None]
    if not present:
        return pa.string()
    if all(_INT.fullmatch(v) for v in present):
        ints = [int(v) for v in present]
        if all(-(1 << 31) <= i < (1 << 31) for i in ints):
            return pa.int32()
        if all(-(1 << 63) <= i < (1 << 63) for i in ints):
            return pa.int64()
        return pa.string()
    if all(_DATE.fullmatch(v) and _valid_date(v) for v in present):
        return pa.date32()
    return pa.string()


def _valid_date(text: str) -> bool:
    try:
        _dt.date.fromisoformat(text)
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class _Footer:
    schema: pa.Schema
    num_rows: int


def _read_footer(storage: Any, key: str, size: int) -> _Footer:
    """The Parquet footer through ranged reads: the tail (64 KiB), then more only for big footers."""
    import pyarrow.parquet as pq

    where = storage.full_uri(key)
    if size < 12:
        raise SchemaMismatchError(f"{where} is not a Parquet file ({size} bytes)")
    start = max(0, size - _FOOTER_TAIL)
    tail = storage.read_range(key, start, size)
    if tail[-4:] != b"PAR1":
        kind = "an encrypted Parquet file" if tail[-4:] == b"PARE" else "not a Parquet file"
        raise SchemaMismatchError(f"{where} is {kind} (no PAR1 magic at its end)")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > size:
        raise SchemaMismatchError(f"{where} is not a valid Parquet file (footer length {length} > file size {size})")
    if length + 8 > len(tail):
        tail = storage.read_range(key, size - length - 8, size)
    try:
        meta = pq.read_metadata(pa.BufferReader(tail[-(length + 8) :]))
    except (pa.ArrowException, OSError) as e:
        raise SchemaMismatchError(f"{where} is not a valid Parquet file: {_describe(e)}") from None
    return _Footer(meta.schema.to_arrow_schema(), int(meta.num_rows))


def _schema_difference(a: pa.Schema, b: pa.Schema) -> str | None:
    """How two file schemas differ in column names or types (nullability aside), or None."""
    if a.names != b.names:
        return f"columns {a.names} vs {b.names}"
    for fa, fb in zip(a, b):
        if fa.type != fb.type:
            return f"column {fa.name!r} is {fa.type} vs {fb.type}"
    return None


def _open_parquet(source: str, opts: Options) -> SourceSnapshot:
    from indextables_spark.core.storage import LocalStorage, open_storage

    storage = open_storage(source, opts)
    where = redact_uri(source)
    infos = [i for i in storage.list("") if _is_data_key(i.key)]
    if not infos:
        raise TableNotFoundError(f"no Parquet data files (*.parquet) under {where}")

    partitions = [_hive_partitions(i.key) for i in infos]
    names = [k for k, _ in partitions[0]]
    for info, parts in zip(infos, partitions):
        if [k for k, _ in parts] != names:
            raise SchemaMismatchError(
                f"Parquet source {where}: partition directories disagree: {infos[0].key} has {names or 'none'}, "
                f"{info.key} has {[k for k, _ in parts] or 'none'} (every file needs the same k=v directories, "
                "in the same order)"
            )

    with ThreadPoolExecutor(max_workers=max(1, min(_FOOTER_THREADS, len(infos)))) as pool:
        footers = list(pool.map(lambda i: _read_footer(storage, i.key, i.size), infos))
    schema = normalize_schema(footers[0].schema)
    for info, footer in zip(infos[1:], footers[1:]):
        diff = _schema_difference(schema, normalize_schema(footer.schema))
        if diff:
            raise SchemaMismatchError(
                f"Parquet source {where}: {info.key} does not have the schema of {infos[0].key}: {diff}"
            )
    clash = [n for n in names if n in schema.names]
    if clash:
        raise SchemaMismatchError(
            f"Parquet source {where}: partition column(s) {clash} are also columns of the files (e.g. {infos[0].key})"
        )
    for i, name in enumerate(names):
        schema = schema.append(pa.field(name, _infer_partition_type([p[i][1] for p in partitions]), nullable=True))

    root = storage.root if isinstance(storage, LocalStorage) else storage.uri
    files = [
        SourceFile(
            key=info.key,
            uri=storage.local_path(info.key) or _file_uri(storage.uri, info.key),
            size=int(info.size),
            num_records=footer.num_rows,
            partition_values=dict(parts),
        )
        for info, footer, parts in zip(infos, footers, partitions)
    ]
    return SourceSnapshot("parquet", source, root, None, schema, names, files)


__all__ = [
    "FORMATS",
    "SourceFile",
    "SourceSnapshot",
    "open_source",
    "storage_options_for_deltalake",
    "fileio_properties_for_iceberg",
    "normalize_schema",
]
