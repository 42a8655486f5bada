"""The command line as kcat and Kafka's console tools taught users: real subprocesses, few and fast.

What is checked: ``produce`` and ``metadata`` refuse to run without brokers (exit 2) unless ``--mock``;
a closed port is reported on stderr within 2 s, rate-limited, and ``--debug`` shows the library's DEBUG
lines; ``--version``; kcat's short options (``-b -t -k -H -p -X -F -D``) and positional files, read back;
the progress line only where stderr is a terminal and the input is not; ``metadata`` (and ``-L``) against
the mock and a real broker; and Ctrl-C at many points of a run: always the summary and exit 130, never
a traceback (the ``aioproducer-stdin`` thread once raised into a closed loop after the summary).

The commands run through :data:`RUNNER`, which prints ``imported`` once the package is imported, so
that times are measured from the command's start, not from the interpreter's imports (seconds on a
loaded machine). A Ctrl-C during those imports is Python's, before any aioproducer code runs; the
runner defers Ctrl-C before its marker, as ``main()`` does on its first line (the package's
``__main__`` calls it right after the import), so no point after the marker is outside the command's care.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from aioproducer._version import __version__
from aioproducer.cli import build_parser, produce
from aioproducer.cli.common import UsageError
from aioproducer.testing import KafkaCluster, MockCluster

pytestmark = pytest.mark.integration

RUNNER = (
    "import sys; import aioproducer.cli as cli; cli.Interrupts.defer(); sys.stderr.write('imported\\n'); "
    "sys.stderr.flush(); sys.exit(cli.main(sys.argv[1:]))"
)
SUMMARY = re.compile(r"^delivered \d+, failed (\d+); interrupted after \d+ lines read(; first error: .*)?$")
#: What a record abandoned by a second Ctrl-C fails with (the documented outcome: it counts as failed).
PRODUCE, NOT_ENOUGH_REPLICAS = 0, 19  # the API key; the retriable error code
ABANDONED = "ProducerClosedError: the producer was closed before this record was delivered"


def start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", RUNNER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def wait_imported(proc: subprocess.Popen[bytes], timeout: float = 60) -> float:
    """Block until the runner says the package is imported; the monotonic time it did."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line == b"imported\n", line + proc.stderr.read()
    return time.monotonic()


def run(*args: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    proc = start(*args)
    out, err = proc.communicate(stdin, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err.removeprefix(b"imported\n"))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


# ------------------------------------------------------------------ brokers required


@pytest.mark.parametrize("command", [["produce", "-t", "orders"], ["metadata"]])
def test_without_brokers_the_command_refuses_with_exit_2(command: list[str]) -> None:
    result = run(*command, stdin=b"hi\n")
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert err.startswith(f"aioproducer {command[0]}: error: no brokers given: pass --bootstrap-server HOST:PORT (-b)")
    assert "--mock" in err and "delivered" not in err and "started an embedded mock cluster" not in err


def test_mock_is_explicit_and_not_with_brokers() -> None:
    tried = run("produce", "-t", "orders", "--mock", stdin=b"hi\n")
    assert tried.returncode == 0 and tried.stderr.decode().splitlines()[-1] == "delivered 1, failed 0", tried.stderr
    both = run("produce", "-t", "orders", "--mock", "-b", "localhost:9092", stdin=b"hi\n")
    assert both.returncode == 2 and b"--mock starts its own cluster" in both.stderr


def test_version() -> None:
    result = subprocess.run([sys.executable, "-m", "aioproducer", "--version"], capture_output=True, timeout=60, check=False)
    assert (result.returncode, result.stdout.decode()) == (0, f"aioproducer {__version__}\n")


# ------------------------------------------------------------------ connection failures and logging


def test_a_closed_port_is_reported_on_stderr_within_2_s_rate_limited() -> None:
    proc = start("produce", "-b", f"127.0.0.1:{closed_port()}", "-t", "orders", "-X", "max.block.ms=2500")
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"lost\n")
    proc.stdin.close()
    began = wait_imported(proc)
    first = proc.stderr.readline().decode()
    seen = time.monotonic() - began
    assert first.startswith("WARNING aioproducer.network.client: ") and "no bootstrap server answered" in first, first
    assert seen < 2.0, f"the first failure was reported after {seen:.2f} s"
    rest = proc.stderr.read().decode().splitlines()
    proc.wait(timeout=30)
    warnings = [first] + [line for line in rest if line.startswith("WARNING")]
    # 2.5 s of attempts every 50..1000 ms (a dozen rounds) shown at most once a second: 2 or 3 lines.
    assert 2 <= len(warnings) <= 4, warnings
    assert rest[-1].startswith("delivered 0, failed 1; first error: KafkaTimeoutError: start(): "), rest
    assert proc.returncode == 1 and not any(line.startswith("DEBUG") for line in rest)


