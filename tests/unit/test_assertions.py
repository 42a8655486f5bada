"""aioproducer.testing's guarantee assertions, fed records that break each guarantee in each way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from aioproducer.testing.assertions import assert_delivered_exactly_once, assert_ordered_per_key


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def log(*items: tuple[int, bytes | None, bytes | None]) -> list[Rec]:
    """Records as a partition log: offsets counted per partition in the order given."""
    next_offset: dict[int, int] = {}
    out = []
    for partition, key, value in items:
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        out.append(Rec(partition, offset, key, value))
    return out


# ------------------------------------------------------------- exactly once


def test_every_record_once_passes_in_any_read_order() -> None:
    records = log((0, b"a", b"1"), (1, b"b", b"2"), (0, b"a", b"3"))
    assert_delivered_exactly_once(reversed(records), [b"1", b"2", b"3"])
    assert_delivered_exactly_once(records, [("a", "1"), ("b", "2"), ("a", "3")])  # str as its UTF-8 bytes


def test_a_lost_record_is_named() -> None:
    with pytest.raises(AssertionError, match=r"3 sent, 2 read\): 1 lost: b'3'"):
        assert_delivered_exactly_once(log((0, None, b"1"), (0, None, b"2")), [b"1", b"2", b"3"])


def test_a_duplicate_is_named_with_where_it_was_read() -> None:
    with pytest.raises(AssertionError, match=r"1 read more often than sent: b'2' at 0@1, 0@2"):
        assert_delivered_exactly_once(log((0, None, b"1"), (0, None, b"2"), (0, None, b"2")), [b"1", b"2"])


def test_a_record_sent_twice_on_purpose_is_expected_twice() -> None:
    records = log((0, None, b"x"), (0, None, b"x"))
    assert_delivered_exactly_once(records, [b"x", b"x"])
    with pytest.raises(AssertionError, match="1 lost: b'x'"):
        assert_delivered_exactly_once(records[:1], [b"x", b"x"])


def test_a_record_never_sent_is_named() -> None:
    with pytest.raises(AssertionError, match=r"1 read but never sent: b'zz' at 2@0"):
        assert_delivered_exactly_once(log((0, None, b"1"), (2, None, b"zz")), [b"1"])


def test_keys_count_when_pairs_are_given() -> None:
    """The same value under another key is another record: lost one, unexpected the other."""
    with pytest.raises(AssertionError, match=r"1 lost: \(b'k1', b'v'\); 1 read but never sent: \(b'k2', b'v'\)"):
        assert_delivered_exactly_once(log((0, b"k2", b"v")), [(b"k1", b"v")])


def test_unacknowledged_records_may_be_there_once_or_not_at_all() -> None:
    assert_delivered_exactly_once(log((0, None, b"1"), (0, None, b"2")), [b"1"], unacknowledged=[b"2", b"3"])
    with pytest.raises(AssertionError, match="read more often than sent: b'2'"):
        assert_delivered_exactly_once(
            log((0, None, b"1"), (0, None, b"2"), (1, None, b"2")), [b"1"], unacknowledged=[b"2"]
        )


def test_a_failure_lists_a_few_and_counts_the_rest() -> None:
    with pytest.raises(AssertionError, match=r"12 lost: b'0', b'1', b'2', b'3', b'4' and 7 more"):
        assert_delivered_exactly_once([], [b"%d" % i for i in range(12)])


def test_null_keys_and_values_are_records_too() -> None:
    assert_delivered_exactly_once(log((0, None, None), (0, b"k", None)), [(None, None), (b"k", None)])
    with pytest.raises(AssertionError, match=r"1 lost: \(None, None\)"):
        assert_delivered_exactly_once(log((0, b"k", None)), [(None, None), (b"k", None)])


@pytest.mark.parametrize(
    ("records", "sent", "kwargs", "message"),
    [
        (b"abc", [b"1"], {}, "records must be the records read back"),
        (None, [b"1"], {}, "records must be the records read back"),
        ([("x", 1)], [b"1"], {}, r"records\[0\] is a tuple: expected a record read back"),
        ([], b"1", {}, "sent must be a sequence of values"),
        ([], [1], {}, r"sent\[0\] is 1: expected bytes or str"),
        ([], [(b"k", b"v", b"x")], {}, r"sent\[0\] is .*: expected bytes or str \(a value\) or a \(key, value\) pair"),
        ([], [b"v", (b"k", b"v")], {}, r"sent mixes values and \(key, value\) pairs \(at sent\[1\]\)"),
        ([], [b"v"], {"unacknowledged": [(b"k", b"v")]}, "sent and unacknowledged must have one shape"),
        ([], [b"v"], {"unacknowledged": 3}, "unacknowledged must be a sequence"),
    ],
)
def test_bad_arguments_are_named(records: Any, sent: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        assert_delivered_exactly_once(records, sent, **kwargs)


# ------------------------------------------------------------- order per key


def test_records_read_in_send_order_per_key_pass() -> None:
    """Keys interleave across and within partitions; only each key's own order matters."""
    sent = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", b"2"), (b"a", b"3")]
    records = log((0, b"b", b"1"), (0, b"a", b"1"), (0, b"b", b"2"), (0, b"a", b"2"), (0, b"a", b"3"))
    assert_ordered_per_key(list(reversed(records)), sent)


