"""Building from a checkout without Rust stops at once, saying what to install (tools/aioproducer_build.py).

maturin's own backend, finding no ``cargo``, downloads a private Rust toolchain (about 660 MB) unasked.
Each hook of the project's backend is called here in a subprocess whose PATH holds no ``cargo``: every
one must end with the message (exit status 1, what pip reports), before maturin is even imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree  # the backend lives in the checkout, not in the wheel

ROOT = Path(__file__).resolve().parents[2]
HOOKS = {
    "get_requires_for_build_wheel": "()",
    "get_requires_for_build_editable": "()",
    "get_requires_for_build_sdist": "()",
    "prepare_metadata_for_build_wheel": "('.',)",
    "prepare_metadata_for_build_editable": "('.',)",
    "build_wheel": "('.',)",
    "build_editable": "('.',)",
    "build_sdist": "('.',)",
}
#: Imports maturin raising, so that a hook which reached maturin would say so instead of building.
PROBE = """
import sys, importlib.abc
class NoMaturin(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "maturin":
            raise AssertionError("maturin was imported: the hook did not stop first")
sys.meta_path.insert(0, NoMaturin())
sys.path.insert(0, "tools")
import os, aioproducer_build
assert os.environ["MATURIN_NO_INSTALL_RUST"] == "1"
getattr(aioproducer_build, sys.argv[1])(*eval(sys.argv[2]))
"""


def test_pyproject_names_the_checking_backend() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'build-backend = "aioproducer_build"' in text and 'backend-path = ["tools"]' in text


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_every_hook_stops_at_once_without_cargo(tmp_path: Path, hook: str) -> None:
    empty = tmp_path / "bin"  # a PATH with no cargo at all
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    env.pop("MATURIN_NO_INSTALL_RUST", None)
    done = subprocess.run([sys.executable, "-c", PROBE, hook, HOOKS[hook]], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1, done.stderr
    assert "building from source needs Rust's cargo on PATH" in done.stderr, done.stderr
    assert "https://rustup.rs" in done.stderr and "--only-binary" in done.stderr
    assert "Traceback" not in done.stderr
