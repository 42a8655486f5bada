"""MkDocs hook: the benchmark plots `benchmarks/` draws go into the site as they are (not copied into docs/).

`docs/design/benchmarks.md` and the README show the same files; a plot named here that is gone fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

#: Site path (under assets/benchmarks/) -> the plot under benchmarks/results/.
PLOTS = {
    "mock.png": "results.png",
    "mock-callbacks-flat.png": "callbacks-flat/results.png",
    "mock-issue25.png": "issue25-mock/results.png",
    "mock-large-1mb.png": "large-1mb/results.png",
    "kafka1-waits.png": "kafka1-waits/results-kafka.png",
    "kafka1-callbacks-flat.png": "kafka1-callbacks-flat/results-kafka.png",
    "kafka-1-and-3-nodes.png": "results-kafka.png",
}


def on_files(files: Files, config: Any) -> Files:
    for name, source in PLOTS.items():
        path = ROOT / "benchmarks" / "results" / source
        if not path.is_file():
            raise FileNotFoundError(f"docs/hooks.py: the plot benchmarks/results/{source} is gone")
        files.append(File.generated(config, f"assets/benchmarks/{name}", abs_src_path=str(path)))
    return files


#: A Sphinx role in a docstring, as Markdown renders it: ``:class:`~a.b.C``` -> ``:class:<code>~a.b.C</code>``.
_ROLE = re.compile(r":(?:py:)?(?:attr|class|const|data|exc|func|meth|mod|obj):<code>(~?)([^<]*)</code>")


def _plain_role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """The docstrings' Sphinx roles shown as the code they name, not as ``:meth:`` text."""
    return _ROLE.sub(_plain_role, html)
