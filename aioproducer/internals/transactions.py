"""The producer's transaction calls: init, commit, abort, offsets (KIP-98, KIP-447), as Java's producer makes them.

Theory of operation. The state lives in :class:`TransactionManager` (one owner); this module
makes the coordinator round trips that move it, each bounded by ``max.block.ms`` as Java's
``initTransactions``/``commitTransaction``/``abortTransaction`` are:

* ``init`` (in ``start()``): InitProducerId with the ``transactional.id``; the coordinator
  bumps the epoch, which fences an earlier producer with the same id and aborts the
  transaction it left open.
* ``commit``: every record of the transaction is sent and acknowledged first (a flush); if
  one failed, the transaction is abortable and ``commit`` raises. Then EndTxn(commit), unless
  the coordinator never heard of the transaction (nothing was sent).
* ``abort``: queued batches the broker never saw fail with :class:`TransactionAbortedError`,
  batches in flight are awaited, then EndTxn(abort); a transaction whose sequences broke
  gets a new epoch (InitProducerId with the current id and epoch, KIP-360).
* ``commit``, ``abort`` and ``prepare`` run in a task that their caller waits for up to
  ``max.block.ms``. A timeout leaves the task running (the EndTxn may have landed): calling
  the same method again waits for the same outcome, any other transaction call raises
  ``IllegalStateError`` until then, as Java's ``TransactionManager`` keeps its pending result.
* A refused epoch (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, from any request) means fenced or
  timed out; InitProducerId with the current id and epoch tells which (KIP-588): PRODUCER_FENCED
  (fatal, ``ProducerFencedError``), or the epoch the coordinator gave when it aborted the
  transaction (abortable; the abort then sends nothing more). Only transactions v2 give the
  new epoch: under v1 the coordinator answers PRODUCER_FENCED to a timed-out producer too
  (``_fenced_message``).
* ``send_offsets``: AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to
  the group's coordinator, with the consumer's generation and member id when given (KIP-447:
  a zombie consumer's offsets are refused).
* ``prepare`` (two-phase commit): ``commit``'s first half. Every record is acknowledged and
  the transaction left open, its (id, producer id, epoch) returned as a
  :class:`PreparedTransaction`; :func:`complete_prepared` later sends the EndTxn, from any
  producer, any process. The coordinator checks only the id and epoch, so the party that
  knows the whole job succeeded (Spark's driver) decides. Until then the transaction can be
  fenced: a producer that starts with the same id aborts it, and so does the coordinator
  after ``transaction.timeout.ms``; ending it then raises ``ProducerFencedError`` or
  ``InvalidProducerEpochError``. (Kafka's own KIP-939 two-phase commit needs a broker flag
  and keeps the prepared transaction across a restart; this needs neither.)
* :func:`committed_offsets` (any started producer, transactional or not): OffsetFetch to the
  group's coordinator, what a restarted writer reads after ``init_transactions()`` to learn
  what its last transaction committed. With ``require_stable`` (v7, KIP-447) the coordinator
  answers UNSTABLE_OFFSET_COMMIT while a transaction with offsets for the group is pending,
  and :class:`Coordinators` retries that until ``max.block.ms``: the answer is the committed
  or aborted outcome, never a guess.

Every coordinator round trip has one shape, a ``CoordinatorRequest`` (``coordinator.py``): the
request, made per attempt, and the handling of its answer, sent by ``Coordinators.send`` with
its retries; a transaction call's answers are judged by ``Transactions._judged`` and a refused
epoch told apart by ``Transactions._send``. Deadlines are points on the producer's clock (ms).

The requests the sender's pass makes for the transaction manager are here too:
:class:`TransactionRequests` (Java's ``TransactionManager.nextRequest``) gives it the next one,
InitProducerId of an idempotent producer or AddPartitionsToTxn, and the sender runs it and
fails the queued records if it fails (:class:`RequestFailed`).

Transactions v2 (KIP-890 part 2, see ``transaction_manager.py``): the cluster's finalized
``transaction.version``, read at ``init`` and each ``begin`` (``transaction_version``), picks the
versions of EndTxn and TxnOffsetCommit (``request_version_range``); under v2 ``send_offsets``
sends no AddOffsetsToTxn, every EndTxn's answer gives the producer id and epoch to use next,
and a prepared transaction records that it is v2, so that whoever completes it sends EndTxn v5.
KIP-1050's classes map onto what is here: retriable (and refresh-retriable: a moved
coordinator) are retried by ``Coordinators``; abortable (TRANSACTION_ABORTABLE, a failed record)
make the transaction abortable; application-recoverable (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)
are told apart first (KIP-588, below) and are fatal only if fenced; the rest (authorization,
INVALID_TXN_STATE) fatal, except INVALID_TXN_STATE answering a v2 commit, which Kafka 4.3.1 gives
for the epoch its own timeout abort bumped and is told apart too (``_end_txn_answered``).

Errors as Java classifies them: fenced and unauthorized are fatal (the producer can only be
closed; every later call says why, fenced as ``ProducerFencedError``), everything else that
fails a transaction makes it abortable (``abort_transaction()`` and the producer works again).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol, TypeVar

from aioproducer.clock import Clock, monotonic_ms
from aioproducer.errors import (
    AuthenticationError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    ProtocolError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
    UnstableOffsetCommitError,
    error_for_code,
)
from aioproducer.internals.coordinator import (
    GROUP,
    TRANSACTION,
    CoordinatorRequest,
    CoordinatorSender,
    first_error_code,
    raise_for,
)
from aioproducer.internals.transaction_manager import (
    TransactionManager,
    TransactionState,
    request_version_range,
)
from aioproducer.logs import LogLike
from aioproducer.protocol import messages

__all__ = [
    "GroupMetadata",
    "PreparedTransaction",
    "RequestFailed",
    "TransactionRequests",
    "Transactions",
    "committed_offsets",
    "complete_prepared",
    "offset_fetch_arguments",
]

#: Where the sender's requests log when no producer hands its own logger (tests, used alone).
_SENDER_LOG = logging.getLogger("aioproducer.sender")
_FATAL = (ProducerFencedError, TransactionalIdAuthorizationFailedError, InvalidTxnStateError)
#: A refused epoch: fenced, or the transaction timed out (told apart by ``_resolve_rejected_epoch``).
_EPOCH_REJECTED = frozenset({ProducerFencedError.errno, InvalidProducerEpochError.errno})
_T = TypeVar("_T")
_S = TransactionState
#: OffsetFetch v7 adds RequireStable (Kafka 2.5, KIP-447).
_REQUIRE_STABLE_VERSION = 7
#: OffsetFetch's "no committed offset".
_NO_OFFSET = -1


@dataclass(frozen=True)
class PreparedTransaction:
    """An open transaction whose records are all acknowledged, for another party to end.

    Made by ``Producer.prepare_transaction()``, ended by ``Producer.complete_transaction()``
    on any started producer. Picklable, so it can travel, as Spark's task results do.
    ``started``: False if nothing was sent nor any offset added (the coordinator knows no
    transaction, and completing it does nothing).
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    started: bool = True
    #: Whether it runs under transactions v2 (KIP-890 part 2): it must be ended with EndTxn v5,
    #: as it began (a v1 EndTxn for a v2 transaction is refused). The id and epoch above are the
    #: ones it was prepared under; the EndTxn v5 that ends it bumps the epoch, and the producer
    #: that prepared it takes the new one only if it completes it itself (``completed``).
    transaction_v2: bool = False


