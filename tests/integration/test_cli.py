"""The ``aioproducer`` command line, run as a subprocess against the mock cluster.

What is checked: ``produce`` delivers exactly what its input says (read back
with librdkafka's consumer, an independent decoder), reports failures in its
summary and exit status, refuses bad arguments with one line and status 2,
and reads Java properties files as Java does; ``perf-test`` prints lines in
Kafka's format whose numbers agree with each other and with its options.
The pure parts (properties text, line format) are also checked directly.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from aioproducer.cli.lines import LineError, LineFormat
from aioproducer.cli.progress import progress
from aioproducer.cli.properties import parse_properties
from aioproducer.testing import MockCluster
from readback import ReadRecord, fetch_raw_records, read_confluent

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 6
#: Kafka's error code for TOPIC_AUTHORIZATION_FAILED: not retriable, so the records fail at once.
TOPIC_AUTHORIZATION_FAILED = 29
#: UNKNOWN_TOPIC_OR_PARTITION, reported in Metadata so that send() waits max.block.ms and fails.
UNKNOWN_TOPIC_OR_PARTITION = 3
PRODUCE_API = 0


def run_cli(*args: str, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """``python -m aioproducer ARGS`` with ``stdin``; output captured (so stderr is not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "aioproducer", *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Each partition's high watermark, asked of the brokers by librdkafka (not by aioproducer)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-test", "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, partitions: int) -> dict[int, list[ReadRecord]]:
    """Every record of every partition, read with confluent-kafka."""
    ends = high_watermarks(bootstrap, topic, partitions)
    return {
        p: read_confluent(bootstrap, topic, p, count=end, timeout=60) if end else [] for p, end in enumerate(ends)
    }


# ------------------------------------------------------------------ produce


def test_produce_100k_lines_with_keys_and_headers_read_back_exactly(mock_cluster: MockCluster) -> None:
    count = 100_000
    lines = [f"seq:{i},src:cli\tkey-{i % 97}\tvalue-{i}" for i in range(count)]
    result = run_cli(
        "produce",
        "--bootstrap-servers",
        mock_cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        stdin=("\n".join(lines) + "\n").encode(),
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr.decode().strip().splitlines()[-1] == f"delivered {count}, failed 0"

    by_partition = read_topic(mock_cluster.bootstrap_servers, TOPIC, PARTITIONS)
    got = [r for records in by_partition.values() for r in records]
    assert len(got) == count
    expected = {
        i: (f"key-{i % 97}".encode(), [("seq", str(i).encode()), ("src", b"cli")]) for i in range(count)
    }
    seen: Counter[int] = Counter()
    for record in got:
        assert record.value is not None and record.value.startswith(b"value-")
        i = int(record.value[len(b"value-") :])
        seen[i] += 1
        assert (record.key, record.headers) == expected[i]
    assert seen == Counter(range(count))  # each value exactly once
    for records in by_partition.values():  # one key, one partition; per partition, input order
        indexes = [int(r.value[len(b"value-") :]) for r in records if r.value is not None]
        assert indexes == sorted(indexes)
    keys_per_partition = [{r.key for r in records} for records in by_partition.values()]
    assert sum(len(keys) for keys in keys_per_partition) == 97


def test_produce_null_marker_custom_separators_and_no_ansi_when_not_a_terminal(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("small", 1)
    stdin = b"a=1;b=NULL|k1:v1\r\nNULL|NULL:v2\n|k3:\n"
    result = run_cli(
        "produce",
        "--bootstrap-server",
        mock_cluster.bootstrap_servers,
        "--topic",
        "small",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "parse.headers=true",
        "--property",
        "headers.delimiter=|",
        "--property",
        "headers.separator=;",
        "--property",
        "headers.key.separator==",
        "--property",
        "null.marker=NULL",
        stdin=stdin,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert b"\x1b" not in result.stderr
    records = read_topic(mock_cluster.bootstrap_servers, "small", 1)[0]
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k1", b"v1", [("a", b"1"), ("b", None)]),
        (None, b"v2", []),
        (b"k3", b"", []),
    ]


def test_produce_reports_delivery_failures_and_exits_1(mock_cluster: MockCluster) -> None:
    mock_cluster.push_request_errors(PRODUCE_API, *[TOPIC_AUTHORIZATION_FAILED] * 100)
    result = run_cli(
        "produce",
        "--bootstrap-servers",
        mock_cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        stdin=b"".join(b"line %d\n" % i for i in range(10)),
    )
    assert result.returncode == 1
    summary = result.stderr.decode().strip().splitlines()[-1]
    assert summary.startswith("delivered 0, failed 10; first error: ")
    assert "TopicAuthorization" in summary


def test_produce_reports_send_failures_and_exits_1(mock_cluster: MockCluster) -> None:
    mock_cluster.set_topic_error("missing", UNKNOWN_TOPIC_OR_PARTITION)
    result = run_cli(
        "produce",
        "--bootstrap-servers",
        mock_cluster.bootstrap_servers,
        "--topic",
        "missing",
        "--producer-property",
        "max.block.ms=200",
        stdin=b"a\nb\n",
    )
    assert result.returncode == 1
    summary = result.stderr.decode().strip().splitlines()[-1]
    assert re.fullmatch(r"delivered 0, failed 2; first error: line 1: KafkaTimeoutError: .*missing.*", summary), summary


def test_produce_counts_malformed_lines_as_failed(mock_cluster: MockCluster) -> None:
    result = run_cli(
        "produce",
        "--bootstrap-servers",
        mock_cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        "--property",
        "parse.key=true",
        stdin=b"k\tv\nno separator\n",
    )
    assert result.returncode == 1
    summary = result.stderr.decode().strip().splitlines()[-1]
    assert summary == (
        "delivered 1, failed 1; first error: No key separator found on line number 2 (12 bytes; the line is not shown)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["produce", "--topic", TOPIC, "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["produce"], "the following arguments are required: -t/--topic"),
        (["produce", "--topic", TOPIC, "--property", "parse.key"], "--property expects key=value"),
        (["produce", "--topic", TOPIC, "--property", "parse.kee=true"], "unknown --property 'parse.kee'"),
        (["produce", "--topic", TOPIC, "--producer-property", "=1"], "--producer-property expects key=value"),
        (["produce", "--topic", TOPIC, "--producer-property", "linger.mss=1"], "did you mean 'linger.ms'"),
        (["produce", "--topic", TOPIC, "--producer-property", "acks=some"], "acks"),
        (["produce", "--topic", TOPIC, "--producer.config", "/nonexistent/client.properties"], "cannot read"),
        (["produce", "--topic", TOPIC, "--compression-codec", "brotli"], "invalid choice: 'brotli'"),
        (["perf-test", "--topic", TOPIC, "--num-records", "0", "--record-size", "1", "--throughput", "-1"], "--num-records"),
        (["perf-test", "--topic", TOPIC, "--num-records", "1", "--record-size", "1", "--throughput", "-1", "--producer-props", "x"], "--producer-props expects key=value"),
        (["produce", "--topic", TOPIC, "--partitions", "-3"], "argument --partitions: must be an integer in 1..10000, got -3"),
        (["produce", "--topic", TOPIC, "--partitions", "0"], "argument --partitions: must be an integer in 1..10000, got 0"),
        (["perf-test", "--topic", TOPIC, "--num-records", "1", "--record-size", "1", "--throughput", "-1", "--partitions", "-3"], "argument --partitions: must be"),
        (["perf-test", "--topic", TOPIC, "--num-records", "1", "--record-size", "1", "--throughput", "0"], "argument --throughput: must be above 0"),
        (["perf-test", "--topic", TOPIC, "--num-records", "5", "--record-size", "1", "--throughput", "-1", "--warmup-records", "5"], "--warmup-records must be fewer than --num-records"),
        (["perf-test", "--topic", TOPIC, "--num-records", "5", "--record-size", "1", "--payload-monotonic", "--throughput", "-1"], "not allowed with argument --record-size"),
        (["perf-test", "--topic", TOPIC, "--num-records", "5", "--throughput", "-1"], "one of the arguments --record-size --payload-file --payload-monotonic is required"),
        (["perf-test", "--topic", TOPIC, "--num-records", "5", "--payload-file", "/nonexistent/words", "--throughput", "-1"], "--payload-file '/nonexistent/words' cannot be read"),
        (["produce", "--topic", TOPIC, "--producer-property", "acks=1", "--command-property", "acks=0"], "argument -X/--command-property: not allowed with argument --producer-property"),
        (["produce", "--topic", TOPIC, "--property", "parse.key=true", "--reader-property", "parse.key=true"], "not allowed with argument --property"),
        (["produce", "--topic", TOPIC, "--producer.config", "/dev/null", "--command-config", "/dev/null"], "not allowed with argument"),
        (["produce", "--topic", TOPIC, "--reader-config", "/nonexistent/reader.properties"], "cannot read"),
        (["produce", "--topic", TOPIC, "--request-required-acks", "2"], "argument --request-required-acks: invalid choice: '2'"),
        (["produce", "--topic", TOPIC, "--batch-size", "-1"], "argument --batch-size: must be an integer in 0..2147483647"),
        (["produce", "--topic", TOPIC, "--max-block-ms", "soon"], "argument --max-block-ms: must be an integer"),
        (["produce", "--topic", "bad topic!"], "argument -t/--topic: topic 'bad topic!' contains ' ', '!'"),
        (["perf-test", "--topic", "..", "--num-records", "1", "--record-size", "1", "--throughput", "-1"], "argument -t/--topic: "),
    ],
)
def test_bad_arguments_exit_2_with_one_line(mock_cluster: MockCluster, args: list[str], message: str) -> None:
    result = run_cli(*args, "--bootstrap-servers", mock_cluster.bootstrap_servers, stdin=b"never read\n")
    assert result.returncode == 2
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("aioproducer") and "error:" in lines[0] and message in lines[0], lines[0]


SECRET = "S3CRET"


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "--topic", TOPIC, "--producer-property", f"sasl.password:{SECRET}"],
        ["produce", "--topic", TOPIC, "--command-property", f"sasl.password {SECRET}"],
        ["produce", "--topic", TOPIC, "--producer-property", "sasl.password", SECRET],
        ["produce", "--topic", TOPIC, "--producer-property", "a=1", f'sasl.jaas.config=x required password="{SECRET}";'],
        ["produce", "--topic", TOPIC, "--producer-property", f"ssl.key.password={SECRET}", "--producer-property", "linger.mss=1"],
        ["produce", "--topic", TOPIC, "--producer-property", f"sasl.password={SECRET}", "--producer-property", f"sasl.password={SECRET}2",
         "--producer-property", "security.protocol=SASL_PLAINTEXT", "--producer-property", "sasl.mechanism=PLAIN"],
        ["produce", "--topic", TOPIC, "--producer-property", "security.protocol=SASL_PLAINTEXT", "--producer-property",
         "sasl.mechanism=PLAIN", "--producer-property", f"sasl.jaas.config=org.Login required password={SECRET}"],
        ["perf-test", "--topic", TOPIC, "--num-records", "1", "--record-size", "1", "--throughput", "-1",
         "--producer-props", f"sasl.password:{SECRET}"],
    ],
)  # fmt: skip
def test_no_secret_in_any_error(mock_cluster: MockCluster, args: list[str]) -> None:
    result = run_cli(*args, "--bootstrap-servers", mock_cluster.bootstrap_servers, stdin=b"x\n")
    assert result.returncode in (1, 2), result
    output = (result.stdout + result.stderr).decode()
    assert SECRET not in output, output
    assert "error" in output