def test_a_key_out_of_order_is_named_with_both_records() -> None:
    sent = [(b"a", b"1"), (b"a", b"2"), (b"a", b"3")]
    records = log((3, b"a", b"1"), (3, b"a", b"3"), (3, b"a", b"2"))
    with pytest.raises(AssertionError, match=r"key b'a' out of order: b'3' \(sent #2\) was read at 3@1, before b'2' \(sent #1\) at 3@2"):
        assert_ordered_per_key(records, sent)


def test_a_key_read_from_two_partitions_fails() -> None:
    with pytest.raises(AssertionError, match=r"key b'a' was read from partitions \[0, 1\]"):
        assert_ordered_per_key(log((0, b"a", b"1"), (1, b"a", b"2")), [(b"a", b"1"), (b"a", b"2")])


def test_duplicates_and_strangers_are_left_to_the_exactly_once_check() -> None:
    """A retried batch written twice (1, 2, 1, 2) keeps its first copies in order; a stranger is skipped."""
    sent = [(b"a", b"1"), (b"a", b"2")]
    assert_ordered_per_key(log((0, b"a", b"1"), (0, b"a", b"2"), (0, b"a", b"1"), (0, b"a", b"2"), (0, b"a", b"9")), sent)


def test_equal_records_sent_twice_are_matched_in_turn() -> None:
    """(a,x) sent at #0 and #2: read x, y, x is in order; y, x, x is not (y was sent after the first x)."""
    sent = [(b"a", b"x"), (b"a", b"y"), (b"a", b"x")]
    assert_ordered_per_key(log((0, b"a", b"x"), (0, b"a", b"y"), (0, b"a", b"x")), sent)
    with pytest.raises(AssertionError, match="out of order"):
        assert_ordered_per_key(log((0, b"a", b"y"), (0, b"a", b"x"), (0, b"a", b"x")), sent)


def test_keyless_records_spread_over_partitions_are_ordered_per_partition() -> None:
    """The sticky partitioner's spread: 0..8 without a key, in runs of three over partitions 2, 0, 1."""
    sent = [(None, b"%d" % n) for n in range(9)]
    spread = log(*((partition, None, b"%d" % n) for n, partition in enumerate([2, 2, 2, 0, 0, 0, 1, 1, 1])))
    assert_ordered_per_key(spread, sent)
    assert_ordered_per_key(list(reversed(spread)), sent)  # the order read across partitions does not matter


def test_keyless_records_out_of_order_within_a_partition_fail() -> None:
    sent = [(None, b"%d" % n) for n in range(6)]
    records = log((1, None, b"0"), (0, None, b"1"), (1, None, b"2"), (0, None, b"4"), (0, None, b"3"), (1, None, b"5"))
    with pytest.raises(
        AssertionError,
        match=r"keyless records of partition 0 out of order: b'4' \(sent #4\) was read at 0@1, before b'3' \(sent #3\) at 0@2",
    ):
        assert_ordered_per_key(records, sent)


def test_a_keyless_value_sent_twice_is_matched_to_the_send_that_keeps_its_partition_in_order() -> None:
    """x went to partition 1 first (#0), then y and x to partition 0 (#1, #2): in order, though x#0 is earliest."""
    sent = [(None, b"x"), (None, b"y"), (None, b"x")]
    assert_ordered_per_key(log((0, None, b"y"), (0, None, b"x"), (1, None, b"x")), sent)
    with pytest.raises(AssertionError, match="keyless records of partition 0 out of order"):
        assert_ordered_per_key(log((0, None, b"x"), (0, None, b"x"), (0, None, b"y")), sent)


def test_order_needs_keys() -> None:
    with pytest.raises(TypeError, match=r"sent must be \(key, value\) pairs"):
        assert_ordered_per_key([], [b"1", b"2"])
    with pytest.raises(TypeError, match=r"sent\[0\] is 5"):
        assert_ordered_per_key([], [5])  # type: ignore[list-item]
