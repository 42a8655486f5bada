"""examples/asyncio_pipeline.py as a process: SIGTERM mid-stream, and nothing it reported as acknowledged is lost.

The pipeline prints ``acked <partition> <offset>`` from its delivery callback. The test
stops it with SIGTERM while it streams, waits for it to exit (it delivers what is queued
first), then reads every partition back with an independent consumer: every acknowledged
(partition, offset) must hold one of the records, and the exit must be clean.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from aioproducer.testing import MockCluster
from readback import read_all_values

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "asyncio_pipeline.py"


async def test_sigterm_mid_stream_loses_nothing_that_was_acknowledged(mock_cluster: MockCluster) -> None:
    env = {**os.environ, "BOOTSTRAP_SERVERS": mock_cluster.bootstrap_servers, "TOPIC": "orders"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    acked: list[tuple[int, int]] = []
    async with asyncio.timeout(60):
        while len(acked) < 2000:  # mid-stream: it runs until stopped
            line = await process.stdout.readline()
            assert line, (await process.stderr.read()).decode()[-2000:]
            if line.startswith(b"acked "):
                _, partition, offset = line.split()
                acked.append((int(partition), int(offset)))
        process.send_signal(signal.SIGTERM)
        rest, errors = await process.communicate()
    assert process.returncode == 0, errors.decode()[-2000:]
    lines = rest.decode().splitlines()
    assert lines[-1] == "stopped"
    acked += [(int(p), int(o)) for _, p, o in (line.split() for line in lines if line.startswith("acked "))]
    assert b"failed" not in errors
    values = await read_all_values(mock_cluster.bootstrap_servers, "orders", range(6))
    stored = {(p, o) for p, part in values.items() for o in range(len(part))}
    assert set(acked) <= stored and len(set(acked)) == len(acked)
    assert sum(len(part) for part in values.values()) == len(acked)  # and nothing unreported was written
