"""Every ```python block of README.md and docs/**/*.md runs: no example in the docs can rot.

One test per block, named by file and line (``test_example[README.md:8]``). How a block is run
(``CONTRIBUTING.md`` says the same for the people who write them):

- **A page is one script.** The blocks of a page run in order, in one namespace (``__name__`` is
  ``"__main__"``), so a later block may use the names an earlier one made, as a reader who pastes
  the page's blocks one after the other would. Selecting one block (``-k 'README.md:421'``) runs
  the page's blocks above it first. Imports are not shared that way: a block that uses a name only
  an earlier block imported fails ``test_every_block_imports_what_it_uses`` (a reader may copy it alone).
- **Top-level ``await`` is allowed**, as in ``python -m asyncio``: a block is compiled with
  ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT``; one that awaits runs on the page's event loop (one
  ``asyncio.Runner`` per page, so a producer started in one block can be used in the next). A block
  that does not await runs with no loop running, so a script that ends in ``asyncio.run(main())``
  runs as it would from the shell.
- **Placeholder brokers point at a fresh mock cluster.** Each page gets its own
  ``MockCluster(brokers=3)`` (topics are created when first used). The block's syntax tree is
  rewritten before it runs: a string literal given as a producer's bootstrap servers (the value of a
  dict's ``"bootstrap.servers"`` key or of a ``bootstrap_servers=`` keyword: ``"localhost:9092"``,
  ``"broker1:9094"``, ...; Spark's ``.option("kafka.bootstrap.servers", ...)`` too) becomes the
  cluster's address. Nothing else is rewritten or injected, unless the block names a setup (below):
  a block uses only what it imports or what an earlier block of its page made.
- **Markers**, an HTML comment on the last non-blank line above the block's fence (invisible on the
  rendered page):

  - ``<!-- example: kafka -->``: the block needs a real broker (what librdkafka's mock does not do);
    its bootstrap literals point at a one-node ``KafkaCluster`` shared by the session. Where no
    Kafka can run it skips, or fails under ``AIOPRODUCER_REQUIRE_KAFKA=1`` (``.ci/run``).
  - ``<!-- example: compile reason="..." -->``: a fragment not meant to run on its own (a config
    dict, a method list): compiled, never run.
  - ``setup="NAME"`` on a run or kafka block (``<!-- example: kafka setup="secured" -->``): the
    block runs as written inside the setup ``NAME`` of ``example_setups.SETUPS``, which makes what
    the reader has (a secured broker and its identity provider, a Schema Registry, local Spark, key
    files), maps the block's literals onto it (a string or integer literal the setup names becomes
    its value: a broker's name, a path, a URL, a port), sets the environment variables the block
    reads, and may check afterwards what the block did.
  - ``<!-- example: skip reason="needs AWS credentials" -->``: needs what no test can have (a
    cloud account): compiled, then skipped with the reason shown. A skip without a reason fails.
  - ``<!-- example: file name="app.py" -->``: a file the reader saves ("Save this as ``app.py``"),
    of any language (a ``pytest.ini`` too). Every such block of every page is saved, as written,
    into one directory shared by the session (the reader's project folder, on ``sys.path`` while
    the examples run) before any block runs, so a page may import a module another page saved. Its
    test imports a ``.py`` file as a module. Two blocks saving one name with different text fail.
  - ``<!-- example: pytest name="test_app.py" -->``: a test module the reader saves and runs with
    ``pytest``: saved there too, and its test runs ``python -m pytest test_app.py`` in that
    directory (with the ``pytest.ini`` a page saved there, the installed aioproducer pytest plugin):
    the tests must pass. ``args="-o asyncio_mode=auto"`` adds the options the text tells the reader
    to set.

  A marker that names no known kind, or stands above no block it can mark, fails ``test_markers``.

``test_example_counts`` prints, per file, how many blocks run (on the mock), run on Kafka, are
compiled only and are skipped; ``python tests/docs/test_examples.py`` prints the same table.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import os
import re
import shlex
import subprocess
import sys
import textwrap
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from example_setups import SETUPS, Reader, environment
from example_setups import example_oidc_provider, example_secured_kafka  # noqa: F401 - fixtures the setups ask for

pytestmark = pytest.mark.source_tree  # reads the docs in the source tree, see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]

#: The kinds a marker may name; a block with no marker is "run".
KINDS = ("run", "kafka", "file", "pytest", "compile", "skip")
#: A marker is an HTML comment alone on its line (one quoted in the text, as here, is not).
MARKER = re.compile(r"\s*<!--\s*example:\s*(?P<kind>[\w-]+)(?P<args>.*?)-->\s*")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
PYTHON = {"python", "py", "python3"}
#: The name a bootstrap literal is rewritten to; set before each block to its cluster's address.
BOOTSTRAP = "__example_bootstrap_servers__"


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md, CONTRIBUTING.md and every Markdown page under docs/, in a stable order."""
    files = [root / name for name in ("README.md", "CONTRIBUTING.md") if (root / name).exists()]
    return files + sorted((root / "docs").glob("**/*.md"))


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  #: the line of the opening fence, 1-based
    code: str  #: dedented
    kind: str
    reason: str | None
    marker_error: str | None = None
    filename: str | None = None  #: ``name=`` of a file or pytest block
    args: tuple[str, ...] = ()  #: ``args=`` of a pytest block: pytest's arguments the text tells the reader to add
    lang: str = "python"
    setup: str | None = None  #: ``setup=`` of a run or kafka block: a name in example_setups.SETUPS

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


