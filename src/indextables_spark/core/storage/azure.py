"""Azure Blob Storage (and ADLS Gen2 through its blob endpoint) via azure-storage-blob.

Table paths:
  `abfss://container@account.dfs.core.windows.net/prefix` (also `abfs://`)
  `wasbs://container@account.blob.core.windows.net/prefix` (also `wasb://`)
  `az://container/prefix` (also `azure://`): the account comes from the options

Options (without the `spark.indextables.` prefix, case-insensitive). Credentials, first match wins:

| option(s) | credential |
| --- | --- |
| `azure.connectionString` | account key or SAS from the connection string (its BlobEndpoint is used) |
| `azure.accountName` + `azure.accountKey` | shared key |
| `azure.sasToken` | shared access signature |
| `azure.credentialsProvider` | a Python callable `module:function` returning an `AzureToken` (credentials.py), refreshed |
| `azure.authType` = `managedIdentity` / `workloadIdentity` / `default` | azure-identity's ManagedIdentityCredential / WorkloadIdentityCredential / DefaultAzureCredential (`azure.clientId`: a user-assigned identity) |
| `azure.tenantId` + `azure.clientId` + `azure.clientSecret` | service principal (needs the `azure-identity` package) |
| `azure.bearerToken` | a ready OAuth token (not refreshed: it must outlive the job) |
| none of them | `DefaultAzureCredential` when `azure-identity` is installed, else an error |

Other options: `azure.accountName` (for `az://` paths), `azure.endpoint` (blob service URL, e.g.
Azurite's `http://127.0.0.1:10000/devstoreaccount1`), `azure.singlePutMaxSize` (objects up to
this size go in one PUT; default `64M`), `azure.blockSize` (staged block size above it; default
`8M`), `azure.uploadConcurrency` (4), `azure.listPageSize` (5000), `azure.maxConnections` (32),
and the shared `storage.retry.*`, `storage.connectTimeoutMs`, `storage.readTimeoutMs`.

The SDK's own retries are off (`retry_total=0`): retry.py decides, the same way as for S3.
"""

from __future__ import annotations

import base64
import builtins
import datetime as dt
import logging
import uuid
from typing import Any, Callable, Mapping
from urllib.parse import unquote, urlsplit

from indextables_spark.config.options import Options
from indextables_spark.core.storage.azure_auth import (
    AZURE_AUTH_TYPES,
    build_credential,
    parse_connection_string,
    pick_credential,
)
from indextables_spark.core.storage.base import AZURE_SCHEMES
from indextables_spark.core.storage.credentials import AzureToken
from indextables_spark.core.storage.object_store import ObjectEntry, ObjectStorage, upload_in_parts
from indextables_spark.config.redaction import Redactor, remember_secrets, redact_uri
from indextables_spark.core.storage.retry import RetryPolicy, describe_exception, error_code
from indextables_spark.errors import IndexTablesError, InvalidOptionError, StorageError

log = logging.getLogger("indextables_spark.core.storage.azure")

MAX_BLOCK_SIZE = 4000 << 20
SINGLE_GET = 256 << 20


