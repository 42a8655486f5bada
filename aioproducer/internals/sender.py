"""Sender: the one background task that moves batches from the accumulator to the brokers.

Theory of operation (Java's ``Sender.sendProducerData`` as an asyncio task)
--------------------------------------------------------------------------
One pass, ``run_once(now)``:

1. ``accumulator.ready()`` names the leaders with sendable batches and how long
   until another might become sendable; topics whose leader is unknown trigger
   a metadata refresh. The sender tells it which leaders are idle (no Produce
   request in flight): there a batch someone awaits does not wait out its linger.
2. Leaders without a usable connection (not yet connected, in reconnect
   backoff, at ``max.in.flight.requests.per.connection``, or throttled by the
   broker, KIP-219) are dropped for this pass; a connection attempt starts in
   the background, and the end of a throttle bounds the sleep.
3. ``accumulator.drain()`` takes up to ``max.request.size`` per node, at most
   one batch per partition (a Produce request carries one batch per partition).
4. Batches past ``delivery.timeout.ms`` that are still queued are failed.
5. One Produce request per node is written at once, without a task: the
   connection encodes it with the hand-written Produce codec and calls
   its token (``ProduceToken``) when the response (or an error) comes (the
   answers of one read together: :meth:`Sender._on_node_answers`),
   so requests to different brokers, and up to the in-flight limit to one
   broker, overlap. Only ``acks=0`` (which must wait for the socket to drain)
   and a node whose connection went away since ``ready()`` use a task.
6. While a node that just got a request is still ready (``ready()``'s rule for
   that node alone: ``accumulator.drain_next``) and has a free in-flight slot,
   steps 3 and 5 repeat for it in the same pass. With large records (one per
   batch) a request holds only as many batches as the node leads partitions;
   writing the next requests now, instead of one per pass with an event-loop
   round trip in between, lets the connection write them with one system call,
   and asking for the node alone spares a scan of every partition per request.

Before step 1, the pass asks the transaction manager's side for its next request
(``transactions.TransactionRequests.next_request``: InitProducerId of an idempotent
producer, AddPartitionsToTxn), as Java's ``Sender.maybeSendAndPollTransactionalRequest``,
and runs it in a task of its own, one at a time; a failure fails the queued records.

Compression happens when a request is written (``ProducerBatch.records()``),
on the event loop, up to a share per pass; a request that would take the pass
past it is compressed in a thread and written once the results are back, its
node taking no other request meanwhile (``compression_offload.py`` says why and
how much). A pass that used its share ends with a zero delay, letting the loop
run other tasks first.

Between passes the task sleeps on an ``asyncio.Event`` until it is woken (a
batch filled or opened, a response arrived, a connection came up, a flush or
close began) or until the earliest linger/backoff/expiry deadline: no polling.

Responses are classified per partition: success completes the batch (the
response's written batches in one native call, ``RecordQueues.complete``, which
hands back only the partitions that need a decision below; a producer with
interceptors completes them one by one, ``_handle_partition``);
``DUPLICATE_SEQUENCE_NUMBER`` is success with an unknown offset; a retriable
error re-queues the batch after an exponential backoff while
``delivery.timeout.ms`` allows (refreshing metadata when the error says the
leader moved); ``MESSAGE_TOO_LARGE`` on a multi-record batch splits it; any
other error fails the batch's records. A request that is still in flight when
its batch's delivery timeout passes is bounded by ``request.timeout.ms``
(the connection fails it), after which the batch fails instead of retrying.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from aioproducer.errors import (
    AuthenticationError,
    BrokerResponseError,
    DuplicateSequenceNumberError,
    InvalidRecordBrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    error_for_code,
)
from aioproducer._native import produce_topic_data
from aioproducer.logs import LogLike
from aioproducer.clock import monotonic_ms
from aioproducer.internals.accumulator import LeaderLookup, RecordAccumulator
from aioproducer.internals.compression_offload import CompressionJobs, CompressionOffload
from aioproducer.internals.coordinator import CoordinatorSender
from aioproducer.internals.metrics import ProducerMetrics
from aioproducer.internals.batch import ProducerBatch, RecordErrors
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.internals.transactions import RequestFailed, SenderRequest, TransactionRequests
from aioproducer.lifecycle import LifecycleView, State
from aioproducer.network.metadata import Node
from aioproducer.network.connection import ProduceCallback, ProduceToken
from aioproducer.protocol.produce import AnyProduceResponse, NodeEndpoint, PartitionResponse, TopicData

__all__ = ["Sender", "SenderConfig", "OnAcknowledged"]

#: Told of a response's batches the broker wrote, completed natively (``RecordQueues.complete``):
#: how many records they held (their metrics went into the metrics' counters there).
OnAcknowledged = Callable[[int], None]

log: logging.Logger = logging.getLogger("aioproducer.sender")

#: Error codes the sender branches on, from their classes (module constants: read per partition answer).
NONE = 0
MESSAGE_TOO_LARGE = MessageTooLargeError.errno
DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceNumberError.errno

# What _send_produce_request did with a request.
_WRITTEN, _IN_TASK, _FAILED = "written", "in a task", "failed"

class WakeUp:
    """The sender's wake-up: set by whatever may make a batch sendable, waited for by the sender alone.

    What ``asyncio.Event`` does for its one waiter, without what ``Event.wait()`` costs on Python
    3.11 each pass: it asks for the running loop (a ``getpid()`` system call there) and queues a
    new future in a deque. The sender waits once a pass, thousands of times a second (py-spy at
    10 KB records: ``getpid`` 2.1 % of the loop's samples, ``Sender._sleep`` 3.8 %, 2026-12-04).
    ``set()`` is called from the loop's thread only (the client, the accumulator, the sender's
    own answers and timer), ``clear()`` and ``wait()`` by the sender.
    """

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if not self._set:
            self._set = True
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until ``set()`` (at once if it is set); ``loop`` is the sender's, which the caller holds."""
        if self._set:
            return
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None


