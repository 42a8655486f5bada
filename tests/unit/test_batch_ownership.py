"""A ProducerBatch changes itself: nothing outside ``internals/batch.py`` writes one of its fields.

A batch is native (``native/src/batch.rs``). Its own fields (schedule, reservation, producer
state, flags, outcome) Python can read and not write: its native methods write them (checked
below on the type itself). Its Python state (``#[pyo3(get, set)]`` there, or a ``#[getter]`` with a ``#[setter]``: futures, callbacks,
spans, pieces ...) is written by batch.py's functions, which are its methods. The check that
follows covers both kinds of field in the package's Python source.

The accumulator, the sender, the transaction manager and tracing move a batch through its
states by calling its methods (``drained``, ``reenqueued``, ``set_producer_state``, ``settle``,
``complete`` ...), so each field has its writers in one file, named in its comment there.

The check reads the package's source with ``ast`` (no import, no type checker). A write is an
assignment, augmented or annotated assignment or ``del`` whose target is an attribute named in
a batch field, or ``setattr``/``delattr`` with such a name. Python does not say
what type the receiver has, so a write outside ``batch.py`` is reported when

- the attribute's name belongs to no other class of the package (no other ``__slots__`` entry,
  class-level field or ``self.<name> =``): only a batch can have it, whatever the receiver; or
- the name is shared with another class (``error``, ``attempts``, ``last_attempt_ms`` ...) and the
  receiver is named as batches are named: a name containing ``batch``, one of ``BATCH_NAMES``,
  or an item of a collection named so (``pieces[-1]``, ``dq[0]``).

So ``state.last_attempt_ms = now`` in the network client (a connection's state) passes, and
``piece.attempts = 1`` or ``dq[0].reserved_bytes = 0`` fails.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree  # reads the source tree, see tests/conftest.py

PACKAGE = Path(__file__).resolve().parents[2] / "aioproducer"
BATCH_PY = PACKAGE / "internals" / "batch.py"
BATCH_RS = PACKAGE.parent / "native" / "src" / "batch.rs"

#: Names the package gives a ProducerBatch (besides any name containing "batch").
BATCH_NAMES = frozenset({"b", "first", "last", "piece", "pieces", "holder", "parent", "dq", "queue", "unacked", "ready"})


def _python_properties(text: str) -> set[str]:
    """Python state held natively behind a ``#[getter]`` and a ``#[setter]`` (the ``on_delivery`` rows)."""
    return set(re.findall(r"#\[setter\]\n\s*fn set_(\w+)", text))


@functools.cache
def native_fields() -> frozenset[str]:
    """The batch's own fields, read-only from Python: its ``#[getter]`` functions and ``#[pyo3(get)]`` fields."""
    text = BATCH_RS.read_text()
    names = set(re.findall(r"#\[getter\]\n\s*fn (\w+)", text)) - _python_properties(text)
    for options, field in re.findall(r"#\[pyo3\((get(?:, name = \"\w+\")?)\)\]\s*(?:pub(?:\(crate\))? )?(\w+):", text):
        renamed = re.search(r'name = "(\w+)"', options)
        names.add(renamed[1] if renamed else field)
    assert {"attempts", "in_flight", "base_sequence", "reserved_bytes", "loop", "log"} <= names
    return frozenset(names)


@functools.cache
def batch_slots() -> frozenset[str]:
    """Every field of a batch: its own (read-only from Python) and its Python state."""
    return python_slots() | native_fields()


@functools.cache
def python_slots() -> frozenset[str]:
    """The batch's Python state: its ``#[pyo3(get, set ...)]`` fields, by the name Python sees."""
    names = set(_python_properties(BATCH_RS.read_text()))
    for options, field in re.findall(r"#\[pyo3\((get, set[^)]*)\)\]\s*(?:pub(?:\(crate\))? )?(\w+):", BATCH_RS.read_text()):
        renamed = re.search(r'name = "(\w+)"', options)
        names.add(renamed[1] if renamed else field)
    assert {"futures", "callbacks", "spans", "_deferred"} <= names
    return frozenset(names)


