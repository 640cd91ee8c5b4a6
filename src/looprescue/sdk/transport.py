"""HTTP transports that rescue an SDK client's requests in-process, with the proxy's engine.

:class:`RescueAsyncTransport` and :class:`RescueTransport` stand between an SDK client and its
own transport. A rescued route (``POST …/v1/messages``, ``POST …/chat/completions``, judged by
the same :class:`~looprescue.proxy.service.RescueService` as the proxy) runs the proxy's
exchange: history sanitization, hold-back, cut, resume, with the same config; every other
request goes to the client's transport untouched. The SDK then parses what the exchange
answers exactly as it parses a server's answer, so it returns its own types and raises its own
exceptions (the first request's connection errors are the library's own, so its retry policy
applies as before).

A sync client's rescued requests are driven on one event loop thread per transport (the
engine's driver is async); their upstream I/O goes through the client's own sync transport in
worker threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, TypeVar

from ..exchange.upstream import Transport, UpstreamError, forward_headers
from ..proxy.service import Answer, Prepared, Rejected, Rescue, RescueService
from ..wire.registry import wire_for
from .upstream import AsyncUpstream, ThreadedUpstream

T = TypeVar("T")
# blocking upstream calls of a sync client at once (a streamed response holds one while it
# waits for its next chunk)
SYNC_WORKERS = 64


async def _answer(
    service: RescueService, prepared: Prepared, upstream: Transport, request: Any, raw: bytes
) -> tuple[Answer, Rescue]:
    """Open the exchange of a rescued request and get its answer (the rescue is closed when
    the answer is an error)."""
    rescue = await service.open(
        prepared,
        upstream,
        str(request.url),
        forward_headers(request.headers.multi_items()),
        raw,
        {"path": request.url.path, "adapter": "sdk"},
        adapter="sdk",
    )
    try:
        return await rescue.answer(), rescue
    except UpstreamError as err:
        await service.finished(rescue)
        # the SDK maps its library's own exception (connection error, timeout) and retries
        raise (err.__cause__ or err) from None
    except BaseException:
        await service.finished(rescue)
        raise


def transport_for(original: Any) -> Callable[[Any], Any]:
    """The original client's transport for a URL (its proxy mounts, else its own)."""
    pick = getattr(original, "_transport_for_url", None)
    if callable(pick):
        return pick  # type: ignore[no-any-return]
    transport = original._transport
    return lambda url: transport


def _response(lib: ModuleType, answer: Answer, request: Any, stream: Any = None) -> Any:
    if stream is None:
        return lib.Response(
            answer.status, headers=answer.headers, content=answer.body, request=request
        )
    return lib.Response(answer.status, headers=answer.headers, stream=stream, request=request)


def _rejected(lib: ModuleType, rejected: Rejected, request: Any) -> Any:
    headers = {"content-type": "application/json"}
    return lib.Response(400, headers=headers, content=rejected.error_body(), request=request)


# --------------------------------------------------------------------------- async


def async_transport_class(lib: ModuleType) -> type:
    """The async rescuing transport for ``lib`` (``httpx`` or ``httpx2``)."""

    class RescueAsyncTransport(lib.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, service: RescueService, original: Any) -> None:
            """``original``: the SDK's own HTTP client, whose transports send everything."""
            self.service = service
            self._original = original
            self._transport_for = transport_for(original)

        async def handle_async_request(self, request: Any) -> Any:
            wire_class = wire_for(request.method, request.url.path)
            if wire_class is None:
                return await self._transport_for(request.url).handle_async_request(request)
            raw = await request.aread()
            prepared = await self.service.judge(wire_class, dict(request.headers), raw)
            if prepared is None:
                return await self._transport_for(request.url).handle_async_request(request)
            if isinstance(prepared, Rejected):
                return _rejected(lib, prepared, request)
            upstream = AsyncUpstream(lib, self._transport_for, request.extensions)
            answer, rescue = await _answer(self.service, prepared, upstream, request, raw)
            if answer.chunks is None:
                await self.service.finished(rescue)
                return _response(lib, answer, request)
            return _response(
                lib, answer, request, _AsyncStream(answer.chunks, rescue, self.service)
            )

        async def aclose(self) -> None:
            # the copies of an SDK client share one connection pool; so do these two
            await self._original.aclose()
            await self.service.aclose()

    class _AsyncStream(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, chunks: AsyncIterator[bytes], rescue: Rescue, service: Any) -> None:
            self._chunks = chunks
            self._rescue = rescue
            self._service = service
            self._closed = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._chunks:
                yield chunk

        async def aclose(self) -> None:
            if not self._closed:
                self._closed = True
                await self._chunks.aclose()  # type: ignore[attr-defined]
                await self._service.finished(self._rescue)

    return RescueAsyncTransport


# --------------------------------------------------------------------------- sync


class _LoopThread:
    """An event loop on a daemon thread: sync callers run coroutines on it and wait."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.executor = ThreadPoolExecutor(SYNC_WORKERS, thread_name_prefix="looprescue-sdk")
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="looprescue-sdk-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # the caller gave up (an interrupt): so does the work
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.executor.shutdown(wait=False)


async def _next(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await chunks.__anext__()
    except StopAsyncIteration:
        return None


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


def sync_transport_class(lib: ModuleType) -> type:
    """The sync rescuing transport for ``lib`` (``httpx`` or ``httpx2``)."""

    class RescueTransport(lib.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, service: RescueService, original: Any) -> None:
            """``original``: the SDK's own HTTP client, whose transports send everything."""
            self.service = service
            self._original = original
            self._transport_for = transport_for(original)
            self._loop: _LoopThread | None = None
            self._lock = threading.Lock()

        def _loop_thread(self) -> _LoopThread:
            with self._lock:
                if self._loop is None:
                    self._loop = _LoopThread()
                return self._loop

        def handle_request(self, request: Any) -> Any:
            wire_class = wire_for(request.method, request.url.path)
            if wire_class is None:
                return self._transport_for(request.url).handle_request(request)
            raw = request.read()
            prepared = self.service.judge_now(wire_class, dict(request.headers), raw)
            if prepared is None:
                return self._transport_for(request.url).handle_request(request)
            if isinstance(prepared, Rejected):
                return _rejected(lib, prepared, request)
            loop = self._loop_thread()
            upstream = ThreadedUpstream(lib, self._transport_for, request.extensions, loop.executor)
            answer, rescue = loop.run(_answer(self.service, prepared, upstream, request, raw))
            if answer.chunks is None:
                loop.run(self.service.finished(rescue))
                return _response(lib, answer, request)
            stream = _SyncStream(loop, answer.chunks, rescue, self.service)
            return _response(lib, answer, request, stream)

        def close(self) -> None:
            with self._lock:
                loop, self._loop = self._loop, None
            if loop is not None:
                loop.run(self.service.aclose())
                loop.close()
            self._original.close()  # the copies of an SDK client share one connection pool

    class _SyncStream(lib.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(
            self, loop: _LoopThread, chunks: AsyncIterator[bytes], rescue: Rescue, service: Any
        ) -> None:
            self._loop = loop
            self._chunks = chunks
            self._rescue = rescue
            self._service = service
            self._closed = False

        def __iter__(self) -> Iterator[bytes]:
            while (chunk := self._loop.run(_next(self._chunks))) is not None:
                yield chunk

        def close(self) -> None:
            if not self._closed:
                self._closed = True
                self._loop.run(_call(self._chunks.aclose))  # type: ignore[attr-defined]
                self._loop.run(self._service.finished(self._rescue))

    return RescueTransport