class SenderConfig(Protocol):
    acks: int
    retries: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    max_request_size: int
    metadata_max_age_ms: int
    retry_backoff_ms: int


class SenderMetadata(LeaderLookup, Protocol):
    """What the sender reads of a metadata snapshot (``network.metadata.ClusterMetadata``)."""

    @property
    def nodes(self) -> Mapping[int, object]: ...


class ProduceConnection(Protocol):
    """What the sender calls on a broker connection (``network.connection.BrokerConnection``)."""

    def try_send_produce(
        self, topic_data: TopicData, on_response: ProduceCallback, acks: int, timeout_ms: int,
        transactional_id: str | None, transaction_v2: bool,
    ) -> bool: ...

    async def produce(
        self, topic_data: TopicData, *, acks: int, timeout_ms: int, transactional_id: str | None = None,
        transaction_v2: bool = False,
    ) -> AnyProduceResponse | None: ...

    async def send(self, api_key: int, body: dict[str, Any]) -> dict[str, Any] | None: ...


class SenderClient(Protocol):
    """What the sender needs from ``network.client.KafkaClient``."""

    @property
    def metadata(self) -> SenderMetadata: ...

    def add_topic(self, topic: str) -> None: ...

    def request_update(self) -> None: ...

    def time_to_next_update(self, now: float | None = None) -> float: ...

    def update_leader(self, topic: str, partition: int, leader: int, leader_epoch: int, node: Node | None) -> bool: ...

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> object: ...

    def is_ready(self, node_id: int) -> bool: ...

    def free_slots(self, node_id: int) -> int: ...

    def throttle_delay(self, node_id: int, now: float | None = None) -> float: ...

    def is_connected(self, node_id: int) -> bool: ...

    def connection_for(self, node_id: int) -> ProduceConnection | None: ...

    def flush_writes(self, nodes: Iterable[int]) -> None: ...

    async def connection(self, node_id: int) -> ProduceConnection: ...

    def connection_error(self, node_id: int) -> KafkaError | None: ...

    @property
    def brokers_reachable(self) -> bool: ...


