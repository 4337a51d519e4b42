"""The registry's storage options (config/registry.py joins the families).

Object storage: S3 and Azure credentials (static, providers, assumed roles, identities),
endpoints, upload and listing sizes, connections, retries and timeouts.
"""

from __future__ import annotations

from indextables_spark.config.keys.spec import MB, OptionSpec

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "aws.accessKey",
        "str",
        None,
        "S3 static credentials (both or neither of access and secret key); else boto3's default chain",
        secret=True,
    ),
    OptionSpec("aws.secretKey", "str", None, "S3 secret key", secret=True),
    OptionSpec("aws.sessionToken", "str", None, "S3 session token", secret=True),
    OptionSpec("aws.region", "str", None, "S3 region (default: boto3's, `us-east-1` with an endpoint)"),
    OptionSpec(
        "aws.credentialsProvider",
        "str",
        None,
        "S3 credentials from a Python callable `module:function`, called as `function(uri, options)` on the "
        "driver and the executors; returns `AwsCredentials` (keys, session token, expiry), refreshed before expiry",
    ),
    OptionSpec("aws.credentialsProviderClass", "str", None, "same as `aws.credentialsProvider`", readme=False),
    OptionSpec("aws.profile", "str", None, "S3 credentials from this profile of the AWS config/credentials files"),
    OptionSpec(
        "aws.roleArn",
        "str",
        None,
        "assume this IAM role through STS (with the credentials above as the source), refreshed before expiry",
    ),
    OptionSpec("aws.roleSessionName", "str", "indextables-spark", "session name of the assumed role"),
    OptionSpec("aws.externalId", "str", None, "external id of the assumed role", secret=True),
    OptionSpec("aws.roleDurationSeconds", "int", 3600, "lifetime of the assumed role's credentials (900–43200)"),
    OptionSpec("aws.stsEndpoint", "str", None, "STS endpoint URL (default: `s3.endpoint` when set, else AWS's)"),
    OptionSpec(
        "credentials.refreshBufferSeconds",
        "int",
        300,
        "provider and assumed-role credentials are renewed this long before they expire",
    ),
    OptionSpec("s3.endpoint", "str", None, "S3-compatible endpoint URL"),
    OptionSpec("s3.pathStyleAccess", "bool", False, "`endpoint/bucket/key` addressing"),
    OptionSpec("s3.multipartThreshold", "size", 64 * MB, "S3 uploads in parts past this size"),
    OptionSpec("s3.multipartPartSize", "size", 16 * MB, "S3 part size"),
    OptionSpec("s3.uploadConcurrency", "int", 4, "S3 parallel part uploads"),
    OptionSpec("s3.maxConnections", "int", 32, "S3 connection pool size"),
    OptionSpec("s3.listPageSize", "int", 1000, "S3 keys per list request"),
    OptionSpec(
        "s3.presignedReads",
        "bool",
        True,
        "S3 reads and listings go as SigV4-presigned requests over botocore's HTTP session, without a boto3 "
        "client (~6x less CPU per request; missing objects and 5xx raised as the SDK does, other answers asked "
        "again through it); false: every request through boto3",
    ),
    OptionSpec("azure.accountName", "str", None, "Azure storage account"),
    OptionSpec("azure.accountKey", "str", None, "Azure account key", secret=True),
    OptionSpec("azure.connectionString", "str", None, "Azure connection string", secret=True),
    OptionSpec("azure.sasToken", "str", None, "Azure SAS token", secret=True),
    OptionSpec("azure.tenantId", "str", None, "Azure service principal (or workload identity) tenant"),
    OptionSpec(
        "azure.clientId",
        "str",
        None,
        "Azure service principal client id; with `azure.authType`, the managed or workload identity's client id",
    ),
    OptionSpec(
        "azure.authType",
        "str",
        None,
        "`managedIdentity`, `workloadIdentity` or `default` (DefaultAzureCredential), through azure-identity",
    ),
    OptionSpec(
        "azure.credentialsProvider",
        "str",
        None,
        "an Azure Storage bearer token from a Python callable `module:function`, called as `function(uri, options)`; "
        "returns `AzureToken` (token, expiry), refreshed before expiry",
    ),
    OptionSpec("azure.clientSecret", "str", None, "Azure service principal secret", secret=True),
    OptionSpec("azure.bearerToken", "str", None, "Azure OAuth bearer token", secret=True),
    OptionSpec(
        "secrets",
        "str",
        None,
        "set by the package, not by users: the secret options a Spark read copies from the session conf, "
        "as one JSON object under a name Spark's `spark.redaction.regex` hides in plans and the SQL tab",
        secret=True,
    ),
    OptionSpec(
        "optionsChecked",
        "bool",
        False,
        "set by the package, not by users: the driver already logged the unknown keys among a Spark "
        "read's or write's options, so the Python workers that run it do not log them again",
    ),
    OptionSpec("azure.endpoint", "str", None, "Azure blob endpoint (Azurite, sovereign clouds)"),
    OptionSpec("azure.singlePutMaxSize", "size", 64 * MB, "Azure uploads in blocks past this size"),
    OptionSpec("azure.blockSize", "size", 8 * MB, "Azure block size"),
    OptionSpec("azure.uploadConcurrency", "int", 4, "Azure parallel block uploads"),
    OptionSpec("azure.maxConnections", "int", 32, "Azure connection pool size"),
    OptionSpec("azure.listPageSize", "int", 5000, "Azure blobs per list request"),
    OptionSpec("storage.retry.maxAttempts", "int", 5, "attempts of a storage request on transient errors"),
    OptionSpec("storage.retry.baseDelayMs", "int", 100, "storage retry base delay"),
    OptionSpec("storage.retry.maxDelayMs", "int", 5000, "storage retry maximum delay"),
    OptionSpec("storage.connectTimeoutMs", "int", 10_000, "storage connect timeout"),
    OptionSpec("storage.readTimeoutMs", "int", 60_000, "storage read timeout"),
)
