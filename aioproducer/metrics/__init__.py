"""Exporting ``producer.metrics()`` to monitoring systems.

``aioproducer.metrics.prometheus.ProducerCollector``: a ``prometheus_client`` collector
(``pip install 'aioproducer[prometheus]'``). The metrics themselves are described by
``METRIC_DEFS`` (name, unit, meaning), re-exported here.
"""

from __future__ import annotations

from aioproducer.internals.metrics import METRIC_DEFS, MetricDef

__all__ = ["METRIC_DEFS", "MetricDef"]
