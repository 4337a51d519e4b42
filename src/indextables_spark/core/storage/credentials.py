"""Credentials the way platforms hand them out, for the S3 and Azure backends (Spark-free).

- A credentials provider: option `aws.credentialsProvider` / `azure.credentialsProvider` names a
  Python callable as `module:function`. It is imported and called on whichever process builds a
  client (the driver, a Python worker, a CLI), as `function(uri, options)`: `uri` is the table path,
  `options` the table's options (a read-only mapping, keys without the `spark.indextables.` prefix,
  lower-cased). It returns `AwsCredentials` (S3) or `AzureToken` (Azure); they are used until
  `credentials.refreshBufferSeconds` before their expiry, then the function is called again, by
  the clients already built too. The module must be importable on the executors.
- AWS profiles (`aws.profile`) and assumed roles (`aws.roleArn`, through STS, refreshed).
- Azure managed identity and workload identity through azure-identity (`azure.authType`).

Credentials are shared within a process per provider, table path and the provider's inputs (see
`_provider_scope`), so one table's tasks call the provider once per expiry, not once per task.
Nothing here logs or shows a credential: the result types hide their values in `repr`, errors
name the option and the provider, never what it returned, and every credential obtained is
registered with `retry.protect_secrets` (kept out of the SDKs' debug logs).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from indextables_spark.errors import InvalidOptionError, StorageError
from indextables_spark.util.lru import LruCache
from indextables_spark.config.registry import spec as option_spec
from indextables_spark.config.options import Options
from indextables_spark.core.storage.retry import Redactor, describe_exception, protect_secrets

log = logging.getLogger("indextables_spark.core.storage.credentials")

UTC = dt.timezone.utc
# A credential "without expiry" still needs an expiry time for the SDKs' refresh logic.
_NEVER = dt.datetime(9999, 1, 1, tzinfo=UTC)
DEFAULT_ROLE_SESSION_NAME = "indextables-spark"


@dataclass(frozen=True)
class AwsCredentials:
    """What an S3 credentials provider returns. `expiry`: when the credentials stop working
    (a naive datetime is taken as UTC); None: they do not expire (the provider is not called again)."""

    access_key: str
    secret_key: str
    session_token: str | None = None
    expiry: dt.datetime | None = None

    def __repr__(self) -> str:  # never show a credential
        return f"AwsCredentials(access_key=***, secret_key=***, session_token=***, expiry={self.expiry!r})"


@dataclass(frozen=True)
class AzureToken:
    """What an Azure credentials provider returns: an OAuth bearer token for Azure Storage
    (audience `https://storage.azure.com`) and its expiry (naive = UTC; None: never expires)."""

    token: str
    expiry: dt.datetime | None = None

    def __repr__(self) -> str:  # never show a credential
        return f"AzureToken(token=***, expiry={self.expiry!r})"


ProviderFunction = Callable[[str, Mapping[str, str]], Any]


# -- provider specs ------------------------------------------------------------------------------


def load_provider(spec: str, option: str) -> ProviderFunction:
    """The callable named by `module:function` (`module:Class.method` works too), or an
    InvalidOptionError naming the option."""
    where = f"option 'spark.indextables.{option}'"
    text = spec.strip()
    module_name, sep, attr_path = text.partition(":")
    if not sep or not module_name.strip() or not attr_path.strip():
        raise InvalidOptionError(
            f"{where} must name a Python callable as 'module:function' (e.g. 'my_creds:aws_credentials'), got {text!r}"
        )
    module_name, attr_path = module_name.strip(), attr_path.strip()
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise InvalidOptionError(
            f"{where}: cannot import module {module_name!r} of credentials provider {text!r} ({type(e).__name__}: "
            f"{e}); it must be importable on the driver and on every executor"
        ) from None
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise InvalidOptionError(f"{where}: module {module_name!r} has no attribute {attr_path!r}")
        target = getattr(target, part)
    if not callable(target):
        raise InvalidOptionError(
            f"{where}: {text!r} is a {type(target).__name__}, not a callable taking (uri, options)"
        )
    function: ProviderFunction = target
    return function


def _call_provider(spec: str, option: str, uri: str, options: Options, result_type: type[Any], what: str) -> Any:
    """Call the provider once and check its answer (errors never show the answer)."""
    function = load_provider(spec, option)
    try:
        # a copy: a Mapping without setters, secret values hidden in its repr, keys looked up as Options does
        result = function(uri, Options(dict(options.values)))
    except Exception as e:
        # Not chained: the provider's exception may carry what it was handling; its message is
        # kept with the known secrets removed.
        text = (str(e).splitlines() or [""])[0]
        detail = f": {_option_redactor(options)(text)}" if text else ""
        raise StorageError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') failed for {uri}: "
            f"{type(e).__name__}{detail}"
        ) from None
    if isinstance(result, Mapping):
        try:
            result = result_type(**result)
        except TypeError:
            raise InvalidOptionError(
                f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned a mapping with keys "
                f"{sorted(map(str, result))}; expected {what}"
            ) from None
    if not isinstance(result, result_type):
        raise InvalidOptionError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned a "
            f"{type(result).__name__}; expected {what}"
        )
    return result


_SECRET_LOOKING = ("secret", "token", "password", "key", "credential")


def _option_redactor(options: Options) -> Redactor:
    """Hides the values of secret options, and of unregistered options whose name looks secret
    (a provider's own settings, e.g. an API token)."""
    return Redactor(
        v
        for k, v in options.values.items()
        if (found := option_spec(k)) is not None
        and found.secret
        or found is None
        and any(word in k for word in _SECRET_LOOKING)
    )


def _utc(expiry: dt.datetime | None, spec: str, option: str) -> dt.datetime:
    if expiry is None:
        return _NEVER
    if not isinstance(expiry, dt.datetime):
        raise InvalidOptionError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned an expiry of type "
            f"{type(expiry).__name__}; expected a datetime or None"
        )
    return expiry.replace(tzinfo=UTC) if expiry.tzinfo is None else expiry.astimezone(UTC)