@dataclass(frozen=True)
class GroupMetadata:
    """A consumer's group membership, for ``send_offsets_to_transaction`` (Java's ``ConsumerGroupMetadata``)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @classmethod
    def of(cls, value: Any) -> GroupMetadata:
        """From a group id string, this class, or any object with ``group_id`` (and the other attributes)."""
        if isinstance(value, GroupMetadata):
            return value
        if isinstance(value, (bytes, bytearray)):
            return cls._from_librdkafka(bytes(value))
        if isinstance(value, str):
            if not value:
                raise ValueError("send_offsets_to_transaction(group_metadata=...): the group id is empty")
            return cls(value)
        group_id = getattr(value, "group_id", None)
        if not isinstance(group_id, str) or not group_id:
            raise TypeError(
                "send_offsets_to_transaction(group_metadata=...) takes a group id string or an object with "
                f"group_id, generation_id, member_id, group_instance_id; got {type(value).__name__}"
            )
        return cls(
            group_id,
            int(getattr(value, "generation_id", -1)),
            str(getattr(value, "member_id", "") or ""),
            getattr(value, "group_instance_id", None),
        )


    @classmethod
    def _from_librdkafka(cls, data: bytes) -> GroupMetadata:
        """What confluent-kafka's ``Consumer.consumer_group_metadata()`` returns: librdkafka's serialized form.

        Read as librdkafka 2.x writes it: ``CGMDv2:``, the generation id (int32 in the host's byte
        order: librdkafka copies it from memory, and it ran on this host), then
        NUL-terminated group id and member id, a byte that is 1 when there is no group instance
        id, and else the instance id, NUL-terminated. A real broker checks the generation and
        member id (``test_offsets_from_a_confluent_kafka_consumers_group_metadata``).
        """
        magic = b"CGMDv2:"
        if not data.startswith(magic) or len(data) < len(magic) + 4:
            raise ValueError(
                "send_offsets_to_transaction(group_metadata=...): bytes that are not librdkafka's group metadata "
                "(confluent_kafka.Consumer.consumer_group_metadata())"
            )
        generation = int.from_bytes(data[len(magic) : len(magic) + 4], sys.byteorder, signed=True)
        rest = data[len(magic) + 4 :]
        try:
            group_id, rest = rest.split(b"\0", 1)
            member_id, rest = rest.split(b"\0", 1)
            instance = None if rest[:1] == b"\x01" else rest[1:].split(b"\0", 1)[0].decode()
        except (ValueError, UnicodeDecodeError):
            raise ValueError("send_offsets_to_transaction(group_metadata=...): librdkafka group metadata cut short") from None
        return cls(group_id.decode(), generation, member_id.decode(), instance)


class _EpochRefused(Exception):
    """A round trip's answer refused the producer's epoch: ``Transactions._send`` asks the coordinator why."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class _Pending:
    """A commit, abort or prepare under way: its round trips run on while its caller's wait (max.block.ms) ends."""

    what: str
    task: asyncio.Task[Any]


