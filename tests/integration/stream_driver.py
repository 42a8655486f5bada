"""examples/spark_streaming.py as a driver started ahead of its turn: Spark up and warm, then the query on ``go``.

The restart test kills drivers and starts them again; a driver's start (the JVM, the Python
workers, and a streaming query's first micro-batch: classes loaded, code generated, the data
source's Python workers started) is most of a run's time, so each is started while the one
before it still runs: it builds the example's session and runs the example's query, with the
same sink, once on a warm-up input (``WARM_DIR``: a file of its own, a checkpoint of its own)
into ``WARM_TOPIC``, prints ``ready``, and waits for a line on stdin. Then it runs the example's
query as the example does (``rows``, ``start``, ``awaitTermination``) and prints ``done``. The
arguments are the example's.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_streaming.py"


def example() -> Any:
    spec = importlib.util.spec_from_file_location("spark_streaming_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_up(job: Any, spark: Any, args: Any) -> None:
    """The example's query, same sink, on a small input of its own, at least once, to its end."""
    folder = Path(os.environ["WARM_DIR"]) / f"driver-{os.getpid()}"
    (folder / "in").mkdir(parents=True)
    (folder / "in" / "rows.json").write_text("".join(f'{{"key": "w", "value": "{n}"}}\n' for n in range(100)))
    warm = argparse.Namespace(
        **{**vars(args), "input": folder / "in", "topic": os.environ["WARM_TOPIC"], "checkpoint": folder / "checkpoint",
           "transactional_id": None, "metrics_path": None, "trigger": "availableNow"}
    )
    job.start(job.rows(spark, warm), warm).awaitTermination()


def main() -> int:
    job = example()
    args = job.parse(sys.argv[1:])
    spark = job.session(args)
    warm_up(job, spark, args)
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 1  # the test ended without starting this driver
    try:
        query = job.start(job.rows(spark, args), args)
        query.awaitTermination()
        print("done", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
