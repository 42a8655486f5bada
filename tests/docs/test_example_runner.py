"""The docs example runner's own rules (tests/docs/test_examples.py): markers and literal rewriting, without running a page."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_setups import Reader
from test_examples import BOOTSTRAP, Block, compile_block, parse_marker

pytestmark = pytest.mark.source_tree


def run(code: str, reader: Reader | None = None, bootstrap: str = "mock:1") -> dict[str, object]:
    compiled, rewrite = compile_block(Block(Path("page.md"), 1, code, "run", None), reader)
    namespace: dict[str, object] = {**rewrite.bound, BOOTSTRAP: bootstrap}
    exec(compiled, namespace)
    return namespace


@pytest.mark.parametrize(("marker", "error"), [
    ('<!-- example: kafka setup="secured" -->', None),
    ('<!-- example: run setup="spark" -->', None),
    ('<!-- example: kafka setup="nowhere" -->', "unknown setup 'nowhere'"),
    ('<!-- example: compile setup="spark" reason="x" -->', "setup= is a run or kafka example's"),
    ('<!-- example: skip setup="spark" reason="x" -->', "setup= is a run or kafka example's"),
    ('<!-- example: run set="spark" -->', "unknown marker argument 'set=spark'"),
])
def test_a_setup_is_named_on_a_run_or_kafka_block(marker: str, error: str | None) -> None:
    found = parse_marker(marker)[2]
    assert found == error if error is None else error in (found or "")


def test_a_setups_literals_become_its_values_and_nothing_else_does() -> None:
    reader = Reader(values={"/etc/kafka/ca.pem": "/tmp/ca.pem", 9100: 4711})
    got = run('ca = "/etc/kafka/ca.pem"\nport = 9100\nother = "/etc/kafka/other.pem"\nflag = True\none = 1\n', reader)
    assert (got["ca"], got["port"], got["other"], got["flag"]) == ("/tmp/ca.pem", 4711, "/etc/kafka/other.pem", True)
    # True == 1 and hash(True) == hash(1): a mapped 1 must not turn True into its value
    got = run("flag = True\none = 1\n", Reader(values={1: 2}))
    assert (got["flag"], got["one"]) == (True, 2)


def test_bootstrap_literals_point_at_the_cluster_unless_the_setup_maps_them_or_keeps_them() -> None:
    code = (
        'a = {"bootstrap.servers": "broker1:9092"}\n'
        'b = dict(bootstrap_servers="broker1:9092")\n'
        'class W:\n    def option(self, k, v): return v\n'
        'c = W().option("kafka.bootstrap.servers", "broker1:9092")\n'
        'd = W().option("topic", "broker1:9092")\n'
    )
    got = run(code)
    assert (got["a"], got["b"], got["c"], got["d"]) == ({"bootstrap.servers": "mock:1"}, {"bootstrap_servers": "mock:1"},
                                                          "mock:1", "broker1:9092")
    got = run(code, Reader(values={"broker1:9092": "tls:2"}))
    assert (got["a"], got["c"], got["d"]) == ({"bootstrap.servers": "tls:2"}, "tls:2", "tls:2")
    _, rewrite = compile_block(Block(Path("page.md"), 1, code, "run", None), Reader(cluster=False))
    assert not rewrite.uses_cluster
    assert run(code, Reader(cluster=False))["a"] == {"bootstrap.servers": "broker1:9092"}
