"""The command line's pure parts under hostile input: line assembly, numbers, secrets, metrics output.

Why unit tests: the 64 MB line without a newline took a minute because each chunk copied the
line so far again; the work is counted here (bytes copied), not timed, so the check cannot
flake. Secrets are checked on every path that turns user input into an error message.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import threading
from typing import Any

import pytest

from aioproducer.cli import build_parser, perf, produce
from aioproducer.cli.common import integer, is_secret_key, redact, secrets_in_arguments, throughput
from aioproducer.cli.lines import LineError, LineFormat
from aioproducer.cli.properties import PropertiesError, parse_assignment
from aioproducer.cli.stdin import LineAssembler, OversizedLine, read_lines

CHUNK = 1 << 16


# ------------------------------------------------------------------ line assembly


def test_a_long_line_without_newline_is_assembled_in_linear_work() -> None:
    chunks = 256  # 16 MiB in 64 KiB reads, as os.read returns a pipe
    assembler = LineAssembler()
    piece = b"x" * CHUNK
    for _ in range(chunks):
        assert assembler.feed(piece) == []
    [line] = assembler.feed(b"\n")
    assert line == piece * chunks
    total = chunks * CHUNK
    # Linear: each byte is copied by the chunk split and once by the final join. Adding each
    # chunk to the line so far copies it chunks / 2 times on average (128 x here).
    assert assembler.copied <= 3 * total, assembler.copied


def test_lines_are_those_of_bytes_split_whatever_the_chunking() -> None:
    rng = random.Random(7)
    for _ in range(200):
        text = bytes(rng.choice(b"ab\n\r") for _ in range(rng.randrange(0, 60)))
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randrange(0, 6))))
        assembler = LineAssembler()
        got: list[object] = []
        start = 0
        for cut in [*cuts, len(text)]:
            got += assembler.feed(text[start:cut])
            start = cut
        got += assembler.finish()
        expected = text.split(b"\n")
        if expected[-1] == b"":
            expected.pop()
        assert got == [line[:-1] if line.endswith(b"\r") else line for line in expected], (text, cuts)


def test_a_line_over_the_limit_is_dropped_as_read_and_reported_by_length() -> None:
    assembler = LineAssembler(max_line_bytes=10)
    assert assembler.feed(b"short\n0123456789\r\n01234567890\nab") == [
        b"short",
        b"0123456789",  # exactly the limit, once its \r is gone
        OversizedLine(11),
    ]
    for _ in range(100):  # an endless line: nothing of it is kept, nothing joined
        assert assembler.feed(b"y" * 1000) == []
    copied = assembler.copied
    assert assembler.feed(b"z\nlast") == [OversizedLine(2 + 100 * 1000 + 1)]
    assert assembler.copied == copied + len(b"z\nlast")  # the split only: the dropped line was never joined
    assert assembler.finish() == [b"last"]


# ------------------------------------------------------------------ numeric options


@pytest.mark.parametrize("text", ["-3", "0", "10001", "x", "1.5", ""])
def test_partitions_out_of_range_is_a_usage_error_naming_the_option(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    perf_test = ["perf-test", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"]
    for command in (["produce", "--topic", "t"], perf_test, ["demo"]):
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([*command, "--partitions", text])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "argument --partitions: must be an integer in 1..10000" in err and "Traceback" not in err


def test_demo_count_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["demo", "--count", "-1"])
    assert exit_info.value.code == 2 and "argument --count: must be an integer in 0..1000000" in capsys.readouterr().err


def test_integer_and_throughput_types() -> None:
    parse = integer("--x", 0, 5)
    assert parse(" 5 ") == 5
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be an integer in 0\.\.5, got -1"):
        parse("-1")
    assert throughput("-1") == -1 and throughput("2.5") == 2.5
    for bad in ("0", "nan", "inf", "fast"):
        with pytest.raises(argparse.ArgumentTypeError):
            throughput(bad)


@pytest.mark.parametrize(
    "args",
    [
        ["--num-records", "0"],
        ["--num-records", "-5"],
        ["--record-size", "0"],
        ["--reporting-interval", "0"],
        ["--transaction-duration-ms", "0"],
        ["--warmup-records", "-1"],
        ["--throughput", "0"],
    ],
)
def test_perf_test_numbers_are_checked_by_argparse(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    base = {"--num-records": "10", "--record-size": "1", "--throughput": "-1"}
    base.update(dict(zip(args[::2], args[1::2])))
    argv = ["perf-test", "--topic", "t", *[x for kv in base.items() for x in kv]]
    for option, value in zip(args[::2], args[1::2]):
        if option not in base:
            argv += [option, value]
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert f"argument {args[0]}:" in capsys.readouterr().err


# ------------------------------------------------------------------ secrets


def test_secret_keys_and_arguments() -> None:
    for key in ("sasl.password", "ssl.key.password", "sasl.jaas.config", "ssl.keystore.key", "sasl.oauthbearer.token.endpoint.url", "x.client.secret"):
        assert is_secret_key(key), key
    for key in ("key.separator", "parse.key", "acks", "key.serializer", "ssl.keystore.location"):
        assert not is_secret_key(key), key
    argv = ["--producer-property", "sasl.password:S3CRET", "parse.key=true", 'sasl.jaas.config=x required password="p w";']
    assert secrets_in_arguments(argv) == ["S3CRET", 'x required password="p w";']
    assert secrets_in_arguments(["--producer-property", "sasl.password", "S3CRET"]) == ["S3CRET"]
    assert secrets_in_arguments(["--command-property=sasl.password:S3CRET"]) == ["S3CRET"]
    assert redact("got sasl.password:S3CRET and S3CRET2", ["S3CRET", "S3CRET2"]) == "got sasl.password:****** and ******"


@pytest.mark.parametrize("text", ["sasl.password:S3CRET", "sasl.password S3CRET", "=S3CRET", "S3CRET"])
def test_a_malformed_assignment_is_reported_without_its_value(text: str) -> None:
    with pytest.raises(PropertiesError) as info:
        parse_assignment(text, "--producer-property")
    assert "S3CRET" not in str(info.value)
    assert "--producer-property expects key=value" in str(info.value)


def test_a_malformed_line_is_reported_without_its_content() -> None:
    fmt = LineFormat(parse_key=True, parse_headers=True)
    with pytest.raises(LineError) as info:
        fmt.parse(b"authorization Bearer S3CRET\tk\tv", 4)
    assert "S3CRET" not in str(info.value) and "header 1 on line number 4" in str(info.value)
    with pytest.raises(LineError) as info:
        LineFormat(parse_key=True).parse(b"token S3CRET", 9)
    assert "S3CRET" not in str(info.value) and "line number 9 (12 bytes" in str(info.value)


# ------------------------------------------------------------------ produce options


def test_console_producer_options_set_their_keys_only_when_given() -> None:
    args = build_parser().parse_args(["produce", "--topic", "t"])
    assert produce._overrides(args) == {}
    args = build_parser().parse_args(
        ["produce", "--topic", "t", "--timeout", "0", "--request-required-acks", "1", "--batch-size", "1000",
         "--max-block-ms", "2500", "--max-memory-bytes", "1048576", "--message-send-max-retries", "3",
         "--retry-backoff-ms", "50", "--request-timeout-ms", "1500", "--metadata-expiry-ms", "60000",
         "--socket-buffer-size", "102400", "--compression-codec", "--bootstrap-server", "h:1"]
    )  # fmt: skip
    assert produce._overrides(args) == {
        "linger.ms": "0",
        "acks": "1",
        "batch.size": "1000",
        "max.block.ms": "2500",
        "buffer.memory": "1048576",
        "retries": "3",
        "retry.backoff.ms": "50",
        "request.timeout.ms": "1500",
        "metadata.max.age.ms": "60000",
        "send.buffer.bytes": "102400",
        "compression.type": "gzip",
        "bootstrap.servers": "h:1",
    }


# ------------------------------------------------------------------ perf-test output


def test_metrics_are_printed_as_kafkas_tools_print_them() -> None:
    stream = io.StringIO()
    perf.print_metrics({"records_sent": 3, "a_rate": 1.23456, "last_error": None}, perf.Output(stream))
    assert stream.getvalue().splitlines() == [
        "",
        "Metric Name    Value",
        "a_rate       : 1.235",
        "last_error   : None",
        "records_sent : 3",
    ]


def test_output_to_a_closed_pipe_is_noted_not_raised() -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    output = perf.Output(Closed())
    output.line("1 records sent")
    output.line("2 records sent")
    assert output.closed


def test_values_as_kafkas_tool_makes_them() -> None:
    def values(*argv: str) -> list[bytes]:
        args = build_parser().parse_args(["perf-test", "--topic", "t", "--num-records", "5", "--throughput", "-1", *argv])
        value = perf.value_source(args, perf.Output(io.StringIO()))
        return [value(i) for i in range(2000)]

    sized = values("--record-size", "100")
    assert all(len(v) == 100 and v.isalpha() and v.isupper() for v in sized)
    assert len(set(sized)) == perf.VALUE_POOL  # differing from record to record, as Kafka's
    assert values("--payload-monotonic")[:3] == [b"0", b"1", b"2"]


class _StandInProducer:
    """Just enough of Producer for perf-test's loop: ``send()`` never suspends, as the real one with room.

    A sender task stands for the real producer's: each time the event loop lets it run, it
    acknowledges every record sent so far. ``most_waiting`` is the most records ever waiting.
    """

    def __init__(self, config: dict[str, str]) -> None:
        self.waiting: list[Any] = []
        self.most_waiting = 0
        self.sender: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _StandInProducer:
        self.sender = asyncio.create_task(self._send_loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.sender is not None
        self.sender.cancel()

    async def _send_loop(self) -> None:
        while True:
            await asyncio.sleep(0)
            self._acknowledge()

    def _acknowledge(self) -> None:
        waiting, self.waiting = self.waiting, []
        for on_delivery in waiting:
            on_delivery(None, None)

    async def send(self, topic: str, value: bytes, on_delivery: Any) -> None:
        self.waiting.append(on_delivery)
        self.most_waiting = max(self.most_waiting, len(self.waiting))

    async def flush(self) -> None:
        self._acknowledge()


async def test_perf_test_lets_the_sender_run_while_it_sends_unthrottled() -> None:
    now = 0.0

    def clock() -> float:  # 0.1 ms per reading: a fast send loop
        nonlocal now
        now += 0.0001
        return now

    made: list[_StandInProducer] = []

    def make(config: dict[str, str]) -> _StandInProducer:
        made.append(_StandInProducer(config))
        return made[-1]

    output = perf.Output(io.StringIO())
    plan = perf.Plan("t", 5000, -1.0, 0, None, False, lambda i: b"x", clock=clock, make_producer=make)  # type: ignore[arg-type]
    stats = perf.Stats(5000, 5000, output)
    await perf._perf({}, plan, stats, perf.Failures())
    assert stats.count == 5000
    # Without yielding, all 5,000 records waited for the sender (a real producer's whole buffer).
    assert made[0].most_waiting <= 50, made[0].most_waiting


# ------------------------------------------------------------------ the stdin thread and the loop's end


def test_input_after_the_loop_closed_never_reaches_it_from_the_stdin_thread() -> None:
    """The race Ctrl-C met: the thread, blocked in os.read while the run ended, wakes with input to a closed loop.

    Before the handoff was closed with the consumer, the thread called ``call_soon_threadsafe`` on the closed
    loop and its RuntimeError traceback appeared after the command's summary.
    """
    read_end, write_end = os.pipe()
    errors: list[BaseException | None] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)

    async def take_one_chunk() -> None:
        async for lines in read_lines(read_end):
            assert lines == [b"first"]
            break  # the run ends with the thread reading on

    try:
        os.write(write_end, b"first\n")
        asyncio.run(take_one_chunk())  # closes the generator, then the loop
        readers = [t for t in threading.enumerate() if t.name == "aioproducer-stdin"]
        assert readers, "the stdin thread should still be blocked in os.read"
        os.write(write_end, b"late\n")
        os.close(write_end)
        for thread in readers:
            thread.join(10)
            assert not thread.is_alive()
    finally:
        threading.excepthook = hook
        os.close(read_end)
    assert errors == []


# ------------------------------------------------------------------ Ctrl-C around the loop's making


class _NeverStarted:
    """Stands for ``produce``'s ``_Run``: its ``main()`` must not begin once a Ctrl-C came first."""

    def __init__(self) -> None:
        self.began = False

    async def main(self) -> None:
        self.began = True


