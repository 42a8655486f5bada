"""AWS MSK IAM sign-in: an OAUTHBEARER token that is a SigV4-presigned ``kafka-cluster:Connect`` URL.

Theory of operation. Amazon MSK's IAM listeners (port 9098) take, through OAUTHBEARER, a token
that AWS's MSK signer libraries make this way: the URL
``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect`` presigned with AWS
Signature Version 4 in its query string (service ``kafka-cluster``, ``X-Amz-Expires=900``),
then a ``User-Agent`` parameter appended (not signed), and the whole URL base64url-encoded
without padding. The broker checks the signature with the caller's IAM identity; the token
expires with the presigned URL (``X-Amz-Date`` + 900 s).

The signing is botocore's (the ``msk`` extra): its ``SigV4QueryAuth`` presigner, the one AWS's
own MSK signers use, maintained with the SDK; nothing here computes a signature. So are the
credentials: botocore's default chain (environment, profile, SSO, container or instance role),
read in a thread since it may call the network. Secrets (the secret key, the session token)
never appear in a ``repr`` or a message.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aioproducer._version import __version__

__all__ = [
    "AwsCredentials",
    "MskIamTokenProvider",
    "msk_region_from_host",
    "msk_token",
]

MSK_SERVICE: Final = "kafka-cluster"
MSK_ACTION: Final = "kafka-cluster:Connect"
#: How long a token is good for, as AWS's MSK signers set it (seconds).
MSK_EXPIRES_S: Final = 900
_MSK_HOST = re.compile(r"(?:^|\.)kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


@dataclass(frozen=True, repr=False)
class AwsCredentials:
    """An access key, its secret and an optional session token; ``repr`` shows the key id only.

    ``token`` is the name botocore's signers read the session token under.
    """

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:
        return f"AwsCredentials(access_key={self.access_key!r}, session_token={'yes' if self.token else 'no'})"


def msk_token(credentials: AwsCredentials, region: str, user_agent: str | None = None) -> tuple[str, int]:
    """(token, expiry in ms since the epoch): the URL presigned now by botocore, a User-Agent added, base64url.

    The expiry is read back from the signed URL (``X-Amz-Date`` + ``X-Amz-Expires``), so it is the
    signature's own, whatever clock botocore read.
    """
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="GET", url=f"https://kafka.{region}.amazonaws.com/", params={"Action": MSK_ACTION})
    SigV4QueryAuth(credentials, MSK_SERVICE, region, expires=MSK_EXPIRES_S).add_auth(request)
    url: str = request.prepare().url
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    signed_at = dt.datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    agent = urllib.parse.quote(user_agent or f"aioproducer/{__version__}", safe="-_.~")
    token = base64.urlsafe_b64encode(f"{url}&User-Agent={agent}".encode()).decode("ascii").rstrip("=")
    return token, int(signed_at.timestamp()) * 1000 + int(query["X-Amz-Expires"]) * 1000


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

    def _token(self) -> tuple[str, int]:
        return msk_token(self._credentials(), self.region)

    async def __call__(self) -> tuple[str, int]:
        return await asyncio.to_thread(self._token)


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
