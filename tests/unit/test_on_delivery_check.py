"""on_delivery is refused at send() when it cannot be called as on_delivery(metadata, error) (#11 item 20)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from types import FunctionType
from typing import Any

import pytest

from aioproducer.internals import callbacks
from aioproducer.internals.callbacks import check_on_delivery


@pytest.fixture(autouse=True)
def empty_caches() -> Iterator[None]:
    """Each test sees the check, not what an earlier test left in the caches."""
    callbacks._accepted_shapes.clear()
    callbacks._accepted_by_id.clear()
    yield
    callbacks._accepted_shapes.clear()
    callbacks._accepted_by_id.clear()


def two(md: Any, err: Any) -> None: ...
def three(a: Any, md: Any, err: Any) -> None: ...
def one(md: Any) -> None: ...
def with_defaults(md: Any, err: Any = None, extra: Any = None) -> None: ...
def keyword_only(md: Any, err: Any, *, required: Any) -> None: ...
async def coroutine(md: Any, err: Any) -> None: ...


class Handler:
    def done(self, md: Any, err: Any) -> None: ...
    def half(self, md: Any) -> None: ...


class CallableTwo:
    def __call__(self, md: Any, err: Any) -> None: ...


class CallableOne:
    def __call__(self, md: Any) -> None: ...


def passes_through(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A functools.wraps decorator: every wrapper shares one code object, whatever it wraps."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return fn(*args)

    return wrapper


GOOD: list[Any] = [
    pytest.param(two, id="function"),
    pytest.param(lambda md, err: None, id="lambda"),
    pytest.param(lambda *args: None, id="varargs"),
    pytest.param(with_defaults, id="defaults"),
    pytest.param(Handler().done, id="bound-method"),
    pytest.param(functools.partial(three, "x"), id="partial"),
    pytest.param(CallableTwo(), id="callable-object"),
    pytest.param(passes_through(two), id="wraps-decorated"),
    pytest.param(print, id="builtin"),
    pytest.param(dict, id="no-signature"),
]

BAD: list[Any] = [
    pytest.param(one, id="one-argument"),
    pytest.param(lambda: None, id="no-argument"),
    pytest.param(three, id="three-arguments"),
    pytest.param(keyword_only, id="required-keyword"),
    pytest.param(Handler().half, id="bound-method"),
    pytest.param(functools.partial(two, "x"), id="partial-takes-one"),
    pytest.param(CallableOne(), id="callable-object"),
    pytest.param(passes_through(one), id="wraps-decorated"),
    pytest.param([].append, id="builtin-one-argument"),
]


@pytest.mark.parametrize("on_delivery", GOOD)
def test_a_callable_taking_metadata_and_error_is_accepted(on_delivery: Any) -> None:
    assert check_on_delivery(on_delivery) is on_delivery
    assert check_on_delivery(on_delivery) is on_delivery  # and again, from the cache


@pytest.mark.parametrize("on_delivery", BAD)
def test_a_callable_of_the_wrong_arity_is_refused_naming_on_delivery(on_delivery: Any) -> None:
    with pytest.raises(TypeError, match=r"on_delivery must be callable as on_delivery\(metadata, error\).*signature"):
        check_on_delivery(on_delivery)


def test_a_coroutine_function_is_refused_it_would_never_be_awaited() -> None:
    with pytest.raises(TypeError, match="on_delivery must be a plain function, not a coroutine function"):
        check_on_delivery(coroutine)


def test_the_signature_is_read_once_per_shape_not_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[object] = []
    real = inspect.signature

    def counting(obj: Any) -> inspect.Signature:
        reads.append(obj)
        return real(obj)

    monkeypatch.setattr(inspect, "signature", counting)  # the module callbacks reads it from
    handler = Handler()
    for i in range(100):
        check_on_delivery(lambda md, err: None)  # a new function object each time, one code object
        check_on_delivery(handler.done)  # a new bound method each time
        check_on_delivery(functools.partial(three, i))
    assert len(reads) == 3


def test_functions_sharing_code_but_not_defaults_are_told_apart() -> None:
    """The cache key is the code and how many parameters have defaults: both decide the arity."""
    defaulted = FunctionType(three.__code__, globals(), "defaulted", (None,))  # three(a, md, err=None)
    assert check_on_delivery(defaulted) is defaulted
    with pytest.raises(TypeError, match="on_delivery"):
        check_on_delivery(three)


def test_wrappers_sharing_code_are_checked_by_what_they_wrap() -> None:
    assert check_on_delivery(passes_through(two)) is not None
    with pytest.raises(TypeError, match="on_delivery"):
        check_on_delivery(passes_through(one))


def test_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="on_delivery must be callable.*got 5"):
        check_on_delivery(5)
