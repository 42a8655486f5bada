"""``aioproducer metadata`` (or ``-L``): the cluster's brokers, topics, partitions, leaders and ISRs, as ``kcat -L``.

Why here: the first question after "is it installed" is "can I reach my cluster, and what is on
it". The command asks one broker for the metadata of every topic (or of the ``-t`` ones) with
the producer's own connection code, so the configuration that works here (TLS, SASL, OIDC, the
properties file) is the one ``produce`` will use, and prints it as kcat does. Exit status: 0; 1
if no broker answered within ``max.block.ms`` or a named topic is unknown; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from aioproducer.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    OneLineParser,
    add_connection_options,
    add_logging_options,
    add_partitions_option,
    config_secrets,
    configured_producer,
    embedded_cluster,
    mock_wanted,
    producer_config,
    redact,
    topic_name,
)
from aioproducer.config import ProducerConfig
from aioproducer.errors import KafkaError, error_for_code
from aioproducer.network.client import KafkaClient
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.protocol import messages
from aioproducer.security.connector import ConnectionSecurity

__all__ = ["add_parser", "describe", "render", "run"]

DESCRIPTION = """\
Print the cluster's brokers, and each topic's partitions with their leader,
replicas and in-sync replicas, as kcat -L does (aioproducer -L is the same
command). Brokers are required (-b, or bootstrap.servers in the configuration);
--mock asks an embedded mock cluster instead. Exit status: 0; 1 if no broker
answered within max.block.ms or a topic given with -t is unknown; 2 for bad
arguments."""

EPILOG = """\
examples:
  aioproducer metadata -b localhost:9092
  aioproducer -L -b broker:9093 -F client.properties -t orders"""

#: The topic the embedded mock cluster gets, so that --mock shows one.
MOCK_TOPIC = "mock-topic"


def add_parser(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """Register ``metadata`` and its options."""
    parser = commands.add_parser(
        "metadata",
        help="list brokers, topics, partitions, leaders and ISRs (like kcat -L)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-t", "--topic", dest="topics", action="append", default=[], type=topic_name,
                        help="only this topic; repeatable (default: every topic)")
    add_connection_options(parser, "--producer-property", several=False)
    add_partitions_option(parser, default=3)
    add_logging_options(parser)
    parser.set_defaults(run=run)


async def describe(config: ProducerConfig, topics: Sequence[str]) -> tuple[ClusterMetadata, dict[str, Any]]:
    """(the parsed snapshot, the raw answer) of one Metadata request for ``topics`` (all of them if empty).

    Bootstraps as the producer does (every bootstrap server in turn, backing off, until
    ``max.block.ms``), then asks the broker that answered.
    """
    security = ConnectionSecurity.from_config(config)
    client = KafkaClient(config, allow_auto_topic_creation=False, open_streams=security.open_streams(),
                         authenticator=security.authenticator())
    try:
        first = await client.bootstrap(timeout_ms=config.max_block_ms)
        body = {
            "topics": [{"name": t} for t in topics] if topics else None,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        connection = await client.connection(next(iter(first.nodes)))
        answer = await connection.send(messages.METADATA, body)
        assert answer is not None  # Metadata always has a response
        return ClusterMetadata.from_response(answer), answer
    finally:
        await client.close()


def render(metadata: ClusterMetadata, answered_by: str, out: TextIO) -> list[str]:
    """Write kcat's ``-L`` listing of ``metadata`` to ``out``; return the topics' errors (empty when none)."""
    errors: list[str] = []
    cluster = f" (cluster id {metadata.cluster_id})" if metadata.cluster_id else ""
    print(f"Metadata{cluster} (bootstrap {answered_by}):", file=out)
    print(f" {len(metadata.nodes)} brokers:", file=out)
    for node_id, node in sorted(metadata.nodes.items()):
        role = "  (controller)" if node_id == metadata.controller_id else ""
        rack = f" rack {node.rack}" if node.rack else ""
        print(f"  broker {node_id} at {node.host}:{node.port}{rack}{role}", file=out)
    print(f" {len(metadata.topics)} topics:", file=out)
    for name, topic in sorted(metadata.topics.items()):
        if topic.error_code:
            error = error_for_code(topic.error_code).__name__
            errors.append(f"topic {name!r}: {error}")
            print(f'  topic "{name}" with 0 partitions: {error}', file=out)
            continue
        internal = " (internal)" if topic.is_internal else ""
        print(f'  topic "{name}"{internal} with {len(topic.partitions)} partitions:', file=out)
        for index, part in sorted(topic.partitions.items()):
            replicas = ",".join(map(str, part.replicas))
            isrs = ",".join(map(str, part.isr))
            print(f"    partition {index}, leader {part.leader}, replicas: {replicas}, isrs: {isrs}", file=out)
    return errors


def run(args: argparse.Namespace) -> int:
    """Run the command; :class:`UsageError` for bad input (exit 2)."""
    config_file, assignments, option = configured_producer(args, "--producer-property")
    overrides = {"bootstrap.servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    config = producer_config(config_file, assignments, option, overrides)
    mock = mock_wanted(args, config)
    with embedded_cluster(config.get("bootstrap.servers"), MOCK_TOPIC, args.partitions, sys.stderr, mock=mock) as bootstrap:
        config["bootstrap.servers"] = bootstrap
        settings = ProducerConfig(config)
        try:
            metadata, _ = asyncio.run(describe(settings, args.topics))
        except KafkaError as exc:
            print(redact(f"metadata: {type(exc).__name__}: {exc}", config_secrets(config)), file=sys.stderr)
            return EXIT_FAILED
    errors = render(metadata, bootstrap, sys.stdout)
    if errors:
        print("metadata: " + "; ".join(errors), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
