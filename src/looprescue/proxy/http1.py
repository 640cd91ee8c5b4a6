"""A lean HTTP/1.1 client for the upstream: asyncio protocol + httptools' C parser + a pool.

Why not httpx here: per streamed chunk, httpx/httpcore run a pure-Python HTTP parser and, per
request, scan the whole pool; behind 200 concurrent streams that was most of the proxy's CPU
(``make bench``, ``bench_proxy_cpu``). This client does one parser call per network read,
hands over everything buffered in one piece, and keeps idle connections per origin in a LIFO
stack, so streamed responses that ended reuse their connection.

Scope: what the proxy needs from an upstream. HTTP/1.1 only (``http``/``https``), requests
with a known body length, responses chunked or sized or ended by close; gzip/deflate bodies
are decoded unless the caller wants them raw.

Real networks: ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (either case)
are honoured as curl and requests do: an ``http`` upstream is asked through the proxy with
the absolute URL as the request target, an ``https`` one through a CONNECT tunnel with TLS to
the upstream inside it (``Proxy-Authorization`` from the proxy URL's user and password). Done
here rather than by handing proxied requests to httpx: a tunnel is one request and a TLS
start on the same connection, and the stream then costs what a direct one does. HTTPS trusts
``proxy.caFile``, else ``REQUESTS_CA_BUNDLE``, else the system's CAs (and ``SSL_CERT_FILE``,
which OpenSSL reads itself); a client certificate is shown when configured. The pool holds
at most ``proxy.maxUpstreamConnections``; past it a request takes an idle connection's place
or waits for one.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import time
import urllib.request
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import httptools

from ..config import ProxyConfig
from ..exchange.upstream import UpstreamError

IDLE_EXPIRY_SECONDS = 2.0  # inside common server keep-alive timeouts (uvicorn's is 5 s)
HIGH_WATER = 1 << 20  # stop reading from a response whose client lags by this many bytes
_DECODED_ENCODINGS = "gzip, deflate"
T = TypeVar("T")

# urllib's NO_PROXY matcher: in every CPython, missing from typeshed's stubs (mypyc reads them)
_proxy_bypass: Callable[[str, Mapping[str, str]], bool] = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]


class _Connection(asyncio.Protocol):
    """One upstream connection; serves one response at a time."""

    def __init__(self, pool: Http1Transport, origin: tuple[str, str, int]) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.response: Http1Response | None = None
        self.closed = False
        self.idle_since = 0.0
        self.used = 0  # responses served (0: a fresh connection)

    # ----- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:
            self.close()  # bytes nobody asked for: this connection is not reusable
            return
        response.received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None:
            self.response.lost()
        self.pool.forget(self)

    def pause_writing(self) -> None:  # requests are small; nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # ----- use

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            self.pool.forget(self)


class Http1Response:
    """The response on one connection (see ``upstream.UpstreamResponse``)."""

    def __init__(
        self, connection: _Connection, idle_ms: int, raw: bool, method: str, coalesce_s: float = 0
    ) -> None:
        """``coalesce_s``: hand the body's bytes on (to the pump's feed, or a waiting
        :meth:`next_chunk`) at most this often (see ``ProxyConfig.coalesceMs``); 0: each read
        as it comes."""
        self._connection = connection
        self._idle_ms = idle_ms
        self._raw = raw
        self._head = method == "HEAD"
        self._parser = httptools.HttpResponseParser(self)
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        # pump(): the body goes to this callable from the read itself
        self._feed: Callable[[bytes | UpstreamError], Any] | None = None
        self._pumped: asyncio.Future[Any] | None = None
        self._loop = asyncio.get_running_loop()
        self._head_done: asyncio.Future[None] = self._loop.create_future()
        # a request whose caller left before the head has nobody to take its failure
        self._head_done.add_done_callback(_taken)
        self._complete = False
        self._keep_alive = False
        self._error: UpstreamError | None = None
        self._decoder: zlib._Decompress | None = None  # type: ignore[name-defined]
        self._paused = False
        self._got_bytes = False
        self._last_data = self._loop.time()
        # the stall check: armed by a wait, left running across waits (re-armed only when it
        # fires), cancelled when the response ends
        self._timer: asyncio.TimerHandle | None = None
        self._coalesce_s = coalesce_s
        self._handed = -coalesce_s  # when bytes were last handed on (loop time)
        self._coalesce_timer: asyncio.TimerHandle | None = None
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self._interim = False  # inside a 1xx interim response

    # ----- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1")
        if key:
            self.headers.append((key, value.decode("latin-1")))
        elif self.headers:  # a header value split across reads
            last_key, last_value = self.headers[-1]
            self.headers[-1] = (last_key, last_value + value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # An interim response (100 Continue, 103 Early Hints; RFC 9110 §15.2): no body,
            # and the response to the request follows on the same connection.
            self.headers = []
            self._interim = True
            return
        self.status = status
        if self._head:
            self._complete = True  # no body follows; the parser cannot know (not reused)
        if not self._raw:
            for key, value in self.headers:
                if key.lower() == "content-encoding":
                    encoding = value.strip().lower()
                    if encoding in ("gzip", "x-gzip"):
                        self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    elif encoding == "deflate":
                        self._decoder = zlib.decompressobj()
        if not self._head_done.done():
            self._head_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._complete = True
        self._stop_timer()
        # asked here: the parser forgets the message's connection flags once it is over
        self._keep_alive = self._parser.should_keep_alive()

    # ----- fed by the connection

    def received(self, data: bytes) -> None:
        self._got_bytes = True
        self._last_data = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(UpstreamError("broken", f"upstream sent invalid HTTP: {err}"))
            self._connection.close()
            return
        if self._buffered > HIGH_WATER and not self._paused and self._connection.transport:
            self._paused = True
            self._connection.transport.pause_reading()
        self._wake()

    def lost(self) -> None:
        self._stop_timer()
        if self._complete:
            return
        if self._head and self.status:
            self._complete = True
        elif self.status and not self._chunked_or_sized():
            self._complete = True  # a body without a length ends with the connection
        else:
            self._fail(UpstreamError("broken", "upstream connection broke: closed mid-response"))
        self._wake()
        if not self._head_done.done():
            self._head_done.set_exception(
                UpstreamError("broken", "upstream connection broke before the response head")
            )

    def _chunked_or_sized(self) -> bool:
        for key, value in self.headers:
            lowered = key.lower()
            if lowered == "content-length" or (
                lowered == "transfer-encoding" and "chunked" in value.lower()
            ):
                return True
        return False

    def _fail(self, error: UpstreamError) -> None:
        if self._error is None:
            self._error = error
        if not self._head_done.done():
            self._head_done.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._coalesce_s and self._error is None and not self._complete:
            # bytes soon after the last hand-off wait for the next one: the exchange parses,
            # judges and releases them in one go (its decisions do not depend on how the
            # bytes are split), so a stream costs CPU per hand-off, not per read
            wait = self._handed + self._coalesce_s - self._loop.time()
            if wait > 0:
                if self._coalesce_timer is None:
                    self._coalesce_timer = self._loop.call_later(wait, self._hand_on)
                return
        self._hand_on()

    def _hand_on(self) -> None:
        """What the body has goes to the pump's feed, or wakes the caller waiting for it."""
        if self._coalesce_timer is not None:
            self._coalesce_timer.cancel()
            self._coalesce_timer = None
        if self._feed is not None:
            self._pump()
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pump(self) -> None:
        feed, pumped = self._feed, self._pumped
        assert feed is not None and pumped is not None
        if pumped.done():
            # the pump's caller was cancelled (its client left) and has not run its cleanup
            # yet: the bytes stay buffered for aclose, nobody is fed
            self._feed = None
            return
        while (item := self._take()) is not None:
            try:
                result = feed(item)
            except BaseException as err:  # the pump's caller gets it, not the event loop
                result = err
            if result is None:
                continue
            self._feed = None
            if isinstance(result, BaseException):
                pumped.set_exception(result)
            else:
                pumped.set_result(result)
            return

    def _take(self) -> bytes | UpstreamError | None:
        """What the body has for the caller now: buffered bytes, else the failure, else
        ``b""`` once it ended; None when it has to wait."""
        chunks = self._chunks
        if not chunks:
            if self._error is not None:
                return self._error
            if self._complete:
                return self._flush_decoder()
            return None
        data = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._buffered = 0
        self._handed = self._loop.time()
        if self._paused and self._connection.transport is not None:
            self._paused = False
            self._connection.transport.resume_reading()
        if self._decoder is not None:
            try:
                data = self._decoder.decompress(data)
            except zlib.error as err:
                self._error = UpstreamError("broken", f"upstream body does not decode: {err}")
                return self._error
        return data

    # ----- used by the caller

    async def next_chunk(self) -> bytes:
        while (item := self._take()) is None:
            await self._wait()
        if isinstance(item, UpstreamError):
            raise item
        return item

    async def pump(self, feed: Callable[[bytes | UpstreamError], T | None]) -> T:
        """Hand the body to ``feed`` piece by piece as :meth:`next_chunk` would return it
        (``b""`` at its end, an :class:`UpstreamError` when it failed), called from the
        connection's read itself, with no task switch per piece, until ``feed`` returns
        something other than None: that is returned. ``feed`` must return something for the
        end and for a failure."""
        while (item := self._take()) is not None:
            result = feed(item)
            if result is not None:
                return result
        self._pumped = pumped = self._loop.create_future()
        self._feed = feed
        self._arm_stall_check()
        try:
            return await pumped
        finally:
            self._feed = None
            self._pumped = None

    def _flush_decoder(self) -> bytes:
        if self._decoder is None:
            return b""
        decoder, self._decoder = self._decoder, None
        return decoder.flush()

    async def _wait(self) -> None:
        self._waiter = waiter = self._loop.create_future()
        self._arm_stall_check()
        try:
            await waiter
        finally:
            self._waiter = None

    def _arm_stall_check(self) -> None:
        if self._timer is None:
            remaining = self._last_data + self._idle_ms / 1000 - self._loop.time()
            self._timer = self._loop.call_later(max(0.0, remaining), self._check_idle)

    def _check_idle(self) -> None:
        self._timer = None
        waiter = self._waiter or self._pumped
        if waiter is None or waiter.done():
            return  # nobody waits now: the next wait arms the check again
        remaining = self._last_data + self._idle_ms / 1000 - self._loop.time()
        if remaining > 0.001:
            # bytes came meanwhile: check again when the limit would run out
            self._timer = self._loop.call_later(remaining, self._check_idle)
            return
        self._fail(UpstreamError("stall", f"upstream sent nothing for {self._idle_ms} ms"))
        self._connection.close()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._coalesce_timer is not None:
            self._coalesce_timer.cancel()
            self._coalesce_timer = None

    async def read(self) -> bytes:
        pieces = []
        while chunk := await self.next_chunk():
            pieces.append(chunk)
        return b"".join(pieces)

    async def aclose(self) -> None:
        self._stop_timer()
        connection = self._connection
        if connection.response is not self:
            return
        connection.response = None
        reusable = not self._head and self._keep_alive
        if self._complete and self._error is None and reusable:
            self.pool.release(connection)
        else:
            connection.close()

    @property
    def pool(self) -> Http1Transport:
        return self._connection.pool


