"""OpenTelemetry for ``send()``: a PRODUCER span per record that ends at the broker's acknowledgement.

Imported only by a producer made with ``tracing=True`` or ``tracer_provider=`` (``pip install
'aioproducer[opentelemetry]'``, which brings ``opentelemetry-api``): a producer without tracing
never imports this module nor the library, and its ``send()`` takes the fast path it takes today
(a traced producer's records take the intake's general route: ``internals/intake.py``, ``Hooks``).

Why the span ends where it does: the instrumentations of the other clients end it when the record
is queued, which shows nothing of delivery. Here the record's span is started in ``send()`` (after
the interceptors, so that its name has the topic they chose), handed to the record's batch after
the append, and ended by ``ProducerBatch.complete()`` for all the batch's records at once: the one
place every outcome goes through (acknowledged, refused record by record (KIP-467), expired past
``delivery.timeout.ms``, failed by ``close()``, aborted with a transaction, each piece of a split
batch). A done-callback on the record future would not do: a cancelled future runs its callbacks
at ``cancel()`` although its record is still delivered, and an ``on_delivery`` caller drops its
future. A batch without traced records holds ``None`` and pays one test when it completes.

What a span says (the OpenTelemetry semantic conventions for messaging, Kafka): name ``send
{topic}``, kind PRODUCER, parent the context current at ``send()``; ``messaging.system=kafka``,
``messaging.operation.name=send``, ``messaging.operation.type=send``,
``messaging.destination.name``, ``messaging.destination.partition.id``, ``messaging.client.id``,
``messaging.kafka.offset`` once acknowledged with an offset (none with ``acks=0``),
``server.address``/``server.port`` of the partition's leader as the producer's metadata names it
when the record completes, ``messaging.kafka.message.key`` for a ``str`` key only (its canonical
string form, as the conventions ask; a ``bytes`` key has none and is not recorded; values never
are), ``messaging.kafka.message.tombstone`` for a ``None`` value, and on failure status ERROR with
``error.type`` (the exception's qualified class name).

The W3C context (``traceparent``, ``tracestate``, and whatever else the global propagator writes)
goes into the record's headers before it is encoded; a header of that name the caller (or an
interceptor) set is kept and not duplicated.

A tracer that fails never costs a record (issue #40): a span processor's ``on_start`` or
``on_end``, the global propagator's ``inject`` or a meter that raises is logged (``TracingFaults``)
and the record goes on untraced, or its span is left as it is; every other span of its batch is
still ended. Only ``SystemExit`` and ``KeyboardInterrupt`` pass through.

Metrics, on the meter provider passed or the global one: ``messaging.client.operation.duration``
(histogram, s, ``send()`` to completion, per record) and ``messaging.client.sent.messages``
(counter), both recorded when the record completes, with ``error.type`` when it failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the library
    raise ImportError(
        "aioproducer.tracing needs the opentelemetry-api library: pip install 'aioproducer[opentelemetry]'"
    ) from exc

from aioproducer._version import __version__
from aioproducer.logs import LogLike, client_logger

if TYPE_CHECKING:
    from aioproducer.internals.batch import FutureRecordMetadata, ProducerBatch
    from aioproducer.network.metadata import ClusterMetadata

__all__ = ["Tracing", "RecordSpans"]


_now_ns = time.time_ns

#: The bucket boundaries the semantic conventions advise for ``messaging.client.operation.duration``.
DURATION_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


class TracingFaults:
    """What the OpenTelemetry code raised, counted per stage and logged at WARNING, sparingly.

    Why: a tracer is an observer; when it fails, the records must still go (a span processor whose
    exporter is down must not stop a checkout service), yet the fault must be seen. A fault at
    every record would be a log line per record, so a stage's 1st, 10th, 100th, ... fault is
    logged (with its traceback), each line saying how many there were: deterministic, no clock.
    Writer: ``Tracing`` and ``RecordSpans``, through ``contained()``, in the event loop's thread.
    """

    __slots__ = ("_log", "counts")

    def __init__(self, log: LogLike) -> None:
        self._log = log
        #: stage ("start", "inject", "end", "fail") -> faults so far.
        self.counts: dict[str, int] = {}

    def contained(self, stage: str, error: Exception) -> None:
        """Count ``error`` raised at ``stage``; log it if the count is 1, 10, 100, ..."""
        count = self.counts.get(stage, 0) + 1
        self.counts[stage] = count
        if count == 10 ** (len(str(count)) - 1):
            self._log.warning(
                "OpenTelemetry raised at span %s (%d time(s) so far); the record goes on, its span %s",
                stage,
                count,
                "not recorded" if stage in ("start", "inject") else "left as it is",
                exc_info=error,
            )


class Tracing:
    """One producer's tracer, instruments and attributes: starts spans in ``send()``, ends them per batch.

    Every method the producer calls contains what OpenTelemetry raises (``TracingFaults``): a
    span that could not start is None, and the record is sent without one.
    """

    __slots__ = ("tracer", "client_id", "duration", "sent", "faults", "_metadata", "_base")

    def __init__(
        self,
        client_id: str,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        metadata: Callable[[], ClusterMetadata | None],
    ) -> None:
        # None: the global providers, looked up when used (a provider set after the producer was made counts).
        self.tracer = trace.get_tracer("aioproducer", __version__, tracer_provider=tracer_provider)
        meter = otel_metrics.get_meter("aioproducer", __version__, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of messaging operation initiated by a producer or consumer client.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.sent = meter.create_counter(
            "messaging.client.sent.messages",
            unit="{message}",
            description="Number of messages producer attempted to send to the broker.",
        )
        self.client_id: str = client_id
        self.faults: TracingFaults = TracingFaults(client_logger("aioproducer.tracing", client_id))
        #: The producer's current cluster metadata (None before it started): where the partition
        #: leaders listen (``server.address``). Given by the producer (its engine's client).
        self._metadata = metadata
        self._base: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.client.id": client_id,
        }

    def start(self, topic: str, key: Any, value: Any) -> tuple[Span | None, int]:
        """The record's span, started now as a child of the current context, and its start time (ns).

        None for the span if the tracer raised (a span processor's ``on_start``): the record is sent untraced.
        """
        attributes = dict(self._base)
        attributes["messaging.destination.name"] = topic
        if type(key) is str:
            attributes["messaging.kafka.message.key"] = key
        if value is None:
            attributes["messaging.kafka.message.tombstone"] = True
        start = _now_ns()
        try:
            span = self.tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes, start_time=start)
        except Exception as exc:
            self.faults.contained("start", exc)
            return None, start
        return span, start

    def inject(
        self, span: Span | None, headers: list[tuple[str, bytes | None]] | None
    ) -> list[tuple[str, bytes | None]] | None:
        """``headers`` plus the span's context from the global propagator; a name already there is kept as it is.

        ``headers`` unchanged if there is no span or the propagator raised.
        """
        if span is None:
            return headers
        carrier: dict[str, str] = {}
        try:
            propagate.inject(carrier, context=trace.set_span_in_context(span))
        except Exception as exc:  # what it wrote before raising is not trusted
            self.faults.contained("inject", exc)
            return headers
        if not carrier:
            return headers
        if not headers:
            return [(name, text.encode()) for name, text in carrier.items()]
        present = {name.lower() for name, _ in headers}
        return headers + [(name, text.encode()) for name, text in carrier.items() if name.lower() not in present]

    def attach(self, span: Span | None, start: int, future: FutureRecordMetadata) -> None:
        """After the append: the record's batch ends ``span`` when it completes."""
        if span is None:
            return
        batch = future._batch
        spans = cast("RecordSpans | None", batch.spans)  # only this class is ever put there
        if spans is None:
            spans = RecordSpans(self)
            batch.set_spans(spans)
        spans.items += span, future._relative_offset, start
        if batch.is_done:  # cannot happen today (no await since the append): never leave a span open
            batch.set_spans(None)
            spans.end(batch)

    def fail(self, span: Span | None, start: int, error: BaseException) -> None:
        """``send()`` refused the record (bad input, closed producer, no metadata in time …): end its span now."""
        if span is None:
            return
        try:
            _set_error(span, error)
            end = _now_ns()
            span.end(end_time=end)
            attributes = dict(self._base)
            attributes["error.type"] = _error_type(error)
            self.duration.record((end - start) / 1e9, attributes)
        except Exception as exc:  # the caller raises `error`, not this
            self.faults.contained("fail", exc)

    def leader_address(self, topic: str, partition: int) -> tuple[str, int] | None:
        """Where the partition's leader listens, from the metadata; None when no leader is known."""
        metadata = self._metadata()
        if metadata is None:
            return None
        leader = metadata.leader_for(topic, partition)
        node = None if leader is None else metadata.nodes.get(leader)
        return None if node is None else (node.host, node.port)

    def metric_attributes(self, topic: str, address: tuple[str, int] | None) -> dict[str, Any]:
        attributes = dict(self._base)
        del attributes["messaging.client.id"]  # one series per producer would be cardinality for nothing
        attributes["messaging.destination.name"] = topic
        if address is not None:
            attributes["server.address"], attributes["server.port"] = address
        return attributes


class RecordSpans:
    """The spans of one batch's traced records, flat ``(span, relative offset, start ns)`` triples.

    Held by ``ProducerBatch.spans`` (None for a batch without them): ``end`` when it completes,
    ``slice`` when it is split into pieces, each of which then ends its own records' spans.
    """

    __slots__ = ("tracing", "items")

    def __init__(self, tracing: Tracing) -> None:
        self.tracing: Tracing = tracing
        self.items: list[Any] = []

    def slice(self, start: int, end: int) -> RecordSpans | None:
        """The spans of the records at relative offsets ``start`` to ``end`` (excluded), renumbered from 0."""
        part = RecordSpans(self.tracing)
        it = iter(self.items)
        for span, relative_offset, began in zip(it, it, it):
            if start <= relative_offset < end:
                part.items += span, relative_offset - start, began
        return part if part.items else None

    def end(self, batch: ProducerBatch) -> None:
        """End every span of the completed ``batch``: its offset, or its own error (KIP-467 per record)."""
        tracing = self.tracing
        now = _now_ns()
        topic, partition = batch.topic, batch.partition
        address = tracing.leader_address(topic, partition)
        base_offset, error = batch.base_offset, batch.error
        ok_attributes = tracing.metric_attributes(topic, address)
        # Set in one call per span, at its end: each set_attribute() of the SDK takes a lock and validates.
        common: dict[str, Any] = {"messaging.destination.partition.id": str(partition)}
        if address is not None:
            common["server.address"], common["server.port"] = address
        failed: dict[str, dict[str, Any]] = {}  # error.type -> the metric attributes of records that failed so
        failed_count: dict[str, int] = {}
        succeeded = 0
        record = tracing.duration.record
        it = iter(self.items)
        for span, relative_offset, began in zip(it, it, it):
            own = None if error is None else batch.error_of(relative_offset)
            if own is None:
                attributes = ok_attributes
                succeeded += 1
            else:
                error_type = _error_type(own)
                found = failed.get(error_type)
                if found is None:
                    found = failed[error_type] = {**ok_attributes, "error.type": error_type}
                attributes = found
                failed_count[error_type] = failed_count.get(error_type, 0) + 1
            # One span's fault (a processor's on_end, a meter) must not leave the others open:
            # contained per span (a `try` costs nothing in 3.11 unless it catches).
            try:
                if own is None:
                    if base_offset >= 0:
                        span.set_attributes({**common, "messaging.kafka.offset": base_offset + relative_offset})
                    else:
                        span.set_attributes(common)
                else:
                    span.set_attributes(common)
                    _set_error(span, own)
                span.end(end_time=now)
            except Exception as exc:
                tracing.faults.contained("end", exc)
            try:  # its duration is recorded even if its span's end raised
                record((now - began) / 1e9, attributes)
            except Exception as exc:
                tracing.faults.contained("end", exc)
        try:
            if succeeded:
                tracing.sent.add(succeeded, ok_attributes)
            for error_type, attributes in failed.items():
                tracing.sent.add(failed_count[error_type], attributes)
        except Exception as exc:
            tracing.faults.contained("end", exc)


def _error_type(error: BaseException) -> str:
    cls = type(error)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def _set_error(span: Span, error: BaseException) -> None:
    span.set_attribute("error.type", _error_type(error))
    span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))

