"""The proxy's own HTTP/1.1 server: an asyncio protocol per client connection around
httptools' request parser, serving an ASGI app.

Why not uvicorn: passing a stream through uvicorn and Starlette untouched cost the proxy about
as much CPU again as a plain byte relay (``make bench``, ``bench_proxy_cpu``): per streamed
piece an ASGI message, several middleware layers and a flow-control check, per response a
task group. Here the app still routes every request (its own routes, middleware and
lifespan work as under any ASGI server), and each request's scope carries a
:class:`~looprescue.proxy.reply.Reply` (extension ``looprescue.reply``) through which the
proxy writes a streamed piece straight to the connection's transport.

What it does: keep-alive (5 s idle) and pipelined requests answered in order; request bodies
by length or chunked, ``Expect: 100-continue``; responses by length or chunked (none for
HEAD, 204, 304); a client that disconnects cancels the work guarding its request at once;
writes wait while the client's socket buffer is full; a request the parser rejects gets a
400 and the connection is closed. On SIGINT/SIGTERM it stops accepting, lets the requests in
flight finish for up to 5 s, then cancels them and runs the app's lifespan shutdown.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import signal
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import httptools

from .reply import REPLY_EXTENSION, Headers, header_pairs, until_gone

log = logging.getLogger("looprescue.proxy")

KEEPALIVE_SECONDS = 5.0
GRACEFUL_SECONDS = 5.0
# Requests a client may pipeline behind the one being answered before its reads pause.
MAX_PIPELINED = 16
_NO_BODY_STATUSES = frozenset({204, 304})
_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 30\r\nconnection: close\r\n\r\nInvalid HTTP request received."
)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_STATUS_LINES: dict[int, bytes] = {}

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        line = _STATUS_LINES[status] = f"HTTP/1.1 {status} {phrase}\r\n".encode("latin-1")
    return line


class _Clock:
    """The Date header's value, formatted once a second."""

    def __init__(self) -> None:
        self._second = 0
        self._header = b""

    def date_header(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._header = b"date: " + email.utils.formatdate(now, usegmt=True).encode() + b"\r\n"
        return self._header


class _Request:
    __slots__ = ("body", "headers", "http_version", "keep_alive", "method", "url")

    def __init__(
        self,
        method: str,
        url: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        keep_alive: bool,
        http_version: str,
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.http_version = http_version


class Response:
    """One request's answer on its connection: the :class:`~looprescue.proxy.reply.Reply`
    the proxy writes to, and the ASGI ``receive``/``send`` of the app's other routes."""

    __slots__ = (
        "_body_sent",
        "_conn",
        "_disconnect",
        "_guarded",
        "_length",
        "_request",
        "chunked",
        "complete",
        "gone",
        "keep_alive",
        "started",
    )

    def __init__(self, conn: HttpConnection, request: _Request) -> None:
        self._conn = conn
        self._request = request
        self._guarded: asyncio.Future[None] | None = None
        self._disconnect: asyncio.Future[None] | None = None
        self._body_sent = False
        self._length: int | None = None  # bytes the head announced still to come
        self.started = False
        self.complete = False
        self.chunked = False
        self.gone = False
        self.keep_alive = request.keep_alive

    # ------------------------------------------------------------------ Reply

    async def body(self) -> bytes:
        return self._request.body

    async def guard(self, work: Coroutine[Any, Any, None]) -> bool:
        task = asyncio.ensure_future(work)
        if self.gone:
            task.cancel()
        self._guarded = task
        return await until_gone(task, lambda: self.gone)

    async def whole(self, status: int, headers: Headers, body: bytes) -> None:
        pairs = [(k, v) for k, v in header_pairs(headers) if k.lower() != "content-length"]
        pairs.append(("content-length", str(len(body))))
        self._write_head(status, pairs)
        self._write_body(body)
        self._finish()

    async def start(self, status: int, headers: Headers) -> None:
        self._write_head(status, header_pairs(headers))

    async def send(self, piece: bytes) -> None:
        if piece:
            self._write_body(piece)
            if self._conn.paused:
                await self._conn.drain()

    def write_now(self, piece: bytes) -> bool:
        if self._conn.paused:
            return False
        self._write_body(piece)
        return True

    async def end(self) -> None:
        self._finish()

    def abort(self) -> None:
        self.keep_alive = False
        self._conn.close()

    # ------------------------------------------------------------------ ASGI

    async def receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self._request.body, "more_body": False}
        if not (self.gone or self.complete):
            if self._disconnect is None:
                self._disconnect = asyncio.get_running_loop().create_future()
            await self._disconnect
        return {"type": "http.disconnect"}

    async def send_message(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the response already started")
            headers = [
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", ())
            ]
            self._write_head(message["status"], headers)
        elif kind == "http.response.body":
            if not self.started or self.complete:
                raise RuntimeError("response body outside a started response")
            await self.send(message.get("body", b""))
            if not message.get("more_body", False):
                self._finish()

    # ------------------------------------------------------------------ writing

    def _write_head(self, status: int, headers: list[tuple[str, str]]) -> None:
        if self.started:
            raise RuntimeError("the response already started")
        self.started = True
        lines = [_status_line(status)]
        length: int | None = None
        dated = False
        for name, value in headers:
            lowered = name.lower()
            if lowered == "date":
                dated = True  # the upstream's own date is passed on; no second one
            elif lowered == "content-length":
                length = int(value)
                continue  # written once, below, with the length this server keeps to
            elif lowered == "transfer-encoding":
                continue  # this server frames the body itself
            elif lowered == "connection":
                if "close" in value.lower():
                    self.keep_alive = False
                continue
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        if not dated:
            lines.insert(1, self._conn.clock.date_header())
        bodiless = self._request.method == "HEAD" or status in _NO_BODY_STATUSES or status < 200
        if length is not None:
            lines.append(b"content-length: %d\r\n" % length)
            self._length = 0 if bodiless else length
        elif not bodiless:
            self.chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        else:
            self._length = 0
        if not self.keep_alive or self._conn.closing:
            self.keep_alive = False
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        self._conn.write(b"".join(lines))

    def _write_body(self, piece: bytes) -> None:
        if self.complete or not piece:
            return
        if self.chunked:
            self._conn.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            return
        remaining = self._length
        if remaining is not None:
            if len(piece) > remaining:
                piece = piece[:remaining]  # never more than the head announced
                self.keep_alive = False
            self._length = remaining - len(piece)
        if piece:
            self._conn.write(piece)

    def _finish(self) -> None:
        if self.complete:
            return
        if self.chunked:
            self._conn.write(b"0\r\n\r\n")
        elif self._length:
            self.keep_alive = False  # shorter than announced: the client must see a break
        self.complete = True
        self._wake_disconnect()
        self._conn.response_done(self)

    # ------------------------------------------------------------------ the connection

    def lost(self) -> None:
        """The client went away."""
        self.gone = True
        self._wake_disconnect()
        if self._guarded is not None and not self._guarded.done():
            self._guarded.cancel()

    def _wake_disconnect(self) -> None:
        waiter = self._disconnect
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class HttpConnection(asyncio.Protocol):
    """One client connection: parses requests and runs the app for each, in order."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.clock = server.clock
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.paused = False  # the client's socket buffer is full
        self.closing = False
        self.lost = False
        self._drain: asyncio.Future[None] | None = None
        self._pending: deque[_Request] = deque()
        self._current: Response | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._reading_paused = False
        self._in_message = False
        # the request being parsed
        self._url: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._keep_alive = True
        self._server_addr: Any = None
        self._client_addr: Any = None

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._server_addr = _address(transport.get_extra_info("sockname"))
        self._client_addr = _address(transport.get_extra_info("peername"))
        self.server.connections.add(self)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no protocol upgrades here: the request is answered as plain HTTP, then closed
            self._keep_alive = False
            if self._in_message:
                self.on_message_complete()
        except httptools.HttpParserError:
            if self._current is None and self.transport is not None:
                self.transport.write(_BAD_REQUEST)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.closing = True
        self.server.connections.discard(self)
        self._cancel_idle()
        self._pending.clear()
        if self._current is not None:
            self._current.lost()
        waiter = self._drain
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        waiter = self._drain
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ------------------------------------------------------------------ httptools callbacks

    def on_message_begin(self) -> None:
        self._in_message = True
        self._url = []
        self._headers = []
        self._body = []
        self._cancel_idle()

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self._keep_alive = self.parser.should_keep_alive()
        if self._current is None and not self._pending and self.transport is not None:
            for name, value in self._headers:
                if name == b"expect" and value.lower() == b"100-continue":
                    self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_message = False
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        request = _Request(
            self.parser.get_method().decode("ascii"),
            b"".join(self._url),
            self._headers,
            body,
            self._keep_alive,
            self.parser.get_http_version(),
        )
        self._body = []
        self._pending.append(request)
        if len(self._pending) > MAX_PIPELINED and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        if self._current is None:
            self._next()

    # ------------------------------------------------------------------ requests

    def _next(self) -> None:
        if not self._pending or self.lost:
            return
        request = self._pending.popleft()
        if self._reading_paused and len(self._pending) <= MAX_PIPELINED // 2:
            self._reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        response = self._current = Response(self, request)
        self._task = asyncio.get_running_loop().create_task(self._run(request, response))

    async def _run(self, request: _Request, response: Response) -> None:
        app_error: BaseException | None = None
        try:
            scope = self._scope(request, response)
            await self.server.app(scope, response.receive, response.send_message)
        except asyncio.CancelledError:
            if not response.complete:
                self.close()
            raise
        except BaseException as err:  # any app failure ends this response only
            app_error = err
        if app_error is not None and not response.gone:
            target = request.url.decode("latin-1")
            log.error("error answering %s %s", request.method, target, exc_info=app_error)
        if response.complete:
            return
        if not response.started and not response.gone:
            plain = [("content-type", "text/plain; charset=utf-8")]
            await response.whole(500, plain, b"Internal Server Error")
        else:
            self.close()  # a started response that cannot complete: the client sees the break

    def _scope(self, request: _Request, response: Response) -> dict[str, Any]:
        url = httptools.parse_url(request.url)
        raw_path = url.path or b"/"
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version,
            "server": self._server_addr,
            "client": self._client_addr,
            "scheme": "http",
            "method": request.method,
            "root_path": "",
            "path": unquote(raw_path.decode("ascii", "replace")),
            "raw_path": raw_path,
            "query_string": url.query or b"",
            "headers": request.headers,
            "state": dict(self.server.state),
            "extensions": {REPLY_EXTENSION: response},
        }

    def response_done(self, response: Response) -> None:
        if response is not self._current:
            return
        self._current = None
        if not response.keep_alive or self.closing:
            self.close()
        elif self._pending:
            self._next()
        else:
            self._arm_idle()

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        if not self.lost and self.transport is not None:
            self.transport.write(data)

    async def drain(self) -> None:
        while self.paused and not self.lost:
            if self._drain is None or self._drain.done():
                self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def close(self) -> None:
        self.closing = True
        self._cancel_idle()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # ------------------------------------------------------------------ idle and shutdown

    @property
    def idle(self) -> bool:
        return self._current is None and not self._pending and not self._in_message

    def shut_down(self) -> None:
        """The server stops: close now when idle, else after the response in flight."""
        self.closing = True
        if self.idle:
            self.close()

    def cancel(self) -> None:
        """The grace period is over: stop the work in flight and close."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._current is not None:
            self._current.lost()
        if self.transport is not None:
            self.transport.abort()

    def _arm_idle(self) -> None:
        self._cancel_idle()
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(self.server.keepalive_seconds, self._idle_expired)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _idle_expired(self) -> None:
        self._idle = None
        if self.idle:
            self.close()


def _address(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) >= 2:
        return (value[0], value[1])
    return None


class HttpServer:
    """Serves an ASGI app on listening sockets until :meth:`stop` (or SIGINT/SIGTERM)."""

    def __init__(
        self,
        app: App,
        *,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
        graceful_seconds: float = GRACEFUL_SECONDS,
    ) -> None:
        self.app = app
        self.keepalive_seconds = keepalive_seconds
        self.graceful_seconds = graceful_seconds
        self.clock = _Clock()
        self.connections: set[HttpConnection] = set()
        self.state: dict[str, Any] = {}
        self._stop: asyncio.Event | None = None

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def run(self, sockets: list[socket.socket]) -> None:
        """Serve in a new event loop (uvloop's when installed) until stopped."""
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
            asyncio.run(self.serve(sockets))
        else:
            uvloop.run(self.serve(sockets))

    async def serve(self, sockets: list[socket.socket], *, signals: bool = True) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        lifespan = _Lifespan(self.app, self.state)
        await lifespan.startup()
        servers = []
        for sock in sockets:
            server = await loop.create_server(lambda: HttpConnection(self), sock=sock, backlog=4096)
            servers.append(server)
        handled = _handle_stop_signals(loop, self.stop) if signals else False
        try:
            await self._stop.wait()
        finally:
            if handled:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(signum)
            for server in servers:
                server.close()
            for conn in list(self.connections):
                conn.shut_down()
            deadline = loop.time() + self.graceful_seconds
            while self.connections and loop.time() < deadline:
                await asyncio.sleep(0.05)
            for conn in list(self.connections):
                conn.cancel()
            await asyncio.sleep(0)
            await lifespan.shutdown()


class _Lifespan:
    """The ASGI lifespan protocol, for an app that speaks it (Starlette's lifespan)."""

    def __init__(self, app: App, state: dict[str, Any]) -> None:
        self._app = app
        self._state = state
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._supported = True

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": self._state}

        async def run() -> None:
            try:
                await self._app(scope, self._inbox.get, self._outbox.put)
            except Exception:  # an app without lifespan support raises here
                self._supported = False
                await self._outbox.put({"type": "lifespan.unsupported"})

        self._task = asyncio.get_running_loop().create_task(run())
        await self._inbox.put({"type": "lifespan.startup"})
        reply = await self._outbox.get()
        if reply["type"] == "lifespan.startup.failed":
            raise RuntimeError(f"the app failed to start: {reply.get('message', '')}")

    async def shutdown(self) -> None:
        if not self._supported or self._task is None:
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        await self._outbox.get()
        await self._task


def _handle_stop_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> bool:
    """Stop on SIGINT and SIGTERM. True when the loop's own handlers do it; where a loop has
    none (Windows), plain signal handlers hand the stop to the loop, and False is returned."""
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop)
    except (NotImplementedError, RuntimeError):
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _signum, _frame: loop.call_soon_threadsafe(stop))
        return False
    return True
