"""AWS MSK IAM sign-in without AWS: the token (botocore's presigned URL) checked as MSK's broker checks it,
a golden token for a fixed clock, the region from the brokers' names, and the configuration.

The signing is botocore's ``SigV4QueryAuth``; what is tested is the behaviour: the broker side is played by
:func:`broker_accepts`, a SigV4 query-string verifier of the test's own (itself checked against AWS's
published ``get-vanilla-query`` vector), which must accept the token for the right secret and refuse it for
a wrong secret, another action, another region or after its expiry.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import urllib.parse
from typing import Any
from unittest import mock

import pytest

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.errors import ConfigError, SaslAuthenticationFailedError
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.msk_iam import AwsCredentials, MskIamTokenProvider, msk_region_from_host, msk_token

# The aws-sig-v4-test-suite's credentials and date.
KEY, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
WHEN = dt.datetime(2015, 8, 30, 12, 36, 0, tzinfo=dt.timezone.utc)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def sigv4_signature(secret: str, query: list[tuple[str, str]], headers: list[tuple[str, str]], when: str, scope: str) -> str:
    """SigV4 of a GET / with ``query`` and the (lower-case, sorted) ``headers`` signed: the broker's side, from AWS's spec."""
    canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query))
    block = "".join(f"{name}:{value}\n" for name, value in headers)
    names = ";".join(name for name, _ in headers)
    request = f"GET\n/\n{canonical_query}\n{block}\n{names}\n{hashlib.sha256(b'').hexdigest()}"
    to_sign = f"AWS4-HMAC-SHA256\n{when}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    key = f"AWS4{secret}".encode()
    for part in scope.split("/"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_the_verifier_signs_the_aws_suites_vectors() -> None:
    """The test's verifier is right: AWS's published signatures for get-vanilla and get-vanilla-query-order-key-case."""
    headers = [("host", "example.amazonaws.com"), ("x-amz-date", "20150830T123600Z")]
    scope = "20150830/us-east-1/service/aws4_request"
    assert sigv4_signature(SECRET, [], headers, "20150830T123600Z", scope) == (
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    assert sigv4_signature(SECRET, [("Param2", "value2"), ("Param1", "value1")], headers, "20150830T123600Z", scope) == (
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")


def decode_token(token: str) -> tuple[str, list[tuple[str, str]]]:
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    parts = urllib.parse.urlsplit(url)
    return parts.netloc, urllib.parse.parse_qsl(parts.query)


def broker_accepts(token: str, secret: str, region: str, now: dt.datetime) -> bool:
    """What MSK's IAM listener checks of a token: the action, the scope, the expiry and the signature."""
    host, query = decode_token(token)
    fields = dict(query)
    signed = [(k, v) for k, v in query if k not in ("X-Amz-Signature", "User-Agent")]
    signed_at = dt.datetime.strptime(fields["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    scope = fields["X-Amz-Credential"].split("/", 1)[1]
    return (
        host == f"kafka.{region}.amazonaws.com"
        and fields["Action"] == "kafka-cluster:Connect"
        and scope == f"{signed_at:%Y%m%d}/{region}/kafka-cluster/aws4_request"
        and now <= signed_at + dt.timedelta(seconds=int(fields["X-Amz-Expires"]))
        and hmac.compare_digest(
            sigv4_signature(secret, signed, [("host", host)], fields["X-Amz-Date"], scope), fields["X-Amz-Signature"])
    )


@pytest.mark.parametrize("session_token", [None, "FwoGZXIvYXdzEJr//+token="])
def test_the_broker_accepts_the_token_for_the_right_secret_until_it_expires(session_token: str | None) -> None:
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    token, expiry_ms = msk_token(AwsCredentials(KEY, SECRET, session_token), "eu-west-1")
    now = dt.datetime.now(dt.timezone.utc)
    assert broker_accepts(token, SECRET, "eu-west-1", now)
    assert not broker_accepts(token, SECRET + "x", "eu-west-1", now)
    assert not broker_accepts(token, SECRET, "us-east-1", now)
    expiry = dt.datetime.fromtimestamp(expiry_ms / 1000, dt.timezone.utc)
    assert before + dt.timedelta(seconds=900) <= expiry <= now + dt.timedelta(seconds=900)
    assert broker_accepts(token, SECRET, "eu-west-1", expiry)
    assert not broker_accepts(token, SECRET, "eu-west-1", expiry + dt.timedelta(seconds=1))
    assert dict(decode_token(token)[1]).get("X-Amz-Security-Token") == session_token


def test_a_token_whose_signed_fields_were_changed_is_refused() -> None:
    token, _ = msk_token(AwsCredentials(KEY, SECRET), "eu-west-1")
    host, query = decode_token(token)
    forged = [(k, "kafka-cluster:AlterCluster" if k == "Action" else v) for k, v in query]
    forged_token = base64.urlsafe_b64encode(
        f"https://{host}/?{urllib.parse.urlencode(forged)}".encode()).decode().rstrip("=")
    assert not broker_accepts(forged_token, SECRET, "eu-west-1", dt.datetime.now(dt.timezone.utc))


#: An MSK IAM token for the suite's credentials, a session token, 2015-08-30T12:36:00Z, us-east-1 and AWS's
#: Python signer's User-Agent (computed once): the token's form (parameter order, the unsigned User-Agent
#: last, base64url without padding) as AWS's signers write it.
GOLDEN = (
    "aHR0cHM6Ly9rYWZrYS51cy1lYXN0LTEuYW1hem9uYXdzLmNvbS8_QWN0aW9uPWthZmthLWNsdXN0ZXIlM0FDb25uZWN0JlgtQW16LUFsZ29yaXRobT1BV1M0"
    "LUhNQUMtU0hBMjU2JlgtQW16LUNyZWRlbnRpYWw9QUtJREVYQU1QTEUlMkYyMDE1MDgzMCUyRnVzLWVhc3QtMSUyRmthZmthLWNsdXN0ZXIlMkZhd3M0X3Jl"
    "cXVlc3QmWC1BbXotRGF0ZT0yMDE1MDgzMFQxMjM2MDBaJlgtQW16LUV4cGlyZXM9OTAwJlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCZYLUFtei1TZWN1cml0"
    "eS1Ub2tlbj1TRVNTSU9OVE9LRU4lMkYlMkIlM0QmWC1BbXotU2lnbmF0dXJlPTJiMzFhM2UxMmE1OTRkNjhlZWJkMjI1OGE1ZTZhMzBiYjI1N2U0OTkxMTlh"
    "MDc4MmI2ZWI5ZTBmYTI2NWY0MjYmVXNlci1BZ2VudD1hd3MtbXNrLWlhbS1zYXNsLXNpZ25lci1weXRob24lMkYxLjAuMQ"
)


def test_the_msk_token_is_the_golden_one_for_a_fixed_clock() -> None:
    with mock.patch("botocore.auth.get_current_datetime", return_value=WHEN.replace(tzinfo=None)):
        token, expiry_ms = msk_token(AwsCredentials(KEY, SECRET, "SESSIONTOKEN/+="), "us-east-1",
                                     user_agent="aws-msk-iam-sasl-signer-python/1.0.1")
    assert token == GOLDEN
    assert expiry_ms == int(WHEN.timestamp() * 1000) + 900_000
    assert broker_accepts(token, SECRET, "us-east-1", WHEN)


def test_secrets_stay_out_of_reprs() -> None:
    shown = repr(AwsCredentials(KEY, SECRET, "tok-secret"))
    assert SECRET not in shown and "tok-secret" not in shown and KEY in shown


@pytest.mark.parametrize("host, region", [
    ("b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com", "us-east-1"),
    ("b-2.demo.x1y2z3.c4.kafka.ap-southeast-2.amazonaws.com", "ap-southeast-2"),
    ("boot-abc.c1.kafka-serverless.eu-central-1.amazonaws.com", "eu-central-1"),
    ("b-1.c.kafka.cn-north-1.amazonaws.com.cn", "cn-north-1"),
    ("broker1.example.com", None),
    ("kafka.us-east-1.amazonaws.com.evil.example", None),
])
def test_the_region_comes_from_the_brokers_msk_name(host: str, region: str | None) -> None:
    assert msk_region_from_host(host) == region


MSK_JAAS = 'software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="prod";'


def msk_config(**extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": "b-1.c.abc.c2.kafka.us-west-2.amazonaws.com:9098,b-2.c.abc.c2.kafka.us-west-2.amazonaws.com:9098",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": MSK_JAAS,
    } | extra


def test_the_jaas_line_alone_signs_in_with_msk_iam() -> None:
    sasl = ConnectionSecurity.from_config(ProducerConfig(msk_config())).sasl
    assert sasl is not None and isinstance(sasl.token_provider, MskIamTokenProvider)
    assert (sasl.token_provider.region, sasl.token_provider.profile) == ("us-west-2", "prod")


def test_an_oauthbearer_jaas_option_cannot_pose_as_the_msk_marker() -> None:
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="alice" msk_iam="true" aws_msk_iam="true";')
    sasl = ConnectionSecurity.from_config(ProducerConfig(msk_config(**{"sasl.jaas.config": jaas}))).sasl
    assert sasl is not None and sasl.token_provider is None and sasl.unsecured_principal == "alice"


async def test_the_provider_signs_with_botocores_credentials() -> None:
    session = mock.Mock()
    session.get_credentials.return_value.get_frozen_credentials.return_value = mock.Mock(
        access_key=KEY, secret_key=SECRET, token=None)
    token, expiry_ms = await MskIamTokenProvider("us-west-2", session=session)()
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    assert url.startswith("https://kafka.us-west-2.amazonaws.com/?Action=kafka-cluster%3AConnect&")
    assert "&User-Agent=aioproducer%2F" in url and expiry_ms > 0
    session.get_credentials.return_value = None
    with pytest.raises(SaslAuthenticationFailedError, match="no AWS credentials found"):
        await MskIamTokenProvider("us-west-2", session=session)()


@pytest.mark.parametrize("extra, message", [
    ({"bootstrap.servers": "broker1.example.com:9098"}, "the region is read from the bootstrap servers' MSK names.*found none"),
    ({"bootstrap.servers": "b-1.c.kafka.us-west-2.amazonaws.com:9098,b-1.d.kafka.eu-west-1.amazonaws.com:9098"},
     "found eu-west-1, us-west-2"),
    ({"sasl.mechanism": "SCRAM-SHA-512"}, "set sasl.mechanism=OAUTHBEARER, not 'SCRAM-SHA-512'"),
    ({"sasl_oauth_token_provider": lambda: "t"}, "sasl_oauth_token_provider and sasl.jaas.config's IAMLoginModule both give tokens"),
])
def test_bad_msk_settings_fail_when_the_producer_is_made(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Producer(msk_config(**extra))
