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
import os
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Mapping, TypeVar
from urllib.parse import unquote, urlsplit

from indextables_spark.errors import FileNotFoundInStorageError, IndexTablesError, InvalidOptionError, StorageError
from indextables_spark.config.options import Options
from indextables_spark.core.storage.base import FileInfo, Storage, check_key
from indextables_spark.core.storage.credentials import (
    AZURE_AUTH_TYPES,
    AzureToken,
    azure_identity_credential,
    azure_provider_credential,
    load_provider,
)
from indextables_spark.core.storage.retry import (
    RetryPolicy,
    Redactor,
    check_prefix,
    describe_exception,
    download_in_chunks,
    error_code,
    file_chunks,
    http_status,
    protect_secrets,
    redact_uri,
    upload_in_parts,
)

log = logging.getLogger("indextables_spark.core.storage.azure")
T = TypeVar("T")

DELETE_BATCH = 256  # the Blob batch API takes at most 256 sub-requests
MAX_BLOCK_SIZE = 4000 << 20
DOWNLOAD_CHUNK = 16 << 20
SINGLE_GET = 256 << 20


class _TransientBatchError(StorageError):
    """Some blobs of a batch delete failed with a retryable status (retried by RetryPolicy)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status_code = status


class _StaticTokenCredential:
    """A TokenCredential that returns one given bearer token (never shown)."""

    def __init__(self, token: str):
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(time.time()) + 3600)

    def __repr__(self) -> str:
        return "_StaticTokenCredential(***)"


class AzureStorage(Storage):
    """Storage rooted at an Azure Blob container prefix.

    AzureStorage(uri, options=None, *, client_kwargs=None, retry_policy=None)

    `client_kwargs`: extra keyword arguments for `azure.storage.blob.BlobServiceClient`, e.g.
    `transport=` (tests wrap the HTTP transport to inject faults). `retry_policy` overrides the
    one built from the options.
    """

    def __init__(
        self,
        uri: str,
        options: Mapping[str, Any] | None = None,
        *,
        client_kwargs: Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
    ):
        opts = options if isinstance(options, Options) else Options.of(options)
        self._options = opts
        self._client_kwargs = dict(client_kwargs or {})
        self.uri, self.container, uri_account, self.root, suffix = _parse_azure_uri(uri)
        self._retry = retry_policy or RetryPolicy.from_options(opts)

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
        protect_secrets(secrets)
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
        self._credential_kind, self._credential_args = _pick_credential(opts, conn, self.account, self.uri)

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
        self.upload_concurrency = max(1, opts.get_int("azure.uploadConcurrency"))
        self.list_page_size = opts.get_int("azure.listPageSize")
        if not 1 <= self.list_page_size <= 5000:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.listPageSize' must be between 1 and 5000, got {self.list_page_size}"
            )
        self.max_connections = max(1, opts.get_int("azure.maxConnections"))
        self.connect_timeout_s = opts.get_int("storage.connectTimeoutMs") / 1000.0
        self.read_timeout_s = opts.get_int("storage.readTimeoutMs") / 1000.0
        self._client: Any = None
        self._lock = threading.Lock()

    # -- plumbing ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"AzureStorage({self.uri!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def credential_kind(self) -> str:
        """Which credential is used: connection-string, account-key, sas, provider, managedIdentity,
        workloadIdentity, service-principal, bearer-token or default (DefaultAzureCredential)."""
        return self._credential_kind

    @property
    def container_client(self) -> Any:
        """The azure ContainerClient (created on first use; thread-safe)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        credential = _build_credential(self._credential_kind, self._credential_args, self.uri, self._options)
        kwargs: dict[str, Any] = {
            "retry_total": 0,  # retries are ours (retry.py)
            "max_single_put_size": self.single_put_max,
            "max_block_size": self.block_size,
            "max_single_get_size": SINGLE_GET,
            "max_chunk_get_size": DOWNLOAD_CHUNK,
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

    def _blob_name(self, key: str) -> str:
        k = check_key(key)
        return f"{self.root}/{k}" if self.root else k

    def _root_prefix(self) -> str:
        return self.root + "/" if self.root else ""

    def _run(self, op: str, key: str, fn: Callable[[int], T]) -> T:
        """Run fn with retries; turn its final failure into an IndexTablesError naming the URI."""
        try:
            return self._retry.run(fn, f"Azure {op} {self.full_uri(key)}")
        except IndexTablesError:
            raise
        except Exception as e:
            raise self._translate(e, op, key) from e

    def _translate(self, e: Exception, op: str, key: str) -> IndexTablesError:
        where = self.full_uri(key)
        status = http_status(e)
        code = error_code(e)
        attempts = getattr(e, "indextables_attempts", 1)
        after = f" after {attempts} attempts" if attempts > 1 else ""
        text = str(getattr(e, "message", None) or e or type(e).__name__)
        detail = self._redact(text.splitlines()[0] if text else type(e).__name__)
        if code == "ContainerNotFound":
            cls = FileNotFoundInStorageError if op in ("read", "read_range") else StorageError
            return cls(f"cannot {op} {where}: container {self.container!r} does not exist at {self.endpoint}")
        if status == 404:
            return FileNotFoundInStorageError(f"file not found: {where}")
        return StorageError(f"cannot {op} {where}: {describe_exception(e)}{after}: {detail}")

    # -- Storage -------------------------------------------------------------------------------

    def read(self, key: str) -> bytes:
        name = self._blob_name(key)

        def op(attempt: int) -> bytes:
            data: bytes = self.container_client.get_blob_client(name).download_blob(max_concurrency=1).readall()
            return data

        return self._run("read", key, op)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        name = self._blob_name(key)
        if start < 0 or end < 0:
            raise StorageError(f"invalid byte range [{start}, {end}) for {self.full_uri(key)}")
        if end <= start:
            if self.stat(key) is None:
                raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}")
            return b""

        def op(attempt: int) -> bytes:
            from azure.core.exceptions import HttpResponseError

            blob = self.container_client.get_blob_client(name)
            try:
                data: bytes = blob.download_blob(offset=start, length=end - start, max_concurrency=1).readall()
                return data
            except HttpResponseError as e:
                if e.status_code == 416:  # start at or past the end: nothing to read (as a file)
                    return b""
                raise

        return self._run("read_range", key, op)

    def put(self, key: str, data: bytes) -> None:
        name = self._blob_name(key)
        data = bytes(data)
        if len(data) > self.single_put_max:
            self._upload_blocks(key, name, len(data), lambda off, n: data[off : off + n])
            return

        def op(attempt: int) -> None:
            self.container_client.get_blob_client(name).upload_blob(data, overwrite=True, max_concurrency=1)

        self._run("write", key, op)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        name = self._blob_name(key)
        data = bytes(data)

        def op(attempt: int) -> bool:
            from azure.core.exceptions import HttpResponseError

            try:
                self.container_client.get_blob_client(name).upload_blob(data, overwrite=False, max_concurrency=1)
                return True
            except HttpResponseError as e:  # ResourceExistsError (409), or 412 on a staged commit
                if e.status_code in (409, 412) and error_code(e) != "ContainerNotFound":
                    if attempt > 1:
                        # An earlier attempt failed in a way that may have reached the service:
                        # the blob found now may be our own write whose answer was lost.
                        return self.holds(key, data)
                    return False
                raise

        return self._run("conditional write", key, op)

    def list(self, prefix: str) -> list[FileInfo]:
        rel = check_prefix(prefix)
        root = self._root_prefix()
        full = root + rel
        out: list[FileInfo] = []
        token: str | None = None
        while True:
            page_token = token

            def op(attempt: int) -> tuple[list[Any], str | None]:
                pages = self.container_client.list_blobs(
                    name_starts_with=full or None, include=["metadata"], results_per_page=self.list_page_size
                ).by_page(continuation_token=page_token)
                items = list(next(pages, []))
                return items, pages.continuation_token

            items, token = self._run("list", rel or ".", op)
            for b in items:
                name = b.name
                if not name.startswith(root) or name.endswith("/"):
                    continue
                if (b.metadata or {}).get("hdi_isfolder") == "true":
                    continue  # ADLS Gen2 directory entries
                modified = b.last_modified
                out.append(
                    FileInfo(name[len(root) :], int(b.size or 0), int(modified.timestamp() * 1000) if modified else 0)
                )
            if not token:
                break
        out.sort(key=lambda f: f.key)
        return out

    def delete(self, keys: Iterable[str]) -> None:
        wanted = [(k, self._blob_name(k)) for k in keys]  # validate every key before deleting any
        for i in range(0, len(wanted), DELETE_BATCH):
            self._delete_batch(wanted[i : i + DELETE_BATCH])

    def _delete_batch(self, batch: builtins.list[tuple[str, str]]) -> None:
        pending = list(batch)

        def op(attempt: int) -> None:
            nonlocal pending
            if len(pending) == 1:
                self._delete_one(*pending[0])
                return
            responses = list(self.container_client.delete_blobs(*[n for _, n in pending], raise_on_any_failure=False))
            if len(responses) != len(pending):
                raise StorageError(
                    f"cannot delete {self.full_uri(pending[0][0])} (and {len(pending) - 1} more): the batch "
                    f"answered {len(responses)} results for {len(pending)} blobs"
                )
            retry: list[tuple[str, str]] = []
            retry_status = 503
            for (key, name), resp in zip(pending, responses):
                status = resp.status_code
                if status in (200, 202, 404):
                    continue
                if status >= 500 or status in (408, 429):
                    retry.append((key, name))
                    retry_status = status
                    continue
                raise StorageError(f"cannot delete {self.full_uri(key)}: HTTP {status} {resp.reason or ''}".rstrip())
            if retry:
                pending = retry
                raise _TransientBatchError(
                    f"cannot delete {self.full_uri(retry[0][0])} (and {len(retry) - 1} more): the service "
                    f"answered HTTP {retry_status} for each of them",
                    retry_status,
                )

        self._run("delete", batch[0][0], op)

    def _delete_one(self, key: str, name: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self.container_client.get_blob_client(name).delete_blob()
        except ResourceNotFoundError as e:
            if error_code(e) == "ContainerNotFound":
                raise
            # a missing blob is already deleted

    def stat(self, key: str) -> FileInfo | None:
        name = self._blob_name(key)

        def op(attempt: int) -> FileInfo | None:
            from azure.core.exceptions import ResourceNotFoundError

            try:
                props = self.container_client.get_blob_client(name).get_blob_properties()
            except ResourceNotFoundError as e:
                if error_code(e) == "ContainerNotFound":
                    raise
                return None
            modified = props.last_modified
            return FileInfo(check_key(key), int(props.size or 0), int(modified.timestamp() * 1000) if modified else 0)

        return self._run("stat", key, op)

    # -- large files ---------------------------------------------------------------------------

    def upload_file(self, key: str, local_path: str) -> None:
        name = self._blob_name(key)
        try:
            size = os.path.getsize(local_path)
        except OSError as e:
            raise StorageError(f"cannot upload {local_path} to {self.full_uri(key)}: {e}") from e
        if size <= self.single_put_max:
            with open(local_path, "rb") as f:
                self.put(key, f.read())
            return
        with file_chunks(local_path, self.full_uri(key)) as chunk:
            self._upload_blocks(key, name, size, chunk)

    def _upload_blocks(self, key: str, name: str, size: int, chunk: Callable[[int, int], bytes]) -> None:
        """Stage blocks (each retried on its own), then commit the list: the blob appears whole."""
        from azure.storage.blob import BlobBlock

        block_size = max(self.block_size, -(-size // 50_000))  # at most 50,000 blocks per blob
        upload = uuid.uuid4().hex  # block ids unique to this upload (all ids of a blob have one length)
        ids = [base64.b64encode(f"{upload}-{n:06d}".encode()).decode() for n in range(-(-size // block_size))]
        blob = self.container_client.get_blob_client(name)

        def stage(i: int, data: bytes) -> None:
            self._run(f"upload block {ids[i]} of", key, lambda attempt: blob.stage_block(ids[i], data))

        upload_in_parts(size, block_size, self.upload_concurrency, chunk, stage)
        # Committing the same list again after a lost answer is harmless (blocks resolve as committed).
        self._run("commit blocks of", key, lambda attempt: blob.commit_block_list([BlobBlock(block_id=b) for b in ids]))

    def download_file(self, key: str, local_path: str) -> None:
        info = self.stat(key)
        if info is None:
            raise FileNotFoundInStorageError(f"file not found: {self.full_uri(key)}")
        download_in_chunks(self, key, info.size, local_path, DOWNLOAD_CHUNK)


# -- parsing and credentials ---------------------------------------------------------------------


def _parse_azure_uri(uri: str) -> tuple[str, str, str | None, str, str | None]:
    """(uri without credentials, container, account or None, root prefix, endpoint suffix or None)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment or parts.password is not None:
        raise InvalidOptionError(
            f"Azure table path {redact_uri(uri)!r}: credentials or query strings (SAS tokens) in the path are not "
            "accepted; use the azure.sasToken / azure.accountKey options"
        )
    root = unquote(parts.path).strip("/")
    if root and any(seg in ("", ".", "..") for seg in root.split("/")):
        raise InvalidOptionError(f"Azure table path {uri!r} has an empty, '.' or '..' segment")
    if scheme in ("az", "azure"):
        container, account, suffix = parts.netloc, None, None
        if "@" in container:
            container, host = container.split("@", 1)
            account, suffix = _account_of(host, uri)
    else:  # abfs(s) / wasb(s): container@account.<dfs|blob>.<suffix>
        if "@" not in parts.netloc:
            raise InvalidOptionError(
                f"Azure table path {uri!r} must look like {scheme}://container@account.dfs.core.windows.net/prefix"
            )
        container, host = parts.netloc.split("@", 1)
        account, suffix = _account_of(host, uri)
    if not container:
        raise InvalidOptionError(f"Azure table path {uri!r} names no container")
    return uri.rstrip("/"), container, account, root, suffix


def _account_of(host: str, uri: str) -> tuple[str, str | None]:
    host = host.split(":", 1)[0]
    labels = host.split(".")
    if not labels[0]:
        raise InvalidOptionError(f"Azure table path {uri!r} names no storage account")
    suffix = None
    if len(labels) > 2 and labels[1] in ("dfs", "blob"):
        suffix = ".".join(labels[2:])
    return labels[0], suffix


def parse_connection_string(cs: str | None, uri: str) -> dict[str, str]:
    if not cs:
        return {}
    out: dict[str, str] = {}
    for part in cs.split(";"):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.connectionString' (for {uri}) is malformed: expected "
                "Key=Value pairs separated by ';'"
            )
        k, v = part.split("=", 1)
        out[k.strip().lower()] = v.strip()
    if "accountname" not in out and "blobendpoint" not in out:
        raise InvalidOptionError(
            f"option 'spark.indextables.azure.connectionString' (for {uri}) has neither AccountName nor BlobEndpoint"
        )
    return out


def _pick_credential(opts: Options, conn: dict[str, str], account: str | None, uri: str) -> tuple[str, dict[str, Any]]:
    """Choose the credential from the options (nothing is built or imported yet)."""
    if conn:
        if conn.get("accountkey"):
            name = conn.get("accountname") or account
            if not name:
                raise InvalidOptionError(
                    f"option 'spark.indextables.azure.connectionString' (for {uri}) has an AccountKey but no AccountName"
                )
            return "connection-string", {"account_name": name, "account_key": conn["accountkey"]}
        if conn.get("sharedaccesssignature"):
            return "connection-string", {"sas": conn["sharedaccesssignature"]}
        raise InvalidOptionError(
            f"option 'spark.indextables.azure.connectionString' (for {uri}) has neither AccountKey nor "
            "SharedAccessSignature"
        )
    key = opts.get_str("azure.accountKey")
    if key:
        if not account:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.accountKey' is set for {uri} but no account name is known: "
                "set 'spark.indextables.azure.accountName' or use an abfss://container@account... path"
            )
        return "account-key", {"account_name": account, "account_key": key}
    sas = opts.get_str("azure.sasToken")
    if sas:
        return "sas", {"sas": sas.lstrip("?")}
    provider = (opts.get_str("azure.credentialsProvider") or "").strip()
    auth_type = (opts.get_str("azure.authType") or "").strip()
    if provider and auth_type:
        raise InvalidOptionError(
            f"options 'spark.indextables.azure.credentialsProvider' and 'spark.indextables.azure.authType' are both "
            f"set for {uri}: set one of them"
        )
    if provider:
        load_provider(provider, "azure.credentialsProvider")  # a bad spec fails here, on the driver
        return "provider", {"spec": provider}
    if auth_type:
        canonical = {t.lower(): t for t in AZURE_AUTH_TYPES}.get(auth_type.lower())
        if canonical is None:
            raise InvalidOptionError(
                f"option 'spark.indextables.azure.authType' must be one of {', '.join(AZURE_AUTH_TYPES)}, "
                f"got {auth_type!r}"
            )
        return canonical, {
            "client_id": opts.get_str("azure.clientId") or None,
            "tenant_id": opts.get_str("azure.tenantId") or None,
        }
    sp = {k: opts.get_str(f"azure.{k}") for k in ("tenantId", "clientId", "clientSecret")}
    if any(sp.values()):
        missing = [f"azure.{k}" for k, v in sp.items() if not v]
        if missing:
            raise InvalidOptionError(
                f"Azure service principal for {uri}: option(s) {', '.join(repr('spark.indextables.' + m) for m in missing)} "
                "missing (azure.tenantId, azure.clientId and azure.clientSecret go together)"
            )
        return "service-principal", sp
    token = opts.get_str("azure.bearerToken")
    if token:
        return "bearer-token", {"token": token}
    return "default", {}


def _build_credential(kind: str, args: dict[str, Any], uri: str, opts: Options) -> Any:
    if kind in ("connection-string", "account-key", "sas"):
        if "sas" in args:
            return args["sas"]
        return {"account_name": args["account_name"], "account_key": args["account_key"]}
    if kind == "bearer-token":
        return _StaticTokenCredential(args["token"])
    if kind == "provider":
        return azure_provider_credential(args["spec"], uri, opts)
    if kind in AZURE_AUTH_TYPES and args:  # chosen by azure.authType
        return azure_identity_credential(kind, args["client_id"], args["tenant_id"], uri)
    try:
        import azure.identity as identity  # optional dependency
    except ImportError:
        if kind == "service-principal":
            raise InvalidOptionError(
                f"Azure service principal for {uri} (azure.tenantId / azure.clientId / azure.clientSecret) needs the "
                "azure-identity package: pip install azure-identity"
            ) from None
        raise InvalidOptionError(
            f"no Azure credentials for {uri}: set 'spark.indextables.azure.connectionString', "
            "azure.accountName + azure.accountKey, azure.sasToken, azure.bearerToken or "
            "azure.tenantId + azure.clientId + azure.clientSecret, or install azure-identity to use "
            "DefaultAzureCredential"
        ) from None
    if kind == "service-principal":
        return identity.ClientSecretCredential(args["tenantId"], args["clientId"], args["clientSecret"])
    return azure_identity_credential("default", None, None, uri)


STORAGE_SCOPE = "https://storage.azure.com/.default"
AZURE_SCHEMES = ("abfss", "abfs", "wasbs", "wasb", "az", "azure")


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
    kind, args = _pick_credential(opts, conn, account, uri)
    if kind != "provider" and not (kind in AZURE_AUTH_TYPES and args):
        return None
    credential = _build_credential(kind, args, uri, opts)
    try:
        token = credential.get_token(STORAGE_SCOPE)
    except IndexTablesError:
        raise
    except Exception as e:
        raise StorageError(f"cannot get an Azure Storage token ({kind}) for {uri}: {describe_exception(e)}") from None
    protect_secrets([token.token])
    return AzureToken(token.token, dt.datetime.fromtimestamp(token.expires_on, dt.timezone.utc))


def _pooled_transport(max_connections: int, connect_timeout: float, read_timeout: float) -> Any:
    """azure-core's requests transport with a pool big enough for parallel uploads."""
    import requests
    from azure.core.pipeline.transport import RequestsTransport

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=max_connections, pool_maxsize=max_connections)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return RequestsTransport(
        session=session, session_owner=True, connection_timeout=connect_timeout, read_timeout=read_timeout
    )


__all__ = ["AzureStorage", "azure_token_snapshot"]
