"""Arrow data as another exporter might hand it over: pyarrow's valid export, copied into memory the test owns.

``send_arrow`` reads the Arrow C data interface (``ArrowArray`` structs, buffer pointers). pyarrow
builds only valid arrays (its builders and ``from_buffers`` refuse bad offsets), but another
exporter, or a bug in one, need not. So ``export()`` takes a valid record batch through pyarrow's
``_export_to_c``, copies every node and buffer into ctypes memory, and gives back a tree of
``Node`` that a test may change at will (lengths, offsets, null counts, buffer and child counts,
buffer contents, NULL or misaligned buffers) before ``send_arrow`` reads it through
``__arrow_c_array__``.

The C data interface carries no buffer sizes: a consumer trusts that a buffer holds what the
lengths and the last offset say. So every buffer copied here has ``slack`` zero bytes after its
data, and a change that makes a reader go past a buffer's data (a longer length, a larger last
offset) stays within memory the test owns; what the reader can check (offsets against the
lengths of the arrays they index, views against the sizes given for their buffers, counts) may
be changed without bound.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

__all__ = ["Node", "Exported", "export", "offsets_of", "OFFSET_FORMATS"]


class ArrowSchema(ctypes.Structure):
    pass


class ArrowArray(ctypes.Structure):
    pass


_SCHEMA_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
_ARRAY_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))

ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)),
    ("release", _SCHEMA_RELEASE),
    ("private_data", ctypes.c_void_p),
]
ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", _ARRAY_RELEASE),
    ("private_data", ctypes.c_void_p),
]

_RELEASE_OFFSET: int = ArrowArray.release.offset


def _mark_released(array: Any) -> None:
    """The exporter's release callback: the memory is Python's, so it only marks the struct released."""
    ctypes.memset(ctypes.addressof(array.contents) + _RELEASE_OFFSET, 0, ctypes.sizeof(ctypes.c_void_p))


_release = _ARRAY_RELEASE(_mark_released)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_ARRAY_CAPSULE = b"arrow_array"  # module level: the capsule keeps a pointer to its name

#: Formats whose buffer 1 holds offsets, and each offset's struct format.
OFFSET_FORMATS = {"u": "<i", "z": "<i", "+l": "<i", "U": "<q", "Z": "<q", "+L": "<q"}
_INT_WIDTHS = {"c": 1, "s": 2, "i": 4, "l": 8}


@dataclass
class Node:
    """One ArrowArray, as the test will export it: every field and buffer may be changed."""

    format: str
    length: int
    null_count: int
    offset: int
    n_buffers: int
    n_children: int
    #: Buffer contents; None exports a NULL pointer.
    buffers: list[bytearray | None]
    children: list[Node]
    #: Buffer index -> bytes past a 64-byte boundary its data starts at (misaligned if not 0).
    shifts: dict[int, int] = field(default_factory=dict)

    def walk(self) -> list[Node]:
        """This node and every node under it, depth first."""
        return [self, *(n for c in self.children for n in c.walk())]


def offsets_of(node: Node, index: int = 1) -> list[int]:
    """The offsets in buffer ``index`` of ``node`` (binary, string or list layouts)."""
    fmt = OFFSET_FORMATS[node.format]
    buffer = node.buffers[index]
    assert buffer is not None
    return [v for (v,) in struct.iter_unpack(fmt, bytes(buffer))]


def set_offset(node: Node, slot: int, value: int, index: int = 1) -> None:
    """Overwrite offset ``slot`` of ``node`` (buffer ``index``)."""
    fmt = OFFSET_FORMATS[node.format]
    buffer = node.buffers[index]
    assert buffer is not None
    struct.pack_into(fmt, buffer, slot * struct.calcsize(fmt), value)


def _sizes(fmt: str, array: ArrowArray, pointers: list[int | None]) -> list[int]:
    """Each buffer's size in bytes, for valid data of format ``fmt`` (what pyarrow exported)."""
    n = array.offset + array.length
    validity = (n + 7) // 8
    if fmt in OFFSET_FORMATS:
        width = struct.calcsize(OFFSET_FORMATS[fmt])
        offsets = width * (n + 1)
        if fmt.startswith("+"):
            return [validity, offsets]
        last = pointers[1]
        data = 0 if last is None else struct.unpack(OFFSET_FORMATS[fmt], ctypes.string_at(last + width * n, width))[0]
        return [validity, offsets, data]
    if fmt in ("vu", "vz"):
        variadic = array.n_buffers - 3
        sizes_at = pointers[-1]
        sizes = list(struct.unpack(f"<{variadic}q", ctypes.string_at(sizes_at, 8 * variadic))) if sizes_at else []
        return [validity, 16 * n, *sizes, 8 * variadic]
    if fmt == "+s":
        return [validity]
    width = _INT_WIDTHS.get(fmt, 8)  # timestamps ("ts?:zone") are int64
    return [validity, width * n]


