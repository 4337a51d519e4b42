"""Credentials the way platforms hand them out (core/storage/credentials.py), against real emulators.

- A provider callable (`aws.credentialsProvider`) whose credentials expire after 3 s: requests
  before, near and after the expiry succeed, the provider is called again before the expiry (the
  shared, cached client signs with the new keys), and not on every request in between.
- An assumed role through moto's STS (served at the S3 endpoint): the requests are signed with the
  role's credentials, which moto's GetCallerIdentity maps back to the role and session name.
- An AWS profile from temporary config/credentials files, and a profile that itself assumes a role.
- Spark: a write and a read with the provider option; the provider ran in the Python workers too.
- Azure: a second Azurite over HTTPS with `--oauth basic` (it accepts bearer tokens only so), a
  provider returning short-lived JWTs (refreshed after expiry), and azure-identity's
  ManagedIdentityCredential fetching its token from an App Service-style endpoint served here,
  and WorkloadIdentityCredential exchanging a federated token file at an Entra-like HTTPS token
  endpoint served here (named by AZURE_AUTHORITY_HOST).
- Bad provider specs and answers give errors naming the option, never a secret.

moto checks no signature and Azurite no token signature: what the tests assert is which
credentials each request carried, read from the request itself.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import credential_providers as cp
import pytest

from indextables_spark.errors import InvalidOptionError, StorageError
from indextables_spark.config.options import Options
from indextables_spark.core.storage import open_storage
from indextables_spark.core.storage.azure import AzureStorage
from indextables_spark.core.storage.aws_auth import current_aws_credentials
from indextables_spark.core.storage.credentials import AwsCredentials, AzureToken, clear_shared

PROVIDER = "spark.indextables.aws.credentialsProvider"
ROOT = Path(__file__).resolve().parents[1]


def access_key_in(request) -> str:
    """The access key id a SigV4-signed request was signed with."""
    auth = request.headers["Authorization"]
    auth = auth.decode() if isinstance(auth, bytes) else auth
    return auth.split("Credential=", 1)[1].split("/", 1)[0]


class SignedWith:
    """Records the access key of every S3 request a client sends."""

    def __init__(self, client):
        self.keys: list[str] = []
        self._client = client
        client.meta.events.register("before-send.s3", self)

    def __call__(self, request, **kwargs):
        self.keys.append(access_key_in(request))

    def close(self):
        self._client.meta.events.unregister("before-send.s3", self)


def endpoint_options(s3_options) -> dict[str, str]:
    """The emulator's S3 settings without its static keys."""
    return {
        k: v for k, v in s3_options.items() if not k.endswith(("aws.accessKey", "aws.secretKey", "aws.sessionToken"))
    }


@pytest.fixture
def s3_root(s3_bucket, s3_options):
    uri = f"s3://{s3_bucket}/credentials-{uuid.uuid4().hex[:10]}"
    yield uri
    storage = open_storage(uri, s3_options)
    storage.delete([f.key for f in storage.list("")])


def caller_arn(s3_endpoint: str, access_key: str) -> str:
    """What moto's STS says about an access key (moto identifies the caller by the key id)."""
    import boto3

    sts = boto3.client(
        "sts",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=access_key,
        aws_secret_access_key="not-checked-by-moto",
    )
    return sts.get_caller_identity()["Arn"]


# -- provider callables on S3 ------------------------------------------------------------------------


