"""What the commands share: argument errors, producer configuration, the embedded cluster.

Why one place: every command takes its configuration the way Kafka's tools do
(a ``--producer.config`` properties file, then ``key=value`` options, then the
dedicated options such as ``--bootstrap-servers``, each overriding the one
before), and every bad input must end the same way: a one-line message on
stderr and exit status 2, as argparse does for its own errors.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import FrameType
from typing import NoReturn, TextIO

from aioproducer.cli.properties import PropertiesError, load_properties, parse_assignment
from aioproducer.config import COMPRESSION_CODECS, ProducerConfig
from aioproducer.errors import ConfigError, InvalidTopicError
from aioproducer.topic import validate_topic

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Interrupts",
    "MAX_EMBEDDED_PARTITIONS",
    "add_logging_options",
    "add_partitions_option",
    "mock_wanted",
    "OneLineParser",
    "UsageError",
    "add_connection_options",
    "config_secrets",
    "configure_logging",
    "configured_producer",
    "embedded_cluster",
    "integer",
    "is_secret_key",
    "producer_config",
    "redact",
    "secrets_in_arguments",
    "throughput",
    "topic_name",
]

EXIT_OK = 0
#: Some records were not delivered.
EXIT_FAILED = 1
#: Bad arguments or configuration (argparse's own status for usage errors).
EXIT_USAGE = 2
#: Interrupted by SIGINT (Ctrl-C): 128 + SIGINT, what a shell reports for a process the signal ended.
EXIT_INTERRUPTED = 130
#: Standard output (or error) closed by the reader, e.g. ``| head -1``: 128 + SIGPIPE, as a shell
#: reports for a tool the signal ended (``set -o pipefail`` scripts often tell it apart this way).
EXIT_BROKEN_PIPE = 141

#: Most partitions of the embedded mock cluster's topic: it is for trying things out, and a
#: mistyped huge count would only exhaust memory.
MAX_EMBEDDED_PARTITIONS = 10_000

#: Words that make a configuration key (or the key part of a ``key=value`` argument) a secret:
#: its value never appears in an error (``sasl.password``, ``ssl.key.password``,
#: ``sasl.jaas.config``, ``sasl.oauthbearer.token.endpoint.url``, ``...client.secret``). An
#: ``ssl.*.key`` (``ssl.keystore.key``, a PEM private key) is one too, but not ``parse.key``
#: (masking its ``true`` would garble every message that says "true").
_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential")
#: What shows instead of a secret value.
MASK = "******"

COMPRESSIONS = sorted(COMPRESSION_CODECS)


class Interrupts:
    """Ctrl-C while a command cannot act on it yet (or any more): remembered, not raised.

    Why: Python's own handler raises ``KeyboardInterrupt`` wherever the main thread is, e.g. in
    argparse or the logging setup, and the traceback is all the user sees. :meth:`defer` (from
    the first line of :func:`~aioproducer.cli.main`, and again once a command's outcome is known)
    only notes it; :meth:`deliver` (where a command is ready to catch it) restores Python's
    handler and raises for a Ctrl-C that came meanwhile.
    """

    pending = False

    @classmethod
    def defer(cls) -> None:
        cls._install(cls._remember)

    @classmethod
    def deliver(cls) -> None:
        """Python's handler from now on; ``KeyboardInterrupt`` (still deferring) for a Ctrl-C that came already."""
        if not cls.pending:
            cls._install(signal.default_int_handler)
            if not cls.pending:  # none came before, nor between the check and the install
                return
            cls._install(cls._remember)
        cls.pending = False
        raise KeyboardInterrupt

    @classmethod
    def take(cls) -> bool:
        """Whether a Ctrl-C came while deferred (and forget it)."""
        pending, cls.pending = cls.pending, False
        return pending

    @classmethod
    def _remember(cls, signum: int, frame: FrameType | None) -> None:
        cls.pending = True

    @staticmethod
    def _install(handler: Callable[[int, FrameType | None], object]) -> None:
        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread (a test calling main()): signals are not ours to handle
            pass


class UsageError(Exception):
    """Bad input found after argparse: reported as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump), still exit status 2.

    A script that gets a wrong option wants the reason in its log, not the usage
    text; ``--help`` is one option away and the message says so.
    """

    #: Values of secret-looking ``key=value`` arguments (see :func:`secrets_in_arguments`), masked in every
    #: error: argparse quotes what it refuses ("unrecognized arguments: sasl.password=..."), and a
    #: forgotten option name before ``key=value`` is an easy slip.
    secrets: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {redact(message, self.secrets)} (see {self.prog} --help)\n")


def is_secret_key(key: str) -> bool:
    """Whether a value under ``key`` must never be shown (a password, a JAAS line, a token, a key)."""
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS) or (lowered.startswith("ssl.") and lowered.endswith(".key"))