def _check_not_expired(expiry: dt.datetime, spec: str, option: str) -> None:
    if expiry <= dt.datetime.now(UTC):
        raise StorageError(
            f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned credentials that "
            f"expired at {expiry.isoformat()}"
        )


def _provider_scope(spec: str, uri: str, options: Options) -> tuple[str, str, str]:
    """What a provider's answer may depend on: its name, the table path, and the options that are
    not ordinary table settings (unregistered keys, the provider's own, and secret ones such as a
    token). Per-read settings (query, limit, ...) stay out, so every read of a table shares the
    credentials. Hashed: the key is kept in memory only, but needs no secret in clear."""
    inputs = sorted(
        (k, v)
        for k, v in options.values.items()
        if (found := option_spec(k)) is None or found.secret or k.startswith(("aws.", "azure.", "credentials."))
    )
    digest = hashlib.sha256(repr(inputs).encode("utf-8", "surrogateescape")).hexdigest()
    return spec.strip(), uri, digest


# -- a process-wide cache of credential objects ----------------------------------------------------

_shared: LruCache[Any] = LruCache(64, per_process=True)


def shared(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """One credential object per key in this process (least recently used dropped past 64; a
    forked child builds its own: the objects hold locks and connections). `build` may call a
    provider or STS, outside the cache's lock."""
    return _shared.get_or_build(key, build)


def clear_shared() -> None:
    """Forget every shared credential object (the next client asks its source again)."""
    _shared.clear()


# -- AWS -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AwsAuth:
    """How an S3 client authenticates, read from the options (nothing imported or called yet).

    Source credentials, first match wins: static keys (`aws.accessKey` + `aws.secretKey`), a
    provider (`aws.credentialsProvider`), a profile (`aws.profile`), boto3's default chain. With
    `aws.roleArn` those are used to assume the role through STS, and the role's credentials sign
    the S3 requests."""

    uri: str
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    provider: str | None = None
    provider_scope: tuple[str, ...] = ()
    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str = DEFAULT_ROLE_SESSION_NAME
    external_id: str | None = None
    role_duration_s: int = 3600
    sts_endpoint: str | None = None
    refresh_buffer_s: int = 300

    def __repr__(self) -> str:
        return (
            f"AwsAuth({self.source!r}, provider={self.provider!r}, profile={self.profile!r}, "
            f"role_arn={self.role_arn!r})"
        )

    @classmethod
    def from_options(cls, opts: Options, uri: str, s3_endpoint: str | None) -> "AwsAuth":
        access_key = opts.get_str("aws.accessKey") or None
        secret_key = opts.get_str("aws.secretKey") or None
        if bool(access_key) != bool(secret_key):
            missing = "aws.secretKey" if access_key else "aws.accessKey"
            raise InvalidOptionError(
                f"S3 table path {uri}: option 'spark.indextables.{missing}' is missing "
                "(give both aws.accessKey and aws.secretKey, or neither to use the default AWS credential chain)"
            )
        provider = (
            opts.get_str("aws.credentialsProvider") or opts.get_str("aws.credentialsProviderClass") or ""
        ).strip()
        if provider:
            load_provider(provider, _provider_option(opts, "aws"))  # a bad spec fails here, on the driver
        duration = opts.get_int("aws.roleDurationSeconds")
        if not 900 <= duration <= 43200:
            raise InvalidOptionError(
                f"option 'spark.indextables.aws.roleDurationSeconds' must be between 900 and 43200 (STS limits), "
                f"got {duration}"
            )
        buffer_s = opts.get_int("credentials.refreshBufferSeconds")
        if buffer_s < 0:
            raise InvalidOptionError(
                f"option 'spark.indextables.credentials.refreshBufferSeconds' must not be negative, got {buffer_s}"
            )
        sts_endpoint = (opts.get_str("aws.stsEndpoint") or "").strip() or s3_endpoint
        return cls(
            uri=uri,
            access_key=access_key,
            secret_key=secret_key,
            session_token=opts.get_str("aws.sessionToken") or None,
            provider=provider or None,
            provider_scope=_provider_scope(provider, uri, opts) if provider and not access_key else (),
            profile=(opts.get_str("aws.profile") or "").strip() or None,
            role_arn=(opts.get_str("aws.roleArn") or "").strip() or None,
            role_session_name=(opts.get_str("aws.roleSessionName") or "").strip() or DEFAULT_ROLE_SESSION_NAME,
            external_id=opts.get_str("aws.externalId") or None,
            role_duration_s=duration,
            sts_endpoint=sts_endpoint
            if sts_endpoint and "://" in sts_endpoint
            else ("https://" + sts_endpoint if sts_endpoint else None),
            refresh_buffer_s=buffer_s,
        )

    @property
    def source(self) -> str:
        """Where the source credentials come from: static, provider, profile or default."""
        if self.access_key:
            return "static"
        if self.provider:
            return "provider"
        if self.profile:
            return "profile"
        return "default"

    def secrets(self) -> list[str | None]:
        return [self.access_key, self.secret_key, self.session_token, self.external_id]

    def cache_key(self) -> tuple[Any, ...]:
        """What a client built from this depends on (part of the S3 client cache key)."""
        return (
            self.access_key,
            self.secret_key,
            self.session_token,
            self.provider_scope,
            self.profile,
            self.role_arn,
            self.role_session_name,
            self.external_id,
            self.role_duration_s,
            self.sts_endpoint,
            self.refresh_buffer_s,
        )

    def boto3_session(self, options: Options, region: str | None) -> Any:
        """A boto3 Session whose credentials are refreshed as needed (see the class doc)."""
        import boto3

        base = self._source_session(options, region)
        if not self.role_arn:
            return base
        key = ("aws-role", self.cache_key())
        credentials = shared(key, lambda: self._assume_role_credentials(base, region))
        return boto3.Session(botocore_session=_botocore_session_with(credentials), region_name=region)

    def _source_session(self, options: Options, region: str | None) -> Any:
        import boto3

        if self.access_key:
            return boto3.Session(
                aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key,
                aws_session_token=self.session_token,
                region_name=region,
            )
        if self.provider:
            provider = self.provider
            credentials = shared(
                ("aws-provider", self.provider_scope, self.refresh_buffer_s),
                lambda: _provider_aws_credentials(provider, self.uri, options, self.refresh_buffer_s),
            )
            return boto3.Session(botocore_session=_botocore_session_with(credentials), region_name=region)
        if self.profile:
            from botocore.exceptions import ProfileNotFound

            try:
                return boto3.Session(profile_name=self.profile, region_name=region)
            except ProfileNotFound:
                raise InvalidOptionError(
                    f"option 'spark.indextables.aws.profile': profile {self.profile!r} is not in the AWS config or "
                    "credentials file (AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/)"
                ) from None
        return boto3.Session(region_name=region)

    def _assume_role_credentials(self, base: Any, region: str | None) -> Any:
        from botocore.config import Config
        from botocore.credentials import RefreshableCredentials

        sts = base.client(
            "sts",
            endpoint_url=self.sts_endpoint,
            region_name=region or base.region_name or "us-east-1",
            config=Config(retries={"max_attempts": 3, "mode": "standard"}),
        )
        role_arn = self.role_arn

        def fetch() -> dict[str, str]:
            kwargs: dict[str, Any] = {
                "RoleArn": role_arn,
                "RoleSessionName": self.role_session_name,
                "DurationSeconds": self.role_duration_s,
            }
            if self.external_id:
                kwargs["ExternalId"] = self.external_id
            try:
                answer = sts.assume_role(**kwargs)["Credentials"]
            except Exception as e:
                raise StorageError(
                    f"cannot assume role {role_arn} (option 'spark.indextables.aws.roleArn') for {self.uri}: "
                    f"{describe_exception(e)}"
                ) from None
            protect_secrets([answer["AccessKeyId"], answer["SecretAccessKey"], answer.get("SessionToken")])
            log.debug("assumed role %s for %s until %s", role_arn, self.uri, answer["Expiration"])
            expiry = answer["Expiration"]
            if isinstance(expiry, dt.datetime):
                expiry = _utc(expiry, "sts:AssumeRole", "aws.roleArn").isoformat()
            return {
                "access_key": answer["AccessKeyId"],
                "secret_key": answer["SecretAccessKey"],
                "token": answer.get("SessionToken"),
                "expiry_time": str(expiry),
            }

        return RefreshableCredentials.create_from_metadata(
            fetch(),
            fetch,
            "indextables-assume-role",
            advisory_timeout=self.refresh_buffer_s,
            mandatory_timeout=self.refresh_buffer_s // 2,
        )


def _provider_option(opts: Options, cloud: str) -> str:
    """The option that named the provider (for messages)."""
    if cloud == "aws" and not opts.get_str("aws.credentialsProvider") and opts.get_str("aws.credentialsProviderClass"):
        return "aws.credentialsProviderClass"
    return f"{cloud}.credentialsProvider"


def _provider_aws_credentials(spec: str, uri: str, options: Options, buffer_s: int) -> Any:
    """botocore credentials that call the provider again `buffer_s` before they expire."""
    from botocore.credentials import Credentials, RefreshableCredentials

    option = _provider_option(options, "aws")

    def fetch() -> dict[str, str | None]:
        got: AwsCredentials = _call_provider(spec, option, uri, options, AwsCredentials, "an AwsCredentials")
        for name in ("access_key", "secret_key"):
            if not isinstance(getattr(got, name), str) or not getattr(got, name):
                raise InvalidOptionError(
                    f"credentials provider {spec!r} (option 'spark.indextables.{option}') returned no {name}"
                )
        protect_secrets([got.access_key, got.secret_key, got.session_token])
        expiry = _utc(got.expiry, spec, option)
        _check_not_expired(expiry, spec, option)
        log.debug("credentials provider %s answered for %s (expiry %s)", spec, uri, expiry.isoformat())
        return {
            "access_key": got.access_key,
            "secret_key": got.secret_key,
            "token": got.session_token,
            "expiry_time": expiry.isoformat(),
        }

    first = fetch()
    if first["expiry_time"] == _NEVER.isoformat():
        return Credentials(first["access_key"], first["secret_key"], first["token"], method="indextables-provider")
    return RefreshableCredentials.create_from_metadata(
        first,
        fetch,
        "indextables-provider",
        advisory_timeout=buffer_s,
        mandatory_timeout=buffer_s // 2,
    )


def _botocore_session_with(credentials: Any) -> Any:
    """A botocore session whose only credential source is `credentials` (botocore asks it for
    fresh values before each request, so refreshable credentials refresh in cached clients too)."""
    import botocore.session
    from botocore.credentials import CredentialProvider, CredentialResolver

    class _Given(CredentialProvider):  # type: ignore[misc]  # botocore is untyped
        METHOD = "indextables"
        CANONICAL_NAME = "indextables"

        def load(self) -> Any:
            return credentials

    session = botocore.session.Session()
    session.register_component("credential_provider", CredentialResolver([_Given()]))
    return session


def current_aws_credentials(client: Any) -> tuple[str, str, str | None] | None:
    """(access key, secret key, session token) a boto3 client signs with now (refreshed if due),
    or None without credentials. For code that must hand credentials to another library."""
    credentials = client._request_signer._credentials  # botocore keeps them on the signer
    if credentials is None:
        return None
    frozen = credentials.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token


def aws_credentials_snapshot(options: Options, uri: str, s3_endpoint: str | None) -> AwsCredentials | None:
    """The keys a provider (`aws.credentialsProvider`), a profile (`aws.profile`) or an assumed role
    (`aws.roleArn`) give now, through the same shared credentials as our S3 clients; None when the
    options name none of them (static keys and boto3's default chain: the caller's own business).
    For libraries that take keys only (deltalake, pyiceberg): a snapshot, not refreshed by them."""
    auth = AwsAuth.from_options(options, uri, s3_endpoint)
    if auth.source not in ("provider", "profile") and not auth.role_arn:
        return None
    region = options.get_str("aws.region") or None
    credentials = auth.boto3_session(options, region).get_credentials()
    if credentials is None:
        raise StorageError(
            f"AWS profile {auth.profile!r} (option 'spark.indextables.aws.profile') gives no credentials for {uri}"
        )
    frozen = credentials.get_frozen_credentials()  # refreshed first when due
    protect_secrets([frozen.access_key, frozen.secret_key, frozen.token])
    expiry = getattr(credentials, "_expiry_time", None)  # RefreshableCredentials only
    return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token, expiry)


