"""SASL/GSSAPI without a broker: RFC 4752's framing, Java's renewal schedule, the settings as the producer reads them.

The Kerberos messages themselves are the system library's, tested against a real KDC and a
real broker in tests/integration/test_real_broker_kerberos.py; here, what aioproducer adds:
the state machine around the security context (a scripted context stands in for the
library's, which is the part under test's input, not its adversary), the renewal times, and
every configuration error, each named at the call that made the producer.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from aioproducer.config import ProducerConfig
from aioproducer.errors import ConfigError, SaslAuthenticationFailedError
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.kerberos import KerberosSettings, refresh_time
from aioproducer.security.sasl import GssapiClient, GssapiContextError

PRINCIPAL = "app@EXAMPLE.COM"


class ScriptedContext:
    """A security context that answers as a broker's would: ``steps`` tokens, then wraps by a marker byte."""

    def __init__(self, steps: int = 1, fail_step: bool = False) -> None:
        self.steps = steps
        self.fail_step = fail_step
        self.complete = False
        self.seen: list[bytes] = []

    def step(self, token: bytes) -> bytes:
        self.seen.append(token)
        if self.fail_step:
            raise GssapiContextError("Generic error (see e-text)")
        self.steps -= 1
        self.complete = self.steps <= 0
        return b"" if self.complete else b"next-token"

    def wrap(self, message: bytes) -> bytes:
        return b"W" + message

    def unwrap(self, message: bytes) -> bytes:
        if not message.startswith(b"W"):
            raise GssapiContextError("A token was invalid")
        return message[1:]


def test_the_exchange_ends_with_no_security_layer_and_max_size_zero() -> None:
    context = ScriptedContext(steps=2)
    client = GssapiClient(context, b"ap-req", PRINCIPAL)
    assert client.initial_response() == b"ap-req"
    assert client.respond(b"challenge-1") == b"next-token"  # the context wants another round
    assert client.respond(b"ap-rep") == b""  # established: an empty message asks for the layer offer
    # RFC 4752: the broker offers layers (bitmask) and a max size; the client answers wrapped: 0x01, size 0.
    assert client.respond(b"W\x07\x00\x10\x00") == b"W\x01\x00\x00\x00"
    assert not client.complete
    assert client.respond(b"") is None
    assert client.complete
    assert context.seen == [b"challenge-1", b"ap-rep"]


def test_a_context_complete_after_the_first_token_goes_straight_to_the_layer_offer() -> None:
    context = ScriptedContext(steps=0)
    context.complete = True  # no mutual authentication asked: nothing comes back before the offer
    client = GssapiClient(context, b"ap-req", PRINCIPAL)
    client.initial_response()
    assert client.respond(b"W\x01\xff\xff\xff") == b"W\x01\x00\x00\x00"


@pytest.mark.parametrize(
    ("offer", "reason"),
    [
        (b"W\x04\x00\x10\x00", r"security layers 0x04, without 'no security layer' \(0x01\)"),
        (b"W\x01\x00\x10", "offer is 3 bytes, where RFC 4752 sends 4"),
        (b"garbled", "offer could not be unwrapped: A token was invalid"),
    ],
)
def test_a_bad_layer_offer_fails_naming_the_principal(offer: bytes, reason: str) -> None:
    client = GssapiClient(ScriptedContext(steps=1), b"ap-req", PRINCIPAL)
    client.initial_response()
    client.respond(b"ap-rep")
    with pytest.raises(SaslAuthenticationFailedError, match=f"GSSAPI authentication failed: principal {PRINCIPAL}: .*{reason}"):
        client.respond(offer)
    with pytest.raises(RuntimeError, match="respond\\(\\) called while failed"):
        client.respond(b"")


def test_a_refused_context_token_and_a_trailing_challenge_fail() -> None:
    client = GssapiClient(ScriptedContext(fail_step=True), b"ap-req", PRINCIPAL)
    client.initial_response()
    with pytest.raises(SaslAuthenticationFailedError, match="token was refused: Generic error"):
        client.respond(b"krb-error")
    client = GssapiClient(ScriptedContext(steps=1), b"ap-req", PRINCIPAL)
    client.initial_response()
    client.respond(b"ap-rep")
    client.respond(b"W\x01\x00\x00\x00")
    with pytest.raises(SaslAuthenticationFailedError, match="answered the security layer choice with a challenge"):
        client.respond(b"more")


