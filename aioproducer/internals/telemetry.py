"""Client telemetry (KIP-714): the broker subscribes to some of the producer's metrics, the producer pushes them.

Two parts. ``ClientTelemetry`` is the sans-I/O state machine of Java's
``ClientTelemetryReporter``: it says which request is due and when (times passed in, no
sleeping), builds its body (the subscribed metrics of ``Producer.metrics()`` by their KIP-714
names, as OTLP, compressed as the broker accepts) and reads the answer. ``TelemetrySender``
is the engine's small task that sends what the machine asks for to the least loaded broker.

The cycle (KIP-714, "Client behaviour"): GetTelemetrySubscriptions at start; the answer gives
the client instance id, the subscription id, the metric name prefixes wanted, the accepted
compression types, the push interval, the temporality and the broker's ``telemetry.max.bytes``.
The first push after each subscription comes after a jittered push interval (0.5-1.5 ×, so that
clients started together do not push together), each next one a push interval after the last;
an empty subscription is asked again after the push interval. The error answers are handled as
Java 4.3's ``ClientTelemetryUtils.maybeFetchErrorIntervalMs``: UNKNOWN_SUBSCRIPTION_ID and
UNSUPPORTED_COMPRESSION_TYPE ask for the subscription again at once (the latter also drops the
refused type, as Java drops a type it failed to compress with); TELEMETRY_TOO_LARGE and
THROTTLING_QUOTA_EXCEEDED ask for it again after the push interval; UNSUPPORTED_VERSION,
INVALID_REQUEST, INVALID_RECORD and any other code end telemetry for good. A throttled answer
delays the next request by its throttle time. ``close()`` sends one last push with
``terminating`` set, the interval not waited for.

``telemetry.max.bytes``: Java's client sends whatever it built and lets the broker refuse it.
A Kafka 4.3 broker refuses a push whose bytes on the wire are over the limit (TELEMETRY_TOO_LARGE)
and, when compressed, one that decompresses to more than the limit (its exporter fails: INVALID_RECORD,
which ends telemetry for good). So a push whose compressed or uncompressed size is over the limit is
not sent: a WARNING naming the sizes (once per subscription), and the subscription asked again after
the push interval, as after the broker's TELEMETRY_TOO_LARGE. Since nothing left the client, a delta
push's counts are kept for the next push.
"""

from __future__ import annotations

