"""Every ```python block of README.md and docs/**/*.md runs: no example in the docs can rot.

One test per block, named by file and line (``test_example[README.md:8]``). How a block is run
(``docs/writing-examples.md`` says the same for the people who write them):

- **A page is one script.** The blocks of a page run in order, in one namespace (``__name__`` is
  ``"__main__"``), so a later block may use the names an earlier one made, as a reader who pastes
  the page's blocks one after the other would. Selecting one block (``-k 'README.md:421'``) runs
  the page's blocks above it first.
- **Top-level ``await`` is allowed**, as in ``python -m asyncio``: a block is compiled with
  ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT``; one that awaits runs on the page's event loop (one
  ``asyncio.Runner`` per page, so a producer started in one block can be used in the next). A block
  that does not await runs with no loop running, so a script that ends in ``asyncio.run(main())``
  runs as it would from the shell.
- **Placeholder brokers point at a fresh mock cluster.** Each page gets its own
  ``MockCluster(brokers=3)`` (topics are created when first used). The block's syntax tree is
  rewritten before it runs: a string literal given as a producer's bootstrap servers (the value of a
  dict's ``"bootstrap.servers"`` key or of a ``bootstrap_servers=`` keyword: ``"localhost:9092"``,
  ``"broker1:9094"``, ...) becomes the cluster's address. Nothing else is rewritten or injected:
  a block uses only what it imports or what an earlier block of its page made.
- **Markers**, an HTML comment on the last non-blank line above the block's fence (invisible on the
  rendered page):

  - ``<!-- example: kafka -->``: the block needs a real broker (what librdkafka's mock does not do);
    its bootstrap literals point at a one-node ``KafkaCluster`` shared by the session. Where no
    Kafka can run it skips, or fails under ``AIOPRODUCER_REQUIRE_KAFKA=1`` (``.ci/run``).
  - ``<!-- example: compile reason="..." -->``: a fragment not meant to run on its own (a config
    dict, a method list): compiled, never run.
  - ``<!-- example: skip reason="needs AWS credentials" -->``: needs what a test cannot have (a
    secured cluster, a cloud account, Spark's session, a server left running): compiled, then
    skipped with the reason shown. A skip without a reason fails.

  A marker that names no known kind, or stands above no python block, fails ``test_markers``.

``test_example_counts`` prints, per file, how many blocks run (on the mock), run on Kafka, are
compiled only and are skipped; ``python tests/docs/test_examples.py`` prints the same table.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import shlex
import sys
import textwrap
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.source_tree  # reads the docs in the source tree, see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]

#: The kinds a marker may name; a block with no marker is "run".
KINDS = ("run", "kafka", "compile", "skip")
MARKER = re.compile(r"<!--\s*example:\s*(?P<kind>[\w-]+)(?P<args>.*?)-->")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
PYTHON = {"python", "py", "python3"}
#: The name a bootstrap literal is rewritten to; set before each block to its cluster's address.
BOOTSTRAP = "__example_bootstrap_servers__"


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    files = [root / "README.md"] if (root / "README.md").exists() else []
    return files + sorted((root / "docs").glob("**/*.md"))


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  #: the line of the opening fence, 1-based
    code: str  #: dedented
    kind: str
    reason: str | None
    marker_error: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


@dataclass(frozen=True)
class Marker:
    path: Path
    line: int
    text: str


def parse_marker(text: str) -> tuple[str, str | None, str | None]:
    """``(kind, reason, error)`` of a marker comment's text."""
    match = MARKER.search(text)
    assert match is not None
    kind, args = match["kind"], match["args"].strip()
    reason: str | None = None
    error: str | None = None
    try:
        words = shlex.split(args)
    except ValueError as exc:
        return kind, None, f"cannot read the marker's arguments {args!r}: {exc}"
    for word in words:
        key, _, value = word.partition("=")
        if key == "reason" and value:
            reason = value
        else:
            error = f"unknown marker argument {word!r} (only reason=\"...\")"
    if kind not in KINDS:
        error = f"unknown example kind {kind!r}: one of {', '.join(KINDS)}"
    return kind, reason, error


