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

__all__ = ["Avg", "ByteCounts", "Max", "NodeBytes", "Rate", "SampledStat"]

NAN: Final = math.nan


class _Sample:
    __slots__ = ("start_ms", "count", "value")

    def __init__(self, start_ms: float, initial: float) -> None:
        self.start_ms = start_ms
        self.count = 0
        self.value = initial


class SampledStat:
    """A statistic kept in ``num_samples`` samples of ``window_ms`` each (Java's ``SampledStat``)."""

    __slots__ = ("window_ms", "num_samples", "_samples", "_current", "_sample", "_end_ms")
    initial: float = 0.0

    def __init__(self, window_ms: int, num_samples: int) -> None:
        if window_ms <= 0 or num_samples < 1:
            raise ValueError("metrics.sample.window.ms must be positive and metrics.num.samples at least 1")
        self.window_ms: int = window_ms
        self.num_samples: int = num_samples
        self._samples: list[_Sample] = []
        self._current = 0
        # The current sample and when it completes: record() compares one float in the common
        # case (about 18 records per batch sent and acknowledged, so this is per-batch cost:
        # 0.45 against 1.06 µs for an Avg and a Max). A sample's start only moves later (purge
        # resets it to now), so _end_ms is never late; an early one only sends record() through
        # _advance, which checks the sample itself.
        self._sample: _Sample | None = None
        self._end_ms = -math.inf

    def record(self, value: float, now_ms: float) -> None:
        sample = self._sample
        if sample is None or now_ms >= self._end_ms:
            sample = self._advance(now_ms)
        self._update(sample, value)
        sample.count += 1

    def _advance(self, now_ms: float) -> _Sample:
        """The sample a value recorded at ``now_ms`` goes into: the first, or the next once the current is complete."""
        samples = self._samples
        if not samples:
            sample = _Sample(now_ms, self.initial)
            samples.append(sample)
        else:
            sample = samples[self._current]
            if now_ms - sample.start_ms >= self.window_ms:  # complete: the next sample starts now
                self._current = (self._current + 1) % self.num_samples
                if self._current >= len(samples):
                    sample = _Sample(now_ms, self.initial)
                    samples.append(sample)
                else:
                    sample = samples[self._current]
                    self._reset(sample, now_ms)
        self._sample = sample
        self._end_ms = sample.start_ms + self.window_ms
        return sample

    def record_many(self, total: float, count: int, now_ms: float) -> None:
        """Record ``count`` values at once: summing to ``total`` (``Avg``, ``Rate``), or ``total`` their largest (``Max``).

        The same sample state as ``count`` calls at ``now_ms``, for one: a request's batches are recorded so.
        """
        self.record(total, now_ms)
        self._samples[self._current].count += count - 1

    def _reset(self, sample: _Sample, now_ms: float) -> None:
        sample.start_ms = now_ms
        sample.count = 0
        sample.value = self.initial


    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def purge(self, now_ms: float) -> None:
        """Reset the samples that ended before the window of ``num_samples`` samples (obsolete)."""
        expire = self.num_samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire:
                self._reset(sample, now_ms)

    def oldest_start(self, now_ms: float) -> float:
        """When the oldest sample started (``now_ms`` if none has)."""
        return min((s.start_ms for s in self._samples), default=now_ms)

    def measure(self, now_ms: float) -> float:
        self.purge(now_ms)
        return self._combine(self._samples)

    def _combine(self, samples: list[_Sample]) -> float:
        return sum(s.value for s in samples)


class Avg(SampledStat):
    """The mean of the values recorded in the live samples; NaN when there are none."""

    __slots__ = ()

    def _combine(self, samples: list[_Sample]) -> float:
        count = sum(s.count for s in samples)
        return NAN if count == 0 else sum(s.value for s in samples) / count


class Max(SampledStat):
    """The largest value recorded in the live samples; NaN when there are none."""

    __slots__ = ()
    initial: float = -math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        if value > sample.value:
            sample.value = value

    def _combine(self, samples: list[_Sample]) -> float:
        count = sum(s.count for s in samples)
        return NAN if count == 0 else max(s.value for s in samples)


class Rate(SampledStat):
    """A windowed sum per second (Java's ``Rate`` over a ``WindowedSum``); ``per_ns`` gives a ratio of ns to ns."""

    __slots__ = ("_unit_ms",)

    def __init__(self, window_ms: int, num_samples: int, *, per_ns: bool = False) -> None:
        super().__init__(window_ms, num_samples)
        self._unit_ms = 1e-6 if per_ns else 1000.0  # how many ms one unit of the rate's time is

    def measure(self, now_ms: float) -> float:
        self.purge(now_ms)
        total = self._combine(self._samples)
        return total / (self.window_size_ms(now_ms) / self._unit_ms)

    def window_size_ms(self, now_ms: float) -> float:
        """The elapsed window: from the oldest sample, at least ``num_samples - 1`` full windows, never 0."""
        elapsed = now_ms - self.oldest_start(now_ms)
        full = int(elapsed // self.window_ms)
        minimum = self.num_samples - 1
        if full < minimum:
            elapsed += (minimum - full) * self.window_ms
        return max(elapsed, 1.0)


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

    def sent(self, node_id: int, size: int, now_ms: float) -> None:
        """A request of ``size`` bytes was written to ``node_id`` (once per request, not per record)."""
        self.outgoing += size
        by_node = self.outgoing_by_node
        by_node[node_id] = by_node.get(node_id, 0) + size
        self.outgoing_rate.record(size, now_ms)
        node = self.node(node_id)
        node.requests += 1
        node.request_rate.record(1, now_ms)
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
