"""The connection's read path (``_DirectFeed``): each read handed on as exactly the bytes read, into one buffer."""

from __future__ import annotations

import asyncio
import socket

from aioproducer.network.connection import _DirectFeed


async def test_each_read_is_handed_on_as_the_bytes_read_into_the_one_buffer_the_transport_reads_into() -> None:
    """Over asyncio's own streams the transport reads into the feed's buffer (``recv_into``), and the
    connection gets each read's bytes alone: none left from a longer read before, none missing."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    got: list[bytes] = []
    arrived = asyncio.Event()
    buffers: list[int] = []

    class Spy(_DirectFeed):
        def get_buffer(self, sizehint: int) -> memoryview:
            buffer = super().get_buffer(sizehint)
            buffers.append(id(buffer.obj))
            return buffer

    def receive(data: bytes) -> None:
        got.append(data)
        arrived.set()

    streams = writer.transport.get_protocol()
    assert isinstance(streams, asyncio.StreamReaderProtocol)
    writer.transport.set_protocol(Spy(streams, receive))
    try:
        for chunk in (b"a longer first read", b"short"):
            arrived.clear()
            theirs.sendall(chunk)
            await asyncio.wait_for(arrived.wait(), 5)
        assert got == [b"a longer first read", b"short"]
        assert len(buffers) == 2 and len(set(buffers)) == 1  # read into one buffer, kept
        theirs.close()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # the end of the stream still reaches the reader
    finally:
        writer.close()
        theirs.close()
