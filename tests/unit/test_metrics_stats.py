"""The windowed statistics behind ``Producer.metrics()``, on a fake clock (Java's SampledStat semantics)."""

from __future__ import annotations

import math
from array import array

import pytest

from aioproducer._native import RECORD_BATCH_OVERHEAD, ProducerBatch, RecordBatchBuilder, RequestCounters, produce_topic_data
from aioproducer.internals.metrics import FOLD_PER_WINDOW, Avg, ByteCounts, DeliveryLatency, Max, ProducerMetrics, Rate


def _sent(topic: str, records: int, size: int, ratio: float = 1.0, created_ms: float = 0.0) -> ProducerBatch:
    """A built batch of ``topic`` holding ``records`` records of ``size`` wire bytes in all, created at ``created_ms``.

    ``ratio`` < 1 gives a compressed batch (zstd, values of zeros) whose section is ``ratio``
    of its uncompressed size; the statistics read what the batch says (``_size``, ``_ratio``).
    """
    codec = 0 if ratio == 1.0 else 4
    builder = RecordBatchBuilder(codec, 1 << 20)
    value = bytes(max(0, (size - RECORD_BATCH_OVERHEAD) // records - 8))
    for i in range(records):
        builder.append(1000 + i, None, value)
    batch = ProducerBatch(topic, 0, builder, created_ms, 0, None, delivery_timeout_ms=120_000)  # type: ignore[arg-type]  # no loop: never completed
    batch.records()  # built: its size and compression ratio are final
    return batch


def _size(batch: ProducerBatch) -> int:
    return batch.estimated_size()


def _ratio(batch: ProducerBatch) -> float:
    return batch.builder.compression_ratio


def _snapshot(m: ProducerMetrics, now_ms: float) -> dict[str, float | int]:
    return m.snapshot(
        now_ms, buffer_total=1, buffer_available=1, waiting=0, requests_in_flight=0,
        metadata_age_ms=0, connection_count=0, byte_counts=None,
    )


def test_avg_and_max_over_the_live_samples() -> None:
    avg, mx = Avg(1000, 2), Max(1000, 2)
    assert math.isnan(avg.measure(0)) and math.isnan(mx.measure(0))  # nothing recorded: NaN, as Java
    for t, v in ((0, 10.0), (500, 20.0), (1200, 60.0)):  # the third starts the second sample
        avg.record(v, t)
        mx.record(v, t)
    assert avg.measure(1500) == pytest.approx(30.0)
    assert mx.measure(1500) == 60.0


def test_samples_roll_over_and_obsolete_ones_are_purged() -> None:
    avg, mx = Avg(1000, 2), Max(1000, 2)
    avg.record(100.0, 0)
    mx.record(100.0, 0)
    avg.record(1.0, 1000)  # sample 1 starts at 1000
    mx.record(1.0, 1000)
    # At 1999 sample 0 (started at 0) is not yet 2 windows old: still counted.
    assert avg.measure(1999) == pytest.approx(50.5)
    assert mx.measure(1999) == 100.0
    # At 2000 it is obsolete (num_samples * window): reset, only the later value remains.
    assert avg.measure(2000) == pytest.approx(1.0)
    assert mx.measure(2000) == 1.0
    avg.record(7.0, 2100)  # rolls over onto the reset sample 0
    assert avg.measure(2100) == pytest.approx(4.0)
    assert math.isnan(avg.measure(10_000))  # idle long enough: everything obsolete


def test_rate_is_the_windowed_sum_over_the_elapsed_window() -> None:
    rate = Rate(1000, 2)
    rate.record(10, 0)
    # Elapsed 500 ms, short of (num_samples - 1) full windows: the missing window is added, 10 / 1.5 s.
    assert rate.measure(500) == pytest.approx(10 / 1.5)
    rate.record(30, 1500)  # second sample
    # From the oldest sample's start (0) to now (1500): 40 / 1.5 s.
    assert rate.measure(1500) == pytest.approx(40 / 1.5)
    # At 2000 sample 0 is obsolete (reset, starting at 2000); the oldest is sample 1 (1500): 30 / (0.5 + 1) s.
    assert rate.measure(2000) == pytest.approx(30 / 1.5)
    assert rate.measure(3600) == 0.0


def test_rate_per_ns_is_a_ratio() -> None:
    ratio = Rate(1000, 2, per_ns=True)
    ratio.record(500_000_000, 0)  # waited half a second
    assert ratio.measure(1000) == pytest.approx(0.5)


def test_producer_metrics_snapshot_names_topics_and_nodes() -> None:
    m = ProducerMetrics(1000, 2)
    counts = ByteCounts(1000, 2)
    counts.sent(1, 300, 100)
    counts.incoming += 50
    sent = _sent("t", 4, 400, created_ms=10)
    m.record_request([sent], 30)
    m.record_response(1, 5.0, 7, 35)
    m.record_completed("t", 4, True, 35)
    m.record_retry("t", 2, 36)
    m.record_completed("t", 3, False, 40)
    snap = m.snapshot(
        100, buffer_total=1000, buffer_available=900, waiting=0, requests_in_flight=0,
        metadata_age_ms=2500, connection_count=1, byte_counts=counts,
    )
    assert snap["record-send-total"] == 4 and snap["record-error-total"] == 3 and snap["record-retry-total"] == 2
    assert snap["record-queue-time-max"] == 20 and snap["batch-size-avg"] == _size(sent) and snap["record-size-avg"] == _size(sent) / 4
    assert snap["records-per-request-avg"] == 4 and snap["request-total"] == 1
    assert snap["produce-throttle-time-max"] == 7 and snap["request-latency-avg"] == 5.0
    assert snap["metadata-age"] == 2.5
    assert snap["outgoing-byte-total"] == 300 and snap["incoming-byte-total"] == 50
    assert snap["outgoing-byte-rate"] == pytest.approx(300.0)  # 300 bytes over 0 ms elapsed plus the missing full window
    assert snap["topic.t.record-send-total"] == 4 and snap["topic.t.byte-total"] == _size(sent)
    assert snap["topic.t.record-error-total"] == 3 and snap["topic.t.record-retry-total"] == 2
    assert snap["node-1.request-latency-max"] == 5.0 and snap["node-1.outgoing-byte-total"] == 300


def test_window_settings_are_validated() -> None:
    with pytest.raises(ValueError):
        Avg(1000, 0)
    assert ProducerMetrics(0, 1).window_ms == 1  # 0 (accepted by Java) is taken as 1 ms


def test_delivery_latency_spreads_a_batch_between_its_first_and_last_record() -> None:
    h = DeliveryLatency((0.001, 0.005, 0.01))  # bounds 1, 5, 10 ms
    h.record_batch(1, 3.0, 3.0)  # one record at 3 ms
    assert h.buckets == [0, 1, 0, 0]
    h.record_batch(5, 12.0, 0.0)  # 12, 9, 6, 3, 0 ms: one above 10, two in (5, 10], two in (1, 5] and [0, 1]
    assert h.buckets == [1, 2, 2, 1]
    h.record_batch(3, 10.0, 5.0)  # 10, 7.5, 5 ms: the bounds themselves count in their bucket (le)
    assert h.buckets == [1, 3, 4, 1]
    assert h.count == 9 and h.sum_ms == pytest.approx(3.0 + 5 * 6.0 + 3 * 7.5)
    assert h.cumulative() == [(0.001, 1), (0.005, 4), (0.01, 8), (math.inf, 9)]


def test_delivery_latency_rows_packed_as_a_fold_gives_them_count_as_a_list_of_floats() -> None:
    """A fold's latency rows come packed (``RequestCounters.take``); they add what the same rows as floats add."""
    rows = [1, 3.0, 3.0, 5, 12.0, 0.0, 3, 10.0, 5.0, 2, 0.5, 0.25]
    as_list, packed = DeliveryLatency((0.001, 0.005, 0.01)), DeliveryLatency((0.001, 0.005, 0.01))
    assert as_list.record_batches(rows, 1.0, 2.0) == packed.record_batches(array("d", rows).tobytes(), 1.0, 2.0)
    assert (packed.buckets, packed.count, packed.sum_ms) == (as_list.buckets, as_list.count, as_list.sum_ms)
    assert packed.buckets == [3, 3, 4, 1] and packed.count == 11


def test_producer_metrics_record_delivery_latency_per_record_of_acknowledged_batches() -> None:
    m = ProducerMetrics(1000, 2)
    h = m.delivery_latency
    # created at 100 ms (the first record's append), acknowledged at 130: the first record waited
    # 30 ms; the timestamps span 20 ms, so the last waited 10 ms; four records at 30, 23.3, 16.7, 10.
    m.record_completed("t", 4, True, 130.0, created_ms=100.0, spread_ms=20)
    m.record_completed("t", 2, True, 140.0, created_ms=139.5, spread_ms=7)  # spread clamped to 0.5 ms
    m.record_completed("t", 3, False, 150.0, created_ms=0.0, spread_ms=0)  # failed: no acknowledgement
    snap = m.snapshot(  # folds: the histogram is exact for whoever reads it after a snapshot
        150, buffer_total=1, buffer_available=1, waiting=0, requests_in_flight=0,
        metadata_age_ms=0, connection_count=0, byte_counts=None,
    )
    assert h.count == 6 == m.record_send_total
    cumulative = dict(h.cumulative())
    assert cumulative[0.001] == 2 and cumulative[0.005] == 2 and cumulative[0.01] == 3 and cumulative[0.025] == 5 and cumulative[0.05] == 6
    assert h.sum_ms == pytest.approx(4 * 20.0 + 2 * 0.25)
    assert snap["delivery-latency-max"] == 30.0
    assert snap["delivery-latency-avg"] == pytest.approx((4 * 20.0 + 2 * 0.25) / 6)  # per record, not per batch


def test_split_topic_rates_and_node_counts() -> None:
    m = ProducerMetrics(1000, 2)
    counts = ByteCounts(1000, 2)
    counts.sent(1, 300, 0)
    counts.sent(1, 100, 10)
    counts.received(1, 40)
    counts.received(-1, 5)
    sent = [_sent("t", 4, 400, 0.5), _sent("t", 4, 200, 0.25)]
    assert all(_ratio(b) < 1 for b in sent)  # compressed: each batch's own ratio counts
    m.record_request(sent, 10)
    m.record_split(20)
    m.record_completed("t", 4, True, 30, created_ms=0)
    m.record_retry("t", 2, 30)
    m.record_completed("t", 3, False, 40, created_ms=0)
    snap = m.snapshot(
        500, buffer_total=1, buffer_available=1, waiting=0, requests_in_flight=0,
        metadata_age_ms=0, connection_count=1, byte_counts=counts,
    )
    assert snap["batch-split-total"] == 1 and snap["batch-split-rate"] == pytest.approx(1 / 1.48)  # since 20 ms, + a window
    assert snap["topic.t.compression-rate"] == pytest.approx((_ratio(sent[0]) + _ratio(sent[1])) / 2)
    assert snap["topic.t.byte-rate"] == pytest.approx((_size(sent[0]) + _size(sent[1])) / 1.49)
    assert snap["topic.t.record-send-rate"] == pytest.approx(4 / 1.47)
    assert snap["topic.t.record-error-rate"] == pytest.approx(3 / 1.46)
    assert snap["topic.t.record-retry-rate"] == pytest.approx(2 / 1.47)
    assert snap["node-1.request-total"] == 2 and snap["node-1.request-rate"] == pytest.approx(2 / 1.5)
    assert snap["node-1.outgoing-byte-rate"] == pytest.approx(400 / 1.5)
    assert snap["node-1.incoming-byte-total"] == 40 and snap["node--1.incoming-byte-total"] == 5
    assert snap["incoming-byte-total"] == 45
    assert snap["node--1.request-total"] == 0 and snap["node--1.outgoing-byte-total"] == 0


def test_the_request_build_counts_its_statistics_and_gives_its_earliest_delivery_deadline_in_the_same_pass() -> None:
    """``produce_topic_data`` (the sender's one call per request) adds what ``add_request`` does, and the deadline."""
    batches = [_sent("a", 4, 400, 0.5, created_ms=7), _sent("b", 1, 1000, created_ms=2), _sent("a", 2, 100, created_ms=5)]
    built, alone = RequestCounters(1.0), RequestCounters(1.0)
    ordered, topic_data, deadline, due = produce_topic_data(batches, 10, built)
    assert ordered == [batches[0], batches[2], batches[1]]  # grouped by topic, as the request carries them
    assert [(topic, len(parts)) for topic, parts in topic_data] == [("a", 2), ("b", 1)]
    assert deadline == min(b.delivery_deadline_ms for b in batches) == 2 + 120_000
    assert due is False and alone.add_request(batches, 10) is False  # the first values: nothing to fold yet
    (generation,) = built.take()
    assert [generation] == alone.take()
    head, send, errors, latencies, topics = generation
    assert head[:4] == (10, 1, 7, 3)  # since, requests, records, batches
    assert head[11] == 10 - 2  # the queue time's maximum: the oldest batch's
    assert (send, errors, latencies) == (0, 0, b"")
    assert [(topic, batches) for topic, _, _, batches, _, _ in topics] == [("a", 2), ("b", 1)]
    assert built.take() == [] and not built.pending  # taken once
    assert produce_topic_data(batches, 10)[3] is False  # without counters: nothing counted


def test_a_generation_spans_a_thousandth_of_the_sample_window() -> None:
    """30 ms with the default 30 s window: values 29.9 ms apart are folded together, 30 ms apart not."""
    assert ProducerMetrics().fold_ms == 30_000 / FOLD_PER_WINDOW == 30.0 and ProducerMetrics(1000, 2).fold_ms == 1.0
    m = ProducerMetrics()
    m.record_completed("t", 1, True, 100.0)
    m.record_completed("t", 1, True, 129.9)
    assert m.counters.pending and m.record_send_total == 0  # one generation, not folded yet
    m.record_completed("t", 1, True, 130.0)  # closes it: a fold is due, and takes both generations
    assert m.record_send_total == 3 and not m.counters.pending


def test_counters_close_a_generation_at_the_first_value_fold_ms_after_its_first() -> None:
    """Values within ``fold_ms`` of a generation's first join it; a later one opens the next and
    says a fold is due; ``take()`` hands back both, each with its own first time."""
    counters = RequestCounters(1.0)
    assert counters.add_acknowledged("t", 3, 100.0, 90.0, 0.0) is False
    assert counters.add_errors("t", 2, 100.9) is False  # 0.9 ms after the first: the same generation
    assert counters.add_acknowledged("u", 4, 101.0, 61.0, 0.0) is True  # 1 ms after: the next one
    first, second = counters.take()
    # each acknowledged batch's latency row, packed doubles: records, the first's and the last's latency
    assert (first[0][0], first[1], first[2], array("d", first[3]).tolist()) == (100.0, 3, 2, [3, 10.0, 10.0])
    assert (second[0][0], second[1], second[2], array("d", second[3]).tolist()) == (101.0, 4, 0, [4, 40.0, 40.0])
    assert [t[0] for t in first[4]] == ["t"] and [t[0] for t in second[4]] == ["u"]


def test_a_request_records_each_batch_as_java_does_in_one_update_per_statistic() -> None:
    m = ProducerMetrics(1000, 2)
    first = [_sent("a", 4, 400, 0.5, created_ms=2), _sent("b", 1, 1000, 1.0, created_ms=8), _sent("a", 2, 100, 0.25, created_ms=5)]
    second = _sent("b", 10, 500, created_ms=10)
    m.record_request(first, 10)
    m.record_request([second], 20)
    snap = _snapshot(m, 20)
    every = [*first, second]
    sizes = [_size(b) for b in every]
    per_record = [_size(b) / b.record_count for b in every]
    ratios = [_ratio(b) for b in every]
    assert snap["batch-size-avg"] == pytest.approx(sum(sizes) / 4) and snap["batch-size-max"] == max(sizes)
    assert snap["record-size-avg"] == pytest.approx(sum(per_record) / 4) and snap["record-size-max"] == max(per_record)
    assert snap["compression-rate-avg"] == pytest.approx(sum(ratios) / 4)
    assert snap["record-queue-time-avg"] == pytest.approx((8 + 2 + 5 + 10) / 4) and snap["record-queue-time-max"] == 10
    assert snap["records-per-request-avg"] == pytest.approx((7 + 10) / 2) and snap["request-total"] == 2
    assert snap["topic.a.byte-total"] == sizes[0] + sizes[2] and snap["topic.b.byte-total"] == sizes[1] + sizes[3]
    assert snap["topic.a.compression-rate"] == pytest.approx((ratios[0] + ratios[2]) / 2)
    assert snap["topic.b.compression-rate"] == pytest.approx(1.0)


def test_requests_are_folded_exactly_across_samples_and_their_totals_read_at_once() -> None:
    """Requests within ``fold_ms`` (1 ms for a 1 s window) of each other are one windowed update each, at the first one's time:
    the maximum of their maxima, the sums and counts of their averages; the totals count at once."""
    m = ProducerMetrics(1000, 2)
    small, large = _sent("a", 1, 200, created_ms=99.0), _sent("a", 1, 900, created_ms=60.0)
    later = _sent("b", 2, 500, created_ms=1190.0)
    m.record_request([large], 100.0)
    m.record_request([small], 100.5)  # within 1 ms: folded with the first, at 100 ms
    now = _snapshot(m, 100.5)  # totals at once: a reader folds what waits
    assert now["request-total"] == 2 and now["topic.a.byte-total"] == _size(small) + _size(large)
    m.record_request([later], 1200.0)  # a new sample of the 1000 ms window
    snap = _snapshot(m, 1500)
    assert snap["batch-size-max"] == _size(large) and snap["record-queue-time-max"] == pytest.approx(40.0)
    assert snap["batch-size-avg"] == pytest.approx((_size(small) + _size(large) + _size(later)) / 3)
    assert snap["records-per-request-avg"] == pytest.approx(4 / 3)
    assert snap["request-rate"] == pytest.approx(3 / 1.4)  # from the oldest sample (100 ms), at least one window
    assert snap["topic.a.byte-rate"] == pytest.approx((_size(small) + _size(large)) / 1.4)
    # the first sample ages out (obsolete after 2 windows from 100 ms): only the last request remains
    aged = _snapshot(m, 2150)
    assert aged["batch-size-max"] == _size(later) and aged["record-queue-time-max"] == pytest.approx(10.0)
    assert aged["topic.a.byte-rate"] == 0.0 and aged["request-total"] == 3


def test_answers_count_in_the_latency_per_node_and_across_samples() -> None:
    """Each answer's latency counts overall and for its node; an answer without a throttle time
    (acks=0) counts in the latency only; the first sample ages out."""
    m = ProducerMetrics(1000, 2)
    m.record_response(1, 9.0, 3, 100.0)
    m.record_response(2, 4.0, -1, 100.4)
    m.record_response(1, 5.0, 1, 100.9)
    m.record_response(2, 20.0, 0, 1200.0)  # a new sample of the 1000 ms window
    snap = _snapshot(m, 1500)
    assert snap["request-latency-avg"] == pytest.approx((9 + 4 + 5 + 20) / 4) and snap["request-latency-max"] == 20.0
    assert snap["node-1.request-latency-avg"] == pytest.approx(7.0) and snap["node-1.request-latency-max"] == 9.0
    assert snap["node-2.request-latency-avg"] == pytest.approx(12.0) and snap["node-2.request-latency-max"] == 20.0
    assert snap["produce-throttle-time-avg"] == pytest.approx(4 / 3) and snap["produce-throttle-time-max"] == 3
    aged = _snapshot(m, 2150)  # the first sample is obsolete: only the last answer remains
    assert aged["request-latency-max"] == 20.0 and math.isnan(aged["node-1.request-latency-max"])
    assert aged["produce-throttle-time-max"] == 0


def test_completions_are_folded_exactly_across_samples_and_read_at_once() -> None:
    m = ProducerMetrics(1000, 2)
    m.record_completed("t", 3, True, 100.0, created_ms=90.0)
    m.record_completed("t", 2, False, 100.5)  # within 1 ms: folded with the first, at 100 ms
    m.record_completed("u", 4, True, 100.9, created_ms=60.9)
    now = _snapshot(m, 100.9)  # totals at once: a reader folds what waits
    assert now["record-send-total"] == 7 and now["record-error-total"] == 2
    m.record_completed("t", 5, True, 1200.0, created_ms=1195.0)  # a new sample of the 1000 ms window
    snap = _snapshot(m, 1500)
    # the rates' window runs from the oldest sample (100 ms), at least one whole window: 1.4 s
    assert snap["record-send-rate"] == pytest.approx(12 / 1.4) and snap["record-error-rate"] == pytest.approx(2 / 1.4)
    assert snap["topic.t.record-send-rate"] == pytest.approx(8 / 1.4) and snap["topic.u.record-send-rate"] == pytest.approx(4 / 1.4)
    assert snap["topic.t.record-error-rate"] == pytest.approx(2 / 1.4)
    assert snap["delivery-latency-max"] == pytest.approx(40.0)
    assert snap["delivery-latency-avg"] == pytest.approx((3 * 10 + 4 * 40 + 5 * 5) / 12)
    # the first sample ages out (obsolete after 2 windows from 100 ms): only the last fold remains
    later = _snapshot(m, 2150)
    assert later["delivery-latency-max"] == 5.0 and later["record-error-rate"] == 0.0
