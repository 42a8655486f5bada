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