@pytest.mark.cloud
def test_provider_credentials_refresh_before_and_after_expiry(s3_root, s3_options):
    opts = {
        **endpoint_options(s3_options),
        PROVIDER: "credential_providers:short_lived",
        "spark.indextables.credentials.refreshBufferSeconds": "1",
        "spark.indextables.test.credentials.lifetimeSeconds": "3",
    }
    before = len(cp.CALLS)
    storage = open_storage(s3_root, opts)
    client = storage.client
    assert open_storage(s3_root, opts).client is client  # the process-wide cached client
    signed = SignedWith(client)
    try:
        started = time.time()  # the first answer is asked for now and lives 3 s
        storage.put("a.bin", b"first")
        assert storage.read("a.bin") == b"first"
        assert [f.key for f in storage.list("")] == ["a.bin"]
        first_calls = len(cp.CALLS) - before
        assert first_calls == 1, "the provider is asked once, not on every request"
        first_key = signed.keys[0]
        assert first_key.startswith("AKIAITPROVIDER") and set(signed.keys) == {first_key}

        time.sleep(max(0.0, started + 2.3 - time.time()))  # inside the refresh buffer, before the expiry
        assert time.time() < started + 2.9, "too slow to request inside the refresh buffer"
        storage.put("b.bin", b"second")
        assert len(cp.CALLS) - before == 2, "refreshed before the expiry"
        second_key = signed.keys[-1]
        assert second_key != first_key

        time.sleep(3.5)  # the second credentials have expired by now
        assert storage.read("a.bin") == b"first"
        assert storage.read("b.bin") == b"second"
        assert len(cp.CALLS) - before == 3, "refreshed after the expiry"
        # reads go as presigned requests (core/storage/s3_reads.py): their URLs carry the key
        url = storage._lean().urls.get(storage._object_key("a.bin"))[0]
        third_key = url.split("X-Amz-Credential=")[1].split("%2F")[0]
        assert third_key not in (first_key, second_key), "a URL signed with expired credentials is not reused"
        assert current_aws_credentials(client)[0] == third_key
        assert all(uri == s3_root for uri in cp.CALLS[before:])
    finally:
        signed.close()


@pytest.mark.cloud
def test_provider_answer_as_mapping_without_expiry(s3_root, s3_options):
    opts = {**endpoint_options(s3_options), PROVIDER: "credential_providers:as_mapping"}
    storage = open_storage(s3_root, opts)
    signed = SignedWith(storage.client)
    try:
        storage.put("x", b"1")
        assert storage.read("x") == b"1"
    finally:
        signed.close()
    assert signed.keys and signed.keys[0].startswith("AKIAITPROVIDER")
    assert current_aws_credentials(storage.client)[1] == "mappingSecretValue"


@pytest.mark.cloud
def test_reference_key_name_is_a_synonym(s3_root, s3_options):
    opts = {
        **endpoint_options(s3_options),
        "spark.indextables.aws.credentialsProviderClass": "credential_providers:short_lived",
    }
    storage = open_storage(s3_root, opts)
    storage.put("x", b"1")
    assert current_aws_credentials(storage.client)[0].startswith("AKIAITPROVIDER")


@pytest.mark.cloud
def test_static_keys_win_over_a_provider(s3_root, s3_options):
    before = len(cp.CALLS)
    storage = open_storage(s3_root, {**s3_options, PROVIDER: "credential_providers:short_lived"})
    storage.put("x", b"1")
    assert current_aws_credentials(storage.client)[0] == s3_options["spark.indextables.aws.accessKey"]
    assert len(cp.CALLS) == before


# -- assumed roles and profiles ------------------------------------------------------------------------


@pytest.mark.cloud
def test_assumed_role_through_sts(s3_root, s3_options, s3_endpoint):
    role = f"it-reader-{uuid.uuid4().hex[:6]}"
    opts = {
        **s3_options,  # the static keys are the source credentials of the AssumeRole call
        "spark.indextables.aws.roleArn": f"arn:aws:iam::123456789012:role/{role}",
        "spark.indextables.aws.roleSessionName": "it-session",
        "spark.indextables.aws.externalId": "it-external-id-7731",
        "spark.indextables.aws.roleDurationSeconds": "900",
    }
    storage = open_storage(s3_root, opts)
    signed = SignedWith(storage.client)
    try:
        storage.put("r.bin", b"role")
        assert storage.read("r.bin") == b"role"
    finally:
        signed.close()
    key = signed.keys[0]
    assert key != s3_options["spark.indextables.aws.accessKey"]
    assert set(signed.keys) == {key}
    # moto's STS knows the key it issued: the requests were signed as the assumed role
    assert caller_arn(s3_endpoint, key) == f"arn:aws:sts::123456789012:assumed-role/{role}/it-session"
    assert "it-external-id-7731" not in repr(Options.of(opts)) and "it-external-id-7731" not in repr(storage)


