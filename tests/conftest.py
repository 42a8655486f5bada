"""Fixtures shared by the whole test suite.

Keep this file small: fixtures used by one test module live in that module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aioproducer.testing import MockCluster


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """A fresh 3-broker mock cluster with topic ``orders`` (6 partitions, 3 replicas).

    Function-scoped on purpose: error injection, broker state and partition
    logs would otherwise leak from one test into the next. A cluster starts in
    a few milliseconds, so isolation is cheap.
    """
    with MockCluster(brokers=3, topics={"orders": 6}) as cluster:
        yield cluster
