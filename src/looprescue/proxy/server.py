"""The proxy's own HTTP/1.1 server: an asyncio protocol per client connection around
httptools' request parser, serving an ASGI app.

Why not uvicorn: passing a stream through uvicorn and Starlette untouched cost the proxy about
as much CPU again as a plain byte relay (``make bench``, ``bench_proxy_cpu``): per streamed
piece an ASGI message, several middleware layers and a flow-control check, per response a
task group. Here the app still routes every request (its own routes, middleware and
lifespan work as under any ASGI server), and each request's scope carries a
:class:`~looprescue.proxy.reply.Reply` (extension ``looprescue.reply``) through which the
proxy writes a streamed piece straight to the connection's transport.

What it does: keep-alive and pipelined requests answered in order; request bodies by length
or chunked, ``Expect: 100-continue``; responses by length, chunked, or (to an HTTP/1.0
client) ended by the close (none for HEAD, 204, 304); a client that disconnects cancels the
work guarding its request at once; writes wait while the client's socket buffer is full. On
SIGINT/SIGTERM it stops accepting, lets the requests in flight finish for the grace period,
then cancels them and runs the app's lifespan shutdown.

Every resource a client can hold is bounded (:class:`Limits`, the ``proxy`` config keys), and
going past a bound gets the protocol's answer, then the connection closes: a head that is
slow (408) or too large (414 for the URL, 431), a body that is too large (413) or stops
coming (408), a request line or target the server cannot serve (400, 405 for CONNECT), more
connections than the limit (the longest-idle one is closed to make room, else 503).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import resource
import signal
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import httptools

from ..config import ProxyConfig
from .reply import REPLY_EXTENSION, Headers, header_pairs, until_gone

log = logging.getLogger("looprescue.proxy")
access = logging.getLogger("looprescue.access")

# Requests a client may pipeline behind the one being answered before its reads pause.
MAX_PIPELINED = 16
# File descriptors kept for everything but client connections (upstream, state, logs).
RESERVED_FILES = 32
# How long a refused client may go on sending (dropped) before the connection closes.
LINGER_SECONDS = 2.0
# At most this much of a request target goes into a log line.
LOGGED_TARGET_CHARS = 120
_NO_BODY_STATUSES = frozenset({204, 304})
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_ALLOWED_METHODS = "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"
_STATUS_LINES: dict[int, bytes] = {}

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    """What one client may hold (seconds and bytes; see ``ProxyConfig`` for each key)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive: float = 5.0
    send_timeout: float = 300.0
    max_header_bytes: int = 64 << 10
    max_headers: int = 100
    max_body_bytes: int = 32 << 20
    max_connections: int = 1000
    graceful: float = 30.0
    access_log: bool = False

    @classmethod
    def from_config(cls, config: ProxyConfig) -> Limits:
        return cls(
            header_timeout=config.headerTimeoutMs / 1000,
            body_timeout=config.bodyTimeoutMs / 1000,
            keepalive=config.keepAliveTimeoutMs / 1000,
            send_timeout=config.sendTimeoutMs / 1000,
            max_header_bytes=config.maxHeaderBytes,
            max_headers=config.maxHeaders,
            max_body_bytes=config.maxBodyBytes,
            max_connections=config.maxConnections,
            graceful=config.shutdownGraceMs / 1000,
            access_log=config.accessLog,
        )


def connection_cap(wanted: int) -> int:
    """``wanted``, kept under half the process's open-file limit: each client connection may
    need an upstream one too, and a server out of descriptors fails every client."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - no such limit on this platform
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - RESERVED_FILES) // 2))


class _Refused(Exception):
    """A request the server answers itself: its status and a short reason for the log."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _short(target: bytes) -> str:
    text = target[:LOGGED_TARGET_CHARS].decode("latin-1")
    text = text.encode("unicode_escape").decode("ascii")  # no control chars in a log line
    return text + ("…" if len(target) > LOGGED_TARGET_CHARS else "")