class Transactions:
    """The coordinator round trips of the transactional producer (see the module docstring)."""

    def __init__(
        self,
        tm: TransactionManager,
        coordinators: CoordinatorSender,
        max_block_ms: int,
        *,
        flush: Callable[[], Awaitable[None]],
        abort_undrained: Callable[[BaseException], None],
        on_fatal: Callable[[BaseException], None],
        clock: Clock = monotonic_ms,
        transaction_version: Callable[[], int] | None = None,
    ) -> None:
        assert tm.transactional_id is not None
        self.tm = tm
        self.transactional_id: str = tm.transactional_id
        self._coordinators = coordinators
        self._max_block_ms = max_block_ms
        #: The producer's clock (ms): it decides every deadline (``max.block.ms``) of these calls.
        self._clock = clock
        #: From the engine: wait for every queued record (the engine's flush); fail the queued
        #: ones (the sender's abort_undrained); report an error no retry can fix (the engine
        #: refuses every later record). ``init`` needs none of them.
        self.flush = flush
        self.abort_undrained = abort_undrained
        self.on_fatal = on_fatal
        #: The commit, abort or prepare whose outcome its caller has not received yet (it timed out).
        self._pending: _Pending | None = None
        #: The cluster's finalized ``transaction.version`` as the client last heard it (ApiVersions,
        #: KIP-584); read at init and at each begin. None: 0 (transactions v1).
        self._transaction_version = transaction_version or (lambda: 0)

    def _deadline(self) -> float:
        """``max.block.ms`` from now, on the producer's clock."""
        return self._clock() + self._max_block_ms

    def _txn_request(
        self, api_key: int, what: str, body: Callable[[], dict[str, Any]], key_type: int = TRANSACTION, key: str | None = None
    ) -> CoordinatorRequest[None]:
        """A round trip of a transaction call: its answer judged by ``_judged`` (see ``_send``)."""
        low, high = _versions(api_key, self.tm.transaction_v2)
        return CoordinatorRequest(
            key_type, self.transactional_id if key is None else key, api_key, what, body,
            functools.partial(self._judged, what), low, high,
        )

    def _judged(self, what: str, answer: dict[str, Any]) -> None:
        """Raise for an error answer; a refused epoch as ``_EpochRefused``, for ``_send`` to tell apart."""
        code = first_error_code(answer)
        if code in _EPOCH_REJECTED:
            raise _EpochRefused(code)
        self._check(code, what)

    async def _send(self, request: CoordinatorRequest[_T], deadline: float) -> _T:
        """Send a round trip; a refused epoch is told apart first (fenced, or the transaction timed out)."""
        try:
            return await self._coordinators.send(request, deadline)
        except _EpochRefused:
            pass
        await self._resolve_rejected_epoch(request.what, deadline)
        raise self._aborted_by_coordinator(request.what)

    def _check(self, code: int, what: str) -> None:
        if not code:
            return
        cls = error_for_code(code)
        if cls is InvalidProducerEpochError:
            cls = ProducerFencedError  # an older coordinator's word for fenced, as Java reads it
        error = cls(f"{what} for transactional.id {self.transactional_id!r}: {cls.message}")
        if issubclass(cls, _FATAL):
            self.tm.fatal_error(error)
            self.on_fatal(error)
        else:
            self.tm.abortable_error(error)
        raise error

    # ------------------------------------------------------------ a refused epoch (KIP-588)
    async def _resolve_rejected_epoch(self, what: str, deadline: float) -> None:
        """Fenced, or the transaction timed out? InitProducerId with the current id and epoch answers.

        The coordinator refuses an epoch for two reasons, with the same error: a newer producer
        with this ``transactional.id`` started (fatal: the zombie must stop), or the coordinator
        aborted the transaction after ``transaction.timeout.ms``, bumping the epoch (KIP-588).
        It then accepts InitProducerId with the old epoch and answers with its new one;
        a fenced producer gets PRODUCER_FENCED (raised as fatal by ``_check``). Afterwards the
        transaction is over (aborted) and the producer holds its new epoch.
        """
        tm = self.tm
        await self._init_producer_id(what, deadline)
        tm.aborted_by_coordinator()
        self.abort_undrained(TransactionAbortedError(
            f"the transaction coordinator aborted the transaction (transaction.timeout.ms="
            f"{tm.transaction_timeout_ms} ms) before this record was sent"
        ))

    def _aborted_by_coordinator(self, what: str) -> InvalidProducerEpochError:
        """The transaction timed out (see ``_resolve_rejected_epoch``): abortable, not fatal."""
        error = InvalidProducerEpochError(
            f"{what} for transactional.id {self.transactional_id!r}: the transaction coordinator aborted the "
            f"transaction because it outlived transaction.timeout.ms={self.tm.transaction_timeout_ms} ms; "
            "abort_transaction() ends it and the producer goes on"
        )
        self.tm.abortable_error(error)
        return error

    # ----------------------------------------------------------- calls that outlive a timeout
    async def _run(self, what: str, begin: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """Run ``what`` (commit, abort, prepare) for at most ``max.block.ms``; a timeout leaves it running.

        As Java's ``commitTransaction``: a timeout does not mean the request failed (the
        transaction may have committed), so the work goes on and calling ``what`` again waits
        for the same outcome; any other transaction call raises ``IllegalStateError`` until
        then. ``begin`` checks and moves the state now and returns the round trips to run.
        """
        pending = self._pending
        if pending is None:
            task = asyncio.get_running_loop().create_task(begin(), name=f"aioproducer-{what}")
            task.add_done_callback(_retrieve)
            pending = self._pending = _Pending(what, task)
        elif pending.what != what:
            self.require_no_pending(what)
        deadline = self._deadline()  # the clock decides the bound; the wait below uses it
        try:
            async with asyncio.timeout(max(0.0, deadline - self._clock()) / 1000) as bound:
                result: _T = await asyncio.shield(pending.task)
        except TimeoutError:
            if not bound.expired():
                self._pending = None
                raise  # the work itself ended with a timeout error
            raise KafkaTimeoutError(
                f"{what} did not complete within max.block.ms={self._max_block_ms} ms; its outcome is not known "
                f"yet (the coordinator may have received it): call {what} again to wait for it. Other "
                "transaction calls raise IllegalStateError until then"
            ) from None
        except asyncio.CancelledError:
            if pending.task.cancelled() and _not_cancelling():
                # close() stopped the work (cancel_pending), not this caller's own task being cancelled.
                raise ProducerClosedError(
                    f"the producer was closed while {what} was running; its outcome is not known (the "
                    "coordinator may have received it)"
                ) from None
            if pending.task.done():
                self._pending = None
            raise
        except BaseException:
            if pending.task.done():
                self._pending = None  # the work failed: that is its outcome
            raise
        self._pending = None
        return result

    def require_no_pending(self, what: str) -> None:
        """Raise ``IllegalStateError`` if a commit or abort timed out and its outcome was not received."""
        pending = self._pending
        if pending is not None and pending.what != what:
            raise IllegalStateError(
                f"{what}: the previous {pending.what} timed out and its outcome is not known yet; call "
                f"{pending.what} again until it completes (or close the producer)"
            )

    async def end_for_close(self) -> None:
        """``close()``: wait for a pending commit or abort; abort an open transaction; leave a prepared one.

        As Java's graceful close. A pending commit that fails leaves the transaction abortable:
        it is aborted too. Errors are the caller's to log: the producer is closing anyway.
        """
        pending = self._pending
        if pending is not None:
            await asyncio.wait([pending.task])  # its outcome was given up on by its caller
            self._pending = None
        if self.abortable:
            await self._begin_abort()

    async def cancel_pending(self) -> None:
        """``close()`` after its timeout: stop what is left of a pending commit or abort."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.task.done():
            pending.task.cancel()
            await asyncio.gather(pending.task, return_exceptions=True)

    # -------------------------------------------------------------------------------- init
    async def init(self) -> None:
        """InitProducerId for the ``transactional.id`` (fences an earlier incarnation)."""
        tm = self.tm
        tm.require("init_transactions()", _S.UNINITIALIZED)
        tm.transition(_S.INITIALIZING)
        await self._init_producer_id("init_transactions()", self._deadline())
        tm.use_transaction_version(self._transaction_version())
        tm.transition(_S.READY)

    def _fenced_message(self, what: str) -> str:
        """Why InitProducerId refused the epoch, as far as the cluster lets the producer know.

        Under transactions v1 the coordinator's timeout abort leaves no record of the epoch it
        replaced, so it answers the KIP-588 question (InitProducerId with the old epoch) with
        PRODUCER_FENCED too: Kafka 4.3.1 at ``transaction.version=1`` does, and fences Java's
        producer the same way. Only under v2, where every EndTxn records the last epoch, is
        a timed-out producer given its new epoch. So under v1 the message names both causes.
        """
        tm = self.tm
        fenced = (
            f"{what} for transactional.id {self.transactional_id!r}: a newer producer with the same "
            f"transactional.id fenced this one (producer id {tm.producer_id}, epoch {tm.producer_epoch})"
        )
        if tm.transaction_v2 or tm.state is _S.INITIALIZING:
            return fenced
        return (
            f"{fenced}, or the coordinator aborted the transaction after transaction.timeout.ms="
            f"{tm.transaction_timeout_ms} ms: below transaction.version 2 Kafka fences the producer for that too "
            "(from 2 on it goes on); close it and start a new one with this transactional.id"
        )

    async def _init_producer_id(self, what: str, deadline: float) -> None:
        """InitProducerId with the current id and epoch (-1 at first); a refused epoch is fatal here."""
        tm = self.tm

        def body() -> dict[str, Any]:
            return {
                "transactional_id": self.transactional_id,
                "transaction_timeout_ms": tm.transaction_timeout_ms,
                "producer_id": tm.producer_id,
                "producer_epoch": tm.producer_epoch,
            }

        def handle(answer: dict[str, Any]) -> None:
            code = first_error_code(answer)
            if code in _EPOCH_REJECTED:
                error = ProducerFencedError(self._fenced_message(what))
                tm.fatal_error(error)
                self.on_fatal(error)
                raise error
            self._check(code, what)
            tm.set_producer_id_and_epoch(int(answer["producer_id"]), int(answer["producer_epoch"]))

        request = CoordinatorRequest(TRANSACTION, self.transactional_id, messages.INIT_PRODUCER_ID, what, body, handle)
        await self._coordinators.send(request, deadline)

    # ------------------------------------------------------------------------ begin, commit
    @property
    def abortable(self) -> bool:
        """A transaction is open or failed and awaits its abort: what ``Producer.transaction()`` aborts on an exception."""
        return self.tm.state in (_S.IN_TRANSACTION, _S.ABORTABLE_ERROR)

    def begin(self) -> None:
        self.require_no_pending("begin_transaction()")
        self.tm.require("begin_transaction()", _S.READY)
        self.tm.use_transaction_version(self._transaction_version())  # fixed for this transaction
        self.tm.transition(_S.IN_TRANSACTION)

    async def commit(self) -> None:
        await self._run("commit_transaction()", self._begin_commit)

    def _begin_commit(self) -> Coroutine[Any, Any, None]:
        self._begin_delivery("commit_transaction()")
        return self._commit()

    def _begin_delivery(self, what: str) -> None:
        """Refuse new records (or, after a refused epoch, go and find out why: see ``_deliver_all``)."""
        tm = self.tm
        if tm.state is _S.ABORTABLE_ERROR and tm.epoch_rejected:
            return
        tm.require(what, _S.IN_TRANSACTION)
        tm.transition(_S.COMMITTING_TRANSACTION)

    async def _deliver_all(self, what: str) -> None:
        """The first half of a commit: wait for every record sent, raise if one failed.

        A record refused for its epoch: fenced (``ProducerFencedError``, fatal) or timed out
        (abortable), as the coordinator says (``_resolve_rejected_epoch``).
        """
        tm = self.tm
        if tm.state is not _S.ABORTABLE_ERROR:
            await self.flush()
        if tm.state is _S.ABORTABLE_ERROR:  # a record of the transaction failed (maybe while flushing)
            if tm.epoch_rejected:
                await self._resolve_rejected_epoch(what, math.inf)
                raise self._aborted_by_coordinator(what)
            tm.require(what, _S.COMMITTING_TRANSACTION)

    async def _commit(self) -> None:
        tm = self.tm
        what = "commit_transaction()"
        await self._deliver_all(what)
        if tm.transaction_started:
            await self._end_txn(committed=True)
        tm.end_transaction()

    async def prepare(self) -> PreparedTransaction:
        """Flush and check as ``commit`` does, then leave the transaction open (PREPARED_TRANSACTION)."""
        return await self._run("prepare_transaction()", self._begin_prepare)

    def _begin_prepare(self) -> Coroutine[Any, Any, PreparedTransaction]:
        self._begin_delivery("prepare_transaction()")
        return self._prepare()

    async def _prepare(self) -> PreparedTransaction:
        tm = self.tm
        await self._deliver_all("prepare_transaction()")
        tm.transition(_S.PREPARED_TRANSACTION)
        return PreparedTransaction(
            self.transactional_id, tm.producer_id, tm.producer_epoch, tm.transaction_started, tm.transaction_v2
        )

    def completed(self, prepared: PreparedTransaction, next_producer: tuple[int, int] | None = None) -> None:
        """This producer's own prepared transaction was ended by ``complete_prepared``: ready for the next.

        ``next_producer``: the producer id and epoch EndTxn v5 gave (transactions v2), taken so
        that the next transaction carries them; None under v1 (the epoch stays).
        """
        tm = self.tm
        if (
            tm.state is _S.PREPARED_TRANSACTION
            and prepared.transactional_id == self.transactional_id
            and (prepared.producer_id, prepared.producer_epoch) == (tm.producer_id, tm.producer_epoch)
        ):
            if next_producer is not None:
                tm.transaction_completed(*next_producer)
            tm.end_transaction()

    async def _end_txn(self, committed: bool) -> None:
        what = "commit_transaction()" if committed else "abort_transaction()"
        body = functools.partial(self._end_txn_body, committed)
        request = self._txn_request(messages.END_TXN, what, body)
        # Bounded by the caller's wait (``_run``), and retried after it as Java does.
        await self._send(replace(request, handle=functools.partial(self._end_txn_answered, what)), math.inf)

    def _end_txn_answered(self, what: str, answer: dict[str, Any]) -> None:
        """EndTxn's answer judged (``_judged``); under v2 the new producer id and epoch are taken.

        Under v2 a commit with the epoch before the coordinator's own abort (the transaction
        outlived ``transaction.timeout.ms``, and the abort bumped the epoch) reads to the
        coordinator as a retry of an EndTxn that aborted: INVALID_TXN_STATE (measured on Kafka
        4.3.1). So it is told apart as a refused epoch is (``_send``): InitProducerId with the
        current epoch answers fenced, or gives the new epoch and the transaction is known aborted.
        """
        if self.tm.transaction_v2 and first_error_code(answer) == InvalidTxnStateError.errno:
            raise _EpochRefused(InvalidTxnStateError.errno)
        self._judged(what, answer)
        if self.tm.transaction_v2:
            self.tm.transaction_completed(int(answer["producer_id"]), int(answer["producer_epoch"]))

    def _end_txn_body(self, committed: bool) -> dict[str, Any]:
        tm = self.tm
        return {
            "transactional_id": self.transactional_id,
            "producer_id": tm.producer_id,
            "producer_epoch": tm.producer_epoch,
            "committed": committed,
        }

    # -------------------------------------------------------------------------------- abort
    async def abort(self) -> None:
        await self._run("abort_transaction()", self._begin_abort)

    def _begin_abort(self) -> Coroutine[Any, Any, None]:
        tm = self.tm
        tm.require("abort_transaction()", _S.IN_TRANSACTION, _S.ABORTABLE_ERROR)
        tm.transition(_S.ABORTING_TRANSACTION)
        self.abort_undrained(TransactionAbortedError("the transaction was aborted before this record was sent"))
        return self._abort()

    async def _abort(self) -> None:
        tm = self.tm
        what = "abort_transaction()"
        await self.flush()  # what is in flight completes, one way or the other
        if tm.transaction_started and not (tm.epoch_rejected or tm.coordinator_aborted):

            def handle(answer: dict[str, Any]) -> None:
                code = first_error_code(answer)
                if code in _EPOCH_REJECTED:
                    tm.epoch_refused()  # fenced, or the coordinator aborted it already: InitProducerId tells
                    return
                self._check(code, what)
                if tm.transaction_v2:  # the abort bumped the epoch: also the KIP-360 bump a failed batch needed
                    tm.transaction_completed(int(answer["producer_id"]), int(answer["producer_epoch"]))

            body = functools.partial(self._end_txn_body, False)
            request = self._txn_request(messages.END_TXN, what, body)
            await self._coordinators.send(replace(request, handle=handle), math.inf)
        if tm.epoch_rejected or tm.bump_on_abort:  # KIP-588 / KIP-360: a new epoch, or PRODUCER_FENCED
            tm.transition(_S.INITIALIZING)
            await self._init_producer_id(what, math.inf)
            tm.epoch_bumped_at_abort()
        tm.end_transaction()

    # ------------------------------------------------------------------------------ offsets
    async def send_offsets(self, offsets: Mapping[Any, int], group_metadata: Any) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator (``offsets``: partition -> next offset)."""
        tm = self.tm
        what = "send_offsets_to_transaction()"
        self.require_no_pending(what)
        tm.require(what, _S.IN_TRANSACTION)
        group = GroupMetadata.of(group_metadata)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in offsets_to_commit(offsets).items():
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": ""}
            )
        deadline = self._deadline()
        if not tm.transaction_v2:  # under v2, TxnOffsetCommit v5 adds the group itself (KIP-890 part 2)
            await self._send(
                self._txn_request(
                    messages.ADD_OFFSETS_TO_TXN, what,
                    lambda: {"transactional_id": self.transactional_id, "producer_id": tm.producer_id,
                             "producer_epoch": tm.producer_epoch, "group_id": group.group_id},
                ),
                deadline,
            )
        tm.offsets_added_to_transaction()
        await self._send(
            self._txn_request(
                messages.TXN_OFFSET_COMMIT, what,
                lambda: {
                    "transactional_id": self.transactional_id, "group_id": group.group_id,
                    "producer_id": tm.producer_id, "producer_epoch": tm.producer_epoch,
                    "generation_id": group.generation_id, "member_id": group.member_id,
                    "group_instance_id": group.group_instance_id,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
                GROUP, group.group_id,
            ),
            deadline,
        )


class RequestFailed(NamedTuple):
    """A request of the sender's (``TransactionRequests``) failed for good: the queued records fail with ``error``.

    The sender fails them: the batches are its own. ``fatal``: no record can be sent any more
    (InitProducerId refused for good); else the transaction failed and must be aborted
    (AddPartitionsToTxn).
    """

    error: BaseException
    fatal: bool


class NodeClient(Protocol):
    """What the idempotent producer's InitProducerId needs of ``network.client.KafkaClient``: any broker."""

    @property
    def metadata(self) -> Any: ...

    def is_ready(self, node_id: int) -> bool: ...

    async def connection(self, node_id: int) -> Any: ...


#: A request the sender runs in a task of its own: None, or how it failed.
SenderRequest = Coroutine[Any, Any, "RequestFailed | None"]


class TransactionRequests:
    """The requests the sender makes for the transaction manager, one at a time (Java's ``TransactionManager.nextRequest``).

    Each pass the sender asks :meth:`next_request` for the request due now and runs it in a
    task of its own (Java's ``Sender.maybeSendAndPollTransactionalRequest``), so that its
    passes go on meanwhile: records still expire at ``delivery.timeout.ms`` and a close is not
    held up by a coordinator that keeps answering with retriable errors. The end of the task
    wakes the sender. The requests:

    * InitProducerId for an idempotent producer, at start and after the epoch ran out (a
      transactional producer's comes from ``init_transactions()``, ``Transactions.init``). Not
      while Produce requests are in flight (their answers still count under the old producer
      id). To any broker, a ready one first and the next one after each failure, after the
      producer's backoff: a broker that keeps failing is not asked forever.
    * AddPartitionsToTxn for the partitions that got their first batch in the transaction
      (``TransactionManager.take_pending_partitions``), to the transaction coordinator, until
      ``delivery.timeout.ms``; a partition's batches are drained only once it is added.

    Written by the sender's pass and the request it runs: ``init_error`` (read by the sender's
    expiry message), the InitProducerId attempts and backoff.
    """

    def __init__(
        self,
        tm: TransactionManager,
        client: NodeClient,
        coordinators: CoordinatorSender | None,
        retry_backoff: Callable[[int], float],
        delivery_timeout_ms: int,
        *,
        clock: Clock = monotonic_ms,
        log: LogLike = _SENDER_LOG,
    ) -> None:
        self.tm = tm
        self._client = client
        #: Where AddPartitionsToTxn goes; None: nowhere (a transactional producer always has them).
        self._coordinators = coordinators
        #: The producer's backoff (ms) before attempt ``n + 1`` (``RecordAccumulator.retry_backoff``).
        self._retry_backoff = retry_backoff
        self._delivery_timeout_ms = delivery_timeout_ms
        self._clock = clock
        self._log = log
        #: InitProducerId: failed attempts so far (each asks the next broker), when the next may start,
        #: and why the last one failed (None once one succeeded).
        self._init_attempts = 0
        self._init_not_before = float("-inf")
        self.init_error: KafkaError | None = None

    def next_request(self, now: float, requests_in_flight: bool) -> tuple[SenderRequest | None, float]:
        """The request to run now (None if none is due), and ms until one may become due (inf: an event wakes the sender).

        Called by the sender's pass while no request of this object is under way.
        """
        tm = self.tm
        if tm.transactional:
            partitions = tm.take_pending_partitions() if self._coordinators is not None else None
            return (self._add_partitions_to_txn(partitions) if partitions else None), float("inf")
        if tm.has_producer_id or requests_in_flight:
            return None, float("inf")
        if now < self._init_not_before:
            return None, self._init_not_before - now
        return self._init_producer_id(), float("inf")

    # -------------------------------------------------------------------- AddPartitionsToTxn
    async def _add_partitions_to_txn(self, partitions: set[tuple[str, int]]) -> RequestFailed | None:
        """Add ``partitions`` to the transaction: on failure, their batches fail and the transaction must be aborted."""
        tm = self.tm
        coordinators = self._coordinators
        assert coordinators is not None and tm.transactional_id is not None
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        body = {
            "v3_and_below_transactional_id": tm.transactional_id,
            "v3_and_below_producer_id": tm.producer_id,
            "v3_and_below_producer_epoch": tm.producer_epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        request = CoordinatorRequest(
            TRANSACTION, tm.transactional_id, messages.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn",
            lambda: body, functools.partial(_partitions_added, partitions),
        )
        added: set[tuple[str, int]] = set()
        retry: set[tuple[str, int]] = set()
        try:
            added = await coordinators.send(request, coordinators.deadline(self._delivery_timeout_ms))
        except KafkaError as exc:
            self._log.warning("AddPartitionsToTxn failed: %s", exc)
            return RequestFailed(exc, fatal=False)
        finally:
            tm.partitions_added(added, retry)
        return None

    # ------------------------------------------------------------------ InitProducerId (idempotent)
    async def _init_producer_id(self) -> RequestFailed | None:
        """One InitProducerId attempt (at start, or after the epoch ran out); bumps are local (``bump_epoch``)."""
        tm = self.tm
        body = {
            "transactional_id": None,
            "transaction_timeout_ms": 2147483647,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        try:
            response = await self._send_to_any_node(messages.INIT_PRODUCER_ID, body, self._init_attempts)
            code = response.get("error_code", 0)
            if code == 0:
                tm.set_producer_id_and_epoch(response["producer_id"], response["producer_epoch"])
                self._log.debug("producer id %s epoch %s", tm.producer_id, tm.producer_epoch)
                self._init_attempts, self.init_error = 0, None
                return None
            error_class = error_for_code(code)
            error = error_class(f"InitProducerId failed: {error_class.message}")
            if not error_class.retriable:
                return RequestFailed(error, fatal=True)
            self._init_failed(error)
        except AuthenticationError as exc:
            return RequestFailed(exc, fatal=True)
        except KafkaError as exc:
            self._init_failed(exc)
        return None

    def _init_failed(self, error: KafkaError) -> None:
        """Back off (as a produce retry would) and ask the next broker next time."""
        self._log.debug("InitProducerId attempt %d failed: %s", self._init_attempts + 1, error)
        self._init_attempts += 1
        self.init_error = error
        self._init_not_before = self._clock() + self._retry_backoff(self._init_attempts)

    async def _send_to_any_node(self, api_key: int, body: dict[str, Any], attempt: int) -> dict[str, Any]:
        """Send a cluster-wide request (InitProducerId): a ready node first, the next one on each retry.

        Rotating over the known nodes by ``attempt`` means a broker that keeps
        failing (or answering with a retriable error) is not asked forever.
        """
        nodes = sorted(self._client.metadata.nodes)
        if not nodes:
            raise KafkaConnectionError("no broker is known yet")
        ready = [n for n in nodes if self._client.is_ready(n)] or nodes
        node = ready[attempt % len(ready)] if attempt == 0 else nodes[attempt % len(nodes)]
        connection = await self._client.connection(node)
        response: dict[str, Any] | None = await connection.send(api_key, body)
        if response is None:  # only a request sent without expecting an answer has none
            raise KafkaConnectionError(f"node {node} sent no answer to a request that expects one")
        return response


def _partitions_added(partitions: set[tuple[str, int]], answer: dict[str, Any]) -> set[tuple[str, int]]:
    """AddPartitionsToTxn's answer: every partition added, or the first error raised."""
    code = first_error_code(answer)
    if code:
        raise error_for_code(code)(f"AddPartitionsToTxn: {error_for_code(code).message}")
    return partitions


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A pending call's outcome is kept for its retry; retrieved here so that asyncio does not warn meanwhile."""
    if not task.cancelled():
        task.exception()


async def complete_prepared(
    coordinators: CoordinatorSender, prepared: PreparedTransaction, *, commit: bool, max_block_ms: int
) -> tuple[int, int] | None:
    """EndTxn for a prepared transaction, from any producer: commit or abort it (checked).

    Retried as every coordinator request is, until ``max_block_ms``. An EndTxn repeated after
    one that succeeded with the same outcome succeeds again; one whose transaction was fenced or
    timed out raises ``ProducerFencedError`` / ``InvalidProducerEpochError``.

    Under transactions v2 (``prepared.transaction_v2``) the EndTxn is v5, as the transaction
    began, and its answer's producer id and epoch (the coordinator bumped it) are returned, for
    the producer that prepared it if it is the one completing it; None under v1.
    """
    if not prepared.started:
        return None
    what = f"complete_transaction(commit={commit})"
    body = {
        "transactional_id": prepared.transactional_id,
        "producer_id": prepared.producer_id,
        "producer_epoch": prepared.producer_epoch,
        "committed": commit,
    }

    def handle(answer: dict[str, Any]) -> tuple[int, int] | None:
        code = first_error_code(answer)
        if code:
            cls = error_for_code(code)
            raise cls(
                f"{what} for transactional.id {prepared.transactional_id!r} (producer id {prepared.producer_id}, "
                f"epoch {prepared.producer_epoch}): {cls.message}"
            )
        return (int(answer["producer_id"]), int(answer["producer_epoch"])) if prepared.transaction_v2 else None

    low, high = _versions(messages.END_TXN, prepared.transaction_v2)
    request = CoordinatorRequest(
        TRANSACTION, prepared.transactional_id, messages.END_TXN, what, lambda: body, handle, low, high
    )
    return await coordinators.send(request, coordinators.deadline(max_block_ms))


def _versions(api_key: int, transaction_v2: bool) -> tuple[int, int | None]:
    """(min_version, max_version) of a coordinator request of a transaction under v1 or v2 (no limit for the others)."""
    if api_key in (messages.END_TXN, messages.TXN_OFFSET_COMMIT):
        low, high = request_version_range(api_key, transaction_v2)
        return low, high
    return 0, None


def _pair(tp: Any) -> tuple[Any, Any] | None:
    """``(topic, partition)`` of a ``TopicPartition`` of any client or a pair, unchecked; None if it is neither."""
    if isinstance(tp, tuple) and len(tp) == 2:
        return tp[0], tp[1]
    topic, partition = getattr(tp, "topic", None), getattr(tp, "partition", None)
    if isinstance(topic, str) and isinstance(partition, int):
        return topic, partition
    return None


_OFFSETS = "send_offsets_to_transaction(offsets=...)"
_INT64_MAX = 2**63 - 1


def offsets_to_commit(offsets: Any) -> dict[tuple[str, int], int]:
    """``send_offsets_to_transaction()``'s offsets checked before anything is sent: ``{(topic, partition): offset}``.

    An offset below 0 is refused, as Java's ``OffsetAndMetadata`` refuses it (the next offset to
    read is 0 or more), and so are one past int64, a float or a bool, and a key that is not a
    partition: TypeError or ValueError naming the argument, the partition and the offset, so
    that a mistake never reaches the group coordinator, which would store it as the group's
    position.
    """
    if not isinstance(offsets, Mapping):
        raise TypeError(f"{_OFFSETS} must be a mapping of partition -> next offset, got {type(offsets).__name__}")
    checked: dict[tuple[str, int], int] = {}
    for tp, offset in offsets.items():
        key = _checked_partition(_OFFSETS, tp)
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise TypeError(f"{_OFFSETS}: the offset of {key} must be an int, got {offset!r}")
        if not 0 <= offset <= _INT64_MAX:
            raise ValueError(f"{_OFFSETS}: the offset of {key} must be in 0..2**63-1 (the next offset to read), got {offset}")
        checked[key] = offset
    return checked


# --------------------------------------------------------------------- committed offsets
def offset_fetch_arguments(group_id: Any, partitions: Any) -> list[tuple[str, int]]:
    """``committed_offsets()``'s arguments checked before any I/O: the distinct partitions, in order.

    TypeError or ValueError naming the argument, so that a mistake is not sent to a broker
    (which would answer for a partition that cannot exist, or a group nobody uses).
    """
    if not isinstance(group_id, str):
        raise TypeError(f"committed_offsets(group_id=...) must be a str, got {type(group_id).__name__}")
    if not group_id:
        raise ValueError("committed_offsets(group_id=...): the group id is empty")
    if isinstance(partitions, (str, bytes, bytearray, memoryview)) or not isinstance(partitions, Iterable):
        raise TypeError(
            "committed_offsets(partitions=...) takes an iterable of (topic, partition) pairs or TopicPartition, "
            f"got {type(partitions).__name__}"
        )
    return list(dict.fromkeys(_checked_partition("committed_offsets(partitions=...)", tp) for tp in partitions))


def _checked_partition(what: str, tp: Any) -> tuple[str, int]:
    """``(topic, partition)`` of a ``TopicPartition`` or a pair, or TypeError/ValueError naming ``what`` and ``tp``."""
    pair = _pair(tp)
    if pair is None:
        raise TypeError(f"{what}: {tp!r} is neither a (topic, partition) pair nor a TopicPartition")
    topic, partition = pair
    if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
        raise TypeError(f"{what}: {tp!r} must be a (str, int) pair")
    if not topic:
        raise ValueError(f"{what}: {tp!r} has an empty topic")
    if partition < 0:
        raise ValueError(f"{what}: {tp!r} has a negative partition")
    return topic, partition


async def committed_offsets(
    coordinators: CoordinatorSender,
    group_id: str,
    partitions: list[tuple[str, int]],
    *,
    require_stable: bool,
    max_block_ms: int,
) -> dict[tuple[str, int], int | None]:
    """The group's committed offset (next offset to read) of each of ``partitions`` (checked), None where none.

    OffsetFetch to the group's coordinator, retried by :class:`Coordinators` while it moves,
    loads, or (``require_stable``) holds offsets of a pending transaction; bounded by
    ``max_block_ms``.
    """
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    body = {
        "group_id": group_id,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        "require_stable": require_stable,
    }
    what = f"committed_offsets(group_id={group_id!r}, require_stable={require_stable})"
    request = CoordinatorRequest(
        GROUP, group_id, messages.OFFSET_FETCH, what, lambda: body,
        functools.partial(_offsets_of, group_id=group_id, partitions=partitions),
        _REQUIRE_STABLE_VERSION if require_stable else 0,
    )
    try:
        return await coordinators.send(request, coordinators.deadline(max_block_ms))
    except KafkaTimeoutError as exc:
        if isinstance(exc.__cause__, UnstableOffsetCommitError):
            raise KafkaTimeoutError(
                f"{what}: a transaction with offsets for group {group_id!r} was still pending after "
                f"max.block.ms={max_block_ms} ms (UNSTABLE_OFFSET_COMMIT)"
            ) from exc
        raise


def _offsets_of(answer: dict[str, Any], group_id: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
    """Read an OffsetFetch answer: an error anywhere raises its class naming the group (and partition)."""
    raise_for(int(answer.get("error_code") or 0), f"committed_offsets(): group {group_id!r}")
    found: dict[tuple[str, int], int | None] = {}
    for topic in answer.get("topics") or ():
        for entry in topic.get("partitions") or ():
            tp = (str(topic["name"]), int(entry["partition_index"]))
            raise_for(int(entry.get("error_code") or 0), f"committed_offsets(): group {group_id!r}, partition {tp[0]}[{tp[1]}]")
            offset = int(entry["committed_offset"])
            found[tp] = None if offset == _NO_OFFSET else offset
    missing = [tp for tp in partitions if tp not in found]
    if missing:
        raise ProtocolError(f"committed_offsets(): the coordinator of group {group_id!r} did not answer for {missing}")
    return {tp: found[tp] for tp in partitions}


def _not_cancelling() -> bool:
    """Whether the running task has no cancellation of its own pending (``Task.cancelling()``)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() == 0
