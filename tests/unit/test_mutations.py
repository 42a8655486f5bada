"""Every planted idempotence bug in ``tests/mutation_check.py`` makes a test fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mutation_check  # noqa: E402

pytestmark = pytest.mark.source_tree  # reads the source tree, see tests/conftest.py


@pytest.mark.parametrize("mutation", mutation_check.MUTATIONS, ids=lambda m: m.name.replace(" ", "-"))
def test_the_idempotence_tests_catch_the_planted_bug(mutation: mutation_check.Mutation) -> None:
    caught, summary = mutation_check.run(mutation)
    assert caught, f"the tests pass with {mutation.name!r} planted: {summary}"


def test_a_mutant_run_that_errors_is_not_counted_as_caught() -> None:
    """Only a failing test catches a mutant: an import error (a stale extension) reads as survived, with the error."""
    errored = "ImportError while loading conftest '/tmp/x/tests/conftest.py'.\nE   ImportError: undefined symbol: PyInit__native\n"
    assert mutation_check.verdict("", errored) == (False, "E   ImportError: undefined symbol: PyInit__native")
    collection = "ERROR tests/unit/test_sender.py - ImportError: cannot import name 'Sender'\n1 error in 0.41s\n"
    assert mutation_check.verdict(collection, "") == (False, "1 error in 0.41s")
    failed = "F\nFAILED tests/unit/test_sender.py::test_retry - AssertionError\n1 failed in 2.0s\n"
    assert mutation_check.verdict(failed, "") == (True, "FAILED tests/unit/test_sender.py::test_retry - AssertionError")
