"""Client telemetry (KIP-714): the broker subscribes to some of the producer's metrics, the producer pushes them.

Two parts. ``ClientTelemetry`` is the sans-I/O state machine of Java's
``ClientTelemetryReporter``: it says which request is due and when (times passed in, no
sleeping), builds its body (the subscribed metrics of ``Producer.metrics()`` by their KIP-714
names, as OTLP, compressed as the broker accepts) and reads the answer. ``TelemetrySender``
is the engine's small task that sends what the machine asks for to the least loaded broker.

The cycle (KIP-714, "Client behaviour"): GetTelemetrySubscriptions at start; the answer gives
the client instance id, the subscription id, the metric name prefixes wanted, the accepted
compression types, the push interval and the temporality. The first push comes after a
jittered push interval (0.5-1.5 ×, so that clients started together do not push together),
each next one a push interval after the last; an empty subscription is asked again after the
push interval. Errors: UNKNOWN_SUBSCRIPTION_ID and UNSUPPORTED_COMPRESSION_TYPE ask for the
subscription again at once; TELEMETRY_TOO_LARGE and THROTTLING_QUOTA_EXCEEDED wait for the next
interval; UNSUPPORTED_VERSION (the broker has no KIP-714), INVALID_REQUEST and INVALID_RECORD end
telemetry for good. A throttled answer delays the next request by its throttle time.
``close()`` sends one last push with ``terminating`` set, the interval not waited for.
"""

from __future__ import annotations

import asyncio
import enum
import math
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from aioproducer.errors import KafkaError, UnsupportedVersionError, error_for_code
from aioproducer.logs import LogLike
from aioproducer.protocol import compression, messages
from aioproducer.protocol.otlp import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    AGGREGATION_TEMPORALITY_DELTA,
    DataPoint,
    Metric,
    encode_metrics_data,
)
from aioproducer.protocol.primitives import ZERO_UUID

__all__ = ["ClientTelemetry", "TelemetrySender", "TelemetryState", "kip714_metrics"]

#: KIP-714's prefix for the Java producer's metrics (group ``producer-metrics`` → ``producer``).
PRODUCER_PREFIX: Final = "org.apache.kafka.producer."
#: Used until the broker gives a push interval (Java: 5 minutes).
DEFAULT_PUSH_INTERVAL_MS: Final = 300_000

_UNKNOWN_SUBSCRIPTION_ID: Final = 117
_TELEMETRY_TOO_LARGE: Final = 118
_UNSUPPORTED_COMPRESSION_TYPE: Final = 76
_THROTTLING_QUOTA_EXCEEDED: Final = 89
_FATAL_CODES: Final = frozenset({35, 42, 87})  # UNSUPPORTED_VERSION, INVALID_REQUEST, INVALID_RECORD


class TelemetryState(enum.Enum):
    """Java's ``ClientTelemetryState``."""

    SUBSCRIPTION_NEEDED = "subscription-needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription-in-progress"
    PUSH_NEEDED = "push-needed"
    PUSH_IN_PROGRESS = "push-in-progress"
    TERMINATING_PUSH_NEEDED = "terminating-push-needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating-push-in-progress"
    TERMINATED = "terminated"


def _metric_name(key: str) -> tuple[str, dict[str, str]]:
    """``Producer.metrics()``'s key → the KIP-714 name and its attributes (a topic, a node)."""
    if key.startswith("topic."):
        topic, _, name = key[len("topic."):].rpartition(".")
        return PRODUCER_PREFIX + "topic." + name.replace("-", "."), {"topic": topic}
    if key.startswith("node-"):
        node, _, name = key[len("node-"):].partition(".")
        return PRODUCER_PREFIX + "node." + name.replace("-", "."), {"node_id": node}
    return PRODUCER_PREFIX + key.replace("-", "."), {}