def secrets_in_arguments(argv: Iterable[str]) -> list[str]:
    """The values of ``key=value`` (or ``key:value``, ``key value``) arguments whose key looks secret.

    The key is what precedes the first ``=``, ``:`` or whitespace (as a Java properties line reads it);
    an argument that is a secret key alone makes the next argument its value.
    """
    found: list[str] = []
    after_key = False
    for arg in argv:
        if after_key:  # "sasl.password S3CRET" as two arguments: the second is the value
            found.append(arg.strip())
        if arg.startswith("--") and "=" in arg:  # "--command-property=sasl.password:S3CRET"
            arg = arg.split("=", 1)[1]
        match = re.match(r"\s*([^=:\s]+)\s*[=:\s]\s*(.+)", arg, re.DOTALL)
        if match and is_secret_key(match.group(1)):
            found.append(match.group(2).strip())
        after_key = not match and is_secret_key(arg.strip())
    return found


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each (non-empty) secret replaced by :data:`MASK`, longest first."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def integer(option: str, minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for an integer option in ``minimum..maximum``; the error names the option."""
    bounds = f"at least {minimum}" if maximum is None else f"in {minimum}..{maximum}"

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {value}")
        return value

    parse.__name__ = option
    return parse


def topic_name(text: str) -> str:
    """An argparse ``type`` for ``--topic``: a name Kafka refuses is a usage error, not a failure per record."""
    try:
        validate_topic(text)
    except InvalidTopicError as exc:
        raise argparse.ArgumentTypeError(str(exc).split("INVALID_TOPIC_EXCEPTION: ")[-1]) from None
    return text


def throughput(text: str) -> float:
    """``--throughput``: records/s above 0, or a negative number (Kafka documents -1) for no limit.

    0 is refused: Kafka's tool would never send a record (its throttler waits forever).
    """
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number (records/s, or -1 for no limit), got {text!r}") from None
    if value == 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be above 0, or -1 for no limit, got {text!r}")
    return value


def add_connection_options(parser: argparse.ArgumentParser, props_option: str, several: bool) -> None:
    """``--bootstrap-servers``, the properties file and the repeatable ``key=value`` option.

    Each under Kafka 4.2's names (KIP-1147: ``--command-config``, ``--command-property``) and the
    older one (``--producer.config``, and ``props_option``: ``--producer-property`` or
    ``--producer-props``), still accepted; as in Kafka, an old name and its new one may not be
    used together. ``several``: the option takes several values at once (``--producer-props a=1 b=2``,
    as kafka-producer-perf-test), else one per use (``--producer-property a=1``).
    """
    parser.add_argument(
        "-b",
        "--bootstrap-servers",
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="brokers to connect to (required, unless bootstrap.servers is in the configuration or --mock is given)",
    )
    parser.add_argument(
        "--mock",
        action="store_true",
        help="start an embedded mock cluster (librdkafka's, needs aioproducer[testing]) and use it instead of brokers: "
        "for trying the command out, nothing leaves this process",
    )
    files = parser.add_mutually_exclusive_group()
    files.add_argument(
        "-F",
        "--command-config",
        dest="command_config",
        metavar="FILE",
        help="a properties file of producer settings, Java's or librdkafka's (key=value lines, # comments; "
        "e.g. acks=all, security.protocol=SSL, sasl.username=...)",
    )
    files.add_argument(
        "--producer.config", dest="producer_config", metavar="FILE", help="the older name of --command-config"
    )
    props = parser.add_mutually_exclusive_group()
    many: dict[str, object] = {"action": "extend", "nargs": "+"} if several else {"action": "append"}
    props.add_argument(
        "-X",
        "--command-property",
        dest="command_props",
        default=[],
        metavar="KEY=VALUE",
        help="a producer setting (Java key); overrides --command-config",
        **many,  # type: ignore[arg-type]
    )
    props.add_argument(
        props_option,
        dest="producer_props",
        default=[],
        metavar="KEY=VALUE",
        help="the older name of --command-property",
        **many,  # type: ignore[arg-type]
    )


def configured_producer(args: argparse.Namespace, props_option: str) -> tuple[str | None, list[str], str]:
    """(properties file, ``key=value`` arguments, the option name they came under) of either spelling."""
    config_file: str | None = args.command_config or args.producer_config
    if args.command_props:
        return config_file, list(args.command_props), "--command-property"
    return config_file, list(args.producer_props), props_option


def producer_config(
    config_file: str | None,
    assignments: Iterable[str],
    option: str,
    overrides: dict[str, str],
    defaults: dict[str, str] | None = None,
) -> dict[str, str]:
    """The merged settings (defaults < file < ``key=value`` options < ``overrides``), validated.

    Validated here, before any cluster starts or any input is read, so that a
    typo in a key costs nothing; :class:`UsageError` carries the one-line reason.
    """
    try:
        config = dict(defaults or {})
        if config_file is not None:
            config.update(load_properties(config_file))
        for text in assignments:
            key, value = parse_assignment(text, option)
            config[key] = value
    except PropertiesError as exc:
        raise UsageError(str(exc)) from exc
    config.update(overrides)
    check_config(config)
    return config


