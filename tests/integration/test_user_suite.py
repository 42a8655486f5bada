"""tests/user_suite, a user's own test suite for the example services, run as its own pytest session.

It uses only what a user has: the aioproducer pytest plugin (found through its ``pytest11``
entry point, as in any project with ``aioproducer[testing]`` installed), the public API and
``aioproducer.testing``'s public helpers. Its own ``pytest.ini`` makes it its own root, so this
suite's ``conftest.py`` (whose fixtures share names with the plugin's) is not in that session.
Every test there must pass, none skip: real Kafka is required here as in the rest of CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

USER_SUITE = Path(__file__).resolve().parents[1] / "user_suite"
#: The tests the suite has: a test lost from it (a file not collected) must not pass unnoticed.
EXPECTED = {
    "test_fastapi_service.py": 4,
    "test_aiohttp_service.py": 4,
    "test_order_worker.py": 3,
    "test_readme_example.py": 3,
}


def test_the_user_suite_passes_with_only_the_plugin(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    env = {**os.environ, "AIOPRODUCER_REQUIRE_KAFKA": os.environ.get("AIOPRODUCER_REQUIRE_KAFKA", "0")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", f"--junitxml={junit}"],
        cwd=USER_SUITE, capture_output=True, text=True, timeout=900, env=env,
    )
    output = done.stdout[-6000:] + done.stderr[-3000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    outcomes: dict[str, list[str]] = {}
    for case in cases:
        verdict = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcomes.setdefault(Path(case.get("file") or case.get("classname", "").replace(".", "/") + ".py").name, []).append(
            f"{case.get('name')}: {verdict}"
        )
    assert done.returncode == 0, output
    assert {f: len(v) for f, v in outcomes.items()} == EXPECTED, outcomes
    if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
        not_passed = [o for v in outcomes.values() for o in v if not o.endswith(": passed")]
        assert not_passed == [], output