def parse(path: Path) -> tuple[list[Block], list[Marker]]:
    """The python blocks of a Markdown file, and the markers that stand above no python block."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    stray: list[Marker] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            if MARKER.search(lines[i]):
                # a marker is consumed by the fence below it; one that reaches here has none
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                if j >= len(lines) or FENCE.match(lines[j]) is None:
                    stray.append(Marker(path, i + 1, lines[i].strip()))
            i += 1
            continue
        fence, info = opening["fence"], opening["info"].strip()
        end = i + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) and not closing["info"].strip():
                break
            end += 1
        lang = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        above = i - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        marker = lines[above] if above >= 0 and MARKER.search(lines[above]) else None
        if lang in PYTHON:
            kind, reason, error = parse_marker(marker) if marker else ("run", None, None)
            body = "\n".join(lines[i + 1 : end])
            blocks.append(Block(path, i + 1, textwrap.dedent(body), kind, reason, error))
        elif marker:
            stray.append(Marker(path, above + 1, marker.strip()))
        i = end + 1
    return blocks, stray


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in parse(path)[0]]


# ------------------------------------------------------------------ running a page


class _Bootstrap(ast.NodeTransformer):
    """A string literal given as bootstrap servers -> the name :data:`BOOTSTRAP`."""

    @staticmethod
    def _name(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return ast.copy_location(ast.Name(BOOTSTRAP, ast.Load()), node)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.Dict:
        self.generic_visit(node)
        for n, key in enumerate(node.keys):
            if isinstance(key, ast.Constant) and key.value == "bootstrap.servers":
                node.values[n] = self._name(node.values[n])
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        self.generic_visit(node)
        if node.arg == "bootstrap_servers":
            node.value = self._name(node.value)
        return node


def compile_block(block: Block) -> Any:
    """The block's code object: bootstrap literals rewritten, line numbers the Markdown file's."""
    tree = ast.parse(block.code, filename=str(block.path), mode="exec")
    tree = _Bootstrap().visit(tree)
    ast.increment_lineno(tree, block.line)  # the code's line 1 is the line after the fence
    ast.fix_missing_locations(tree)
    return compile(tree, str(block.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


@dataclass
class Page:
    """One Markdown file's run: its namespace, its event loop, its mock cluster."""

    path: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__main__", "__builtins__": __builtins__})
    runner: asyncio.Runner | None = None
    mock: Any = None
    done: set[int] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)

    def execute(self, block: Block, bootstrap: str) -> None:
        code = compile_block(block)
        self.namespace[BOOTSTRAP] = bootstrap
        self.done.add(block.line)
        try:
            if code.co_flags & inspect.CO_COROUTINE:
                if self.runner is None:
                    self.runner = asyncio.Runner()
                self.runner.run(eval(code, self.namespace))
            else:
                exec(code, self.namespace)
        except BaseException:
            self.failed.append(block.name)
            raise

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
        if self.mock is not None:
            self.mock.close()


class Pages:
    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self._pages: dict[Path, Page] = {}

    def page(self, path: Path) -> Page:
        if path not in self._pages:
            self._pages[path] = Page(path)
        return self._pages[path]

    def bootstrap(self, page: Page, block: Block) -> str:
        if block.kind == "kafka":
            return str(self._request.getfixturevalue("kafka_cluster").bootstrap_servers)
        if page.mock is None:
            from aioproducer.testing import MockCluster

            page.mock = MockCluster(brokers=3)
        return str(page.mock.bootstrap_servers)

    def run(self, block: Block) -> None:
        """Run ``block``, after the blocks above it on its page that have not run yet."""
        page = self.page(block.path)
        for earlier in parse(block.path)[0]:
            if earlier.line >= block.line:
                break
            if earlier.line not in page.done and earlier.kind in ("run", "kafka") and earlier.marker_error is None:
                try:
                    page.execute(earlier, self.bootstrap(page, earlier))
                except Exception:
                    pass  # its own test reports it; this block's failure names it below
        try:
            page.execute(block, self.bootstrap(page, block))
            return
        except Exception as exc:
            # the traceback from the block's frame on: its first line names the Markdown file and line
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != str(block.path):
                tb = tb.tb_next
            report = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
        failed_above = page.failed[:-1]
        if failed_above:
            report += f"(blocks above it on the page failed too: {', '.join(failed_above)})\n"
        pytest.fail(f"{block.name}: the example failed\n{report}", pytrace=False)

    def close(self) -> None:
        for page in self._pages.values():
            page.close()


@pytest.fixture(scope="module")
def pages(request: pytest.FixtureRequest) -> Iterator[Pages]:
    runs = Pages(request)
    yield runs
    runs.close()


# ------------------------------------------------------------------ the tests

BLOCKS = all_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_example(block: Block, pages: Pages) -> None:
    if block.marker_error is not None:
        pytest.fail(f"{block.name}: {block.marker_error}", pytrace=False)
    if block.kind in ("skip", "compile") or block.reason is not None:
        compile_block(block)  # a SyntaxError names the Markdown file and line
    if block.kind == "skip":
        if not block.reason:
            pytest.fail(f'{block.name}: skipped without a reason: <!-- example: skip reason="..." -->', pytrace=False)
        pytest.skip(f"{block.name}: {block.reason}")
    if block.kind == "compile":
        return
    pages.run(block)


def test_markers() -> None:
    """Every marker stands right above a python block."""
    stray = [marker for path in doc_files() for marker in parse(path)[1]]
    assert not stray, "markers above no python block:\n" + "\n".join(f"{m.path}:{m.line}: {m.text}" for m in stray)


def counts(blocks: list[Block]) -> dict[str, Counter[str]]:
    table: dict[str, Counter[str]] = {}
    for block in blocks:
        table.setdefault(block.name.rsplit(":", 1)[0], Counter())[block.kind] += 1
    return table


def render_counts(blocks: list[Block]) -> str:
    rows = [f"{'file':<40} {'run':>4} {'kafka':>6} {'compile':>8} {'skip':>5}"]
    for name, counter in counts(blocks).items():
        rows.append(f"{name:<40} {counter['run']:>4} {counter['kafka']:>6} {counter['compile']:>8} {counter['skip']:>5}")
    return "\n".join(rows)


def test_example_counts() -> None:
    """Per file: blocks run on the mock, run on Kafka, compiled only, skipped (``-s`` shows the table)."""
    print("\n" + render_counts(BLOCKS))
    assert BLOCKS, "no python block found in README.md or docs/"
    unexplained = [b.name for b in BLOCKS if b.kind == "skip" and not b.reason]
    assert not unexplained, f"skipped without a reason: {unexplained}"


if __name__ == "__main__":
    print(render_counts(BLOCKS))
    sys.exit(0)
