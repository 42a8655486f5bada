"""Topic names, checked as the Java client's ``Topic.validate`` checks them.

A name is checked where it first reaches the producer's metadata (before the
producer tracks it): a bad name tracked would go into every later Metadata
request and make each one fail, so no other topic could be used and no leader
move learned. Rules (Kafka's ``Topic`` class): a ``str`` of 1 to 249
characters from ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``.
"""

from __future__ import annotations

import re
from typing import Any

from aioproducer.errors import InvalidTopicError

__all__ = ["MAX_TOPIC_LENGTH", "validate_topic"]

MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic(topic: Any) -> None:
    """Raise :class:`InvalidTopicError` naming what is wrong with ``topic``; return if it is a legal name."""
    if type(topic) is not str:
        raise InvalidTopicError(f"topic must be a str, got {type(topic).__name__} {topic!r}")
    if not topic:
        raise InvalidTopicError("topic must not be empty")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic is {len(topic)} characters long; at most {MAX_TOPIC_LENGTH} are allowed")
    if _LEGAL.fullmatch(topic) is None:
        bad = sorted({c for c in topic if _LEGAL.fullmatch(c) is None})
        raise InvalidTopicError(
            f"topic {topic!r} contains {', '.join(map(repr, bad))}: only ASCII letters, digits, '.', '_' and '-' are allowed"
        )
