"""ClusterMetadata: parsing a decoded Metadata response and answering lookups."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from aioproducer.network.metadata import NO_LEADER, ClusterMetadata, Node


def _partition(index: int, leader: int, *, epoch: int = 7, error: int = 0) -> dict[str, Any]:
    return {
        "error_code": error,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": epoch,
        "replica_nodes": [1, 2, 3],
        "isr_nodes": [1, 2],
        "offline_replicas": [3],
    }


RESPONSE: dict[str, Any] = {
    "throttle_time_ms": 0,
    "brokers": [
        {"node_id": 1, "host": "b1", "port": 9092, "rack": "r1"},
        {"node_id": 2, "host": "b2", "port": 9093, "rack": None},
        {"node_id": 3, "host": "b3", "port": 9094, "rack": None},
    ],
    "cluster_id": "c-1",
    "controller_id": 2,
    "topics": [
        {
            "error_code": 0,
            "name": "orders",
            "is_internal": False,
            # Out of order on purpose: partitions_for sorts.
            "partitions": [_partition(2, 3), _partition(0, 1), _partition(1, NO_LEADER, error=5)],
        },
        {"error_code": 3, "name": "missing", "is_internal": False, "partitions": []},
        # An errored topic's partitions are not to be trusted (Java ignores them).
        {"error_code": 29, "name": "denied", "is_internal": False, "partitions": [_partition(0, 1)]},
        {
            "error_code": 0,
            "name": "orphan",
            "is_internal": False,
            # Leader 9 is not among the brokers: not contactable.
            "partitions": [_partition(0, 9)],
        },
    ],
}


@pytest.fixture
def md() -> ClusterMetadata:
    return ClusterMetadata.from_response(RESPONSE)


def test_nodes_are_host_port_rack_tuples(md: ClusterMetadata) -> None:
    assert md.nodes[1] == Node("b1", 9092, "r1")
    host, port, rack = md.nodes[2]
    assert (host, port, rack) == ("b2", 9093, None)
    assert sorted(md.nodes) == [1, 2, 3]


def test_cluster_fields(md: ClusterMetadata) -> None:
    assert md.controller_id == 2
    assert md.cluster_id == "c-1"


def test_partitions_for_is_sorted_and_includes_leaderless(md: ClusterMetadata) -> None:
    assert md.partitions_for("orders") == (0, 1, 2)


def test_available_partitions_exclude_leaderless_and_unknown_leaders(md: ClusterMetadata) -> None:
    assert md.available_partitions_for("orders") == (0, 2)
    assert md.available_partitions_for("orphan") == ()
    assert md.available_partitions_for("nope") == ()


def test_partitions_for_unknown_or_errored_topic_is_none(md: ClusterMetadata) -> None:
    assert md.partitions_for("nope") is None
    assert md.partitions_for("missing") is None
    assert md.partitions_for("denied") is None
    assert md.available_partitions_for("denied") == ()
    assert md.leader_for("denied", 0) is None


def test_leader_for(md: ClusterMetadata) -> None:
    assert md.leader_for("orders", 0) == 1
    assert md.leader_for("orders", 2) == 3
    assert md.leader_for("orders", 1) is None  # leader -1
    assert md.leader_for("orders", 99) is None  # no such partition
    assert md.leader_for("nope", 0) is None  # no such topic
    assert md.leader_for("orphan", 0) is None  # leader not among the nodes


def test_leader_epoch(md: ClusterMetadata) -> None:
    assert md.leader_epoch("orders", 0) == 7
    assert md.leader_epoch("nope", 0) == -1


def test_partition_details(md: ClusterMetadata) -> None:
    p = md.partition("orders", 1)
    assert p is not None
    assert (p.leader, p.error_code, p.replicas, p.isr, p.offline_replicas) == (
        NO_LEADER,
        5,
        (1, 2, 3),
        (1, 2),
        (3,),
    )


def test_topic_error(md: ClusterMetadata) -> None:
    assert md.topic_error("orders") == 0
    assert md.topic_error("missing") == 3
    assert md.topic_error("denied") == 29
    assert md.topic_error("never-mentioned") == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_old_versions_fill_unknowns() -> None:
    """Metadata v0 has no rack, cluster id, controller, leader epoch or offline replicas."""
    md = ClusterMetadata.from_response(
        {
            "brokers": [{"node_id": 0, "host": "h", "port": 1}],
            "topics": [
                {
                    "error_code": 0,
                    "name": "t",
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": 0,
                            "leader_id": 0,
                            "replica_nodes": [0],
                            "isr_nodes": [0],
                        }
                    ],
                }
            ],
        }
    )
    assert md.nodes[0] == Node("h", 1, None)
    assert md.cluster_id is None
    assert md.controller_id == -1
    assert md.leader_epoch("t", 0) == -1
    assert md.leader_for("t", 0) == 0


def test_snapshot_is_immutable(md: ClusterMetadata) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        md.controller_id = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        md.nodes[4] = Node("x", 1, None)  # type: ignore[index]
    with pytest.raises(TypeError):
        md.topics["orders"].partitions[5] = md.topics["orders"].partitions[0]  # type: ignore[index]


def test_empty() -> None:
    md = ClusterMetadata.empty()
    assert not md.nodes and not md.topics
    assert md.partitions_for("orders") is None
    assert md.leader_for("orders", 0) is None


# ---------------------------------------------------------------- leader epochs (KIP-320, KIP-951)
def _snapshot(leader: int, epoch: int, nodes: tuple[int, ...] = (1, 2)) -> ClusterMetadata:
    return ClusterMetadata.from_response({
        "brokers": [{"node_id": n, "host": f"b{n}", "port": 9092} for n in nodes],
        "topics": [{"name": "t", "error_code": 0, "partitions": [
            {"partition_index": 0, "leader_id": leader, "leader_epoch": epoch, "error_code": 0},
            {"partition_index": 1, "leader_id": 2, "leader_epoch": 3, "error_code": 0},
        ]}],
    })


def test_an_answer_with_an_older_leader_epoch_keeps_the_newer_leader() -> None:
    known = _snapshot(leader=2, epoch=7)
    stale = _snapshot(leader=1, epoch=6)
    merged = stale.keeping_newer_leaders(known)
    assert merged.leader_for("t", 0) == 2 and merged.leader_epoch("t", 0) == 7
    newer = _snapshot(leader=1, epoch=8).keeping_newer_leaders(known)
    assert newer.leader_for("t", 0) == 1


def test_a_produce_answer_hint_installs_a_newer_leader_only() -> None:
    known = _snapshot(leader=1, epoch=5)
    assert known.with_leader("t", 0, 2, 5) is None  # not newer
    assert known.with_leader("t", 0, 3, 9) is None  # no address known for node 3
    moved = known.with_leader("t", 0, 3, 9, Node("b3", 9093, None))
    assert moved is not None
    assert moved.leader_for("t", 0) == 3 and moved.leader_epoch("t", 0) == 9
    assert moved.nodes[3] == Node("b3", 9093, None)
    assert moved.leader_for("t", 1) == 2  # the rest unchanged
