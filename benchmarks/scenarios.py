"""The scenarios, their sizes (full and ``--quick``), and the records they send.

A scenario is a workload every client runs with the same settings. ``mode``
says how the worker drives it:

- ``throughput``: send everything as fast as the client accepts it and check
  every record; records/s and MB/s (of values) over send-first to last-ack.
  ``wait`` says how the driver waits, as users write it: ``gather`` (the
  headline: ``fut = await send(...)`` per record, futures kept, then
  ``asyncio.gather(*futures)`` straight away), ``flush`` (the same with
  ``await producer.flush()`` before the ``gather()``), ``callbacks`` (a
  delivery callback per record, no futures kept, then ``flush()``). The
  ``flush`` and ``callbacks`` variants are scenarios of their own, named
  ``<name>+flush`` and ``<name>+cb``, run by the asyncio clients only (the
  synchronous ones have one way to wait: their headline run).
- ``latency``: offer records at a fixed rate; per-record time from the record's
  *scheduled* send time to its acknowledgement (a client that falls behind the
  rate pays for it: no coordinated omission). Acks counted through callbacks.
- ``waiters``: request/acknowledge, as a web service awaits each request's
  record: ``waiters`` coroutines each send one record and await its
  acknowledgement before sending the next, until ``records`` were sent
  (``python -m benchmarks.run --request-ack``; not in the default plan).
  records/s, and process CPU time per record.
- ``memory``: offer many records as fast as the client accepts them (callbacks,
  no futures kept, so the driver itself holds ~1 byte per record) against a
  32 MB buffer budget; the metric is the worker process's peak RSS.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["Scenario", "scenarios", "request_ack_scenarios", "make_keys", "make_values", "base_name", "WAIT_SUFFIX"]

MB = 1 << 20


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    title: str
    mode: str  # throughput | latency | memory | waiters
    records: int
    value_size: int
    keyed: bool = True
    acks: str = "1"
    compression: str = "none"
    idempotence: bool = False
    linger_ms: int = 5
    rate: int = 0  # records/s offered, latency mode only
    buffer_memory: int = 32 * MB
    wait: str = "gather"  # throughput mode: gather | flush | callbacks (see the module docstring)
    waiters: int = 0  # waiters mode: concurrent coroutines, each awaiting its own record


    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def scenarios(quick: bool) -> list[Scenario]:
    """The seven scenarios; ``quick`` shrinks the record counts (and the latency run to 2 s)."""
    full = [
        Scenario("small", "100 B keyed, acks=1", "throughput", 200_000, 100),
        Scenario("lz4-idem", "100 B keyed, lz4, acks=all+idempotence", "throughput", 200_000, 100,
                 acks="all", compression="lz4", idempotence=True),
        # The sizes services send (JSON events of 1-10 KB, issue #42): here a 16 KB batch holds 15 records.
        Scenario("medium", "1 KB keyed, acks=1", "throughput", 100_000, 1_024),
        Scenario("large", "10 KB keyed, acks=1", "throughput", 20_000, 10_240),
        Scenario("keyless", "100 B keyless, acks=1", "throughput", 200_000, 100, keyed=False),
        Scenario("latency", "latency at 20k rec/s, 100 B keyed", "latency", 200_000, 100, rate=20_000),
        Scenario("memory", "1M x 100 B offered, 32 MB buffer", "memory", 1_000_000, 100),
    ]
    if quick:
        shrink = {"small": 20_000, "lz4-idem": 20_000, "medium": 10_000, "large": 2_000, "keyless": 20_000,
                  "latency": 40_000, "memory": 100_000}
        full = [replace(s, records=shrink[s.name]) for s in full]
    return [variant for s in full for variant in _waits(s)]


def request_ack_scenarios(quick: bool) -> list[Scenario]:
    """64 concurrent waiters, 100 B keyed records, acks=1, at ``linger.ms`` 5 and 0 (issue #25's trial shape)."""
    records = 10_000 if quick else 100_000  # at ~50k rec/s (linger.ms=0) a run lasts 2 s: shorter ones were mostly noise
    return [
        Scenario(f"ack-linger{linger}", f"64 waiters, each awaiting its record's ack, 100 B keyed, linger.ms={linger}",
                 "waiters", records, 100, linger_ms=linger, waiters=64)
        for linger in (5, 0)
    ]


#: Scenario-name suffix of each ``wait`` variant; the headline (``gather``) keeps the plain name.
WAIT_SUFFIX = {"gather": "", "flush": "+flush", "callbacks": "+cb"}


def _waits(scenario: Scenario) -> list[Scenario]:
    """A throughput scenario in each way of waiting, the headline first; other modes as they are."""
    if scenario.mode != "throughput":
        return [scenario]
    return [
        replace(scenario, name=scenario.name + suffix, wait=wait,
                title=scenario.title + {"gather": "", "flush": ", flush() then gather()", "callbacks": ", callbacks"}[wait])
        for wait, suffix in WAIT_SUFFIX.items()
    ]


def base_name(name: str) -> str:
    """The scenario a variant belongs to: ``small+flush`` -> ``small``."""
    for suffix in WAIT_SUFFIX.values():
        if suffix and name.endswith(suffix):
            return name[: -len(suffix)]
    return name


_WORDS = (
    b"order customer amount currency EUR USD status shipped pending paid item sku quantity "
    b"price warehouse region eu-west us-east created updated id user session event click view"
).split()


def make_values(size: int, count: int = 256, seed: int = 1) -> list[bytes]:
    """``count`` distinct values of exactly ``size`` bytes of word-salad text.

    Text rather than random bytes so lz4 has something to do (it compresses
    these about 2-3x), rather than constant bytes so it is not absurdly easy.
    ``count`` is a power of two so drivers can index with ``i & (count - 1)``.
    """
    rng = random.Random(seed)
    values = []
    for _ in range(count):
        parts: list[bytes] = []
        length = 0
        while length < size:
            word = rng.choice(_WORDS) + b"=" + str(rng.randrange(100_000)).encode() + b" "
            parts.append(word)
            length += len(word)
        values.append(b"".join(parts)[:size])
    return values


def make_keys(count: int = 4096, seed: int = 2) -> list[bytes]:
    """``count`` distinct 8-byte keys (a power of two)."""
    rng = random.Random(seed)
    return [b"%08x" % rng.getrandbits(32) for _ in range(count)]