def _plain(status: int, text: str, extra: bytes = b"") -> bytes:
    """A complete response that closes the connection."""
    body = text.encode()
    return (
        _status_line(status)
        + b"content-type: text/plain; charset=utf-8\r\n"
        + extra
        + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        + body
    )


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
        "status",
    )

    def __init__(self, conn: HttpConnection, request: _Request) -> None:
        self._conn = conn
        self._request = request
        self._guarded: asyncio.Future[None] | None = None
        self._disconnect: asyncio.Future[None] | None = None
        self._body_sent = False
        self._length: int | None = None  # bytes the head announced still to come
        self.started = False
        self.status = 0  # none sent yet
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
        self.status = status
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
        old_client = self._request.http_version == "1.0"
        if length is not None:
            lines.append(b"content-length: %d\r\n" % length)
            self._length = 0 if bodiless else length
        elif bodiless:
            self._length = 0
        elif old_client:
            # HTTP/1.0 has no chunked coding: the body ends where the connection does
            self.keep_alive = False
        else:
            self.chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        if not self.keep_alive or self._conn.closing:
            self.keep_alive = False
            lines.append(b"connection: close\r\n")
        elif old_client:
            lines.append(b"connection: keep-alive\r\n")  # HTTP/1.0 closes unless told
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
        self.limits = server.limits
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.paused = False  # the client's socket buffer is full
        self.closing = False
        self.lost = False
        self._drain: asyncio.Future[None] | None = None
        self._pending: deque[_Request] = deque()
        self._current: Response | None = None
        self._task: asyncio.Task[None] | None = None
        # One timer at a time: keep-alive idle, the head's deadline, or the body's silence.
        self._timer: asyncio.TimerHandle | None = None
        self._reading_paused = False
        self._in_message = False
        self._in_head = False
        self._refused: _Refused | None = None
        self._discarding = False
        # the request being parsed
        self._url: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._head_bytes = 0  # of the head being read, as the parser reported it
        self._head_read = 0  # bytes read while the head was incomplete
        self._body_bytes = 0
        self._last_read = 0.0  # loop time of the body's latest read
        self._keep_alive = True
        self._server_addr: Any = None
        self._client_addr: Any = None

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        server = self.server
        if len(server.connections) >= server.max_connections and not server.make_room():
            # Refused politely: a 503 the client can retry on, then the descriptor is freed.
            server.refused += 1
            transport.write(_plain(503, "Too many connections.", b"retry-after: 1\r\n"))  # type: ignore[attr-defined]
            transport.close()
            self.lost = self.closing = self._discarding = True
            return
        self._server_addr = _address(transport.get_extra_info("sockname"))
        self._client_addr = _address(transport.get_extra_info("peername"))
        server.connections.add(self)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return  # refused and closing: what else comes is not read
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no protocol upgrades here (CONNECT, Upgrade:): the request is answered as
            # plain HTTP, then the connection is closed
            self._keep_alive = False
            if self._in_message:
                self.on_message_complete()
            return
        except httptools.HttpParserError as err:
            refused = self._refused or _Refused(400, f"invalid HTTP: {err}")
            self._refuse(refused)
            return
        if self._in_head:
            # a URL over the limit is refused as it is parsed (414); what gets here is a head
            # whose fields grow past it before one of them is whole
            self._head_read += len(data)
            if self._head_read > self.limits.max_header_bytes:
                self._refuse(_Refused(431, f"head over {self.limits.max_header_bytes} bytes"))
        elif self._in_message:
            self._last_read = self.server.loop_time()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.closing = True
        self.server.forget(self)
        self._cancel_timer()
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
        self._in_head = True
        self._url = []
        self._headers = []
        self._body = []
        self._head_bytes = 0
        self._head_read = 0
        self._body_bytes = 0
        self.server.idle.pop(self, None)
        self._set_timer(self.limits.header_timeout, self._head_expired)

    def on_url(self, url: bytes) -> None:
        self._url.append(url)
        self._head_bytes += len(url)
        if self._head_bytes > self.limits.max_header_bytes:
            self._stop(_Refused(414, f"URL over {self.limits.max_header_bytes} bytes"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            # a trailer field of a chunked body: never merged into the header section (RFC
            # 9110 §6.5.1); the request goes upstream with a length, so it is dropped
            self._body_bytes += len(name) + len(value) + 4
            if self._body_bytes > self.limits.max_body_bytes:
                self._stop(_Refused(413, f"body over {self.limits.max_body_bytes} bytes"))
            return
        if value and value[-1] in (32, 9):
            value = value.rstrip(b" \t")  # RFC 9110 §5.5: trailing whitespace is no part of it
        self._headers.append((name.lower(), value))
        self._head_bytes += len(name) + len(value) + 4
        if len(self._headers) > self.limits.max_headers:
            self._stop(_Refused(431, f"over {self.limits.max_headers} header fields"))
        if self._head_bytes > self.limits.max_header_bytes:
            self._stop(_Refused(431, f"head over {self.limits.max_header_bytes} bytes"))

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._keep_alive = self.parser.should_keep_alive()
        expects = has_body = False
        hosts = 0
        for name, value in self._headers:
            if name == b"host":
                hosts += 1
            elif name == b"content-length":
                # the parser has checked the value: digits only, one length
                length = int(value)
                has_body = length > 0
                if length > self.limits.max_body_bytes:
                    self._stop(_Refused(413, f"body over {self.limits.max_body_bytes} bytes"))
            elif name == b"transfer-encoding":
                has_body = True
            elif name == b"expect" and value.lower() == b"100-continue":
                expects = True
        version = self.parser.get_http_version()
        if version not in ("1.1", "1.0"):
            # HTTP/0.9 (no version at all) and 2.0 over this wire are not HTTP/1.1's
            self._stop(_Refused(400, f"HTTP version {version}"))
        if hosts != 1 and (hosts or version != "1.0"):
            # RFC 9112 §3.2: an HTTP/1.1 request names its host once, any request at most once
            self._stop(_Refused(400, f"{hosts} Host header fields"))
        if has_body:
            self._last_read = self.server.loop_time()
            self._set_timer(self.limits.body_timeout, self._body_silent)
        else:
            self._cancel_timer()
        if expects and self._current is None and not self._pending and self.transport:
            self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self.limits.max_body_bytes:
            self._stop(_Refused(413, f"body over {self.limits.max_body_bytes} bytes"))
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_message = False
        self._in_head = False
        self._cancel_timer()
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        request = _Request(
            self.parser.get_method().decode("ascii", "replace"),
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

    def _stop(self, refused: _Refused) -> None:
        """Stop parsing from inside a callback: the parser raises, ``data_received`` answers."""
        self._refused = refused
        raise refused

    # ------------------------------------------------------------------ refusals

    def _refuse(self, refused: _Refused) -> None:
        """Answer a request the server cannot serve with ``refused``'s status, then close."""
        target = _short(b"".join(self._url))
        try:
            method = self.parser.get_method().decode("ascii", "replace") if self._url else "-"
        except httptools.HttpParserError:
            method = "-"
        log.info(
            "refused %s %s from %s: %d %s",
            method,
            target or "-",
            _peer(self._client_addr),
            refused.status,
            refused.reason,
        )
        self._in_message = self._in_head = False
        self._discarding = True
        self._url, self._headers, self._body = [], [], []
        self._pending.clear()
        if self._current is None:
            self.write(_plain(refused.status, HTTPStatus(refused.status).phrase + "."))
            self._linger()
        else:
            # a pipelined request went wrong: the response in flight finishes, then the close
            self.closing = True
            self._cancel_timer()
            if self.transport is not None:
                self.transport.pause_reading()

    def _linger(self) -> None:
        """Close after an answer the client may still be sending into: send the answer and
        our end of the stream, read and drop what still comes for a moment, then close.
        Closing at once with unread bytes makes the kernel send a reset, and the client may
        lose the answer."""
        self.closing = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if not transport.can_write_eof():
            self.close()
            return
        transport.write_eof()
        self._set_timer(LINGER_SECONDS, self.close)

    def _head_expired(self) -> None:
        self._timer = None
        if self._in_head:
            self._refuse(_Refused(408, f"head not whole after {self.limits.header_timeout:g} s"))

    def _body_silent(self) -> None:
        self._timer = None
        if not self._in_message or self._in_head:
            return
        quiet = self.server.loop_time() - self._last_read
        remaining = self.limits.body_timeout - quiet
        if remaining > 0.001:  # it read meanwhile: look again when the limit would run out
            self._set_timer(remaining, self._body_silent)
            return
        self._refuse(_Refused(408, f"body silent for {self.limits.body_timeout:g} s"))

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
        if not self.limits.access_log:
            await self._answer(request, response)
            return
        started = self.server.loop_time()
        try:
            await self._answer(request, response)
        finally:
            self._log_access(request, response, started)

    def _log_access(self, request: _Request, response: Response, started: float) -> None:
        if response.complete:
            outcome = "complete"
        elif response.gone:
            outcome = "client gone"
        else:
            outcome = "broken"
        fields = {
            "client": _peer(self._client_addr),
            "method": request.method,
            "target": _short(request.url),
            "status": response.status,
            "ms": int((self.server.loop_time() - started) * 1000),
            "outcome": outcome,
        }
        access.info(
            '%(client)s "%(method)s %(target)s" %(status)d %(ms)d ms %(outcome)s',
            fields,
            extra={"event": "request", "fields": fields},
        )

    async def _answer(self, request: _Request, response: Response) -> None:
        try:
            scope = self._scope(request, response)
        except _Refused as refused:
            log.info(
                "refused %s %s from %s: %d %s",
                request.method,
                _short(request.url),
                _peer(self._client_addr),
                refused.status,
                refused.reason,
            )
            response.keep_alive = False
            headers = [("content-type", "text/plain; charset=utf-8")]
            if refused.status == 405:
                headers.append(("allow", _ALLOWED_METHODS))
            body = (HTTPStatus(refused.status).phrase + ".").encode()
            await response.whole(refused.status, headers, body)
            return
        app_error: BaseException | None = None
        try:
            await self.server.app(scope, response.receive, response.send_message)
        except asyncio.CancelledError:
            if not response.complete:
                self.close()
            raise
        except BaseException as err:  # any app failure ends this response only
            app_error = err
        if app_error is not None and not response.gone:
            target = _short(request.url)
            log.error("error answering %s %s", request.method, target, exc_info=app_error)
        if response.complete:
            return
        if not response.started and not response.gone:
            plain = [("content-type", "text/plain; charset=utf-8")]
            await response.whole(500, plain, b"Internal Server Error")
        else:
            self.close()  # a started response that cannot complete: the client sees the break

    def _scope(self, request: _Request, response: Response) -> dict[str, Any]:
        if request.method == "CONNECT":
            raise _Refused(405, "CONNECT is not served: this is no forward proxy")
        target = request.url
        if target == b"*" and request.method == "OPTIONS":
            raw_path, query = b"*", b""
        elif target.startswith(b"/") or target[:7].lower() in (b"http://", b"https:/"):
            try:
                url = httptools.parse_url(target)
            except httptools.HttpParserInvalidURLError:
                raise _Refused(400, "request target does not parse") from None
            raw_path, query = url.path or b"/", url.query or b""
        else:
            raise _Refused(400, "request target is neither a path nor an absolute URL")
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
            "query_string": query,
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
        elif not self._in_message:
            self._arm_idle()

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        if not self.lost and self.transport is not None:
            self.transport.write(data)

    async def drain(self) -> None:
        """Wait until the client takes bytes again; one that takes none for the send timeout
        is disconnected (its response sees the disconnect)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.send_timeout
        while self.paused and not self.lost:
            if self._drain is None or self._drain.done():
                self._drain = loop.create_future()
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.info(
                    "dropped %s: read nothing for %g s",
                    _peer(self._client_addr),
                    self.limits.send_timeout,
                )
                if self.transport is not None:
                    self.transport.abort()
                return
            await asyncio.wait({self._drain}, timeout=remaining)

    def close(self) -> None:
        self.closing = True
        self._cancel_timer()
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

    def _set_timer(self, seconds: float, callback: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.server.loop.call_later(seconds, callback)

    def _arm_idle(self) -> None:
        self.server.idle[self] = None
        self._set_timer(self.limits.keepalive, self._idle_expired)

    def _cancel_timer(self) -> None:
        self.server.idle.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _idle_expired(self) -> None:
        self._timer = None
        if self.idle:
            self.close()


def _address(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) >= 2:
        return (value[0], value[1])
    return None


def _peer(address: Any) -> str:
    if address is None:
        return "a local client"
    host, port = address
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class HttpServer:
    """Serves an ASGI app on listening sockets until :meth:`stop` (or SIGINT/SIGTERM)."""

    def __init__(
        self,
        app: App,
        limits: Limits | None = None,
        *,
        keepalive_seconds: float | None = None,
        graceful_seconds: float | None = None,
    ) -> None:
        """``limits``: what a client may hold (default: the config's defaults);
        ``keepalive_seconds`` and ``graceful_seconds`` replace two of them."""
        limits = limits or Limits()
        if keepalive_seconds is not None:
            limits = replace(limits, keepalive=keepalive_seconds)
        if graceful_seconds is not None:
            limits = replace(limits, graceful=graceful_seconds)
        self.app = app
        self.limits = limits
        self.max_connections = connection_cap(limits.max_connections)
        self.clock = _Clock()
        self.connections: set[HttpConnection] = set()
        # keep-alive connections with no request under way, the longest idle first
        self.idle: dict[HttpConnection, None] = {}
        self.refused = 0  # connections turned away at the limit
        self.state: dict[str, Any] = {}
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the server is not serving"
        return self._loop

    def loop_time(self) -> float:
        return self.loop.time()

    def forget(self, conn: HttpConnection) -> None:
        self.connections.discard(conn)
        self.idle.pop(conn, None)

    def make_room(self) -> bool:
        """Close the longest-idle keep-alive connection for a newcomer; False when every
        connection is busy."""
        for conn in self.idle:
            conn.close()  # leaves ``idle`` through its timer's cancel
            self.connections.discard(conn)
            return True
        return False

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def run(self, sockets: list[socket.socket]) -> None:
        """Serve in a new event loop (uvloop's when installed) until stopped."""
        # Choose the loop first and serve outside the except clause: compiled, an exception
        # handled there stays the current one for as long as the server runs.
        try:
            import uvloop

            run: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
        except ImportError:  # no uvloop on Windows, or where it did not build
            run = asyncio.run
        run(self.serve(sockets))

    async def serve(self, sockets: list[socket.socket], *, signals: bool = True) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self.max_connections < self.limits.max_connections:
            log.warning(
                "serving at most %d connections: the open-file limit allows no more",
                self.max_connections,
            )
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
            deadline = loop.time() + self.limits.graceful
            if self.connections:
                log.info(
                    "stopping: %d connection(s) finishing, for at most %g s",
                    len(self.connections),
                    self.limits.graceful,
                )
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
