"""The producer's metrics: the Java producer's names and meanings, recorded per batch and per request.

The windowed statistics (Java's ``SampledStat``, ``Avg``, ``Max``, ``Rate``) are in
``aioproducer/stats.py``. Recording happens per request and per batch completed, never per
record: ``ProducerMetrics`` is what the sender, the buffer pool and the producer call;
``producer.metrics()`` reads its ``snapshot()``.

Cost, measured (``profile_gather --value-size 10240``, each 10 KB record a batch of its own):
one windowed update costs about 0.3 µs, and recording each batch's 15 of them took 15 % of
the producer's CPU. A request's batches are now folded into one update per statistic, and the
requests and completions within a thousandth of a sample window of each other likewise
(``fold``, ``FOLD_PER_WINDOW``): the same values, since an ``Avg`` takes a sum and a count and a
``Max`` a maximum, at one update per 30 ms at most with the default window. The sums between
two folds are native (``RequestCounters``, ``native/src/counters.rs``), added to by the
request's build and the response's completion in the loops they run anyway: no Python per
request or response but the fold's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Final, Protocol, TypeAlias

from aioproducer._native import ProducerBatch, RequestCounters, record_latencies
from aioproducer.stats import NAN, Avg, ByteCounts, Max, Rate, SampledStat

__all__ = [
    "DELIVERY_LATENCY_BUCKETS",
    "METRIC_DEFS",
    "Avg",
    "ByteCounts",
    "DeliveryLatency",
    "Max",
    "MetricDef",
    "ProducerMetrics",
    "Rate",
    "SampledStat",
    "render_markdown_table",
]

#: One generation of ``RequestCounters.take()``: ``(since_ms, requests, request_records, batches,
#: size_sum, size_max, with_records, per_record_sum, per_record_max, ratio_sum, queued_sum,
#: queued_max)``, records acknowledged, records failed, the latency rows (packed doubles, three a
#: batch: ``DeliveryLatency.record_batches``), and per topic
#: ``(topic, bytes, ratios summed, batches, acknowledged, failed)``.
Generation: TypeAlias = tuple[
    tuple[float, int, int, int, float, float, int, float, float, float, float, float],
    int, int, bytes, list[tuple[str, float, float, int, int, int]],
]


class _TopicTotals:
    __slots__ = ("send", "bytes", "error", "retry", "send_rate", "byte_rate", "error_rate", "retry_rate", "compression")

    def __init__(self, window_ms: int, num_samples: int) -> None:
        self.send = 0
        self.bytes = 0
        self.error = 0
        self.retry = 0
        self.send_rate = Rate(window_ms, num_samples)
        self.byte_rate = Rate(window_ms, num_samples)
        self.error_rate = Rate(window_ms, num_samples)
        self.retry_rate = Rate(window_ms, num_samples)
        self.compression = Avg(window_ms, num_samples)


#: Requests and completions recorded within ``window_ms / FOLD_PER_WINDOW`` of the first unfolded
#: one go into the windowed statistics together, at that first one's time (``ProducerMetrics.fold``):
#: a value is recorded at most a thousandth of a sample window early (30 ms with the default 30 s
#: window, 1 ms with a 1 s one), which moves a rate or an average by at most that share at a
#: sample's edge, and never a total (readers fold first). Why not 1 ms, as it was: a fold costs
#: about 7 µs, and with 10 KB records, a request of two every 250-300 µs on the shared machine,
#: folds every millisecond were 5 % of the event loop's samples (py-spy, the peers' layout; 2.7 %
#: with this rule, 68 folds for 10,259 requests).
FOLD_PER_WINDOW: Final = 1000


#: The delivery-latency histogram's upper bounds, in seconds (``le``; +Inf is implied): from 1 ms
#: to ``delivery.timeout.ms``'s default of 120 s, about 2.5x apart.
DELIVERY_LATENCY_BUCKETS: Final[tuple[float, ...]] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)


class DeliveryLatency:
    """A histogram of records' delivery latency (``send()`` to acknowledgement), filled per batch.

    A batch's records are acknowledged together, at ``now``; what is known without per-record
    work is the first record's latency, ``first_ms = now - created_ms`` (exact: the batch was
    created at that record's append, on the monotonic clock), and the batch's timestamp spread
    (its largest record timestamp minus its first, which the record batch header keeps anyway).
    With the default timestamps (each record's send time) the latest record's latency is
    ``last_ms = first_ms - spread`` to the millisecond; a user-supplied timestamp can make the
    spread meaningless, so it is clamped to ``[0, first_ms]``. The batch's ``n`` records are then
    taken to be spread evenly from ``last_ms`` to ``first_ms``: the two ends are exact, the
    records between are off by at most ``first_ms - last_ms`` (how long the batch took records:
    about ``linger.ms``, longer while its partition waited for an earlier request). ``sum_ms``
    adds ``n * (first_ms + last_ms) / 2`` per batch, the sum of those modelled latencies (exact
    when the records came at an even pace, always between ``n * last_ms`` and ``n * first_ms``);
    ``count`` is exact. Cost: one ``bisect`` per batch end, a loop over the buckets between
    them only when they differ (about 2 µs per batch with the windowed average and maximum,
    measured; a batch of 100 B records at the default ``batch.size`` holds about 130 of them, so
    about 0.02 µs per record): cheap enough to be always on.

    The latency runs from the record's append to its batch, that is after ``send()`` waited for
    metadata or buffer memory (``max.block.ms``), to the answer that acknowledged it (retries
    included; with ``acks=0``, to the request's writing). A piece of a split batch keeps the split batch's creation time, so its first
    record's latency is counted from the split batch's first record (an overstatement by at most
    that batch's spread).
    """

    __slots__ = ("bounds_ms", "buckets", "count", "sum_ms", "avg", "max")

    def __init__(
        self, bounds_s: tuple[float, ...] = DELIVERY_LATENCY_BUCKETS, window_ms: int = 30000, num_samples: int = 2
    ) -> None:
        self.bounds_ms: tuple[float, ...] = tuple(b * 1000.0 for b in bounds_s)
        self.buckets: list[int] = [0] * (len(bounds_s) + 1)  # per bucket (not cumulative); the last is above every bound
        self.count: int = 0
        self.sum_ms: float = 0.0
        # delivery-latency-avg (per record) and -max (a batch's first record's), over the window:
        # recorded by ProducerMetrics, folded like its other completion statistics.
        self.avg: Avg = Avg(window_ms, num_samples)
        self.max: Max = Max(window_ms, num_samples)

    def record_batch(self, records: int, first_ms: float, last_ms: float) -> None:
        """``records`` records acknowledged, latencies from ``first_ms`` (the oldest's) down to ``last_ms``."""
        self.record_batches([records, first_ms, last_ms], 0.0, -math.inf)

    def record_batches(self, rows: Sequence[float] | bytes, unfolded_sum: float, unfolded_max: float) -> tuple[int, float, float]:
        """Batches acknowledged, flat ``rows`` ``[records, first_ms, last_ms, ...]``, in one native call.

        ``rows`` may be packed native-order doubles, as a fold's are (``RequestCounters.take``).

        The per-batch arithmetic is ``record_latencies`` (``native/src/latency.rs``): the bucket of
        each end (``bisect``), the records spread over the buckets between them when they differ,
        and the sums, added batch after batch as before. ``unfolded_sum`` and ``unfolded_max`` are
        the producer's windowed average's and maximum's running values, returned with the
        records added.
        """
        added, self.sum_ms, unfolded_sum, unfolded_max = record_latencies(
            self.bounds_ms, self.buckets, rows, self.sum_ms, unfolded_sum, unfolded_max
        )
        self.count += added
        return added, unfolded_sum, unfolded_max

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound in seconds, records at or below it) per bucket, ``inf`` last: Prometheus' ``le`` buckets."""
        out: list[tuple[float, int]] = []
        total = 0
        for bound, n in zip((*self.bounds_ms, math.inf), self.buckets):
            total += n
            out.append((bound / 1000.0, total))
        return out


class _NodeStats:
    __slots__ = ("latency_avg", "latency_max")

    def __init__(self, window_ms: int, num_samples: int) -> None:
        self.latency_avg = Avg(window_ms, num_samples)
        self.latency_max = Max(window_ms, num_samples)


class ProducerMetrics:
    """What the producer records, and the flat mapping ``Producer.metrics()`` reads from it."""

    def __init__(self, window_ms: int = 30000, num_samples: int = 2) -> None:
        window_ms = max(1, window_ms)  # metrics.sample.window.ms=0 (which Java accepts) is taken as 1 ms
        self.window_ms = window_ms
        self.num_samples = num_samples
        w, n = window_ms, num_samples
        self.record_send_total: int = 0
        self.record_send_rate: Rate = Rate(w, n)
        self.record_error_total: int = 0
        self.record_error_rate: Rate = Rate(w, n)
        self.record_retry_total: int = 0
        self.record_retry_rate: Rate = Rate(w, n)
        self.record_size_avg: Avg = Avg(w, n)
        self.record_size_max: Max = Max(w, n)
        self.batch_size_avg: Avg = Avg(w, n)
        self.batch_size_max: Max = Max(w, n)
        self.records_per_request_avg: Avg = Avg(w, n)
        self.compression_rate_avg: Avg = Avg(w, n)
        self.queue_time_avg: Avg = Avg(w, n)
        self.queue_time_max: Max = Max(w, n)
        self.request_total: int = 0
        self.request_rate: Rate = Rate(w, n)
        self.request_latency_avg: Avg = Avg(w, n)
        self.request_latency_max: Max = Max(w, n)
        self.throttle_time_avg: Avg = Avg(w, n)
        self.throttle_time_max: Max = Max(w, n)
        self.bufferpool_wait_time_total_ns: int = 0
        self.bufferpool_wait_ratio: Rate = Rate(w, n, per_ns=True)
        self.batch_split_total: int = 0
        self.batch_split_rate: Rate = Rate(w, n)
        self.delivery_latency: DeliveryLatency = DeliveryLatency(window_ms=w, num_samples=n)
        self.topics: dict[str, _TopicTotals] = {}
        self.nodes: dict[int, _NodeStats] = {}
        #: What requests and completions added since the last fold (native sums; ``fold`` takes them).
        #: Writers: the sender's request build and response completion, and the methods below.
        self.fold_ms: float = window_ms / FOLD_PER_WINDOW
        self.counters: RequestCounters = RequestCounters(self.fold_ms)

    def _topic(self, topic: str) -> _TopicTotals:
        totals = self.topics.get(topic)
        if totals is None:
            totals = self.topics[topic] = _TopicTotals(self.window_ms, self.num_samples)
        return totals

    # ------------------------------------------------------------ recording (per request, per batch completed)
    def record_completed(
        self, topic: str, records: int, ok: bool, now_ms: float, created_ms: float = NAN, spread_ms: float = 0.0
    ) -> None:
        """A batch completed on its own was acknowledged (``ok``) or failed: its records are sent or in error.

        A response's batches the sender completes natively are counted there
        (``RecordQueues.complete`` adds them to ``counters``); this is for the others: a failed
        batch, a producer with interceptors, the fake producer. An acknowledged batch created at
        ``created_ms`` (its first record's append), whose record timestamps span ``spread_ms``,
        adds its records to the delivery latency (see ``DeliveryLatency``). A failed record has no
        acknowledgement, so no delivery latency: it counts in ``record-error-*`` only (Java keeps
        errors apart too).

        Every value, totals included, reaches the metrics at the next ``fold``: within
        ``fold_ms``, and at once for a reader (``snapshot()`` folds first). The windowed rates,
        averages and maxima take what was added within ``fold_ms`` of each other in one update,
        at the first one's time (see ``FOLD_PER_WINDOW``).
        """
        if ok:
            due = self.counters.add_acknowledged(topic, records, now_ms, created_ms, spread_ms)
        else:
            due = self.counters.add_errors(topic, records, now_ms)
        if due:
            self.fold()

    def record_request(self, batches: Sequence[ProducerBatch], now_ms: float) -> None:
        """A Produce request of ``batches`` went out at ``now_ms`` (Java's ``updateProduceRequestMetrics``).

        The sender's requests are counted by the call that builds them (``produce_topic_data``
        with ``counters``); this is for whoever builds a request otherwise (the fake producer).
        Per batch, as Java: its size, its records' mean size, its compression ratio, how long it
        queued; per request: the request and its records.
        """
        if self.counters.add_request(batches, now_ms):
            self.fold()

    def fold(self) -> None:
        """Record what was added since the last fold into the totals and the windowed statistics.

        Called when an add says a fold is due (its values came ``fold_ms`` or more after the
        first unfolded one) and by every reader (``snapshot()``, the Prometheus histogram). Each
        generation is recorded at its first value's time. Cost: 7.1 µs a generation holding a
        request of two batches and their acknowledgement, one topic (best of 5 × 20,000, quiet
        machine, 2026-12-03), at most once per ``fold_ms``; what it replaced ran per request and
        per response (``record_request`` alone 1.42-1.50 µs). The sender's own cost per request
        and answer fell by 8.5 µs with two batches (``benchmarks/README.md``, "Per batch").
        """
        for generation in self.counters.take():
            self._fold_generation(generation)

    def _fold_generation(self, generation: Generation) -> None:
        (
            (at, requests, request_records, batches, size_sum, size_max, with_records, per_record_sum, per_record_max,
             ratio_sum, queued_sum, queued_max),
            send, errors, latencies, topics,
        ) = generation
        if requests:
            self.request_total += requests
            self.request_rate.record(requests, at)
            self.records_per_request_avg.record_many(request_records, requests, at)
        if batches:
            self.batch_size_avg.record_many(size_sum, batches, at)
            self.batch_size_max.record_many(size_max, batches, at)
            self.compression_rate_avg.record_many(ratio_sum, batches, at)
            self.queue_time_avg.record_many(queued_sum, batches, at)
            self.queue_time_max.record_many(queued_max, batches, at)
        if with_records:
            self.record_size_avg.record_many(per_record_sum, with_records, at)
            self.record_size_max.record_many(per_record_max, with_records, at)
        if send:
            self.record_send_total += send
            self.record_send_rate.record(send, at)
        if errors:
            self.record_error_total += errors
            self.record_error_rate.record(errors, at)
        if latencies:
            latency = self.delivery_latency
            added, latency_sum, latency_max = latency.record_batches(latencies, 0.0, -math.inf)
            if added:
                latency.avg.record_many(latency_sum, added, at)
                latency.max.record_many(latency_max, added, at)
        for topic, size_total, ratios, topic_batches, topic_send, topic_errors in topics:
            totals = self._topic(topic)
            if topic_batches:
                totals.bytes += int(size_total)
                totals.byte_rate.record(size_total, at)
                totals.compression.record_many(ratios, topic_batches, at)
            if topic_send:
                totals.send += topic_send
                totals.send_rate.record(topic_send, at)
            if topic_errors:
                totals.error += topic_errors
                totals.error_rate.record(topic_errors, at)

    def record_retry(self, topic: str, records: int, now_ms: float) -> None:
        """A batch goes back to the queue to be sent again."""
        self.record_retry_total += records
        self.record_retry_rate.record(records, now_ms)
        totals = self._topic(topic)
        totals.retry += records
        totals.retry_rate.record(records, now_ms)

    def record_split(self, now_ms: float) -> None:
        """A batch the broker refused as too large (MESSAGE_TOO_LARGE) was split to be sent again."""
        self.batch_split_total += 1
        self.batch_split_rate.record(1, now_ms)

    def record_response(self, node: int, latency_ms: float, throttle_time_ms: int, now_ms: float) -> None:
        """A Produce request was answered after ``latency_ms`` (throttle time < 0: the answer had none, acks=0)."""
        throttled = throttle_time_ms >= 0
        self.record_responses(
            node, 1, latency_ms, latency_ms, int(throttled), max(throttle_time_ms, 0), throttle_time_ms, now_ms
        )

    def record_responses(
        self,
        node: int,
        count: int,
        latency_sum: float,
        latency_max: float,
        throttled: int,
        throttle_sum: int,
        throttle_max: int,
        now_ms: float,
    ) -> None:
        """``count`` Produce requests to ``node`` answered at ``now_ms``: their latencies' sum and
        maximum, and of the ``throttled`` answers that had a throttle time, theirs.

        The same samples as one ``record_response`` per answer (an ``Avg`` takes a sum and a
        count, a ``Max`` a maximum, all at one time). Why together: the answers of one read are
        completed at one ``now`` (``Sender._on_node_answers``), and one call per answer (six
        updates, 0.63 µs) was 1.0 % of the loop's samples at 1 KB records (py-spy, 2026-12-04).
        """
        self.request_latency_avg.record_many(latency_sum, count, now_ms)
        self.request_latency_max.record_many(latency_max, count, now_ms)
        stats = self.nodes.get(node)
        if stats is None:
            stats = self.nodes[node] = _NodeStats(self.window_ms, self.num_samples)
        stats.latency_avg.record_many(latency_sum, count, now_ms)
        stats.latency_max.record_many(latency_max, count, now_ms)
        if throttled:
            self.throttle_time_avg.record_many(throttle_sum, throttled, now_ms)
            self.throttle_time_max.record_many(throttle_max, throttled, now_ms)

    def record_buffer_wait(self, wait_ns: int, now_ms: float) -> None:
        """A ``send()`` waited ``wait_ns`` for buffer memory."""
        self.bufferpool_wait_time_total_ns += wait_ns
        self.bufferpool_wait_ratio.record(wait_ns, now_ms)

    # ------------------------------------------------------------ reading
    def snapshot(
        self,
        now_ms: float,
        *,
        buffer_total: int,
        buffer_available: int,
        waiting: int,
        requests_in_flight: int,
        metadata_age_ms: float,
        connection_count: int,
        byte_counts: ByteCounts | None,
    ) -> dict[str, float | int]:
        """The Java names and their values now (see ``METRIC_DEFS``), per topic and per node keys after them."""
        self.fold()
        outgoing = byte_counts.outgoing if byte_counts is not None else 0
        latency = self.delivery_latency
        out: dict[str, float | int] = {
            "record-send-total": self.record_send_total,
            "record-send-rate": self.record_send_rate.measure(now_ms),
            "record-error-total": self.record_error_total,
            "record-error-rate": self.record_error_rate.measure(now_ms),
            "record-retry-total": self.record_retry_total,
            "record-retry-rate": self.record_retry_rate.measure(now_ms),
            "record-size-avg": self.record_size_avg.measure(now_ms),
            "record-size-max": self.record_size_max.measure(now_ms),
            "batch-size-avg": self.batch_size_avg.measure(now_ms),
            "batch-size-max": self.batch_size_max.measure(now_ms),
            "records-per-request-avg": self.records_per_request_avg.measure(now_ms),
            "compression-rate-avg": self.compression_rate_avg.measure(now_ms),
            "record-queue-time-avg": self.queue_time_avg.measure(now_ms),
            "record-queue-time-max": self.queue_time_max.measure(now_ms),
            "request-latency-avg": self.request_latency_avg.measure(now_ms),
            "request-latency-max": self.request_latency_max.measure(now_ms),
            "request-rate": self.request_rate.measure(now_ms),
            "request-total": self.request_total,
            "requests-in-flight": requests_in_flight,
            "produce-throttle-time-avg": self.throttle_time_avg.measure(now_ms),
            "produce-throttle-time-max": self.throttle_time_max.measure(now_ms),
            "buffer-total-bytes": buffer_total,
            "buffer-available-bytes": buffer_available,
            "bufferpool-wait-time-total": self.bufferpool_wait_time_total_ns,
            "bufferpool-wait-ratio": self.bufferpool_wait_ratio.measure(now_ms),
            "waiting-threads": waiting,
            "metadata-age": metadata_age_ms / 1000.0,
            "outgoing-byte-total": outgoing,
            "outgoing-byte-rate": byte_counts.outgoing_rate.measure(now_ms) if byte_counts is not None else 0.0,
            "incoming-byte-total": byte_counts.incoming if byte_counts is not None else 0,
            "connection-count": connection_count,
            "batch-split-total": self.batch_split_total,
            "batch-split-rate": self.batch_split_rate.measure(now_ms),
            "delivery-latency-avg": latency.avg.measure(now_ms) if latency is not None else NAN,
            "delivery-latency-max": latency.max.measure(now_ms) if latency is not None else NAN,
        }
        for topic, totals in self.topics.items():
            prefix = f"topic.{topic}."
            out[prefix + "record-send-total"] = totals.send
            out[prefix + "record-send-rate"] = totals.send_rate.measure(now_ms)
            out[prefix + "byte-total"] = totals.bytes
            out[prefix + "byte-rate"] = totals.byte_rate.measure(now_ms)
            out[prefix + "compression-rate"] = totals.compression.measure(now_ms)
            out[prefix + "record-error-total"] = totals.error
            out[prefix + "record-error-rate"] = totals.error_rate.measure(now_ms)
            out[prefix + "record-retry-total"] = totals.retry
            out[prefix + "record-retry-rate"] = totals.retry_rate.measure(now_ms)
        nodes = set(self.nodes)
        if byte_counts is not None:
            nodes.update(byte_counts.outgoing_by_node)
            nodes.update(byte_counts.nodes)
        for node in sorted(nodes):
            prefix = f"node-{node}."
            stats = self.nodes.get(node)
            counts = byte_counts.nodes.get(node) if byte_counts is not None else None
            out[prefix + "request-latency-avg"] = stats.latency_avg.measure(now_ms) if stats is not None else NAN
            out[prefix + "request-latency-max"] = stats.latency_max.measure(now_ms) if stats is not None else NAN
            out[prefix + "outgoing-byte-total"] = byte_counts.outgoing_by_node.get(node, 0) if byte_counts else 0
            out[prefix + "outgoing-byte-rate"] = counts.outgoing_rate.measure(now_ms) if counts is not None else 0.0
            out[prefix + "incoming-byte-total"] = counts.incoming if counts is not None else 0
            out[prefix + "request-total"] = counts.requests if counts is not None else 0
            out[prefix + "request-rate"] = counts.request_rate.measure(now_ms) if counts is not None else 0.0
        return out


@dataclass(frozen=True)
class MetricDef:
    """One metric of ``Producer.metrics()``: its key (``{topic}``/``{node}`` stand for the tag), unit, meaning."""

    name: str
    unit: str
    description: str


_W = "over the window (`metrics.num.samples` × `metrics.sample.window.ms`)"

METRIC_DEFS: Final[tuple[MetricDef, ...]] = (
    MetricDef("record-send-total", "records", "Records acknowledged by the brokers (Java counts them when they go into a request, so once per attempt)."),
    MetricDef("record-send-rate", "records/s", f"`record-send-total`'s rate {_W}."),
    MetricDef("record-error-total", "records", "Records that failed: refused by a broker, expired past `delivery.timeout.ms`, or failed by `close()` or an aborted transaction."),
    MetricDef("record-error-rate", "records/s", f"`record-error-total`'s rate {_W}."),
    MetricDef("record-retry-total", "records", "Records whose batch was put back in the queue to be sent again (a split of a too-large batch is not counted)."),
    MetricDef("record-retry-rate", "records/s", f"`record-retry-total`'s rate {_W}."),
    MetricDef("record-size-avg", "bytes", f"A batch's bytes over its records, averaged per batch sent {_W} (Java averages each record's size)."),
    MetricDef("record-size-max", "bytes", f"The largest per-batch mean record size {_W} (Java: the largest record)."),
    MetricDef("batch-size-avg", "bytes", f"Wire size of the batches sent, per batch {_W}."),
    MetricDef("batch-size-max", "bytes", f"The largest batch sent {_W}."),
    MetricDef("records-per-request-avg", "records", f"Records per Produce request {_W}."),
    MetricDef("compression-rate-avg", "ratio", f"Compressed over uncompressed size of the batches sent {_W} (1.0 without compression)."),
    MetricDef("record-queue-time-avg", "ms", f"From a batch's creation to its going into a request (each attempt counts) {_W}."),
    MetricDef("record-queue-time-max", "ms", f"The longest of those {_W}."),
    MetricDef("request-latency-avg", "ms", f"From writing a Produce request to its answer {_W} (requests that failed are not counted)."),
    MetricDef("request-latency-max", "ms", f"The longest of those {_W}."),
    MetricDef("request-rate", "requests/s", f"Produce requests sent per second {_W}."),
    MetricDef("request-total", "requests", "Produce requests sent."),
    MetricDef("requests-in-flight", "requests", "Produce requests written or being written and not answered yet."),
    MetricDef("produce-throttle-time-avg", "ms", f"The throttle time in the brokers' Produce answers {_W}."),
    MetricDef("produce-throttle-time-max", "ms", f"The largest of those {_W}."),
    MetricDef("buffer-total-bytes", "bytes", "`buffer.memory`."),
    MetricDef("buffer-available-bytes", "bytes", "The part of `buffer.memory` no batch holds."),
    MetricDef("bufferpool-wait-time-total", "ns", "Time `send()` calls spent waiting for buffer memory, in all."),
    MetricDef("bufferpool-wait-ratio", "ratio", f"That waiting time over the elapsed time {_W} (calls waiting at once add up)."),
    MetricDef("waiting-threads", "calls", "`send()` calls waiting for buffer memory now (Java: threads)."),
    MetricDef("metadata-age", "s", "Since the last successful metadata refresh (`inf` before the first)."),
    MetricDef("outgoing-byte-total", "bytes", "Bytes written to the brokers, every request of every connection."),
    MetricDef("outgoing-byte-rate", "bytes/s", f"Those bytes' rate {_W}."),
    MetricDef("incoming-byte-total", "bytes", "Bytes read from the brokers."),
    MetricDef("connection-count", "connections", "Broker connections open now."),
    MetricDef("batch-split-total", "batches", "Batches the broker refused as too large (`MESSAGE_TOO_LARGE`) and the producer split to send again."),
    MetricDef("batch-split-rate", "batches/s", f"`batch-split-total`'s rate {_W}."),
    MetricDef("delivery-latency-avg", "ms", f"Not in Java: from a record's `send()` to its acknowledgement, per record acknowledged {_W}, modelled per batch (see the Prometheus histogram `kafka_producer_delivery_latency_seconds`)."),
    MetricDef("delivery-latency-max", "ms", f"Not in Java: the longest of those {_W} (a batch's first record's, exact)."),
    MetricDef("topic.{topic}.record-send-total", "records", "`record-send-total` of one topic."),
    MetricDef("topic.{topic}.record-send-rate", "records/s", "`record-send-rate` of one topic."),
    MetricDef("topic.{topic}.byte-total", "bytes", "Wire bytes of the topic's batches sent (each attempt counts)."),
    MetricDef("topic.{topic}.byte-rate", "bytes/s", f"Those bytes' rate {_W}."),
    MetricDef("topic.{topic}.compression-rate", "ratio", "`compression-rate-avg` of the topic's batches."),
    MetricDef("topic.{topic}.record-error-total", "records", "`record-error-total` of one topic."),
    MetricDef("topic.{topic}.record-error-rate", "records/s", "`record-error-rate` of one topic."),
    MetricDef("topic.{topic}.record-retry-total", "records", "`record-retry-total` of one topic."),
    MetricDef("topic.{topic}.record-retry-rate", "records/s", "`record-retry-rate` of one topic."),
    MetricDef("node-{node}.request-latency-avg", "ms", "`request-latency-avg` of the Produce requests to one broker."),
    MetricDef("node-{node}.request-latency-max", "ms", "`request-latency-max` of the Produce requests to one broker."),
    MetricDef("node-{node}.request-total", "requests", "Requests of every kind written to one broker (Metadata, Produce, …; `request-total` counts Produce requests only)."),
    MetricDef("node-{node}.request-rate", "requests/s", f"Those requests' rate {_W}."),
    MetricDef("node-{node}.outgoing-byte-total", "bytes", "Bytes written to one broker (a bootstrap connection's, before its id is known, as `node--1` …)."),
    MetricDef("node-{node}.outgoing-byte-rate", "bytes/s", f"Those bytes' rate {_W}."),
    MetricDef("node-{node}.incoming-byte-total", "bytes", "Bytes read from one broker."),
)


def render_markdown_table(defs: tuple[MetricDef, ...] = METRIC_DEFS) -> str:
    """The docs' metrics table (docs/reference/metrics.md, between the ``<!-- metrics-table -->`` markers), from ``METRIC_DEFS``."""
    lines = ["| Key | Unit | Meaning |", "|---|---|---|"]
    lines += [f"| `{d.name}` | {d.unit} | {d.description} |" for d in defs]
    return "\n".join(lines) + "\n"
