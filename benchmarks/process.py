"""One client run in a process of its own: its last stdout line is its result, as JSON."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["run_delivering_child", "run_json_process"]


def run_json_process(command: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run ``command``; its result dict, or ``{"crashed": why}`` if it timed out, failed or printed nothing."""
    try:
        proc = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"crashed": f"timed out after {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"crashed": f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run_delivering_child(command: Sequence[str], name: str, expected: int, timeout: float = 900) -> dict[str, Any]:
    """A benchmark's child run whose result says ``delivered``/``failed``; exits the benchmark unless all ``expected`` were delivered."""
    result = run_json_process(command, timeout)
    if "crashed" in result:
        raise SystemExit(f"{name} failed: {result['crashed']}")
    if result["delivered"] != expected:
        raise SystemExit(f"{name}: {result['delivered']} of {expected} delivered ({result['failed']} failed)")
    return result
