"""Log records that name their producer: :class:`ClientLogger`, one per producer and module logger.

A service with two producers (say, one for orders and one for audit events) must be able to tell
their lines apart. Every line the producer's machinery logs therefore carries the producer's
``client.id`` twice: as the record attribute ``client_id`` (for a format string,
``%(client_id)s``, or a JSON formatter) and at the head of the message, ``[client-id] ``, so the
default formatter shows it and ``grep '\\[orders\\]'`` finds one producer's lines.

The mechanism is a :class:`logging.LoggerAdapter` built from the producer's config and handed to
each component through its constructor, as the producer wires everything else. Not a LogRecord
factory, not a context variable: a line logged from the sender task, a timer callback or the
user's own task names the same producer, and nothing outside aioproducer's loggers is touched.
The logger names stay the module names the docs list (docs/how-to/observability.md), so existing logging configuration
(levels per logger, filters) keeps working.

At the bottom of the package (like ``stats.py``): ``network/`` and ``security/`` use it without
importing anything above them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeAlias

__all__ = ["ClientLogger", "LogLike", "client_logger"]

#: What a component logs through: a :class:`ClientLogger`, or a plain logger where no producer is involved.
LogLike: TypeAlias = "logging.Logger | logging.LoggerAdapter[logging.Logger]"


class ClientLogger(logging.LoggerAdapter[logging.Logger]):
    """``logger`` whose records carry ``client_id`` as an attribute and as a ``[client_id] `` message prefix.

    Every level method (``debug`` ... ``exception``) goes through :meth:`log`, the one override:
    the prefix is a ``%s`` argument rather than pasted into the format string, so a ``%`` in a
    client id is shown as written, and a disabled level costs one ``isEnabledFor`` call.
    """

    client_id: str

    def __init__(self, logger: logging.Logger, client_id: str) -> None:
        super().__init__(logger, {"client_id": client_id})
        self.client_id = client_id

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.logger.isEnabledFor(level):
            return
        if not args:
            # No arguments: logging would not %-format the message; it will be now (the prefix's
            # argument), so a literal % in it must survive that.
            msg = str(msg).replace("%", "%%")
        extra: Mapping[str, object] | None = kwargs.get("extra")
        kwargs["extra"] = {**extra, "client_id": self.client_id} if extra else self.extra
        # The caller's file and line, not this method's (the adapter's own frames are skipped by logging).
        kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
        self.logger.log(level, "[%s] " + str(msg), self.client_id, *args, **kwargs)


def client_logger(name: str, client_id: str) -> ClientLogger:
    """The logger ``name`` (a module logger the docs list) for the producer ``client_id``."""
    return ClientLogger(logging.getLogger(name), client_id)