class Sender:
    """Owns the accumulator's drained batches until they complete."""

    def __init__(
        self,
        client: SenderClient,
        accumulator: RecordAccumulator,
        transaction_manager: TransactionManager | None,
        config: SenderConfig,
        on_complete: Callable[[ProducerBatch], None] | None = None,
        clock: Callable[[], float] = monotonic_ms,
        wake: WakeUp | None = None,
        metrics: ProducerMetrics | None = None,
        log: LogLike = log,
        coordinators: CoordinatorSender | None = None,
        inline_compression_bytes: float | None = None,
        *,
        on_fatal: Callable[[BaseException], None],
        on_acknowledged: OnAcknowledged | None = None,
    ) -> None:
        self.client = client
        #: Where the sender logs: the producer's ``aioproducer.sender`` naming its client.id (see logs.py).
        self._log = log
        #: Where requests, their batches, answers and retries are recorded (per batch, per request).
        self.metrics = metrics
        self.accumulator = accumulator
        self.transaction_manager = transaction_manager
        self.config = config
        self._on_complete = on_complete
        #: The answers' written batches complete in one native call (``_complete_answers``) unless
        #: whoever made the sender wants each batch (``on_complete`` without ``on_acknowledged``:
        #: interceptors read each record's outcome); then they complete one by one here.
        self._on_acknowledged = on_acknowledged
        self._clock = clock
        #: What the sender sleeps on between passes. Created by whoever builds the accumulator
        #: too (``ProducerEngine.start``), which sets it when a batch opens or fills: one object, made first.
        self._wake = wake if wake is not None else WakeUp()
        #: The loop the sender's task runs in, taken when it starts (``run``): its timers' loop.
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The sender's timer between passes (``_sleep``), kept from pass to pass while it fires no
        #: later than the pass asks; None once it fired. Writers: ``_sleep``, ``_timer_fired``, ``run``.
        self._timer: asyncio.TimerHandle | None = None
        #: The producer's lifecycle, the one the accumulator reads (see ``lifecycle.py``): the loop
        #: runs while RUNNING, drains while CLOSING, and stops retrying once FORCED. Read only: the
        #: engine moves it (and wakes this sender when it does).
        self.lifecycle: LifecycleView = accumulator.lifecycle
        #: Told of an error no retry can fix; the engine then refuses every later record with it.
        self._on_fatal = on_fatal
        self._requests: set[asyncio.Task[None]] = set()
        #: Produce requests written by send_produce() whose callback has not run yet.
        self._callbacks_pending = 0
        #: Set when this task's loop ended (its own fact, not the producer's: asyncio.run() ending
        #: cancels it while the producer is RUNNING): responses arriving later are not ours any more.
        self._ended = False
        self._connecting: dict[int, asyncio.Task[None]] = {}
        self._metadata_task: asyncio.Task[None] | None = None
        #: The requests written or being written: per request (keyed by its batches list's id, the
        #: list held here so the id stays its own) its batches and their earliest delivery deadline
        #: (``produce_topic_data`` gives it), and the earliest of those (a lower bound: requests
        #: leave without raising it). Past its deadline a batch fails at once, not when its request
        #: ends (up to request.timeout.ms later), as Java does. Per request, not per batch: the
        #: sender touches it twice a request. Written only by ``_send_produce_request`` (a request
        #: leaves), ``_on_node_answers`` and ``_untrack_sent`` (it ends) and ``_expire_sent``.
        self._sent: dict[int, tuple[list[ProducerBatch], float]] = {}
        self._sent_deadline = float("inf")
        #: The transaction manager's requests (InitProducerId, AddPartitionsToTxn: ``transactions.py``),
        #: asked for the next one each pass, and the one under way (its end wakes the sender).
        self._txn_requests = (
            None if transaction_manager is None else TransactionRequests(
                transaction_manager, client, coordinators, accumulator.retry_backoff, config.delivery_timeout_ms,
                clock=clock, log=log,
            )
        )
        self._txn_task: asyncio.Task[None] | None = None
        #: The transactional id each Produce request carries.
        self._transactional_id = transaction_manager.transactional_id if transaction_manager is not None else None
        #: Compression off the loop past a share per pass (``compression_offload.py``); ``compressing`` is
        #: its set of nodes whose request is in the thread, read here on every ready node.
        self._offload = CompressionOffload(accumulator.config.compression_type, inline_compression_bytes)
        self._compressing = self._offload.compressing
        #: Produce requests per node written or in a task and not answered yet: a node without any
        #: takes an awaited batch before its linger ends (``RecordAccumulator.ready``, ``_node_idle``).
        self._node_requests: dict[int, int] = {}
        #: What every written request's token calls (``ProduceToken``): one object each, so that a
        #: connection can tell the answers it may hand over together (``on_answers`` the same).
        self._on_outcome = self._on_node_response
        self._on_answers = self._on_node_answers

    # ------------------------------------------------------------------ lifecycle
    def wakeup(self) -> None:
        """Called on every event that may make a batch sendable; cheap when already awake (``WakeUp.set``)."""
        self._wake.set()

    async def run(self) -> None:
        """Loop until closed, then until the accumulator is empty (graceful) or at once (forced)."""
        loop = self._loop = asyncio.get_running_loop()
        try:
            lifecycle = self.lifecycle
            while lifecycle.state is State.RUNNING:
                await self._loop_once()
            while lifecycle.state is State.CLOSING and (self.accumulator.has_undrained() or self._has_requests()):
                await self._loop_once()
        except Exception as exc:  # noqa: BLE001 - any bug here must fail records, not hang them
            self._die(exc)
        finally:
            self._ended = True
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            if _running_loop() is loop:
                await self._shutdown_background()
            # else: the garbage collector is closing this coroutine after its loop ended (a
            # producer dropped unclosed), maybe while another loop runs: its tasks died with
            # their loop, and touching them would raise "Event loop is closed".

    def _die(self, exc: Exception) -> None:
        """The loop raised (a bug, or an error no path expected): fail every record, accept none.

        Without this, a dead task would leave every pending future and ``flush()``
        waiting forever while ``send()`` kept queuing records nobody sends.
        """
        self._log.error("the sender task failed; every record not yet delivered fails with it", exc_info=exc)
        error = KafkaError(f"the producer's sender task failed: {exc!r}; create a new producer")
        error.__cause__ = exc
        self._on_fatal(error)  # send() learns it at once, not at the task's end
        self.abort_incomplete(error)

    def _has_requests(self) -> bool:
        return bool(self._requests) or self._callbacks_pending > 0

    async def _loop_once(self) -> None:
        await self._sleep(self.run_once(self._clock()))

    async def _sleep(self, delay_ms: float) -> None:
        """Until woken, or ``delay_ms`` at most (the timer may end it earlier: one pass more).

        The timer is kept across passes while it fires no later than the pass asks, and replaced
        only by an earlier one: a pass that ends sooner (an answer woke the sender) leaves it
        armed for the next. A timer that fires before its pass needed it costs one pass that finds
        nothing to do, at most one per timer. Why: a timer armed and cancelled each pass (a
        ``TimerHandle``, the loop's heap, its cancelled entries) was 2.4 % of the loop's samples
        with 1 KB records (py-spy, the peers' layout, 2026-12-04), passes being thousands a second.
        """
        wake = self._wake
        if wake.is_set():
            wake.clear()
            return
        loop = self._loop or asyncio.get_running_loop()  # a pass driven without run(): a test's
        if delay_ms != float("inf"):
            when = loop.time() + max(delay_ms, 0.0) / 1000.0
            timer = self._timer
            if timer is None or timer.when() > when:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(when, self._timer_fired)
        try:
            await wake.wait(loop)
        finally:
            wake.clear()

    def _timer_fired(self) -> None:
        self._timer = None
        self._wake.set()

    # ------------------------------------------------------------------ one pass
    def run_once(self, now: float) -> float:
        """One ready → drain → expire → send pass; returns how long to sleep (ms)."""
        accumulator = self.accumulator
        metadata: LeaderLookup = self.client.metadata
        tm = self.transaction_manager
        delay = float("inf")
        if tm is not None:
            tm.maybe_resolve_sequences()
            # Local, as the Java idempotent producer; may drop the id at the last epoch. A transactional
            # epoch bump waits for the abort.
            if not tm.transactional and tm.epoch_bump_required and tm.ready_to_bump():
                tm.bump_epoch()
            delay = self._maybe_send_transactional_request(now)
        result = accumulator.ready(metadata, now, self._node_idle)
        delay = min(delay, result.next_ready_check_delay_ms, self._maybe_refresh_metadata(now))
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.client.add_topic(topic)
            self._refresh_metadata()
            delay = min(delay, float(self.config.retry_backoff_ms))

        nodes = set()
        compressing = self._compressing
        offload = self._offload
        offload.new_pass()
        for node in result.ready_nodes:
            can_drain = self.client.is_ready(node) and not (compressing and node in compressing)
            accumulator.update_node_latency(node, now, can_drain)
            if can_drain:
                nodes.add(node)
            elif not self.client.is_connected(node):
                self._connect(node)
            else:
                # Connected, but every in-flight slot is taken (a response wakes the sender) or the
                # broker throttles us (KIP-219): nothing wakes the sender when that ends but this.
                throttle = self.client.throttle_delay(node, now)
                if throttle > 0.0:
                    delay = min(delay, throttle)

        batches_by_node = accumulator.drain(metadata, nodes, self.config.max_request_size, now)

        for batch in accumulator.expired_batches(now):
            self._fail_batch(batch, self._expiry_error(batch, now), outcome_unknown=True)
        if now >= self._sent_deadline:
            self._expire_sent(now)
        delay = min(delay, self._sent_deadline - now)
        if accumulator.has_undrained():
            delay = min(delay, accumulator.next_expiry_delay(now))

        written, in_tasks = self._send_all(batches_by_node)
        if written:
            if not offload.spent:
                more_delay, more_in_tasks = self._send_more(written, now)
                delay = min(delay, more_delay)
                in_tasks = in_tasks or more_in_tasks
            # The connections hold this pass's requests to write them as one: out now, in this callback.
            self.client.flush_writes(written)
        if in_tasks or offload.spent:
            # A request went through a task that has not taken its in-flight slot yet (acks=0, or a
            # connection to replace), so its node may take more at once: pass again without sleeping.
            # Nodes written to synchronously were served above: a response or a timer wakes the sender.
            # Or the pass compressed its share on the loop: the rest waits one turn of the loop.
            delay = 0.0
        return delay

    def _node_idle(self, node: int) -> bool:
        """Whether ``node`` has no Produce request in flight (none being compressed) and can take one now."""
        return not self._node_requests.get(node) and node not in self._compressing and self.client.is_ready(node)

    def _request_ended(self, node: int) -> None:
        count = self._node_requests.get(node, 0) - 1
        if count > 0:
            self._node_requests[node] = count
        else:
            self._node_requests.pop(node, None)

    @property
    def requests_in_flight(self) -> int:
        """Produce requests written or in a task and not answered yet (``requests-in-flight``)."""
        return sum(self._node_requests.values())

    def _on_node_response(
        self, token: ProduceToken, response: AnyProduceResponse | None, error: KafkaError | None
    ) -> None:
        """The outcome of one request ``_send_produce_request`` wrote (its token's call): exactly one per request.

        An answer goes the way of the answers of a read (``_on_node_answers``); an error fails
        the request's batches (retried or not) after the same bookkeeping.
        """
        if error is None:
            assert response is not None
            self._on_node_answers([token], [response])
            return
        node, batches, _ = token.request
        self._request_ended(node)
        self._untrack_sent(batches)
        self._callbacks_pending -= 1
        if self._ended:
            return  # the producer was closed by force: these batches were failed already
        try:
            self._request_failed(batches, error)
        finally:
            self._wake.set()

    def _on_node_answers(self, tokens: list[ProduceToken], answers: list[AnyProduceResponse]) -> None:
        """The answers of one read to requests ``_send_produce_request`` wrote, in the order read.

        The clock is read once: the answers' latencies and their batches' completion share
        ``now``. Each answer's bookkeeping first (its node's count, the latency, the request's
        delivery deadline), then every request's batches in one native call (``_complete_answers``);
        a completion that fails (a bug) is reported and the next goes on, as when each answer had
        its own call. Why together: the
        Python of the answer path was per answer (the connection's callback, this method's frame,
        the wake-up); about five answers come in a read (``benchmarks/README.md``, "The answers
        of a read together").
        """
        now = self._clock()
        metrics, requests, sent = self.metrics, self._node_requests, self._sent
        # The answers' latencies (now minus their sent times) and throttle times, summed to be
        # recorded in one call: a connection's read holds one node's answers.
        first_node = tokens[0].request[0] if tokens else -1
        one_node, sent_sum, sent_min, throttled, throttle_sum, throttle_max = True, 0.0, now, 0, 0, -1
        for token, response in zip(tokens, answers):
            # ``_request_ended``'s and ``_untrack_sent``'s steps, written out: the hot path.
            node, batches, sent_ms = token.request
            count = requests.get(node, 0) - 1
            if count > 0:
                requests[node] = count
            else:
                requests.pop(node, None)
            sent.pop(id(batches), None)
            one_node = one_node and node == first_node
            sent_sum += sent_ms
            if sent_ms < sent_min:
                sent_min = sent_ms
            throttle = response.throttle_time_ms
            if throttle >= 0:
                throttled += 1
                throttle_sum += throttle
                if throttle > throttle_max:
                    throttle_max = throttle
        if metrics is not None and tokens:
            if one_node:
                metrics.record_responses(first_node, len(tokens), len(tokens) * now - sent_sum, now - sent_min,
                                         throttled, throttle_sum, throttle_max, now)
            else:  # several nodes' answers handed over together (a caller's, never a read): one by one
                for token, response in zip(tokens, answers):
                    metrics.record_response(token.request[0], now - token.request[2], response.throttle_time_ms, now)
        if not sent:
            self._sent_deadline = float("inf")
        self._callbacks_pending -= len(tokens)
        if self._ended:
            return  # the producer was closed by force: these batches were failed already
        try:
            self._complete_answers([token.request[1] for token in tokens], answers, now)
        finally:
            self._wake.set()

    def _record_response(self, node: int, sent_ms: float, response: AnyProduceResponse, now: float) -> None:
        metrics = self.metrics
        if metrics is not None:
            metrics.record_response(node, now - sent_ms, response.throttle_time_ms, now)

    def _expire_sent(self, now: float) -> None:
        """Fail the batches in a request whose delivery deadline passed; their request goes on.

        The partition stays muted (``max.in.flight=1``) until the request ends, and
        the batch stays among the idempotence bookkeeping's unacknowledged ones: its
        answer, when it comes, still says whether the broker wrote it (see
        ``_handle_error`` for a batch already done).
        """
        sent = self._sent
        earliest = float("inf")
        for key, (batches, deadline) in list(sent.items()):
            if now < deadline:
                earliest = min(earliest, deadline)
                continue
            left = float("inf")  # the request's deadline from here: its batches not yet past theirs
            for batch in batches:
                if not batch.has_reached_delivery_timeout(now):
                    left = min(left, batch.delivery_deadline_ms)
                elif not batch.is_done:
                    self._complete(batch, -1, -1, self._expiry_error(batch, now, in_flight=True))
            if key in sent:  # a completion above may have ended the request (a forced close)
                sent[key] = (batches, left)
            earliest = min(earliest, left)
        self._sent_deadline = earliest

    def _untrack_sent(self, batches: list[ProducerBatch]) -> None:
        """The request of ``batches`` (the list ``_send_produce_request`` tracked) ended."""
        sent = self._sent
        sent.pop(id(batches), None)
        if not sent:
            self._sent_deadline = float("inf")

    def _expiry_error(self, batch: ProducerBatch, now: float, *, in_flight: bool = False) -> KafkaTimeoutError:
        """Java's message, plus the cause (its ``__cause__``), where one is known.

        The cause is what failed the batch's last attempt or, for a batch never
        sent, why its leader could not be reached (a broker that is down). During
        an outage of the whole cluster the message says so: it is what the
        producer's WARNING for the expired records shows (``failure_log.py``).
        """
        last = batch.retry_error
        tm = self.transaction_manager
        requests = self._txn_requests
        if last is None and tm is not None and not tm.has_producer_id and requests is not None:
            last = requests.init_error  # never sent: no producer id could be had
        if last is None:
            leader = self.client.metadata.leader_for(batch.topic, batch.partition)
            last = None if leader is None or leader < 0 else self.client.connection_error(leader)
        error = KafkaTimeoutError(
            f"Expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
            f"{int(now - batch.created_ms)} ms has passed since batch creation"
            f"{' (its request is still in flight: the broker may still write it)' if in_flight else ''} "
            f"(delivery.timeout.ms={round(batch.delivery_deadline_ms - batch.created_ms)})"
            + ("" if self.client.brokers_reachable else " while no broker was reachable")
            + ("" if last is None else f"; the last attempt failed with {type(last).__name__}: {last}")
        )
        error.__cause__ = last
        return error

    def _send_all(self, batches_by_node: dict[int, list[ProducerBatch]]) -> tuple[set[int], bool]:
        """One request per node: the nodes whose request was written now, and whether any went to a task."""
        written: set[int] = set()
        in_tasks = False
        compressing = self._offload.active
        for node, batches in batches_by_node.items():
            if not batches:
                continue
            outcome = self._send_one(node, batches, compressing)
            if outcome is _WRITTEN:
                written.add(node)
            elif outcome is _IN_TASK:
                in_tasks = True
        return written, in_tasks

    def _send_more(self, written: set[int], now: float) -> tuple[float, bool]:
        """Step 6: more requests to the nodes just written to, each while it has a free slot and a batch ready.

        Whether a node is still ready is ``ready()``'s rule for it alone (``drain_next``): the
        pass does not scan every partition again per request, as it did until 2026-12-04
        (``ready()`` and ``drain()`` per further request: about 7 µs of the loop's time a
        request at 10 KB records, where two records make a request). Returns how long until a
        first batch left on those nodes may go (their linger), and whether a request went to a
        task. A node whose request was not written stops there, as the pass stops for it.
        """
        accumulator, client, offload = self.accumulator, self.client, self._offload
        compressing = offload.active
        max_size = self.config.max_request_size
        force = accumulator.force_drain()
        delay, in_tasks = float("inf"), False
        for node in written:
            for _ in range(client.free_slots(node)):
                if compressing and offload.spent:
                    return delay, in_tasks
                batches, node_delay = accumulator.drain_next(node, max_size, now, force)
                if not batches:
                    delay = min(delay, node_delay)
                    break
                outcome = self._send_one(node, batches, compressing)
                if outcome is not _WRITTEN:
                    in_tasks = in_tasks or outcome is _IN_TASK
                    break
        return delay, in_tasks

    def _send_one(self, node: int, batches: list[ProducerBatch], compressing: bool) -> str:
        """One request: to the compression thread when the offload takes it (``_IN_TASK``), else ``_send_produce_request``."""
        if compressing and (jobs := self._offload.take(node, batches)) is not None:
            self._track_request(self._compress_then_send(node, batches, jobs))
            return _IN_TASK
        return self._send_produce_request(node, batches)

    # ------------------------------------------------------------------ compression off the loop
    async def _compress_then_send(self, node: int, batches: list[ProducerBatch], jobs: CompressionJobs) -> None:
        """The request past the pass's compression share (``compression_offload.py``): compressed in the thread, then sent.

        The node takes no other request meanwhile, so none overtakes this one.
        """
        try:
            await self._offload.compress(node, jobs)
        except Exception as exc:  # noqa: BLE001 - as a request that could not be encoded
            self._request_failed(batches, KafkaError(f"compressing the Produce request failed: {exc!r}"))
            return
        live = [batch for batch in batches if not batch.is_done]
        if live and not self._ended:
            self._send_produce_request(node, live)

    # ------------------------------------------------------------------ background helpers
    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        return task

    def _connect(self, node: int) -> None:
        if node in self._connecting:
            return

        async def connect() -> None:
            try:
                await self.client.connection(node)
            except AuthenticationError as exc:
                self._fatal(exc)  # retrying cannot help: every record fails with why, at once
            except KafkaError as exc:
                self._log.debug("connection to node %s failed: %s", node, exc)
            finally:
                self._connecting.pop(node, None)
                self.wakeup()

        self._connecting[node] = self._spawn(connect())

    def _maybe_refresh_metadata(self, now: float) -> float:
        """Refresh when the client says metadata is due; how long until it is (ms).

        Due when something asked for an update (a connection lost, a request
        timed out, a leader-moved error) or ``metadata.max.age.ms`` passed, as
        Java's ``Metadata.timeToNextUpdate``. A leader that died while the
        producer was idle is found this way before the next batch expires.
        While a refresh runs, its end wakes the sender.
        """
        if self._metadata_task is not None and not self._metadata_task.done():
            return float("inf")
        due = self.client.time_to_next_update(now)
        if due > 0:
            return due
        self._refresh_metadata()
        return float("inf")

    def _refresh_metadata(self) -> None:
        if self._metadata_task is not None and not self._metadata_task.done():
            return

        async def refresh() -> None:
            try:
                await self.client.refresh_metadata()
            except AuthenticationError as exc:
                self._fatal(exc)
            except KafkaError as exc:
                self._log.debug("metadata refresh failed: %s", exc)
            finally:
                self.wakeup()

        self._metadata_task = self._spawn(refresh())

    # ------------------------------------------------------------------ the transaction manager's requests
    def _maybe_send_transactional_request(self, now: float) -> float:
        """Start the transaction manager's next request, one at a time (Java's ``maybeSendAndPollTransactionalRequest``).

        Returns ms until one may become due. The request runs in a task (``transactions.TransactionRequests``);
        its end wakes the sender.
        """
        requests = self._txn_requests
        task = self._txn_task
        if requests is None or (task is not None and not task.done()):
            return float("inf")
        request, delay = requests.next_request(now, self._has_requests())
        if request is not None:
            self._txn_task = self._spawn(self._run_transactional_request(request))
        return delay

    async def _run_transactional_request(self, request: SenderRequest) -> None:
        """Run the request; a failure fails the queued records (the batches are the sender's)."""
        try:
            failed = await request
            if failed is not None:
                self._transactional_request_failed(failed)
        finally:
            self.wakeup()

    def _transactional_request_failed(self, failed: RequestFailed) -> None:
        """Fatal: nothing can be sent any more. Else (AddPartitionsToTxn) the transaction must be aborted."""
        if failed.fatal:
            self._fatal(failed.error)
            return
        tm = self.transaction_manager
        assert tm is not None
        self._transaction_failed(tm, failed.error)
        for batch in self.accumulator.abort_undrained():
            self._fail_batch(batch, failed.error, outcome_unknown=False)

    def _fatal(self, error: BaseException) -> None:
        """An error that no retry can fix: fail every queued record with it."""
        self._on_fatal(error)  # no record can be sent any more: send() says why at once
        for batch in self.accumulator.abort_undrained():
            self._fail_batch(batch, error, outcome_unknown=True)

    async def _shutdown_background(self) -> None:
        tasks = [*self._connecting.values(), *self._requests]
        for task in (self._metadata_task, self._txn_task):
            if task is not None:
                tasks.append(task)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._offload.shutdown()

    # ------------------------------------------------------------------ produce requests
    @property
    def _transaction_v2(self) -> bool:
        """Produce v12 (transactions v2: the request adds its partitions to the transaction), else v11 at most."""
        tm = self.transaction_manager
        return tm is not None and tm.transactional and tm.transaction_v2

    def _send_produce_request(self, node: int, batches: list[ProducerBatch]) -> str:
        """Send one request: ``_WRITTEN`` now (its in-flight slot taken), ``_IN_TASK``, or ``_FAILED`` at once."""
        acks = self.config.acks
        # One native pass: the batches built (their sizes known from here), the request's
        # earliest delivery deadline, and its statistics added to the metrics' native counters
        # (Java's ``updateProduceRequestMetrics``, at the drain, where Java records them too).
        metrics = self.metrics
        now = self._clock()
        batches, topic_data, deadline, fold_due = produce_topic_data(
            batches, now, None if metrics is None else metrics.counters
        )
        if fold_due:
            assert metrics is not None
            metrics.fold()
        self._sent[id(batches)] = (batches, deadline)  # _track_sent's steps, on the hot path
        if deadline < self._sent_deadline:
            self._sent_deadline = deadline
        connection = self.client.connection_for(node) if acks != 0 else None
        if connection is not None:
            token = ProduceToken(self._on_outcome, self._on_answers, (node, batches, now))
            try:
                written = connection.try_send_produce(
                    topic_data, token, acks, self.config.request_timeout_ms, self._transactional_id, self._transaction_v2
                )
            except (KafkaError, OSError, ValueError) as exc:
                self._untrack_sent(batches)
                self._request_failed(batches, exc)
                return _FAILED
            if written:
                self._callbacks_pending += 1
                self._node_requests[node] = self._node_requests.get(node, 0) + 1
                return _WRITTEN
        # acks=0 must wait for the socket to drain; a connection gone since ready(), or busy (not READY, no
        # slot: re-authenticating), waits for what is missing in a task.
        self._track_request(self._produce(node, topic_data, batches))
        self._node_requests[node] = self._node_requests.get(node, 0) + 1
        return _IN_TASK

    def _track_request(self, coro: Any) -> None:
        """Run a Produce request's coroutine in a task that a close waits for (``_requests``)."""
        task = self._spawn(coro)
        self._requests.add(task)
        task.add_done_callback(self._request_done)

    def _request_done(self, task: asyncio.Task[None]) -> None:
        # The closing loop waits for ``_requests`` to empty: wake it when it shrinks.
        self._requests.discard(task)
        self.wakeup()

    async def _produce(
        self, node: int, topic_data: TopicData, batches: list[ProducerBatch]
    ) -> None:
        acks = self.config.acks
        try:
            connection = await self.client.connection(node)
            sent_ms = self._clock()
            response = await connection.produce(
                topic_data, acks=acks, timeout_ms=self.config.request_timeout_ms, transactional_id=self._transactional_id,
                transaction_v2=self._transaction_v2,
            )
            if response is not None:
                self._record_response(node, sent_ms, response, self._clock())
        except (KafkaError, OSError, ValueError) as exc:
            self._untrack_sent(batches)
            self._request_failed(batches, exc)
        else:
            self._untrack_sent(batches)
            if response is None:  # acks=0: nothing comes back, offsets are unknown
                for batch in batches:
                    self._complete_ok(batch, -1, -1)
            else:
                self._handle_response(response, batches, self._clock())
        finally:
            self._request_ended(node)
            self.wakeup()

    def _request_failed(self, batches: list[ProducerBatch], exc: BaseException) -> None:
        """The request as a whole failed: no broker answer for any of its batches.

        A socket error is a (retriable) connection error; a ``ValueError`` means
        the request could not be encoded, which no retry can fix.
        """
        if isinstance(exc, KafkaError):
            error = exc
        elif isinstance(exc, ValueError):
            error = KafkaError(f"the Produce request could not be encoded: {exc}")
        else:
            error = KafkaConnectionError(str(exc))
        if isinstance(error, (KafkaConnectionError, KafkaTimeoutError)):
            self.client.request_update()
        now = self._clock()
        for batch in batches:
            self._handle_error(batch, error, now, outcome_unknown=True)

    def _handle_response(self, response: AnyProduceResponse, batches: list[ProducerBatch], now: float) -> None:
        """One request's answer: :meth:`_complete_answers` for it alone."""
        self._complete_answers([batches], [response], now)

    def _complete_answers(
        self, requests: list[list[ProducerBatch]], responses: list[AnyProduceResponse], now: float
    ) -> None:
        """Match each partition's answer to its batch, complete the written ones, decide for the rest.

        Brokers answer in request order, so each request's batches are matched by position
        while that holds; at the first answer out of place the rest are matched by
        topic-partition (an answer for a partition not asked for, or a second one, is ignored).
        A batch without an answer fails as unknown outcome. The matching and the written
        batches' completion are one native call for all the answers (``RecordAccumulator.complete_all``);
        it hands back only the batches that need a decision, in the answers' order, each
        request's without an answer last. A producer with interceptors wants each batch
        (``on_complete`` without ``on_acknowledged``): then every answered batch comes back and
        is completed here, one by one (``RecordAccumulator.complete`` with ``per_batch``).
        """
        metrics = self.metrics
        counters = None if metrics is None else metrics.counters
        if self._on_acknowledged is None and self._on_complete is not None:
            for batches, response in zip(requests, responses):
                decisions, _, fold_due = self.accumulator.complete(
                    batches, response, now, DUPLICATE_SEQUENCE_NUMBER, per_batch=True, counters=counters
                )
                if fold_due:
                    assert metrics is not None
                    metrics.fold()
                for batch, part in decisions:
                    self._decide(batch, part, now, response)
            return
        triples, records, fold_due, errors = self.accumulator.complete_all(
            requests, responses, now, DUPLICATE_SEQUENCE_NUMBER, counters
        )
        if fold_due:
            assert metrics is not None
            metrics.fold()
        for error in errors:
            _report_bug(error)
        if records and self._on_acknowledged is not None:
            self._on_acknowledged(records)
        for batch, part, response in triples:
            self._decide(batch, part, now, response)

    def _decide(self, batch: ProducerBatch, part: PartitionResponse | None, now: float, response: AnyProduceResponse) -> None:
        """What a batch the broker did not simply write becomes: retried, split, failed, or written after all."""
        if part is None:  # the broker did not answer for this partition
            self._handle_error(
                batch, KafkaConnectionError("the produce response did not include this partition"), now,
                outcome_unknown=True,
            )
        else:
            self._handle_partition(batch, part, now, response)

    def _handle_partition(
        self, batch: ProducerBatch, part: PartitionResponse, now: float, response: AnyProduceResponse
    ) -> None:
        code = part.error_code
        if code == NONE:
            self._complete_ok(batch, part.base_offset, part.log_append_time_ms)
        elif code == DUPLICATE_SEQUENCE_NUMBER:
            self._complete_ok(batch, -1, part.log_append_time_ms)
        else:
            error_class = error_for_code(code)
            if part.leader_id >= 0 and error_class.invalid_metadata:
                self._take_leader_hint(part, response.node_endpoints)
            detail = part.error_message or ""
            for batch_index, message in part.record_errors:
                detail += f" (record {batch_index}: {message})"
            error = error_class(detail.strip())
            per_record = _record_errors(part, error) if part.record_errors else None
            self._handle_error(
                batch, error, now, outcome_unknown=False, log_start_offset=part.log_start_offset, per_record=per_record
            )

    def _take_leader_hint(self, part: PartitionResponse, endpoints: list[NodeEndpoint]) -> None:
        """KIP-951: the answer names the partition's new leader (and where it listens); use it now."""
        endpoint = next((e for e in endpoints if e.node_id == part.leader_id), None)
        node = None if endpoint is None else Node(endpoint.host, endpoint.port, endpoint.rack)
        if self.client.update_leader(part.topic, part.partition, part.leader_id, part.leader_epoch, node):
            self._log.debug("%s-%s: leader %s (epoch %s) from the Produce answer", part.topic, part.partition,
                      part.leader_id, part.leader_epoch)

    def _handle_error(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        now: float,
        *,
        outcome_unknown: bool,
        log_start_offset: int = -1,
        per_record: RecordErrors | None = None,
    ) -> None:
        if batch.is_done:
            if batch.in_flight:  # it expired while its request was out; the request has ended now
                batch.request_ended()
                self.accumulator.unmute(batch.topic, batch.partition)
                if self.transaction_manager is not None:
                    self.transaction_manager.on_failed(batch, _code_of(error), outcome_unknown=True)
            return
        accumulator = self.accumulator
        tm = self.transaction_manager
        code = _code_of(error)
        if code == MESSAGE_TOO_LARGE and batch.record_count > 1 and not batch.has_reached_delivery_timeout(now):
            accumulator.unmute(batch.topic, batch.partition)
            count = accumulator.split_and_reenqueue(batch, now)
            if self.metrics is not None:
                self.metrics.record_split(now)
            self._log.info("split a too-large batch for %s-%s into %d", batch.topic, batch.partition, count)
            return
        if getattr(error, "invalid_metadata", False):
            self.client.request_update()
            self._refresh_metadata()
        if self._can_retry(batch, error, now, outcome_unknown, log_start_offset):
            batch.attempt_failed(error)
            self._log.debug("retrying %s-%s (attempt %d) after %r", batch.topic, batch.partition, batch.attempts, error)
            if tm is not None:
                tm.on_retry(batch)
            accumulator.reenqueue(batch, now)
            accumulator.unmute(batch.topic, batch.partition)
            if self.metrics is not None:
                self.metrics.record_retry(batch.topic, batch.record_count, now)
            return
        if code == MESSAGE_TOO_LARGE:
            error = MessageTooLargeError(
                f"the broker refused {batch.record_count} record(s) for {batch.topic}-{batch.partition} in a "
                f"{batch.estimated_size()}-byte batch as too large: the topic's max.message.bytes (or the "
                f"broker's message.max.bytes) is lower; max.request.size={self.config.max_request_size}"
            )
        if per_record is not None:
            batch.fail_per_record(per_record)  # not retried: each record fails with its own error
        self._fail_batch(batch, error, outcome_unknown=outcome_unknown)

    def _can_retry(
        self, batch: ProducerBatch, error: KafkaError, now: float, outcome_unknown: bool, log_start_offset: int
    ) -> bool:
        if batch.has_reached_delivery_timeout(now) or batch.attempts >= self.config.retries:
            return False
        if self.lifecycle.state >= State.FORCED:
            return False
        tm = self.transaction_manager
        code = _code_of(error)
        if tm is not None and code is not None and not outcome_unknown:
            verdict = tm.can_retry(batch, code, log_start_offset)  # idempotence's own rules
            if verdict is not None:
                return verdict
        return bool(error.retriable)

    def _complete_ok(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.transaction_manager is not None:
            self.transaction_manager.on_acknowledged(batch, base_offset)
        self._finish(batch, base_offset, log_append_time, None)

    def _fail_batch(self, batch: ProducerBatch, error: BaseException, *, outcome_unknown: bool) -> None:
        tm = self.transaction_manager
        if tm is not None:
            tm.on_failed(batch, _code_of(error), outcome_unknown=outcome_unknown)
            if tm.transactional:
                self._transaction_failed(tm, error)
        self._finish(batch, -1, -1, error)

    def _transaction_failed(self, tm: TransactionManager, error: BaseException) -> None:
        """A batch of the transaction failed (``TransactionManager.transaction_failed``); unauthorized refuses every record."""
        if tm.transaction_failed(error):
            self._on_fatal(error)

    def _finish(self, batch: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        if batch.in_flight:
            # Only the batch whose request muted the partition unmutes it: one that expired in
            # the queue behind it must not let a later batch overtake it (max.in.flight=1).
            self.accumulator.unmute(batch.topic, batch.partition)
        self._complete(batch, base_offset, log_append_time, error)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Complete the batch's records (once), release its memory and bytes, tell the producer."""
        if batch.complete(base_offset, log_append_time, error):
            self.accumulator.deallocate(batch)
            if self._on_complete is not None:
                self._on_complete(batch)
            batch.release()

    def abort_undrained(self, error: BaseException) -> None:
        """Fail every batch not yet sent with ``error`` (an aborted transaction's); those in flight go on."""
        for batch in self.accumulator.abort_undrained():
            self._fail_batch(batch, error, outcome_unknown=False)

    def abort_incomplete(self, error: BaseException) -> None:
        """Forced close: fail everything still queued or in flight with ``error``."""
        for batch in self.accumulator.abort_undrained():
            self._fail_batch(batch, error, outcome_unknown=True)
        for batch in self.accumulator.incomplete_batches():
            self._fail_batch(batch, error, outcome_unknown=True)


def _code_of(error: BaseException) -> int | None:
    code: int | None = getattr(error, "errno", None)
    return code


def _report_bug(exc: Exception) -> None:
    """A bug in completing one answer of several: to the loop's exception handler, as the connection reports one."""
    loop = _running_loop()
    if loop is not None:
        loop.call_exception_handler({"message": "exception completing a Produce answer", "exception": exc})


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop, if any: None when the garbage collector closes a coroutine outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

#: Java's message for the records of a batch the broker refused for other records' sake (sic: "more more").
_OTHER_RECORDS_FAILED = "Failed to append record because it was part of a batch which had one more more invalid records"


def _record_errors(part: PartitionResponse, error: BrokerResponseError) -> RecordErrors:
    """Each record's error when the broker named the bad records of a batch (KIP-467), as Java's ``Sender.failBatch``.

    A named record gets its own message (else the partition's, else the code's
    description), as the partition's error class when it is the only one named
    (then that class is unambiguous), else as ``INVALID_RECORD``. The others get
    Java's generic error, with the batch's error as its cause and at its end: they
    were valid, but a batch is appended whole or not at all.
    """
    single = len(part.record_errors) == 1
    error_class: type[BrokerResponseError] = type(error) if single else InvalidRecordBrokerError
    by_index: dict[int, BaseException] = {}
    for batch_index, message in part.record_errors:
        by_index[batch_index] = error_class(message or part.error_message or error_class.description)
    others = KafkaError(f"{_OTHER_RECORDS_FAILED}; the batch failed with {error}")
    others.__cause__ = error
    return RecordErrors(by_index, others)
