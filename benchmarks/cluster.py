"""The mock cluster in a process of its own, as the benchmarks use it.

``python -m aioproducer.testing --until-stdin-eof`` prints
``bootstrap.servers=...`` first and stops when its stdin is closed, so the
cluster cannot outlive the suite even if the suite is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable

__all__ = ["ClusterProcess"]


class ClusterProcess:
    """``with ClusterProcess(topics) as cluster: cluster.bootstrap_servers``."""

    def __init__(self, topics: Iterable[str], partitions: int = 6, brokers: int = 3) -> None:
        args = [sys.executable, "-m", "aioproducer.testing", "--brokers", str(brokers), "--until-stdin-eof"]
        for topic in topics:
            args += ["--topic", f"{topic}:{partitions}"]
        self._proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("bootstrap.servers="):
            self.close()
            raise RuntimeError(f"mock cluster did not start (first line {line!r}, exit {self._proc.poll()})")
        self.bootstrap_servers = line.partition("=")[2]

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> ClusterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