def kip714_metrics(
    snapshot: Mapping[str, Any],
    prefixes: tuple[str, ...],
    now_ns: int,
    start_ns: int,
    last_totals: dict[tuple[str, tuple[tuple[str, str], ...]], int | float] | None = None,
) -> list[Metric]:
    """The Java metrics of ``snapshot`` whose KIP-714 name starts with one of ``prefixes``.

    A ``-total`` is a monotonic ``Sum``; the rest are ``Gauge``\\ s; a value that is not a finite
    number (``metadata-age`` before the first metadata, an average with no sample) is left out.
    With ``last_totals`` (delta temporality) a sum's point is the change since the last push,
    and ``last_totals`` is updated to the values pushed now.
    """
    wanted = any(p in ("", "*") for p in prefixes)
    grouped: dict[str, list[DataPoint]] = {}
    monotonic: dict[str, bool] = {}
    for key, value in snapshot.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        name, attributes = _metric_name(key)
        if not wanted and not name.startswith(prefixes):
            continue
        is_total = name.endswith(".total")
        start = start_ns if is_total else 0
        if is_total and last_totals is not None:
            ident = (name, tuple(sorted(attributes.items())))
            previous = last_totals.get(ident, 0)
            last_totals[ident] = value
            value = value - previous
        grouped.setdefault(name, []).append(DataPoint(value, now_ns, start, attributes))
        monotonic[name] = is_total
    temporality = AGGREGATION_TEMPORALITY_DELTA if last_totals is not None else AGGREGATION_TEMPORALITY_CUMULATIVE
    return [
        Metric(name, points, monotonic=monotonic[name], temporality=temporality)
        for name, points in sorted(grouped.items())
    ]


