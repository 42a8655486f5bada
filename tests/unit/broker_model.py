"""A small model of a Kafka broker's idempotence rules and a network the test controls.

Used by ``test_idempotence.py`` to drive the real ``Sender``, ``RecordAccumulator``
and ``TransactionManager`` through the situations that lose or duplicate records
(a request written but its answer lost, a broker that forgot the producer, a
gap, a split batch), deterministically and without sockets. The broker side is
written from Kafka's documented rules (``ProducerStateManager``), independently
of the client code it checks:

* per partition and producer id: the epoch and the last five batches appended;
* a lower epoch than stored: ``INVALID_PRODUCER_EPOCH``;
* a higher epoch: the batch must start at sequence 0, else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* the same epoch: a batch equal to one of the last five is a duplicate, answered
  with the original offset and not written again; one that does not start right
  after the last sequence is ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* no state for the producer: any first sequence is taken (Kafka 2.5+), or, with
  ``unknown_producer_id_errors``, ``UNKNOWN_PRODUCER_ID`` for a non-zero one (older brokers).

The real broker's checks are exercised too, in ``tests/integration/test_real_broker_faults.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from aioproducer.partitioner import TopicPartitions
from aioproducer.errors import KafkaConnectionError, KafkaError
from aioproducer.network.connection import ProduceCallback
from aioproducer.protocol import messages
from aioproducer.protocol.produce import PartitionResponse, ProduceAnswer, ProduceResponse, TopicData, read_produce_response
from aioproducer.protocol.records import decode_batches

NONE = 0
MESSAGE_TOO_LARGE = 10
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_PRODUCER_ID = 59
INT32_MAX = 2**31 - 1


def as_answer(response: ProduceResponse, version: int = 11) -> ProduceAnswer:
    """What a connection hands the sender for ``response``: its bytes written by the generic codec
    (``messages.encode_response``, an encoder independent of the native reader), read back by
    ``read_produce_response`` as the connection reads every Produce answer."""
    topics: list[dict[str, Any]] = []
    for p in response.partitions:  # consecutive partitions of a topic share its entry, as on the wire
        if not topics or topics[-1]["name"] != p.topic:
            topics.append({"name": p.topic, "partition_responses": []})
        topics[-1]["partition_responses"].append({
            "index": p.partition, "error_code": p.error_code, "base_offset": p.base_offset,
            "log_append_time_ms": p.log_append_time_ms, "log_start_offset": p.log_start_offset,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in p.record_errors],
            "error_message": p.error_message,
            "current_leader": {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch},
        })
    body = {
        "responses": topics, "throttle_time_ms": response.throttle_time_ms,
        "node_endpoints": [{"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack} for e in response.node_endpoints],
    }
    answer = read_produce_response(version, messages.encode_response(messages.PRODUCE, version, response.correlation_id, body)[4:])
    assert answer.to_response() == response  # the native reader and the generic writer agree on every field
    return answer


def _bytes(records: object) -> bytes:
    if isinstance(records, tuple):  # a batch sent in place: its header, then its section
        return b"".join(records)
    assert isinstance(records, (bytes, bytearray, memoryview)), "a Produce request without records"
    return bytes(records)


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


def add_sequence(sequence: int, count: int) -> int:
    return (sequence + count) % (INT32_MAX + 1)


@dataclass
class ProducerState:
    epoch: int
    last_sequence: int
    #: (first sequence, last sequence, base offset) of the last five batches.
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))


@dataclass
class PartitionLog:
    #: (offset, producer id, epoch, sequence of the record, value)
    records: list[tuple[int, int, int, int, bytes | None]] = field(default_factory=list)
    producers: dict[int, ProducerState] = field(default_factory=dict)
    log_start_offset: int = 0
    #: (error code, log start offset) to answer the next appends with (nothing written), oldest first.
    inject: deque[tuple[int, int]] = field(default_factory=deque)


class BrokerModel:
    def __init__(self, *, unknown_producer_id_errors: bool = False, max_message_bytes: int | None = None) -> None:
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.unknown_producer_id_errors = unknown_producer_id_errors
        self.max_message_bytes = max_message_bytes
        self.next_producer_id = 1000
        #: Every error answered, as (topic, partition, code).
        self.errors: list[tuple[str, int, int]] = []
        #: Error codes for the next InitProducerId requests, oldest first.
        self.init_errors: deque[int] = deque()

    def log(self, topic: str, partition: int) -> PartitionLog:
        return self.logs.setdefault((topic, partition), PartitionLog())

    def values(self, topic: str, partition: int) -> list[bytes | None]:
        return [r[4] for r in self.log(topic, partition).records]

    def inject(self, topic: str, partition: int, code: int, log_start_offset: int = 0) -> None:
        self.log(topic, partition).inject.append((code, log_start_offset))

    def forget_producers(self, topic: str, partition: int) -> None:
        """Retention deleted every batch of the partition: its producer state goes with them."""
        log = self.log(topic, partition)
        log.producers.clear()
        log.log_start_offset = len(log.records)

    # ------------------------------------------------------------------ requests
    def init_producer_id(self) -> dict[str, Any]:
        if self.init_errors:
            return {"error_code": self.init_errors.popleft(), "producer_id": -1, "producer_epoch": -1}
        self.next_producer_id += 1
        return {"error_code": NONE, "producer_id": self.next_producer_id, "producer_epoch": 0, "throttle_time_ms": 0}

    def produce(self, topic_data: TopicData) -> ProduceAnswer:
        parts = [self.append(topic, partition, _bytes(records)) for topic, items in topic_data for partition, records in items]
        return as_answer(ProduceResponse(1, parts, 0, []))

    def append(self, topic: str, partition: int, records: bytes) -> PartitionResponse:
        log = self.log(topic, partition)
        log_start = log.log_start_offset
        if log.inject:
            code, log_start = log.inject.popleft()
            offset = -1
        else:
            code, offset = self._check(log, records)
        if code != NONE:
            self.errors.append((topic, partition, code))
        return PartitionResponse(topic, partition, code, offset, -1, log_start, (), None, -1, -1)

    def _check(self, log: PartitionLog, records: bytes) -> tuple[int, int]:
        if self.max_message_bytes is not None and len(records) > self.max_message_bytes:
            return MESSAGE_TOO_LARGE, -1
        [batch] = decode_batches(records)
        count = len(batch.records)
        first, pid, epoch = batch.base_sequence, batch.producer_id, batch.producer_epoch
        last = add_sequence(first, count - 1)
        if pid < 0:  # not idempotent: appended as it comes
            base_offset = len(log.records)
            for i, record in enumerate(batch.records):
                log.records.append((base_offset + i, pid, epoch, -1, record.value))
            return NONE, base_offset
        state = log.producers.get(pid)
        if state is None:
            if self.unknown_producer_id_errors and first != 0 and log.log_start_offset > 0:
                return UNKNOWN_PRODUCER_ID, -1
        elif epoch < state.epoch:
            return INVALID_PRODUCER_EPOCH, -1
        elif epoch > state.epoch:
            if first != 0:
                return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        else:
            for known_first, known_last, base_offset in state.batches:
                if (known_first, known_last) == (first, last):
                    return NONE, base_offset  # a duplicate: acknowledged again, not written
            if first != next_sequence(state.last_sequence):
                return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        if state is None or epoch != state.epoch:
            state = log.producers[pid] = ProducerState(epoch, -1)
        base_offset = len(log.records)
        for i, record in enumerate(batch.records):
            log.records.append((base_offset + i, pid, epoch, add_sequence(first, i), record.value))
        state.last_sequence = last
        state.batches.append((first, last, base_offset))
        return NONE, base_offset


Action = Literal["deliver", "lose", "drop", "hold"]


@dataclass
class Request:
    node: int
    topic_data: TopicData
    on_response: ProduceCallback

    def partitions(self) -> list[tuple[str, int]]:
        return [(topic, partition) for topic, items in self.topic_data for partition, _ in items]

    def headers(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, epoch, base sequence) of each batch, as sent."""
        out = []
        for topic, items in self.topic_data:
            for partition, records in items:
                [batch] = decode_batches(_bytes(records))
                out.append((topic, partition, batch.producer_epoch, batch.base_sequence))
        return out