# -- Azure -----------------------------------------------------------------------------------------

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
                got: AzureToken = _call_provider(
                    self._spec, "azure.credentialsProvider", self._uri, self._options, AzureToken, "an AzureToken"
                )
                if not isinstance(got.token, str) or not got.token:
                    raise InvalidOptionError(
                        f"credentials provider {self._spec!r} (option 'spark.indextables.azure.credentialsProvider') "
                        "returned no token"
                    )
                protect_secrets([got.token])
                expiry = _utc(got.expiry, self._spec, "azure.credentialsProvider")
                _check_not_expired(expiry, self._spec, "azure.credentialsProvider")
                self._token, self._expires_on = got.token, int(expiry.timestamp())
                log.debug("credentials provider %s answered for %s (expiry %s)", self._spec, self._uri, expiry)
            return self._token, self._expires_on

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        token, expires_on = self._current()
        return AccessToken(token, expires_on)

    def get_token_info(self, *scopes: str, options: Any = None) -> Any:
        from azure.core.credentials import AccessTokenInfo

        token, expires_on = self._current()
        # refresh_on: azure-core asks again from then on (and at expiry at the latest)
        return AccessTokenInfo(token, expires_on, refresh_on=max(0, expires_on - self._buffer_s))

    def close(self) -> None:
        pass

    def __enter__(self) -> "ProviderTokenCredential":
        return self

    def __exit__(self, *args: Any) -> None:
        pass


def azure_provider_credential(spec: str, uri: str, options: Options) -> ProviderTokenCredential:
    """The shared token credential of a provider for this table (see `_provider_scope`)."""
    buffer_s = options.get_int("credentials.refreshBufferSeconds")
    credential: ProviderTokenCredential = shared(
        ("azure-provider", _provider_scope(spec, uri, options), buffer_s),
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
        import azure.identity as identity
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


__all__ = [
    "AwsAuth",
    "AwsCredentials",
    "AzureToken",
    "AZURE_AUTH_TYPES",
    "ProviderTokenCredential",
    "azure_identity_credential",
    "azure_provider_credential",
    "clear_shared",
    "aws_credentials_snapshot",
    "current_aws_credentials",
    "load_provider",
]
