"""A fuzz of send_arrow()'s Arrow reader over mutated exported data: no crash, and no row queued that is not reported.

Each round builds a valid record batch with pyarrow (every layout the sink takes, nulls, slices),
copies its C export (``arrow_c.export``), changes one to three things in it (an array's length,
offset, null count, buffer or child count; a buffer NULL or misaligned; an offset, a view, a
declared buffer size, a validity bit, an integer), and hands it to ``send_arrow`` on a
``FakeProducer`` (the real native path and accumulator; each batch read back from its bytes).
Each round must end one of two ways: refused before anything is queued (``ValueError:
send_arrow: malformed Arrow data: ...``, or the refusal of a bad row: ``InvalidRecordError``,
``RecordTooLargeError``), or every declared row queued and reported delivered. Across the rounds
the fake's history holds exactly the rows reported, and the process never crashes.

What no consumer can check is left alone (see ``arrow_c``): the C data interface gives no buffer
sizes, so a change that makes the reader go further into a buffer (a longer length, a larger
offset into binary data or a larger declared view buffer size) stays within the zeroed slack each
copied buffer has; everything else changes without bound. The slack holds the largest row the
producer takes (``max.request.size``), so even a row that reads slack is within memory.

``AIOPRODUCER_ARROW_FUZZ=100000`` runs more rounds (the suite runs 10,000, in about 5 s here);
``AIOPRODUCER_ARROW_FUZZ_SEED`` another seed. A failure names its round and the changes made.
"""

from __future__ import annotations

import os
import random
import string
import struct

import pyarrow as pa
import pytest

from aioproducer.errors import InvalidRecordError, RecordTooLargeError
from aioproducer.testing import FakeProducer

from arrow_c import OFFSET_FORMATS, Exported, Node, export, offsets_of, set_offset

pytestmark = pytest.mark.integration

ROUNDS = int(os.environ.get("AIOPRODUCER_ARROW_FUZZ", "10000"))
SEED = int(os.environ.get("AIOPRODUCER_ARROW_FUZZ_SEED", "40"))
TOPIC = "t"
PARTITIONS = 6
MAX_REQUEST = 16384
#: Zeroed bytes after every copied buffer: any row the producer takes fits in it.
SLACK = 4 * MAX_REQUEST
#: How far a mutation may move a length or an offset into a buffer's slack.
GROW = 3
MALFORMED = "send_arrow: malformed Arrow data: "

BINARY = [pa.binary(), pa.large_binary(), pa.string(), pa.large_string(), pa.binary_view(), pa.string_view()]
STRINGS = [pa.string(), pa.large_string(), pa.string_view()]
VIEWS = ("vu", "vz")
HUGE = [2**31 - 1, 2**40, 2**62]


def _blob(rng: random.Random, string_type: bool) -> str | bytes | None:
    if rng.random() < 0.15:
        return None
    n = rng.choice([0, 1, 5, 12, 13, 30])  # views: inline up to 12 bytes, in a data buffer past
    text = "".join(rng.choice(string.ascii_letters) for _ in range(n))
    return text if string_type else text.encode()


def _column(rng: random.Random, n: int, arrow_type: pa.DataType) -> pa.Array:
    strings = arrow_type in STRINGS
    return pa.array([_blob(rng, strings) for _ in range(n)], arrow_type)


def _headers(rng: random.Random, n: int) -> pa.Array:
    key_type, value_type = rng.choice(STRINGS), rng.choice(BINARY)
    entry = pa.struct([("key", key_type), ("value", value_type)])
    rows: list[list[dict[str, object]] | None] = []
    for _ in range(n):
        if rng.random() < 0.2:
            rows.append(None)
            continue
        strings = value_type in STRINGS
        rows.append([{"key": "h%d" % rng.randrange(9), "value": _blob(rng, strings)} for _ in range(rng.randrange(4))])
    return pa.array(rows, rng.choice([pa.list_, pa.large_list])(entry))