class Connection:
    def __init__(self, network: Network, node: int) -> None:
        self.network = network
        self.node = node

    def try_send_produce(
        self, topic_data: TopicData, on_response: ProduceCallback, acks: int, timeout_ms: int,
        transactional_id: str | None, transaction_v2: bool,
    ) -> bool:
        if not self.network.is_ready(self.node):
            return False
        self.network.requests.append(Request(self.node, topic_data, on_response))
        return True

    async def produce(
        self, topic_data: TopicData, *, acks: int, timeout_ms: int, transactional_id: str | None = None,
        transaction_v2: bool = False,
    ) -> ProduceAnswer | None:
        """The task path (``acks=0``, or a connection replaced since ``ready()``): delivered at once."""
        self.network.sent.append(Request(self.node, topic_data, lambda response, error: None))
        response = self.network.broker.produce(topic_data)
        return None if acks == 0 else response

    async def send(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        assert api_key == messages.INIT_PRODUCER_ID
        self.network.init_nodes.append(self.node)
        return self.network.broker.init_producer_id()


class Leaders:
    """Partition p is led by node p % nodes, unless ``moved`` says otherwise."""

    def __init__(self, nodes: int) -> None:
        self.nodes = dict.fromkeys(range(nodes))
        self.moved: dict[tuple[str, int], int] = {}

    def leader_for(self, topic: str, partition: int) -> int | None:
        return self.moved.get((topic, partition), partition % len(self.nodes))

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None:
        return None  # no partition counts: adaptive partitioning has no statistics to update


class Network:
    """The sender's client: every node connected; requests wait until the test acts on them.

    ``plan(node, ...)`` queues what happens to that node's next requests:
    ``deliver`` (processed, answered), ``lose`` (processed, the answer lost with
    the connection), ``drop`` (the connection failed before the broker read it),
    ``hold`` (stays in flight until the test calls ``release``). Without a plan a
    request is delivered.
    """

    def __init__(self, broker: BrokerModel, nodes: int = 1, max_in_flight: int = 5) -> None:
        self.broker = broker
        self.max_in_flight = max_in_flight
        self.requests: list[Request] = []  # written, not acted on yet
        self.held: list[Request] = []
        self.sent: list[Request] = []  # every request ever acted on, in order
        self.leaders = Leaders(nodes)
        self._plans: dict[int, deque[Action]] = {}
        self._connections = {node: Connection(self, node) for node in range(nodes)}
        self.down: set[int] = set()  # nodes whose every request is dropped
        self.init_nodes: list[int] = []  # the node each InitProducerId went to
        self.brokers_reachable = True  # what KafkaClient says outside a cluster-wide outage

    def plan(self, node: int, *actions: Action) -> None:
        self._plans.setdefault(node, deque()).extend(actions)

    def in_flight(self, node: int) -> int:
        return sum(1 for r in self.requests + self.held if r.node == node)

    def act(self) -> bool:
        """Act on every written request, oldest first; whether there was any."""
        if not self.requests:
            return False
        requests, self.requests = self.requests, []
        for request in requests:
            plan = self._plans.get(request.node)
            action: Action = "drop" if request.node in self.down else (plan.popleft() if plan else "deliver")
            if action == "hold":
                self.held.append(request)
            else:
                self._finish(request, action)
        return True

    def release(self, action: Action = "deliver") -> None:
        held, self.held = self.held, []
        for request in held:
            self._finish(request, action)

    def _finish(self, request: Request, action: Action) -> None:
        self.sent.append(request)
        if action == "drop":
            request.on_response(None, KafkaConnectionError("connection dropped before the broker read the request"))
            return
        response = self.broker.produce(request.topic_data)
        if action == "lose":
            request.on_response(None, KafkaConnectionError("connection dropped before the answer arrived"))
        else:
            request.on_response(response, None)

    # -- what the sender calls (SenderClient) ------------------------------------------
    @property
    def metadata(self) -> Leaders:
        return self.leaders

    def add_topic(self, topic: str) -> None:
        pass

    def request_update(self) -> None:
        pass

    async def refresh_metadata(self, topics: Any = None) -> Any:
        return None

    def time_to_next_update(self, now: float | None = None) -> float:
        return float("inf")

    def update_leader(self, topic: str, partition: int, leader: int, leader_epoch: int, node: Any) -> bool:
        return False

    def is_ready(self, node_id: int) -> bool:
        return self.in_flight(node_id) < self.max_in_flight

    def free_slots(self, node_id: int) -> int:
        return max(0, self.max_in_flight - self.in_flight(node_id))

    def is_connected(self, node_id: int) -> bool:
        return True

    def throttle_delay(self, node_id: int, now: float | None = None) -> float:
        return 0.0  # this broker never throttles

    def connection_for(self, node_id: int) -> Connection | None:
        return self._connections[node_id]

    def flush_writes(self, nodes: Iterable[int]) -> None:
        """Nothing to do: this model's connections deliver each request as it is sent."""

    async def connection(self, node_id: int) -> Connection:
        return self._connections[node_id]

    def connection_error(self, node_id: int) -> KafkaError | None:
        return None
