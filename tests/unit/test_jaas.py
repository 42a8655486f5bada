"""``sasl.jaas.config`` as users paste it: the providers' snippets, Java's quoting, errors that leak nothing."""

from __future__ import annotations

import re

import pytest

from aioproducer.security.jaas import JaasConfig, credentials_from_jaas, parse_jaas_config

PLAIN_CONFLUENT = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="KEY" password="SECRET";'
)
SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'
OAUTH = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";'
MSK_IAM = "software.amazon.msk.auth.iam.IAMLoginModule required;"


# ---------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "module", "options"),
    [
        (
            PLAIN_CONFLUENT,
            "org.apache.kafka.common.security.plain.PlainLoginModule",
            {"username": "KEY", "password": "SECRET"},
        ),
        (
            SCRAM,
            "org.apache.kafka.common.security.scram.ScramLoginModule",
            {"username": "alice", "password": "alice-secret"},
        ),
        (
            OAUTH,
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
            {"unsecuredLoginStringClaim_sub": "alice"},
        ),
        (MSK_IAM, "software.amazon.msk.auth.iam.IAMLoginModule", {}),
    ],
    ids=["confluent-plain", "scram", "oauthbearer", "msk-iam"],
)
def test_the_snippets_users_paste(text: str, module: str, options: dict[str, str]) -> None:
    assert parse_jaas_config(text) == JaasConfig(module, "required", options)


def test_whitespace_newlines_comments_and_option_order() -> None:
    text = """
        // pasted from the provider's page
        org.apache.kafka.common.security.plain.PlainLoginModule
            REQUIRED   /* flag is case-insensitive */
            username = "u"
            password
              =
            "p" ;
    """
    config = parse_jaas_config(text)
    assert config.control_flag == "required"
    assert list(config.options.items()) == [("username", "u"), ("password", "p")]


@pytest.mark.parametrize("flag", ["required", "requisite", "sufficient", "optional", "Optional"])
def test_every_control_flag(flag: str) -> None:
    assert parse_jaas_config(f"a.B {flag};").control_flag == flag.lower()


@pytest.mark.parametrize(
    ("written", "value"),
    [
        (r'"say \"hi\""', 'say "hi"'),
        (r'"back\\slash"', "back\\slash"),
        (r'"tab\tnew\nline"', "tab\tnew\nline"),
        (r'"\101\1012\400"', "AA2 0"),  # octal as Java reads it: \101, \101 then "2", \40 then "0"
        (r'"\q"', "q"),  # an unknown escape is the character itself
        ('"a;b=c d"', "a;b=c d"),
        ("'single \"quoted\"'", 'single "quoted"'),
        ('""', ""),
        ("bare-token_1.2$", "bare-token_1.2$"),
        ("http://host:8080/path", "http://host:8080/path"),
    ],
)
def test_value_quoting_and_escapes(written: str, value: str) -> None:
    assert parse_jaas_config(f"a.B required k={written};").options == {"k": value}


def test_bare_value_ends_at_semicolon() -> None:
    assert parse_jaas_config("a.B required k=v;").options == {"k": "v"}


@pytest.mark.parametrize(
    ("text", "problem", "where"),
    [
        ('a.B required k="v"', "missing ';'", "offset 18"),
        ('a.B required k="v', "unterminated quoted value", "column 16"),
        ('a.B required k="v\n";', "unterminated quoted value", "offset 15"),
        ('a.B required k="v\\', "unterminated quoted value", "offset 15"),
        ("a.B required; c.D required;", "only one login module", "offset 14"),
        ("a.B required k=v; c.D required k=v;", "only one login module", "offset 18"),
        ("a.B mandatory;", "expected a control flag", "offset 4"),
        ("a.B;", "expected a control flag", "found ';'"),
        ("required;", "expected a control flag", "found ';'"),
        ('"a.B" required;', "expected a login module class name", "found '\"'"),
        ("1a.B required;", "expected a login module class name", "offset 0"),
        ("", "expected a login module class name", "the end of the text"),
        ("a.B required k;", "expected '=' after an option name", "found ';'"),
        ("a.B required k=;", "expected a value", "found ';'"),
        ("a.B required =v;", "expected an option name", "found '='"),
        ("a.B required k=1 k=2;", "given twice", "offset 17"),
        ("a.B required /* k=v;", "unterminated '/*' comment", "offset 13"),
        ("a.B required\n  k=v\n  j;", "expected '='", "line 3, column 4"),
    ],
)
def test_malformed_input(text: str, problem: str, where: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)) as caught:
        parse_jaas_config(text)
    assert where in str(caught.value)


