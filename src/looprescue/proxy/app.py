"""The proxy's HTTP layer: a Starlette app around the rescue engine.

``POST …/v1/messages`` (Anthropic Messages) and ``POST …/chat/completions`` (OpenAI Chat
Completions) for watched models go through the engine; every other request is relayed to the
upstream unchanged (method, path, query, headers, body), and so are upstream errors (status,
headers, body). A request whose body the proxy does not change is forwarded byte for byte.

I/O policy: one pooled ``httpx.AsyncClient`` per app; each client response runs its upstream
work in a task group with a watcher for the client's disconnect, so a client that goes away
cancels the upstream request at once; every upstream response is closed in a ``finally``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..config import LoopRescueConfig
from ..rescue.continuation import Protocol, apply_retry_overrides, apply_stall_nudge
from ..rescue.conversation import ConversationStore, conversation_key, conversation_language
from ..rescue.engine import RescueEngine, RescueStats, applies_to
from ..rescue.events import (
    AuditRecord,
    CloseUpstream,
    EmitError,
    EmitPing,
    ResumeTimedOut,
    StartResume,
    UpstreamEvent,
    UpstreamFailed,
)
from . import anthropic as anthropic_wire
from . import jsonfast
from . import openai as openai_wire
from .audit import AuditLog, RequestClock
from .sse import SSEError, SSEParser

log = logging.getLogger("looprescue.proxy")

# RFC 9110 §7.6.1 connection-specific headers, plus ones httpx/uvicorn set themselves.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
KEEPALIVE_SECONDS = 15.0


@dataclass
class ProxyTotals:
    """Counters over all rescued responses since the app started."""

    responses: int = 0
    detections: int = 0
    rescues: int = 0
    cuts: int = 0
    pruned_chars: int = 0
    leaked_loop_chars: int = 0
    upstream_cancelled: int = 0
    per_response: list[RescueStats] = field(default_factory=list)

    def add(self, stats: RescueStats) -> None:
        self.responses += 1
        self.detections += stats.detections
        self.rescues += stats.rescues
        self.cuts += stats.cuts
        self.pruned_chars += stats.pruned_chars
        self.leaked_loop_chars += stats.leaked_loop_chars
        if len(self.per_response) < 10_000:
            self.per_response.append(stats)


def create_app(config: LoopRescueConfig, upstream_url: str) -> Starlette:
    """The proxy as an ASGI app forwarding to ``upstream_url`` (scheme://host[:port][/base])."""
    proxy = _Proxy(config, upstream_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await proxy.aclose()

    app = Starlette(
        routes=[
            Route(
                "/{path:path}",
                proxy.handle,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
            )
        ],
        lifespan=lifespan,
    )
    app.state.proxy = proxy
    app.state.totals = proxy.totals
    app.state.conversations = proxy.conversations
    return app


def _protocol_for(method: str, path: str) -> Protocol | None:
    if method != "POST":
        return None
    trimmed = path.rstrip("/")
    if trimmed.endswith("/v1/messages") or trimmed == "/messages":
        return "anthropic"
    if trimmed.endswith("/chat/completions"):
        return "openai"
    return None


def forward_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}


def response_headers(headers: httpx.Headers, *, decoded: bool) -> dict[str, str]:
    """Upstream response headers for the client; ``decoded`` when the body was re-encoded."""
    drop = _HOP_BY_HOP | ({"content-encoding"} if decoded else set())
    if not decoded:
        drop = drop - {"content-length"}
    return {k: v for k, v in headers.items() if k.lower() not in drop}


class _Proxy:
    def __init__(self, config: LoopRescueConfig, upstream_url: str) -> None:
        parsed = httpx.URL(upstream_url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(
                f"upstream URL must be http(s)://host[:port][/path], got {upstream_url!r}"
            )
        self.config = config
        self.upstream = upstream_url.rstrip("/")
        self.conversations = ConversationStore(config.proxy.maxConversations)
        self.totals = ProxyTotals()
        self.audit = AuditLog(config.proxy.auditLog) if config.proxy.auditLog else None
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            proxy_cfg = self.config.proxy
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=proxy_cfg.connectTimeoutMs / 1000,
                    read=proxy_cfg.upstreamIdleTimeoutMs / 1000,
                    write=proxy_cfg.upstreamIdleTimeoutMs / 1000,
                    pool=proxy_cfg.connectTimeoutMs / 1000,
                ),
                # Idle connections are dropped after 2 s: well inside common server keep-alive
                # timeouts (uvicorn's is 5 s), so the pool never reuses one the upstream is
                # closing at that moment (that race surfaces as a ReadError, i.e. a 502).
                limits=httpx.Limits(
                    max_connections=1024, max_keepalive_connections=256, keepalive_expiry=2.0
                ),
                follow_redirects=False,
                trust_env=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.audit is not None:
            self.audit.close()

    def url_for(self, request: Request) -> str:
        query = request.url.query
        return self.upstream + request.url.path + (f"?{query}" if query else "")

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        protocol = _protocol_for(request.method, request.url.path)
        body = _json_object(raw) if protocol else None
        if protocol is None or body is None or not self._watched(protocol, body):
            return await self._relay(request, raw)
        return await self._rescue(request, protocol, raw, body)

    def _watched(self, protocol: Protocol, body: Mapping[str, Any]) -> bool:
        if not applies_to(
            self.config, body.get("model") if isinstance(body.get("model"), str) else None
        ):
            return False
        n = body.get("n")
        return not (protocol == "openai" and n not in (None, 1))

    # ------------------------------------------------------------------ plain relay

    async def _relay(self, request: Request, raw: bytes) -> Response:
        upstream_request = self.client.build_request(
            request.method,
            self.url_for(request),
            headers=forward_headers(request.headers),
            content=raw,
        )
        responses: list[httpx.Response] = []

        async def pump(send: Send) -> None:
            try:
                upstream = await self.client.send(upstream_request, stream=True)
            except httpx.HTTPError as err:
                await _send_whole(send, *_gateway_error(None, err))
                return
            responses.append(upstream)
            headers = response_headers(upstream.headers, decoded=False)
            await send(_start(upstream.status_code, headers))
            async for chunk in upstream.aiter_raw():
                await send(_body(chunk))
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        return _GuardedResponse(pump, responses, self.totals)

    # ------------------------------------------------------------------ rescued routes

    async def _rescue(
        self, request: Request, protocol: Protocol, raw: bytes, body: dict[str, Any]
    ) -> Response:
        config = self.config
        key = conversation_key(request.headers, body)
        state = self.conversations.get(key)
        lang = conversation_language(body, config.language)
        outgoing: dict[str, Any] = body
        acting = config.mode != "observe"
        if acting and state.take_stall_nudge(config.stallCalls):
            outgoing = apply_stall_nudge(outgoing, protocol, lang)
        if acting and state.take_retry_request():
            outgoing = apply_retry_overrides(outgoing, protocol, config)
        content = raw if outgoing is body else _dumps(outgoing)
        engine = RescueEngine(config, protocol, outgoing, state, lang)
        context = {
            "conversation": key,
            "protocol": protocol,
            "model": body.get("model"),
            "path": request.url.path,
        }
        headers = forward_headers(request.headers)
        exchange = _Exchange(self, engine, protocol, self.url_for(request), headers, context, body)
        return _GuardedResponse(
            functools.partial(exchange.run, content), exchange.open_responses, self.totals, engine
        )


@dataclass
class _Resumed:
    """An upstream response being read (or why there is none)."""

    response: httpx.Response | None = None
    failure: UpstreamEvent | None = None
    first: bytes = b""
    chunks: AsyncIterator[bytes] | None = None


@dataclass
class _Exchange:
    """One rescued client request: its engine and the upstream responses it goes through."""

    proxy: _Proxy
    engine: RescueEngine
    protocol: Protocol
    url: str
    headers: dict[str, str]
    context: dict[str, Any]
    body: Mapping[str, Any]
    clock: RequestClock = field(default_factory=RequestClock)
    open_responses: list[httpx.Response] = field(default_factory=list)
    resume_started_ms: int | None = None

    async def run(self, content: bytes, send: Send) -> None:
        """Send the client's request upstream and answer the client, whatever happens."""
        client = self.proxy.client
        request = client.build_request("POST", self.url, headers=self.headers, content=content)
        try:
            upstream = await client.send(request, stream=True)
        except httpx.HTTPError as err:
            await _send_whole(send, *_gateway_error(self.protocol, err))
            return
        self.open_responses.append(upstream)
        if upstream.status_code != 200:
            # DSH's retry policy keys off these: pass status, headers and body through.
            try:
                payload = await upstream.aread()
            except httpx.HTTPError as err:
                await _send_whole(send, *_gateway_error(self.protocol, err))
                return
            headers = response_headers(upstream.headers, decoded=True)
            await _send_whole(send, upstream.status_code, headers, payload)
            return
        if self.body.get("stream"):
            await self._stream(send, upstream, _stream_headers(upstream))
        else:
            await _send_whole(send, *await self.whole_response(upstream))

    def _audit(self, record: AuditRecord) -> None:
        audit = self.proxy.audit
        if audit is None:
            return
        timings = {"elapsed_ms": self.clock.elapsed_ms()}
        if record.kind != "resume" and self.resume_started_ms is not None:
            timings["since_resume_ms"] = timings["elapsed_ms"] - self.resume_started_ms
        audit.write(record.kind, record.data, {**self.context, **timings})

    def _codec(self) -> tuple[Any, Any]:
        if self.protocol == "anthropic":
            return anthropic_wire.AnthropicDecoder, anthropic_wire.AnthropicEncoder()
        options = self.body.get("stream_options")
        include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
        shared_field: list[str] = []
        encoder = openai_wire.OpenAIEncoder(include_usage, shared_field)

        def decoder() -> openai_wire.OpenAIDecoder:
            made = openai_wire.OpenAIDecoder()
            made.reasoning_field = shared_field
            return made

        return decoder, encoder

    async def _open_resume(self, body: Mapping[str, Any]) -> _Resumed:
        """Send a continuation and wait (at most ``resumeTimeoutMs``) for its first bytes."""
        timeout_ms = self.proxy.config.resumeTimeoutMs
        client = self.proxy.client
        self.resume_started_ms = self.clock.elapsed_ms()
        request = client.build_request("POST", self.url, headers=self.headers, content=_dumps(body))
        try:
            with anyio.fail_after(timeout_ms / 1000):
                response = await client.send(request, stream=True)
                self.open_responses.append(response)
                if response.status_code != 200:
                    message = (await response.aread()).decode("utf-8", "replace")
                    return _Resumed(failure=UpstreamFailed("http", message, response.status_code))
                if not self.body.get("stream"):
                    return _Resumed(response, first=await response.aread())
                chunks = response.aiter_bytes()
                first = b""
                while not first:
                    first = await chunks.__anext__()
                return _Resumed(response, first=first, chunks=chunks)
        except TimeoutError:
            return _Resumed(failure=ResumeTimedOut(timeout_ms))
        except StopAsyncIteration:
            return _Resumed(failure=UpstreamFailed("transport", "continuation ended before data"))
        except httpx.TimeoutException:
            return _Resumed(failure=UpstreamFailed("stall", "continuation stalled"))
        except httpx.HTTPError as err:
            failure = UpstreamFailed("transport", f"continuation failed: {type(err).__name__}")
            return _Resumed(failure=failure)

    # ------------------------------------------------------------------ streaming

    async def _event_batches(
        self, chunks: AsyncIterator[bytes], decoder: Any, first: bytes = b""
    ) -> AsyncIterator[list[UpstreamEvent]]:
        """Upstream events, one list per body chunk httpx yields (one client write each).

        httpx yields each HTTP chunk of the upstream body separately, and SSE upstreams send
        about one event per chunk, so this is close to one write per upstream event.
        """
        parser = SSEParser()
        idle_ms = self.proxy.config.proxy.upstreamIdleTimeoutMs

        def decode(chunk: bytes) -> list[UpstreamEvent]:
            return [event for sse in parser.feed(chunk) for event in decoder.decode(sse)]

        try:
            if first:
                yield decode(first)
            async for chunk in chunks:
                batch = decode(chunk)
                if batch:
                    yield batch
            parser.close()
        except SSEError as err:
            yield [UpstreamFailed("malformed", f"upstream stream: {err}")]
            return
        except httpx.TimeoutException:
            yield [UpstreamFailed("stall", f"upstream sent nothing for {idle_ms} ms")]
            return
        except httpx.HTTPError as err:
            failure = f"upstream connection broke: {type(err).__name__}"
            yield [UpstreamFailed("transport", failure)]
            return
        yield [UpstreamFailed("transport", "upstream stream ended before its end-of-message event")]

    async def _stream(self, send: Send, upstream: httpx.Response, headers: dict[str, str]) -> None:
        make_decoder, encoder = self._codec()
        engine = self.engine
        await send(_start(200, headers))
        current: _Resumed | None = _Resumed(upstream, chunks=upstream.aiter_bytes())
        while current is not None and current.response is not None and not engine.done:
            assert current.chunks is not None
            batches = self._event_batches(current.chunks, make_decoder(), current.first)
            response, current = current.response, None
            pending_resume: Mapping[str, Any] | None = None
            try:
                async for batch in batches:
                    out = bytearray()
                    stop = False
                    for event in batch:
                        for item in engine.feed(event):
                            if isinstance(item, AuditRecord):
                                self._audit(item)
                            elif isinstance(item, CloseUpstream):
                                stop = True
                            elif isinstance(item, StartResume):
                                pending_resume = item.body
                            else:
                                out += encoder.encode(item)
                        # after a cut, nothing more of this upstream stream may be fed
                        if stop or pending_resume is not None or engine.done:
                            stop = True
                            break
                    if out:
                        await send(_body(bytes(out)))
                    if stop:
                        break
            finally:
                await batches.aclose()
                await response.aclose()
            if pending_resume is not None:
                current = await self._await_with_keepalive(
                    functools.partial(self._open_resume, pending_resume), send, encoder
                )
                if current.failure is not None:
                    await self._feed_and_send(current.failure, send, encoder)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _feed_and_send(self, event: UpstreamEvent, send: Send, encoder: Any) -> None:
        out = bytearray()
        for item in self.engine.feed(event):
            if isinstance(item, AuditRecord):
                self._audit(item)
            elif not isinstance(item, CloseUpstream | StartResume):
                out += encoder.encode(item)
        if out:
            await send(_body(bytes(out)))

    async def _await_with_keepalive(
        self, make: Callable[[], Awaitable[Any]], send: Send, encoder: Any
    ) -> Any:
        """Run ``make()``; while it is pending, keep the client connection alive with pings."""
        result: list[Any] = []
        async with anyio.create_task_group() as group:
            finished = anyio.Event()

            async def run() -> None:
                result.append(await make())
                finished.set()

            group.start_soon(run)
            while not finished.is_set():
                with anyio.move_on_after(KEEPALIVE_SECONDS):
                    await finished.wait()
                if not finished.is_set():
                    await send(_body(encoder.encode(EmitPing())))
        return result[0]

    # ------------------------------------------------------------------ non-streaming

    async def whole_response(self, upstream: httpx.Response) -> tuple[int, dict[str, str], bytes]:
        """The merged non-streaming answer: (status, headers, JSON body)."""
        engine = self.engine
        if self.protocol == "anthropic":
            collector: Any = anthropic_wire.AnthropicCollector()
        else:
            reasoning_field: list[str] = []
            collector = openai_wire.OpenAICollector(reasoning_field)
        status = 200
        headers = response_headers(upstream.headers, decoded=True)
        try:
            payload = await upstream.aread()
        except httpx.HTTPError as err:
            return _gateway_error(self.protocol, err)
        finally:
            await upstream.aclose()
        while True:
            events, pending = self._whole_events(payload, collector), None
            for event in events:
                for item in engine.feed(event):
                    if isinstance(item, AuditRecord):
                        self._audit(item)
                    elif isinstance(item, StartResume):
                        pending = item.body
                    elif not isinstance(item, CloseUpstream):
                        collector.add(item)
                if pending is not None or engine.done:
                    break
            if pending is None:
                break
            resumed = await self._open_resume(pending)
            if resumed.response is not None:
                await resumed.response.aclose()
            payload = resumed.first
            if resumed.failure is not None:
                for item in engine.feed(resumed.failure):
                    if isinstance(item, AuditRecord):
                        self._audit(item)
                    elif not isinstance(item, CloseUpstream | StartResume):
                        collector.add(item)
                break
        if collector.error is not None:
            body = _error_payload(self.protocol, collector.error)
            return 502, {"content-type": "application/json"}, _dumps(body)
        headers["content-type"] = "application/json"
        return status, headers, _dumps(collector.result())

    def _whole_events(self, payload: bytes, collector: Any) -> list[UpstreamEvent]:
        try:
            message = jsonfast.loads(payload)
            if self.protocol == "anthropic":
                return anthropic_wire.message_events(message)
            events, fields = openai_wire.completion_events(message)
            if fields and not collector._reasoning_field:
                collector._reasoning_field.extend(fields)
            return events
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            return [UpstreamFailed("malformed", f"upstream response body: {err}")]


class _GuardedResponse(Response):
    """Runs ``pump(send)`` while watching for the client's disconnect; on disconnect the pump is
    cancelled at once. Upstream responses listed in ``responses`` are always closed."""

    def __init__(
        self,
        pump: Callable[[Send], Awaitable[None]],
        responses: list[httpx.Response],
        totals: ProxyTotals,
        engine: RescueEngine | None = None,
    ) -> None:
        self._pump = pump
        self._responses = responses
        self._totals = totals
        self._engine = engine
        self.background = None
        self.status_code = 200

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = False
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    nonlocal disconnected
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            disconnected = True
                            group.cancel_scope.cancel()
                            return

                async def pump() -> None:
                    try:
                        await self._pump(send)
                    except OSError:
                        # the client went away while we were writing
                        nonlocal disconnected
                        disconnected = True
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                group.start_soon(pump)
        finally:
            with anyio.CancelScope(shield=True):
                for response in self._responses:
                    await response.aclose()
            if disconnected:
                self._totals.upstream_cancelled += 1
            if self._engine is not None and self._engine.state != "awaiting_start":
                self._totals.add(self._engine.stats)


def _start(status: int, headers: Mapping[str, str]) -> dict[str, Any]:
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
    }


def _body(chunk: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": chunk, "more_body": True}


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        body = jsonfast.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _dumps(body: Mapping[str, Any]) -> bytes:
    return jsonfast.dumps(body)


def _error_payload(protocol: Protocol | None, error: EmitError) -> dict[str, Any]:
    if protocol == "openai":
        return openai_wire.error_body(error)
    return anthropic_wire.error_body(error)


def _gateway_error(protocol: Protocol | None, err: Exception) -> tuple[int, dict[str, str], bytes]:
    status = 504 if isinstance(err, httpx.TimeoutException) else 502
    failure = EmitError("transport", f"upstream unreachable: {type(err).__name__}: {err}")
    body = _dumps(_error_payload(protocol, failure))
    return status, {"content-type": "application/json"}, body


def _stream_headers(upstream: httpx.Response) -> dict[str, str]:
    headers = response_headers(upstream.headers, decoded=True)
    headers["content-type"] = "text/event-stream; charset=utf-8"
    headers.setdefault("cache-control", "no-cache")
    return headers


async def _send_whole(send: Send, status: int, headers: Mapping[str, str], body: bytes) -> None:
    await send(_start(status, {**headers, "content-length": str(len(body))}))
    await send({"type": "http.response.body", "body": body, "more_body": False})