def test_no_secret_from_a_properties_file_in_an_error(mock_cluster: MockCluster, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(f"sasl.password={SECRET}\nsasl.password={SECRET}\nsasl.mechanism=NOPE\nsecurity.protocol=SASL_PLAINTEXT\n")
    result = run_cli("produce", "--command-config", str(config), "--topic", TOPIC, "--bootstrap-servers", mock_cluster.bootstrap_servers)
    assert result.returncode in (1, 2)
    assert SECRET not in result.stderr.decode() and "error" in result.stderr.decode()


def test_produce_a_line_longer_than_a_record_may_be_fails_alone_with_its_line_number(mock_cluster: MockCluster) -> None:
    stdin = b"a\n" + b"x" * (2 << 20) + b"\nb\n"
    result = run_cli("produce", "--bootstrap-servers", mock_cluster.bootstrap_servers, "--topic", TOPIC, stdin=stdin)
    assert result.returncode == 1
    assert result.stderr.decode().strip().splitlines()[-1] == (
        "delivered 2, failed 1; first error: line 2 is 2097152 bytes, more than a record may be "
        "(max.request.size and buffer.memory allow 1048576): not sent"
    )


def test_produce_sigint_prints_the_summary_and_exits_130(mock_cluster: MockCluster) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aioproducer", "produce", "--bootstrap-servers", mock_cluster.bootstrap_servers,
         "--topic", TOPIC, "--no-progress"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"line-%d\n" % i for i in range(10)))
        proc.stdin.flush()  # and left open: the input has not ended when Ctrl-C comes
        deadline = time.monotonic() + 60
        while sum(high_watermarks(mock_cluster.bootstrap_servers, TOPIC, PARTITIONS)) < 10:
            assert proc.poll() is None and time.monotonic() < deadline, "the 10 lines were never delivered"
            time.sleep(0.05)  # polling the condition above, with its bound
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    lines = err.decode().splitlines()
    assert lines[-1] == "delivered 10, failed 0; interrupted after 10 lines read", lines
    assert "Traceback" not in err.decode()


