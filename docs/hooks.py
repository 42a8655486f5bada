"""MkDocs hooks: the benchmark plots, links to the repository's files, and the docstrings' roles.

- The benchmark plots `benchmarks/` draws go into the site as they are (not copied into docs/);
  `docs/design/benchmarks.md` and the README show the same files; a plot named here that is gone fails
  the build. On the page each chart is a link to itself at full size (a 2,600 px chart shrunk to the
  column is unreadable), followed by its figures as a table, read from the `results.md` beside the plot.
- Every file of the repository a page names as code (`examples/fastapi_service.py`,
  `tests/unit/test_docs.py`, `benchmarks/results/`) becomes a link to it under `repo_url`, so a reader
  of the site can open it; a named file that does not exist fails the build.
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


#: Where the repository's files are browsed: ``repo_url`` + this + the path.
BLOB = "/blob/main/"
TREE = "/tree/main/"
#: Top-level folders and files of the repository a page may name as code.
_REPO_PATH = re.compile(
    r"<pre\b.*?</pre>|<a\b.*?</a>|<code>((?:examples|tests|benchmarks|aioproducer|native|docs|tools|\.ci|\.github)/"
    r"[A-Za-z0-9_./-]*|(?:README|CONTRIBUTING|CHANGELOG|SECURITY)\.md|LICENSE|pyproject\.toml|mkdocs\.yml)</code>",
    re.S,
)


def link_repo_paths(html: str, repo_url: str, where: str) -> str:
    """``<code>path</code>`` of a file or folder of the repository as a link to it (not inside code blocks or links)."""

    def link(match: re.Match[str]) -> str:
        path = match.group(1)
        if path is None:  # a code block or an existing link: as it is
            return match.group(0)
        target = ROOT / path
        if not target.exists():
            raise FileNotFoundError(f"{where} names {path}, which is not in the repository")
        kind = TREE if target.is_dir() else BLOB
        return f'<a href="{repo_url.rstrip("/")}{kind}{path}" class="repo-file"><code>{path}</code></a>'

    return _REPO_PATH.sub(link, html)


#: A benchmark chart as the page writes it.
_CHART = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]*assets/benchmarks/(?P<name>[\w.-]+))\)$", re.M)


def chart_table(name: str) -> str:
    """The first table of the ``results*.md`` beside the chart ``name``'s plot (its figures)."""
    plot = ROOT / "benchmarks" / "results" / PLOTS[name]
    report = plot.with_suffix(".md")
    rows = report.read_text(encoding="utf-8").split("\n")
    start = next(i for i, row in enumerate(rows) if row.startswith("|"))
    end = next((i for i in range(start, len(rows)) if not rows[i].startswith("|")), len(rows))
    return "\n".join(rows[start:end])


def zoomable_charts(markdown: str) -> str:
    """Each chart a link to its full size, followed by its figures (a collapsed table)."""

    def chart(match: re.Match[str]) -> str:
        name, src, alt = match["name"], match["src"], match["alt"]
        source = f"benchmarks/results/{PLOTS[name]}".removesuffix(".png") + ".md"
        return (f"[![{alt}]({src})]({src} \"Open the chart at full size\")\n\n"
                f'<details markdown="1"><summary>The chart\'s figures as a table (from `{source}`)</summary>\n\n'
                f"{chart_table(name)}\n\n</details>")

    return _CHART.sub(chart, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return zoomable_charts(markdown)


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
    """The docstrings' Sphinx roles shown as the code they name; the repository's files as links."""
    return link_repo_paths(_ROLE.sub(_plain_role, html), config["repo_url"], page.file.src_path)
