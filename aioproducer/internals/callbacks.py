"""``on_delivery`` is checked when the record is sent, not when it completes; what a callback's raise does.

A callback that cannot be called as ``on_delivery(metadata, error)`` would otherwise
fail only when its record completes, seconds later, as a line in the log, with the
record already delivered. So ``send()`` refuses it with a ``TypeError`` that names
``on_delivery``.

``inspect.signature`` costs microseconds, ``send()`` about one: the check runs once
per distinct callable. The accumulator remembers the last callable it accepted (the
common case is one callable for every record, see ``RecordAccumulator.try_append``),
and this module remembers the *shape* of every plain function it accepted: its code
object and how many of its parameters have defaults, which is all a signature of a
plain function depends on. A lambda written inside a loop, a new object per record,
``obj.method``, a new bound method per record, or a ``functools.partial`` of a plain
function, then costs a dictionary lookup. Other callables (objects with ``__call__``,
builtins) are remembered by identity through a weak reference where they allow one,
so nothing is kept alive.

When a callback raises (``on_delivery`` or a record future's done-callback), the producer
does what asyncio does for a callback run by the loop (``Handle._run``): ``SystemExit`` and
``KeyboardInterrupt`` leave the event loop (``run_until_complete()`` and ``asyncio.run()``
re-raise them), anything else is reported and swallowed. Neither may cost another record its
callbacks or the sender task its life: ``on_delivery`` runs inside the sender task, so the
sender hands those two to the loop in a handle of their own (:func:`raise_from_loop`) and goes
on; a batch's done-callbacks run from one handle, so the ones after a leaving callback are
handed to a new handle first (``batch._invoke_all``).
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from functools import partial
from types import CodeType, FunctionType, MethodType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aioproducer.logs import LogLike

__all__ = ["LEAVING_LOOP", "check_on_delivery", "raise_from_loop", "safe_call"]

#: What asyncio lets out of the loop when a callback raises it (``Handle._run``); the rest is reported.
LEAVING_LOOP = (SystemExit, KeyboardInterrupt)

#: Accepted shapes (see _shape), each with its code object; cleared when full, so that code
#: created at run time cannot grow it forever.
_accepted_shapes: dict[tuple[Any, ...], CodeType] = {}
#: Accepted callables without a shape, by id; the weak reference tells a reused id from the same object.
_accepted_by_id: dict[int, weakref.ref[Any]] = {}
_CACHE_LIMIT = 1024


def check_on_delivery(on_delivery: object) -> object:
    """Return ``on_delivery`` if it can be called as ``on_delivery(metadata, error)``, else raise ``TypeError``.

    Callables whose signature Python cannot tell (some builtins) are accepted.
    """
    if not callable(on_delivery):
        raise TypeError(f"on_delivery must be callable as on_delivery(metadata, error), got {on_delivery!r}")
    shape = _shape(on_delivery)
    if shape is not None:
        if _accepted_shapes.get(shape) is _code(on_delivery):
            return on_delivery
    else:
        ref = _accepted_by_id.get(id(on_delivery))
        if ref is not None and ref() is on_delivery:
            return on_delivery
    _check_signature(on_delivery)
    _remember(on_delivery, shape)
    return on_delivery


def _check_signature(on_delivery: Any) -> None:
    """The slow part, once per distinct callable: bind two positional arguments to its signature."""
    if inspect.iscoroutinefunction(on_delivery):
        raise TypeError(
            f"on_delivery must be a plain function, not a coroutine function ({on_delivery!r}): "
            "it is called when the record completes, never awaited"
        )
    try:
        signature = inspect.signature(on_delivery)
    except (TypeError, ValueError):  # no signature to read (some builtins): cannot tell, so accept
        return
    try:
        signature.bind(None, None)
    except TypeError as exc:
        raise TypeError(
            f"on_delivery must be callable as on_delivery(metadata, error), but {on_delivery!r} "
            f"has the signature {signature}: {exc}"
        ) from None


Shape = tuple[Any, ...]


def _shape(on_delivery: object) -> Shape | None:
    """What the signature of a plain function depends on, for it, a method bound to it or a ``partial`` of it.

    None for other callables. The code object is named by its id (hashing a code object
    hashes its bytecode and constants); ``_accepted_shapes`` keeps the code object itself,
    so the id cannot be reused while the entry exists. A function with ``__wrapped__`` or
    ``__signature__`` (a ``functools.wraps`` decorator) has the signature those say, so it
    has no shape.
    """
    kind = type(on_delivery)
    if kind is FunctionType:
        return _function_shape(on_delivery)
    if kind is MethodType:
        inner = _function_shape(on_delivery.__func__)  # type: ignore[attr-defined]
        return None if inner is None else ("bound", inner)
    if kind is partial:
        inner = _function_shape(on_delivery.func)  # type: ignore[attr-defined]
        if inner is None:
            return None
        return ("partial", inner, len(on_delivery.args), frozenset(on_delivery.keywords))  # type: ignore[attr-defined]
    return None


def _function_shape(function: Any) -> Shape | None:
    if type(function) is not FunctionType:
        return None
    if getattr(function, "__wrapped__", None) is not None or getattr(function, "__signature__", None) is not None:
        return None
    defaults = function.__defaults__
    keyword_defaults = function.__kwdefaults__
    return (id(function.__code__), len(defaults) if defaults else 0, frozenset(keyword_defaults) if keyword_defaults else None)


def _code(on_delivery: Any) -> CodeType:
    """The code object of a callable that has a shape."""
    kind = type(on_delivery)
    function = on_delivery.__func__ if kind is MethodType else on_delivery.func if kind is partial else on_delivery
    code: CodeType = function.__code__
    return code


def _remember(on_delivery: object, shape: Shape | None) -> None:
    if shape is not None:
        if len(_accepted_shapes) >= _CACHE_LIMIT:
            _accepted_shapes.clear()
        _accepted_shapes[shape] = _code(on_delivery)
        return
    try:
        ref = weakref.ref(on_delivery)
    except TypeError:  # not weakly referenceable: checked again next time
        return
    if len(_accepted_by_id) >= _CACHE_LIMIT:
        _accepted_by_id.clear()
    _accepted_by_id[id(on_delivery)] = ref


def raise_from_loop(loop: asyncio.AbstractEventLoop | None, exc: BaseException) -> None:
    """Raise ``exc`` (``SystemExit``/``KeyboardInterrupt``) out of ``loop`` soon, from a handle of its own.

    Why not here: the caller is the sender task completing a batch. Raised in it, the
    exception would end the task (no later record would be sent, and the rest of the
    batch's bookkeeping would be skipped); raised from a loop handle, it leaves the loop as
    it would from any asyncio callback, and the task goes on when the loop runs again.
    ``loop`` None: the running one. Without a loop that can run the handle (closed, or
    none running), it is raised at once.
    """
    try:
        (loop or asyncio.get_running_loop()).call_soon(_raise, exc)
    except RuntimeError:  # the loop is closed, or none runs
        raise exc from None


def _raise(exc: BaseException) -> None:
    raise exc


def safe_call(log: LogLike, obj: Any, method: str, *args: Any) -> None:
    """An interceptor's method; what it raises is logged, or, for SystemExit/KeyboardInterrupt, raised from the loop.

    ``on_acknowledgement`` runs in the sender task, which a raise would end (see this
    module's docstring): nothing an interceptor raises may stop delivery.
    """
    try:
        fn = getattr(obj, method, None)
        if fn is not None:
            fn(*args)
    except LEAVING_LOOP as exc:
        raise_from_loop(None, exc)
    except BaseException:
        log.exception("interceptor %r raised in %s", obj, method)
