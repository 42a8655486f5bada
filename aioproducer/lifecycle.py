"""The producer's lifecycle: one state that every layer reads, moved forward only, by one writer.

Before this object, "closed" was a flag in each layer (the producer, the accumulator, the
buffer pool, three in the sender, the client), each set by whoever closed that layer, and
the layers could disagree for a while (the sender still retrying what the producer had
given up on). Now there is one :class:`Lifecycle` per producer, made by its engine
(``internals/engine.py``), which alone moves it; the buffer pool, the accumulator and the
sender get it as a :class:`LifecycleView` (read only: ``state``, ``refusal``), keep no copy,
and report an error no retry can fix to the engine (``on_fatal``), which refuses records.
The client reads none of it: it is closed when the engine closes it, its own fact.

It lives at the bottom of the package (it imports only ``errors``), so that any layer may read it.

Who moves it, and why no two movers can disagree::

    NEW ──start() done──► RUNNING ──close()──► CLOSING ──timeout / dropped──► FORCED ──► CLOSED
     └──────────────── close() before start() finished ──────────────────────────────────┘

* ``ProducerEngine.start`` moves NEW → RUNNING; ``ProducerEngine.close`` moves to CLOSING,
  to FORCED when its timeout runs out (``ProducerEngine.abandon``, for a dropped producer,
  does the same), and to CLOSED when it closes the client. Nothing else calls these methods:
  a component that stops (``BufferPool.close`` failing its waiters) or fails for good
  (``Sender``'s and ``Transactions``' ``on_fatal``) only reports, and the engine moves the state.
* A move never goes back (``_advance`` ignores a state behind the current one), so calls in
  any order leave the furthest state: nothing can reopen a closed producer.
* ``refusal`` is why records are refused while RUNNING: the engine sets it when a part reported
  an error no retry can fix (the sender's ``_fatal`` or ``_die``, a fenced transaction). The
  first reason stays.

What each state means to the layers:

=========  =================  ============================================  ==============
state      records accepted   the sender                                     connections
=========  =================  ============================================  ==============
NEW        no (not started)   not running                                    none
RUNNING    yes, unless        loops: ready, drain, send, retry               opened on need
           ``refusal``
CLOSING    no                 sends everything queued (linger ignored),      opened on need
                              then stops
FORCED     no                 no retries; what is left fails now             being dropped
CLOSED     no                 ended                                          closed; none opened
=========  =================  ============================================  ==============
"""

from __future__ import annotations

import enum

from typing import Protocol

from aioproducer.errors import ProducerClosedError

__all__ = ["Lifecycle", "LifecycleView", "State"]


class State(enum.IntEnum):
    """The producer's states, in the only order they can follow."""

    NEW = 0
    RUNNING = 1
    CLOSING = 2
    FORCED = 3
    CLOSED = 4


class LifecycleView(Protocol):
    """What a component may do with the lifecycle: read it. Only the engine holds it as a :class:`Lifecycle`."""

    @property
    def state(self) -> State: ...

    @property
    def refusal(self) -> BaseException | None: ...

    @property
    def accepting(self) -> bool: ...

    @property
    def closing(self) -> bool: ...

    def refused(self) -> BaseException: ...


class Lifecycle:
    """One producer's lifecycle state; see the module docstring for who moves it (its engine)."""

    __slots__ = ("state", "refusal", "accepting")

    def __init__(self, state: State = State.NEW) -> None:
        #: Read by every layer; written only through the methods below (forward only), which the engine alone calls.
        self.state: State = state
        #: Why records are refused while RUNNING (an unrecoverable error); None while they are not. Writer: ``refuse``.
        self.refusal: BaseException | None = None
        #: Whether a record may be queued now: RUNNING and not refused. Kept by ``_advance`` and
        #: ``refuse`` beside the two it follows from, so that the check every new batch makes is an
        #: attribute read, not a call (a 10 KB record opens a batch of its own).
        self.accepting: bool = state is State.RUNNING

    def __repr__(self) -> str:
        refusal = "" if self.refusal is None else f", refusal={self.refusal!r}"
        return f"Lifecycle({self.state.name}{refusal})"

    @property
    def closing(self) -> bool:
        """``close()`` has begun: no record is accepted, and the sender must not wait for ``linger.ms``."""
        return self.state >= State.CLOSING

    def refused(self) -> BaseException:
        """The error a refused record gets: the unrecoverable error if there was one, else ``ProducerClosedError``."""
        return self.refusal or ProducerClosedError("the producer is closed: no more records are accepted")

    def start(self) -> None:
        """NEW → RUNNING: the sender task runs (``ProducerEngine.start``)."""
        self._advance(State.RUNNING)

    def close(self) -> None:
        """→ CLOSING: accept nothing more, deliver what is queued."""
        self._advance(State.CLOSING)

    def force(self) -> None:
        """→ FORCED: deliver nothing more; no retries, what is left fails."""
        self._advance(State.FORCED)

    def finish(self) -> None:
        """→ CLOSED: the connections are closed and none may open."""
        self._advance(State.CLOSED)

    def refuse(self, error: BaseException) -> None:
        """Refuse every later record with ``error`` (kept if a reason is already set)."""
        if self.refusal is None:
            self.refusal = error
            self.accepting = False

    def _advance(self, state: State) -> None:
        if state > self.state:
            self.state = state
            self.accepting = state is State.RUNNING and self.refusal is None
