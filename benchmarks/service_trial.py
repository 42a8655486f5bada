"""A service trial as a new user runs one: a real server, a real broker, an outage under load.

    python -m benchmarks.service_trial --framework fastapi      # or aiohttp; about 90 s

One Kafka node (``KafkaCluster``) with a 6-partition topic, stopped before the service
starts. The example service (``examples/fastapi_service.py`` or ``examples/aiohttp_service.py``)
runs as its own process (uvicorn, or aiohttp's runner) as it comes (docs/how-to/web-services.md's service-sized
producer settings, ``wait_ready=False``), its log at INFO on stderr. A load generator in this process keeps 64
connections busy, each posting one event after another, every event with its own
``request-id``. The timeline:

1. the service starts while the broker is down; the broker starts ``--down-at-start`` s later;
2. load; the broker is stopped (SIGTERM) and started again; load; killed (SIGKILL) and started;
3. the service gets SIGTERM under load and must exit within its bound.

Printed: what the service answered in each phase, when ``/ready`` changed, its exit, what it
logged (aioproducer's loggers and the servers' errors), and what an independent consumer
(aiokafka) read back: every event answered 200 must be in the topic exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from aioproducer.testing import KafkaCluster
from aioproducer.testing.kafka import SERVER_JVM_OPTIONS

TOPIC = "events"
ROOT = Path(__file__).resolve().parents[1]

#: Settings over the example's own (its ``SERVICE_CONFIG``, docs/how-to/web-services.md's service-sized values): none.
SERVICE_CONFIG: dict[str, Any] = {}

_LAUNCH = """
import importlib.util, json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
framework, path, bootstrap, port, config = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
spec = importlib.util.spec_from_file_location("service", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
app = module.create_app(bootstrap, "events", producer_config=config, close_timeout=5.0)
if framework == "fastapi":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=port, timeout_graceful_shutdown=5, log_level="warning")
else:
    from aiohttp import web
    web.run_app(app, host="127.0.0.1", port=port, shutdown_timeout=5, print=None)
"""


@dataclass
class Trial:
    """What the load generator saw: answers per phase, readiness changes, ids answered 200."""

    phase: str = "down-at-start"
    answers: dict[str, collections.Counter[str]] = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    acknowledged: set[str] = field(default_factory=set)
    ready_changes: list[tuple[float, str, int]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    stop: bool = False

    def at(self) -> float:
        return round(time.monotonic() - self.t0, 1)

    def note(self, what: str) -> None:
        print(f"[{self.at():6.1f} s] {what}", flush=True)
        self.phase = what.split(":")[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _load(trial: Trial, url: str, worker: int) -> None:
    """One connection's client: post, wait for the answer, post the next."""
    seq = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        while not trial.stop:
            request_id = f"w{worker}-{seq}"
            seq += 1
            body = json.dumps({"user_id": f"u{worker % 16}", "seq": seq}).encode()
            try:
                async with session.post(url, data=body, headers={"request-id": request_id}) as response:
                    await response.read()
                    status = str(response.status)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                status = type(exc).__name__
                await asyncio.sleep(0.05)  # the server is gone or not up: do not spin
            trial.answers[trial.phase][status] += 1
            if status == "200":
                trial.acknowledged.add(request_id)


async def _probe(trial: Trial, url: str) -> None:
    """``/ready`` every 100 ms; records each change of its answer."""
    last: int | None = None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while not trial.stop:
            try:
                async with session.get(url) as response:
                    status = response.status
            except (aiohttp.ClientError, asyncio.TimeoutError):
                status = 0
            if status != last:
                trial.ready_changes.append((trial.at(), trial.phase, status))
                last = status
            await asyncio.sleep(0.1)