def test_a_ctrl_c_while_the_loop_is_made_ends_the_run_before_main_with_the_loop_closed_and_nothing_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C that lands while asyncio builds the loop is noted, then raised once the loop exists:
    ``main()`` never begins, no coroutine is reported as never awaited, no loop is left half-built."""
    import gc
    import signal
    import sys
    import warnings

    from aioproducer.cli.common import Interrupts

    made: list[asyncio.AbstractEventLoop] = []
    original = asyncio.events.new_event_loop

    def interrupted_while_made() -> asyncio.AbstractEventLoop:
        signal.raise_signal(signal.SIGINT)  # the Ctrl-C, delivered to whatever handler is installed now
        loop = original()
        made.append(loop)
        return loop

    monkeypatch.setattr(asyncio.events, "new_event_loop", interrupted_while_made)
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    run = _NeverStarted()
    previous = signal.getsignal(signal.SIGINT)
    try:
        with warnings.catch_warnings(record=True) as caught, pytest.raises(KeyboardInterrupt):
            warnings.simplefilter("always")
            produce._run_in_new_loop(run)  # type: ignore[arg-type]  # a stand-in with main()
        gc.collect()
    finally:
        Interrupts.take()
        signal.signal(signal.SIGINT, previous)
    assert not run.began
    assert len(made) == 1 and made[0].is_closed()
    assert [str(w.message) for w in caught] == [] and unraisable == []