def check_config(config: dict[str, str]) -> ProducerConfig:
    """``config`` as :class:`ProducerConfig` reads it; :class:`UsageError` if refused (unknown key, bad value)."""
    probe = dict(config)
    probe.setdefault("bootstrap.servers", "localhost:9092")  # the embedded cluster's address comes later
    try:
        return ProducerConfig(probe)
    except ConfigError as exc:  # its message may quote a value: never a secret one
        raise UsageError(f"configuration: {redact(str(exc), config_secrets(config))}") from exc


def config_secrets(config: dict[str, str]) -> list[str]:
    """The values of ``config``'s secret-looking keys: what :func:`redact` must hide in any message."""
    return [value for key, value in config.items() if is_secret_key(key)]


#: What a command without brokers says: kcat and Kafka's console tools refuse to run without them too.
NO_BROKERS = (
    "no brokers given: pass --bootstrap-server HOST:PORT (-b), or bootstrap.servers in --command-config (-F) "
    "or --command-property (-X); --mock runs against an embedded mock cluster instead"
)


@contextlib.contextmanager
def embedded_cluster(
    bootstrap: str | None, topic: str, partitions: int, announce: TextIO | None, *, mock: bool = True
) -> Iterator[str]:
    """``bootstrap`` itself, or, with ``mock``, the address of a mock cluster started for the command's duration.

    Records sent to a mock cluster go nowhere, so only a command the user asked it of (``--mock``,
    or ``demo``) starts one: without brokers and without ``mock`` this is a :class:`UsageError`.
    The topic is created with ``partitions`` partitions before the command starts.
    """
    if bootstrap:
        yield bootstrap
        return
    if not mock:
        raise UsageError(NO_BROKERS)
    try:
        from aioproducer.testing import MockCluster
    except ImportError as exc:
        raise UsageError(f"no embedded mock cluster available (pip install 'aioproducer[testing]'): {exc}") from exc
    with MockCluster(brokers=3, topics={topic: partitions}) as cluster:
        if announce is not None:
            print(f"started an embedded mock cluster at {cluster.bootstrap_servers}", file=announce)
        yield cluster.bootstrap_servers


def mock_wanted(args: argparse.Namespace, config: dict[str, str]) -> bool:
    """``--mock``, checked against the brokers given: both is a :class:`UsageError` (which one was meant?)."""
    if args.mock and config.get("bootstrap.servers"):
        raise UsageError("--mock starts its own cluster: give it without --bootstrap-server or bootstrap.servers")
    return bool(args.mock)


def add_partitions_option(parser: argparse.ArgumentParser, default: int) -> None:
    """``--partitions N``: the embedded cluster's topic, 1..``MAX_EMBEDDED_PARTITIONS`` (a usage error otherwise)."""
    parser.add_argument(
        "--partitions",
        type=integer("--partitions", 1, MAX_EMBEDDED_PARTITIONS),
        default=default,
        help=f"partitions of the topic on the embedded cluster (--mock; default: {default})",
    )


def add_logging_options(parser: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose`` (the library's INFO lines) and ``--debug`` (its DEBUG lines), on stderr."""
    levels = parser.add_mutually_exclusive_group()
    levels.add_argument("-v", "--verbose", dest="log_level", action="store_const", const=logging.INFO,
                        default=logging.WARNING, help="show the library's log lines from INFO up on stderr")
    levels.add_argument("--debug", dest="log_level", action="store_const", const=logging.DEBUG,
                        help="show the library's DEBUG log lines too (every request, retry and backoff)")


class RateLimit(logging.Filter):
    """Lets one line of each kind (logger and message template) through per ``interval_s``.

    Why: while brokers cannot be reached, the client tries again every few hundred milliseconds;
    the user needs to learn of it within a second, not to read a line per attempt.
    """

    def __init__(self, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s, self.clock = interval_s, clock
        self._last: dict[tuple[str, object], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        kind, now = (record.name, record.msg), self.clock()
        if now - self._last.get(kind, -self.interval_s) < self.interval_s:
            return False
        self._last[kind] = now
        return True


def configure_logging(level: int, stream: TextIO | None = None) -> logging.Handler:
    """The library's log lines at ``level`` and above on ``stream`` (stderr), rate-limited per kind of line.

    WARNING by default: a failed connection attempt is a warning, so a wrong broker address shows
    within a second instead of after ``max.block.ms`` of silence.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RateLimit())
    logger = logging.getLogger("aioproducer")
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
