"""Compression codecs of the Kafka RecordBatch, byte-compatible with the Java client.

A magic-2 batch compresses its *records section* (everything after the 61-byte
header) as one blob, and names the codec in bits 0-2 of the batch attributes.
The ids below are those wire values. Every codec here must produce what the
Java broker can decompress and read what any client writes, which pins a few
framing choices that the compression libraries would otherwise make
differently:

* **gzip** is the gzip *file* format (header + deflate + CRC-32 trailer), as
  Java's ``GZIPOutputStream`` writes it, not a bare zlib stream.
* **snappy** is the *xerial* stream that Java's ``SnappyOutputStream`` writes:
  a 16-byte header (``\\x82SNAPPY\\x00``, int32 version 1, int32 compatible
  version 1) and then, per 32 KiB of input, an int32 length and one raw snappy
  block. Some old clients wrote a bare snappy block, so decompression accepts
  both.
* **lz4** is the LZ4 *frame* format (KIP-57), with independent blocks: Java's
  ``KafkaLZ4BlockInputStream`` decompresses each block on its own, so blocks
  that refer back to the previous one would not decode on the broker.
* **zstd** is a standard zstd frame. Java writes frames without a content
  size, so decompression streams rather than trusting the frame header.

Levels follow KIP-390 (``compression.gzip.level``, ``compression.lz4.level``,
``compression.zstd.level``); ``None`` picks Java's default.

gzip, lz4 and zstd are hard dependencies (stdlib, ``lz4``, ``zstandard``);
snappy is optional (``pip install aioproducer[snappy]`` installs ``cramjam``;
``python-snappy`` is used when present instead), so :func:`check_available`
lets configuration fail at construction time rather than at the first batch.
"""

from __future__ import annotations

import struct
import threading
import zlib
from types import ModuleType
from typing import Any, Callable, Final

from aioproducer.errors import ConfigError, KafkaError, ProtocolError

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "DEFAULT_LEVELS",
    "LEVEL_RANGES",
    "codec_from_name",
    "check_available",
    "validate_level",
    "compress",
    "decompress",
]

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

#: Wire id -> the name ``compression.type`` uses for it.
CODEC_NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_CODEC_IDS: Final[dict[str, int]] = {name: codec for codec, name in CODEC_NAMES.items()}

#: Java's defaults (KIP-390). gzip -1 is ``Deflater.DEFAULT_COMPRESSION`` (zlib's 6).
DEFAULT_LEVELS: Final[dict[int, int]] = {GZIP: -1, LZ4: 9, ZSTD: 3}
#: Inclusive level ranges Java's config validation accepts (gzip also takes -1).
#: lz4 levels above 12 behave as 12 in the C library, as in lz4-java.
LEVEL_RANGES: Final[dict[int, tuple[int, int]]] = {GZIP: (1, 9), LZ4: (1, 17), ZSTD: (-131072, 22)}

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")


def codec_from_name(name: str) -> int:
    """Map a ``compression.type`` value to its wire id.

    Case-insensitive, as Java's ``CompressionType.forName`` is; unknown names
    are a configuration mistake, hence :class:`ConfigError`.
    """
    try:
        return _CODEC_IDS[name.strip().lower()]
    except (KeyError, AttributeError):
        raise ConfigError(
            f"unknown compression.type {name!r}; expected one of {', '.join(_CODEC_IDS)}"
        ) from None


# ------------------------------------------------------------------ snappy backend
# Resolved once at import: (compress_raw, decompress_raw) or None.


def _load_snappy() -> tuple[Callable[[bytes | memoryview], bytes], Callable[[bytes], bytes]] | None:
    try:
        import cramjam

        cj: ModuleType = cramjam
        return (
            lambda data: bytes(cj.snappy.compress_raw(data)),
            lambda data: bytes(cj.snappy.decompress_raw(data)),
        )
    except ImportError:
        pass
    try:
        import snappy

        sn: ModuleType = snappy
        return (lambda data: bytes(sn.compress(bytes(data))), lambda data: bytes(sn.decompress(data)))
    except ImportError:
        return None


_SNAPPY = _load_snappy()


def check_available(codec: int) -> None:
    """Raise :class:`ConfigError` unless ``codec`` is known and its library importable.

    Called by the configuration layer so that ``compression.type=snappy``
    without the optional dependency fails when the producer is built, with the
    install hint in the message, not later inside the sender.
    """
    if codec not in CODEC_NAMES:
        raise ConfigError(f"unknown compression codec id {codec!r}")
    if codec == SNAPPY and _SNAPPY is None:
        raise ConfigError(
            "compression.type=snappy needs cramjam (or python-snappy): "
            "pip install 'aioproducer[snappy]'"
        )


def validate_level(codec: int, level: int | None) -> None:
    """Raise :class:`ConfigError` if ``level`` is out of Java's range for ``codec``.

    ``None`` always passes (codec default). Codecs without levels (none,
    snappy) ignore the level, as Java does.
    """
    if level is None or codec not in LEVEL_RANGES:
        return
    low, high = LEVEL_RANGES[codec]
    if codec == GZIP and level == -1:
        return
    if not low <= level <= high:
        raise ConfigError(
            f"compression.{CODEC_NAMES[codec]}.level must be in [{low}, {high}], got {level}"
        )


