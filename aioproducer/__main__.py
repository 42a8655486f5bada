"""``python -m aioproducer`` and the ``aioproducer`` script: see :mod:`aioproducer.cli`."""

from __future__ import annotations

import sys

from aioproducer.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