def test_calls_out_of_order_are_a_bug_of_the_caller() -> None:
    client = GssapiClient(ScriptedContext(), b"ap-req", PRINCIPAL)
    with pytest.raises(RuntimeError, match="respond\\(\\) called while not started"):
        client.respond(b"x")
    client.initial_response()
    with pytest.raises(RuntimeError, match="initial_response\\(\\) called while"):
        client.initial_response()
    assert repr(client) == f"GssapiClient(mechanism='GSSAPI', principal='{PRINCIPAL}')"


# -------------------------------------------------------------- renewal times


class Fixed(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("jitter_draw", "now", "min_relogin", "expected"),
    [
        (0.0, 0.0, 60.0, 800.0),  # 0.8 of a 1000 s ticket
        (1.0, 0.0, 60.0, 850.0),  # plus at most 0.05 of it
        (0.0, 0.0, 900.0, 900.0),  # not sooner than min.time.before.relogin after now
        (0.0, 950.0, 60.0, 950.0),  # the minimum would outlast the ticket: at once
        (0.0, 0.0, 0.0, 800.0),
    ],
)
def test_the_refresh_time_is_javas(jitter_draw: float, now: float, min_relogin: float, expected: float) -> None:
    got = refresh_time(0.0, 1000.0, now, factor=0.8, jitter=0.05, min_relogin=min_relogin, rng=Fixed(jitter_draw))
    assert got == pytest.approx(expected)


def test_a_ticket_past_its_proposed_refresh_is_renewed_at_once() -> None:
    # factor 1.0 + jitter: proposed after the end time, so now.
    assert refresh_time(0.0, 100.0, 10.0, factor=1.0, jitter=0.25, min_relogin=0.0, rng=Fixed(1.0)) == 10.0


# ------------------------------------------------------------------ settings

JAAS = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="{keytab}" principal="{principal}";'


@pytest.fixture
def keytab(tmp_path: Path) -> Path:
    path = tmp_path / "app.keytab"
    path.write_bytes(b"\x05\x02")  # read only when logging in: here only whether it can be read
    return path


