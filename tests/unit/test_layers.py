"""The layers import downwards only: ``network/`` and ``protocol/`` know nothing of ``internals/`` or the package root.

``protocol/`` is sans-I/O bytes, ``network/`` the connections and the client over it; the
producer's machinery (``internals/``) and its facade (the package root, ``producer.py``) stand
on them. An import the other way makes the lower layer load the whole producer (the root's
``__init__`` imports it) and ties it to what it must not know: the lifecycle and the version
string were moved to the bottom (``aioproducer/lifecycle.py``, ``aioproducer/_version.py``)
for that. Read from the source with ``ast``, so an import under ``TYPE_CHECKING`` or inside
a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree  # reads the source tree, see tests/conftest.py

PACKAGE = Path(__file__).resolve().parents[2] / "aioproducer"

#: Layer -> what it must not import: a module named here, or anything under it.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "network": ("aioproducer", "aioproducer.internals", "aioproducer.producer"),
    "protocol": ("aioproducer", "aioproducer.internals", "aioproducer.producer", "aioproducer.network"),
}


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    """Whether ``name`` (dotted, under ``aioproducer``) is a module or a package of the source tree.

    The native module (``aioproducer._native``, built from ``native/``) counts by its type stub.
    """
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or base.with_suffix(".pyi").is_file() or (base / "__init__.py").is_file()


def imported_modules(source: str, module: str) -> list[str]:
    """Every module ``source`` (the text of ``module``) imports, absolute; ``from pkg import sub`` names ``pkg.sub``."""
    found: list[str] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(sub if _is_module(sub) else base)
    return found


def is_forbidden(layer: str, name: str) -> bool:
    """Whether ``layer`` may not import module ``name``: the package root itself, not its other submodules."""
    return any(name == bad or (bad != "aioproducer" and name.startswith(bad + ".")) for bad in FORBIDDEN[layer])


def violations(layer: str) -> list[str]:
    """``file: module`` for every import of ``layer`` that its FORBIDDEN list names."""
    return [
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in imported_modules(path.read_text(), _module_of(path))
        if is_forbidden(layer, name)
    ]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_the_lower_layers_import_nothing_from_above(layer: str) -> None:
    assert violations(layer) == []


@pytest.mark.parametrize(
    ("line", "caught"),
    [
        ("import aioproducer", "aioproducer"),
        ("from aioproducer import __version__", "aioproducer"),
        ("from aioproducer.internals.lifecycle import State", "aioproducer.internals.lifecycle"),
        ("from aioproducer.internals import engine", "aioproducer.internals.engine"),
        ("from ..internals.accumulator import monotonic_ms", "aioproducer.internals.accumulator"),
        ("from aioproducer import producer", "aioproducer.producer"),
    ],
)
def test_an_import_running_up_is_caught(line: str, caught: str) -> None:
    """Each way to write an upward import is seen, under ``TYPE_CHECKING`` too; an allowed one is not reported."""
    source = f"from typing import TYPE_CHECKING\nfrom aioproducer import errors\nif TYPE_CHECKING:\n    {line}\n"
    names = imported_modules(source, "aioproducer.network.client")
    assert caught in names and is_forbidden("network", caught)
    assert "aioproducer.errors" in names and not is_forbidden("network", "aioproducer.errors")
