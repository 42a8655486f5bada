"""Delivery-guarantee assertions: the checks the project's own fault tests make, for users' tests.

A service under test sends records; a test reads the topic back (``await cluster.read(topic)``)
and asks two questions of what it read:

* :func:`assert_delivered_exactly_once`: every acknowledged record is there once, nothing is
  there twice, and nothing is there that was not sent. Records whose ``send()`` failed may be
  there at most once (``unacknowledged=``): a failed future does not prove the broker did not
  write the record (a timeout after the write), which is why Java's idempotent producer
  promises "no duplicates", not "nothing written when the future failed".
* :func:`assert_ordered_per_key`: per key, records were read in the order they were sent
  (records without a key: per partition, the order Kafka keeps for them).

Both take what was read (anything with ``partition``, ``offset``, ``key`` and ``value``, as
:class:`~aioproducer.testing.readback.ConsumerRecord`) and what was sent, as the test knows it:
values (``bytes`` or ``str``) or ``(key, value)`` pairs. ``str`` is compared as its UTF-8
bytes, as the producer's default ``str`` serializer writes it. A failed check raises
``AssertionError`` naming the records (with partition and offset) that broke it, a few of each.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol

__all__ = ["ReadRecord", "assert_delivered_exactly_once", "assert_ordered_per_key"]

#: How many offending records a failure message names, per kind.
_SHOWN = 5

Sent = bytes | str | tuple[bytes | str | None, bytes | str | None]


class ReadRecord(Protocol):
    """What the assertions need of a record read back (``ConsumerRecord`` has it)."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


def assert_delivered_exactly_once(
    records: Iterable[ReadRecord], sent: Iterable[Sent], *, unacknowledged: Iterable[Sent] = ()
) -> None:
    """Every record of ``sent`` was read exactly once, and nothing else was read.

    ``sent`` is what the service had acknowledged: values, or ``(key, value)`` pairs when
    keys matter (then a record is identified by both). A record sent twice on purpose is
    expected twice. ``unacknowledged`` (the same shape) are records whose ``send()``
    failed: each may be read once or not at all.
    """
    read = _records("records", records)
    expected = _identities("sent", sent)
    maybe = _identities("unacknowledged", unacknowledged)
    pairs = _pairs_given(expected + maybe)
    where: dict[Hashable, list[str]] = collections.defaultdict(list)
    for record in read:
        where[_identity_of(record, pairs)].append(f"{record.partition}@{record.offset}")
    sent_counts, maybe_counts = collections.Counter(expected), collections.Counter(maybe)
    lost = [i for i, n in (sent_counts - _counts(where)).items() for _ in range(n)]
    duplicated: list[str] = []
    unexpected: list[str] = []
    for identity, places in where.items():
        allowed = sent_counts[identity] + maybe_counts[identity]
        if len(places) > allowed:
            (duplicated if allowed else unexpected).append(f"{identity!r} at {', '.join(places)}")
    if lost or duplicated or unexpected:
        raise AssertionError(
            f"not delivered exactly once ({len(expected)} sent, {len(read)} read): "
            + "; ".join(
                part for part in (
                    _list("lost", lost), _list("read more often than sent", duplicated),
                    _list("read but never sent", unexpected),
                ) if part
            )
        )


def assert_ordered_per_key(records: Iterable[ReadRecord], sent: Iterable[Sent]) -> None:
    """Per key, the records read (in offset order) are in the order they were sent; keyless ones per partition.

    ``sent`` are ``(key, value)`` pairs in the order the service sent them. Records read but
    not sent, or read more often than sent, are left to :func:`assert_delivered_exactly_once`;
    the rest must appear in send order. A key read from two partitions fails: its records'
    order is not defined across them (a key changed partitions: the topic grew, or a
    partitioner is not keyed). Records without a key (``None``) are ordered per partition,
    the order Kafka keeps: the sticky partitioner spreads them over partitions, and across
    partitions they have no order. They are matched to their sends by value, so give them
    distinct values; a value sent more than once is matched to its earliest send that keeps
    its partition in order.
    """
    read = _records("records", records)
    pairs = _identities("sent", sent)
    if pairs and not _pairs_given(pairs):
        raise TypeError("assert_ordered_per_key: sent must be (key, value) pairs: the order is checked per key")
    positions: dict[Hashable, list[int]] = collections.defaultdict(list)
    for position, pair in enumerate(pairs):
        positions[pair].append(position)  # ascending: enumerate's order
    groups: dict[tuple[bytes | None, int | None], list[ReadRecord]] = collections.defaultdict(list)
    for record in read:
        groups[(record.key, record.partition if record.key is None else None)].append(record)
    for (key, _), group in groups.items():
        _check_order(key, sorted(group, key=lambda r: (r.partition, r.offset)), positions)