# ------------------------------------------------------------------ compress


def _gzip_compress(data: bytes | memoryview, level: int) -> bytes:
    # wbits 31 = 16 (gzip wrapper) + 15 (32 KiB window), the format of GZIPOutputStream.
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def _snappy_compress(data: bytes | memoryview) -> bytes:
    if _SNAPPY is None:
        check_available(SNAPPY)
        raise AssertionError("unreachable")  # pragma: no cover
    raw = _SNAPPY[0]
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    pack = _INT32.pack
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = raw(view[start : start + _XERIAL_BLOCK])  # cramjam reads the view: no copy
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data: bytes | memoryview, level: int) -> bytes:
    import lz4.frame

    # The default level means LZ4's fast compressor, as in Java: its lz4 stream picks
    # ``fastCompressor()`` when the level is the default (9) and ``highCompressor(level)``
    # otherwise. High compression at 9 would take ~7x longer per batch.
    if level == DEFAULT_LEVELS[LZ4]:
        level = 0  # python-lz4: below 3 is the fast (non-HC) compressor
    return bytes(
        lz4.frame.compress(
            data,
            compression_level=level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,  # KafkaLZ4BlockInputStream decodes blocks independently
            content_checksum=False,
            store_size=False,
        )
    )


class _ZstdCompressors(threading.local):
    """One compressor per level and thread: the event loop's, and the sender's compression thread."""

    def __init__(self) -> None:
        self.by_level: dict[int, Any] = {}


_zstd_compressors = _ZstdCompressors()


def _zstd_compress(data: bytes | memoryview, level: int) -> bytes:
    # One compressor per level, reused: making one allocates its context each time. Per
    # thread, because a ZstdCompressor must not compress two inputs at once.
    compressors = _zstd_compressors.by_level
    compressor = compressors.get(level)
    if compressor is None:
        import zstandard

        compressor = compressors[level] = zstandard.ZstdCompressor(level=level)
    return bytes(compressor.compress(data))


def compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    """Compress a records section with ``codec`` at ``level`` (``None``: Java's default).

    ``NONE`` returns ``data`` unchanged (as bytes). Raises :class:`ConfigError`
    for an unknown codec or a missing optional library.
    """
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gzip_compress(data, DEFAULT_LEVELS[GZIP] if level is None else level)
    if codec == SNAPPY:
        return _snappy_compress(data)
    if codec == LZ4:
        return _lz4_compress(data, DEFAULT_LEVELS[LZ4] if level is None else level)
    if codec == ZSTD:
        return _zstd_compress(data, DEFAULT_LEVELS[ZSTD] if level is None else level)
    check_available(codec)
    raise AssertionError("unreachable")  # pragma: no cover


# ------------------------------------------------------------------ decompress


def _gzip_decompress(data: bytes) -> bytes:
    # wbits 47 = 32 (auto-detect gzip or zlib header) + 15. Loop for
    # concatenated gzip members, which the gzip format allows.
    out = []
    rest = data
    while rest:
        decompressor = zlib.decompressobj(47)
        out.append(decompressor.decompress(rest))
        if not decompressor.eof:
            raise ProtocolError("gzip stream is truncated")
        rest = decompressor.unused_data
    return b"".join(out)


def _snappy_decompress(data: bytes) -> bytes:
    if _SNAPPY is None:
        check_available(SNAPPY)
        raise AssertionError("unreachable")  # pragma: no cover
    raw = _SNAPPY[1]
    if not data.startswith(_XERIAL_MAGIC):
        return raw(data)
    if len(data) < len(_XERIAL_HEADER):
        raise ProtocolError("xerial snappy header is truncated")
    view = memoryview(data)
    out = []
    pos = len(_XERIAL_HEADER)
    end = len(data)
    unpack = _INT32.unpack_from
    while pos < end:
        if pos + 4 > end:
            raise ProtocolError("xerial snappy block length is truncated")
        (size,) = unpack(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise ProtocolError("xerial snappy block is truncated")
        out.append(raw(bytes(view[pos : pos + size])))
        pos += size
    return b"".join(out)


def _lz4_decompress(data: bytes) -> bytes:
    import lz4.frame

    return bytes(lz4.frame.decompress(data))


def _zstd_decompress(data: bytes) -> bytes:
    import zstandard

    # Java writes no content size in the frame header, so the one-shot
    # ZstdDecompressor.decompress() would refuse; stream across frames instead.
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        return bytes(reader.read())


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress a records section written with ``codec``.

    Malformed input raises :class:`ProtocolError` (whatever the library raised
    is chained), so callers decoding wire bytes handle one exception type.
    """
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise ProtocolError(f"unknown compression codec id {codec}")
    try:
        if codec == GZIP:
            return _gzip_decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return _lz4_decompress(data)
        return _zstd_decompress(data)
    except KafkaError:
        raise
    except Exception as exc:  # each library has its own error types
        raise ProtocolError(f"cannot decompress {CODEC_NAMES[codec]} data: {exc}") from exc