def other_classes_fields(trees: list[ast.Module]) -> frozenset[str]:
    """Attribute names some other class defines: its ``__slots__``, class-level fields, ``self.x =``."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                        names.add(statement.target.id)
                    elif isinstance(statement, ast.Assign):
                        for target in statement.targets:
                            if isinstance(target, ast.Name) and target.id == "__slots__":
                                try:
                                    names.update(ast.literal_eval(statement.value))
                                except ValueError:
                                    pass
                            elif isinstance(target, ast.Name):
                                names.add(target.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return frozenset(names)


def names_a_batch(receiver: ast.expr) -> bool:
    while isinstance(receiver, ast.Subscript):  # an item of pieces, dq, batches ...
        receiver = receiver.value
    if isinstance(receiver, ast.Name):
        name = receiver.id
    elif isinstance(receiver, ast.Attribute):
        name = receiver.attr
    else:
        return False
    return "batch" in name.lower() or name in BATCH_NAMES


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        elif isinstance(target, ast.Starred):
            found.append(target.value)
        else:
            flat.append(target)
    return flat


def batch_writes(tree: ast.Module, slots: frozenset[str], shared: frozenset[str]) -> list[tuple[int, str]]:
    """(line, what) for each write of a ProducerBatch field in ``tree`` (see the module docstring)."""
    found: list[tuple[int, str]] = []

    def check(line: int, receiver: ast.expr, attr: str) -> None:
        if attr in slots and (attr not in shared or names_a_batch(receiver)):
            found.append((line, f"{ast.unparse(receiver)}.{attr}"))

    for node in ast.walk(tree):
        for target in _targets(node):
            if isinstance(target, ast.Attribute):
                check(target.lineno, target.value, target.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            check(node.lineno, node.args[0], node.args[1].value)
    return sorted(found)


@functools.cache
def _package() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def _package_shared() -> frozenset[str]:
    return other_classes_fields([tree for path, tree in _package().items() if path != BATCH_PY])


def test_nothing_outside_batch_py_writes_a_batch_field() -> None:
    trees = _package()
    slots, shared = batch_slots(), _package_shared()
    writes = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path, tree in trees.items()
        if path != BATCH_PY
        for line, what in batch_writes(tree, slots, shared)
    ]
    assert writes == [], "call a ProducerBatch method instead of writing its fields:\n" + "\n".join(writes)


@pytest.mark.parametrize(
    "planted",
    [
        "batch.attempts += 1",
        "batch.last_attempt_ms = now",
        "first.in_flight = True",
        "pieces[-1].reserved_bytes = 0",
        "self.transaction_manager.last.base_sequence, x = 0, 1",
        "future._batch.error = None",
        "anything.in_retry = True",  # only a batch has in_retry: any receiver
        "setattr(batch, 'settled', True)",
        "del piece.spans",
    ],
)
def test_a_planted_write_is_reported(planted: str) -> None:
    slots, shared = batch_slots(), _package_shared()
    tree = ast.parse(f"def f(batch, first, pieces, future, anything, piece, now):\n    {planted}\n")
    assert batch_writes(tree, slots, shared), planted


@pytest.mark.parametrize(
    "other",
    ["state.last_attempt_ms = now", "totals.error += 1", "batch.unknown_field = 1"],
)
def test_other_objects_with_a_batch_field_name_pass(other: str) -> None:
    slots, shared = batch_slots(), _package_shared()
    assert {"last_attempt_ms", "error"} <= shared  # the names really are shared in the package
    tree = ast.parse(f"def f(self, state, totals, batch, now):\n    {other}\n")
    assert batch_writes(tree, slots, shared) == [], other


def test_python_cannot_write_a_field_of_the_native_half() -> None:
    """Every field of the batch's own is read-only from Python: only its native methods write it."""
    from aioproducer._native import ProducerBatch, RecordBatchBuilder

    batch = ProducerBatch("t", 0, RecordBatchBuilder(), 0.0, 0, None)  # type: ignore[arg-type]  # no loop needed
    for name in sorted(native_fields()):
        with pytest.raises(AttributeError):
            setattr(batch, name, getattr(batch, name))


def test_the_python_state_does_not_shadow_a_field_of_the_batch_s_own() -> None:
    """No field is both: one home, one kind of writer, for each."""
    assert python_slots() & native_fields() == frozenset()