def _read(array: ArrowArray, schema: ArrowSchema) -> Node:
    fmt = schema.format.decode()
    pointers: list[int | None] = [array.buffers[i] for i in range(array.n_buffers)]
    buffers = [
        bytearray(ctypes.string_at(p, size)) if p else None for p, size in zip(pointers, _sizes(fmt, array, pointers))
    ]
    children = [_read(array.children[i].contents, schema.children[i].contents) for i in range(array.n_children)]
    return Node(fmt, array.length, array.null_count, array.offset, array.n_buffers, array.n_children, buffers, children)


def export(batch: pa.RecordBatch, slack: int = 256) -> Exported:
    """A copy of ``batch``'s C export that a test may change before ``send_arrow`` reads it."""
    array, schema = ArrowArray(), ArrowSchema()
    batch._export_to_c(ctypes.addressof(array), ctypes.addressof(schema))
    try:
        root = _read(array, schema)
    finally:
        array.release(ctypes.pointer(array))
        schema.release(ctypes.pointer(schema))
    return Exported(root, batch.schema, slack)


class Exported:
    """Exports ``root`` anew on each ``__arrow_c_array__`` call, in ctypes memory kept alive by this object."""

    def __init__(self, root: Node, schema: pa.Schema, slack: int) -> None:
        self.root = root
        self.schema = schema
        self.slack = slack
        self._keep: list[Any] = []

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        self._keep.clear()
        root = self._build(self.root)
        return self.schema.__arrow_c_schema__(), _capsule_new(ctypes.addressof(root), _ARRAY_CAPSULE, None)

    def _memory(self, data: bytes, shift: int) -> int:
        """``data`` at ``shift`` bytes past a 64-byte boundary, followed by ``slack`` zero bytes: its address."""
        memory = ctypes.create_string_buffer(len(data) + self.slack + 128)
        self._keep.append(memory)
        at = (ctypes.addressof(memory) + 63) // 64 * 64 + shift
        ctypes.memmove(at, data, len(data))
        return at

    def _build(self, node: Node) -> ArrowArray:
        array = ArrowArray()
        array.length, array.null_count, array.offset = node.length, node.null_count, node.offset
        array.n_buffers, array.n_children = node.n_buffers, node.n_children
        # Slots past the node's own buffers and children (a count raised by a test) hold zeroed
        # memory and an empty array: reading them stays within memory the test owns.
        slots = max(len(node.buffers), node.n_buffers, 1)
        pointers = (ctypes.c_void_p * slots)()
        for i in range(slots):
            data = node.buffers[i] if i < len(node.buffers) else bytearray()
            pointers[i] = None if data is None else self._memory(bytes(data), node.shifts.get(i, 0))
        children = (ctypes.POINTER(ArrowArray) * max(len(node.children), node.n_children, 1))()
        for i in range(len(children)):
            child = self._build(node.children[i]) if i < len(node.children) else self._empty()
            children[i] = ctypes.pointer(child)
        array.buffers = pointers
        array.children = children
        array.release = _release
        self._keep += [array, pointers, children]
        return array

    def _empty(self) -> ArrowArray:
        array = ArrowArray()
        array.release = _release
        self._keep.append(array)
        return array