@pytest.mark.cloud
def test_assumed_role_from_provider_credentials(s3_root, s3_options, s3_endpoint):
    """A provider's credentials as the source of the AssumeRole call."""
    before = len(cp.CALLS)
    role = f"it-writer-{uuid.uuid4().hex[:6]}"
    opts = {
        **endpoint_options(s3_options),
        PROVIDER: "credential_providers:short_lived",
        "spark.indextables.test.credentials.lifetimeSeconds": "600",
        "spark.indextables.aws.roleArn": f"arn:aws:iam::123456789012:role/{role}",
    }
    storage = open_storage(s3_root, opts)
    storage.put("r.bin", b"role")
    key = current_aws_credentials(storage.client)[0]
    assert caller_arn(s3_endpoint, key) == f"arn:aws:sts::123456789012:assumed-role/{role}/indextables-spark"
    assert len(cp.CALLS) - before == 1  # the provider signed the STS call


@pytest.fixture
def aws_files(tmp_path, monkeypatch):
    """Empty AWS config and credentials files of this test (the user's own are not read)."""
    config, credentials = tmp_path / "aws-config", tmp_path / "aws-credentials"
    config.write_text("")
    credentials.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return config, credentials


@pytest.mark.cloud
def test_profile_from_config_files(s3_root, s3_options, s3_endpoint, aws_files, monkeypatch):
    config, credentials = aws_files
    tag = uuid.uuid4().hex[:8].upper()
    credentials.write_text(
        f"[it-keys]\naws_access_key_id = AKIAITPROFILE{tag}\naws_secret_access_key = profileSecret{tag}\n"
    )
    role = f"it-profile-role-{tag.lower()}"
    config.write_text(
        "[profile it-keys]\nregion = us-east-1\n\n"
        f"[profile it-role]\nrole_arn = arn:aws:iam::123456789012:role/{role}\n"
        "source_profile = it-keys\nrole_session_name = from-profile\n"
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", s3_endpoint)  # botocore's own AssumeRole goes to moto

    keys = open_storage(s3_root, {**endpoint_options(s3_options), "spark.indextables.aws.profile": "it-keys"})
    keys.put("p.bin", b"profile")
    assert current_aws_credentials(keys.client)[0] == f"AKIAITPROFILE{tag}"

    roles = open_storage(s3_root, {**endpoint_options(s3_options), "spark.indextables.aws.profile": "it-role"})
    assert roles.read("p.bin") == b"profile"
    key = current_aws_credentials(roles.client)[0]
    assert caller_arn(s3_endpoint, key) == f"arn:aws:sts::123456789012:assumed-role/{role}/from-profile"

    missing = open_storage(s3_root, {**endpoint_options(s3_options), "spark.indextables.aws.profile": "nope"})
    with pytest.raises(InvalidOptionError, match=r"aws\.profile.*'nope'"):
        missing.read("p.bin")


# -- bad specs, bad answers, secrets --------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, message",
    [
        ("credential_providers.short_lived", r"must name a Python callable as 'module:function'"),
        ("io.indextables.spark.auth.unity.UnityCatalogAWSCredentialProvider", r"'module:function'"),
        ("no_such_module_xyz:fn", r"cannot import module 'no_such_module_xyz'"),
        ("credential_providers:nope", r"module 'credential_providers' has no attribute 'nope'"),
        ("credential_providers:NOT_CALLABLE", r"is a int, not a callable"),
    ],
)
def test_bad_provider_spec_names_the_option(spec, message):
    with pytest.raises(InvalidOptionError, match=message) as info:
        open_storage("s3://bucket/t", {PROVIDER: spec})
    assert "spark.indextables.aws.credentialsProvider" in str(info.value)
    with pytest.raises(InvalidOptionError, match=message) as info:
        open_storage("az://c/t", {"spark.indextables.azure.credentialsProvider": spec, "azure.accountName": "a"})
    assert "spark.indextables.azure.credentialsProvider" in str(info.value)


