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
from collections.abc import Iterable, Iterator
from typing import NoReturn, TextIO

from aioproducer.cli.properties import PropertiesError, load_properties, parse_assignment
from aioproducer.config import COMPRESSION_CODECS, ProducerConfig
from aioproducer.errors import ConfigError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "OneLineParser",
    "UsageError",
    "add_connection_options",
    "embedded_cluster",
    "producer_config",
]

EXIT_OK = 0
#: Some records were not delivered.
EXIT_FAILED = 1
#: Bad arguments or configuration (argparse's own status for usage errors).
EXIT_USAGE = 2

COMPRESSIONS = sorted(COMPRESSION_CODECS)


class UsageError(Exception):
    """Bad input found after argparse: reported as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump), still exit status 2.

    A script that gets a wrong option wants the reason in its log, not the usage
    text; ``--help`` is one option away and the message says so.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_connection_options(parser: argparse.ArgumentParser, props_option: str, several: bool) -> None:
    """``--bootstrap-servers``, ``--producer.config`` and the repeatable ``key=value`` option.

    ``several``: the option takes several values at once (``--producer-props a=1 b=2``,
    as kafka-producer-perf-test), else one per use (``--producer-property a=1``).
    """
    parser.add_argument(
        "--bootstrap-servers",
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="brokers to connect to; default: bootstrap.servers from the configuration, "
        "else an embedded mock cluster (librdkafka's, needs aioproducer[testing])",
    )
    parser.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="a Java properties file of producer settings (Java keys, e.g. acks=all, security.protocol=SSL)",
    )
    parser.add_argument(
        props_option,
        dest="producer_props",
        action="extend" if several else "append",
        nargs="+" if several else None,
        default=[],
        metavar="KEY=VALUE",
        help="a producer setting (Java key); overrides --producer.config",
    )


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


def check_config(config: dict[str, str]) -> None:
    """Raise :class:`UsageError` if :class:`ProducerConfig` refuses ``config`` (unknown key, bad value)."""
    probe = dict(config)
    probe.setdefault("bootstrap.servers", "localhost:9092")  # the embedded cluster's address comes later
    try:
        ProducerConfig(probe)
    except ConfigError as exc:
        raise UsageError(f"configuration: {exc}") from exc


@contextlib.contextmanager
def embedded_cluster(bootstrap: str | None, topic: str, partitions: int, announce: TextIO | None) -> Iterator[str]:
    """``bootstrap`` itself, or the address of a mock cluster started for the command's duration.

    The mock cluster lets every command run on a laptop with no broker; the
    topic is created with ``partitions`` partitions before the command starts.
    """
    if bootstrap:
        yield bootstrap
        return
    try:
        from aioproducer.testing import MockCluster
    except ImportError as exc:
        raise UsageError(f"no --bootstrap-servers given and no embedded cluster available: {exc}") from exc
    with MockCluster(brokers=3, topics={topic: partitions}) as cluster:
        if announce is not None:
            print(f"started an embedded mock cluster at {cluster.bootstrap_servers}", file=announce)
        yield cluster.bootstrap_servers
