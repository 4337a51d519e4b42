"""How an S3 client authenticates (Spark-free): static keys, a credentials provider, a profile or
boto3's default chain, optionally exchanged for an assumed role's credentials through STS, all
refreshed before they expire (see credentials.py for what the providers return and how
credentials are shared in a process)."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable

from indextables_spark.config.options import Options
from indextables_spark.core.storage.credentials import (
    NEVER_EXPIRES,
    AwsCredentials,
    ask_provider,
    load_provider,
    provider_scope,
    shared,
    utc_expiry,
)
from indextables_spark.config.redaction import remember_secrets
from indextables_spark.core.storage.retry import describe_exception
from indextables_spark.errors import InvalidOptionError, StorageError

if TYPE_CHECKING:
    import boto3
    import botocore.session
    from botocore.client import BaseClient
    from botocore.credentials import Credentials, RefreshableCredentials

log = logging.getLogger("indextables_spark.core.storage.aws_auth")

DEFAULT_ROLE_SESSION_NAME = "indextables-spark"


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
            provider_scope=provider_scope(provider, uri, opts) if provider and not access_key else (),
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
        """What a client built from this depends on (part of the S3 client cache key): every field
        but the table path and the provider's name (provider_scope holds both where they matter)."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name not in ("uri", "provider"))

    def boto3_session(self, options: Options, region: str | None) -> Any:
        """A boto3 Session whose credentials are refreshed as needed (see the class doc)."""
        import boto3  # lazy: SDK loaded on first use

        base = self._source_session(options, region)
        if not self.role_arn:
            return base
        key = ("aws-role", self.cache_key())
        credentials = shared(key, lambda: self._assume_role_credentials(base, region))
        return boto3.Session(botocore_session=_botocore_session_with(credentials), region_name=region)

    def signing_credentials(self, options: Options, region: str | None) -> tuple[Any, str | None]:
        """(botocore credentials, region) for requests signed without a client (s3_reads.py):
        static keys with a region need no boto3 Session (~30 ms per process); else the session's
        credentials (refreshing as a client's do) and region."""
        if self.access_key and not self.role_arn and region:
            from botocore.credentials import Credentials  # lazy: SDK loaded on first use

            return Credentials(self.access_key, self.secret_key, self.session_token), region
        session = self.boto3_session(options, region)
        return session.get_credentials(), region or session.region_name

    def _source_session(self, options: Options, region: str | None) -> Any:
        import boto3  # lazy: SDK loaded on first use

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
            from botocore.exceptions import ProfileNotFound  # lazy: SDK loaded on first use

            try:
                return boto3.Session(profile_name=self.profile, region_name=region)
            except ProfileNotFound:
                raise InvalidOptionError(
                    f"option 'spark.indextables.aws.profile': profile {self.profile!r} is not in the AWS config or "
                    "credentials file (AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/)"
                ) from None
        return boto3.Session(region_name=region)

    def _assume_role_credentials(self, base: boto3.Session, region: str | None) -> RefreshableCredentials:
        from botocore.config import Config  # lazy: SDK loaded on first use

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
            remember_secrets([answer["AccessKeyId"], answer["SecretAccessKey"], answer.get("SessionToken")])
            log.debug("assumed role %s for %s until %s", role_arn, self.uri, answer["Expiration"])
            expiry = answer["Expiration"]
            if isinstance(expiry, dt.datetime):
                expiry = utc_expiry(expiry, "sts:AssumeRole", "aws.roleArn").isoformat()
            return {
                "access_key": answer["AccessKeyId"],
                "secret_key": answer["SecretAccessKey"],
                "token": answer.get("SessionToken"),
                "expiry_time": str(expiry),
            }

        return _refreshable(fetch(), fetch, "indextables-assume-role", self.refresh_buffer_s)


def _provider_option(opts: Options, cloud: str) -> str:
    """The option that named the provider (for messages)."""
    if cloud == "aws" and not opts.get_str("aws.credentialsProvider") and opts.get_str("aws.credentialsProviderClass"):
        return "aws.credentialsProviderClass"
    return f"{cloud}.credentialsProvider"


def _provider_aws_credentials(spec: str, uri: str, options: Options, buffer_s: int) -> Any:
    """botocore credentials that call the provider again `buffer_s` before they expire."""
    from botocore.credentials import Credentials  # lazy: SDK loaded on first use

    option = _provider_option(options, "aws")

    def fetch() -> dict[str, str | None]:
        got, expiry = ask_provider(spec, option, uri, options, AwsCredentials, ("access_key", "secret_key"))
        return {
            "access_key": got.access_key,
            "secret_key": got.secret_key,
            "token": got.session_token,
            "expiry_time": expiry.isoformat(),
        }

    first = fetch()
    if first["expiry_time"] == NEVER_EXPIRES.isoformat():
        return Credentials(first["access_key"], first["secret_key"], first["token"], method="indextables-provider")
    return _refreshable(first, fetch, "indextables-provider", buffer_s)


def _refreshable(first: dict[str, Any], fetch: Callable[[], dict[str, Any]], method: str, buffer_s: int) -> Any:
    """botocore credentials that call fetch again `buffer_s` before they expire (at the latest half of it)."""
    from botocore.credentials import RefreshableCredentials  # lazy: SDK loaded on first use

    return RefreshableCredentials.create_from_metadata(
        first, fetch, method, advisory_timeout=buffer_s, mandatory_timeout=buffer_s // 2
    )


def _botocore_session_with(credentials: Credentials) -> botocore.session.Session:
    """A botocore session whose only credential source is `credentials` (botocore asks it for
    fresh values before each request, so refreshable credentials refresh in cached clients too)."""
    import botocore.session  # lazy: SDK loaded on first use
    from botocore.credentials import CredentialProvider, CredentialResolver  # lazy: SDK loaded on first use

    class _Given(CredentialProvider):  # type: ignore[misc]  # botocore is untyped
        METHOD = "indextables"
        CANONICAL_NAME = "indextables"

        def load(self) -> Credentials:
            return credentials

    session = botocore.session.Session()
    session.register_component("credential_provider", CredentialResolver([_Given()]))
    return session


def current_aws_credentials(client: BaseClient) -> tuple[str, str, str | None] | None:
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
    remember_secrets([frozen.access_key, frozen.secret_key, frozen.token])
    expiry = getattr(credentials, "_expiry_time", None)  # RefreshableCredentials only
    return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token, expiry)


__all__ = ["AwsAuth", "aws_credentials_snapshot", "current_aws_credentials"]
