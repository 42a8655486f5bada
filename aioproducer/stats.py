"""Windowed statistics with the semantics of Java's ``org.apache.kafka.common.metrics`` (no I/O, no clock).

At the bottom of the package so that ``network/`` (the connections count their bytes) imports
nothing above it; ``internals/metrics.py`` builds the producer's metrics from these.

Theory of operation
-------------------
Java's ``org.apache.kafka.common.metrics`` measures windowed statistics over
``metrics.num.samples`` samples of ``metrics.sample.window.ms`` each (a
``SampledStat``). The facts kept here, written afresh:

* a value goes into the current sample; once that sample is
  ``metrics.sample.window.ms`` old, the next one starts (reset, reused in turn);
* a sample older than ``num_samples * window`` is *obsolete*: reset before a
  measurement, so an idle producer's averages and rates go back to their empty
  value;
* ``Avg`` is the sum of the live samples over their count, ``Max`` their
  maximum; both are NaN while no sample holds a value (Java's ``Double.NaN``);
* ``Rate`` is a windowed sum over the elapsed window, in seconds: from the start
  of the oldest live sample to now, but never less than ``num_samples - 1``
  whole windows (so a rate does not spike in its first moments) and never 0;
* ``Total`` (Java's ``CumulativeSum``/``CumulativeCount``) never resets.

Nothing here does I/O or reads a clock: every call takes ``now_ms``, so the
statistics are tested with a fake clock. Callers record per batch and per request,
never per record (see ``internals/metrics.py``).
"""

from __future__ import annotations

import math
from typing import Final

from aioproducer import _native

__all__ = ["Avg", "ByteCounts", "Max", "NodeBytes", "Rate", "SampledStat"]

NAN: Final = math.nan


#: The kinds of ``_native.SampledStat`` (native/src/stats.rs).
_SUM: Final = 0
_AVG: Final = 1
_MAX: Final = 2
_RATE: Final = 3

#: A statistic kept in ``num_samples`` samples of ``window_ms`` each (Java's ``SampledStat``):
#: a windowed sum. Native (``native/src/stats.rs``): the sender records about twenty of these per
#: Produce request. ``record(value, now_ms)``, ``record_many(total, count, now_ms)`` (``count``
#: values at once: the same samples as ``count`` calls), ``purge``, ``oldest_start``, ``measure``.
SampledStat = _native.SampledStat


class Avg(SampledStat):
    """The mean of the values recorded in the live samples; NaN when there are none."""

    __slots__ = ()

    def __new__(cls, window_ms: int, num_samples: int) -> Avg:
        return super().__new__(cls, window_ms, num_samples, _AVG)


class Max(SampledStat):
    """The largest value recorded in the live samples; NaN when there are none."""

    __slots__ = ()

    def __new__(cls, window_ms: int, num_samples: int) -> Max:
        return super().__new__(cls, window_ms, num_samples, _MAX)


class Rate(SampledStat):
    """A windowed sum per second (Java's ``Rate`` over a ``WindowedSum``); ``per_ns`` gives a ratio of ns to ns.

    ``window_size_ms(now_ms)``: the elapsed window, from the oldest sample, at least
    ``num_samples - 1`` full windows, never 0.
    """

    __slots__ = ()

    def __new__(cls, window_ms: int, num_samples: int, *, per_ns: bool = False) -> Rate:
        return super().__new__(cls, window_ms, num_samples, _RATE, per_ns)


class ByteCounts:
    """Bytes written to and read from the brokers: in all, written per node and their rate (the client's connections add to it)."""

    __slots__ = ("outgoing", "incoming", "outgoing_by_node", "outgoing_rate", "nodes", "window_ms", "num_samples")

    def __init__(self, window_ms: int = 30000, num_samples: int = 2) -> None:
        self.window_ms: int = max(1, window_ms)
        self.num_samples: int = num_samples
        self.outgoing: int = 0
        self.incoming: int = 0
        self.outgoing_by_node: dict[int, int] = {}
        self.outgoing_rate: Rate = Rate(self.window_ms, num_samples)
        self.nodes: dict[int, NodeBytes] = {}

    def node(self, node_id: int) -> NodeBytes:
        """The counts of one node's connection (created at its first request or read)."""
        counts = self.nodes.get(node_id)
        if counts is None:
            counts = self.nodes[node_id] = NodeBytes(self.window_ms, self.num_samples)
        return counts

    def sent(self, node_id: int, size: int, now_ms: float, requests: int = 1) -> None:
        """``requests`` requests of ``size`` bytes in all were written to ``node_id`` (once per write, not per record).

        A connection's held Produce frames are counted together when they are written, in one
        call per write (``BrokerConnection._write_held``), not one per request.
        """
        self.outgoing += size
        by_node = self.outgoing_by_node
        by_node[node_id] = by_node.get(node_id, 0) + size
        self.outgoing_rate.record(size, now_ms)
        node = self.nodes.get(node_id) or self.node(node_id)  # no call once the node is known
        node.requests += requests
        node.request_rate.record(requests, now_ms)
        node.outgoing_rate.record(size, now_ms)

    def received(self, node_id: int, size: int) -> None:
        """``size`` bytes were read from ``node_id``'s connection (once per socket read)."""
        self.incoming += size
        self.node(node_id).incoming += size


class NodeBytes:
    """One node's requests and bytes (Java's per-connection ``node-<id>`` selector metrics)."""

    __slots__ = ("requests", "request_rate", "outgoing_rate", "incoming")

    def __init__(self, window_ms: int, num_samples: int) -> None:
        self.requests: int = 0
        self.request_rate: Rate = Rate(window_ms, num_samples)
        self.outgoing_rate: Rate = Rate(window_ms, num_samples)
        self.incoming: int = 0
