"""Exactly once across driver deaths: examples/spark_streaming.py SIGKILLed five times, restarted from its checkpoint.

The driver is the example, run as a process group (the JVM and Spark's Python workers in it)
and killed with SIGKILL, each time on a condition the test watches, not after a fixed time:

* mid-write, three times: once this run's tasks have put records into the topic's log (read
  uncommitted: prepared transactions count), plus a random 0-0.33 s;
* just after a micro-batch committed, twice: as soon as Spark's commit log has a new entry; the
  test then deletes that entry (and the next micro-batch's offsets if Spark had planned it), as
  if the driver had died after the sink's commit and before Spark's: the restart runs a
  micro-batch again whose rows are committed in Kafka.

Then a last run to the end (``availableNow``). Read back ``read_committed`` by aiokafka: every
input row exactly once, each key's rows in input order. Beside it, Spark's own Kafka sink on the
same input, killed mid-write (a micro-batch's rows partly in the log, not in Spark's commit log)
and restarted: nothing missing, and the rows of the killed micro-batch twice.

Each driver is started one or two runs ahead of its turn (``stream_driver.py``: Spark up, a warm-up
query run, waiting for ``go``), so a run's cost is mostly the query's, not the JVM's. Time: 277 s
on two cores under a load of 4-5 (one driver warming ahead), 388 s under a load of 15-20 (up
to three); over the 150 s this work was given: the drivers' start (a JVM, a Spark session, a
warm-up query each, eight drivers) is most of it.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from aioproducer.testing import KafkaCluster
from conftest import new_topic
from spark_support import spark_kafka_jars
from stream_support import assert_each_once_in_order, read_values, write_file

#: Not in the README's command yet: six Spark drivers take 250-390 s on the 2-core machine, which
#: the CI budget (30 minutes) does not hold beside the rest (1860 s with it, measured 2026-12-02).
#: Run it with AIOPRODUCER_SPARK_RESTARTS=1; making it fit (the drivers' JVMs from a class-data
#: archive) is issue #46's open work.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.environ.get("AIOPRODUCER_SPARK_RESTARTS") != "1", reason="six Spark drivers: set AIOPRODUCER_SPARK_RESTARTS=1"),
]

DRIVER = Path(__file__).with_name("stream_driver.py")
FILES, ROWS = 8, 4000  # one file per micro-batch
PARTITIONS = 2
BOUND = 180.0  # seconds any one condition may take on a loaded machine
AHEAD = 1  # drivers warming beyond the next one


class Driver:
    """One run of the example as its own process group, started ahead of its turn."""

    def __init__(self, arguments: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **env}
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), *arguments],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env, start_new_session=True,
        )

    def go(self) -> None:
        """Wait until the driver is warm, then start its query."""
        self._expect("ready")
        print(f"{time.monotonic():.1f} go {self.log.name}", file=sys.stderr)
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def _expect(self, word: str) -> None:
        assert self.process.stdout is not None
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                line = self.process.stdout.readline()
                if line.strip() == word:
                    return
                if not line:
                    break
        pytest.fail(f"the driver did not say {word!r}: {self.tail()}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group: the driver, its JVM, Spark's Python workers."""
        print(f"{time.monotonic():.1f} kill {self.log.name}", file=sys.stderr)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(60)

    def finish(self) -> None:
        """Wait for an availableNow run to end by itself."""
        self._expect("done")
        assert self.process.wait(BOUND) == 0, self.tail()

    def tail(self) -> str:
        return self.log.read_text()[-3000:]


class Log:
    """The topic's log end (all partitions, read uncommitted): what the tasks have put there, committed or not."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-test", "isolation.level": "read_uncommitted"})

    def end(self) -> int:
        return sum(self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1] for p in range(PARTITIONS))

    def close(self) -> None:
        self.consumer.close()


def committed_batches(checkpoint: Path) -> list[int]:
    """The micro-batches in Spark's commit log."""
    folder = checkpoint / "commits"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []


def forget(checkpoint: Path, log: str, batch: int) -> None:
    for name in (str(batch), f".{batch}.crc"):
        (checkpoint / log / name).unlink(missing_ok=True)