def _check_order(key: bytes | None, group: Sequence[ReadRecord], positions: dict[Hashable, list[int]]) -> None:
    """One key's records (a keyless partition's), in offset order, against their send positions.

    Each record takes the earliest unmatched send of its (key, value) after the previous
    record's send, else the earliest unmatched one (then out of order): equal records sent
    more than once are matched in turn.
    """
    partitions = sorted({r.partition for r in group})
    if len(partitions) > 1:
        raise AssertionError(f"key {key!r} was read from partitions {partitions}: its order is not defined across them")
    last: tuple[int, ReadRecord] | None = None
    for record in group:
        waiting = positions.get((key, record.value))
        if not waiting:
            continue  # not sent, or read more often than sent: the exactly-once check's to report
        after = bisect.bisect_right(waiting, last[0]) if last is not None else 0
        position = waiting.pop(after if after < len(waiting) else 0)
        if last is not None and position < last[0]:
            before = last[1]
            what = f"key {key!r}" if key is not None else f"keyless records of partition {record.partition}"
            raise AssertionError(
                f"{what} out of order: {before.value!r} (sent #{last[0]}) was read at "
                f"{before.partition}@{before.offset}, before {record.value!r} (sent #{position}) "
                f"at {record.partition}@{record.offset}"
            )
        last = (position, record)


# --------------------------------------------------------------------- shapes


def _records(name: str, records: Iterable[ReadRecord]) -> list[ReadRecord]:
    if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
        raise TypeError(f"{name} must be the records read back (e.g. await cluster.read(topic)), not {type(records).__name__}")
    out = list(records)
    for i, record in enumerate(out):
        if not all(hasattr(record, a) for a in ("partition", "offset", "key", "value")):
            raise TypeError(f"{name}[{i}] is a {type(record).__name__}: expected a record read back (partition, offset, key, value)")
    return out


def _identities(name: str, items: Iterable[Sent]) -> list[Hashable]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise TypeError(f"{name} must be a sequence of values or (key, value) pairs, not {type(items).__name__}")
    out: list[Hashable] = []
    kinds = set()
    for i, item in enumerate(items):
        if isinstance(item, (bytes, str)):
            out.append(_as_bytes(item))
            kinds.add("values")
        elif isinstance(item, tuple) and len(item) == 2 and all(x is None or isinstance(x, (bytes, str)) for x in item):
            out.append((_as_bytes(item[0]), _as_bytes(item[1])))
            kinds.add("pairs")
        else:
            raise TypeError(f"{name}[{i}] is {item!r}: expected bytes or str (a value) or a (key, value) pair of them")
        if len(kinds) > 1:
            raise TypeError(f"{name} mixes values and (key, value) pairs (at {name}[{i}]): give one shape")
    return out


def _pairs_given(identities: Sequence[Hashable]) -> bool:
    kinds = {isinstance(i, tuple) for i in identities}
    if len(kinds) > 1:
        raise TypeError("sent and unacknowledged must have one shape: both values, or both (key, value) pairs")
    return kinds == {True}


def _as_bytes(x: bytes | str | None) -> bytes | None:
    return x.encode() if isinstance(x, str) else x


def _identity_of(record: ReadRecord, pairs: bool) -> Hashable:
    return (record.key, record.value) if pairs else record.value


def _counts(where: dict[Hashable, list[str]]) -> collections.Counter[Hashable]:
    return collections.Counter({identity: len(places) for identity, places in where.items()})


def _list(what: str, items: list[Any]) -> str:
    if not items:
        return ""
    shown = ", ".join(str(i) if isinstance(i, str) else repr(i) for i in items[:_SHOWN])
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return f"{len(items)} {what}: {shown}{more}"