def test_bad_provider_answers_show_no_secret(caplog):
    caplog.set_level(logging.DEBUG)
    clear_shared()
    storage = open_storage("s3://bucket/t", {PROVIDER: "credential_providers:wrong_shape", "aws.region": "us-east-1"})
    with pytest.raises(InvalidOptionError, match=r"returned a tuple; expected an AwsCredentials") as info:
        storage.client  # noqa: B018 - building the client asks the provider
    assert cp.LEAKY_SECRET not in str(info.value)

    token = "dbapi-0123456789abcdef"
    storage = open_storage(
        "s3://bucket/t2",
        {PROVIDER: "credential_providers:failing", "my.provider.apiToken": token, "aws.region": "us-east-1"},
    )
    with pytest.raises(
        StorageError, match=r"credentials provider 'credential_providers:failing'.*PermissionError"
    ) as e:
        storage.client  # noqa: B018
    assert token not in str(e.value) and "was refused" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__

    storage = open_storage(
        "s3://bucket/t3", {PROVIDER: "credential_providers:already_expired", "aws.region": "us-east-1"}
    )
    with pytest.raises(StorageError, match=r"returned credentials that expired at"):
        storage.client  # noqa: B018
    assert cp.LEAKY_SECRET not in caplog.text and token not in caplog.text and "expiredSecret" not in caplog.text


def test_result_types_and_options_hide_secrets():
    creds = AwsCredentials("AKIAHIDDEN", "hiddenSecret", "hiddenToken", dt.datetime(2030, 1, 1))
    token = AzureToken("hidden.jwt.value", None)
    assert not any(s in repr(creds) for s in ("AKIAHIDDEN", "hiddenSecret", "hiddenToken"))
    assert "hidden.jwt.value" not in repr(token)
    opts = Options.of({"spark.indextables.aws.externalId": "ext-1234", PROVIDER: "m:f"})
    assert opts.redacted() == {"aws.externalid": "***", "aws.credentialsprovider": "m:f"}


def test_option_validation():
    with pytest.raises(InvalidOptionError, match=r"roleDurationSeconds' must be between 900 and 43200"):
        open_storage("s3://b/t", {"aws.roleArn": "arn:aws:iam::1:role/r", "aws.roleDurationSeconds": "60"})
    with pytest.raises(InvalidOptionError, match=r"azure\.authType' must be one of"):
        open_storage("az://c/t", {"azure.accountName": "a", "azure.authType": "magic"})
    with pytest.raises(InvalidOptionError, match=r"both set"):
        open_storage(
            "az://c/t",
            {
                "azure.accountName": "a",
                "azure.authType": "default",
                "azure.credentialsProvider": "credential_providers:azure_short_lived",
            },
        )
    assert open_storage(
        "az://c/t", {"azure.accountName": "a", "azure.authType": "MANAGEDIDENTITY"}
    ).credential_kind == ("managedIdentity")


# -- Spark: the provider runs in the Python workers ----------------------------------------------------


@pytest.mark.spark
@pytest.mark.cloud
def test_spark_write_and_read_call_the_provider_in_the_workers(spark, s3_root, s3_options, tmp_path):
    spark.sparkContext.addPyFile(str(Path(cp.__file__)))  # the provider's module, importable by the workers
    call_log = tmp_path / "provider-calls.txt"
    opts = {
        **endpoint_options(s3_options),
        PROVIDER: "credential_providers:short_lived",
        "spark.indextables.test.credentials.lifetimeSeconds": "600",
        "spark.indextables.test.credentials.callLog": str(call_log),
    }
    df = spark.createDataFrame([(i, f"doc number {i} alpha") for i in range(40)], "id long, body string")
    df.repartition(2).write.format("indextables").options(**opts).mode("overwrite").save(s3_root)
    got = spark.read.format("indextables").options(**opts).load(s3_root).where("id >= 10").count()
    assert got == 30
    pids = {int(line.split()[0]) for line in call_log.read_text().splitlines()}
    assert pids - {os.getpid()}, f"the provider ran only on the driver (pids {pids})"
    assert {line.split()[1] for line in call_log.read_text().splitlines()} == {s3_root}