def count_batches(raw: bytes) -> int:
    """Record batches in a Fetch's records bytes (baseOffset 8, batchLength 4, then batchLength bytes)."""
    count = position = 0
    while position + 12 <= len(raw):
        position += 12 + int.from_bytes(raw[position + 8 : position + 12], "big")
        count += 1
    return count


def test_produce_sync_sends_each_line_alone_and_kafka_option_names(mock_cluster: MockCluster, tmp_path: Path) -> None:
    mock_cluster.create_topic("sync", 1)
    mock_cluster.create_topic("async", 1)
    reader = tmp_path / "reader.properties"
    reader.write_text("parse.key=true\nkey.separator=:\n")
    client = tmp_path / "client.properties"
    client.write_text(f"bootstrap.servers={mock_cluster.bootstrap_servers}\nlinger.ms=60000\n")
    common = ["--command-config", str(client), "--reader-config", str(reader), "--reader-property", "key.separator=|",
              "--request-required-acks", "all", "--batch-size", "65536", "--max-block-ms", "5000",
              "--command-property", "client.id=cli-test"]  # fmt: skip
    stdin = b"k1|a\nk2|b\nk3|c\n"
    # --timeout overrides linger.ms from the file; --sync waits for each record before the next
    synced = run_cli("produce", "--topic", "sync", *common, "--timeout", "0", "--sync", stdin=stdin)
    assert synced.returncode == 0, synced.stderr.decode()
    lingering = run_cli("produce", "--topic", "async", *common, "--timeout", "10000", stdin=stdin)
    assert lingering.returncode == 0, lingering.stderr.decode()
    for topic, batches in (("sync", 3), ("async", 1)):
        raw = asyncio.run(fetch_raw_records(mock_cluster.bootstrap_servers, topic, 0))
        assert count_batches(raw) == batches, topic
        records = read_confluent(mock_cluster.bootstrap_servers, topic, 0, count=3, timeout=30)
        assert [(r.key, r.value) for r in records] == [(b"k1", b"a"), (b"k2", b"b"), (b"k3", b"c")]


