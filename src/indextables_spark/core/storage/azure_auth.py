"""How an Azure Blob client authenticates (Spark-free): the credential the options choose (first
match wins, see azure.py's table), chosen on the driver without importing anything and built where
the client is; provider tokens refreshed before they expire, azure-identity credentials shared in
the process (see credentials.py)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from indextables_spark.config.options import Options
from indextables_spark.core.storage.credentials import AzureToken, ask_provider, load_provider, provider_scope, shared
from indextables_spark.errors import InvalidOptionError

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken, AccessTokenInfo, TokenRequestOptions

AZURE_AUTH_TYPES = ("managedIdentity", "workloadIdentity", "default")


class ProviderTokenCredential:
    """An azure-core token credential (TokenCredential and SupportsTokenInfo) over a provider
    callable: the provider's token is reused until `buffer_s` before its expiry."""

    def __init__(self, spec: str, uri: str, options: Options, buffer_s: int):
        self._spec = spec
        self._uri = uri
        self._options = options
        self._buffer_s = buffer_s
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_on = 0

    def __repr__(self) -> str:
        return f"ProviderTokenCredential({self._spec!r}, {self._uri!r})"

    def _current(self) -> tuple[str, int]:
        with self._lock:
            if self._token is None or time.time() >= self._expires_on - self._buffer_s:
                got, expiry = ask_provider(
                    self._spec, "azure.credentialsProvider", self._uri, self._options, AzureToken, ("token",)
                )
                self._token, self._expires_on = got.token, int(expiry.timestamp())
            return self._token, self._expires_on

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        from azure.core.credentials import AccessToken  # lazy: SDK loaded on first use

        token, expires_on = self._current()
        return AccessToken(token, expires_on)

    def get_token_info(self, *scopes: str, options: TokenRequestOptions | None = None) -> AccessTokenInfo:
        from azure.core.credentials import AccessTokenInfo  # lazy: SDK loaded on first use

        token, expires_on = self._current()
        # refresh_on: azure-core asks again from then on (and at expiry at the latest)
        return AccessTokenInfo(token, expires_on, refresh_on=max(0, expires_on - self._buffer_s))

    def close(self) -> None:
        pass

    def __enter__(self) -> "ProviderTokenCredential":
        return self

    def __exit__(self, *args: object) -> None:
        pass


def azure_provider_credential(spec: str, uri: str, options: Options) -> ProviderTokenCredential:
    """The shared token credential of a provider for this table (see `_provider_scope`)."""
    buffer_s = options.get_int("credentials.refreshBufferSeconds")
    credential: ProviderTokenCredential = shared(
        ("azure-provider", provider_scope(spec, uri, options), buffer_s),
        lambda: ProviderTokenCredential(spec, uri, options, buffer_s),
    )
    return credential


# The environment variables azure-identity reads for managed and workload identity: a credential
# built under other values is another credential.
_AZURE_IDENTITY_ENV = (
    "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER",
    "IDENTITY_SERVER_THUMBPRINT",
    "IMDS_ENDPOINT",
    "MSI_ENDPOINT",
    "MSI_SECRET",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_AUTHORITY_HOST",
    "AZURE_POD_IDENTITY_AUTHORITY_HOST",
)


def azure_identity_credential(auth_type: str, client_id: str | None, tenant_id: str | None, uri: str) -> Any:
    """ManagedIdentityCredential, WorkloadIdentityCredential or DefaultAzureCredential (shared in
    the process: they cache their tokens and refresh them before expiry)."""
    try:
        import azure.identity as identity  # lazy: SDK loaded on first use
    except ImportError:
        raise InvalidOptionError(
            f"option 'spark.indextables.azure.authType' = {auth_type!r} (for {uri}) needs the azure-identity package: "
            "pip install 'indextables_spark[azure-identity]'"
        ) from None
    env = tuple(hashlib.sha256(os.environ.get(v, "").encode()).hexdigest()[:16] for v in _AZURE_IDENTITY_ENV)

    def build() -> Any:
        if auth_type == "managedIdentity":
            return (
                identity.ManagedIdentityCredential(client_id=client_id)
                if client_id
                else (identity.ManagedIdentityCredential())
            )
        if auth_type == "workloadIdentity":
            kwargs = {k: v for k, v in (("client_id", client_id), ("tenant_id", tenant_id)) if v}
            try:
                return identity.WorkloadIdentityCredential(**kwargs)
            except ValueError as e:  # missing tenant / client id / token file
                raise InvalidOptionError(
                    f"option 'spark.indextables.azure.authType' = 'workloadIdentity' (for {uri}): {e} (set "
                    "azure.clientId / azure.tenantId, or the AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                    "AZURE_FEDERATED_TOKEN_FILE environment variables)"
                ) from None
        kwargs = {"managed_identity_client_id": client_id} if client_id else {}
        return identity.DefaultAzureCredential(**kwargs)

    return shared(("azure-identity", auth_type, client_id, tenant_id, env), build)


class _StaticTokenCredential:
    """A TokenCredential that returns one given bearer token (never shown)."""

    def __init__(self, token: str):
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        from azure.core.credentials import AccessToken  # lazy: SDK loaded on first use

        return AccessToken(self._token, int(time.time()) + 3600)

    def __repr__(self) -> str:
        return "_StaticTokenCredential(***)"


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


def pick_credential(opts: Options, conn: dict[str, str], account: str | None, uri: str) -> tuple[str, dict[str, Any]]:
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


def build_credential(kind: str, args: dict[str, Any], uri: str, opts: Options) -> Any:
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
        import azure.identity as identity  # lazy: an optional dependency
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


__all__ = [
    "AZURE_AUTH_TYPES",
    "ProviderTokenCredential",
    "azure_identity_credential",
    "azure_provider_credential",
    "build_credential",
    "parse_connection_string",
    "pick_credential",
]
