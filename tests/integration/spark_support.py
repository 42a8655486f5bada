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
