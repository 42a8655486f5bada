"""The producer's metrics: the Java producer's names and meanings, recorded per batch and per request.

The windowed statistics (Java's ``SampledStat``, ``Avg``, ``Max``, ``Rate``) are in
``aioproducer/stats.py``. Recording happens per batch (at completion, at its request) and per
request, never per record: ``ProducerMetrics`` is what the sender, the buffer pool and the
producer call; ``producer.metrics()`` reads its ``snapshot()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aioproducer.stats import NAN, Avg, ByteCounts, Max, Rate, SampledStat

__all__ = [
    "METRIC_DEFS",
    "Avg",
    "ByteCounts",
    "Max",
    "MetricDef",
    "ProducerMetrics",
    "Rate",
    "SampledStat",
    "render_markdown_table",
]


class _TopicTotals:
    __slots__ = ("send", "bytes", "error", "retry")

    def __init__(self) -> None:
        self.send = 0
        self.bytes = 0
        self.error = 0
        self.retry = 0


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
        self.record_send_total = 0
        self.record_send_rate = Rate(w, n)
        self.record_error_total = 0
        self.record_error_rate = Rate(w, n)
        self.record_retry_total = 0
        self.record_retry_rate = Rate(w, n)
        self.record_size_avg = Avg(w, n)
        self.record_size_max = Max(w, n)
        self.batch_size_avg = Avg(w, n)
        self.batch_size_max = Max(w, n)
        self.records_per_request_avg = Avg(w, n)
        self.compression_rate_avg = Avg(w, n)
        self.queue_time_avg = Avg(w, n)
        self.queue_time_max = Max(w, n)
        self.request_total = 0
        self.request_rate = Rate(w, n)
        self.request_latency_avg = Avg(w, n)
        self.request_latency_max = Max(w, n)
        self.throttle_time_avg = Avg(w, n)
        self.throttle_time_max = Max(w, n)
        self.bufferpool_wait_time_total_ns = 0
        self.bufferpool_wait_ratio = Rate(w, n, per_ns=True)
        self.topics: dict[str, _TopicTotals] = {}
        self.nodes: dict[int, _NodeStats] = {}

    def _topic(self, topic: str) -> _TopicTotals:
        totals = self.topics.get(topic)
        if totals is None:
            totals = self.topics[topic] = _TopicTotals()
        return totals

    # ------------------------------------------------------------ recording (per batch, per request)
    def record_completed(self, topic: str, records: int, ok: bool, now_ms: float) -> None:
        """A batch was acknowledged (``ok``) or failed: its records are sent or in error."""
        totals = self._topic(topic)
        if ok:
            self.record_send_total += records
            self.record_send_rate.record(records, now_ms)
            totals.send += records
        else:
            self.record_error_total += records
            self.record_error_rate.record(records, now_ms)
            totals.error += records

    def record_retry(self, topic: str, records: int, now_ms: float) -> None:
        """A batch goes back to the queue to be sent again."""
        self.record_retry_total += records
        self.record_retry_rate.record(records, now_ms)
        self._topic(topic).retry += records

    def record_batch_sent(
        self, topic: str, records: int, size: int, compression_ratio: float, created_ms: float, now_ms: float
    ) -> None:
        """A batch went into a Produce request: its size, its records' mean size, how long it queued."""
        self.batch_size_avg.record(size, now_ms)
        self.batch_size_max.record(size, now_ms)
        if records:
            per_record = size / records
            self.record_size_avg.record(per_record, now_ms)
            self.record_size_max.record(per_record, now_ms)
        self.compression_rate_avg.record(compression_ratio, now_ms)
        queued = now_ms - created_ms
        self.queue_time_avg.record(queued, now_ms)
        self.queue_time_max.record(queued, now_ms)
        self._topic(topic).bytes += size

    def record_request(self, records: int, now_ms: float) -> None:
        """A Produce request with ``records`` records was sent."""
        self.request_total += 1
        self.request_rate.record(1, now_ms)
        self.records_per_request_avg.record(records, now_ms)

    def record_response(self, node: int, latency_ms: float, throttle_time_ms: int, now_ms: float) -> None:
        """A Produce request was answered after ``latency_ms`` (throttle time < 0: the answer had none, acks=0)."""
        self.request_latency_avg.record(latency_ms, now_ms)
        self.request_latency_max.record(latency_ms, now_ms)
        stats = self.nodes.get(node)
        if stats is None:
            stats = self.nodes[node] = _NodeStats(self.window_ms, self.num_samples)
        stats.latency_avg.record(latency_ms, now_ms)
        stats.latency_max.record(latency_ms, now_ms)
        if throttle_time_ms >= 0:
            self.throttle_time_avg.record(throttle_time_ms, now_ms)
            self.throttle_time_max.record(throttle_time_ms, now_ms)

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
        outgoing = byte_counts.outgoing if byte_counts is not None else 0
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
        }
        for topic, totals in self.topics.items():
            prefix = f"topic.{topic}."
            out[prefix + "record-send-total"] = totals.send
            out[prefix + "byte-total"] = totals.bytes
            out[prefix + "record-error-total"] = totals.error
            out[prefix + "record-retry-total"] = totals.retry
        nodes = set(self.nodes)
        if byte_counts is not None:
            nodes.update(byte_counts.outgoing_by_node)
        for node in sorted(nodes):
            prefix = f"node-{node}."
            stats = self.nodes.get(node)
            out[prefix + "request-latency-avg"] = stats.latency_avg.measure(now_ms) if stats is not None else NAN
            out[prefix + "request-latency-max"] = stats.latency_max.measure(now_ms) if stats is not None else NAN
            out[prefix + "outgoing-byte-total"] = byte_counts.outgoing_by_node.get(node, 0) if byte_counts else 0
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
    MetricDef("topic.{topic}.record-send-total", "records", "`record-send-total` of one topic."),
    MetricDef("topic.{topic}.byte-total", "bytes", "Wire bytes of the topic's batches sent (each attempt counts)."),
    MetricDef("topic.{topic}.record-error-total", "records", "`record-error-total` of one topic."),
    MetricDef("topic.{topic}.record-retry-total", "records", "`record-retry-total` of one topic."),
    MetricDef("node-{node}.request-latency-avg", "ms", "`request-latency-avg` of the Produce requests to one broker."),
    MetricDef("node-{node}.request-latency-max", "ms", "`request-latency-max` of the Produce requests to one broker."),
    MetricDef("node-{node}.outgoing-byte-total", "bytes", "Bytes written to one broker (a bootstrap connection's, before its id is known, as `node--1` …)."),
)


def render_markdown_table(defs: tuple[MetricDef, ...] = METRIC_DEFS) -> str:
    """The README's metrics table (between the ``<!-- metrics-table -->`` markers), from ``METRIC_DEFS``."""
    lines = ["| Key | Unit | Meaning |", "|---|---|---|"]
    lines += [f"| `{d.name}` | {d.unit} | {d.description} |" for d in defs]
    return "\n".join(lines) + "\n"
