"""The Spark session of the Spark tests: one per test run, ``local[2,3]``, this interpreter as the workers' Python.

``local[2,3]``: two task threads, and a failed task is tried up to three times (plain
``local[2]`` never retries a task, unlike a cluster), which the retry tests need. Spark's
Python workers run ``PYSPARK_PYTHON``, set here to this interpreter so that they import the
aioproducer under test, and ``PYTHONPATH`` includes this directory and ``tests``, so that functions of the
test modules given to Spark import there too. Starting the JVM takes about six seconds on two cores.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # Functions of the test modules reach the workers pickled by reference: they import them from here.
    here = os.path.dirname(os.path.abspath(__file__))
    paths = (here, os.path.dirname(here), os.environ.get("PYTHONPATH"))  # tests/integration, tests (conftest)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("aioproducer-tests")
        # the workers' PYTHONPATH as a setting of this session too: the workers inherit the JVM's environment,
        # fixed when the process's first session started it (tests/docs' Spark example may run first)
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def jobs_run(session: SparkSession, group: str) -> list[int]:
    """The Spark jobs started under job group ``group``: none, for a write refused on the driver."""
    ids: Any = session.sparkContext.statusTracker().getJobIdsForGroup(group)
    return list(ids)


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector (``format("kafka")``) for the installed PySpark, as jar paths for ``spark.jars``.

    Fetched with Maven into ``~/.cache/aioproducer/spark/<version>`` on first use (the benchmark's
    cache). A PySpark release can reach PyPI before its jars reach Maven Central: then the previous
    minor release's connector is taken (its API towards Spark is the same within a major version).
    Skips the test if neither can be fetched (fails under ``AIOPRODUCER_REQUIRE_KAFKA=1``).
    """
    import pyspark

    from benchmarks.spark_sink import sink_jars

    major, minor = (int(p) for p in pyspark.__version__.split(".")[:2])
    versions = [pyspark.__version__] + ([f"{major}.{minor - 1}.0"] if minor else [])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aioproducer" / "spark"
    cached = [v for v in versions if (cache / v / "libs.complete").exists()]  # no Maven run when one is there
    tried = []
    for version in cached[:1] or versions:
        try:
            return [str(p) for p in sink_jars(version)]
        except SystemExit as exc:
            tried.append(f"{version}: {str(exc).splitlines()[0]}")
    message = "Spark's Kafka connector could not be fetched: " + "; ".join(tried)
    if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
        pytest.fail(message)
    pytest.skip(message)
