"""Codecs: ids and names, availability errors, round trips, and wire compatibility.

Compatibility is checked against other implementations of the same framing
(aiokafka's codec module, cramjam directly, the lz4 and zstandard libraries'
own frame parsers), since the point of each choice in compression.py is that
the Java broker and other clients read what we write and vice versa.
"""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from aiokafka import codec as aiokafka_codec

from aioproducer.errors import ConfigError, ProtocolError
from aioproducer.protocol import compression
from aioproducer.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
# Compressible but not trivially so, spanning several 32 KiB snappy chunks and 64 KiB lz4 blocks.
BIG = b"".join(i.to_bytes(4, "big") + b"kafka-record-" * (i % 7) for i in range(20000))
RANDOM = os.urandom(70_000)
PAYLOADS = [b"", b"x", b"hello kafka" * 10, BIG, RANDOM]


def test_codec_ids_match_the_wire_values() -> None:
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize(
    ("name", "codec"),
    [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("GZIP", 1), (" Zstd ", 4)],
)
def test_codec_from_name(name: str, codec: int) -> None:
    assert compression.codec_from_name(name) == codec


@pytest.mark.parametrize("name", ["", "lzma", "brotli", "producer"])
def test_codec_from_name_rejects_unknown(name: str) -> None:
    with pytest.raises(ConfigError, match="compression.type"):
        compression.codec_from_name(name)


def test_check_available_accepts_installed_codecs() -> None:
    for codec in ALL_CODECS:
        compression.check_available(codec)


def test_check_available_rejects_unknown_id() -> None:
    with pytest.raises(ConfigError):
        compression.check_available(5)


def test_snappy_without_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "_SNAPPY", None)
    with pytest.raises(ConfigError, match=r"aioproducer\[snappy\]"):
        compression.check_available(SNAPPY)
    with pytest.raises(ConfigError, match=r"aioproducer\[snappy\]"):
        compression.compress(SNAPPY, b"data")
    compression.check_available(GZIP)  # the others are unaffected


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "small", "big", "random"])
def test_round_trip(codec: int, payload: bytes) -> None:
    assert compression.decompress(codec, compression.compress(codec, payload)) == payload


@pytest.mark.parametrize(("codec", "level"), [(GZIP, 1), (GZIP, 9), (GZIP, -1), (LZ4, 1), (LZ4, 17), (ZSTD, 1), (ZSTD, 19), (ZSTD, -5)])
def test_round_trip_with_levels(codec: int, level: int) -> None:
    assert compression.decompress(codec, compression.compress(codec, BIG, level)) == BIG


def test_levels_change_the_output() -> None:
    fast = compression.compress(GZIP, BIG, 1)
    best = compression.compress(GZIP, BIG, 9)
    assert len(best) < len(fast)


def test_compressible_data_shrinks() -> None:
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        assert len(compression.compress(codec, BIG)) < len(BIG) // 2, codec


def test_validate_level() -> None:
    compression.validate_level(GZIP, -1)
    compression.validate_level(GZIP, None)
    compression.validate_level(SNAPPY, 100)  # no levels: ignored, as in Java
    compression.validate_level(ZSTD, -131072)
    for codec, level in [(GZIP, 0), (GZIP, 10), (LZ4, 0), (LZ4, 18), (ZSTD, 23)]:
        with pytest.raises(ConfigError):
            compression.validate_level(codec, level)


# ------------------------------------------------------------------ gzip


def test_gzip_is_the_gzip_file_format() -> None:
    out = compression.compress(GZIP, BIG)
    assert out[:2] == b"\x1f\x8b"  # gzip magic, as GZIPOutputStream writes
    assert gzip.decompress(out) == BIG
    assert aiokafka_codec.gzip_decode(out) == BIG