# -- Azure: Azurite over HTTPS with OAuth --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), made here with `cryptography`."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="module")
def azurite_oauth(tmp_path_factory):
    """A second Azurite, over HTTPS with `--oauth basic` (bearer tokens are accepted only so):
    (endpoint, certificate path, container)."""
    binary = ROOT / ".emulators" / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        pytest.fail(f"Azurite is not installed at {binary}: run `make emulators-start` (scripts/emulators.sh)")
    work = tmp_path_factory.mktemp("azurite-oauth")
    cert, key = _self_signed_cert(work)
    port = _free_port()
    log_path = work / "azurite.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
             "--skipApiVersionCheck", "--disableTelemetry", "--silent", "--oauth", "basic",
             "--cert", str(cert), "--key", str(key)],
            cwd=work, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    endpoint = f"https://127.0.0.1:{port}/devstoreaccount1"
    try:
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient(
            endpoint, credential={"account_name": "devstoreaccount1", "account_key": AZURITE_KEY},
            connection_verify=str(cert),
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                service.create_container("oauth")
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Azurite with --oauth basic did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.3)
        yield endpoint, cert, "oauth"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def azure_oauth_options(endpoint: str, **extra: str) -> dict[str, str]:
    return {
        "spark.indextables.azure.endpoint": endpoint,
        "spark.indextables.azure.accountName": "devstoreaccount1",
        "spark.indextables.storage.retry.baseDelayMs": "20",
        **{f"spark.indextables.{k}": v for k, v in extra.items()},
    }


class BearerTokens:
    """Records the bearer token of every request an Azure container client sent (a response hook)."""

    def __init__(self):
        self.tokens: list[str] = []

    def __call__(self, response):
        auth = response.http_request.headers.get("Authorization", "")
        self.tokens.append(auth.removeprefix("Bearer "))


@pytest.mark.cloud
def test_azure_provider_tokens_refresh(azurite_oauth, monkeypatch):
    endpoint, cert, container = azurite_oauth
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # trust the test's certificate
    before = len(cp.CALLS)
    uri = f"az://{container}/provider-{uuid.uuid4().hex[:8]}"
    opts = azure_oauth_options(
        endpoint,
        **{
            "azure.credentialsProvider": "credential_providers:azure_short_lived",
            "credentials.refreshBufferSeconds": "0",
            "test.credentials.lifetimeSeconds": "3",
        },
    )
    seen = BearerTokens()
    storage = AzureStorage(uri, opts, client_kwargs={"raw_response_hook": seen})
    assert storage.credential_kind == "provider"
    storage.put("a.bin", b"first")
    assert storage.read("a.bin") == b"first"
    assert len(cp.CALLS) - before == 1
    time.sleep(4)  # the token has expired: Azurite refuses it ("The token is expired")
    assert [f.key for f in storage.list("")] == ["a.bin"]
    assert storage.read("a.bin") == b"first"
    assert len(cp.CALLS) - before == 2
    assert len(set(seen.tokens)) == 2 and all(t.count(".") == 2 for t in seen.tokens)

    # a second storage of the same table shares the provider's current token
    again = open_storage(uri, opts)
    assert again.read("a.bin") == b"first"
    assert len(cp.CALLS) - before == 2


