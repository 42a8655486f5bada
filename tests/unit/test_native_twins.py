"""The record-size formula and the varint, written in Python and in Rust, agree with each other.

Both sides size records: ``protocol/records.py``'s ``estimate_size_in_bytes_upper_bound`` is what
the accumulator reserves for ``send()``'s records and checks against ``max.request.size`` and
``buffer.memory``; ``native/src/batch_builder.rs``'s ``size_upper_bound`` does the same for
``send_arrow()``'s rows, and its ``record_size`` decides whether a record fits a batch (the Python
``record_size_in_bytes`` is the tests' oracle for the builder's size accounting). Both sides write
zigzag varlongs (``protocol/primitives.py``, the builder) and Python reads the builder's. A drift
between twins would let one door take a record the other refuses, or size a batch short; the Rust
tests compare the Rust side with literals only, so these compare each pair with each other, over
key, value and header sizes (the lengths where a length varint grows a byte included), header
counts, None keys, values and header values, non-ASCII header keys, and offset and timestamp
deltas over their whole ranges.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer import _native
from aioproducer.protocol import primitives, records

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
#: Lengths around those where a length's zigzag varint grows a byte (2 * n reaches 2**7, 2**14, 2**21).
LENGTH_STEPS = [0, 1, 63, 64, 65, 8191, 8192, 8193, 1048575, 1048576]

Headers = list[tuple[str, bytes | None]] | None


def _lengths(largest: int) -> st.SearchStrategy[int]:
    return st.integers(0, 200) | st.sampled_from([n for n in LENGTH_STEPS if n <= largest]) | st.integers(0, largest)


def _blobs(largest: int) -> st.SearchStrategy[bytes | None]:
    """None or ``n`` zero bytes: only a blob's length reaches a size."""
    return st.none() | _lengths(largest).map(bytes)


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Any integer in range, or one next to a power of two (where a zigzag varint grows a byte)."""
    steps = st.integers(0, 63).flatmap(lambda bits: st.sampled_from([2**bits - 1, 2**bits, -(2**bits), -(2**bits) - 1]))
    return st.integers(low, high) | steps.filter(lambda n: low <= n <= high)


#: A header key whose UTF-8 form is ``n`` bytes, in 2-byte characters where it can.
_long_keys = _lengths(10_000).map(lambda n: "é" * (n // 2) + "k" * (n % 2))
_headers: st.SearchStrategy[Headers] = (
    st.none()
    | st.lists(st.tuples(st.text(max_size=20) | _long_keys, _blobs(20_000)), max_size=5)
    | st.integers(62, 66).map(lambda count: [("h", None)] * count)  # the header count's varint grows at 64
)


@settings(max_examples=300, deadline=None)
@given(key=_blobs(1 << 21), value=_blobs(1 << 21), headers=_headers)
def test_the_upper_bound_of_a_record_is_the_same_in_python_and_in_rust(key: bytes | None, value: bytes | None, headers: Headers) -> None:
    python = records.estimate_size_in_bytes_upper_bound(key, value, headers)
    assert _native.estimate_size_in_bytes_upper_bound(key, value, headers) == python


@settings(max_examples=300, deadline=None)
@given(offset_delta=_ints(*INT32), timestamp_delta=_ints(*INT64), key=_blobs(1 << 21), value=_blobs(1 << 21), headers=_headers)
def test_the_size_of_a_record_is_the_same_in_python_and_in_rust(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Headers
) -> None:
    python = records.record_size_in_bytes(offset_delta, timestamp_delta, key, value, headers)
    assert _native.record_size_in_bytes(offset_delta, timestamp_delta, key, value, headers) == python


@settings(max_examples=500)
@given(value=_ints(*INT64))
def test_a_varlong_is_written_the_same_in_python_and_in_rust(value: int) -> None:
    encoded = _native.write_varlong(value)
    python = bytearray()
    primitives.write_varlong(python, value)
    assert encoded == bytes(python)
    assert len(encoded) == records._varint_size(value) == primitives.size_of_varlong(value)
    assert records._read_varint(memoryview(encoded), 0) == (value, len(encoded))  # the decoder tests and aioproducer.testing read with