class AzureStorage(ObjectStorage):
    """Storage rooted at an Azure Blob container prefix.

    AzureStorage(uri, options=None, *, client_kwargs=None, retry_policy=None)

    `client_kwargs`: extra keyword arguments for `azure.storage.blob.BlobServiceClient`, e.g.
    `transport=` (tests wrap the HTTP transport to inject faults). `retry_policy` overrides the
    one built from the options.
    """

    service = "Azure"
    delete_batch = 256  # the Blob batch API takes at most 256 sub-requests

    def __init__(
        self,
        uri: str,
        options: Mapping[str, Any] | None = None,
        *,
        client_kwargs: Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
    ):
        opts = options if isinstance(options, Options) else Options.of(options)
        self._client_kwargs = dict(client_kwargs or {})
        self.uri, self.container, uri_account, self.root, suffix = _parse_azure_uri(uri)
        self._configure(opts, retry_policy, "azure", 5000)

        conn = parse_connection_string(opts.get_str("azure.connectionString"), self.uri)
        secrets = [
            opts.get_str(k)
            for k in (
                "azure.accountKey",
                "azure.connectionString",
                "azure.clientSecret",
                "azure.bearerToken",
                "azure.sasToken",
            )
        ] + [conn.get("accountkey"), conn.get("sharedaccesssignature")]
        self._redact = Redactor(secrets)
        remember_secrets(secrets)
        opt_account = opts.get_str("azure.accountName") or conn.get("accountname")
        if uri_account and opt_account and uri_account != opt_account:
            raise InvalidOptionError(
                f"Azure table path {self.uri} names storage account {uri_account!r} but the options give "
                f"{opt_account!r} (azure.accountName / azure.connectionString)"
            )
        self.account = uri_account or opt_account
        endpoint = (opts.get_str("azure.endpoint") or "").strip() or conn.get("blobendpoint")
        if not endpoint and conn:
            proto = conn.get("defaultendpointsprotocol", "https")
            endpoint = f"{proto}://{conn.get('accountname')}.blob.{conn.get('endpointsuffix', 'core.windows.net')}"
        if not endpoint:
            if not self.account:
                raise InvalidOptionError(
                    f"Azure table path {self.uri} does not name a storage account: use "
                    "abfss://container@account.dfs.core.windows.net/... or set 'spark.indextables.azure.accountName' "
                    "(or azure.connectionString / azure.endpoint)"
                )
            endpoint = f"https://{self.account}.blob.{suffix or 'core.windows.net'}"
        if "://" not in endpoint:
            endpoint = "https://" + endpoint
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.endpoint' must be an http(s) URL without a query, "
                f"got {redact_uri(endpoint)!r}"
            )
        self.endpoint = endpoint.rstrip("/")
        self._credential_kind, self._credential_args = pick_credential(opts, conn, self.account, self.uri)

        self.single_put_max = opts.get_size("azure.singlePutMaxSize")
        self.block_size = opts.get_size("azure.blockSize")
        if not 1 <= self.block_size <= MAX_BLOCK_SIZE:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.blockSize' must be between 1 byte and 4000M, got {self.block_size}"
            )
        if self.single_put_max < 1:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.singlePutMaxSize' must be positive, got {self.single_put_max}"
            )

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def credential_kind(self) -> str:
        """Which credential is used: connection-string, account-key, sas, provider, managedIdentity,
        workloadIdentity, service-principal, bearer-token or default (DefaultAzureCredential)."""
        return self._credential_kind

    @property
    def container_client(self) -> Any:
        """The azure ContainerClient (created on first use; thread-safe)."""
        return self._connection()

    def _new_client(self) -> Any:
        from azure.storage.blob import BlobServiceClient  # lazy: SDK loaded on first use

        credential = build_credential(self._credential_kind, self._credential_args, self.uri, self._options)
        kwargs: dict[str, Any] = {
            "retry_total": 0,  # retries are ours (retry.py)
            "max_single_put_size": self.single_put_max,
            "max_block_size": self.block_size,
            "max_single_get_size": SINGLE_GET,
            "max_chunk_get_size": self.download_chunk,
            "connection_timeout": self.connect_timeout_s,
            "read_timeout": self.read_timeout_s,
        }
        kwargs.update(self._client_kwargs)
        if "transport" not in kwargs:
            kwargs["transport"] = _pooled_transport(self.max_connections, self.connect_timeout_s, self.read_timeout_s)
        service = BlobServiceClient(account_url=self.endpoint, credential=credential, **kwargs)
        log.debug(
            "Azure client for %s (endpoint %s, credential %s)",
            self.uri,
            redact_uri(self.endpoint),
            self._credential_kind,
        )
        return service.get_container_client(self.container)

    def _container_gone(self, e: Exception) -> str | None:
        if error_code(e) == "ContainerNotFound":
            return f"container {self.container!r} does not exist at {self.endpoint}"
        return None

    # -- the SDK primitives (see ObjectStorage) --------------------------------------------------

    def _blob(self, name: str) -> Any:
        return self.container_client.get_blob_client(name)

    def _get(self, name: str, start: int | None = None, end: int | None = None) -> bytes:
        from azure.core.exceptions import HttpResponseError  # lazy: SDK loaded on first use

        ranged = {} if start is None or end is None else {"offset": start, "length": end - start}
        try:
            data: bytes = self._blob(name).download_blob(max_concurrency=1, **ranged).readall()
            return data
        except HttpResponseError as e:
            if ranged and e.status_code == 416:  # start at or past the end: nothing to read (as a file)
                return b""
            raise

    def put(self, key: str, data: bytes) -> None:
        name = self._object_key(key)
        data = bytes(data)
        if len(data) > self.single_put_max:
            self._upload_parts(key, name, len(data), lambda off, n: data[off : off + n])
            return
        self._run("write", key, lambda attempt: self._blob(name).upload_blob(data, overwrite=True, max_concurrency=1))

    def _create(self, name: str, data: bytes) -> bool:
        from azure.core.exceptions import HttpResponseError  # lazy: SDK loaded on first use

        try:
            self._blob(name).upload_blob(data, overwrite=False, max_concurrency=1)
            return True
        except HttpResponseError as e:  # ResourceExistsError (409), or 412 on a staged commit
            if e.status_code in (409, 412) and error_code(e) != "ContainerNotFound":
                return False
            raise

    def _head(self, name: str) -> ObjectEntry | None:
        from azure.core.exceptions import ResourceNotFoundError  # lazy: SDK loaded on first use

        try:
            props = self._blob(name).get_blob_properties()
        except ResourceNotFoundError as e:
            if error_code(e) == "ContainerNotFound":
                raise
            return None
        return name, int(props.size or 0), props.last_modified

    def _list_page(self, prefix: str, token: str | None) -> tuple[builtins.list[ObjectEntry], str | None]:
        pages = self.container_client.list_blobs(
            name_starts_with=prefix or None, include=["metadata"], results_per_page=self.list_page_size
        ).by_page(continuation_token=token)
        blobs = list(next(pages, []))
        return [
            (b.name, int(b.size or 0), b.last_modified)
            for b in blobs
            if (b.metadata or {}).get("hdi_isfolder") != "true"  # ADLS Gen2 directory entries
        ], pages.continuation_token

    def _delete_some(self, batch: builtins.list[tuple[str, str]]) -> tuple[builtins.list[tuple[str, str]], str, int]:
        if len(batch) == 1:
            self._delete_one(batch[0][1])
            return [], "", 0
        responses = list(self.container_client.delete_blobs(*[n for _, n in batch], raise_on_any_failure=False))
        if len(responses) != len(batch):
            raise StorageError(
                f"cannot delete {self.full_uri(batch[0][0])} (and {len(batch) - 1} more): the batch "
                f"answered {len(responses)} results for {len(batch)} blobs"
            )
        retry: list[tuple[str, str]] = []
        retry_status = 503
        for (key, name), resp in zip(batch, responses):
            status = resp.status_code
            if status in (200, 202, 404):
                continue
            if status >= 500 or status in (408, 429):
                retry.append((key, name))
                retry_status = status
                continue
            raise StorageError(f"cannot delete {self.full_uri(key)}: HTTP {status} {resp.reason or ''}".rstrip())
        return retry, f"the service answered HTTP {retry_status}", retry_status

    def _delete_one(self, name: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError  # lazy: SDK loaded on first use

        try:
            self._blob(name).delete_blob()
        except ResourceNotFoundError as e:
            if error_code(e) == "ContainerNotFound":
                raise
            # a missing blob is already deleted

    def _upload_parts(self, key: str, name: str, size: int, chunk: Callable[[int, int], bytes]) -> None:
        """Stage blocks (each retried on its own), then commit the list: the blob appears whole."""
        from azure.storage.blob import BlobBlock  # lazy: SDK loaded on first use

        block_size = max(self.block_size, -(-size // 50_000))  # at most 50,000 blocks per blob
        upload = uuid.uuid4().hex  # block ids unique to this upload (all ids of a blob have one length)
        ids = [base64.b64encode(f"{upload}-{n:06d}".encode()).decode() for n in range(-(-size // block_size))]
        blob = self._blob(name)

        def stage(i: int, data: bytes) -> None:
            self._run(f"upload block {ids[i]} of", key, lambda attempt: blob.stage_block(ids[i], data))

        upload_in_parts(size, block_size, self.upload_concurrency, chunk, stage)
        # Committing the same list again after a lost answer is harmless (blocks resolve as committed).
        self._run("commit blocks of", key, lambda attempt: blob.commit_block_list([BlobBlock(block_id=b) for b in ids]))


# -- parsing and credentials ---------------------------------------------------------------------


def azure_uri_parts(uri: str) -> tuple[str, str | None, str | None, str]:
    """(container, account, endpoint suffix, path) of an Azure URI as written, unchecked: the
    account and the suffix (core.windows.net, ...) are None when the URI does not name them."""
    parts = urlsplit(uri)
    container, account, suffix = parts.netloc, None, None
    if "@" in container:
        container, host = container.split("@", 1)
        labels = host.split(":", 1)[0].split(".")
        account = labels[0] or None
        if len(labels) > 2 and labels[1] in ("dfs", "blob"):
            suffix = ".".join(labels[2:])
    return container, account, suffix, parts.path


def _parse_azure_uri(uri: str) -> tuple[str, str, str | None, str, str | None]:
    """(uri without credentials, container, account or None, root prefix, endpoint suffix or None)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment or parts.password is not None:
        raise InvalidOptionError(
            f"Azure table path {redact_uri(uri)!r}: credentials or query strings (SAS tokens) in the path are not "
            "accepted; use the azure.sasToken / azure.accountKey options"
        )
    container, account, suffix, path = azure_uri_parts(uri)
    root = unquote(path).strip("/")
    if root and any(seg in ("", ".", "..") for seg in root.split("/")):
        raise InvalidOptionError(f"Azure table path {uri!r} has an empty, '.' or '..' segment")
    if scheme not in ("az", "azure") and "@" not in parts.netloc:  # abfs(s) / wasb(s) name the account
        raise InvalidOptionError(
            f"Azure table path {uri!r} must look like {scheme}://container@account.dfs.core.windows.net/prefix"
        )
    if "@" in parts.netloc and account is None:
        raise InvalidOptionError(f"Azure table path {uri!r} names no storage account")
    if not container:
        raise InvalidOptionError(f"Azure table path {uri!r} names no container")
    return uri.rstrip("/"), container, account, root, suffix


STORAGE_SCOPE = "https://storage.azure.com/.default"


def azure_token_snapshot(uri: str, options: Mapping[str, Any] | Options | None) -> AzureToken | None:
    """The current OAuth token for Azure Storage when the options choose a token credential, a
    provider (`azure.credentialsProvider`) or `azure.authType`, obtained through the same shared
    credential as our Azure clients; None for other credentials (keys, SAS, service principal,
    bearer token, none: the caller passes those on itself). For libraries that take a ready token
    (deltalake, pyiceberg/adlfs): a snapshot, not refreshed by them."""
    opts = options if isinstance(options, Options) else Options.of(options)
    conn = parse_connection_string(opts.get_str("azure.connectionString"), uri)
    uri_account = _parse_azure_uri(uri)[2] if urlsplit(uri).scheme.lower() in AZURE_SCHEMES else None
    account = uri_account or opts.get_str("azure.accountName") or conn.get("accountname")
    kind, args = pick_credential(opts, conn, account, uri)
    if kind != "provider" and not (kind in AZURE_AUTH_TYPES and args):
        return None
    credential = build_credential(kind, args, uri, opts)
    try:
        token = credential.get_token(STORAGE_SCOPE)
    except IndexTablesError:
        raise
    except Exception as e:
        raise StorageError(f"cannot get an Azure Storage token ({kind}) for {uri}: {describe_exception(e)}") from None
    remember_secrets([token.token])
    return AzureToken(token.token, dt.datetime.fromtimestamp(token.expires_on, dt.timezone.utc))


def _pooled_transport(max_connections: int, connect_timeout: float, read_timeout: float) -> Any:
    """azure-core's requests transport with a pool big enough for parallel uploads."""
    import requests  # lazy: SDK loaded on first use
    from azure.core.pipeline.transport import RequestsTransport  # lazy: SDK loaded on first use

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=max_connections, pool_maxsize=max_connections)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return RequestsTransport(
        session=session, session_owner=True, connection_timeout=connect_timeout, read_timeout=read_timeout
    )


__all__ = ["AzureStorage", "azure_token_snapshot", "azure_uri_parts"]
