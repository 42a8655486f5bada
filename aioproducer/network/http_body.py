"""HTTP answers read with a cap: the one way the project's HTTP clients (the OIDC token fetch, the
Schema Registry client) read a body.

Why: a server's answer is read into memory, and a server that lies, a proxy's error page or a
misrouted download must not grow the producer's process by whatever it sends. The body is read
in chunks and refused the moment it passes the cap (or at once, when its ``Content-Length``
already does): the rest is never read, and leaving the response unread closes its connection
(aiohttp does not return a connection with an unread body to its pool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # aiohttp belongs to the extras that use this module
    import aiohttp

__all__ = ["BodyTooLargeError", "read_capped"]

#: How much is asked of the socket at a time: small next to any cap, large enough to be cheap.
_CHUNK: Final = 64 * 1024


class BodyTooLargeError(ValueError):
    """An answer's body passed the cap; the message names the cap (the caller adds the URL)."""

    def __init__(self, cap: int, declared: int | None = None) -> None:
        self.cap = cap
        said = f" (its Content-Length says {declared} bytes)" if declared is not None else ""
        super().__init__(f"a body over the cap of {cap} bytes{said}; it was not read further")


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body if it is at most ``cap`` bytes, else :class:`BodyTooLargeError` (the rest unread)."""
    declared = response.content_length
    if declared is not None and declared > cap:
        raise BodyTooLargeError(cap, declared)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > cap:
            raise BodyTooLargeError(cap)
        chunks.append(chunk)
    return b"".join(chunks)
