"""Typed configuration: the TypedDicts match the config table, and mypy and pyright flag typos where they are written.

``tests/data/typing/config_typos.py.txt`` marks each line a checker must flag with ``# error``
(a ``.txt``, so that ``mypy tests`` does not check it; the test copies it to a ``.py``);
``config_correct.py`` must pass clean. mypy and pyright are both test dependencies (pyright with
Node.js from its wheel, ``pyright[nodejs]``), and both run. ``pyright --verifytypes`` holds the
public surface to at least 98 % known types.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aioproducer import config_types
from aioproducer.config import _KEYWORD_ALIASES, CONFIG_DEFS

DATA = Path(__file__).parents[1] / "data" / "typing"
TYPOS_TEXT, CORRECT_TEXT = DATA / "config_typos.py.txt", DATA / "config_correct.py"


def expected_error_lines() -> set[int]:
    return {n for n, line in enumerate(TYPOS_TEXT.read_text().splitlines(), 1) if "# error" in line}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """The two files as ``.py`` in a directory of their own."""
    (tmp_path / "src").mkdir()
    typos, correct = tmp_path / "src" / "config_typos.py", tmp_path / "src" / "config_correct.py"
    typos.write_text(TYPOS_TEXT.read_text())
    correct.write_text(CORRECT_TEXT.read_text())
    return typos, correct


def test_typed_dicts_list_every_key_of_the_table() -> None:
    assert set(config_types.ProducerKeywords.__annotations__) == {d.attr for d in CONFIG_DEFS} | set(_KEYWORD_ALIASES)
    assert set(config_types.ProducerConfigDict.__annotations__) == {d.key for d in CONFIG_DEFS}
    assert config_types.ProducerKeywords.__total__ is False and config_types.ProducerConfigDict.__total__ is False


def test_mypy_flags_each_typo_and_passes_correct_calls(files: tuple[Path, Path], tmp_path: Path) -> None:
    typos, correct = files
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--show-column-numbers", "--cache-dir", str(tmp_path / "cache"), str(typos), str(correct)],
        capture_output=True, text=True, cwd=typos.parent,
    )
    assert "config_correct.py" not in run.stdout, run.stdout
    lines = {int(m) for m in re.findall(r"config_typos\.py:(\d+):\d+: error", run.stdout)}
    assert lines == expected_error_lines(), run.stdout


def _pyright() -> str:
    """The pyright of this environment (the test extra installs it, with Node.js from its wheel)."""
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent)) or shutil.which("pyright")
    if pyright is None:
        pytest.fail("pyright is not installed: pip install -e '.[test]' installs it")
    return pyright


def test_pyright_flags_each_typo_and_passes_correct_calls(files: tuple[Path, Path]) -> None:
    typos, correct = files
    pyright = _pyright()
    run = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", sys.executable, str(typos), str(correct)],
        capture_output=True, text=True, cwd=typos.parent, timeout=120,
    )
    report = json.loads(run.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert [d for d in errors if d["file"].endswith("config_correct.py")] == []
    lines = {d["range"]["start"]["line"] + 1 for d in errors if d["file"].endswith("config_typos.py")}
    assert lines == expected_error_lines(), errors


@pytest.mark.source_tree
def test_the_public_surface_is_typed_for_pyright() -> None:
    """``pyright --verifytypes aioproducer``: at least 98 % of what the package exports has a known type."""
    run = subprocess.run(
        [_pyright(), "--verifytypes", "aioproducer", "--ignoreexternal", "--outputjson", "--pythonpath", sys.executable],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=300,
    )
    completeness = json.loads(run.stdout)["typeCompleteness"]
    score = completeness["completenessScore"]
    unknown = sorted(s["name"] for s in completeness["symbols"] if not s["isTypeKnown"] or s.get("isTypeAmbiguous"))
    assert score >= 0.98, f"type completeness {score:.1%}; not fully known: {unknown}"


def test_import_aioproducer_leaves_internal_packages_out_of_its_namespace() -> None:
    """``dir(aioproducer)`` is the public surface; internal packages still resolve on access."""
    code = (
        "import types, aioproducer\n"
        "modules = sorted(n for n, v in vars(aioproducer).items() if isinstance(v, types.ModuleType))\n"
        "print(modules)\n"
        "print(sorted(set(dir(aioproducer)) - set(aioproducer.__all__)))\n"
        "print(aioproducer.internals.batch.__name__, aioproducer.network.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    internal = {"internals", "network", "protocol", "clock", "lifecycle"}
    assert internal.isdisjoint(eval(out[0])) and internal.isdisjoint(eval(out[1]))
    assert eval(out[1]) == ["__version__", "config", "errors", "serializers"]
    assert out[2] == "aioproducer.internals.batch aioproducer.network"