def _unless_cancelled(connection: _Connection) -> None:
    """Close ``connection`` and raise CancelledError when the task was cancelled while a
    ``wait_for`` inside it finished: before Python 3.12, ``wait_for`` then returns the result
    and the cancellation is lost, and a request whose client left would go on."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    if cancelling is not None and cancelling():
        connection.close()
        raise asyncio.CancelledError


def _taken(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


@dataclass(frozen=True)
class ProxyRoute:
    """The forward proxy an origin is reached through."""

    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization value, from the URL's credentials

    @classmethod
    def parse(cls, url: str) -> ProxyRoute:
        if "://" not in url:
            url = "http://" + url  # curl's reading of a bare host:port
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise UpstreamError(
                "connect", f"upstream unreachable: proxy {parts.scheme}:// is not supported"
            )
        authorization = None
        if parts.username is not None:
            user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(user.encode()).decode("ascii")
        return cls(parts.hostname, parts.port or 80, authorization)


class _Tunnel(asyncio.Protocol):
    """Reads a forward proxy's answer to CONNECT (its head; nothing else comes before TLS)."""

    def __init__(self) -> None:
        self.head: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._received = b""

    def data_received(self, data: bytes) -> None:
        self._received += data
        if b"\r\n\r\n" in self._received and not self.head.done():
            self.head.set_result(self._received)
        elif len(self._received) > 65536 and not self.head.done():
            self.head.set_exception(UpstreamError("connect", "proxy answered CONNECT oddly"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.head.done():
            self.head.set_exception(
                UpstreamError("connect", "upstream unreachable: proxy closed the tunnel")
            )


def _host_header(host: str, port: int, scheme: str) -> str:
    """``host[:port]``, an IPv6 address in brackets (RFC 9110 §7.2)."""
    name = f"[{host}]" if ":" in host else host
    return name if port == (443 if scheme == "https" else 80) else f"{name}:{port}"


class Http1Transport:
    """Pooled upstream connections (see ``upstream.Transport``)."""

    def __init__(
        self,
        config: ProxyConfig,
        ssl_context: ssl.SSLContext | None = None,
        *,
        coalesce_ms: int | None = None,
    ) -> None:
        """``ssl_context``: how HTTPS upstreams are verified (default: the system's CAs);
        ``coalesce_ms``: how often a streamed body's reads go on (None: ``config.coalesceMs``)."""
        self._idle_ms = config.upstreamIdleTimeoutMs
        self._coalesce_s = (config.coalesceMs if coalesce_ms is None else coalesce_ms) / 1000
        self._connect_s = config.connectTimeoutMs / 1000
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._ssl = ssl_context
        self._config = config
        self._sweep: asyncio.TimerHandle | None = None
        # the pool's bound: connections open or being opened, and the requests waiting
        self._max = config.maxUpstreamConnections
        self._held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        # read once: the environment of the process that starts the proxy
        self._proxies = urllib.request.getproxies_environment()
        self._routes: dict[tuple[str, str, int], ProxyRoute | None] = {}

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            config = self._config
            cafile = config.caFile or os.environ.get("REQUESTS_CA_BUNDLE") or None
            try:
                context = ssl.create_default_context(cafile=cafile)
                if config.clientCert:
                    context.load_cert_chain(config.clientCert, config.clientKey)
            except (OSError, ssl.SSLError) as err:
                raise UpstreamError(
                    "connect", f"upstream unreachable: TLS settings: {err}"
                ) from None
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    def route(self, origin: tuple[str, str, int]) -> ProxyRoute | None:
        """The forward proxy for ``origin`` from the environment, None for a direct one."""
        if origin not in self._routes:
            scheme, host, port = origin
            url = self._proxies.get(scheme) or self._proxies.get("all")
            bypass = url and _proxy_bypass(
                _host_header(host, port, "") if ":" in host else f"{host}:{port}", self._proxies
            )
            self._routes[origin] = ProxyRoute.parse(url) if url and not bypass else None
        return self._routes[origin]

    async def _connect(self, origin: tuple[str, str, int]) -> _Connection:
        """A new connection to ``origin``, or a pooled one that came free while waiting for
        a place."""
        pooled = await self._take_place(origin)
        if pooled is not None:
            return pooled
        try:
            connection = await self._open_connection(origin)
        except BaseException:
            self._give_place()
            raise
        self._all.add(connection)
        _unless_cancelled(connection)
        return connection

    async def _open_connection(self, origin: tuple[str, str, int]) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        connection = _Connection(self, origin)
        route = self.route(origin)
        tls = self._ssl_context() if scheme == "https" else None
        try:
            if route is None:
                await asyncio.wait_for(
                    loop.create_connection(
                        lambda: connection,
                        host,
                        port,
                        ssl=tls,
                        server_hostname=host if tls else None,
                    ),
                    self._connect_s,
                )
            elif tls is None:  # plain HTTP through the proxy: absolute-form targets
                await asyncio.wait_for(
                    loop.create_connection(lambda: connection, route.host, route.port),
                    self._connect_s,
                )
            else:
                await asyncio.wait_for(
                    self._tunnel(connection, route, host, port, tls), self._connect_s
                )
        except asyncio.TimeoutError:
            raise UpstreamError(
                "connect_timeout", f"upstream unreachable: ConnectTimeout: {host}:{port}"
            ) from None
        except (OSError, ssl.SSLError) as err:
            raise UpstreamError("connect", f"upstream unreachable: ConnectError: {err}") from None
        return connection

    async def _tunnel(
        self, connection: _Connection, route: ProxyRoute, host: str, port: int, tls: Any
    ) -> None:
        """A CONNECT tunnel through ``route`` to host:port, then TLS inside it."""
        loop = asyncio.get_running_loop()
        tunnel = _Tunnel()
        raw, _ = await loop.create_connection(lambda: tunnel, route.host, route.port)
        try:
            authority = _host_header(host, port, "")
            lines = [f"CONNECT {authority} HTTP/1.1", f"host: {authority}"]
            if route.authorization:
                lines.append(f"proxy-authorization: {route.authorization}")
            raw.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head = await tunnel.head
            status_line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
            parts = status_line.split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or parts[1] != "200":
                raise UpstreamError(
                    "connect", f"upstream unreachable: proxy refused CONNECT: {status_line[:80]}"
                )
            secure = await loop.start_tls(raw, connection, tls, server_hostname=host)
        except BaseException:
            raw.close()
            raise
        if secure is None:  # pragma: no cover - only when the transport closed meanwhile
            raise UpstreamError("connect", "upstream unreachable: the tunnel closed")
        connection.connection_made(secure)

    # ----- the pool's bound

    async def _take_place(self, origin: tuple[str, str, int]) -> _Connection | None:
        """Wait for a place among ``maxUpstreamConnections``: an idle connection to
        ``origin`` is taken as it is (returned), one to another origin gives its place up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_s
        while self._held >= self._max:
            pooled = self._idle_connection(origin)
            if pooled is not None:
                return pooled
            idle = [c for stack in self._idle.values() for c in stack]
            if idle:
                min(idle, key=lambda c: c.idle_since).close()
                continue
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise UpstreamError(
                    "connect_timeout",
                    f"upstream unreachable: all {self._max} upstream connections busy",
                ) from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._held += 1
        return None

    def _give_place(self) -> None:
        self._held -= 1
        self._wake_waiter()

    def _wake_waiter(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        stack = self._idle.get(origin)
        now = time.monotonic()
        while stack:
            connection = stack.pop()
            if not connection.closed and now - connection.idle_since < IDLE_EXPIRY_SECONDS:
                return connection
            connection.close()
        return None

    def release(self, connection: _Connection) -> None:
        if connection.closed:
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.origin, []).append(connection)
        self._wake_waiter()  # a request waiting for a place may take this one
        if self._sweep is None:
            loop = asyncio.get_running_loop()
            self._sweep = loop.call_later(IDLE_EXPIRY_SECONDS, self._close_expired)

    def _close_expired(self) -> None:
        """Close idle connections past their expiry (the pool holds no socket for long)."""
        self._sweep = None
        now = time.monotonic()
        for stack in self._idle.values():
            for connection in [c for c in stack if now - c.idle_since >= IDLE_EXPIRY_SECONDS]:
                connection.close()  # removes it from the stack
        if any(self._idle.values()):
            loop = asyncio.get_running_loop()
            self._sweep = loop.call_later(IDLE_EXPIRY_SECONDS / 2, self._close_expired)

    def forget(self, connection: _Connection) -> None:
        if connection in self._all:
            self._all.discard(connection)
            self._give_place()
        stack = self._idle.get(connection.origin)
        if stack and connection in stack:
            stack.remove(connection)

    async def open(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        *,
        raw: bool,
    ) -> Http1Response:
        parts = urlsplit(url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        origin = (scheme, host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = _host_header(host, port, scheme)
        route = self.route(origin)
        if route is not None and scheme == "http":
            # through a forward proxy, a plain request names its whole URL (RFC 9112 §3.2.2)
            target = f"http://{authority}{target}"
        lines = [f"{method} {target} HTTP/1.1", f"host: {authority}"]
        if route is not None and scheme == "http" and route.authorization:
            lines.append(f"proxy-authorization: {route.authorization}")
        for key, value in headers:
            lowered = key.lower()
            if lowered == "accept-encoding" and not raw:
                continue
            lines.append(f"{key}: {value}")
        if not raw:
            lines.append(f"accept-encoding: {_DECODED_ENCODINGS}")
        if content or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            lines.append(f"content-length: {len(content)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + content
        for _ in range(2):
            connection = self._idle_connection(origin)
            if connection is None:
                connection = await self._connect(origin)
            reused = connection.used > 0
            # a stream passed through untouched (raw) goes on read by read
            coalesce_s = 0 if raw else self._coalesce_s
            response = Http1Response(connection, self._idle_ms, raw, method, coalesce_s)
            connection.response = response
            connection.used += 1
            assert connection.transport is not None
            connection.transport.write(request)
            try:
                await asyncio.wait_for(asyncio.shield(response._head_done), self._idle_ms / 1000)
            except asyncio.TimeoutError:
                connection.close()
                raise UpstreamError(
                    "stall", f"upstream sent nothing for {self._idle_ms} ms"
                ) from None
            except UpstreamError:
                connection.close()
                if reused and not response._got_bytes:
                    continue  # the server closed the idle connection as we reused it: retry
                raise
            except asyncio.CancelledError:
                connection.close()
                raise
            _unless_cancelled(connection)
            return response
        raise UpstreamError("broken", "upstream connection broke before the response head")

    def busy_connections(self) -> int:
        idle = {id(c) for stack in self._idle.values() for c in stack}
        return sum(1 for c in self._all if id(c) not in idle and not c.closed)

    async def aclose(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connection in list(self._all):
            connection.close()
        self._idle.clear()