def test_properties_file_comments_continuation_and_escapes(mock_cluster: MockCluster, tmp_path: Path) -> None:
    first, rest = mock_cluster.bootstrap_servers.split(",", 1)
    config = tmp_path / "client.properties"
    config.write_text(
        "# a comment: no.such.key=1\n"
        "   ! another comment\n"
        "\n"
        f"bootstrap.servers = {first},\\\n"
        f"        {rest}\n"
        "compression\\.type : zs\\u0074d\n"  # "\." is ".", "\u0074" is "t"
        "linger.ms     5\n"  # whitespace separates key and value
        "client.id=cli\\=\\:\\ test\n",
        encoding="utf-8",
    )
    result = run_cli("produce", "--producer.config", str(config), "--topic", TOPIC, "--partitions", "1", stdin=b"x\n")
    assert result.returncode == 0, result.stderr.decode()
    assert "embedded" not in result.stderr.decode()  # bootstrap.servers came from the file
    ends = high_watermarks(mock_cluster.bootstrap_servers, TOPIC, PARTITIONS)
    partition = next(p for p, end in enumerate(ends) if end)
    raw = asyncio.run(fetch_raw_records(mock_cluster.bootstrap_servers, TOPIC, partition))
    attributes = int.from_bytes(raw[21:23], "big")  # baseOffset 8, length 4, epoch 4, magic 1, crc 4
    assert attributes & 0x7 == 4  # zstd


