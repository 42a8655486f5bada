"""An HTTP answer without end, for the tests of the project's capped HTTP reads (token endpoint, registry).

Shared by ``test_oidc_hostile_endpoint.py`` and ``test_schema_registry_hostile.py``: a server that
streams far more than the client's cap, in 64 KiB writes that wait while the client's window is
full, and counts what it got out, so a test can assert the client stopped reading (not timings).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Flood:
    """Answers ``status`` with ``total`` bytes starting ``prefix`` (``declared``: with a Content-Length); counts what it sent."""

    status: int = 200
    declared: bool = False
    total: int = 0
    prefix: bytes = b'{"padding": "'
    sent: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(status=self.status)
        if self.declared:
            response.content_length = self.total
        chunk = self.prefix + b"x" * (64 * 1024 - len(self.prefix))
        try:
            await response.prepare(request)
            while self.sent < self.total:
                await response.write(chunk)  # waits while the client's window is full
                self.sent += len(chunk)
        except (ConnectionError, RuntimeError):  # the client closed the connection (aiohttp: "closing transport")
            pass
        finally:
            self.done.set()
        return response
