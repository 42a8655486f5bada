"""send_arrow() refuses malformed Arrow data before queuing anything, and reads well-formed data at any alignment.

The data comes from ``arrow_c.export``: pyarrow's valid export, copied into memory the test
owns and then broken as another exporter (or a bug in one) might break it. Each refusal is a
``ValueError`` naming the fault, raised before the first row is queued: nothing reaches the
broker, the call hands back no delivery, and the producer goes on sending.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster

from arrow_c import Exported, Node, export, offsets_of, set_offset

pytestmark = pytest.mark.integration

TOPIC = "orders"
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
MALFORMED = r"^send_arrow: malformed Arrow data: "


def headers_batch(list_type: pa.DataType = HEADERS) -> pa.RecordBatch:
    """Three rows with 1, 2 and no header entries: list offsets [0, 1, 3, 3] over 3 entries."""
    return pa.RecordBatch.from_pydict({
        "value": pa.array([b"v0", b"v1", b"v2"]),
        "key": pa.array([b"k0", b"k1", b"k2"], pa.large_binary()),
        "headers": pa.array([[{"key": "a", "value": b"1"}], [{"key": "b", "value": None}, {"key": "c", "value": b"3"}], None], list_type),
        "partition": pa.array([0, 0, 0], pa.int32()),
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(3)], pa.timestamp("ms")),
    })


def column(exported: Exported, name: str) -> Node:
    index: int = exported.schema.get_field_index(name)
    return exported.root.children[index]


def _offset(name: str, slot: int, value: int) -> Callable[[Exported], None]:
    return lambda e: set_offset(column(e, name), slot, value)


def _entries(e: Exported) -> Node:
    return column(e, "headers").children[0]


def _shorter_struct(e: Exported) -> None:
    _entries(e).length = 2  # the list offsets still reach entry 3


def _shorter_key_field(e: Exported) -> None:
    _entries(e).children[0].length = 2  # the struct has 3 entries


def _struct_without_its_buffer(e: Exported) -> None:
    _entries(e).n_buffers = 0


def _null_offsets(e: Exported) -> None:
    column(e, "headers").buffers[1] = None


def _null_data(e: Exported) -> None:
    column(e, "value").buffers[2] = None


def _null_count_without_bitmap(e: Exported) -> None:
    column(e, "value").null_count = 1


def _negative_child_offset(e: Exported) -> None:
    _entries(e).offset = -1


MALFORMED_CASES: dict[str, tuple[Callable[[Exported], None], str]] = {
    # The headers' list offsets [0, 1, 3, 3] index a struct of 3 entries.
    "list offsets past the entries by a little": (_offset("headers", 3, 4), "past"),
    "list offsets past the entries by a lot": (_offset("headers", 3, 2**31 - 1), "past"),
    "list offsets that decrease": (_offset("headers", 2, 0), "decrease"),
    "a negative list offset": (_offset("headers", 0, -1), "negative"),
    "a struct shorter than the list offsets": (_shorter_struct, "past"),
    "a header key field shorter than its struct": (_shorter_key_field, "shorter"),
    "a header struct without its validity buffer": (_struct_without_its_buffer, "buffers"),
    "a negative offset of the header struct": (_negative_child_offset, "negative"),
    "a NULL list offsets buffer": (_null_offsets, "NULL"),
    # The value column's offsets [0, 2, 4, 6], the key column's (large_binary) the same.
    "binary offsets that decrease": (_offset("value", 2, 1), "decrease"),
    "large binary offsets that decrease": (_offset("key", 1, 5), "decrease"),
    "a negative binary offset": (_offset("value", 0, -2), "negative"),
    "a NULL binary data buffer": (_null_data, "NULL"),
    "a null count without a validity bitmap": (_null_count_without_bitmap, "null count"),
}


@pytest.mark.parametrize("case", list(MALFORMED_CASES))
async def test_malformed_arrow_data_is_refused_before_anything_is_queued(mock_cluster: MockCluster, case: str) -> None:
    mutate, words = MALFORMED_CASES[case]
    exported = export(headers_batch())
    mutate(exported)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        with pytest.raises(ValueError, match=MALFORMED) as caught:
            await producer.send_arrow(TOPIC, exported)
        assert type(caught.value) is ValueError and words in str(caught.value)
        assert not hasattr(caught.value, "delivery")  # nothing was queued: no rows to hand back
        await producer.flush()
        assert producer.metrics()["record-send-total"] == 0
        report = await (await producer.send_arrow(TOPIC, export(headers_batch())))  # the producer is fine
        assert report.delivered == 3
    assert [r.value for r in await mock_cluster.read(TOPIC)] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("large", [False, True], ids=["list", "large_list"])
async def test_every_buffer_misaligned_is_read_as_it_is(mock_cluster: MockCluster, large: bool) -> None:
    """The C data interface recommends alignment but does not promise it: each buffer starts 1 to 7 bytes off."""
    batch = headers_batch(pa.large_list(HEADERS.value_type) if large else HEADERS)
    exported = export(batch)
    for k, node in enumerate(exported.root.walk()):
        node.shifts = {i: 1 + (i + k) % 7 for i in range(len(node.buffers))}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        report = await (await producer.send_arrow(TOPIC, exported))
    assert report.delivered == 3
    got = [(r.key, r.value, r.headers, r.timestamp) for r in await mock_cluster.read(TOPIC)]
    assert got == [
        (b"k0", b"v0", (("a", b"1"),), 1_700_000_000_000),
        (b"k1", b"v1", (("b", None), ("c", b"3")), 1_700_000_000_001),
        (b"k2", b"v2", (), 1_700_000_000_002),
    ]
    assert offsets_of(column(exported, "headers")) == [0, 1, 3, 3]  # the layout the test meant