import asyncio
import enum
import math
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
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
_ASK_AGAIN_NOW: Final = frozenset({_UNKNOWN_SUBSCRIPTION_ID, _UNSUPPORTED_COMPRESSION_TYPE})
_ASK_AGAIN_LATER: Final = frozenset({_TELEMETRY_TOO_LARGE, _THROTTLING_QUOTA_EXCEEDED})


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
    ``unsupported_compression_types`` (Java's field of that name) are the types this client does
    not push with although the broker accepts them: it grows with a type that failed to compress
    or that the broker refused; given here, it picks the type a test wants from the broker's list.
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
        unsupported_compression_types: Iterable[int] = (),
    ) -> None:
        self._collect = collect
        self._resource = dict(resource)
        self._log = log
        self._jitter = jitter
        self._wall_ns = wall_ns
        self.state: TelemetryState = TelemetryState.SUBSCRIPTION_NEEDED
        self.client_instance_id: uuid.UUID = ZERO_UUID
        self.subscription_id: int = 0
        self.push_interval_ms: int = DEFAULT_PUSH_INTERVAL_MS
        self.requested_metrics: tuple[str, ...] = ()
        self.accepted_compression_types: tuple[int, ...] = ()
        self.delta_temporality: bool = False
        self.telemetry_max_bytes: int = 0
        self.unsupported_compression_types: set[int] = set(unsupported_compression_types)
        self._push_codec = compression.NONE  # the type of the push under way (dropped if the broker refuses it)
        self._warned_too_large: int | None = None  # the subscription id whose oversized push was warned of
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
        now_ns = self._wall_ns()
        totals = dict(self._last_totals)
        payload = self._payload(now_ns, totals)
        codec, data = self._compressed(payload)
        if self._too_large(len(payload), codec, len(data), now):
            return None
        self._last_totals, self._last_push_ns = totals, now_ns  # sent: the next deltas count from here
        self._push_codec = codec
        self.state = (
            TelemetryState.TERMINATING_PUSH_IN_PROGRESS if terminating else TelemetryState.PUSH_IN_PROGRESS
        )
        return messages.PUSH_TELEMETRY, {
            "client_instance_id": self.client_instance_id,
            "subscription_id": self.subscription_id,
            "terminating": terminating,
            "compression_type": codec,
            "metrics": data,
        }

    def next_compression_type(self) -> int:
        """The first type the broker accepts that this client can use (Java's ``preferredCompressionType``).

        The broker's order; a type in ``unsupported_compression_types``, or whose optional
        library is not installed, is passed over; none left: uncompressed.
        """
        for codec in self.accepted_compression_types:
            if codec in self.unsupported_compression_types:
                continue
            try:
                compression.check_available(codec)
            except Exception:  # noqa: BLE001 - an optional codec library missing, or a codec unknown to us
                continue
            return codec
        return compression.NONE

    def _compressed(self, payload: bytes) -> tuple[int, bytes]:
        """The payload as it goes: compressed with the preferred type, or as is if that type fails (then dropped)."""
        codec = self.next_compression_type()
        if codec == compression.NONE:
            return codec, payload
        try:
            return codec, compression.compress(codec, payload)
        except Exception as exc:  # noqa: BLE001 - Java: a type that fails is not used again, this push goes as is
            self._log.debug("client telemetry: compressing with %s failed (%r); sent uncompressed",
                            compression.CODEC_NAMES.get(codec, codec), exc)
            self.unsupported_compression_types.add(codec)
            return compression.NONE, payload

    def _too_large(self, size: int, codec: int, sent: int, now: float) -> bool:
        """Whether a push is over ``telemetry.max.bytes`` (either size: see the module's docstring); if so, drop it.

        The subscription is asked again after the push interval (what the broker's TELEMETRY_TOO_LARGE
        leads to); a terminating push that does not fit ends telemetry. 0 (no subscription yet): no limit.
        """
        limit = self.telemetry_max_bytes
        if limit <= 0 or max(size, sent) <= limit:
            return False
        if self._warned_too_large != self.subscription_id:
            self._warned_too_large = self.subscription_id
            how = "" if codec == compression.NONE else f" ({sent} compressed with {compression.CODEC_NAMES[codec]})"
            self._log.warning(
                "client telemetry: a push of %d bytes%s is over the broker's telemetry.max.bytes (%d): not sent; "
                "subscription %d asks for too many metrics", size, how, limit, self.subscription_id,
            )
        if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
            self.state = TelemetryState.TERMINATED
        else:
            self._after(now, self.push_interval_ms, TelemetryState.SUBSCRIPTION_NEEDED)
        return True

    def _payload(self, now_ns: int, totals: dict[tuple[str, tuple[tuple[str, str], ...]], int | float]) -> bytes:
        """The subscribed metrics as OTLP; a delta push counts from ``totals`` (a copy, kept once the push goes)."""
        delta = totals if self.delta_temporality else None
        start_ns = self._last_push_ns if self.delta_temporality else self._start_ns
        metrics = kip714_metrics(self._collect(), self.requested_metrics, now_ns, start_ns, delta)
        return encode_metrics_data(metrics, resource=self._resource)

    # --------------------------------------------------------------- responses
    def on_subscriptions(self, response: Mapping[str, Any], now: float) -> None:
        """GetTelemetrySubscriptions answered: keep the subscription, schedule the first push."""
        if self.state is TelemetryState.TERMINATED or self._refused(response, now):
            return
        throttle = response.get("throttle_time_ms", 0)
        if response["client_instance_id"] != ZERO_UUID:
            self.client_instance_id = response["client_instance_id"]
        self.subscription_id = response["subscription_id"]
        if response["push_interval_ms"] > 0:
            self.push_interval_ms = response["push_interval_ms"]
        self.requested_metrics = tuple(response["requested_metrics"])
        self.accepted_compression_types = tuple(response["accepted_compression_types"])
        if response["delta_temporality"] != self.delta_temporality:
            # Java resets its ledger only then: a subscription asked again must not push the totals twice.
            self._last_totals.clear()
            self._last_push_ns = self._start_ns
        self.delta_temporality = response["delta_temporality"]
        self.telemetry_max_bytes = response["telemetry_max_bytes"]
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
        if self._refused(response, now):
            return
        if self.state is TelemetryState.PUSH_IN_PROGRESS:
            self._after(now, max(self.push_interval_ms, response.get("throttle_time_ms", 0)), TelemetryState.PUSH_NEEDED)

    def _refused(self, response: Mapping[str, Any], now: float) -> bool:
        """Whether an answer carries an error code; if so it is handled (``_on_error``) and the caller stops."""
        code = response["error_code"]
        if code != 0:
            self._on_error(code, now, response.get("throttle_time_ms", 0))
        return bool(code)

    def _on_error(self, code: int, now: float, throttle: float) -> None:
        error = error_for_code(code)
        if self.state in (TelemetryState.TERMINATING_PUSH_NEEDED, TelemetryState.TERMINATING_PUSH_IN_PROGRESS):
            self.state = TelemetryState.TERMINATED
            return
        if code in _ASK_AGAIN_NOW:
            if code == _UNSUPPORTED_COMPRESSION_TYPE and self._push_codec != compression.NONE:
                self.unsupported_compression_types.add(self._push_codec)
                self._log.info("client telemetry: the broker refused %s; the next push uses the next accepted type",
                               compression.CODEC_NAMES.get(self._push_codec, self._push_codec))
            self._after(now, throttle, TelemetryState.SUBSCRIPTION_NEEDED)
        elif code in _ASK_AGAIN_LATER:
            self._log.info("client telemetry: the broker answered %s; subscription asked again in %d ms",
                           error.__name__, self.push_interval_ms)
            self._after(now, max(self.push_interval_ms, throttle), TelemetryState.SUBSCRIPTION_NEEDED)
        else:  # UNSUPPORTED_VERSION, INVALID_REQUEST, INVALID_RECORD, and (Java) any code not expected here
            self._log.warning("client telemetry stopped: the broker answered %s", error.__name__)
            self.state = TelemetryState.TERMINATED

    def on_failure(self, error: BaseException, now: float) -> None:
        """The request got no answer (Java's ``handleFailedRequest``).

        A retriable failure (the network's) asks again after Java's default push interval, 5 minutes
        (another broker may answer by then); a broker without KIP-714 ends telemetry quietly, any other
        failure with a warning.
        """
        if self.state in (TelemetryState.TERMINATING_PUSH_NEEDED, TelemetryState.TERMINATING_PUSH_IN_PROGRESS):
            self.state = TelemetryState.TERMINATED
        elif isinstance(error, OSError) or (isinstance(error, KafkaError) and error.retriable):
            self._after(now, DEFAULT_PUSH_INTERVAL_MS, TelemetryState.SUBSCRIPTION_NEEDED)
        else:
            if not isinstance(error, UnsupportedVersionError):
                self._log.warning("client telemetry stopped: %r", error)
            self.state = TelemetryState.TERMINATED

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
        #: Set once the broker gave a client instance id, or telemetry ended without one.
        self._instance_known = asyncio.Event()

    async def run(self) -> None:
        """Until TERMINATED: wait for the next request's time (or a wake-up), send it, feed the answer."""
        telemetry = self.telemetry
        try:
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
        finally:
            self._instance_known.set()  # no id will come: a waiting client_instance_id() returns now

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The client instance id the broker gave (Java's ``clientInstanceId``), waiting up to ``timeout`` s for it.

        None if no subscription came in time (or telemetry ended without one: a broker without KIP-714).
        """
        if self.telemetry.client_instance_id == ZERO_UUID and timeout > 0:
            try:
                await asyncio.wait_for(self._instance_known.wait(), timeout)
            except TimeoutError:
                pass
        known = self.telemetry.client_instance_id
        return None if known == ZERO_UUID else known

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
            if telemetry.client_instance_id != ZERO_UUID:
                self._instance_known.set()
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