SECRET = "hunter2-SECRET"


@pytest.mark.parametrize(
    "text",
    [
        f'a.B required password="{SECRET}"',
        f'a.B required password="{SECRET}',
        f"a.B required password={SECRET} {SECRET};",
        f"a.B required password={SECRET}={SECRET};",
        f'a.B required password="{SECRET}"; c.D required password="{SECRET}";',
        f'a.B required password="{SECRET}" password="{SECRET}";',
        f"{SECRET} required;",
        f"a.B {SECRET};",
    ],
)
def test_errors_never_echo_the_input(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_jaas_config(text)
    assert SECRET not in str(caught.value)
    assert "hunter" not in str(caught.value)


def test_repr_masks_secret_options() -> None:
    config = parse_jaas_config(
        f'a.B required username="alice" password="{SECRET}" clientSecret="{SECRET}" '
        f'accessToken="{SECRET}" PASSWORD_FILE="{SECRET}" unsecuredLoginStringClaim_sub="alice";'
    )
    text = repr(config)
    assert SECRET not in text
    assert SECRET not in str(config)
    assert text.count("'***'") == 4
    assert "'username': 'alice'" in text
    assert "'unsecuredLoginStringClaim_sub': 'alice'" in text
    assert config.options["password"] == SECRET  # masked in repr only


# ------------------------------------------------------------------ credentials


def test_plain_credentials() -> None:
    credentials = credentials_from_jaas(parse_jaas_config(PLAIN_CONFLUENT), "PLAIN")
    assert credentials == {"username": "KEY", "password": "SECRET"}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
def test_scram_credentials(mechanism: str) -> None:
    credentials = credentials_from_jaas(parse_jaas_config(SCRAM), mechanism)
    assert credentials == {"username": "alice", "password": "alice-secret"}


def test_scram_tokenauth_is_passed_on() -> None:
    config = parse_jaas_config(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="id" password="hmac" tokenauth="true";'
    )
    credentials = credentials_from_jaas(config, "SCRAM-SHA-256")
    assert credentials == {"username": "id", "password": "hmac", "tokenauth": "true"}


def test_oauthbearer_credentials() -> None:
    config = parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope="read" clientId="c";'
    )
    assert credentials_from_jaas(config, "OAUTHBEARER") == {
        "principal": "alice",
        "unsecuredLoginListClaim_scope": "read",
        "clientId": "c",
    }


def test_shaded_module_names_are_recognised() -> None:
    config = parse_jaas_config(
        'kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    )
    assert credentials_from_jaas(config, "PLAIN") == {"username": "u", "password": "p"}


@pytest.mark.parametrize(
    ("text", "mechanism", "message"),
    [
        (SCRAM, "PLAIN", "ScramLoginModule does not fit SASL mechanism 'PLAIN'"),
        (PLAIN_CONFLUENT, "SCRAM-SHA-256", "PlainLoginModule does not fit"),
        (OAUTH, "PLAIN", "OAuthBearerLoginModule does not fit"),
        (PLAIN_CONFLUENT, "OAUTHBEARER", "PlainLoginModule does not fit"),
        (MSK_IAM, "AWS_MSK_IAM", "(AWS MSK IAM) signs in through SASL mechanism OAUTHBEARER here"),
        (MSK_IAM, "PLAIN", "set sasl.mechanism=OAUTHBEARER, not 'PLAIN'"),
        ("com.example.Krb5LoginModule required;", "PLAIN", "login module Krb5LoginModule does not fit SASL mechanism 'PLAIN'"),
        ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u";', "PLAIN", "password"),
        ("org.apache.kafka.common.security.scram.ScramLoginModule required;", "SCRAM-SHA-256", "username and password"),
    ],
)
def test_credentials_errors(text: str, mechanism: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        credentials_from_jaas(parse_jaas_config(text), mechanism)
    assert "SECRET" not in str(caught.value) and "alice-secret" not in str(caught.value)