def test_debug_shows_the_librarys_debug_lines() -> None:
    result = run("produce", "-b", f"127.0.0.1:{closed_port()}", "-t", "orders", "-X", "max.block.ms=300", "--debug",
                 stdin=b"x\n")
    lines = result.stderr.decode().splitlines()
    assert any(line.startswith("DEBUG aioproducer.") for line in lines), lines
    assert result.returncode == 1


# ------------------------------------------------------------------ kcat's options and positional files


async def test_short_options_fixed_key_headers_partition_delimiter_properties_and_files(
    mock_cluster: MockCluster, tmp_path: Path
) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("# librdkafka-style too\nacks=1\nlinger.ms=0\n")
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_bytes(b"a;b;")
    second.write_bytes(b"e;f")
    result = run("produce", "-b", mock_cluster.bootstrap_servers, "-t", "orders", "-k", "fixed-key",
                 "-H", "source=cli", "-H", "v=2", "-p", "4", "-X", "compression.type=lz4", "-F", str(properties),
                 "-D", ";", str(first), "-", str(second), stdin=b"c;d;")
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[-1] == "delivered 6, failed 0"
    records = await mock_cluster.read("orders")
    assert [r.value for r in records] == [b"a", b"b", b"c", b"d", b"e", b"f"]  # the files in turn, stdin between
    assert {r.partition for r in records} == {4} and {r.key for r in records} == {b"fixed-key"}
    assert all(list(r.headers) == [("source", b"cli"), ("v", b"2")] for r in records)


@pytest.mark.parametrize("args, message", [
    (["-D", "ab"], "argument -D/--delimiter: must be one byte"),
    (["-H", "novalue"], "argument -H/--header: must be NAME=VALUE"),
])
def test_bad_short_options_are_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["produce", "-b", "localhost:9092", "-t", "orders", *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["-k", "k", "--property", "parse.key=true"], "--key (-k) gives every record its key: not with parse.key=true"),
    (["/no/such/file"], "cannot read '/no/such/file': No such file or directory"),
])
def test_a_key_with_parse_key_or_an_unreadable_file_is_refused_before_any_connection(args: list[str], message: str) -> None:
    parsed = build_parser().parse_args(["produce", "-b", f"127.0.0.1:{closed_port()}", "-t", "orders", *args])
    with pytest.raises(UsageError, match=re.escape(message)):
        produce.run(parsed)


# ------------------------------------------------------------------ the progress line


#: The progress line's prefix on a terminal (carriage return, erase line).
PROGRESS = b"\r\x1b[Kread "


