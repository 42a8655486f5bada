"""The FastAPI tutorial's "Run it" section, its shell commands run as the page gives them.

docs/tutorial/fastapi-service.md tells the reader to start a mock cluster with one command, the
service with a second (the cluster's printed address in ``KAFKA_BOOTSTRAP_SERVERS``) and to POST
an order with ``curl``. This test reads those three commands from the page and runs them: the
mock cluster's command as written, uvicorn's with the address the cluster printed in place of the
page's sample one and a free port added (``--port``, so that the test needs no port 8000), and
the ``curl`` call's method, headers and body sent with urllib (curl itself may not be installed),
to the same port. The answer must be the page's. A body without ``amount`` must be the 422 the
page promises. Ctrl-C (SIGINT) must stop the service with status 0, as the page says.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_examples import ROOT, parse

from aioproducer.testing._processes import free_port  # the harness's picker: never one port twice

pytestmark = pytest.mark.source_tree

PAGE = ROOT / "docs" / "tutorial" / "fastapi-service.md"


def shell_blocks(path: Path) -> list[str]:
    """The ```sh blocks of a page, line continuations joined."""
    blocks: list[str] = []
    lines: list[str] = []
    inside = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not inside and line.strip() == "```sh":
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append(" ".join(part.rstrip("\\").strip() for part in lines))
        elif inside:
            lines.append(line)
    return blocks


def commands(program: str) -> list[list[str]]:
    """The page's shell commands that run ``program`` (after any ``NAME=value`` words), split as the shell would."""
    found = []
    for block in shell_blocks(PAGE):
        words = shlex.split(block, comments=True)
        run = [word for word in words if "=" not in word or word.startswith("-")]
        if run[: len(program.split())] == program.split():
            found.append(words)
    return found


def command(program: str) -> list[str]:
    """The page's one shell command that runs ``program``."""
    found = commands(program)
    assert len(found) == 1, f"{PAGE.name}: expected one sh block running {program!r}, found {found}"
    return found[0]


@pytest.fixture
def reader_dir(tmp_path: Path) -> Path:
    """The reader's folder: the page's ``app.py``, saved as the page says."""
    [app] = [block for block in parse(PAGE)[0] if block.filename == "app.py"]
    (tmp_path / "app.py").write_text(app.code, encoding="utf-8")
    return tmp_path


@pytest.fixture
def mock_cluster_process(reader_dir: Path) -> Iterator[str]:
    """The page's ``python -m aioproducer.testing ...``, running; yields the address it printed."""
    args = command("python -m aioproducer.testing")
    assert args[0] == "python"
    process = subprocess.Popen([sys.executable, *args[1:]], cwd=reader_dir, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith("bootstrap.servers="), f"the page says the cluster prints its address; it printed {first!r}"
        yield first.partition("=")[2]
    finally:
        process.terminate()
        process.wait(timeout=30)


def post(url: str, curl: list[str], body: str | None = None) -> tuple[int, str]:
    """The page's curl call (``-X``, ``-H``, ``-d``) made with urllib, to ``url``; ``body`` replaces its ``-d``."""
    method, headers, data = "GET", {}, None
    words = iter(curl[1:])
    for word in words:
        if word == "-X":
            method = next(words)
        elif word == "-H":
            name, _, value = next(words).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            data = next(words)
        elif word == "|":  # what the page pipes the answer into is the reader's filter
            break
        elif word != "-s" and not word.startswith("localhost:"):
            raise AssertionError(f"the page's curl has {word!r}, which this test does not read")
    payload = (body if body is not None else data or "").encode()
    request = urllib.request.Request(url, data=payload, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def test_the_service_runs_as_the_page_says(reader_dir: Path, mock_cluster_process: str) -> None:
    uvicorn = command("uvicorn")
    assert uvicorn[0].startswith("KAFKA_BOOTSTRAP_SERVERS=") and uvicorn[1:] == ["uvicorn", "app:app"], uvicorn
    [curl] = [words for words in commands("curl") if "POST" in words]
    [target] = [word for word in curl if word.startswith("localhost:8000/")]
    gets = {word.partition("/")[2]: words for words in commands("curl") if "POST" not in words
            for word in words if word.startswith("localhost:8000/")}
    assert set(gets) == {"ready", "metrics"}, gets
    port = free_port()
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=mock_cluster_process, PYTHONDONTWRITEBYTECODE="1")
    service = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port)],
        cwd=reader_dir, env=env, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert service.stderr is not None
        for line in service.stderr:  # uvicorn says when it serves; no sleep
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail(f"uvicorn exited with {service.wait()} before serving")
        url = f"http://127.0.0.1:{port}/{target.partition('/')[2]}"
        status, text = post(url, curl)
        assert status == 200, text
        assert json.loads(text) == {"partition": json.loads(text)["partition"], "offset": 0}
        status, text = post(url, curl, body='{"order_id": "o-2"}')
        assert status == 422, text
        base = f"http://127.0.0.1:{port}/"
        assert post(base + "ready", gets["ready"]) == (200, '{"ready":true}')
        status, text = post(base + "metrics", gets["metrics"])
        sent = [line for line in text.splitlines() if line.startswith("kafka_producer_record_send_total{")]
        assert status == 200 and len(sent) == 1 and sent[0].endswith(" 1.0"), text
        service.send_signal(signal.SIGINT)  # the reader's Ctrl-C
        assert service.wait(timeout=60) == 0
        rest = service.stderr.read()
        assert "Application shutdown complete" in rest, rest
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
