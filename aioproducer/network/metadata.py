"""Cluster metadata as immutable value objects.

Why immutable snapshots: the sender, the partitioner and ``send()`` all read
metadata while a refresh may be landing. Replacing one frozen
:class:`ClusterMetadata` object per Metadata response (as the Java client
replaces its ``Cluster``) means a reader holding a snapshot sees one
consistent view (nodes, leaders and partition counts from the same response)
and nothing needs a lock.

:meth:`ClusterMetadata.from_response` is a pure function of a decoded
Metadata response body (the dict ``protocol.messages.decode_response``
returns), so the parsing is unit-tested without a broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from aioproducer.errors import UnknownTopicOrPartitionError
from aioproducer.partitioner import TopicPartitions

__all__ = ["NO_LEADER", "ClusterMetadata", "Node", "PartitionMetadata", "RebootstrapTrigger", "TopicMetadata"]

#: What a Metadata response says for "no leader" (leader election in progress, all replicas offline).
NO_LEADER = -1

#: UNKNOWN_TOPIC_OR_PARTITION: what :meth:`ClusterMetadata.topic_error` reports for a topic
#: the snapshot does not mention, as the Java client does for a topic missing from its Cluster.
_UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.errno


class Node(NamedTuple):
    """Where a broker listens. A tuple so ``host, port, rack = metadata.nodes[1]`` reads naturally."""

    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as the last Metadata response described it.

    ``leader`` is :data:`NO_LEADER` (-1) while no leader is known;
    ``leader_epoch`` is -1 when the broker does not report one (Metadata < v7).
    """

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic: its error code (0 when fine) and its partitions by index."""

    name: str
    error_code: int
    is_internal: bool
    partitions: Mapping[int, PartitionMetadata]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """An immutable snapshot of what the cluster told us in one Metadata response.

    Lookups answer ``None`` rather than raising: an unknown topic or a missing
    leader is an ordinary state for a producer (it waits and refreshes), not an
    exceptional one.
    """

    #: A snapshot's leaders never change in place (an update is a new snapshot): the accumulator
    #: asks ``leader_for`` again only when the snapshot it is handed is another one.
    LEADERS_FIXED: ClassVar[bool] = True

    nodes: Mapping[int, Node]
    topics: Mapping[str, TopicMetadata]
    controller_id: int = -1
    cluster_id: str | None = None
    #: topic -> partition -> leader, only where :meth:`leader_for` has an answer. Precomputed
    #: because the sender asks for every queued partition on every pass (two dict lookups
    #: instead of three method calls).
    _leaders: Mapping[str, Mapping[int, int]] = field(init=False, repr=False, compare=False)
    #: topic -> its partition count and the partitions with a leader, for topics with partitions
    #: and no error: the one place partition snapshots are built (see :meth:`partitions_snapshot`).
    _snapshots: Mapping[str, TopicPartitions] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nodes = self.nodes
        leaders: dict[str, dict[int, int]] = {}
        snapshots: dict[str, TopicPartitions] = {}
        for name, meta in self.topics.items():
            if meta.error_code != 0:
                continue
            led = leaders[name] = {p: pm.leader for p, pm in meta.partitions.items() if pm.leader in nodes}
            if meta.partitions:
                snapshots[name] = TopicPartitions(len(meta.partitions), tuple(sorted(led)))
        object.__setattr__(self, "_leaders", leaders)
        object.__setattr__(self, "_snapshots", snapshots)

    @classmethod
    def empty(cls) -> ClusterMetadata:
        """The snapshot before any Metadata response: no nodes, no topics."""
        return cls(nodes=MappingProxyType({}), topics=MappingProxyType({}))

    @classmethod
    def from_response(cls, body: Mapping[str, Any]) -> ClusterMetadata:
        """Build a snapshot from a decoded Metadata response body.

        Fields an older response version lacks (``rack`` < v1, ``cluster_id``
        < v2, ``leader_epoch`` < v7, ``offline_replicas`` < v5) take their
        "unknown" value, so every version yields the same shape.
        """
        nodes = {
            int(b["node_id"]): Node(str(b["host"]), int(b["port"]), b.get("rack"))
            for b in body.get("brokers") or ()
        }
        topics: dict[str, TopicMetadata] = {}
        for t in body.get("topics") or ():
            name = t.get("name")
            if name is None:  # v10+ may identify a topic by id only; a producer addresses by name
                continue
            partitions = {
                int(p["partition_index"]): PartitionMetadata(
                    partition=int(p["partition_index"]),
                    leader=int(p.get("leader_id", NO_LEADER)),
                    leader_epoch=int(p.get("leader_epoch", -1)),
                    replicas=tuple(p.get("replica_nodes") or ()),
                    isr=tuple(p.get("isr_nodes") or ()),
                    offline_replicas=tuple(p.get("offline_replicas") or ()),
                    error_code=int(p.get("error_code", 0)),
                )
                for p in t.get("partitions") or ()
            }
            topics[str(name)] = TopicMetadata(
                name=str(name),
                error_code=int(t.get("error_code", 0)),
                is_internal=bool(t.get("is_internal", False)),
                partitions=MappingProxyType(partitions),
            )
        controller = body.get("controller_id")
        return cls(
            nodes=MappingProxyType(nodes),
            topics=MappingProxyType(topics),
            controller_id=-1 if controller is None else int(controller),
            cluster_id=body.get("cluster_id"),
        )

    def keeping_newer_leaders(self, previous: ClusterMetadata) -> ClusterMetadata:
        """This snapshot, with any partition whose leader epoch went *back* taken from ``previous``.

        KIP-320, as Java's ``Metadata.updateLatestMetadata``: a broker that has not
        caught up yet may answer with an older leader epoch than one already
        known; believing it would send records back to a leader that lost the
        partition. Partitions without an epoch (-1) are taken as they come.
        """
        replaced: dict[str, TopicMetadata] = {}
        for name, meta in self.topics.items():
            old = previous.topics.get(name)
            if old is None or meta.error_code or old.error_code:
                continue
            kept = {
                p: old.partitions[p]
                for p, pm in meta.partitions.items()
                if p in old.partitions and 0 <= pm.leader_epoch < old.partitions[p].leader_epoch
            }
            if kept:
                replaced[name] = TopicMetadata(
                    name, meta.error_code, meta.is_internal, MappingProxyType({**meta.partitions, **kept})
                )
        if not replaced:
            return self
        return ClusterMetadata(
            self.nodes, MappingProxyType({**self.topics, **replaced}), self.controller_id, self.cluster_id
        )

    def with_leader(
        self, topic: str, partition: int, leader: int, leader_epoch: int, node: Node | None = None
    ) -> ClusterMetadata | None:
        """A new snapshot where ``topic``/``partition`` is led by ``leader`` (KIP-951 hint), or None.

        None when the hint is not newer than what this snapshot knows (its
        leader epoch is not higher) or names a node that no snapshot knows an
        address for.
        """
        meta = self._usable(topic)
        current = None if meta is None else meta.partitions.get(partition)
        if meta is None or current is None or leader_epoch <= current.leader_epoch:
            return None
        nodes = dict(self.nodes)
        if node is not None:
            nodes[leader] = node
        if leader not in nodes:
            return None
        updated = PartitionMetadata(
            partition, leader, leader_epoch, current.replicas, current.isr, current.offline_replicas, 0
        )
        topic_meta = TopicMetadata(
            topic, meta.error_code, meta.is_internal, MappingProxyType({**meta.partitions, partition: updated})
        )
        return ClusterMetadata(
            MappingProxyType(nodes), MappingProxyType({**self.topics, topic: topic_meta}), self.controller_id,
            self.cluster_id,
        )

    def _usable(self, topic: str) -> TopicMetadata | None:
        """``topic`` if the response described it without a topic-level error.

        An errored topic's partition list is not trusted, as in Java's
        ``Metadata.handleMetadataResponse``, which only takes partitions from
        topics whose error is NONE.
        """
        meta = self.topics.get(topic)
        return meta if meta is not None and meta.error_code == 0 else None

    def partitions_for(self, topic: str) -> tuple[int, ...] | None:
        """All partition indexes of ``topic`` in ascending order, or ``None`` if it has none here.

        Includes partitions without a leader: the partition *count* is what
        key hashing depends on, and it must not change when a leader fails.
        ``None`` as well for a topic reported with an error (see :meth:`topic_error`).
        """
        meta = self._usable(topic)
        if meta is None or not meta.partitions:
            return None
        return tuple(sorted(meta.partitions))

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None:
        """What partitioning needs of ``topic`` (count, partitions with a leader), or None as :meth:`partitions_for`.

        Built once per snapshot: ``send()`` and the accumulator hold these objects, never copies.
        """
        return self._snapshots.get(topic)

    def available_partitions_for(self, topic: str) -> tuple[int, ...]:
        """Partitions of ``topic`` whose leader is known and listed among the nodes.

        What a partitioner picks from for records without a key (KIP-794), so
        it does not pile records onto a partition that cannot be sent.
        """
        snapshot = self._snapshots.get(topic)
        return () if snapshot is None else snapshot.available

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        """The full description of one partition, or ``None`` if the snapshot lacks it."""
        meta = self._usable(topic)
        return None if meta is None else meta.partitions.get(partition)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The node id leading ``topic``/``partition``, or ``None`` if it cannot be contacted.

        ``None`` covers every reason a sender cannot send there now: unknown
        topic or partition, no leader (-1), or a leader absent from the node
        list (Java's ``Cluster.leaderFor`` returns null in the same cases).
        """
        leaders = self._leaders.get(topic)
        return None if leaders is None else leaders.get(partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch (KIP-320), or -1 when unknown."""
        meta = self.partition(topic, partition)
        return -1 if meta is None else meta.leader_epoch

    def topic_error(self, topic: str) -> int:
        """The topic's error code from the last response: 0 when fine,
        UNKNOWN_TOPIC_OR_PARTITION (3) when the snapshot does not mention it."""
        meta = self.topics.get(topic)
        return _UNKNOWN_TOPIC_OR_PARTITION if meta is None else meta.error_code


class RebootstrapTrigger:
    """When the client must rebootstrap (KIP-899, KIP-1102): the state of Java's ``metadataAttemptStartMs``.

    Why a timer and not a failure count: a broker that accepts connections but never
    answers fails no connection attempt, and a cluster whose every node moved away fails
    them all; either way what matters is that no metadata arrived for
    ``metadata.recovery.rebootstrap.trigger.ms``. As in Java's ``NetworkClient``: the
    timer starts at the first metadata attempt after the last success (one already
    running is not restarted), a successful Metadata answer stops it, a rebootstrap
    restarts it (the bootstrap servers get the same time to answer), and a Metadata
    answer saying REBOOTSTRAP_REQUIRED (129) makes it due at once. With
    ``metadata.recovery.strategy=none`` it is never due. Pure: every time is passed in.
    """

    __slots__ = ("_enabled", "_trigger_ms", "_started_ms")

    def __init__(self, strategy: str, trigger_ms: float) -> None:
        self._enabled = strategy == "rebootstrap"
        self._trigger_ms = trigger_ms
        #: When the running attempt began (ms of the client's clock), None while metadata is fresh.
        self._started_ms: float | None = None

    @property
    def enabled(self) -> bool:
        """Whether ``metadata.recovery.strategy`` is ``rebootstrap``."""
        return self._enabled

    def attempt_started(self, now: float) -> None:
        """A metadata update began: the timer starts unless it runs already."""
        if self._started_ms is None:
            self._started_ms = now

    def metadata_updated(self) -> None:
        """A Metadata answer was installed: the cluster is reachable, the timer stops."""
        self._started_ms = None

    def rebootstrap_required(self) -> None:
        """The broker answered REBOOTSTRAP_REQUIRED (129): due now (Java sets the start to 0)."""
        self._started_ms = float("-inf")

    def rebootstrapped(self, now: float) -> None:
        """The view was replaced by the bootstrap servers: they get a full period to answer."""
        self._started_ms = now

    def needs_rebootstrap(self, now: float) -> bool:
        """Whether no metadata arrived for longer than the trigger (or 129 said so), under ``rebootstrap``."""
        started = self._started_ms
        return self._enabled and started is not None and now - started > self._trigger_ms
