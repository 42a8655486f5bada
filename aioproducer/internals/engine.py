"""ProducerEngine: the machine under the ``Producer`` facade.

Theory of operation. ``Producer`` is the public API: it checks arguments, runs interceptors,
serializers and tracing per record, and hands the record to the accumulator this engine
built. Everything with a life of its own is here:

* **Composition.** ``start()`` builds the client, the transaction manager, the coordinators,
  the buffer pool, the accumulator, the sender and the transactions, each through its
  constructor, in the order their arguments need; the four that touch a cluster (client,
  coordinators, accumulator, sender) through the ``ProducerParts`` it was given (real ones by
  default; ``FakeProducer`` gives in-memory ones: ``internals/parts.py``), the rest itself: the sender's wake-up first (the client
  and the accumulator set it, the sender sleeps on it), the sender before the transactions
  (which abort its undrained batches). What a part must report back (a batch completed, an
  error no retry can fix, a flush for a commit) is one of this engine's bound methods, given
  at construction: no part is patched afterwards and no hook defaults to doing nothing.
  A start that fails closes its client and drops its parts; the next ``start()`` builds new ones.
* **The lifecycle** (``aioproducer/lifecycle.py``): this engine alone moves it. The pool, the
  accumulator and the sender read it (``LifecycleView``); the sender and the transactions
  report an error no retry can fix through ``on_fatal`` (:meth:`_fatal`), and the engine
  refuses records with it; the client reads none of it (the engine closes it).
* **The sender task**, ``close()`` (graceful, then forced at its timeout), ``abandon()`` (a
  producer collected without ``close()``, on any thread), ``flush()``, and the completion of
  each batch (the counters and metrics of ``Producer.metrics()``, the failure log,
  the interceptors' ``on_acknowledgement``).
* **One clock**, ``clock`` (milliseconds, monotonic), handed to every part that takes one.

Nothing the event loop holds (the sender task, its callbacks) may hold the ``Producer``: a
dropped one must be collectable so that its ``__del__`` can warn and call :meth:`abandon`.
So this engine holds no reference to the producer; the one thing it tells the producer
(the record intake opened or was withdrawn) goes through a weak callback (``on_intake``).

* **The record intake** (``internals/intake.py``): built here when a start succeeds, withdrawn
  when the lifecycle leaves RUNNING, a part reports a fatal error, the sender task ends or the
  process forks. ``intake`` is the gate of every door into the accumulator, and :meth:`admit`
  the one check (one set of messages) of every call that would queue a record.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import Callable
from typing import Any

from aioproducer.config import ProducerConfig
from aioproducer.errors import IllegalStateError, KafkaTimeoutError, ProducerClosedError, WrongEventLoopError
from aioproducer.clock import Clock, loop_clock, loop_ms
from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import ProducerBatch
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.callbacks import safe_call
from aioproducer.internals.coordinator import CoordinatorSender
from aioproducer.internals.failure_log import DeliveryFailureLog
from aioproducer.internals.intake import Hooks, RecordIntake, RecordTracer
from aioproducer.internals.metrics import ByteCounts, ProducerMetrics
from aioproducer.internals.parts import ClusterParts, EngineClient, EngineSender, ProducerParts
from aioproducer.internals.sender import WakeUp
from aioproducer.internals.telemetry import ClientTelemetry, TelemetrySender
from aioproducer.internals.transaction_manager import TRANSACTION_VERSION_FEATURE, TransactionManager, TransactionState
from aioproducer.internals.transactions import PreparedTransaction, Transactions, complete_prepared
from aioproducer.lifecycle import Lifecycle, LifecycleView, State
from aioproducer.logs import LogLike, client_logger
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.security.connector import ConnectionSecurity

__all__ = ["ProducerEngine", "safe_call"]


class ProducerEngine:
    """Builds the producer's parts through their constructors, runs them, and alone moves the lifecycle."""

    def __init__(
        self,
        config: ProducerConfig,
        security: ConnectionSecurity,
        *,
        on_intake: Callable[[RecordIntake | None], None],
        log: LogLike,
        tracing: Callable[..., RecordTracer] | None = None,
        clock: Clock | None = None,
        parts: ProducerParts[Any] | None = None,
    ) -> None:
        self.config = config
        #: The producer's TLS contexts and SASL credentials (what ``ClusterParts`` connects with).
        self._security = security
        #: How the parts that touch a cluster are made (see internals/parts.py): real ones unless given.
        self._parts: ProducerParts[Any] = ClusterParts(security) if parts is None else parts
        #: The per-record hooks, computed once from the configuration (and OpenTelemetry's, made here:
        #: its spans read this engine's metadata when they end).
        self.hooks: Hooks = Hooks.of(config, None if tracing is None else tracing(metadata=self.cluster_metadata))
        self._interceptors = self.hooks.interceptors
        #: Told of each change of ``intake`` (the producer keeps it for send()'s fast path); must not hold the producer.
        self._on_intake = on_intake
        #: The door into the accumulator while records may enter, else None. Writer: _set_intake, of this engine only.
        self.intake: RecordIntake | None = None
        self._log = log
        #: The one clock (ms, monotonic) of every part that takes one: unless one is given, the loop's
        #: own, which asyncio's waits read too (clock.py). Writers: here, and start(), which binds the
        #: loop's clock once the loop is known (the parts are built after that, in _start).
        self.clock: Clock = loop_ms if clock is None else clock
        self._clock_given = clock is not None
        #: The producer's one lifecycle. Writer: this engine only (start, close, abandon, _fatal).
        self._lifecycle = Lifecycle()
        #: The Java metrics (``metrics()``). Writers: the sender and the pool record into it; _on_batch_complete.
        self.metrics: ProducerMetrics = ProducerMetrics(config.metrics_sample_window_ms, config.metrics_num_samples)
        #: Records not delivered, said at WARNING on ``aioproducer.producer``, rate-limited (see failure_log.py).
        self._failure_log = DeliveryFailureLog(logger=client_logger("aioproducer.producer", config.client_id), clock=self.clock)
        #: Writer: _on_batch_complete. Records delivered, records failed, the error of the last batch that failed.
        self.records_sent: int = 0
        self.records_failed: int = 0
        self.last_error: BaseException | None = None
        #: Writer: start(). The event loop and process start() ran in: the producer works in those only.
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid: int = 0
        #: Writer: start(). The one start in progress or done (concurrent start() calls share it).
        self._start_task: asyncio.Task[None] | None = None
        # The parts, set together by _start() once a start succeeded (None before), never replaced.
        self.client: EngineClient | None = None
        self.accumulator: RecordAccumulator | None = None
        self.sender: EngineSender | None = None
        self.sender_task: asyncio.Task[None] | None = None
        self.transaction_manager: TransactionManager | None = None
        #: Coordinator lookups and requests (their state: the known coordinators).
        self.coordinators: CoordinatorSender | None = None
        #: The transaction calls, with ``transactional.id`` only (their state: the transaction manager).
        self.transactions: Transactions | None = None
        #: KIP-714 client telemetry (``enable.metrics.push``) and its task; set by _start() with the parts.
        self.telemetry: TelemetrySender | None = None
        self.telemetry_task: asyncio.Task[None] | None = None

    @property
    def lifecycle(self) -> LifecycleView:
        """The lifecycle, to read: only this engine moves it."""
        return self._lifecycle

    def cluster_metadata(self) -> ClusterMetadata | None:
        """The client's current metadata; None before a start succeeded."""
        client = self.client
        return None if client is None else client.metadata

    @property
    def running(self) -> bool:
        """Records are accepted and the sender task is alive (``Producer.ready``)."""
        task = self.sender_task
        return self._lifecycle.accepting and task is not None and not task.done()

    @property
    def brokers_reachable(self) -> bool:
        """Started, not closing, and the client reaches a broker (see ``Producer.brokers_reachable``)."""
        client = self.client
        return client is not None and self._lifecycle.state is State.RUNNING and client.brokers_reachable

    # ------------------------------------------------------------------ context
    def check_context(self) -> None:
        """Raise ``WrongEventLoopError`` unless called in the process and event loop that ``start()`` ran in.

        Elsewhere, records would be queued for a sender task that runs on another loop (or
        in the parent process, after ``os.fork()``) and never sent, and asyncio would raise
        "attached to a different loop" from deep inside.
        """
        if self.loop is None:
            return
        # The loop first, the process only if it is not the producer's: asyncio's running loop is
        # never the parent's in a forked child (``get_running_loop`` compares the process id
        # itself), so where the loop is the producer's, so is the process. One ``getpid`` system
        # call a check, not two (a send that waits for memory, and every general route, checks).
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is self.loop:
            return
        pid = os.getpid()
        if pid != self.pid:
            raise WrongEventLoopError(
                f"this producer was started in process {self.pid}; it is being used in process {pid}, "
                "a fork: its connections and sender task stayed in the parent. Create a new producer in the child"
            )
        if loop is None:
            raise RuntimeError("no running event loop")
        raise WrongEventLoopError(
            f"this producer was started on event loop {self.loop!r}; it is being used from event loop "
            f"{loop!r}. Its connections, sender task and futures belong to the first: create one producer per event loop"
        )

    def require_started(self) -> RecordAccumulator:
        """The accumulator, after checking the context; ``ProducerClosedError`` before a start succeeded."""
        self.check_context()
        if self.accumulator is None:
            raise ProducerClosedError("the producer is not started: use 'async with Producer(...)' or 'await start()'")
        return self.accumulator

    def admit(self, call: str, *, records: bool = True) -> RecordIntake:
        """May a record enter now? The intake if so; else the one error that says why, naming ``call``.

        The one admission check of every call that queues records or waits for a topic's
        metadata (``send``, ``send_many``, ``send_arrow``, ``partitions_for``); ``records``:
        the call queues records, which a transactional producer takes only in a transaction.
        """
        lifecycle = self._lifecycle
        if lifecycle.closing:
            raise ProducerClosedError(f"{call} called on a closed producer")
        self.check_context()
        if lifecycle.refusal is not None:  # the producer can send nothing any more
            raise lifecycle.refusal
        transactions = self.transactions
        if records and transactions is not None:
            transactions.tm.require(call, TransactionState.IN_TRANSACTION)
        intake = self.intake
        if intake is not None:
            return intake
        task = self.sender_task
        if task is not None and task.done():
            raise ProducerClosedError(
                "the producer's sender task ended without close() (did its event loop shut down?): "
                "nothing can be sent any more; create a new producer"
            )
        raise ProducerClosedError("the producer is not started: use 'async with Producer(...)' or 'await start()'")

    def require_transactions(self, call: str) -> Transactions:
        """The transaction calls, for ``call`` on a started transactional producer; else the error naming it."""
        self.check_context()
        if self.config.transactional_id is None:
            raise IllegalStateError(f"{call} needs a transactional producer: set transactional.id")
        if self._lifecycle.closing:
            raise ProducerClosedError(f"{call} called on a closed producer")
        transactions = self.transactions
        if transactions is None:
            raise IllegalStateError(f"{call}: the producer is not started ('async with Producer(...)' or 'await start()')")
        return transactions

    def coordinators_for(self, call: str) -> CoordinatorSender:
        """The coordinators, for ``call`` on any started producer (transactional or not); else the error naming it."""
        self.check_context()
        if self._lifecycle.closing:
            raise ProducerClosedError(f"{call} called on a closed producer")
        self.require_started()
        coordinators = self.coordinators
        assert coordinators is not None  # set with the accumulator
        return coordinators

    async def complete_transaction(self, prepared: PreparedTransaction, *, commit: bool) -> None:
        """``Producer.complete_transaction()``: end a prepared transaction through its coordinator; ours learns of it."""
        coordinators = self.coordinators_for("complete_transaction()")
        next_producer = await complete_prepared(coordinators, prepared, commit=commit, max_block_ms=self.config.max_block_ms)
        if self.transactions is not None:
            self.transactions.completed(prepared, next_producer)

    def _set_intake(self, intake: RecordIntake | None) -> None:
        """Open (a start succeeded) or withdraw (None) the door into the accumulator, and tell the producer."""
        old = self.intake
        if intake is old:
            return
        if old is not None:
            old.withdraw()
        self.intake = intake
        self._on_intake(intake)

    def after_fork(self) -> None:
        """In a forked child: no record may enter (the sender task and connections stayed in the parent)."""
        self._set_intake(None)

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        """Build the parts, bootstrap, init transactions, start the sender task. Idempotent.

        Concurrent calls share one start (one client, one sender); a ``close()`` while
        starting cancels it, and the waiting ``start()`` calls raise ``ProducerClosedError``.
        """
        lifecycle = self._lifecycle
        if lifecycle.closing:  # checked first: a closed producer must not look started
            raise ProducerClosedError("the producer is closed and cannot be restarted")
        task = self._start_task
        if lifecycle.state is State.RUNNING or (task is not None and not task.done()):
            self.check_context()
            if lifecycle.state is State.RUNNING:
                return
        if task is None or task.done():  # none yet, or an earlier one failed: try again
            self.loop, self.pid = asyncio.get_running_loop(), os.getpid()
            if not self._clock_given:
                self.clock = loop_clock(self.loop)
            task = self._start_task = self.loop.create_task(self._start(), name="aioproducer-start")
        try:
            await task
        except asyncio.CancelledError:
            if lifecycle.closing and task.cancelled():
                raise ProducerClosedError("the producer was closed while it was starting") from None
            raise

    async def _start(self) -> None:
        cfg, parts, lifecycle = self.config, self._parts, self._lifecycle
        # The sender's wake-up, made first: the client (a connection takes requests again) and the
        # accumulator (a batch opened, filled, or memory ran out) set it; the sender sleeps on it.
        wake = WakeUp()
        client = parts.client(
            cfg,
            clock=self.clock,
            byte_counts=ByteCounts(cfg.metrics_sample_window_ms, cfg.metrics_num_samples),
            on_sendable=wake.set,
            on_metadata=self._metadata_updated,
        )
        tm = TransactionManager(cfg.transactional_id, cfg.transaction_timeout_ms) if cfg.enable_idempotence else None
        coordinators = parts.coordinators(client, cfg, clock=self.clock)
        pool = BufferPool(cfg.buffer_memory, cfg.batch_size, lifecycle, metrics=self.metrics, clock=self.clock)
        accumulator = parts.accumulator(
            _accumulator_config(cfg), pool, tm, wake.set, clock=self.clock, lifecycle=lifecycle, log=self._log
        )
        sender = parts.sender(
            client, accumulator, tm, cfg, coordinators=coordinators, wake=wake, on_complete=self._on_batch_complete,
            # Interceptors read each record's outcome from its batch: then every batch completes in Python.
            on_acknowledged=None if self._interceptors else self._on_acknowledged,
            on_fatal=self._fatal, metrics=self.metrics, clock=self.clock, lifecycle=lifecycle,
        )
        transactions = None
        if tm is not None and tm.transactional:
            transactions = Transactions(
                tm, coordinators, cfg.max_block_ms,
                flush=self.flush, abort_undrained=sender.abort_undrained, on_fatal=self._fatal, clock=self.clock,
                transaction_version=functools.partial(client.finalized_feature_level, TRANSACTION_VERSION_FEATURE),
            )
        try:
            await self._bootstrap(client)
            if transactions is not None:
                await transactions.init()  # init_transactions(): fences an earlier producer with this id
        except BaseException:
            await client.close()  # nothing may outlive a start that did not finish
            raise
        self._run_parts(client, accumulator, sender, tm, coordinators, transactions)
        if cfg.enable_metrics_push:
            self._start_telemetry(client)

    def _start_telemetry(self, client: EngineClient) -> None:
        """``enable.metrics.push``: the KIP-714 cycle as a task of its own, beside the sender's."""
        log = client_logger("aioproducer.telemetry", self.config.client_id)
        resource = {"client_id": self.config.client_id}
        if self.config.transactional_id is not None:
            resource["transactional_id"] = self.config.transactional_id  # Java's ClientTelemetryProvider adds it
        telemetry = ClientTelemetry(self.java_metrics, resource=resource, log=log, now=self.clock())
        self.telemetry = TelemetrySender(telemetry, client.send_any, self.clock, log)
        self.telemetry_task = asyncio.get_running_loop().create_task(self.telemetry.run(), name="aioproducer-telemetry")

    async def _close_telemetry(self, deadline_ms: float | None) -> None:
        """The terminating push (KIP-714), within what is left of the close, ``request.timeout.ms`` at most."""
        telemetry, task = self.telemetry, self.telemetry_task
        if telemetry is None or task is None:
            return
        left = self.config.request_timeout_ms / 1000 if telemetry.close() else 0.0
        if deadline_ms is not None:
            left = min(left, self._seconds_left(deadline_ms))
        try:
            if left <= 0:
                raise TimeoutError  # nothing to push, or no time left: the task ends now
            await asyncio.wait_for(asyncio.shield(task), left)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _run_parts(
        self,
        client: EngineClient,
        accumulator: RecordAccumulator,
        sender: EngineSender,
        tm: TransactionManager | None,
        coordinators: CoordinatorSender,
        transactions: Transactions | None,
    ) -> None:
        """A start succeeded: keep its parts, move to RUNNING, start the sender task."""
        self.client, self.accumulator, self.sender, self.transaction_manager = client, accumulator, sender, tm
        self.coordinators, self.transactions = coordinators, transactions
        self._lifecycle.start()  # before the sender task: its loop runs while RUNNING
        self.sender_task = asyncio.get_running_loop().create_task(sender.run(), name="aioproducer-sender")
        self.sender_task.add_done_callback(self._sender_done)
        self._set_intake(RecordIntake(
            self.hooks, accumulator, client, clock=self.clock, max_block_ms=self.config.max_block_ms,
            lifecycle=self._lifecycle, log=self._log, admit=self.admit,
        ))

    async def _bootstrap(self, client: EngineClient) -> None:
        """The first metadata, within ``max.block.ms`` in all, retrying servers that refuse or fail.

        The client keeps trying every bootstrap server, backing off between rounds from
        ``reconnect.backoff.ms`` to ``reconnect.backoff.max.ms``, until ``max.block.ms``: a
        broker restarting for a few seconds must not fail the start (Java's producer keeps
        trying as long). Each try of a silent server may take ``request.timeout.ms``, so
        the bound is also enforced here, from outside: ``max.block.ms`` is what a caller
        agreed to wait in the producer's own calls. An ``AuthenticationError`` is raised
        at once (see :meth:`KafkaClient.bootstrap`).
        """
        max_block_ms = self.config.max_block_ms
        try:
            async with asyncio.timeout(max_block_ms / 1000) as bound:
                await client.bootstrap(max_block_ms)
        except TimeoutError as exc:
            if not isinstance(exc, KafkaTimeoutError) and not bound.expired():
                raise
            servers = ",".join(f"{host}:{port}" for host, port in self.config.bootstrap_servers)
            failure = client.bootstrap_failure
            last = f"last failures: {failure}" if failure is not None else "no server answered or refused in time"
            raise KafkaTimeoutError(
                f"start(): no bootstrap server answered within max.block.ms={max_block_ms} ms "
                f"(bootstrap.servers={servers}); {last}"
            ) from None

    # ------------------------------------------------------------------ reports from the parts
    def _fatal(self, error: BaseException) -> None:
        """A part met an error no retry can fix (``on_fatal``): every later record is refused with it.

        Not while starting: the start that met it raises it, and the next ``start()`` builds
        new parts that may succeed (a refusal is never withdrawn).
        """
        if self._lifecycle.state is not State.NEW:
            self._lifecycle.refuse(error)
            self._set_intake(None)

    def _sender_done(self, task: asyncio.Task[None]) -> None:
        """The sender task ended: no record may enter any more (before ``close()``: its loop ended, or a bug)."""
        self._set_intake(None)

    def _metadata_updated(self, metadata: ClusterMetadata) -> None:
        """New metadata from the client: the intake's per-topic snapshots are stale (``send()`` looks them up again)."""
        intake = self.intake
        if intake is not None:
            intake.topic_partitions.clear()

    def _on_acknowledged(self, records: int) -> None:
        """A response's batches the broker wrote, completed natively (their metrics counted there): ``records`` sent."""
        self.records_sent += records

    def _on_batch_complete(self, batch: ProducerBatch) -> None:
        builder = batch.builder
        self.metrics.record_completed(
            batch.topic,
            batch.record_count,
            batch.error is None,
            self.clock(),
            batch.created_ms,
            builder.max_timestamp - builder.base_timestamp,
        )
        if batch.error is None:
            self.records_sent += batch.record_count
        else:
            self.records_failed += batch.record_count
            self.last_error = batch.error
            self._failure_log.record(batch.topic, batch.partition, batch.record_count, batch.error)
        if self._interceptors:
            for metadata, error in batch.outcomes():  # each record's own error (KIP-467), as Java's
                for interceptor in self._interceptors:
                    safe_call(self._log, interceptor, "on_acknowledgement", metadata, error)

    # ------------------------------------------------------------------ flush, close, abandon
    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring ``linger.ms``) and wait until it completed."""
        accumulator = self.require_started()
        since = self.clock()
        if not accumulator.incomplete_batches():
            return  # nothing to wait for: done at once, whatever the timeout (0 included)
        accumulator.begin_flush()
        try:
            await asyncio.wait_for(accumulator.await_flush_completion(since), timeout)
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not complete within {timeout} s") from None
        finally:
            accumulator.end_flush()

    async def close(self, timeout: float | None = None) -> None:
        """``Producer.close()``: CLOSING, deliver within ``timeout``, FORCED after it, CLOSED with the client."""
        lifecycle = self._lifecycle
        if lifecycle.closing:
            return
        self.check_context()
        deadline_ms = None if timeout is None else self.clock() + timeout * 1000
        started = lifecycle.state is State.RUNNING
        lifecycle.close()
        self._set_intake(None)
        if not started:
            starting = self._start_task
            if starting is not None and not starting.done():
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)
            lifecycle.finish()
            return
        sender, task, accumulator, client = self.sender, self.sender_task, self.accumulator, self.client
        assert sender is not None and task is not None and accumulator is not None and client is not None
        client.interrupt_waits()  # a send() waiting for metadata now fails with ProducerClosedError
        sender.wakeup()  # CLOSING: it drains what is queued, linger.ms ignored, then stops
        accumulator.pool.close()  # the waiters for memory fail; none queues after (CLOSING)
        try:
            await self._end_transaction_on_close(deadline_ms)
            if timeout is None or timeout > 0:
                left = None if deadline_ms is None else self._seconds_left(deadline_ms)
                await asyncio.wait_for(asyncio.shield(task), left)
        except TimeoutError:
            pass
        finally:
            if not task.done():
                lifecycle.force()  # no retries: what is left fails now
                sender.wakeup()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            sender.abort_incomplete(ProducerClosedError("the producer was closed before this record was delivered"))
            self._failure_log.flush()  # what close() failed, and what was still counted, said now
            for interceptor in self._interceptors:
                safe_call(self._log, interceptor, "close")
            await self._close_telemetry(deadline_ms)
            lifecycle.finish()  # no connection opens any more
            await client.close(deadline_ms)

    def _seconds_left(self, deadline_ms: float) -> float:
        """Seconds from now to ``deadline_ms`` on the engine's clock (0 once past): what an asyncio wait takes."""
        return max(0.0, deadline_ms - self.clock()) / 1000

    async def _end_transaction_on_close(self, deadline_ms: float | None) -> None:
        """``close()`` with a transaction: abort an open one, wait for a pending commit or abort; best effort.

        As Java's graceful close: an open transaction left to ``transaction.timeout.ms`` holds
        back every read_committed consumer of its partitions until then. Bounded by the close's
        ``deadline_ms`` (the engine's clock), or by ``max.block.ms`` without one (a coordinator that
        never answers must not hold ``close()`` forever); a prepared transaction
        (``prepare_transaction()``) is left for ``complete_transaction()``. Nothing is raised:
        the producer is closing either way.
        """
        transactions = self.transactions
        if transactions is None:
            return
        if deadline_ms is None:
            deadline_ms = self.clock() + self.config.max_block_ms
        try:
            async with asyncio.timeout(self._seconds_left(deadline_ms)):
                await transactions.end_for_close()
        except Exception as exc:  # noqa: BLE001 - a timeout included: logged, the close goes on
            self._log.warning("close(): the transaction of transactional.id %r was not ended (%r): read_committed "
                        "consumers wait for transaction.timeout.ms", transactions.transactional_id, exc)
        finally:
            await transactions.cancel_pending()

    def abandon(self) -> None:
        """What ``close(timeout=0)`` does, for a producer collected unclosed: FORCED now, the rest on its loop.

        Called from ``Producer.__del__``, at any time, on any thread: the state moves at once
        (nothing else begins), the loop is touched only through ``call_soon_threadsafe`` and
        only while it is not closed (a closed loop already cancelled the tasks, as
        ``asyncio.run`` does, and must not be called).
        """
        lifecycle = self._lifecycle
        lifecycle.force()
        loop, sender, task, client = self.loop, self.sender, self.sender_task, self.client
        if loop is None or loop.is_closed() or sender is None or task is None or client is None:
            return

        telemetry_task = self.telemetry_task

        def abandon() -> None:
            sender.wakeup()
            task.cancel()
            if telemetry_task is not None:
                telemetry_task.cancel()
            sender.abort_incomplete(ProducerClosedError("the producer was garbage-collected without close(): record not delivered"))
            lifecycle.finish()
            client.abandon()

        try:
            loop.call_soon_threadsafe(abandon)
        except RuntimeError:  # closed between the check and the call (another thread)
            pass

    async def client_instance_id(self, seconds: float) -> uuid.UUID | None:
        """``Producer.client_instance_id()``: the telemetry sender's id, once its first subscription came (or None)."""
        if not self.config.enable_metrics_push:
            raise IllegalStateError("telemetry is not enabled: set enable.metrics.push to true")
        self.check_context()
        sender = self.telemetry
        if sender is None:
            raise IllegalStateError("client_instance_id(): no telemetry runs: the producer is not started")
        return await sender.client_instance_id(seconds)

    @property
    def transaction_abortable(self) -> bool:
        """Whether a transaction is open or failed abortably: what ``Producer.transaction()`` aborts on an exception."""
        transactions = self.transactions
        return transactions is not None and transactions.abortable

    def arrow_refusal(self) -> str | None:
        """Why ``send_arrow()`` would refuse this producer's hooks, or None (``Hooks.arrow_refusal``)."""
        return self.hooks.arrow_refusal()

    def pending_records(self) -> int:
        """Records queued or in flight, not completed yet."""
        accumulator = self.accumulator
        if accumulator is None:
            return 0
        return sum(batch.record_count for batch in list(accumulator.incomplete_batches()))

    # ------------------------------------------------------------------ metrics
    def snapshot(self) -> dict[str, Any]:
        """``Producer.metrics()``: this producer's own counters, then the Java producer's metrics by their names."""
        cfg = self.config
        accumulator = self.accumulator
        pool = accumulator.pool if accumulator is not None else None
        tm = self.transaction_manager
        buffer_available = pool.available_memory if pool is not None else cfg.buffer_memory
        waiting = pool.queued if pool is not None else 0
        return {
            "records_sent": self.records_sent,
            "records_failed": self.records_failed,
            "last_error": self.last_error,
            "buffer_total_bytes": cfg.buffer_memory,
            "buffer_available_bytes": buffer_available,
            "waiting_for_buffer": waiting,
            "incomplete_batches": len(accumulator.incomplete_batches()) if accumulator is not None else 0,
            "producer_id": tm.producer_id if tm else -1,
            "producer_epoch": tm.producer_epoch if tm else -1,
            **self.java_metrics(),
        }

    def java_metrics(self) -> dict[str, float | int]:
        """The Java producer's metrics by their names (``METRIC_DEFS``): ``metrics()``'s and telemetry's."""
        cfg = self.config
        accumulator = self.accumulator
        pool = accumulator.pool if accumulator is not None else None
        client, sender = self.client, self.sender
        buffer_available = pool.available_memory if pool is not None else cfg.buffer_memory
        waiting = pool.queued if pool is not None else 0
        return self.metrics.snapshot(
            self.clock(),
            buffer_total=cfg.buffer_memory,
            buffer_available=buffer_available,
            waiting=waiting,
            requests_in_flight=sender.requests_in_flight if sender is not None else 0,
            metadata_age_ms=client.metadata_age() if client is not None else float("inf"),
            connection_count=client.connection_count if client is not None else 0,
            byte_counts=client.byte_counts if client is not None else None,
        )


def _accumulator_config(cfg: ProducerConfig) -> AccumulatorConfig:
    return AccumulatorConfig(
        batch_size=cfg.batch_size,
        linger_ms=cfg.linger_ms,
        compression_type=cfg.compression_type,
        compression_level=_compression_level(cfg),
        retry_backoff_ms=cfg.retry_backoff_ms,
        retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        delivery_timeout_ms=cfg.delivery_timeout_ms,
        guarantee_message_order=cfg.max_in_flight_requests_per_connection == 1,
        adaptive_partitioning=cfg.partitioner_adaptive_partitioning_enable,
        availability_timeout_ms=cfg.partitioner_availability_timeout_ms,
        max_request_size=cfg.max_request_size,
    )


def _compression_level(cfg: ProducerConfig) -> int | None:
    from aioproducer.protocol.compression import GZIP, LZ4, ZSTD

    level: int | None = {
        GZIP: getattr(cfg, "compression_gzip_level", None),
        LZ4: getattr(cfg, "compression_lz4_level", None),
        ZSTD: getattr(cfg, "compression_zstd_level", None),
    }.get(cfg.compression_type)
    return level
