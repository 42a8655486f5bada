"""The PEP 517 build backend of aioproducer: maturin's, refusing at once to build without ``cargo``.

Why a wrapper: a build from source compiles the native data plane (``native/``, Rust). maturin's
own backend, finding no ``cargo``, downloads a private Rust toolchain (about 660 MB) without asking;
a user who meant to install a wheel, or who read that Rust is required, should instead be told at
once what to install. So every hook first checks for ``cargo`` on PATH and stops with that message,
and ``MATURIN_NO_INSTALL_RUST`` is set so that maturin never asks for its toolchain installer. With
``cargo`` present, every hook is maturin's, unchanged.
"""

from __future__ import annotations

import importlib
import os
import shutil
from collections.abc import Mapping
from typing import Any

os.environ["MATURIN_NO_INSTALL_RUST"] = "1"  # read by maturin's hooks when they are called

MISSING_CARGO = """
aioproducer: building from source needs Rust's cargo on PATH, and none was found.
  - Install Rust (https://rustup.rs: `curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh`,
    then open a new shell, or `. "$HOME/.cargo/env"`), and run the install again; or
  - install a prebuilt wheel instead: `pip install --only-binary aioproducer aioproducer`.
(No Rust toolchain is downloaded on your behalf.)
"""

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


class CargoMissing(SystemExit):
    """Raised by every hook when ``cargo`` is not on PATH: pip shows the message and stops."""


def require_cargo() -> Any:
    """maturin's backend module; first, stop the build saying what to install unless ``cargo`` is on PATH."""
    if shutil.which("cargo") is None:
        raise CargoMissing(MISSING_CARGO)
    return importlib.import_module("maturin")


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return list(require_cargo().get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return list(require_cargo().get_requires_for_build_editable(config_settings))


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return list(require_cargo().get_requires_for_build_sdist(config_settings))


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    return str(require_cargo().prepare_metadata_for_build_wheel(metadata_directory, config_settings))


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    return str(require_cargo().prepare_metadata_for_build_editable(metadata_directory, config_settings))


def build_wheel(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    return str(require_cargo().build_wheel(wheel_directory, config_settings, metadata_directory))


def build_editable(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    return str(require_cargo().build_editable(wheel_directory, config_settings, metadata_directory))


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    return str(require_cargo().build_sdist(sdist_directory, config_settings))