@dataclass(frozen=True)
class Marker:
    path: Path
    line: int
    text: str


def parse_marker(text: str) -> tuple[str, dict[str, str], str | None]:
    """``(kind, arguments, error)`` of a marker comment's text."""
    match = MARKER.fullmatch(text)
    assert match is not None
    kind, args = match["kind"], match["args"].strip()
    arguments: dict[str, str] = {}
    error: str | None = None
    try:
        words = shlex.split(args)
    except ValueError as exc:
        return kind, {}, f"cannot read the marker's arguments {args!r}: {exc}"
    for word in words:
        key, _, value = word.partition("=")
        if key in ("reason", "name", "args", "setup") and value:
            arguments[key] = value
        else:
            error = f'unknown marker argument {word!r} (reason="...", name="...", args="..." or setup="...")'
    if kind not in KINDS:
        error = f"unknown example kind {kind!r}: one of {', '.join(KINDS)}"
    elif kind in ("file", "pytest") and "/" in arguments.get("name", "/"):
        error = f'an example of kind {kind} needs name="FILE" (a file name, no directory)'
    elif kind == "pytest" and not arguments["name"].endswith(".py"):
        error = f"a pytest example's name ends in .py: {arguments['name']!r}"
    elif kind != "pytest" and "args" in arguments:
        error = "args= is a pytest example's"
    elif "setup" in arguments and kind not in ("run", "kafka"):
        error = "setup= is a run or kafka example's"
    elif "setup" in arguments and arguments["setup"] not in SETUPS:
        error = f"unknown setup {arguments['setup']!r}: one of {', '.join(SETUPS)} (tests/docs/example_setups.py)"
    return kind, arguments, error