def valid_batch(rng: random.Random) -> pa.RecordBatch:
    """A valid record batch of 0 to 6 rows (maybe a slice), with a random choice of columns and layouts."""
    n = rng.randrange(9)
    columns = {"value": _column(rng, n, rng.choice(BINARY))}
    if rng.random() < 0.5:
        columns["key"] = _column(rng, n, rng.choice(BINARY))
    if rng.random() < 0.5:
        columns["partition"] = pa.array([rng.choice([None, *range(PARTITIONS)]) for _ in range(n)], rng.choice([pa.int8(), pa.int16(), pa.int32(), pa.int64()]))
    if rng.random() < 0.6:
        columns["headers"] = _headers(rng, n)
    if rng.random() < 0.4:
        columns["timestamp"] = pa.array([rng.choice([None, 1_700_000_000_000]) for _ in range(n)], pa.timestamp(rng.choice(["s", "ms", "us", "ns"])))
    batch = pa.RecordBatch.from_pydict(columns)
    if n and rng.random() < 0.4:
        start = rng.randrange(n)
        batch = batch.slice(start, rng.randrange(n - start + 1))
    return batch


# ------------------------------------------------------------------ mutations: each returns what it did


def _count(rng: random.Random, node: Node, is_root: bool, field: str) -> str:
    value: int = getattr(node, field)
    if is_root:  # checked against the columns' lengths, without bound
        new = rng.choice([-1, -(2**40), 2**40, value + 1, max(value - 1, 0), 0, value + rng.randrange(1, 100)])
    else:  # a child's own length and offset say how far into its buffers to read: no one can check that
        new = rng.choice([-1, -(2**40), max(value - 1, 0), value + rng.randrange(1, GROW + 1), 0])
    setattr(node, field, new)
    return f"{field} {value} -> {new}"


def _null_count(rng: random.Random, node: Node) -> str:
    node.null_count = rng.choice([-1, 0, 1, node.length, 2**40, -7])
    return f"null_count -> {node.null_count}"


def _n_buffers(rng: random.Random, node: Node) -> str:
    have = len(node.buffers)
    # A view array's last buffer holds its data buffers' sizes: fewer buffers than exported (but
    # some) would take a data buffer's bytes for sizes, which no consumer can tell.
    choices = [3, *range(have, have + 3)] if node.format in VIEWS else list(range(0, have + 3))
    node.n_buffers = rng.choice(choices)
    return f"n_buffers {have} -> {node.n_buffers}"


def _n_children(rng: random.Random, node: Node) -> str:
    node.n_children = rng.randrange(len(node.children) + 3)
    return f"n_children {len(node.children)} -> {node.n_children}"


def _null_buffer(rng: random.Random, node: Node) -> str:
    i = rng.randrange(len(node.buffers))
    node.buffers[i] = None
    return f"buffer {i} NULL"


def _misalign(rng: random.Random, node: Node) -> str:
    i = rng.randrange(len(node.buffers))
    node.shifts[i] = rng.randrange(1, 8)
    return f"buffer {i} at +{node.shifts[i]}"