def test_gzip_reads_other_writers_and_concatenated_members() -> None:
    assert compression.decompress(GZIP, aiokafka_codec.gzip_encode(BIG)) == BIG
    assert compression.decompress(GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_gzip_truncated_raises_protocol_error() -> None:
    out = compression.compress(GZIP, BIG)
    with pytest.raises(ProtocolError):
        compression.decompress(GZIP, out[: len(out) // 2])


# ------------------------------------------------------------------ snappy (xerial)


def test_snappy_writes_xerial_framing() -> None:
    out = compression.compress(SNAPPY, BIG)
    assert out[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", out[8:16]) == (1, 1)  # version 1, minimum compatible version 1
    # Walk the chunks by hand: int32 length + raw snappy block of <= 32 KiB input each.
    pos, pieces = 16, []
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        pos += 4
        pieces.append(bytes(cramjam.snappy.decompress_raw(out[pos : pos + size])))
        pos += size
    assert pos == len(out)
    assert [len(p) for p in pieces[:-1]] == [32 * 1024] * (len(pieces) - 1)
    assert len(pieces) == -(-len(BIG) // (32 * 1024))
    assert b"".join(pieces) == BIG


def test_snappy_is_readable_by_aiokafka() -> None:
    for payload in (BIG, RANDOM, b"x"):
        assert aiokafka_codec.snappy_decode(compression.compress(SNAPPY, payload)) == payload


def test_snappy_reads_xerial_from_aiokafka_and_raw_blocks() -> None:
    assert compression.decompress(SNAPPY, aiokafka_codec.snappy_encode(BIG)) == BIG
    raw = bytes(cramjam.snappy.compress_raw(BIG))
    assert not raw.startswith(b"\x82SNAPPY")
    assert compression.decompress(SNAPPY, raw) == BIG


def test_snappy_truncated_chunk_raises_protocol_error() -> None:
    out = compression.compress(SNAPPY, BIG)
    with pytest.raises(ProtocolError):
        compression.decompress(SNAPPY, out[:-10])
    with pytest.raises(ProtocolError):
        compression.decompress(SNAPPY, out[:18])  # header + half a length


# ------------------------------------------------------------------ lz4


def test_lz4_is_a_frame_with_independent_blocks() -> None:
    out = compression.compress(LZ4, BIG)
    assert out[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic 0x184D2204, little endian
    info = lz4.frame.get_frame_info(out)
    assert info["block_linked"] is False  # Java's KafkaLZ4BlockInputStream decodes blocks alone
    assert info["block_size"] == 64 * 1024
    assert info["content_checksum"] is False
    assert aiokafka_codec.lz4_decode(out) == BIG


def test_lz4_default_level_is_the_fast_compressor_as_in_java() -> None:
    # Java's lz4 output stream uses lz4's fast compressor at the default level (9) and the
    # high-compression one for any other level; level 9 must not mean LZ4-HC level 9.
    default = compression.compress(LZ4, BIG)
    fast = lz4.frame.compress(BIG, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                              block_linked=False, content_checksum=False, store_size=False)
    assert default == fast
    assert compression.compress(LZ4, BIG, 10) != fast  # an explicit other level is LZ4-HC
    assert compression.decompress(LZ4, default) == BIG


def test_lz4_reads_other_writers() -> None:
    assert compression.decompress(LZ4, aiokafka_codec.lz4_encode(BIG)) == BIG
    assert compression.decompress(LZ4, lz4.frame.compress(BIG, block_linked=True, content_checksum=True)) == BIG


# ------------------------------------------------------------------ zstd


def test_zstd_round_trips_with_other_writers_and_readers() -> None:
    out = compression.compress(ZSTD, BIG)
    assert aiokafka_codec.zstd_decode(out) == BIG
    assert compression.decompress(ZSTD, aiokafka_codec.zstd_encode(BIG)) == BIG


def test_zstd_reads_frames_without_content_size() -> None:
    # Java's zstd-jni streams, so its frames carry no content size.
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(BIG)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert compression.decompress(ZSTD, frame) == BIG


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_raises_protocol_error(codec: int) -> None:
    with pytest.raises(ProtocolError):
        compression.decompress(codec, b"\xff" * 40)


def test_unknown_codec_on_decompress_is_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        compression.decompress(6, b"abc")
    with pytest.raises(ConfigError):
        compression.compress(6, b"abc")
