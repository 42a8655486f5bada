"""The package, the tests, the benchmarks, the examples and the tutorial's files type-check under ``mypy --strict``.

A type error at the boundaries (the sender-client Protocols, the delivery-callback
type users annotate with) is a bug as real as a failing assertion. The tutorial's ``app.py`` and
``test_app.py`` are saved as its pages give them and checked in the same run (a reader who copies
them into a typed project must not meet errors the pages brought: once, ``sorted()`` over
``bytes | None`` keys).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree  # reads the source tree, see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial"
#: A block the reader saves: its marker (tests/docs/test_examples.py reads the same ones), then the fence.
SAVED = re.compile(r'^<!-- example: (?:file|pytest) name="(?P<name>[\w.]+\.py)"[^>]*-->\n```python\n(?P<code>.*?)^```$',
                   re.M | re.S)


def tutorial_files(into: Path) -> list[str]:
    """Save the tutorial's Python files into ``into``; their paths."""
    saved = {}
    for page in sorted(TUTORIAL.glob("*.md")):
        for match in SAVED.finditer(page.read_text(encoding="utf-8")):
            saved[match["name"]] = match["code"]
    assert sorted(saved) == ["app.py", "test_app.py"], sorted(saved)
    for name, code in saved.items():
        (into / name).write_text(code, encoding="utf-8")
    return [str(into / name) for name in sorted(saved)]


def test_mypy_strict_on_the_package_tests_benchmarks_examples_and_tutorial() -> None:
    with tempfile.TemporaryDirectory(prefix="aioproducer-mypy-") as cache, \
            tempfile.TemporaryDirectory(prefix="aioproducer-tutorial-") as tutorial:
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "aioproducer", "tests", "benchmarks",
             "examples", *tutorial_files(Path(tutorial))],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )
    assert result.returncode == 0, result.stdout + result.stderr
