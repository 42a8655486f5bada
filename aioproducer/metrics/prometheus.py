"""A ``prometheus_client`` collector of ``producer.metrics()``, read at scrape time.

``REGISTRY.register(ProducerCollector(producer))``. Nothing is recorded per record: each scrape
calls ``producer.metrics()`` and turns the Java names of ``METRIC_DEFS`` into Prometheus series,
``kafka_producer_`` + the name in snake case, in base units (ms and ns become seconds), the totals
as counters, every series labelled ``client_id``.

What is exported by default follows Prometheus' own conventions: the counters, the gauges of a
current value (``buffer_available_bytes``, ``connection_count``, ``metadata_age_seconds``, ...) and
the delivery-latency histogram; rates and averages are the query's job (``rate(...[1m])``,
``histogram_quantile``). Java's windowed statistics (the ``-avg``, ``-max``, ``-rate`` and
``-ratio`` gauges over ``metrics.num.samples`` × ``metrics.sample.window.ms``, as
``..._per_second``, ``..._avg_...``, ``..._max_...``) come with ``windowed=True``, for dashboards
built on Java's JMX names; an average or maximum over an empty window is then NaN (Java's value),
so a series does not come and go. Per-topic series (``kafka_producer_topic_*``, label ``topic``)
and per-node ones (``kafka_producer_node_*``, label ``node_id``) multiply the series by the topics
and brokers, so they are opt-in: ``per_topic=True``, ``per_node=True``. A scrape from another
thread (``start_http_server``) reads on the producer's event loop.

The histogram ``kafka_producer_delivery_latency_seconds`` (``_bucket``, ``_count``, ``_sum``;
label ``client_id`` only, as a per-topic histogram would multiply the series by the buckets for
every topic) is not from ``METRIC_DEFS``: each acknowledged record's latency from ``send()`` to its
acknowledgement, modelled per batch as ``DeliveryLatency`` says: ``_count`` is exact, the ends of
each batch exact, ``_sum`` the modelled latencies' sum.

Several producers go into one collector, ``ProducerCollector(p1, p2)``, each under its
``client_id`` (which must differ): two collectors in one registry would export the same
metric names, which ``CollectorRegistry.register`` refuses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

try:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the library
    raise ImportError(
        "aioproducer.metrics.prometheus needs the prometheus_client library: "
        "pip install 'aioproducer[prometheus]'"
    ) from exc

from aioproducer.internals.metrics import METRIC_DEFS, MetricDef

if TYPE_CHECKING:
    from aioproducer.producer import Producer

__all__ = ["DELIVERY_LATENCY", "PREFIX", "SERIES", "ProducerCollector", "PrometheusSeries", "prometheus_series"]

PREFIX: Final = "kafka_producer_"
DELIVERY_LATENCY: Final = PREFIX + "delivery_latency_seconds"
_DELIVERY_LATENCY_HELP: Final = (
    "Acknowledged records' latency from send() to the broker's acknowledgement, modelled per batch: "
    "each batch's first and last record exact, the records between spread evenly; _sum is the modelled sum"
)

_TIME_UNITS: Final = {"ms": 1e-3, "ns": 1e-9, "s": 1.0}
_COUNT_UNITS: Final = frozenset({"records", "requests", "calls", "connections", "batches"})
#: Java's windowed statistics by their names' ends (``compression-rate-avg``, ``topic.{topic}.compression-rate``).
_WINDOWED_ENDINGS: Final = ("-avg", "-max", "-rate", "-ratio")


@dataclass(frozen=True)
class PrometheusSeries:
    """How one ``METRIC_DEFS`` entry is exported."""

    key: str  # the Java name after its tag: ``record-send-total``
    scope: str  # "" (producer-metrics), "topic" or "node"
    name: str  # the Prometheus name, with ``_total`` for a counter
    kind: str  # "counter" or "gauge"
    scale: float  # multiplies the value into the base unit
    help: str
    windowed: bool  # one of Java's statistics over the sample window (exported with windowed=True)


def prometheus_series(defn: MetricDef) -> PrometheusSeries:
    """The Prometheus name, type and scale of ``defn`` (ValueError for a unit without a rule)."""
    scope, key = "", defn.name
    if defn.name.startswith("topic.{topic}."):
        scope, key = "topic", defn.name.removeprefix("topic.{topic}.")
    elif defn.name.startswith("node-{node}."):
        scope, key = "node", defn.name.removeprefix("node-{node}.")
    stem = key.replace("-", "_")
    unit, scale = defn.unit, 1.0
    if unit in _TIME_UNITS:
        scale, suffix = _TIME_UNITS[unit], "seconds"
    elif unit.endswith("/s"):
        stem, suffix = stem.removesuffix("_rate"), "per_second"
    elif unit in ("bytes", "ratio"):
        suffix = unit
    elif unit in _COUNT_UNITS:
        suffix = ""
    else:
        raise ValueError(f"no Prometheus rule for the unit {unit!r} of {defn.name}")
    prefix = PREFIX + (scope + "_" if scope else "")
    if stem.endswith("_total"):
        kind = "counter"
        stem = stem.removesuffix("_total")
        if suffix == "seconds":  # bufferpool-wait-time-total (ns) -> ..._seconds_total
            stem += "_seconds"
        name = prefix + stem + "_total"
    else:
        kind = "gauge"
        if suffix and not stem.endswith("_" + suffix):
            stem += "_" + suffix
        name = prefix + stem
    note = f" (Java: {defn.name}, {unit}" + (", converted to seconds)" if scale != 1.0 else ")")
    windowed = kind == "gauge" and (unit.endswith("/s") or key.endswith(_WINDOWED_ENDINGS))
    return PrometheusSeries(key, scope, name, kind, scale, defn.description + note, windowed)


#: Every ``METRIC_DEFS`` entry's series, in its order: a new metric gets its series from here.
SERIES: Final[tuple[PrometheusSeries, ...]] = tuple(prometheus_series(d) for d in METRIC_DEFS)
_BY_KEY: Final = {(s.scope, s.key): s for s in SERIES}
_LABELS: Final = {"": ["client_id"], "topic": ["client_id", "topic"], "node": ["client_id", "node_id"]}


def _parse(key: str) -> tuple[str, str, str]:
    """``topic.<t>.<name>`` -> ("topic", t, name), ``node-<id>.<name>`` -> ("node", id, name), else ("", "", key)."""
    if key.startswith("topic."):
        tag, _, name = key.removeprefix("topic.").rpartition(".")  # a topic may hold dots, a name none
        return "topic", tag, name
    if key.startswith("node-") and "." in key:
        tag, _, name = key.removeprefix("node-").partition(".")
        return "node", tag, name
    return "", "", key


#: How long a scrape from another thread waits for the producer's loop before reading directly.
LOOP_WAIT_S: Final = 5.0


_Snapshot = tuple[dict[str, Any], list[tuple[str, int]], float]


def _take(producer: Producer) -> _Snapshot:
    """``producer.metrics()`` and the delivery-latency histogram (its ``le`` buckets, its sum in seconds)."""
    metrics = producer.metrics()
    latency = producer._engine.metrics.delivery_latency
    buckets = [("+Inf" if bound == math.inf else repr(bound), count) for bound, count in latency.cumulative()]
    return metrics, buckets, latency.sum_ms / 1000.0


def _read(producer: Producer) -> _Snapshot:
    """``_take(producer)``, taken on the producer's event loop when called from another thread.

    ``start_http_server`` scrapes from its own thread, while the loop records into the same
    windowed statistics (which ``metrics()`` also purges) and adds topics and nodes to the dicts
    it iterates: the snapshot is taken on the loop, as everything else the producer does.
    """
    loop = producer._engine.loop  # set by start(); None before
    if loop is None or loop.is_closed() or not loop.is_running():
        return _take(producer)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return _take(producer)
    result: concurrent.futures.Future[_Snapshot] = concurrent.futures.Future()

    def take() -> None:
        try:
            result.set_result(_take(producer))
        except BaseException as exc:  # handed to the scraping thread
            result.set_exception(exc)

    loop.call_soon_threadsafe(take)
    try:
        return result.result(timeout=LOOP_WAIT_S)
    except concurrent.futures.TimeoutError:  # a loop blocked that long: a possibly torn reading beats none
        return _take(producer)


class ProducerCollector(Collector):
    """Exports ``producer.metrics()`` of one or more producers, each under its ``client_id`` label.

    By default the counters, the current-value gauges and the delivery-latency histogram;
    ``windowed=True`` adds Java's windowed averages, maxima and rates, ``per_topic=True`` and
    ``per_node=True`` the series per topic and per broker (see the module's docstring).
    """

    def __init__(
        self, producer: Producer, *producers: Producer, windowed: bool = False, per_topic: bool = False,
        per_node: bool = False,
    ) -> None:
        for name, flag in (("windowed", windowed), ("per_topic", per_topic), ("per_node", per_node)):
            if not isinstance(flag, bool):
                raise TypeError(f"ProducerCollector: {name} must be a bool, got {type(flag).__name__}")
        scopes = {""} | ({"topic"} if per_topic else set()) | ({"node"} if per_node else set())
        self._series: Final = {
            (s.scope, s.key): s for s in SERIES if s.scope in scopes and (windowed or not s.windowed)
        }
        self._producers: list[Producer] = []
        for p in (producer, *producers):
            self.add(p)

    def add(self, producer: Producer) -> None:
        """Export ``producer`` too (ValueError if its client id is already exported)."""
        client_id = producer.config.client_id
        if any(p.config.client_id == client_id for p in self._producers):
            raise ValueError(f"a producer with client_id {client_id!r} is already in this collector")
        self._producers.append(producer)

    def remove(self, producer: Producer) -> None:
        """Stop exporting ``producer``."""
        self._producers.remove(producer)

    def describe(self) -> Iterable[Metric]:
        """The metric names (what ``CollectorRegistry.register`` checks for duplicates)."""
        return [*self._families().values(), self._latency_family()]

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        latency = self._latency_family()
        exported = self._series
        for producer in self._producers:
            client_id = producer.config.client_id
            metrics, buckets, latency_sum = _read(producer)
            latency.add_metric([client_id], buckets, latency_sum)
            for key, value in metrics.items():
                scope, tag, name = _parse(key)
                series = exported.get((scope, name))
                if series is None or not isinstance(value, (int, float)):
                    continue  # not asked for, or the producer's own counters (records_sent, last_error ...)
                labels = [client_id, tag] if scope else [client_id]
                families[series.name].add_metric(labels, value * series.scale if series.scale != 1.0 else value)
        return [*families.values(), latency]

    def _families(self) -> dict[str, CounterMetricFamily | GaugeMetricFamily]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for s in self._series.values():
            cls = CounterMetricFamily if s.kind == "counter" else GaugeMetricFamily
            families[s.name] = cls(s.name, s.help, labels=_LABELS[s.scope])
        return families

    @staticmethod
    def _latency_family() -> HistogramMetricFamily:
        return HistogramMetricFamily(DELIVERY_LATENCY, _DELIVERY_LATENCY_HELP, labels=["client_id"])