class ClientTelemetry:
    """The subscription/push cycle, sans-I/O: ``next_request(now)`` when ``time_to_next_request(now)`` is 0.

    ``collect`` returns ``Producer.metrics()``'s snapshot; ``jitter`` a number in [0, 1) (the
    first push waits ``(0.5 + jitter()) × push_interval_ms``); ``wall_ns`` the Unix time in
    nanoseconds for the data points. Times (``now``) are the engine's clock, in milliseconds.
    """

    def __init__(
        self,
        collect: Callable[[], Mapping[str, Any]],
        *,
        resource: Mapping[str, str],
        log: LogLike,
        now: float,
        jitter: Callable[[], float] = random.random,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._collect = collect
        self._resource = dict(resource)
        self._log = log
        self._jitter = jitter
        self._wall_ns = wall_ns
        self.state = TelemetryState.SUBSCRIPTION_NEEDED
        self.client_instance_id: uuid.UUID = ZERO_UUID
        self.subscription_id = 0
        self.push_interval_ms = DEFAULT_PUSH_INTERVAL_MS
        self.requested_metrics: tuple[str, ...] = ()
        self.accepted_compression_types: tuple[int, ...] = ()
        self.delta_temporality = False
        self.telemetry_max_bytes = 0
        self._next_at = now  # the first GetTelemetrySubscriptions at once
        self._start_ns = wall_ns()
        self._last_totals: dict[tuple[str, tuple[tuple[str, str], ...]], int | float] = {}
        self._last_push_ns = self._start_ns

    # ------------------------------------------------------------------ timing
    def time_to_next_request(self, now: float) -> float:
        """Milliseconds until a request is due; ``inf`` while one is under way or after the end."""
        if self.state in (TelemetryState.SUBSCRIPTION_NEEDED, TelemetryState.PUSH_NEEDED):
            return max(0.0, self._next_at - now)
        if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
            return 0.0
        return math.inf

    def _after(self, now: float, delay_ms: float, state: TelemetryState) -> None:
        self.state = state
        self._next_at = now + delay_ms

    # ---------------------------------------------------------------- requests
    def next_request(self, now: float) -> tuple[int, dict[str, Any]] | None:
        """The request due now (api key, body), moving to its in-progress state; None if none is due."""
        if self.time_to_next_request(now) > 0:
            return None
        if self.state is TelemetryState.SUBSCRIPTION_NEEDED:
            self.state = TelemetryState.SUBSCRIPTION_IN_PROGRESS
            return messages.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": self.client_instance_id}
        terminating = self.state is TelemetryState.TERMINATING_PUSH_NEEDED
        self.state = (
            TelemetryState.TERMINATING_PUSH_IN_PROGRESS if terminating else TelemetryState.PUSH_IN_PROGRESS
        )
        codec = self.next_compression_type()
        payload = self._payload()
        return messages.PUSH_TELEMETRY, {
            "client_instance_id": self.client_instance_id,
            "subscription_id": self.subscription_id,
            "terminating": terminating,
            "compression_type": codec,
            "metrics": compression.compress(codec, payload) if codec != compression.NONE else payload,
        }

    def next_compression_type(self) -> int:
        """The first type the broker accepts that this installation can write (Java: the broker's order)."""
        for codec in self.accepted_compression_types:
            try:
                compression.check_available(codec)
            except Exception:  # noqa: BLE001 - an optional codec library missing, or a codec unknown to us
                continue
            return codec
        return compression.NONE

    def _payload(self) -> bytes:
        now_ns = self._wall_ns()
        delta = self._last_totals if self.delta_temporality else None
        start_ns = self._last_push_ns if self.delta_temporality else self._start_ns
        metrics = kip714_metrics(self._collect(), self.requested_metrics, now_ns, start_ns, delta)
        self._last_push_ns = now_ns
        return encode_metrics_data(metrics, resource=self._resource)

    # --------------------------------------------------------------- responses
    def on_subscriptions(self, response: Mapping[str, Any], now: float) -> None:
        """GetTelemetrySubscriptions answered: keep the subscription, schedule the first push."""
        if self.state is TelemetryState.TERMINATED:
            return
        throttle = response.get("throttle_time_ms", 0)
        code = response["error_code"]
        if code != 0:
            self._on_error(code, now, throttle)
            return
        if response["client_instance_id"] != ZERO_UUID:
            self.client_instance_id = response["client_instance_id"]
        self.subscription_id = response["subscription_id"]
        if response["push_interval_ms"] > 0:
            self.push_interval_ms = response["push_interval_ms"]
        self.requested_metrics = tuple(response["requested_metrics"])
        self.accepted_compression_types = tuple(response["accepted_compression_types"])
        self.delta_temporality = response["delta_temporality"]
        self.telemetry_max_bytes = response["telemetry_max_bytes"]
        self._last_totals.clear()
        if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
            return  # close() came meanwhile: the terminating push goes now
        if not self.requested_metrics:
            self._after(now, max(self.push_interval_ms, throttle), TelemetryState.SUBSCRIPTION_NEEDED)
            return
        first = self.push_interval_ms * (0.5 + self._jitter())
        self._after(now, max(first, throttle), TelemetryState.PUSH_NEEDED)

    def on_push(self, response: Mapping[str, Any], now: float) -> None:
        """PushTelemetry answered: the next push a push interval later, or the error's handling."""
        if self.state is TelemetryState.TERMINATED:
            return
        if self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS:
            self.state = TelemetryState.TERMINATED
            return
        throttle = response.get("throttle_time_ms", 0)
        code = response["error_code"]
        if code != 0:
            self._on_error(code, now, throttle)
            return
        if self.state is TelemetryState.PUSH_IN_PROGRESS:
            self._after(now, max(self.push_interval_ms, throttle), TelemetryState.PUSH_NEEDED)

    def _on_error(self, code: int, now: float, throttle: float) -> None:
        error = error_for_code(code)
        if self.state in (TelemetryState.TERMINATING_PUSH_NEEDED, TelemetryState.TERMINATING_PUSH_IN_PROGRESS):
            self.state = TelemetryState.TERMINATED
            return
        if code in _FATAL_CODES:
            self._log.warning("client telemetry stopped: the broker answered %s", error.__name__)
            self.state = TelemetryState.TERMINATED
        elif code in (_UNKNOWN_SUBSCRIPTION_ID, _UNSUPPORTED_COMPRESSION_TYPE):
            self._after(now, throttle, TelemetryState.SUBSCRIPTION_NEEDED)
        elif code in (_TELEMETRY_TOO_LARGE, _THROTTLING_QUOTA_EXCEEDED) and self.requested_metrics:
            self._log.info("client telemetry: the broker answered %s; next push in %d ms", error.__name__,
                           self.push_interval_ms)
            self._after(now, max(self.push_interval_ms, throttle), TelemetryState.PUSH_NEEDED)
        else:
            self._after(now, max(self.push_interval_ms, throttle), TelemetryState.SUBSCRIPTION_NEEDED)

    def on_failure(self, error: BaseException, now: float) -> None:
        """The request got no answer: ask again after the push interval; a broker without KIP-714 ends it."""
        if isinstance(error, UnsupportedVersionError) or self.state in (
            TelemetryState.TERMINATING_PUSH_NEEDED, TelemetryState.TERMINATING_PUSH_IN_PROGRESS,
        ):
            self.state = TelemetryState.TERMINATED
            return
        self._after(now, self.push_interval_ms, TelemetryState.SUBSCRIPTION_NEEDED)

    # ------------------------------------------------------------------- close
    def initiate_close(self) -> bool:
        """``close()``: whether a terminating push is to be sent (there is a subscription with metrics)."""
        if self.state in (TelemetryState.PUSH_NEEDED, TelemetryState.PUSH_IN_PROGRESS) or (
            self.state is TelemetryState.SUBSCRIPTION_NEEDED and self.requested_metrics
        ):
            self.state = TelemetryState.TERMINATING_PUSH_NEEDED
            return True
        if self.state is TelemetryState.SUBSCRIPTION_IN_PROGRESS and self.requested_metrics:
            self.state = TelemetryState.TERMINATING_PUSH_NEEDED
            return True
        self.state = TelemetryState.TERMINATED
        return False


class TelemetrySender:
    """The engine's telemetry task: sends what ``ClientTelemetry`` asks for, through ``send_any``."""

    def __init__(
        self,
        telemetry: ClientTelemetry,
        send_any: Callable[[int, dict[str, Any]], Any],
        clock: Callable[[], float],
        log: LogLike,
    ) -> None:
        self.telemetry = telemetry
        self._send_any = send_any
        self._clock = clock
        self._log = log
        self._wake = asyncio.Event()

    async def run(self) -> None:
        """Until TERMINATED: wait for the next request's time (or a wake-up), send it, feed the answer."""
        telemetry = self.telemetry
        while telemetry.state is not TelemetryState.TERMINATED:
            delay = telemetry.time_to_next_request(self._clock())
            if delay > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), None if math.isinf(delay) else delay / 1000)
                except TimeoutError:
                    pass
                continue
            await self._exchange()

    async def _exchange(self) -> None:
        telemetry = self.telemetry
        request = telemetry.next_request(self._clock())
        if request is None:
            return
        api_key, body = request
        try:
            response = await self._send_any(api_key, body)
        except (KafkaError, OSError) as exc:
            self._log.debug("client telemetry: %s failed: %r", messages.API_NAMES[api_key], exc)
            telemetry.on_failure(exc, self._clock())
            return
        if api_key == messages.GET_TELEMETRY_SUBSCRIPTIONS:
            telemetry.on_subscriptions(response, self._clock())
        else:
            telemetry.on_push(response, self._clock())
        self._wake.set()  # close() may have come meanwhile

    def close(self) -> bool:
        """Ask for the terminating push: True if one is due (the task sends it and ends), False if nothing is.

        With False the caller cancels the task rather than wait for it: a request under way that
        answers nothing the producer needs (a subscription with no metrics, say) must not hold ``close()``.
        """
        due = self.telemetry.initiate_close()
        self._wake.set()
        return due