def produce_on_a_terminal(bootstrap: str, typed: bool, until: Callable[[bytes, float], bool]) -> tuple[bytes, float]:
    """Run produce with stderr on a pseudo-terminal, stdin a terminal too when ``typed``: stderr's bytes and how long input lasted.

    A line of input every 0.1 s, with stderr read throughout, until ``until(stderr so far, seconds
    since the start)`` (at most 60 s: then the test fails), then the input's end.
    """
    err_master, err_slave = pty.openpty()
    in_master, in_slave = pty.openpty() if typed else (None, None)
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "produce", "-b", bootstrap, "-t", "orders"],
                            stdin=in_slave if typed else subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err_slave)
    os.close(err_slave)
    if in_slave is not None:
        os.close(in_slave)
    seen = b""
    started = time.monotonic()
    try:
        while not until(seen, time.monotonic() - started):
            assert time.monotonic() - started < 60, f"no end of input after 60 s: {seen!r}"
            if in_master is not None:
                os.write(in_master, b"typed\n")
            else:
                assert proc.stdin is not None
                proc.stdin.write(b"piped\n")
                proc.stdin.flush()
            if select.select([err_master], [], [], 0.1)[0]:
                seen += os.read(err_master, 65536)
        lasted = time.monotonic() - started
        if in_master is not None:
            os.write(in_master, b"\x04")  # Ctrl-D: end of typed input
        else:
            assert proc.stdin is not None
            proc.stdin.close()
        proc.wait(timeout=30)
        while select.select([err_master], [], [], 0)[0]:
            try:
                chunk = os.read(err_master, 65536)
            except OSError:  # the terminal's other end is closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        proc.kill()
        os.close(err_master)
        if in_master is not None:
            os.close(in_master)
    assert b"delivered" in seen, seen
    return seen, lasted


def test_the_progress_line_shows_on_a_terminal_only_when_the_input_is_not_typed(mock_cluster: MockCluster) -> None:
    """Piped input: the progress line is redrawn (twice seen ends the input). Typed input: never, over as long a run.

    The typed run gets as long as the piped run needed to show the line twice (and at least 1.2 s,
    about five periods of 0.25 s), measured in this run, so a slow machine lengthens both.
    """
    piped, lasted = produce_on_a_terminal(mock_cluster.bootstrap_servers, typed=False,
                                          until=lambda seen, _elapsed: seen.count(PROGRESS) >= 2)
    assert PROGRESS in piped, piped
    typed, _ = produce_on_a_terminal(mock_cluster.bootstrap_servers, typed=True,
                                     until=lambda _seen, elapsed: elapsed >= max(lasted, 1.2))
    assert b"\x1b[K" not in typed and b"read " not in typed, typed


# ------------------------------------------------------------------ metadata


def test_metadata_lists_the_mocks_brokers_topics_partitions_leaders_and_isrs(mock_cluster: MockCluster) -> None:
    result = run("-L", "-b", mock_cluster.bootstrap_servers)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert " 3 brokers:" in out and out.count("  broker ") == 3
    assert 'topic "orders" with 6 partitions:' in out
    assert len(re.findall(r"partition \d, leader [123], replicas: \d,\d,\d, isrs: \d,\d,\d", out)) == 6, out
    unknown = run("metadata", "-b", mock_cluster.bootstrap_servers, "-t", "no-such-topic")
    assert unknown.returncode == 1 and b"topic 'no-such-topic': UnknownTopicOrPartitionError" in unknown.stderr


def test_metadata_against_real_kafka(kafka_cluster: KafkaCluster) -> None:
    kafka_cluster.create_topic("cli-metadata", partitions=3)
    result = run("metadata", "-b", kafka_cluster.bootstrap_servers, "-t", "cli-metadata")
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert " 1 brokers:" in out and out.count("  broker ") == 1, out
    assert 'topic "cli-metadata" with 3 partitions:' in out
    assert all(f"partition {p}, leader " in out for p in range(3)), out
    assert re.search(r"replicas: \d+, isrs: \d+", out), out


# ------------------------------------------------------------------ Ctrl-C


#: When Ctrl-C comes, after the package is imported: while arguments are read and the producer starts,
#: while lines are read and sent, while the command waits for more input; every other point twice (the
#: second 10 ms after the first abandons what was sent). The sleeps are the points of the run under
#: test, not waits for a condition.
INTERRUPT_AFTER_S = (0.0, 0.001, 0.003, 0.006, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0)


