"""AWS MSK IAM sign-in without AWS: SigV4 against AWS's published test suite, the token against a golden
one and botocore's own presigner, the region from the brokers' names, and the configuration."""

from __future__ import annotations

import base64
import datetime as dt
import urllib.parse
from typing import Any
from unittest import mock

import pytest
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.errors import ConfigError, SaslAuthenticationFailedError
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.msk_iam import (
    AwsCredentials,
    MskIamTokenProvider,
    canonical_request,
    msk_region_from_host,
    msk_token,
    presign_msk_url,
    signature,
    string_to_sign,
)

# The aws-sig-v4-test-suite's credentials, date, region and service.
KEY, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
WHEN = dt.datetime(2015, 8, 30, 12, 36, 0, tzinfo=dt.timezone.utc)
HOST = [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z")]


def suite_signature(method: str, params: list[tuple[str, str]], headers: list[tuple[str, str]], body: bytes = b"") -> str:
    request = canonical_request(method, "/", params, headers, body)
    return signature(SECRET, string_to_sign(request, WHEN, "us-east-1", "service"), WHEN, "us-east-1", "service")


@pytest.mark.parametrize("name, method, params, headers, body, expected", [
    ("get-vanilla", "GET", [], HOST, b"", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("get-vanilla-query-order-key-case", "GET", [("Param2", "value2"), ("Param1", "value1")], HOST, b"",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("get-vanilla-query-order-value", "GET", [("Param1", "value2"), ("Param1", "value1")], HOST, b"",
     "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"),
    ("get-vanilla-utf8-query", "GET", [("\u1234", "bar")], HOST, b"",
     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
    ("get-header-value-trim", "GET", [], HOST + [("My-Header1", " value1"), ("My-Header2", '"a   b   c"')], b"",
     "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
    ("get-header-key-duplicate", "GET", [], HOST + [("My-Header1", "value2"), ("My-Header1", "value2"), ("My-Header1", "value1")], b"",
     "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"),
    ("post-x-www-form-urlencoded", "POST", [], [("Content-Type", "application/x-www-form-urlencoded")] + HOST, b"Param1=value1",
     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
    ("get-vanilla with a session token", "GET", [],
     HOST + [("X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267")], b"",
     "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"),
])
def test_sigv4_signs_the_aws_test_suite_vectors(
    name: str, method: str, params: list[tuple[str, str]], headers: list[tuple[str, str]], body: bytes, expected: str
) -> None:
    assert suite_signature(method, params, headers, body) == expected, name


def test_the_suites_get_vanilla_canonical_request_and_string_to_sign() -> None:
    request = canonical_request("GET", "/", [], HOST, b"")
    assert request == (
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert string_to_sign(request, WHEN, "us-east-1", "service") == (
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
    )


#: An MSK IAM token for the suite's credentials, a session token, 2015-08-30T12:36:00Z, us-east-1 and AWS's
#: Python signer's User-Agent, made with botocore's SigV4QueryAuth as that signer does (computed once).
GOLDEN = (
    "aHR0cHM6Ly9rYWZrYS51cy1lYXN0LTEuYW1hem9uYXdzLmNvbS8_QWN0aW9uPWthZmthLWNsdXN0ZXIlM0FDb25uZWN0JlgtQW16LUFsZ29yaXRobT1BV1M0"
    "LUhNQUMtU0hBMjU2JlgtQW16LUNyZWRlbnRpYWw9QUtJREVYQU1QTEUlMkYyMDE1MDgzMCUyRnVzLWVhc3QtMSUyRmthZmthLWNsdXN0ZXIlMkZhd3M0X3Jl"
    "cXVlc3QmWC1BbXotRGF0ZT0yMDE1MDgzMFQxMjM2MDBaJlgtQW16LUV4cGlyZXM9OTAwJlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCZYLUFtei1TZWN1cml0"
    "eS1Ub2tlbj1TRVNTSU9OVE9LRU4lMkYlMkIlM0QmWC1BbXotU2lnbmF0dXJlPTJiMzFhM2UxMmE1OTRkNjhlZWJkMjI1OGE1ZTZhMzBiYjI1N2U0OTkxMTlh"
    "MDc4MmI2ZWI5ZTBmYTI2NWY0MjYmVXNlci1BZ2VudD1hd3MtbXNrLWlhbS1zYXNsLXNpZ25lci1weXRob24lMkYxLjAuMQ"
)


def test_the_msk_token_is_the_golden_one_and_expires_with_the_presigned_url() -> None:
    token, expiry_ms = msk_token(AwsCredentials(KEY, SECRET, "SESSIONTOKEN/+="), "us-east-1", WHEN,
                                 user_agent="aws-msk-iam-sasl-signer-python/1.0.1")
    assert token == GOLDEN
    assert expiry_ms == int(WHEN.timestamp() * 1000) + 900_000
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    assert query["Action"] == "kafka-cluster:Connect" and query["X-Amz-Expires"] == "900"
    assert query["X-Amz-Credential"] == "AKIDEXAMPLE/20150830/us-east-1/kafka-cluster/aws4_request"


@pytest.mark.parametrize("session_token", [None, "FwoGZXIvYXdzEJr//+token="])
def test_the_presigned_url_is_byte_for_byte_botocores(session_token: str | None) -> None:
    request = AWSRequest(method="GET", url="https://kafka.eu-west-1.amazonaws.com/", params={"Action": "kafka-cluster:Connect"})
    with mock.patch("botocore.auth.get_current_datetime", return_value=WHEN.replace(tzinfo=None)):
        SigV4QueryAuth(Credentials(KEY, SECRET, session_token), "kafka-cluster", "eu-west-1", expires=900).add_auth(request)
    assert presign_msk_url(AwsCredentials(KEY, SECRET, session_token), "eu-west-1", WHEN) == request.prepare().url


def test_a_naive_time_is_refused_and_secrets_stay_out_of_reprs() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        msk_token(AwsCredentials(KEY, SECRET), "us-east-1", WHEN.replace(tzinfo=None))
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