def _offset_value(rng: random.Random, node: Node, entries: int) -> str:
    offsets = offsets_of(node)
    slot = rng.randrange(len(offsets))
    value = offsets[slot]
    choices = [value + rng.randrange(1, GROW + 1), value - rng.randrange(1, GROW + 1), -1, 0]
    if node.format.startswith("+"):  # list offsets: checked against the struct's length, without bound
        choices += [entries + 1, rng.randrange(2 * max(entries, 0) + 2), *HUGE[:1 if node.format == "+l" else 3]]
    else:  # binary offsets: only the last says how far the data goes, and a huge one makes a row too large
        data = node.buffers[2]
        choices.append(rng.randrange(len(data or b"") + SLACK // 4 + 1))
        if slot == node.offset + node.length:
            choices += HUGE[:1 if node.format in ("u", "z") else 3]
    bits = 8 * struct.calcsize(OFFSET_FORMATS[node.format]) - 1
    new = min(max(rng.choice(choices), -(2**bits)), 2**bits - 1)  # what the offset type holds
    set_offset(node, slot, new)
    return f"offset {slot}: {value} -> {new}"


def _view_field(rng: random.Random, node: Node) -> str:
    views = node.buffers[1]
    if not views:
        return "no view"
    slot = rng.randrange(len(views) // 16)
    field = rng.choice([0, 8, 12])  # length, buffer index, offset in the buffer
    new = rng.choice([-1, 0, 1, 12, 13, 100, 2**31 - 1, -(2**31)])
    struct.pack_into("<i", views, slot * 16 + field, new)
    return f"view {slot} field {field} -> {new}"


def _view_size(rng: random.Random, node: Node) -> str:
    sizes = node.buffers[-1]
    if not sizes:
        return "no sizes"
    k = rng.randrange(len(sizes) // 8)
    (size,) = struct.unpack_from("<q", sizes, 8 * k)
    new = rng.choice([-1, 0, max(size - 1, 0), size + rng.randrange(1, SLACK // 4)])
    struct.pack_into("<q", sizes, 8 * k, new)
    return f"size {k}: {size} -> {new}"


def _flip_bit(rng: random.Random, node: Node) -> str:
    bitmap = node.buffers[0]
    if not bitmap:
        return "no bitmap"
    bit = rng.randrange(8 * len(bitmap))
    bitmap[bit // 8] ^= 1 << (bit % 8)
    return f"validity bit {bit} flipped"


def _int_value(rng: random.Random, node: Node) -> str:
    data = node.buffers[1]
    if not data:
        return "no data"
    i = rng.randrange(len(data))
    data[i] = rng.randrange(256)
    return f"int byte {i} -> {data[i]}"


def mutate(rng: random.Random, exported: Exported) -> str:
    """One change to a random array of the export: what it was."""
    nodes = exported.root.walk()
    node = rng.choice(nodes)
    is_root = node is exported.root
    kinds = ["length", "offset", "null_count", "n_buffers", "n_children"]
    if node.buffers:
        kinds += ["null buffer", "misalign", "bit"]
    if node.format in OFFSET_FORMATS and len(node.buffers) >= 2 and node.buffers[1]:
        kinds += ["offsets"] * 4
    if node.format in VIEWS and len(node.buffers) >= 3:
        kinds += ["view", "view", "size"]
    if node.format in ("c", "s", "i", "l") or node.format.startswith("ts"):
        kinds += ["int"]
    kind = rng.choice(kinds)
    entries = node.children[0].length if node.children else 0
    what = {
        "length": lambda: _count(rng, node, is_root, "length"),
        "offset": lambda: _count(rng, node, is_root, "offset"),
        "null_count": lambda: _null_count(rng, node),
        "n_buffers": lambda: _n_buffers(rng, node),
        "n_children": lambda: _n_children(rng, node),
        "null buffer": lambda: _null_buffer(rng, node),
        "misalign": lambda: _misalign(rng, node),
        "bit": lambda: _flip_bit(rng, node),
        "offsets": lambda: _offset_value(rng, node, entries),
        "view": lambda: _view_field(rng, node),
        "size": lambda: _view_size(rng, node),
        "int": lambda: _int_value(rng, node),
    }[kind]()
    return f"{node.format} #{nodes.index(node)}: {what}"


# ------------------------------------------------------------------ the fuzz


async def test_mutated_arrow_data_is_refused_or_delivered_whole() -> None:
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {}
    reported = 0
    async with FakeProducer(topics={TOPIC: PARTITIONS}, max_request_size=MAX_REQUEST) as producer:
        for round_ in range(ROUNDS):
            batch = valid_batch(rng)
            exported = export(batch, slack=SLACK)
            changes = [mutate(rng, exported) for _ in range(rng.randint(1, 3))]
            where = f"round {round_} (seed {SEED}): {batch.schema} with {changes}"
            declared = exported.root.length
            try:
                delivery = await producer.send_arrow(TOPIC, exported)
            except (InvalidRecordError, RecordTooLargeError, ValueError) as exc:
                assert not hasattr(exc, "delivery"), f"{where}: refused after queuing rows: {exc!r}"
                if type(exc) is ValueError:
                    assert str(exc).startswith(MALFORMED), f"{where}: {exc!r}"
                outcome = type(exc).__name__
            else:
                report = await delivery
                assert (report.rows, report.delivered, report.failed) == (declared, declared, 0), f"{where}: {report}"
                reported += report.rows
                outcome = "delivered"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            assert len(producer.history()) == reported, f"{where}: rows queued that no report counts"
    print(f"send_arrow fuzz, {ROUNDS} rounds, seed {SEED}: {outcomes}, {reported} rows delivered")
    assert outcomes.get("ValueError", 0) > ROUNDS // 4 and outcomes.get("delivered", 0) > ROUNDS // 10  # both ways taken
