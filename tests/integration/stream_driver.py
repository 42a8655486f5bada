"""examples/spark_streaming.py as a driver started ahead of its turn: Spark up and warm, then its queries on ``go``.

The restart test kills drivers and starts them again; a driver's start (the JVM, the Python
workers, and a streaming query's first micro-batch: classes loaded, code generated, the data
source's Python workers started) is most of a run's time, so each is started while the one
before it still runs. It builds the example's session and, given ``WARM_TOPIC``, runs the
example's ``--input`` query on a small file and its ``--rate`` query (Spark's rate source, key
``value % 16``) into it with our sink (``warm_up``); then it prints ``ready`` and waits for a line
on stdin. Then it starts the
example's query for each argument list (lists separated by ``--and``: the session is the first
list's; the restart test runs our sink and Spark's side by side in one driver), waits for all
of them to end, and prints ``done``.

``--archive``: no ``go``; after the warm-up, stop Spark and wait for its JVM to exit, so that a
JVM started with ``-XX:ArchiveClassesAtExit`` writes its class-data archive (it does so only on a
normal exit).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_streaming.py"
WARM_ROWS = 100
BOUND = 180.0  # seconds the warm-up's first rows, or the JVM's exit, may take on a loaded machine


def example() -> Any:
    spec = importlib.util.spec_from_file_location("spark_streaming_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_up(job: Any, spark: Any, args: argparse.Namespace) -> None:
    """The example's ``--input`` query on a file of WARM_ROWS rows (key ``w``), then its ``--rate`` query, into WARM_TOPIC.

    Our sink, at least once; the ``--input`` query runs to its end (``availableNow``), the
    ``--rate`` query until a micro-batch has written rows.
    """
    folder = Path(os.environ["WARM_DIR"]) / f"driver-{os.getpid()}"
    (folder / "in").mkdir(parents=True)
    (folder / "in" / "rows.json").write_text("".join(f'{{"key": "w", "value": "w{n}"}}\n' for n in range(WARM_ROWS)))
    files = job.parse([
        "--bootstrap-servers", args.bootstrap_servers, "--topic", os.environ["WARM_TOPIC"], "--checkpoint", str(folder / "files"),
        "--input", str(folder / "in"),
    ])
    job.start(job.rows(spark, files), files).awaitTermination()
    warm = job.parse([
        "--bootstrap-servers", args.bootstrap_servers, "--topic", os.environ["WARM_TOPIC"], "--checkpoint", str(folder / "rate"),
        "--rate", "1000", "--trigger", "200 milliseconds",
    ])
    query = job.start(job.rows(spark, warm), warm)
    deadline = time.monotonic() + BOUND
    try:
        while not any(p["numInputRows"] for p in query.recentProgress):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the warm-up query wrote no rows within {BOUND} s")
            query.awaitTermination(0.1)  # the query's own wait: raises at once if it failed
    finally:
        query.stop()


def main() -> int:
    archive = sys.argv[1:2] == ["--archive"]
    lists: list[list[str]] = [[]]
    for word in sys.argv[2 if archive else 1 :]:
        if word == "--and":
            lists.append([])
        else:
            lists[-1].append(word)
    job = example()
    every = [job.parse(each) for each in lists]
    spark = job.session(every[0])
    if "WARM_TOPIC" in os.environ:
        warm_up(job, spark, every[0])
    if archive:
        jvm = spark.sparkContext._gateway.proc  # spark-submit exec's the JVM: this is its process
        spark.stop()
        jvm.stdin.close()  # the JVM's gateway exits normally on end of input
        return int(jvm.wait(BOUND))
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 1  # the test ended without starting this driver
    try:
        queries = [job.start(job.rows(spark, args), args) for args in every]
        for query in queries:
            query.awaitTermination()
        print("done", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