def test_parse_properties_as_java() -> None:
    text = [
        "# comment",
        "! comment",
        "a=1",
        "b : 2",
        "c 3",
        "d",
        "e=multi\\",
        "   line\\",
        "  # not a comment here",
        "f=\\u00e9\\t\\\\",
        "g\\ h=i",
        "j=ends with backslash\\\\",
        "k=x",
    ]
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "",
        "e": "multiline# not a comment here",
        "f": "é\t\\",
        "g h": "i",
        "j": "ends with backslash\\",
        "k": "x",
    }


def test_line_format_order_and_errors() -> None:
    fmt = LineFormat.from_properties({"parse.key": "true", "parse.headers": "true"})
    assert fmt.parse(b"h1:a,h1:b,h2:\tk\tv\tw", 1) == (b"k", b"v\tw", [("h1", b"a"), ("h1", b"b"), ("h2", b"")])
    with pytest.raises(LineError, match="No header key separator found in header 1 on line number 7"):
        fmt.parse(b"bad\tk\tv", 7)
    with pytest.raises(LineError, match="No headers delimiter found on line number 3"):
        fmt.parse(b"nothing", 3)
    lenient = LineFormat.from_properties({"parse.key": "true", "parse.headers": "true", "ignore.error": "true"})
    assert lenient.parse(b"nothing", 1) == (None, b"nothing", None)
    assert lenient.parse(b"bad\tv", 1) == (None, b"v", [("bad", None)])
    with pytest.raises(ValueError, match="headers.delimiter and headers.separator may not be equal"):
        LineFormat.from_properties({"headers.delimiter": ",", "headers.separator": ","})


async def test_progress_on_a_terminal_rewrites_one_line() -> None:
    class Terminal:
        def __init__(self) -> None:
            self.text = ""
            self.writes = asyncio.Event()

        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            self.text += text
            self.writes.set()
            return len(text)

        def flush(self) -> None:
            pass

    terminal = Terminal()
    async with progress(terminal, lambda: "read 1", enabled=True):  # type: ignore[arg-type]
        await asyncio.wait_for(terminal.writes.wait(), 5)
    assert terminal.text.startswith("\r\x1b[Kread 1")
    assert terminal.text.endswith("\r\x1b[K")
    assert "\n" not in terminal.text


# ---------------------------------------------------------------- perf-test

WINDOW = re.compile(
    rf"(\d+) records sent, (\d+\.\d) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d) ms avg latency, "
    rf"(\d+\.\d) ms max latency\."
)
TOTAL = re.compile(
    r"(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg latency, "
    r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\."
)


def test_perf_test_output_in_kafka_format_and_consistent(mock_cluster: MockCluster) -> None:
    num, size, throughput = 2000, 100, 4000
    result = run_cli(
        "perf-test",
        "--bootstrap-servers",
        mock_cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        "--num-records",
        str(num),
        "--record-size",
        str(size),
        "--throughput",
        str(throughput),
        "--reporting-interval",
        "100",
        "--producer-props",
        "linger.ms=1",
        "acks=all",
    )
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    *windows, total = lines
    # Pacing makes the run last at least (num - 1) / throughput = 0.5 s, so 100 ms windows close.
    assert windows, lines
    window_sent = 0
    for line in windows:
        match = WINDOW.fullmatch(line)
        assert match, line
        sent, _rate, _mb, avg, peak = (float(g) for g in match.groups())
        assert sent >= 1 and float(avg) <= float(peak)
        window_sent += int(sent)
    assert window_sent <= num
    match = TOTAL.fullmatch(total)
    assert match, total
    sent, rate, mb, avg, peak = (float(g) for g in match.groups()[:5])
    p50, p95, p99, p999 = (int(g) for g in match.groups()[5:])
    assert sent == num
    assert rate <= throughput * num / (num - 1) * 1.001  # paced: no faster than asked
    assert abs(mb - rate * size / 2**20) <= 0.006
    assert avg <= peak and p50 <= p95 <= p99 <= p999 <= peak
    assert sum(high_watermarks(mock_cluster.bootstrap_servers, TOPIC, PARTITIONS)) == num
    records = read_topic(mock_cluster.bootstrap_servers, TOPIC, PARTITIONS)
    values = {r.value for rs in records.values() for r in rs}
    assert len(values) > 1 and all(re.fullmatch(rb"[A-Z]{100}", v or b"") for v in values)  # as Kafka's: they differ


