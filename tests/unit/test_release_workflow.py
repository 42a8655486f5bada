"""The release workflow (.github/workflows/release.yml) builds what the release promises and publishes safely.

What can be checked without GitHub: the wheel matrix covers every platform (manylinux x86_64 and
aarch64, musllinux, macOS x86_64 and arm64, Windows), every wheel is built ``--release`` and checked
to be abi3, the sdist is built and installed, and publishing runs only for a ``v*`` tag, through
trusted publishing (an OIDC ``id-token``, no stored secret), after every build and with the tag
equal to pyproject's version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")  # PyYAML: the docs extra's (mkdocs), installed by .ci/run

pytestmark = pytest.mark.source_tree

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "release.yml"


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def test_wheels_for_every_platform_each_built_release_and_checked_abi3(workflow: dict[str, Any]) -> None:
    wheels = workflow["jobs"]["wheels"]
    pairs = {(row["platform"], row["target"]) for row in wheels["strategy"]["matrix"]["include"]}
    assert pairs == {("manylinux", "x86_64"), ("manylinux", "aarch64"), ("musllinux", "x86_64"),
                     ("musllinux", "aarch64"), ("macos", "x86_64"), ("macos", "aarch64"), ("windows", "x64")}
    build = next(step for step in wheels["steps"] if str(step.get("uses", "")).startswith("PyO3/maturin-action"))
    assert "--release" in build["with"]["args"]
    assert any("cp311-abi3" in str(step.get("run", "")) for step in wheels["steps"])


def test_the_sdist_is_built_and_installed(workflow: dict[str, Any]) -> None:
    steps = workflow["jobs"]["sdist"]["steps"]
    assert any(step.get("with", {}).get("command") == "sdist" for step in steps)
    assert any("pip install" in str(step.get("run", "")) and "tar.gz" in str(step.get("run", "")) for step in steps)


def test_publishing_is_tag_only_trusted_and_after_every_build(workflow: dict[str, Any]) -> None:
    publish = workflow["jobs"]["publish"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert set(publish["needs"]) == {"wheels", "sdist"}
    assert publish["permissions"] == {"id-token": "write"} and publish["environment"]["name"] == "pypi"
    assert workflow["permissions"] == {"contents": "read"}
    uploader = next(step for step in publish["steps"] if str(step.get("uses", "")).startswith("pypa/gh-action-pypi-publish"))
    assert "password" not in uploader.get("with", {}) and "secrets." not in WORKFLOW.read_text()
    assert any('"v${version}"' in str(step.get("run", "")) for step in publish["steps"])
