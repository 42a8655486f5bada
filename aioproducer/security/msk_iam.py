"""AWS MSK IAM sign-in: an OAUTHBEARER token that is a SigV4-presigned ``kafka-cluster:Connect`` URL.

Theory of operation. Amazon MSK's IAM listeners (port 9098) take, through OAUTHBEARER, a token
that AWS's MSK signer libraries make this way: the URL
``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect`` presigned with AWS
Signature Version 4 in its query string (service ``kafka-cluster``, ``X-Amz-Expires=900``, only
``host`` signed, the session token as ``X-Amz-Security-Token`` when the credentials have one),
then a ``User-Agent`` parameter appended (not signed), and the whole URL base64url-encoded
without padding. The broker checks the signature with the caller's IAM identity; the token
expires with the presigned URL (``X-Amz-Date`` + 900 s).

The signing is pure (:func:`canonical_request`, :func:`string_to_sign`, :func:`signing_key`,
:func:`presign_msk_url`): checked against AWS's published SigV4 test suite and against
botocore's own presigner. Only the credentials come from ``botocore`` (the ``msk`` extra): its
default chain (environment, profile, SSO, container or instance role), read in a thread since
it may call the network. Secrets (the secret key, the session token) never appear in a
``repr`` or a message.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import hmac
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aioproducer._version import __version__

__all__ = [
    "AwsCredentials",
    "MskIamTokenProvider",
    "canonical_request",
    "msk_region_from_host",
    "msk_token",
    "presign_msk_url",
    "signing_key",
    "string_to_sign",
]

ALGORITHM: Final = "AWS4-HMAC-SHA256"
MSK_SERVICE: Final = "kafka-cluster"
MSK_ACTION: Final = "kafka-cluster:Connect"
#: How long a token is good for, as AWS's MSK signers set it (seconds).
MSK_EXPIRES_S: Final = 900
_UNRESERVED: Final = "-_.~"
_MSK_HOST = re.compile(r"(?:^|\.)kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


@dataclass(frozen=True, repr=False)
class AwsCredentials:
    """An access key, its secret and an optional session token; ``repr`` shows the key id only."""

    access_key: str
    secret_key: str
    session_token: str | None = None

    def __repr__(self) -> str:
        return f"AwsCredentials(access_key={self.access_key!r}, session_token={'yes' if self.session_token else 'no'})"


def _uri_encode(text: str) -> str:
    return urllib.parse.quote(text, safe=_UNRESERVED)


def canonical_query(params: Sequence[tuple[str, str]]) -> str:
    """Names and values URI-encoded, sorted by name then value (SigV4's canonical query string)."""
    encoded = sorted((_uri_encode(k), _uri_encode(v)) for k, v in params)
    return "&".join(f"{k}={v}" for k, v in encoded)


def _header_value(value: str) -> str:
    return " ".join(value.split())


def canonical_headers(headers: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(canonical headers block, signed header names): lower-case names, trimmed values, repeats joined by ','."""
    merged: dict[str, list[str]] = {}
    for name, value in headers:
        merged.setdefault(name.lower(), []).append(_header_value(value))
    names = sorted(merged)
    block = "".join(f"{name}:{','.join(merged[name])}\n" for name in names)
    return block, ";".join(names)


def canonical_request(
    method: str, path: str, params: Sequence[tuple[str, str]], headers: Sequence[tuple[str, str]], payload: bytes
) -> str:
    """SigV4's canonical request (a path of unreserved characters and '/', as every request here has)."""
    block, signed = canonical_headers(headers)
    uri = "/".join(_uri_encode(segment) for segment in (path or "/").split("/"))
    return "\n".join((method, uri, canonical_query(params), block, signed, hashlib.sha256(payload).hexdigest()))


def credential_scope(when: dt.datetime, region: str, service: str) -> str:
    return f"{when:%Y%m%d}/{region}/{service}/aws4_request"


def string_to_sign(request: str, when: dt.datetime, region: str, service: str) -> str:
    digest = hashlib.sha256(request.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{when:%Y%m%dT%H%M%SZ}\n{credential_scope(when, region, service)}\n{digest}"


def signing_key(secret_key: str, when: dt.datetime, region: str, service: str) -> bytes:
    key = f"AWS4{secret_key}".encode("utf-8")
    for part in (f"{when:%Y%m%d}", region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key


def signature(secret_key: str, to_sign: str, when: dt.datetime, region: str, service: str) -> str:
    return hmac.new(signing_key(secret_key, when, region, service), to_sign.encode("utf-8"), hashlib.sha256).hexdigest()


def presign_msk_url(credentials: AwsCredentials, region: str, when: dt.datetime) -> str:
    """The presigned ``kafka-cluster:Connect`` URL (without the User-Agent parameter)."""
    host = f"kafka.{region}.amazonaws.com"
    params = [
        ("Action", MSK_ACTION),
        ("X-Amz-Algorithm", ALGORITHM),
        ("X-Amz-Credential", f"{credentials.access_key}/{credential_scope(when, region, MSK_SERVICE)}"),
        ("X-Amz-Date", f"{when:%Y%m%dT%H%M%SZ}"),
        ("X-Amz-Expires", str(MSK_EXPIRES_S)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if credentials.session_token:
        params.append(("X-Amz-Security-Token", credentials.session_token))
    request = canonical_request("GET", "/", params, [("host", host)], b"")
    signed = signature(credentials.secret_key, string_to_sign(request, when, region, MSK_SERVICE), when, region, MSK_SERVICE)
    # The parameters in the order botocore (and so AWS's MSK signers) writes them; signed sorted.
    query = "&".join(f"{_uri_encode(k)}={_uri_encode(v)}" for k, v in params)
    return f"https://{host}/?{query}&X-Amz-Signature={signed}"


def msk_token(credentials: AwsCredentials, region: str, when: dt.datetime, user_agent: str | None = None) -> tuple[str, int]:
    """(token, expiry in ms since the epoch): the presigned URL, a User-Agent added, base64url without padding."""
    if when.tzinfo is None:
        raise ValueError("msk_token: when must be an aware datetime (UTC)")
    when = when.astimezone(dt.timezone.utc).replace(microsecond=0)
    agent = user_agent or f"aioproducer/{__version__}"
    url = f"{presign_msk_url(credentials, region, when)}&User-Agent={_uri_encode(agent)}"
    token = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
    return token, int(when.timestamp() * 1000) + MSK_EXPIRES_S * 1000


def msk_region_from_host(host: str) -> str | None:
    """The region in an MSK broker's name (``b-1.c.xxxx.c2.kafka.us-east-1.amazonaws.com``), or None."""
    match = _MSK_HOST.search(host.lower())
    return match.group(1) if match else None


class MskIamTokenProvider:
    """Tokens for ``sasl_oauth_token_provider``-style use: credentials from botocore's default chain.

    ``profile`` picks an AWS profile (the JAAS option ``awsProfileName``); ``session`` is a ready
    ``botocore.session.Session`` to use instead.
    """

    def __init__(self, region: str, *, profile: str | None = None, session: Any = None) -> None:
        if not region:
            raise ValueError("MskIamTokenProvider: region is empty")
        self.region = region
        self.profile = profile
        self._session = session

    def __repr__(self) -> str:
        return f"MskIamTokenProvider(region={self.region!r}, profile={self.profile!r})"

    def _credentials(self) -> AwsCredentials:
        from aioproducer.errors import SaslAuthenticationFailedError

        session = self._session
        if session is None:
            import botocore.session

            session = botocore.session.Session(profile=self.profile)
            self._session = session
        found = session.get_credentials()
        if found is None:
            raise SaslAuthenticationFailedError(
                "AWS MSK IAM: no AWS credentials found (environment, profile, SSO, container or instance role)"
            )
        frozen = found.get_frozen_credentials()
        return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    async def __call__(self) -> tuple[str, int]:
        credentials = await asyncio.to_thread(self._credentials)
        return msk_token(credentials, self.region, dt.datetime.now(dt.timezone.utc))


def msk_provider_from_jaas(options: Mapping[str, str], bootstrap_hosts: Sequence[str]) -> MskIamTokenProvider:
    """The provider for an ``IAMLoginModule`` JAAS line: region from the brokers' names, profile from ``awsProfileName``."""
    regions = {region for host in bootstrap_hosts if (region := msk_region_from_host(host)) is not None}
    if len(regions) != 1:
        found = "none" if not regions else ", ".join(sorted(regions))
        raise ValueError(
            "AWS MSK IAM: the region is read from the bootstrap servers' MSK names "
            f"(b-1.<cluster>.kafka.<region>.amazonaws.com); found {found}"
        )
    return MskIamTokenProvider(regions.pop(), profile=options.get("awsProfileName"))
