"""``aioproducer.metrics.prometheus.ProducerCollector``: the exposition of known traffic, parsed back."""

from __future__ import annotations

import importlib
import math
import re
import sys
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aioproducer import Producer
from aioproducer.internals.metrics import METRIC_DEFS
from aioproducer.metrics.prometheus import DELIVERY_LATENCY, SERIES, ProducerCollector
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration

FAST: dict[str, Any] = {"linger_ms": 2, "request_timeout_ms": 1000, "delivery_timeout_ms": 3000}


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, from the text exposition parsed back."""
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_every_metric_def_has_one_valid_prometheus_series() -> None:
    assert len(SERIES) == len(METRIC_DEFS)
    names = [s.name for s in SERIES]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"kafka_producer_[a-z_]+", n) for n in names), names
    by_name = {s.name: s for s in SERIES}
    for name in ("record_send", "record_error", "record_retry", "request", "outgoing_byte", "incoming_byte"):
        assert by_name[f"kafka_producer_{name}_total"].kind == "counter"
    assert by_name["kafka_producer_bufferpool_wait_time_seconds_total"].scale == 1e-9
    assert by_name["kafka_producer_request_latency_avg_seconds"].scale == 1e-3
    for gauge in ("buffer_available_bytes", "buffer_total_bytes", "metadata_age_seconds", "connection_count",
                  "requests_in_flight", "record_send_per_second", "outgoing_byte_per_second"):
        assert by_name["kafka_producer_" + gauge].kind == "gauge"


async def test_exposition_of_known_traffic(mock_cluster: MockCluster) -> None:
    started = time.monotonic()
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, client_id="svc-a", **FAST) as a, \
            Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as b:
        registry = CollectorRegistry()
        registry.register(ProducerCollector(a, b, windowed=True, per_topic=True, per_node=True))
        empty = _samples(registry)  # before any request: the windows are empty
        assert math.isnan(empty[("kafka_producer_request_latency_avg_seconds", (("client_id", "svc-a"),))])
        for i in range(30):
            await a.send("orders", value=b"v%d" % i, partition=i % 6)
        await a.flush()
        await a.send_and_wait("other.topic", value=b"x")
        for i in range(7):
            await b.send("orders", value=b"w%d" % i)
        await b.flush()
        s = _samples(registry)
        wall = time.monotonic() - started
        acked_a, acked_b = a.metrics()["records_sent"], b.metrics()["records_sent"]
    bid = b.config.client_id
    assert re.fullmatch(r"aioproducer-\d+", bid)
    A, B = (("client_id", "svc-a"),), (("client_id", bid),)
    assert acked_a == 31 and acked_b == 7
    assert s[("kafka_producer_record_send_total", A)] == 31
    assert s[("kafka_producer_record_send_total", B)] == 7
    assert s[("kafka_producer_record_error_total", A)] == 0
    assert s[("kafka_producer_topic_record_send_total", (("client_id", "svc-a"), ("topic", "orders")))] == 30
    assert s[("kafka_producer_topic_record_send_total", (("client_id", "svc-a"), ("topic", "other.topic")))] == 1
    assert s[("kafka_producer_topic_record_send_total", (("client_id", bid), ("topic", "orders")))] == 7
    for who in (A, B):
        assert s[("kafka_producer_buffer_available_bytes", who)] == s[("kafka_producer_buffer_total_bytes", who)] > 0
        assert 0 < s[("kafka_producer_request_latency_avg_seconds", who)] <= s[
            ("kafka_producer_request_latency_max_seconds", who)] < wall
        assert s[("kafka_producer_request_total", who)] >= 1
        assert 0 <= s[("kafka_producer_metadata_age_seconds", who)] < wall
        assert s[("kafka_producer_bufferpool_wait_time_seconds_total", who)] == 0
        assert s[("kafka_producer_outgoing_byte_total", who)] > 0 and s[("kafka_producer_record_send_per_second", who)] > 0
    for who, acked in ((A, 31), (B, 7)):  # the delivery-latency histogram: one observation per acknowledged record
        assert s[("kafka_producer_delivery_latency_seconds_count", who)] == acked
        assert s[("kafka_producer_delivery_latency_seconds_bucket", (*who, ("le", "+Inf")))] == acked
        assert 0 < s[("kafka_producer_delivery_latency_seconds_sum", who)] < acked * wall
        buckets = sorted((float(dict(labels)["le"]), v) for (name, labels), v in s.items()
                         if name == "kafka_producer_delivery_latency_seconds_bucket" and who[0] in labels)
        assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
        assert all(v == acked for le, v in buckets if le >= wall)  # every observation below the wall time
    nodes = {dict(labels).get("node_id") for (name, labels) in s if name == "kafka_producer_node_outgoing_byte_total"}
    assert nodes and all(n is not None and re.fullmatch(r"-?\d+", n) for n in nodes)
    node_sum = sum(v for (name, labels), v in s.items()
                   if name == "kafka_producer_node_outgoing_byte_total" and ("client_id", "svc-a") in labels)
    assert node_sum == s[("kafka_producer_outgoing_byte_total", A)]
    # every sample names its producer; nothing else is exported
    assert all(dict(labels)["client_id"] in ("svc-a", bid) for (_, labels) in s)
    # a second collector in the same registry would repeat the names: refused, not merged silently
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(ProducerCollector(Producer(bootstrap_servers=mock_cluster.bootstrap_servers)))


async def test_by_default_counters_current_gauges_and_the_histogram_the_rest_opt_in(mock_cluster: MockCluster) -> None:
    """Prometheus' conventions by default (rate() in the query); Java's windowed gauges and the per-topic and
    per-node series each behind their option."""
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, client_id="d", **FAST) as producer:
        await producer.send_and_wait("orders", b"v")
        exported: dict[str, set[str]] = {}
        for option in ("default", "windowed", "per_topic", "per_node"):
            registry = CollectorRegistry()
            registry.register(ProducerCollector(producer, **({} if option == "default" else {option: True})))
            exported[option] = {family.name for family in text_string_to_metric_families(generate_latest(registry).decode())}
    default = exported["default"]
    assert {"kafka_producer_record_send", "kafka_producer_buffer_available_bytes", "kafka_producer_connection_count",
            "kafka_producer_metadata_age_seconds", DELIVERY_LATENCY} <= default
    by_name = {s.name: s for s in SERIES}
    for name in default - {DELIVERY_LATENCY}:
        series = by_name.get(name) or by_name[name + "_total"]
        assert series.scope == "" and not series.windowed, name
    assert not any(re.search(r"_(avg|max)(_|$)|per_second|_ratio$", name) for name in default), default
    windowed = exported["windowed"] - default
    assert {"kafka_producer_record_send_per_second", "kafka_producer_request_latency_avg_seconds",
            "kafka_producer_bufferpool_wait_ratio", "kafka_producer_delivery_latency_max_seconds"} <= windowed
    assert all(by_name[name].windowed and by_name[name].scope == "" for name in windowed)
    assert exported["per_topic"] - default == {s.name.removesuffix("_total") for s in SERIES
                                               if s.scope == "topic" and not s.windowed}
    assert exported["per_node"] - default == {s.name.removesuffix("_total") for s in SERIES
                                              if s.scope == "node" and not s.windowed}
    with pytest.raises(TypeError, match="windowed must be a bool, got str"):
        ProducerCollector(producer, windowed="yes")  # type: ignore[arg-type]


def test_delivery_latency_histogram_in_seconds_per_record() -> None:
    producer = Producer(client_id="h")  # not started: the collector reads it directly
    metrics = producer._engine.metrics
    assert math.isnan(producer.metrics()["delivery-latency-max"])  # nothing acknowledged yet
    registry = CollectorRegistry()
    registry.register(ProducerCollector(producer))
    metrics.record_completed("t", 4, True, 130.0, created_ms=100.0, spread_ms=20)  # 30, 23.3, 16.7, 10 ms
    metrics.record_completed("t", 1, True, 200.0, created_ms=199.5)  # 0.5 ms
    metrics.record_completed("t", 9, False, 300.0, created_ms=0.0)  # failed: not delivered, not observed
    s = _samples(registry)
    H = "kafka_producer_delivery_latency_seconds"

    def bucket(le: str) -> float:
        return s[(H + "_bucket", (("client_id", "h"), ("le", le)))]

    assert bucket("0.001") == 1 and bucket("0.005") == 1 and bucket("0.01") == 2 and bucket("0.025") == 4
    assert bucket("0.05") == bucket("120.0") == bucket("+Inf") == 5
    assert s[(H + "_count", (("client_id", "h"),))] == 5
    assert s[(H + "_sum", (("client_id", "h"),))] == pytest.approx((4 * 20.0 + 0.5) / 1000)


def test_one_client_id_twice_is_refused() -> None:
    p, q = Producer(client_id="same"), Producer(client_id="same")
    with pytest.raises(ValueError, match="same"):
        ProducerCollector(p, q)


def test_import_without_prometheus_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "prometheus_client" or m.startswith("prometheus_client.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "aioproducer.metrics.prometheus")
    with pytest.raises(ImportError, match=re.escape("pip install 'aioproducer[prometheus]'")):
        importlib.import_module("aioproducer.metrics.prometheus")


def test_docs_excerpt_names_exported_series() -> None:
    """The excerpt of ``generate_latest()`` on the Observability page (docs/how-to/observability.md)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "observability.md").read_text()
    start = readme.index("\n## Prometheus\n")
    end = re.compile(r"^##+ ", re.M).search(readme, start + 2)  # the next heading, whichever it is
    section = readme[start : end.start() if end else None]
    excerpt = section.split("```text\n", 1)[1].split("```", 1)[0]
    families = list(text_string_to_metric_families(excerpt))
    names = {s.name for s in SERIES} | {DELIVERY_LATENCY}
    assert families and all(f.name in names or f.name + "_total" in names for f in families)
    assert all("client_id" in s.labels for f in families for s in f.samples)


async def test_a_scrape_from_another_thread_reads_on_the_producers_loop(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import threading

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, client_id="threaded", **FAST) as p:
        await p.send_and_wait("orders", value=b"x")
        threads: list[int] = []
        original = p.metrics

        def metrics() -> dict[str, Any]:
            threads.append(threading.get_ident())
            return original()

        monkeypatch.setattr(p, "metrics", metrics)
        registry = CollectorRegistry()
        registry.register(ProducerCollector(p))
        text = (await asyncio.to_thread(generate_latest, registry)).decode()
    assert 'kafka_producer_record_send_total{client_id="threaded"} 1.0' in text
    assert threads and set(threads) == {threading.get_ident()}