def parse(path: Path) -> tuple[list[Block], list[Marker]]:
    """The python blocks of a Markdown file, and the markers that stand above no python block."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    stray: list[Marker] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            if MARKER.fullmatch(lines[i]):
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
        marker = lines[above] if above >= 0 and MARKER.fullmatch(lines[above]) else None
        kind, arguments, error = parse_marker(marker) if marker else ("run", {}, None)
        if lang in PYTHON or (marker and kind == "file"):
            body = "\n".join(lines[i + 1 : end])
            code = textwrap.dedent(body) + "\n"
            args = tuple(shlex.split(arguments.get("args", "")))
            blocks.append(Block(path, i + 1, code, kind, arguments.get("reason"), error, arguments.get("name"), args, lang,
                                arguments.get("setup")))
        elif marker:
            stray.append(Marker(path, above + 1, marker.strip()))
        i = end + 1
    return blocks, stray


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in parse(path)[0]]


# ------------------------------------------------------------------ running a page


class _Rewrite(ast.NodeTransformer):
    """A setup's literals -> names bound to its values; then a string literal given as bootstrap servers -> :data:`BOOTSTRAP`.

    Bootstrap literals are a dict's ``"bootstrap.servers"`` value, a ``bootstrap_servers=`` keyword
    and Spark's ``.option("kafka.bootstrap.servers", ...)``. :attr:`bound` is what the names hold;
    :attr:`uses_cluster` says whether the block needs the page's cluster.
    """

    def __init__(self, values: Mapping[str | int, object], cluster: bool) -> None:
        self._values = values
        self._cluster = cluster
        self.bound: dict[str, object] = {}
        self.uses_cluster = False

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        value = node.value
        if (type(value) is str or type(value) is int) and value in self._values:  # type(): True is not 1 here
            name = f"__example_value_{len(self.bound)}__"
            self.bound[name] = self._values[value]
            return ast.copy_location(ast.Name(name, ast.Load()), node)
        return node

    def _bootstrap(self, node: ast.expr) -> ast.expr:
        if self._cluster and isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.uses_cluster = True
            return ast.copy_location(ast.Name(BOOTSTRAP, ast.Load()), node)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.Dict:
        self.generic_visit(node)
        for n, key in enumerate(node.keys):
            if isinstance(key, ast.Constant) and key.value == "bootstrap.servers":
                node.values[n] = self._bootstrap(node.values[n])
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        self.generic_visit(node)
        if node.arg == "bootstrap_servers":
            node.value = self._bootstrap(node.value)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        is_option = isinstance(node.func, ast.Attribute) and node.func.attr == "option" and len(node.args) == 2
        if is_option and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kafka.bootstrap.servers":
            node.args[1] = self._bootstrap(node.args[1])
        return node


def compile_block(block: Block, reader: Reader | None = None) -> tuple[Any, _Rewrite]:
    """The block's code object: literals rewritten (see :class:`_Rewrite`), line numbers the Markdown file's."""
    reader = reader or Reader()
    rewrite = _Rewrite(reader.values, reader.cluster)
    tree = rewrite.visit(ast.parse(block.code, filename=str(block.path), mode="exec"))
    ast.increment_lineno(tree, block.line)  # the code's line 1 is the line after the fence
    ast.fix_missing_locations(tree)
    code = compile(tree, str(block.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    return code, rewrite


@dataclass
class Page:
    """One Markdown file's run: its namespace, its event loop, its mock cluster."""

    path: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__main__", "__builtins__": __builtins__})
    runner: asyncio.Runner | None = None
    mock: Any = None
    done: set[int] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)

    def execute(self, code: Any) -> None:
        if code.co_flags & inspect.CO_COROUTINE:
            if self.runner is None:
                self.runner = asyncio.Runner()
            self.runner.run(eval(code, self.namespace))
        else:
            exec(code, self.namespace)

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
        if self.mock is not None:
            self.mock.close()


def where(block: Block) -> str:
    """How a saved file's lines map to the Markdown file's."""
    return f"line N of {block.filename} is line {block.line}+N of {block.name.rsplit(':', 1)[0]}"


def saved_files(blocks: list[Block]) -> tuple[dict[str, Block], list[str]]:
    """The file and pytest blocks by file name; the names two blocks save with different text."""
    files: dict[str, Block] = {}
    clashes: list[str] = []
    for block in blocks:
        if block.kind in ("file", "pytest") and block.filename and block.marker_error is None:
            other = files.setdefault(block.filename, block)
            if other.code != block.code:
                clashes.append(f"{block.filename}: {other.name} and {block.name}")
    return files, clashes


