"""Our `spark.indextables.*` storage options as the source libraries take them: deltalake's
(object_store) storage options and pyiceberg's FileIO properties. Credentials that come from a
provider callable, an AWS profile, an assumed role or an Azure token credential (`azure.authType`)
are resolved through our storage layer and handed over as keys / a bearer token: snapshots taken
when the source is opened (at the start of a build), which the libraries do not refresh. A build
longer than their life would need the libraries' own refresh; our own reads of the data files
refresh as usual."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from indextables_spark.config.options import Options
from indextables_spark.core.storage.aws_auth import aws_credentials_snapshot
from indextables_spark.core.storage.azure import azure_token_snapshot, azure_uri_parts
from indextables_spark.core.storage.azure_auth import parse_connection_string
from indextables_spark.core.storage.base import AZURE_SCHEMES, S3_SCHEMES
from indextables_spark.config.redaction import redact_uri
from indextables_spark.errors import InvalidOptionError
from indextables_spark.ops.companion.sources.locations import http_endpoint, scheme_of


@dataclass(frozen=True)
class _AwsSettings:
    access_key: str | None
    secret_key: str | None
    session_token: str | None
    region: str | None
    endpoint: str | None
    path_style: bool


@dataclass(frozen=True)
class _AzureSettings:
    account: str | None
    account_key: str | None
    sas_token: str | None  # None when there is an account key: the libraries take one of them only
    tenant_id: str | None
    client_id: str | None
    client_secret: str | None
    bearer_token: str | None
    endpoint: str | None  # blob service URL (Azurite: http://host:port/account)
    connection_string: str | None


# Which of our settings goes to which key of a library (a key goes along only when its value is set).
_DELTA_S3 = {
    "AWS_ACCESS_KEY_ID": "access_key",
    "AWS_SECRET_ACCESS_KEY": "secret_key",
    "AWS_SESSION_TOKEN": "session_token",
    "AWS_REGION": "region",
    "AWS_ENDPOINT_URL": "endpoint",
}
_DELTA_AZURE = {
    "azure_storage_account_name": "account",
    "azure_storage_account_key": "account_key",
    "azure_storage_sas_key": "sas_token",
    "azure_storage_tenant_id": "tenant_id",
    "azure_storage_client_id": "client_id",
    "azure_storage_client_secret": "client_secret",
    "azure_storage_token": "bearer_token",
    "azure_storage_endpoint": "endpoint",
}
_ICEBERG_S3 = {
    "s3.access-key-id": "access_key",
    "s3.secret-access-key": "secret_key",
    "s3.session-token": "session_token",
    "s3.region": "region",
    "s3.endpoint": "endpoint",
}
_ICEBERG_AZURE = {
    "adls.account-name": "account",
    "adls.account-key": "account_key",
    "adls.sas-token": "sas_token",
    "adls.tenant-id": "tenant_id",
    "adls.client-id": "client_id",
    "adls.client-secret": "client_secret",
    "adls.token": "bearer_token",
    "adls.connection-string": "connection_string",
}


def _keys(settings: _AwsSettings | _AzureSettings, names: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, attr in names.items() if (value := getattr(settings, attr))}


def _is_http(endpoint: str | None) -> bool:
    return bool(endpoint and endpoint.lower().startswith("http://"))


def storage_options_for_deltalake(uri: str, options: "Options | Mapping[str, Any] | None") -> dict[str, str]:
    """deltalake (object_store) storage options for `uri` from our options; only keys that are set.

    S3: AWS_* keys (AWS_ALLOW_HTTP for an http endpoint, AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false for
    path-style access). Azure: azure_storage_* keys; object_store reads no connection strings, so
    ours is taken apart (account, key or SAS, BlobEndpoint); `allow_http` for an http endpoint
    such as Azurite's. Local paths need nothing. Credentials from a provider, profile, assumed role
    or azure.authType: their current keys / token, asked for `uri` (a snapshot, see the module doc)."""
    opts = options if isinstance(options, Options) else Options.of(options)
    scheme = scheme_of(uri)
    out: dict[str, str] = {}
    if scheme in S3_SCHEMES:
        s3 = _aws_settings(opts, credentials_uri=uri)
        out.update(_keys(s3, _DELTA_S3))
        if _is_http(s3.endpoint):
            out["AWS_ALLOW_HTTP"] = "true"
        if s3.path_style:
            out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    elif scheme in AZURE_SCHEMES:
        az = _azure_settings(uri, opts, credentials_uri=uri)
        out.update(_keys(az, _DELTA_AZURE))
        if _is_http(az.endpoint):
            out["allow_http"] = "true"  # measured: azure_storage_allow_http is not honoured by delta-rs 1.6
    return out


def fileio_properties_for_iceberg(uri: str | None, options: "Options | Mapping[str, Any] | None") -> dict[str, str]:
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
        out.update(_keys(s3, _ICEBERG_S3))
        if s3.path_style:
            out["s3.force-virtual-addressing"] = "false"
    az = _azure_settings(uri if scheme_of(uri) in AZURE_SCHEMES else None, opts, credentials_uri=credentials_uri)
    if any((az.account, az.account_key, az.sas_token, az.tenant_id, az.client_id, az.bearer_token, az.endpoint)):
        out.update(_keys(az, _ICEBERG_AZURE))
        out.update(_adls_authority(az.endpoint, az.account))
        if "s3.endpoint" not in out and "s3.access-key-id" not in out and _has_adlfs():
            # pyiceberg's pyarrow FileIO reads abfss://container@account… only, and misreads emulator
            # endpoints; its fsspec FileIO (adlfs) takes abfs/az URIs and the connection string
            out["py-io-impl"] = "pyiceberg.io.fsspec.FsspecFileIO"
    return out


def abfss_uri(uri: str, opts: Options, what: str, otherwise: str) -> str:
    """An Azure URI as abfss://container@account.dfs.<suffix>/path (the account from the URI or
    the options; InvalidOptionError naming `what` when neither knows it)."""
    container, account, suffix, path = azure_uri_parts(uri)
    account = account or _azure_settings(uri, opts).account
    if not account:
        raise InvalidOptionError(
            f"{what}: no Azure storage account known; set 'spark.indextables.azure.accountName' or {otherwise}"
        )
    return f"abfss://{container}@{account}.dfs.{suffix or 'core.windows.net'}/{path.strip('/')}"


def _aws_settings(opts: Options, credentials_uri: str | None = None) -> _AwsSettings:
    """With `credentials_uri`, credentials from a provider / profile / assumed role are resolved
    for that path (see the module doc: a snapshot) and replace the static keys."""
    endpoint = http_endpoint(opts.get_str("s3.endpoint"))
    # our S3 backend falls back to us-east-1 when an endpoint is set without a region (S3-compatible
    # services); without it pyiceberg would look the bucket's region up on AWS
    region = opts.get_str("aws.region") or ("us-east-1" if endpoint else None)
    keys = (opts.get_str("aws.accessKey") or None, opts.get_str("aws.secretKey") or None)
    session_token = opts.get_str("aws.sessionToken") or None
    if credentials_uri is not None and _names_aws_source(opts):
        snapshot = aws_credentials_snapshot(opts, credentials_uri, endpoint)
        if snapshot is not None:
            keys, session_token = (snapshot.access_key, snapshot.secret_key), snapshot.session_token
    return _AwsSettings(keys[0], keys[1], session_token, region, endpoint, opts.get_bool("s3.pathStyleAccess"))


def _azure_settings(uri: str | None, opts: Options, credentials_uri: str | None = None) -> _AzureSettings:
    """With `credentials_uri`, a provider's or `azure.authType`'s token is fetched for that path
    (see the module doc: a snapshot) and given as the bearer token, in place of the identity's ids."""
    cs = opts.get_str("azure.connectionString") or None
    conn = parse_connection_string(cs, redact_uri(uri or "")) if cs else {}
    uri_account = azure_uri_parts(uri)[1] if uri and scheme_of(uri) in AZURE_SCHEMES else None
    account = uri_account or opts.get_str("azure.accountName") or conn.get("accountname")
    endpoint = (opts.get_str("azure.endpoint") or "").strip() or conn.get("blobendpoint")
    if not endpoint and conn.get("endpointsuffix") and account:
        proto = conn.get("defaultendpointsprotocol", "https")
        endpoint = f"{proto}://{account}.blob.{conn['endpointsuffix']}"
    account_key = conn.get("accountkey") or opts.get_str("azure.accountKey") or None
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
        account_key=account_key,
        sas_token=sas.lstrip("?") if sas and not account_key else None,
        tenant_id=identity["tenantId"],
        client_id=identity["clientId"],
        client_secret=identity["clientSecret"],
        bearer_token=bearer_token,
        endpoint=(http_endpoint(endpoint) or "").rstrip("/") or None,
        connection_string=cs,
    )


def _names_aws_source(opts: Options) -> bool:
    """Whether the options name where S3 credentials come from (provider, profile, role)."""
    return any(
        opts.get_str(k)
        for k in ("aws.credentialsProvider", "aws.credentialsProviderClass", "aws.profile", "aws.roleArn")
    )


def _has_adlfs() -> bool:
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
