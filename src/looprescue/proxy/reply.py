"""How the proxy answers one client request, whichever HTTP server carries it.

:class:`Reply` is all the proxy's request handling (``app.Proxy``) writes to: the request
body, a whole response, or a streamed one (its head, body pieces, its end), and
:meth:`Reply.guard`, which runs the handling so that the client's disconnect cancels it at
once (and with it every upstream request it has open).

The proxy's own server (``server.py``) hands each request's reply to the app through the
ASGI scope's extension :data:`REPLY_EXTENSION`, so a streamed piece goes from the upstream
read to the client's socket with no ASGI message in between. Under any other ASGI server,
:class:`AsgiReply` implements the same over ASGI's ``receive``/``send``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from starlette.types import Receive, Scope, Send

REPLY_EXTENSION = "looprescue.reply"

Headers = Mapping[str, str] | Sequence[tuple[str, str]]


class ClientGone(Exception):
    """The client disconnected before its request body arrived whole."""


class Reply(Protocol):
    async def body(self) -> bytes:
        """The whole request body; raises :class:`ClientGone`."""

    async def guard(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run ``work``; cancel it when the client disconnects first (then return False)."""

    async def whole(self, status: int, headers: Headers, body: bytes) -> None:
        """A complete response (its content-length is set here)."""

    async def start(self, status: int, headers: Headers) -> None:
        """The head of a streamed response (chunked unless ``headers`` give a length)."""

    async def send(self, piece: bytes) -> None:
        """A piece of a streamed body; waits while the client does not keep up."""

    # Write a piece of a streamed body at once, from any callback; False (nothing written)
    # while the client does not keep up. None where the server offers no such write.
    write_now: Callable[[bytes], bool] | None

    async def end(self) -> None:
        """The streamed body is complete."""

    def abort(self) -> None:
        """The body cannot be completed: break the connection, so a truncated body is never
        passed off as complete."""


def header_pairs(headers: Headers) -> list[tuple[str, str]]:
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


async def until_gone(task: asyncio.Future[None], gone: Callable[[], bool]) -> bool:
    """Wait for ``task``, which a disconnect cancels: True when it finished, False when the
    client left first. Cancelling the waiter cancels ``task`` too (and waits for it)."""
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise
    if task.cancelled():
        if gone():
            return False
        raise asyncio.CancelledError
    task.result()  # the work's own exception, if it raised
    return not gone()


class AsgiReply:
    """:class:`Reply` over ASGI ``receive``/``send`` (any ASGI server)."""

    write_now = None  # ASGI writes only by awaiting send

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self._ended = False
        self.gone = False

    async def body(self) -> bytes:
        pieces = []
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.gone = True
                raise ClientGone
            pieces.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(pieces)

    async def guard(self, work: Coroutine[Any, Any, None]) -> bool:
        task = asyncio.ensure_future(work)

        async def watch() -> None:
            while (await self._receive())["type"] != "http.disconnect":
                pass
            # servers also report a disconnect once the response is complete
            if not self._ended:
                self.gone = True
                task.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            return await until_gone(task, lambda: self.gone)
        finally:
            watcher.cancel()

    async def whole(self, status: int, headers: Headers, body: bytes) -> None:
        pairs = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in header_pairs(headers)
            if k.lower() != "content-length"
        ]
        pairs.append((b"content-length", str(len(body)).encode()))
        await self._send({"type": "http.response.start", "status": status, "headers": pairs})
        self._ended = True
        await self._send({"type": "http.response.body", "body": body})

    async def start(self, status: int, headers: Headers) -> None:
        pairs = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in header_pairs(headers)
        ]
        await self._send({"type": "http.response.start", "status": status, "headers": pairs})

    async def send(self, piece: bytes) -> None:
        if piece:
            await self._send({"type": "http.response.body", "body": piece, "more_body": True})

    async def end(self) -> None:
        self._ended = True
        await self._send({"type": "http.response.body", "body": b""})

    def abort(self) -> None:
        # ASGI has no message for it: raising is how an app tells its server that the response
        # it started cannot be completed (the server then breaks the connection)
        raise ConnectionAbortedError("the response cannot be completed")