class Pages:
    """The pages' runs, and the reader's directory that file and pytest blocks are saved into."""

    def __init__(self, request: pytest.FixtureRequest, directory: Path) -> None:
        self._request = request
        self._pages: dict[Path, Page] = {}
        self.directory = directory
        for name, block in saved_files(BLOCKS)[0].items():
            (directory / name).write_text(block.code, encoding="utf-8")
        sys.path.insert(0, str(directory))
        importlib.invalidate_caches()

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

    def execute(self, page: Page, block: Block) -> None:
        """Run one block in its page's namespace, inside its setup (``setup=``) and with the literals it maps."""
        page.done.add(block.line)
        setup = SETUPS[block.setup](self._request, self.directory) if block.setup else nullcontext(Reader())
        try:
            with setup as reader, environment(reader.env):
                code, rewrite = compile_block(block, reader)
                page.namespace.update(rewrite.bound)
                if rewrite.uses_cluster:
                    page.namespace[BOOTSTRAP] = self.bootstrap(page, block)
                page.execute(code)
        except BaseException:
            page.failed.append(block.name)
            raise

    def run(self, block: Block) -> None:
        """Run ``block``, after the blocks above it on its page that have not run yet."""
        page = self.page(block.path)
        for earlier in parse(block.path)[0]:
            if earlier.line >= block.line:
                break
            if earlier.line not in page.done and earlier.kind in ("run", "kafka") and earlier.marker_error is None:
                try:
                    self.execute(page, earlier)
                except Exception:
                    pass  # its own test reports it; this block's failure names it below
        try:
            self.execute(page, block)
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

    def import_file(self, block: Block) -> None:
        """Import the ``.py`` file ``block`` saved, as its module; a failure shows the traceback."""
        assert block.filename is not None
        if not block.filename.endswith(".py"):
            return
        saved = str(self.directory / block.filename)
        try:
            importlib.import_module(block.filename[: -len(".py")])
            return
        except Exception as exc:
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != saved:
                tb = tb.tb_next
            report = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
        pytest.fail(f"{block.name}: importing the file it saves failed ({where(block)})\n{report}", pytrace=False)

    def run_pytest(self, block: Block) -> None:
        """``python -m pytest NAME`` in the reader's directory, as the reader would run it."""
        assert block.filename is not None
        env = dict(os.environ, PYTHONPATH=str(self.directory), PYTHONDONTWRITEBYTECODE="1")
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *block.args, block.filename],
            cwd=self.directory, env=env, capture_output=True, text=True, timeout=600,
        )
        if result.returncode != 0:
            pytest.fail(
                f"{block.name}: pytest {block.filename} exited with {result.returncode} ({where(block)})\n"
                f"{result.stdout}{result.stderr}",
                pytrace=False,
            )

    def close(self) -> None:
        for page in self._pages.values():
            page.close()
        sys.path.remove(str(self.directory))
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(self.directory)):
                del sys.modules[name]


@pytest.fixture(scope="module")
def pages(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    runs = Pages(request, tmp_path_factory.mktemp("reader"))
    yield runs
    runs.close()


# ------------------------------------------------------------------ the tests

BLOCKS = all_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_example(block: Block, pages: Pages) -> None:
    if block.marker_error is not None:
        pytest.fail(f"{block.name}: {block.marker_error}", pytrace=False)
    if block.lang in PYTHON and (block.kind in ("skip", "compile", "file", "pytest") or block.reason is not None):
        compile_block(block)  # a SyntaxError names the Markdown file and line
    if block.kind == "file":
        pages.import_file(block)
        return
    if block.kind == "pytest":
        pages.run_pytest(block)
        return
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
    assert not stray, "markers above no block they can mark:\n" + "\n".join(f"{m.path}:{m.line}: {m.text}" for m in stray)
    clashes = saved_files(BLOCKS)[1]
    assert not clashes, "one file name saved with different text:\n" + "\n".join(clashes)


def _names(code: str) -> tuple[set[str], set[str], set[str]]:
    """(names the block imports, names it binds any way, names it reads) of a block's code."""
    tree = ast.parse(code)
    imported: set[str] = set()
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return imported, bound | imported, read


def test_every_block_imports_what_it_uses() -> None:
    """A block copied alone runs: a name an earlier block of its page imported is imported again where used.

    The page's shared namespace lets a block use an object an earlier one made (``producer``), not an
    import: a reader who pastes only the block they need would meet a ``NameError``.
    """
    missing: list[str] = []
    for path in doc_files():
        imported_above: set[str] = set()
        for block in parse(path)[0]:
            if block.lang != "python":
                continue
            imported, bound, read = _names(block.code)
            lacking = sorted((read - bound) & imported_above)
            if lacking:
                missing.append(f"{block.name}: uses {', '.join(lacking)} without importing it")
            imported_above |= imported
    assert not missing, "blocks that rely on an earlier block's import:\n" + "\n".join(missing)


def counts(blocks: list[Block]) -> dict[str, Counter[str]]:
    table: dict[str, Counter[str]] = {}
    for block in blocks:
        table.setdefault(block.name.rsplit(":", 1)[0], Counter())[block.kind] += 1
    return table


def render_counts(blocks: list[Block]) -> str:
    rows = [f"{'file':<40}" + "".join(f"{kind:>8}" for kind in KINDS)]
    for name, counter in counts(blocks).items():
        rows.append(f"{name:<40}" + "".join(f"{counter[kind]:>8}" for kind in KINDS))
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