def interrupted_runs(bootstrap: str, delays: Sequence[float]) -> list[tuple[float, bool, int, str]]:
    """Start one produce per delay at once; SIGINT each that long after its import (every other one twice)."""
    procs = [start("produce", "-b", bootstrap, "-t", "orders", "--no-progress") for _ in delays]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"line-%d\n" % i for i in range(200)))
        proc.stdin.flush()  # and left open: the input has not ended when Ctrl-C comes
    ready = [wait_imported(proc) for proc in procs]
    plan = sorted(zip(procs, delays, ready, [i % 2 == 1 for i in range(len(delays))], strict=True),
                  key=lambda t: t[2] + t[1])
    for proc, delay, began, twice in plan:
        time.sleep(max(0.0, began + delay - time.monotonic()))
        proc.send_signal(signal.SIGINT)
        if twice:
            time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
        assert proc.stdin is not None
        proc.stdin.close()  # the end of input comes while the run shuts down: the stdin thread wakes then
    results = []
    for proc, delay, _, twice in plan:
        assert proc.stderr is not None
        err = proc.stderr.read()  # to its end: the process has exited (produce writes nothing to stdout)
        results.append((delay, twice, proc.wait(timeout=60), err.decode()))
    return results


def test_ctrl_c_at_any_point_prints_the_summary_and_exits_130_never_a_traceback(mock_cluster: MockCluster) -> None:
    """One Ctrl-C: every record sent is delivered. Two: those still unacknowledged at the second fail
    as closed, and nothing else; whether any are left then is the mock's timing, so both are accepted."""
    for delay, twice, status, err in interrupted_runs(mock_cluster.bootstrap_servers, INTERRUPT_AFTER_S):
        lines = err.splitlines()
        summary = SUMMARY.match(lines[-1]) if lines else None
        assert status == 130 and summary, (delay, twice, status, err)
        assert "Traceback" not in err and "Exception ignored" not in err, (delay, twice, err)
        abandoned = int(summary.group(1))
        if not twice or abandoned == 0:
            assert "Error" not in err and summary.group(2) is None, (delay, twice, err)
            continue
        assert summary.group(2).endswith(ABANDONED), (delay, err)  # the first error is the abandonment
        errors = [line for line in lines if "Error" in line]
        assert all(ABANDONED in line for line in errors), (delay, err)  # and no other error anywhere


def test_a_second_ctrl_c_fails_the_unacknowledged_records_as_closed_and_nothing_else(mock_cluster: MockCluster) -> None:
    """Every Produce answered NOT_ENOUGH_REPLICAS (retriable) holds every record unacknowledged: the first
    Ctrl-C waits for them, the second abandons them; each counts as failed, closed, and the run exits 130."""
    mock_cluster.push_request_errors(PRODUCE, *[NOT_ENOUGH_REPLICAS] * 10_000)
    mock_cluster.start_request_tracking()
    proc = start("produce", "-b", mock_cluster.bootstrap_servers, "-t", "orders", "--no-progress")
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"".join(b"line-%d\n" % i for i in range(50)))
    proc.stdin.close()  # the input ends: the command flushes, and waits on the retries
    wait_imported(proc)
    deadline = time.monotonic() + 60
    while sum(r.api_key == PRODUCE for r in mock_cluster.requests()) < 2:  # a retry: the records are held
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.01)
    deadline = time.monotonic() + 60
    while proc.poll() is None:  # until it exits: two signals sent at once may arrive as one
        assert time.monotonic() < deadline, "still running after 60 s of Ctrl-C"
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    err = proc.stderr.read().decode()
    assert proc.returncode == 130, err
    lines = err.splitlines()
    summary = SUMMARY.match(lines[-1])
    assert summary and lines[-1].startswith("delivered 0, failed 50;"), err
    assert summary.group(2) is not None and summary.group(2).endswith(ABANDONED), err
    assert "Traceback" not in err and all(ABANDONED in line for line in lines if "Error" in line), err