async def _read_back(bootstrap: str) -> collections.Counter[str]:
    """Every record's ``request-id`` in the topic, counted (aiokafka, from the start of each partition)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    seen: collections.Counter[str] = collections.Counter()
    await consumer.start()
    try:
        end = await consumer.end_offsets(list(consumer.assignment()) or [])
        while not end:
            await asyncio.sleep(0.1)
            end = await consumer.end_offsets(list(consumer.assignment()))
        while [tp for tp, offset in end.items() if await consumer.position(tp) < offset]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    seen[dict(record.headers).get("request-id", b"").decode()] += 1
    finally:
        await consumer.stop()
    return seen


async def run(framework: str, connections: int, down_at_start: float, outage: float, steady: float) -> int:
    example = ROOT / "examples" / f"{framework}_service.py"
    trial = Trial()
    with KafkaCluster(brokers=1, topics={TOPIC: 6}, jvm_options=SERVER_JVM_OPTIONS) as kafka:
        bootstrap = kafka.bootstrap_servers
        await asyncio.to_thread(kafka.stop_broker, 1)
        port = _free_port()
        log_path = Path(f"/tmp/service-trial-{framework}.log")
        with log_path.open("w") as log:
            service = subprocess.Popen(
                [sys.executable, "-c", _LAUNCH, framework, str(example), bootstrap, str(port), json.dumps(SERVICE_CONFIG)],
                stderr=log, stdout=log, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        trial.note("down-at-start: service started, broker down")
        base = f"http://127.0.0.1:{port}"
        tasks = [asyncio.create_task(_probe(trial, base + "/ready"))]
        tasks += [asyncio.create_task(_load(trial, base + "/events", w)) for w in range(connections)]
        await asyncio.sleep(down_at_start)
        trial.note("broker-starting: starting the broker")
        await asyncio.to_thread(kafka.start_broker, 1)
        trial.note("steady-1: broker up")
        await asyncio.sleep(steady)
        for n, (phase, stop) in enumerate((("stopped: broker SIGTERM", kafka.stop_broker),
                                           ("killed: broker SIGKILL", kafka.kill_broker)), start=1):
            trial.note(phase)
            await asyncio.to_thread(stop, 1)
            await asyncio.sleep(outage)
            trial.note(f"restarting-{n}: starting the broker")
            await asyncio.to_thread(kafka.start_broker, 1)
            trial.note(f"steady-{n + 1}: broker up")
            await asyncio.sleep(steady)
        trial.note("sigterm: service SIGTERM under load")
        sent = time.monotonic()
        service.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(service.wait, 60)
        exited = time.monotonic() - sent
        trial.note(f"exited: service exit status {code} after {exited:.1f} s")
        trial.stop = True
        await asyncio.gather(*tasks)
        seen = await _read_back(bootstrap)

    print("\nanswers per phase:")
    for phase, counts in trial.answers.items():
        print(f"  {phase:14} " + ", ".join(f"{status}: {n}" for status, n in sorted(counts.items())))
    print("readiness (time, phase, /ready status; 0 = no answer):")
    for change in trial.ready_changes:
        print(f"  {change}")
    missing = [rid for rid in trial.acknowledged if seen[rid] == 0]
    duplicated = [rid for rid, n in seen.items() if n > 1]
    print(f"read back: {sum(seen.values())} records; answered 200: {len(trial.acknowledged)}; "
          f"200 but missing: {len(missing)}; duplicated: {len(duplicated)}; "
          f"in the topic but not answered 200: {len(set(seen) - trial.acknowledged)}")
    print(f"service log ({log_path}), aioproducer and error lines:")
    for line in log_path.read_text().splitlines():
        if "aioproducer" in line or "ERROR" in line or "Traceback" in line:
            print("  " + line[:300])
    # uvicorn re-raises the SIGTERM it handled once it has shut down: -15 is its clean exit.
    return 0 if not missing and not duplicated and code in (0, -signal.SIGTERM) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=("fastapi", "aiohttp"), default="fastapi")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--down-at-start", type=float, default=5.0, help="seconds the broker stays down after the service starts")
    parser.add_argument("--outage", type=float, default=8.0, help="seconds of each outage")
    parser.add_argument("--steady", type=float, default=8.0, help="seconds of load between events")
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args.framework, args.connections, args.down_at_start, args.outage, args.steady)))


if __name__ == "__main__":
    main()