STEADY = re.compile(
    r"(\d+) steady state records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg latency, "
    r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\."
)


def test_perf_test_monotonic_payloads_warmup_transactions_and_metrics(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("mono", 1)
    result = run_cli(
        "perf-test", "--bootstrap-server", mock_cluster.bootstrap_servers, "--topic", "mono", "--num-records", "500",
        "--payload-monotonic", "--throughput", "-1", "--warmup-records", "100", "--print-metrics",
        "--transactional-id", "perf-tx", "--transaction-duration-ms", "1", "--command-property", "linger.ms=0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "Warmup first 100 records. Steady state results will print after the complete test summary."
    totals = [i for i, line in enumerate(lines) if TOTAL.fullmatch(line)]
    assert len(totals) == 1 and TOTAL.fullmatch(lines[totals[0]]).group(1) == "500"  # type: ignore[union-attr]
    steady = STEADY.fullmatch(lines[totals[0] + 1])
    assert steady and steady.group(1) == "400"
    metrics = lines[totals[0] + 2 :]
    assert metrics[0] == "" and re.fullmatch(r"Metric Name +Value", metrics[1])
    assert re.fullmatch(r"records_sent +: 500", next(m for m in metrics if m.startswith("records_sent")))
    # the mock writes its transaction markers with a zero CRC (a mock artefact): not checked
    records = read_confluent(mock_cluster.bootstrap_servers, "mono", 0, count=500, timeout=30, check_crcs=False)
    assert [r.value for r in records if r.value is not None and r.value.isdigit()] == [b"%d" % i for i in range(500)]


def test_perf_test_payload_file_with_a_delimiter(mock_cluster: MockCluster, tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("a,bb,,ccc,")
    result = run_cli(
        "perf-test", "--bootstrap-server", mock_cluster.bootstrap_servers, "--topic", TOPIC, "--num-records", "300",
        "--payload-file", str(payloads), "--payload-delimiter", ",", "--throughput", "-1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[:2] == [f"Reading payloads from: {payloads}", "Number of messages read: 3"]
    assert TOTAL.fullmatch(lines[-1])
    values = {r.value for rs in read_topic(mock_cluster.bootstrap_servers, TOPIC, PARTITIONS).values() for r in rs}
    assert values == {b"a", b"bb", b"ccc"}


def test_perf_test_ends_quietly_when_its_output_is_closed(mock_cluster: MockCluster) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aioproducer", "perf-test", "--bootstrap-servers", mock_cluster.bootstrap_servers,
         "--topic", TOPIC, "--num-records", "100000000", "--record-size", "10", "--throughput", "-1",
         "--reporting-interval", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline().decode().rstrip("\n")
        assert WINDOW.fullmatch(first), first
        proc.stdout.close()  # as `| head -1` does
        proc.wait(timeout=60)  # 100 million records would take minutes: it must end at its next line
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
    assert proc.returncode == 141
    assert err == "", err[-2000:]


def test_produce_an_unreadable_stdin_is_a_failure_not_a_traceback(mock_cluster: MockCluster) -> None:
    fd = os.open(os.devnull, os.O_WRONLY)  # open for writing only: read() fails with EBADF
    try:
        result = subprocess.run(
            [sys.executable, "-m", "aioproducer", "produce", "--bootstrap-servers", mock_cluster.bootstrap_servers,
             "--topic", TOPIC],
            stdin=fd, capture_output=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(fd)
    assert result.returncode == 1
    err = result.stderr.decode()
    assert err.splitlines()[-1].startswith("delivered 0, failed 1; first error: reading the input: "), err
    assert "Traceback" not in err
