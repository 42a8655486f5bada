"""The native module in use was built from the crate in this tree.

With an editable install (``pip install -e .``), Python edits take effect at once but a Rust
edit under ``native/`` only after cargo runs again: the suite would otherwise test a stale
extension without saying so. ``native/build.rs`` records a fingerprint of the crate's sources
in the module; this recomputes it from the tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aioproducer import _native

NATIVE = Path(__file__).resolve().parents[2] / "native"


def _fnv1a(value: int, data: bytes) -> int:
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def source_hash() -> str:
    """``native/build.rs``'s fingerprint: each ``.rs`` under ``src/``, subdirectories included, sorted
    by its ``/``-separated path relative to ``src/`` (``arrow/mod.rs``), then ``Cargo.toml``; name then bytes."""
    src = NATIVE / "src"
    sources = sorted((path.relative_to(src).as_posix(), path) for path in src.rglob("*.rs"))
    value = 0xCBF29CE484222325
    for name, path in [*sources, ("Cargo.toml", NATIVE / "Cargo.toml")]:
        value = _fnv1a(value, name.encode())
        value = _fnv1a(value, path.read_bytes())
    return f"{value:016x}"


@pytest.mark.source_tree
def test_the_native_module_is_built_from_these_sources() -> None:
    assert _native.SOURCE_HASH == source_hash(), (
        "aioproducer/_native was built from other sources than native/: run `pip install -e .` again"
    )


def test_a_rust_panic_is_a_python_exception_not_an_abort() -> None:
    """The release build unwinds (native/Cargo.toml), and the entry point's guard makes the panic an
    ``Exception``, not PyO3's ``PanicException`` (a ``BaseException``): tests/unit/test_native_panics.py
    covers every entry point."""
    with pytest.raises(Exception, match="deliberate panic") as caught:  # a PanicException would get through
        _native._panic_for_test()
    assert type(caught.value) is RuntimeError
    # The module still works after it.
    assert _native.murmur2(b"21") == -973932308
