"""The I/O around one :class:`~looprescue.exchange.Exchange`: send the requests it names
over a :class:`~looprescue.exchange.Transport`, feed it what comes back, hand the client
bytes out, store state and write audit lines.

:meth:`ExchangeDriver.stream` is an async iterator of client bytes (what a streaming HTTP
response, or an SDK-level stream, sends on); :meth:`ExchangeDriver.whole` returns one body.
Every upstream response opened here is closed by :meth:`ExchangeDriver.aclose`, however the
exchange ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import LoopRescueConfig
from ..exchange.core import Exchange, Step
from ..exchange.feed import DirectFeed, feed_item
from ..exchange.upstream import Transport, UpstreamError, UpstreamResponse
from ..rescue.events import ResumeTimedOut, SendRequest, UpstreamFailed
from ..wire import jsonfast
from .audit import AuditLog, RequestClock
from .state import StateStore

KEEPALIVE_SECONDS = 15.0
# After the end-of-message event, read at most this much more of a response (its last chunk
# terminator), this long, so its connection can be reused; else the connection is closed.
DRAIN_BYTES = 64 * 1024
DRAIN_SECONDS = 1.0


@dataclass
class ExchangeDriver:
    exchange: Exchange
    transport: Transport
    config: LoopRescueConfig
    url: str
    headers: Sequence[tuple[str, str]]
    raw_body: bytes
    store: StateStore
    key: str
    audit: AuditLog | None = None
    context: dict[str, Any] = field(default_factory=dict)
    clock: RequestClock = field(default_factory=RequestClock)
    resume_started_ms: int | None = None
    _first_byte_s: float | None = None  # when the first client bytes of a stream were ready
    _feed: DirectFeed | None = None
    _open: list[UpstreamResponse] = field(default_factory=list)

    @property
    def first_byte_s(self) -> float | None:
        """Seconds from the request's start to the first client bytes of a stream (None: none
        went out)."""
        feed = self._feed
        if feed is not None and feed.first_write_at is not None:
            written = self.clock.seconds_at(feed.first_write_at)
            if self._first_byte_s is None or written < self._first_byte_s:
                return written
        return self._first_byte_s

    # ------------------------------------------------------------------ steps

    async def carry_out(self, step: Step) -> None:
        """Everything of a step except the client bytes and the upstream actions."""
        if step.save is not None and self.key:
            await self.store.save(self.key, step.save)
        if step.audit and self.audit is not None:
            elapsed = self.clock.elapsed_ms()
            for record in step.audit:
                timings = {"elapsed_ms": elapsed}
                if record.kind != "resume" and self.resume_started_ms is not None:
                    timings["since_resume_ms"] = elapsed - self.resume_started_ms
                self.audit.write(record.kind, record.data, {**self.context, **timings})

    def content_of(self, request: SendRequest) -> bytes:
        return jsonfast.dumps(request.body) if request.changed else self.raw_body

    async def send(self, request: SendRequest, content: bytes | None = None) -> UpstreamResponse:
        """Open ``request`` upstream; raises UpstreamError."""
        body = self.content_of(request) if content is None else content
        response = await self.transport.open("POST", self.url, self.headers, body, raw=False)
        self._open.append(response)
        self.exchange.response_started(request.attempt)
        return response

    async def release(self, response: UpstreamResponse) -> None:
        """Done reading ``response``. When its message ended it stays open for :meth:`aclose`
        to drain its short tail (so its connection is reused) after the client got
        everything; otherwise (a cut, a failure, a resume to come) it is closed now."""
        if not self.exchange.done or self.exchange.hung_up:
            await self._close(response)

    async def _close(self, response: UpstreamResponse) -> None:
        if response in self._open:
            self._open.remove(response)
        await response.aclose()

    async def _drain(self, response: UpstreamResponse) -> None:
        with contextlib.suppress(UpstreamError, asyncio.TimeoutError):
            tail = 0
            while tail <= DRAIN_BYTES:
                chunk = await asyncio.wait_for(response.next_chunk(), DRAIN_SECONDS)
                if not chunk:
                    break
                tail += len(chunk)

    async def aclose(self) -> None:
        """Close every upstream response still open (idempotent); one whose message ended is
        drained first, so its connection goes back to the pool."""
        while self._open:
            response = self._open.pop()
            if self.exchange.done and not self.exchange.hung_up:
                await self._drain(response)
            await response.aclose()

    # ------------------------------------------------------------------ streaming

    async def stream(
        self, response: UpstreamResponse, direct: Callable[[bytes], bool] | None = None
    ) -> AsyncIterator[bytes]:
        """Client bytes of a streaming exchange whose first response is ``response`` (200).

        ``direct`` writes client bytes at once when the client keeps up (False: it does not,
        nothing was written). With it, and an upstream response that can ``pump``, each
        upstream read is fed and its client bytes written from the read itself while the
        exchange only streams; what yields here is what needs more (state, audit, the end,
        a cut, a client that lags)."""
        exchange = self.exchange
        current: UpstreamResponse | None = response
        feed = self._feed = DirectFeed(exchange, direct, time.monotonic) if direct else None
        while current is not None:
            pump = getattr(current, "pump", None)
            if feed is not None and pump is not None:
                step = await pump(feed)
            else:
                try:
                    chunk = await current.next_chunk()
                except UpstreamError as err:
                    step = feed_item(exchange, err)
                else:
                    step = feed_item(exchange, chunk, time.monotonic() * 1000)
            if step.save is not None or step.audit:
                await self.carry_out(step)
            if step.client:
                if self.first_byte_s is None:
                    self._first_byte_s = self.clock.elapsed_s()
                yield step.client
            if exchange.reading:
                continue
            await self.release(current)
            current = None
            request = step.request
            while request is not None:
                waiting = asyncio.ensure_future(self._resume(request))
                try:
                    while True:
                        done, _ = await asyncio.wait({waiting}, timeout=KEEPALIVE_SECONDS)
                        if done:
                            break
                        yield exchange.ping()
                    current, step = waiting.result()
                finally:
                    if not waiting.done():
                        waiting.cancel()
                        # wait for it to stop: a continuation it opened meanwhile is then
                        # among the responses aclose closes, never left open
                        await asyncio.wait({waiting})
                await self.carry_out(step)
                if step.client:
                    yield step.client
                request = None
                if current is not None and not exchange.reading:
                    await self.release(current)
                    current = None
                    # its first read looped again: the next continuation follows at once
                    request = step.request

    async def _resume(self, request: SendRequest) -> tuple[UpstreamResponse | None, Step]:
        """Send a continuation and feed its first bytes (at most ``resumeTimeoutMs`` away)."""
        timeout_ms = self.config.resumeTimeoutMs
        self.resume_started_ms = self.clock.elapsed_ms()
        try:
            return await asyncio.wait_for(self._first_bytes(request), timeout_ms / 1000)
        except asyncio.TimeoutError:
            return None, self.exchange.fail(ResumeTimedOut(timeout_ms))

    async def _first_bytes(self, request: SendRequest) -> tuple[UpstreamResponse | None, Step]:
        exchange = self.exchange
        content = self.content_of(request)
        try:
            response = await self.send(request, content)
            if response.status != 200:
                payload = await response.read()
                await self._close(response)
                return None, exchange.http_error(response.status, payload, response.headers)
            if not exchange.streaming:
                payload = await response.read()
                await self._close(response)
                return None, exchange.feed_whole(payload)
            first = b""
            while not first:
                first = await response.next_chunk()
                if not first:
                    failure = UpstreamFailed("transport", "continuation ended before data")
                    await self._close(response)
                    return None, exchange.fail(failure)
        except UpstreamError as err:
            if err.kind == "stall":
                return None, exchange.fail(UpstreamFailed("stall", "continuation stalled"))
            return None, exchange.fail(
                UpstreamFailed("transport", f"continuation failed: {err.message}")
            )
        return response, exchange.feed_bytes(first, time.monotonic() * 1000)

    # ------------------------------------------------------------------ non-streaming

    async def whole(self, response: UpstreamResponse) -> tuple[int, bytes]:
        """Status and JSON body of a non-streaming exchange whose first response is 200."""
        exchange = self.exchange
        try:
            payload = await response.read()
        except UpstreamError as err:
            return gateway_status(err), exchange.gateway_error(err.message)
        finally:
            await self._close(response)
        step = exchange.feed_whole(payload)
        await self.carry_out(step)
        while step.request is not None:
            _, step = await self._resume(step.request)
            await self.carry_out(step)
        return exchange.whole_response()


def gateway_status(err: UpstreamError) -> int:
    return 504 if err.kind in ("connect_timeout", "stall") else 502
