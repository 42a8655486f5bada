"""The package, the tests, the benchmarks and the examples type-check under ``mypy --strict`` (in CI, as every test).

A type error at the boundaries (the sender-client Protocols, the delivery-callback
type users annotate with) is a bug as real as a failing assertion.
"""

from __future__ import annotations

import pytest

import subprocess
import sys
import tempfile
from pathlib import Path

pytestmark = pytest.mark.source_tree  # reads the source tree, see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_strict_on_the_package_tests_and_benchmarks() -> None:
    with tempfile.TemporaryDirectory(prefix="aioproducer-mypy-") as cache:
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "aioproducer", "tests", "benchmarks", "examples"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )
    assert result.returncode == 0, result.stdout + result.stderr