class _JsonEndpoint(BaseHTTPRequestHandler):
    """A token endpoint's common parts: JSON answers, no request log."""

    def _answer(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serving(handler: type, tls_context=None):
    """`handler` served on 127.0.0.1 (over TLS with `tls_context`) in a thread; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls_context is not None:
        server.socket = tls_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class _IdentityEndpoint(_JsonEndpoint):
    """An App Service-style managed identity endpoint (api-version 2019-08-01)."""

    secret = ""
    requests: list[dict] = []

    def do_GET(self):
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        type(self).requests.append({"query": query, "header": self.headers.get("X-IDENTITY-HEADER")})
        if self.headers.get("X-IDENTITY-HEADER") != self.secret:
            self.send_response(401)
            self.end_headers()
            return
        token, expiry = cp.storage_jwt(3600, marker="managed-identity")
        self._answer(
            200,
            {
                "access_token": token,
                "expires_on": str(int(expiry.timestamp())),
                "resource": query.get("resource"),
                "token_type": "Bearer",
                "client_id": query.get("client_id", "system-assigned"),
            },
        )


@pytest.mark.cloud
def test_azure_managed_identity(azurite_oauth, monkeypatch):
    endpoint, cert, container = azurite_oauth
    _IdentityEndpoint.secret = uuid.uuid4().hex
    _IdentityEndpoint.requests = []
    with _serving(_IdentityEndpoint) as port:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
        monkeypatch.setenv("IDENTITY_ENDPOINT", f"http://127.0.0.1:{port}/msi/token")
        monkeypatch.setenv("IDENTITY_HEADER", _IdentityEndpoint.secret)
        uri = f"az://{container}/managed-{uuid.uuid4().hex[:8]}"
        opts = azure_oauth_options(
            endpoint, **{"azure.authType": "managedIdentity", "azure.clientId": "11111111-2222-3333-4444-555555555555"}
        )
        storage = open_storage(uri, opts)
        assert storage.credential_kind == "managedIdentity"
        storage.put("m.bin", b"managed")
        assert open_storage(uri, opts).read("m.bin") == b"managed"
        assert [f.key for f in storage.list("")] == ["m.bin"]
    got = _IdentityEndpoint.requests
    assert len(got) == 1, "the token is fetched once and shared by the storages of the process"
    assert got[0]["query"]["resource"] == "https://storage.azure.com"
    assert got[0]["query"]["client_id"] == "11111111-2222-3333-4444-555555555555"
    assert got[0]["header"] == _IdentityEndpoint.secret


class _EntraTokenEndpoint(_JsonEndpoint):
    """An Entra ID token endpoint (`/<tenant>/oauth2/v2.0/token`) answering the client-assertion
    request of azure-identity's WorkloadIdentityCredential. It accepts only the assertion read
    from the federated token file (`expected_assertion`)."""

    expected_assertion = ""
    requests: list[dict] = []
    issued: list[str] = []

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        type(self).requests.append({"path": urlsplit(self.path).path, "form": form})
        if form.get("client_assertion") != self.expected_assertion:
            self._answer(401, {"error": "invalid_client", "error_description": "AADSTS700024: assertion refused"})
            return
        token, _ = cp.storage_jwt(3600, marker="workload-identity")
        type(self).issued.append(token)
        self._answer(200, {"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": token})


@pytest.mark.cloud
def test_azure_workload_identity(azurite_oauth, monkeypatch, tmp_path, caplog):
    """azure.authType=workloadIdentity: azure-identity exchanges the federated (Kubernetes service
    account) token for a storage token at the authority named by AZURE_AUTHORITY_HOST (an HTTPS
    Entra-like endpoint served here with the test's certificate), and Azurite accepts it."""
    import ssl

    endpoint, cert, container = azurite_oauth
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, cert.parent / "key.pem")
    service_account_token, _ = cp.storage_jwt(3600, marker=f"k8s-service-account-{uuid.uuid4().hex[:6]}")
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text(service_account_token)
    _EntraTokenEndpoint.expected_assertion = service_account_token
    _EntraTokenEndpoint.requests, _EntraTokenEndpoint.issued = [], []
    tenant, client = "72f988bf-0000-4000-8000-00000000cafe", "a1b2c3d4-0000-4000-8000-000000000042"
    caplog.set_level(logging.DEBUG)
    with _serving(_EntraTokenEndpoint, context) as port:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # trusted by azure-core's requests transport
        monkeypatch.setenv("AZURE_AUTHORITY_HOST", f"https://127.0.0.1:{port}")
        monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", str(token_file))
        uri = f"az://{container}/workload-{uuid.uuid4().hex[:8]}"
        opts = azure_oauth_options(
            endpoint, **{"azure.authType": "workloadIdentity", "azure.clientId": client, "azure.tenantId": tenant}
        )
        seen = BearerTokens()
        storage = AzureStorage(uri, opts, client_kwargs={"raw_response_hook": seen})
        assert storage.credential_kind == "workloadIdentity"
        storage.put("w.bin", b"workload")
        assert storage.read("w.bin") == b"workload"
        assert [f.key for f in open_storage(uri, opts).list("")] == ["w.bin"]
    got = _EntraTokenEndpoint.requests
    assert len(got) == 1, "one token exchange, shared by the storages of the process"
    assert got[0]["path"] == f"/{tenant}/oauth2/v2.0/token"
    form = got[0]["form"]
    assert form["grant_type"] == "client_credentials" and form["client_id"] == client
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert form["scope"] == "https://storage.azure.com/.default"
    assert set(seen.tokens) == set(_EntraTokenEndpoint.issued) and len(seen.tokens) >= 2
    for secret in (service_account_token, *_EntraTokenEndpoint.issued):
        assert secret not in caplog.text
