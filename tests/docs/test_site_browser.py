"""The docs site in a real browser: built, served on localhost, loaded in headless Chromium.

The site is built from the repository's ``mkdocs.yml`` (``mkdocs build`` into a temporary
directory; ``mkdocs build --strict`` is CI's own step) and served by ``http.server`` on a free
localhost port: search needs HTTP (its index is fetched by a web worker), not ``file://``. Three
pages are loaded: the home page, the first page of the nav's *Tutorial* section, and the API
reference (the first page whose source holds a mkdocstrings ``:::`` directive). On each the test
asserts that the navigation rendered (visible links in Material's sidebar and tabs) and that its
code blocks are highlighted (Pygments' token spans, coloured unlike the plain code text; the
tutorial page must have one); on the home page, that typing ``SEARCH_TERM`` ("linger") into
Material's search box lists a result that links to ``SEARCH_PAGE`` (the configuration reference,
whose table has ``linger.ms``); on the API reference, that mkdocstrings' objects rendered; that the
browser's console shows no error; and that no page fetched anything from another host (mkdocs.yml's
``theme.font: false``: no Google Fonts, the site works offline). A screenshot of each page goes to
``test-artifacts/docs-site/`` (gitignored), taken before the page's checks, so a failure's page can
be seen.

The browser is Debian's ``chromium`` driven through Debian's ``chromium-driver`` by Selenium
(``.ci/run`` installs them). Why Selenium and not Playwright: Debian builds the driver from the
same source as the browser, so the two always match, and Selenium is pure Python; Playwright
drives one pinned Chromium build of its own, which this machine cannot download, and Debian's may
be a different version from the one it speaks to. The driver and the browser are given by path
(``/usr/bin/chromedriver``, ``/usr/bin/chromium``), so Selenium Manager downloads nothing.

Skips with the reason when mkdocs, ``mkdocs.yml``, Selenium or Chromium is missing;
``AIOPRODUCER_REQUIRE_DOCS=1`` (``.ci/run``) turns each skip into a failure.
``AIOPRODUCER_MKDOCS_YML`` builds another config instead of the repository's (to try the test
against a throwaway site).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

pytestmark = pytest.mark.source_tree  # builds the site from the source tree, see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "docs-site"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1000",  # wide enough that Material shows the navigation as a sidebar
)
TIMEOUT = 20.0
#: A word to type into the search box, and the page (its source under docs/) a result must link to.
SEARCH_TERM = "linger"
SEARCH_PAGE = "reference/configuration.md"


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``AIOPRODUCER_REQUIRE_DOCS=1``."""
    if os.environ.get("AIOPRODUCER_REQUIRE_DOCS") == "1":
        pytest.fail(f"AIOPRODUCER_REQUIRE_DOCS=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class Site:
    directory: Path
    home: str
    tutorial: str
    api: str
    search_page: str


def _first_page(entry: Any) -> str | None:
    """The first Markdown path under a nav entry (a path, ``{title: entry}`` or a list of entries)."""
    if isinstance(entry, str):
        return entry if entry.endswith(".md") else None
    if isinstance(entry, dict):
        entry = list(entry.values())
    if isinstance(entry, list):
        for item in entry:
            found = _first_page(item)
            if found is not None:
                return found
    return None


def _nav_section(nav: list[Any], title: str) -> Any:
    for item in nav:
        if isinstance(item, dict):
            for name, value in item.items():
                if str(name).strip().lower().startswith(title):
                    return value
                if isinstance(value, list):
                    found = _nav_section(value, title)
                    if found is not None:
                        return found
    return None


def build_site(config_file: Path, out: Path) -> Site:
    """``mkdocs build`` of ``config_file`` into ``out``; the three pages' URLs, found from the config."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files

    env = {k: v for k, v in os.environ.items() if k != "NO_MKDOCS_2_WARNING"}  # a banner must not need hiding
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--quiet", "-f", str(config_file), "-d", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}\n{result.stderr}"
    banner = [line for line in result.stderr.splitlines() if "│" in line or "end of life" in line or "MkDocs 2.0" in line]
    assert not banner, "the theme prints a banner on every build (pin mkdocs-material below it):\n" + "\n".join(banner)
    config = load_config(str(config_file))
    files = {f.src_uri: f for f in get_files(config) if f.is_documentation_page()}
    assert config["nav"], f"{config_file} has no nav"
    tutorial = _first_page(_nav_section(config["nav"], "tutorial"))
    assert tutorial is not None, f"no Tutorial section with a page in {config_file}'s nav"
    assert tutorial in files, f"the nav's first Tutorial page, {tutorial}, is not in {config['docs_dir']}"
    api = sorted(
        (uri for uri, f in files.items() if any(line.startswith(":::") for line in Path(f.abs_src_path or "").read_text().splitlines())),
        key=lambda uri: ("api" not in uri.lower(), uri),
    )
    assert api, f"no page of {config['docs_dir']} holds a mkdocstrings ':::' directive (the API reference)"
    assert SEARCH_PAGE in files, f"the search test's page, {SEARCH_PAGE}, is not in {config['docs_dir']}"
    return Site(out, "", files[tutorial].url, files[api[0]].url, files[SEARCH_PAGE].url)


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on a free localhost port, until the block ends."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        unavailable(f"selenium is not installed ({exc}): pip install -e '.[test]'")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            unavailable(f"{path} is missing: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        driver.set_page_load_timeout(TIMEOUT)
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, script: str, what: str, shown: str | None = None) -> Any:
    """Poll the page's ``script`` (a JS expression) until it is truthy; fail naming ``what``
    and, if given, what the JS expression ``shown`` finds on the page then."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        value = driver.execute_script(f"return {script};")
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; the page shows {driver.execute_script(f'return {shown};')!r}" if shown else ""
            pytest.fail(f"{driver.current_url}: {what} (waited {TIMEOUT:.0f} s){seen}", pytrace=False)
        time.sleep(0.1)


#: Visible links of Material's navigation: the sidebar's (primary nav) and, with navigation.tabs, the header's tabs.
NAV_LINKS = """Array.from(document.querySelectorAll('nav.md-nav--primary a.md-nav__link, .md-tabs a.md-tabs__link'))
    .filter(a => a.offsetParent !== null && a.textContent.trim()).map(a => a.textContent.trim())"""

#: Highlighted code: the code blocks Pygments tokenised with something to colour (a keyword, a
#: builtin or function name, a string, a number, an operator, a comment: a plain name ``n`` and
#: punctuation are the text's own colour in the theme, so a signature such as
#: ``topic_partition: TopicPartition`` has nothing to colour), and of those the ones where such
#: a span is coloured unlike the block's plain text.
HIGHLIGHTED = """(() => {
    const colourable = span => /^(k[a-z]?|n[a-z]|s[a-z0-9]?|m[a-z]?|o[a-z]?|c[a-z0-9]?)$/.test(span.className);
    const tokens = code => Array.from(code.querySelectorAll('span[class]')).filter(colourable);
    const blocks = Array.from(document.querySelectorAll('.highlight code')).filter(code => tokens(code).length);
    const coloured = blocks.filter(code => {
        const plain = getComputedStyle(code).color;
        return tokens(code).some(span => getComputedStyle(span).color !== plain);
    });
    return [blocks.length, coloured.length];
})()"""

#: The search's visible result links, as absolute URLs (Material adds ``?h=term``, a section's link ``#anchor``).
SEARCH_RESULTS = """Array.from(document.querySelectorAll('.md-search-result__item a.md-search-result__link'))
    .filter(a => a.offsetParent !== null).map(a => a.href)"""
#: Material's line above the results: "No matching documents", "1 matching document", ...
SEARCH_META = "(document.querySelector('.md-search-result__meta') || {}).textContent || ''"
#: Every resource the page fetched (scripts, styles, fonts, the search index), as absolute URLs.
RESOURCES = "performance.getEntriesByType('resource').map(r => r.name)"


def check_page(driver: Any, url: str, shot: str, *, code: bool = True) -> None:
    """The page loads, its navigation shows links, its code blocks (at least one if ``code``) are highlighted."""
    driver.get(url)
    wait_for(driver, "document.readyState === 'complete'", "the page did not finish loading")
    driver.save_screenshot(str(ARTIFACTS / shot))  # before the checks: a failure's page is there to see
    links = wait_for(driver, NAV_LINKS, "no navigation links rendered (nav.md-nav--primary, .md-tabs)")
    assert len(links) >= 2, f"{url}: the navigation shows only {links}"
    blocks, coloured = driver.execute_script(f"return {HIGHLIGHTED};")
    assert blocks or not code, f"{url}: no highlighted code block (a fenced block of a language, in .highlight)"
    assert coloured == blocks, f"{url}: {blocks - coloured} of {blocks} code blocks are not highlighted"
    foreign = [r for r in driver.execute_script(f"return {RESOURCES};") if r.split("/")[:3] != url.split("/")[:3]]
    assert not foreign, f"{url}: fetched from another host (mkdocs.yml's theme.font: false?): {foreign}"


def test_the_site_in_chromium(tmp_path: Path) -> None:
    config_file = Path(os.environ.get("AIOPRODUCER_MKDOCS_YML", ROOT / "mkdocs.yml"))
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        unavailable("mkdocs is not installed: pip install -e '.[docs]'")
    if not config_file.exists():
        unavailable(f"{config_file} does not exist (no docs site yet)")
    site = build_site(config_file, tmp_path / "site")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with serve(site.directory) as base, chromium(tmp_path / "chromium-profile") as driver:
        check_page(driver, base + site.home, "home.png", code=False)

        # search: Material's search box, fed by search/search_index.json through a web worker
        boxes = driver.find_elements("css selector", "input.md-search__input")
        assert boxes, f"{base}: no search box (input.md-search__input): is mkdocs.yml's search plugin on?"
        box = boxes[0]
        driver.execute_script("document.querySelector('label.md-search__icon, [data-md-toggle=search]').click()")
        wait_for(driver, "document.querySelector('input.md-search__input').offsetParent !== null", "the search box did not open")
        box.send_keys(SEARCH_TERM)
        page = base + site.search_page
        found = wait_for(
            driver, f"({SEARCH_RESULTS}).some(href => {{ const u = new URL(href); return u.origin + u.pathname === {page!r}; }})",
            f"no result of a search for {SEARCH_TERM!r} links to {site.search_page} ({page})",
            shown=f"[{SEARCH_META}, {SEARCH_RESULTS}]",
        )
        driver.save_screenshot(str(ARTIFACTS / f"search-{SEARCH_TERM}.png"))
        assert found is True

        check_page(driver, base + site.tutorial, "tutorial.png")
        check_page(driver, base + site.api, "api-reference.png", code=False)
        objects = driver.execute_script("return document.querySelectorAll('.doc.doc-object, .doc-heading').length")
        assert objects, f"{site.api}: no mkdocstrings object rendered"

        # the site's errors: a script failing, a missing page or asset (nothing comes from another host)
        severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, "errors in the browser's console:\n" + "\n".join(severe)
