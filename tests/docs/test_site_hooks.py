"""docs/hooks.py: the repository's files named on a page become links, each benchmark chart opens at full size
with its figures beside it as a table, and the built site (mkdocs.yml's repo_url) uses both.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("mkdocs")  # the docs extra (installed by .ci/run)
pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parents[2]
REPO = "https://github.com/aioproducer/aioproducer"


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_named_file_or_folder_becomes_a_link_but_not_in_code_blocks_or_links(hooks: ModuleType) -> None:
    html = ("<p>See <code>examples/fastapi_service.py</code> and <code>benchmarks/results/</code>.</p>"
            "<pre><code>tests/unit/test_docs.py</code></pre><a href='x'><code>README.md</code></a><code>linger.ms</code>")
    linked = hooks.link_repo_paths(html, REPO, "page.md")
    assert f'<a href="{REPO}/blob/main/examples/fastapi_service.py" class="repo-file"><code>examples/fastapi_service.py</code></a>' in linked
    assert f'<a href="{REPO}/tree/main/benchmarks/results/" class="repo-file">' in linked
    assert "<pre><code>tests/unit/test_docs.py</code></pre>" in linked and linked.count("repo-file") == 2


def test_a_named_file_that_is_gone_fails_the_build(hooks: ModuleType) -> None:
    with pytest.raises(FileNotFoundError, match="page.md names examples/gone.py"):
        hooks.link_repo_paths("<code>examples/gone.py</code>", REPO, "page.md")


def test_every_chart_opens_at_full_size_with_its_table(hooks: ModuleType) -> None:
    page = (ROOT / "docs" / "design" / "benchmarks.md").read_text()
    charts = re.findall(r"^!\[[^\]]*\]\([^)]*assets/benchmarks/([\w.-]+)\)$", page, re.M)
    assert charts and set(charts) <= set(hooks.PLOTS)
    rendered = hooks.zoomable_charts(page)
    for name in charts:
        assert f"[![" in rendered and f"](../assets/benchmarks/{name} \"Open the chart at full size\")" in rendered
        table = hooks.chart_table(name)
        assert table.startswith("| ") and table.split("\n")[1].startswith("|---") and table in rendered
    assert rendered.count('<details markdown="1">') == len(charts)
