"""Responses the proxy streams to the client: a relayed upstream response, or an exchange.

Both are Starlette's own :class:`StreamingResponse` (which also watches for the client's
disconnect and stops the stream at once), with one addition: whatever ends the response, the
upstream responses behind it are closed and the outcome is counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .upstream import UpstreamResponse


class ClosingStreamingResponse(StreamingResponse):
    """A streaming response that always runs ``on_close(completed)`` when it ends
    (``completed`` is False when the client went away first)."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        on_close: Callable[[bool], Awaitable[None]],
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, status_code=status_code, headers=headers)
        self._on_close = on_close
        self.completed = False

    async def stream_response(self, send: Send) -> None:
        await super().stream_response(send)
        self.completed = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._on_close(self.completed)


async def relayed_body(response: UpstreamResponse) -> AsyncIterator[bytes]:
    """The upstream body as it comes. A broken upstream raises (UpstreamError), which breaks
    the client connection too: the relay adds nothing of its own to a body it passes through,
    and a clean end would pass a truncated body off as complete."""
    while chunk := await response.next_chunk():
        yield chunk