def kerberos(**kwargs: Any) -> KerberosSettings:
    pytest.importorskip("gssapi")
    config = ProducerConfig(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", **kwargs)
    sasl = ConnectionSecurity.from_config(config).sasl
    assert sasl is not None and sasl.kerberos is not None
    return sasl.kerberos


def test_the_jaas_line_gives_the_keytab_and_principal(keytab: Path) -> None:
    settings = kerberos(sasl_jaas_config=JAAS.format(keytab=keytab, principal=PRINCIPAL),
                        sasl_kerberos_service_name="kafka", max_block_ms=5000)
    assert settings.timeout_ms == 5000  # max.block.ms bounds every KDC call, request.timeout.ms (30 s) too
    assert kerberos(sasl_jaas_config=JAAS.format(keytab=keytab, principal=PRINCIPAL), sasl_kerberos_service_name="kafka",
                    request_timeout_ms=2000).timeout_ms == 2000
    assert (settings.principal, settings.keytab, settings.service_name) == (PRINCIPAL, str(keytab), "kafka")
    assert (settings.renew_window_factor, settings.renew_jitter, settings.min_time_before_relogin_ms) == (0.8, 0.05, 60000)


def test_the_service_name_may_come_from_the_jaas_line_and_the_renewal_keys_are_read(keytab: Path) -> None:
    jaas = JAAS.format(keytab=keytab, principal=PRINCIPAL).replace(";", ' serviceName="kafka-prod";')
    settings = kerberos(sasl_jaas_config=jaas, sasl_kerberos_ticket_renew_window_factor=0.9,
                        sasl_kerberos_ticket_renew_jitter=0.1, sasl_kerberos_min_time_before_relogin=1000)
    assert settings.service_name == "kafka-prod"
    assert (settings.renew_window_factor, settings.renew_jitter, settings.min_time_before_relogin_ms) == (0.9, 0.1, 1000)


def test_librdkafkas_keys_give_the_login(keytab: Path) -> None:
    pytest.importorskip("gssapi")
    config = ProducerConfig({"bootstrap.servers": "b:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI",
                             "sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": PRINCIPAL,
                             "sasl.kerberos.service.name": "kafka",
                             "sasl.kerberos.kinit.cmd": "kinit -k -t %{sasl.kerberos.keytab}"})
    sasl = ConnectionSecurity.from_config(config).sasl
    assert sasl is not None and sasl.kerberos is not None
    assert (sasl.kerberos.keytab, sasl.kerberos.principal, sasl.kerberos.service_name) == (str(keytab), PRINCIPAL, "kafka")


def test_a_ticket_cache_login_reads_the_cache(keytab: Path) -> None:
    jaas = 'com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true ticketCache="FILE:/tmp/cc";'
    settings = kerberos(sasl_jaas_config=jaas, sasl_kerberos_service_name="kafka")
    assert (settings.keytab, settings.principal, settings.ticket_cache) == (None, None, "FILE:/tmp/cc")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "sasl.mechanism=GSSAPI needs a login: sasl.jaas.config"),
        ({"sasl_jaas_config": JAAS.format(keytab="/no/such.keytab", principal=PRINCIPAL), "sasl_kerberos_service_name": "kafka"},
         "sasl.jaas.config keyTab '/no/such.keytab' is not a readable file"),
        ({"sasl_jaas_config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
         "useKeyTab=true needs keyTab"),
        ({"sasl_jaas_config": "com.sun.security.auth.module.Krb5LoginModule required;"},
         "needs useKeyTab=true with keyTab and principal, or useTicketCache=true: a producer cannot prompt"),
        ({"sasl_jaas_config": JAAS.format(keytab="{keytab}", principal=PRINCIPAL)},
         "needs sasl.kerberos.service.name"),
        ({"sasl_jaas_config": JAAS.format(keytab="{keytab}", principal=PRINCIPAL).replace(";", " serviceName=a;"),
          "sasl_kerberos_service_name": "b"}, "sasl.kerberos.service.name='b' and sasl.jaas.config serviceName='a' disagree"),
        ({"sasl_jaas_config": JAAS.format(keytab="{keytab}", principal=PRINCIPAL), "sasl_kerberos_keytab": "{keytab}"},
         "sasl.jaas.config and sasl.kerberos.keytab \\(librdkafka's\\) both say who logs in"),
        ({"sasl_kerberos_keytab": "{keytab}", "sasl_kerberos_service_name": "kafka"}, "sasl.kerberos.keytab is given without the principal"),
        ({"sasl_username": "u", "sasl_password": "p"}, "sasl.username/sasl.password are not used by sasl.mechanism=GSSAPI"),
        ({"sasl_jaas_config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'},
         "login module PlainLoginModule does not fit SASL mechanism 'GSSAPI'"),
    ],
)
def test_bad_kerberos_settings_fail_when_the_producer_is_made(kwargs: dict[str, Any], message: str, keytab: Path) -> None:
    pytest.importorskip("gssapi")
    given = {k: v.replace("{keytab}", str(keytab)) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(ConfigError, match=message):
        kerberos(**given)


def test_kerberos_keys_with_another_mechanism_are_refused() -> None:
    config = ProducerConfig(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_username="u", sasl_password="p", sasl_kerberos_service_name="kafka")
    with pytest.raises(ConfigError, match="sasl.kerberos.service.name: GSSAPI \\(Kerberos\\) settings, but sasl.mechanism is PLAIN"):
        ConnectionSecurity.from_config(config)


def test_without_python_gssapi_the_error_names_the_extra(keytab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "gssapi", None)  # as if not installed
    config = ProducerConfig(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                            sasl_kerberos_service_name="kafka",
                            sasl_jaas_config=JAAS.format(keytab=keytab, principal=PRINCIPAL))
    with pytest.raises(ConfigError, match=r"needs python-gssapi: pip install 'aioproducer\[kerberos\]'"):
        ConnectionSecurity.from_config(config)


def test_aiokafkas_gssapi_keywords_mean_the_ticket_cache_and_service_kafka() -> None:
    pytest.importorskip("gssapi")
    from aioproducer.compat.aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")
    config = producer._producer.config
    sasl = ConnectionSecurity.from_config(config).sasl
    assert sasl is not None and sasl.kerberos is not None
    assert (sasl.kerberos.service_name, sasl.kerberos.keytab, sasl.kerberos.ticket_cache) == ("kafka", None, None)
    named = AIOKafkaProducer(bootstrap_servers="b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                             sasl_kerberos_service_name="kafka-prod")
    assert named._producer.config.sasl_kerberos_service_name == "kafka-prod"