def wait_for(driver: Driver, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        if not driver.alive():
            pytest.fail(f"the run ended before {what}: {driver.tail()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {BOUND} s: {driver.tail()}")
        time.sleep(0.02)  # polling the broker and the checkpoint folder: neither has an event to wait on


def arguments(bootstrap: str, topic: str, folder: Path, checkpoint: Path, *extra: str) -> list[str]:
    return ["--bootstrap-servers", bootstrap, "--topic", topic, "--input", str(folder), "--checkpoint", str(checkpoint), *extra]


async def test_five_driver_kills_exactly_once_and_spark_sink_beside_it(kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    jars = ",".join(spark_kafka_jars())
    bootstrap = kafka_cluster.bootstrap_servers
    folder = tmp_path / "in"
    expected = [v for n in range(FILES) for v in write_file(folder, n * ROWS, ROWS)]
    ours, theirs = new_topic(kafka_cluster, PARTITIONS), new_topic(kafka_cluster, PARTITIONS)
    ours_checkpoint, theirs_checkpoint = tmp_path / "ours", tmp_path / "theirs"
    ours_args = arguments(bootstrap, ours, folder, ours_checkpoint, "--transactional-id", f"{ours}-q")
    theirs_args = arguments(bootstrap, theirs, folder, theirs_checkpoint, "--sink", "kafka", "--jars", jars)
    started: list[Driver] = []
    env = {"WARM_DIR": str(tmp_path / "warm"), "WARM_TOPIC": new_topic(kafka_cluster, 1)}

    def driver(args: list[str]) -> Driver:
        started.append(Driver(args, tmp_path / f"driver-{len(started)}.log", env))
        return started[-1]

    kills = ["mid-write", "after-commit", "mid-write", "after-commit", "mid-write"]
    rerun_batches = []
    log = Log(bootstrap, ours)
    # Besides the running driver, the next one and AHEAD more warm up: more at once only slow each other down.
    queue = [ours_args] * (len(kills) + 1) + [theirs_args] * 2
    warming: list[Driver] = []

    def next_driver() -> Driver:
        if not warming:
            warming.append(driver(queue.pop(0) if queue else theirs_args))
        chosen = warming.pop(0)
        while queue and len(warming) < AHEAD + 1:
            warming.append(driver(queue.pop(0)))
        return chosen

    current = next_driver()
    try:
        for kill in kills:
            upcoming = next_driver()
            before_end, before_commits = log.end(), committed_batches(ours_checkpoint)
            current.go()
            if kill == "mid-write":
                wait_for(current, lambda: log.end() > before_end, "records in the log")
                time.sleep(random.uniform(0, 0.33))  # a random point of the write, after it began
                current.kill()
            else:
                wait_for(current, lambda: len(committed_batches(ours_checkpoint)) > len(before_commits), "a committed micro-batch")
                current.kill()
                batch = committed_batches(ours_checkpoint)[-1]
                forget(ours_checkpoint, "offsets", batch + 1)  # Spark may have planned the next one already
                forget(ours_checkpoint, "commits", batch)
                rerun_batches.append(batch)
            current = upcoming
        theirs_log = Log(bootstrap, theirs)
        current.go()  # ours, to the end
        current.finish()
        current = next_driver()
        # Spark's own sink, killed while a micro-batch's rows are partly in the log: the kill may
        # land just after the micro-batch's commit (then nothing is partly written): up to three tries.
        partly = 0
        for attempt in range(3):
            upcoming = next_driver()
            current.go()
            wait_for(current, lambda: theirs_log.end() > len(committed_batches(theirs_checkpoint)) * ROWS, "Spark's sink writing")
            current.kill()
            partly = theirs_log.end() - len(committed_batches(theirs_checkpoint)) * ROWS
            current = upcoming
            if partly > 0:
                break
        theirs_log.close()
        current.go()
        current.finish()
    finally:
        log.close()
        for each in started:
            each.kill()

    assert len(rerun_batches) == 2
    assert_each_once_in_order(await read_values(bootstrap, ours, PARTITIONS, committed=True), expected)

    spark_rows = Counter(await read_values(bootstrap, theirs, PARTITIONS, committed=False))
    assert set(spark_rows) == set(expected)  # at least once: nothing missing
    assert partly > 0, "the kill of Spark's sink came between micro-batches"
    assert sum(spark_rows.values()) - len(expected) >= partly  # the killed micro-batch's rows, written again
