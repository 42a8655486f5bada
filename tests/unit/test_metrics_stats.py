"""The windowed statistics behind ``Producer.metrics()``, on a fake clock (Java's SampledStat semantics)."""

from __future__ import annotations

import math

import pytest

from aioproducer.internals.metrics import Avg, ByteCounts, Max, ProducerMetrics, Rate


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
    m.record_batch_sent("t", 4, 400, 1.0, created_ms=10, now_ms=30)
    m.record_request(4, 30)
    m.record_response(1, 5.0, 7, 35)
    m.record_completed("t", 4, True, 35)
    m.record_retry("t", 2, 36)
    m.record_completed("t", 3, False, 40)
    snap = m.snapshot(
        100, buffer_total=1000, buffer_available=900, waiting=0, requests_in_flight=0,
        metadata_age_ms=2500, connection_count=1, byte_counts=counts,
    )
    assert snap["record-send-total"] == 4 and snap["record-error-total"] == 3 and snap["record-retry-total"] == 2
    assert snap["record-queue-time-max"] == 20 and snap["batch-size-avg"] == 400 and snap["record-size-avg"] == 100
    assert snap["records-per-request-avg"] == 4 and snap["request-total"] == 1
    assert snap["produce-throttle-time-max"] == 7 and snap["request-latency-avg"] == 5.0
    assert snap["metadata-age"] == 2.5
    assert snap["outgoing-byte-total"] == 300 and snap["incoming-byte-total"] == 50
    assert snap["outgoing-byte-rate"] == pytest.approx(300.0)  # 300 bytes over 0 ms elapsed plus the missing full window
    assert snap["topic.t.record-send-total"] == 4 and snap["topic.t.byte-total"] == 400
    assert snap["topic.t.record-error-total"] == 3 and snap["topic.t.record-retry-total"] == 2
    assert snap["node-1.request-latency-max"] == 5.0 and snap["node-1.outgoing-byte-total"] == 300


def test_window_settings_are_validated() -> None:
    with pytest.raises(ValueError):
        Avg(1000, 0)
    assert ProducerMetrics(0, 1).window_ms == 1  # 0 (accepted by Java) is taken as 1 ms
