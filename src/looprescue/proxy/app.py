"""The proxy's HTTP layer: a Starlette app whose catch-all route is the proxy itself, which
relays each request or answers it through the rescue service.

``POST …/v1/messages`` (Anthropic Messages) and ``POST …/chat/completions`` (OpenAI Chat
Completions) for watched models go through the engine; every other request is relayed to the
upstream unchanged (method, path, query, headers, body), and so are upstream errors (status,
headers, body). A request whose body the proxy does not change is forwarded byte for byte.
Routes placed before the catch-all are the proxy's own endpoints; the app's router is the one
place requests are dispatched, under the proxy's own server (``server.py``) as under any
other ASGI server.

I/O policy: one pooled upstream transport per app; the handling of a request runs under its
reply's guard (``reply.py``), so a client's disconnect cancels it at once, with every upstream
request it has open; every upstream response is closed when its client response ends,
however it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..config import LoopRescueConfig
from ..exchange.upstream import (
    Transport,
    UpstreamError,
    UpstreamResponse,
    forward_headers,
    response_headers,
)
from ..rescue.attempt import LoopDetector
from ..rescue.engine import RescueStats
from ..rescue.events import EmitError
from ..wire import jsonfast
from ..wire.anthropic import AnthropicWire
from ..wire.base import Wire
from ..wire.registry import wire_for
from .driver import gateway_status
from .endpoints import own_routes
from .http1 import Http1Transport
from .reply import REPLY_EXTENSION, AsgiReply, ClientGone, Reply
from .service import Prepared, Rejected, RescueService
from .state import StateStore


@dataclass
class ProxyTotals:
    """Counters over all rescued responses since the app started."""

    responses: int = 0
    detections: int = 0
    rescues: int = 0
    cuts: int = 0
    pruned_chars: int = 0
    kept_loop_chars: int = 0
    leaked_loop_chars: int = 0
    history_removed_chars: int = 0
    upstream_cancelled: int = 0

    def add(self, stats: RescueStats) -> None:
        self.responses += 1
        self.detections += stats.detections
        self.rescues += stats.rescues
        self.cuts += stats.cuts
        self.pruned_chars += stats.pruned_chars
        self.kept_loop_chars += stats.kept_loop_chars
        self.leaked_loop_chars += stats.leaked_loop_chars
        self.history_removed_chars += stats.history_removed_chars


def create_app(
    config: LoopRescueConfig,
    upstream_url: str,
    *,
    transport: Transport | None = None,
    store: StateStore | None = None,
    detector_factory: Callable[[], LoopDetector] | None = None,
    metrics_registry: Any = None,
) -> Starlette:
    """The proxy as an ASGI app forwarding to ``upstream_url`` (scheme://host[:port][/base]).
    ``transport`` and ``store`` replace the default upstream client and in-process state;
    ``detector_factory`` the detector each response's engine uses; ``metrics_registry`` the
    prometheus-client registry counted into and served at ``/metrics`` (None: the default)."""
    proxy = Proxy(config, upstream_url, transport, store, detector_factory, metrics_registry)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await proxy.aclose()

    app = Starlette(
        routes=[
            *own_routes(metrics_registry),
            # every request no other route takes goes to the proxy (an ASGI app of its own)
            Route("/{path:path}", proxy, methods=list(PROXIED_METHODS)),
        ],
        lifespan=lifespan,
    )
    app.state.proxy = proxy
    app.state.totals = proxy.totals
    return app


def check_upstream_url(url: str) -> None:
    """Raise ValueError unless ``url`` is http(s)://host[:port][/path]."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"upstream URL must be http(s)://host[:port][/path], got {url!r}")


PROXIED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_JSON = {"content-type": "application/json"}


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """What the proxy uses of a client request (header names lowercased)."""

    method: str
    path: str  # decoded, for routing
    target: str  # path and query as the client sent them, for the upstream
    headers: list[tuple[str, str]]

    @classmethod
    def from_scope(cls, scope: Scope) -> ClientRequest:
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else scope["path"]
        query = scope.get("query_string", b"")
        target = f"{path}?{query.decode('latin-1')}" if query else path
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        return cls(scope["method"], scope["path"], target, headers)

    def header_map(self) -> dict[str, str]:
        """One value per name (the first)."""
        out: dict[str, str] = {}
        for name, value in self.headers:
            out.setdefault(name, value)
        return out


class Proxy:
    """The proxy's request handling, an ASGI app: served by the proxy's own server it writes
    to each request's :class:`~looprescue.proxy.reply.Reply` directly, under any other ASGI
    server through :class:`~looprescue.proxy.reply.AsgiReply`."""

    def __init__(
        self,
        config: LoopRescueConfig,
        upstream_url: str,
        transport: Transport | None = None,
        store: StateStore | None = None,
        detector_factory: Callable[[], LoopDetector] | None = None,
        metrics_registry: Any = None,
    ) -> None:
        check_upstream_url(upstream_url)
        self.config = config
        self.upstream = upstream_url.rstrip("/")
        self.service = RescueService(
            config, store, detector_factory=detector_factory, metrics_registry=metrics_registry
        )
        self.totals = ProxyTotals()
        self._transport = transport

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            # observe passes the upstream's bytes on as they come; the modes that hold text
            # back anyway judge a stream's reads together
            observe = self.config.mode == "observe"
            coalesce_ms = 0 if observe else self.config.proxy.coalesceMs
            self._transport = Http1Transport(self.config.proxy, coalesce_ms=coalesce_ms)
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None
        await self.service.aclose()

    def url_for(self, request: ClientRequest) -> str:
        return self.upstream + request.target

    # ------------------------------------------------------------------ dispatch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reply: Reply = scope.get("extensions", {}).get(REPLY_EXTENSION) or AsgiReply(
            scope, receive, send
        )
        try:
            raw = await reply.body()
        except ClientGone:
            # the client left mid-body: nobody to answer, nothing to send upstream
            await reply.whole(400, {}, b"")
            return
        await self.handle(ClientRequest.from_scope(scope), raw, reply)

    async def handle(self, request: ClientRequest, raw: bytes, reply: Reply) -> None:
        wire_class = wire_for(request.method, request.path)
        prepared = None
        if wire_class is not None:
            prepared = await self.service.judge(wire_class, request.header_map(), raw)
        if prepared is None:
            await reply.guard(self._relay(request, raw, reply))
        elif isinstance(prepared, Rejected):
            await reply.whole(400, _JSON, prepared.error_body())
        else:
            await reply.guard(self._exchange(request, raw, prepared, reply))

    # ------------------------------------------------------------------ relay

    async def _relay(self, request: ClientRequest, raw: bytes, reply: Reply) -> None:
        """The request upstream as it came, the answer back as it comes. A broken upstream
        breaks the client connection too: the relay adds nothing of its own to a body it
        passes through, and a clean end would pass a truncated body off as complete."""
        completed = False
        upstream = None
        try:
            try:
                upstream = await self.transport.open(
                    request.method,
                    self.url_for(request),
                    forward_headers(request.headers),
                    raw,
                    raw=True,
                )
            except UpstreamError as err:
                completed = True
                await _gateway_error(reply, AnthropicWire(), err)
                return
            await reply.start(upstream.status, response_headers(upstream.headers, decoded=False))
            if await _relay_body(upstream, reply):
                await reply.end()
            else:
                reply.abort()
                return
            completed = True
        finally:
            if upstream is not None:
                await upstream.aclose()
            if not completed:
                self.totals.upstream_cancelled += 1

    # ------------------------------------------------------------------ rescued routes

    async def _exchange(
        self, request: ClientRequest, raw: bytes, prepared: Prepared, reply: Reply
    ) -> None:
        rescue = await self.service.open(
            prepared,
            self.transport,
            self.url_for(request),
            forward_headers(request.headers),
            raw,
            {"path": request.path},
        )
        completed = False
        try:
            try:
                answer = await rescue.answer(reply.write_now)
            except UpstreamError as err:
                completed = True
                await _gateway_error(reply, prepared.wire, err)
                return
            if answer.chunks is None:
                completed = True
                await reply.whole(answer.status, answer.headers, answer.body)
                return
            await reply.start(answer.status, answer.headers)
            async with contextlib.aclosing(answer.chunks) as pieces:
                async for piece in pieces:
                    await reply.send(piece)
            await reply.end()
            completed = True
        finally:
            await self.service.finished(rescue)
            if not completed:
                self.totals.upstream_cancelled += 1
            if rescue.engine.started:
                self.totals.add(rescue.engine.stats)


async def _relay_body(upstream: UpstreamResponse, reply: Reply) -> bool:
    """The upstream body to the client as it comes: written from the upstream read itself
    when the server allows it. False when the upstream broke."""
    write_now = reply.write_now
    pump = getattr(upstream, "pump", None) if write_now is not None else None
    while True:
        if pump is not None:
            item = await pump(lambda piece: None if piece and write_now(piece) else piece)
        else:
            try:
                item = await upstream.next_chunk()
            except UpstreamError as err:
                item = err
        if isinstance(item, UpstreamError):
            return False
        if not item:
            return True
        await reply.send(item)  # the client lagged (or no pump): wait for it


async def _gateway_error(reply: Reply, wire: Wire, err: UpstreamError) -> None:
    body = jsonfast.dumps(wire.error_body(EmitError("transport", err.message)))
    await reply.whole(gateway_status(err), _JSON, body)
