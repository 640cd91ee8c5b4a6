"""The proxy's HTTP layer: a Starlette app that routes each request to the relay or to an
exchange with the rescue engine.

``POST …/v1/messages`` (Anthropic Messages) and ``POST …/chat/completions`` (OpenAI Chat
Completions) for watched models go through the engine; every other request is relayed to the
upstream unchanged (method, path, query, headers, body), and so are upstream errors (status,
headers, body). A request whose body the proxy does not change is forwarded byte for byte.

I/O policy: one pooled upstream transport per app; while the proxy waits for an upstream
answer it watches for the client's disconnect, and a streaming response (Starlette's) stops at
once when the client goes away; every upstream response is closed when its client response
ends, however it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ..config import LoopRescueConfig
from ..rescue.engine import RescueStats
from ..rescue.events import EmitError
from . import jsonfast
from .anthropic import AnthropicWire
from .driver import gateway_status
from .endpoints import own_routes
from .http1 import Http1Transport
from .relay import ClosingStreamingResponse, relayed_body
from .service import Prepared, Rejected, RescueService
from .state import StateStore
from .upstream import (
    Transport,
    UpstreamError,
    forward_headers,
    response_headers,
)
from .wire import Wire, wire_for

T = TypeVar("T")


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
    detector_factory: Callable[[], Any] | None = None,
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
            Route(
                "/{path:path}",
                proxy.handle,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
            ),
        ],
        lifespan=lifespan,
    )
    app.state.proxy = proxy
    app.state.totals = proxy.totals
    return app


class _Gone:
    """The client disconnected before the awaited work finished."""


class Proxy:
    def __init__(
        self,
        config: LoopRescueConfig,
        upstream_url: str,
        transport: Transport | None = None,
        store: StateStore | None = None,
        detector_factory: Callable[[], Any] | None = None,
        metrics_registry: Any = None,
    ) -> None:
        parsed = httpx.URL(upstream_url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(
                f"upstream URL must be http(s)://host[:port][/path], got {upstream_url!r}"
            )
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
            self._transport = Http1Transport(self.config.proxy)
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None
        await self.service.aclose()

    def url_for(self, request: Request) -> str:
        query = request.url.query
        return self.upstream + request.url.path + (f"?{query}" if query else "")

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: Request) -> Response:
        try:
            raw = await request.body()
        except ClientDisconnect:
            # the client left mid-body: nobody to answer, nothing to send upstream
            return Response(status_code=400)
        wire_class = wire_for(request.method, request.url.path)
        if wire_class is None:
            return await self._relay(request, raw)
        prepared = await self.service.judge(wire_class, dict(request.headers), raw)
        if prepared is None:
            return await self._relay(request, raw)
        if isinstance(prepared, Rejected):
            return Response(prepared.error_body(), 400, media_type="application/json")
        return await self._exchange(request, raw, prepared)

    # ------------------------------------------------------------------ relay

    async def _relay(self, request: Request, raw: bytes) -> Response:
        opening = self.transport.open(
            request.method, self.url_for(request), forward_headers(request.headers), raw, raw=True
        )
        opened = await _until_disconnect(request, opening)
        if isinstance(opened, _Gone):
            self.totals.upstream_cancelled += 1
            return Response(status_code=499)
        if isinstance(opened, UpstreamError):
            return _gateway_response(AnthropicWire(), opened)
        upstream = opened

        async def on_close(completed: bool) -> None:
            await upstream.aclose()
            if not completed:
                self.totals.upstream_cancelled += 1

        return ClosingStreamingResponse(
            relayed_body(upstream),
            on_close,
            status_code=upstream.status,
            headers=response_headers(upstream.headers, decoded=False),
        )

    # ------------------------------------------------------------------ rescued routes

    async def _exchange(self, request: Request, raw: bytes, prepared: Prepared) -> Response:
        rescue = await self.service.open(
            prepared,
            self.transport,
            self.url_for(request),
            forward_headers(request.headers),
            raw,
            {"path": request.url.path},
        )

        async def finished(completed: bool) -> None:
            await self.service.finished(rescue)
            if not completed:
                self.totals.upstream_cancelled += 1
            if rescue.engine.started:
                self.totals.add(rescue.engine.stats)

        answer = await _until_disconnect(request, rescue.answer())
        if isinstance(answer, _Gone):
            await finished(False)
            return Response(status_code=499)
        if isinstance(answer, UpstreamError):
            await finished(True)
            return _gateway_response(prepared.wire, answer)
        chunks = answer.chunks
        if chunks is None:
            await finished(True)
            return Response(answer.body, answer.status, answer.headers)

        async def on_close(completed: bool) -> None:
            await chunks.aclose()
            await finished(completed)

        return ClosingStreamingResponse(chunks, on_close, headers=answer.headers)


async def _until_disconnect(request: Request, work: Awaitable[T]) -> T | UpstreamError | _Gone:
    """``await work``, unless the client disconnects first (then the work is cancelled).
    An UpstreamError raised by the work is returned, not raised."""
    outcome: list[Any] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            try:
                outcome.append(await work)
            except UpstreamError as err:
                outcome.append(err)
            group.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(watch)
    return outcome[0] if outcome else _Gone()


def _gateway_response(wire: Wire, err: UpstreamError) -> Response:
    body = jsonfast.dumps(wire.error_body(EmitError("transport", err.message)))
    return Response(body, gateway_status(err), media_type="application/json")
