"""The wrapper's upstream side: the exchange's :class:`~looprescue.exchange.Transport`
interface over the SDK client's own HTTP transport, so rescued requests (continuations
included) go out exactly as the client's own would: its connection pool, proxies, TLS settings
and per-request timeouts.

The SDKs use ``httpx`` or its successor ``httpx2``, which spell the same API; ``lib`` is the
one the wrapped client uses. A failure raises :class:`UpstreamError` whose ``__cause__`` is the
library's own exception, so the first request's failure can reach the SDK as it would have.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from types import ModuleType
from typing import Any

from ..exchange.upstream import UpstreamError


def _failure(lib: ModuleType, err: Exception, before_response: bool) -> UpstreamError:
    described = f"{type(err).__name__}: {err}"
    if isinstance(err, lib.ConnectTimeout):
        return UpstreamError("connect_timeout", f"upstream unreachable: {described}")
    if isinstance(err, lib.TimeoutException):
        return UpstreamError("stall", f"upstream sent nothing in time: {described}")
    if before_response:
        return UpstreamError("connect", f"upstream unreachable: {described}")
    return UpstreamError("broken", f"upstream connection broke: {type(err).__name__}")


class _Response:
    """An upstream response as the driver reads it (decoded body chunks)."""

    def __init__(self, lib: ModuleType, response: Any, chunks: Any) -> None:
        self._lib = lib
        self.response = response
        self._chunks = chunks

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def headers(self) -> Sequence[tuple[str, str]]:
        return self.response.headers.multi_items()

    async def read(self) -> bytes:
        pieces = []
        while chunk := await self.next_chunk():
            pieces.append(chunk)
        return b"".join(pieces)


class _AsyncResponse(_Response):
    async def next_chunk(self) -> bytes:
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            return b""
        except self._lib.HTTPError as err:
            raise _failure(self._lib, err, before_response=False) from err

    async def aclose(self) -> None:
        await self.response.aclose()


class _Upstream(ABC):
    """Requests through a transport of the SDK's HTTP library (``_send`` says how)."""

    def __init__(
        self, lib: ModuleType, transport_for: Callable[[Any], Any], extensions: Mapping[str, Any]
    ) -> None:
        self._lib = lib
        self._transport_for = transport_for
        self._extensions = extensions

    async def open(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        *,
        raw: bool,
    ) -> _Response:
        lib = self._lib
        request = lib.Request(
            method, url, headers=list(headers), content=content, extensions=self._extensions
        )
        try:
            response = await self._send(self._transport_for(request.url), request)
        except lib.HTTPError as err:
            raise _failure(lib, err, before_response=True) from err
        response.request = request  # tied to its request, the library decodes its body
        return self._response(response, raw)

    @abstractmethod
    async def _send(self, transport: Any, request: Any) -> Any:
        """Send ``request`` on the SDK's transport (async, or on a worker thread)."""

    @abstractmethod
    def _response(self, response: Any, raw: bool) -> _Response: ...

    def busy_connections(self) -> int:
        return 0  # the SDK's pool is not ours to count

    async def aclose(self) -> None:
        return None  # the SDK client owns its transport


class AsyncUpstream(_Upstream):
    """Requests through an async transport of the SDK's HTTP library."""

    async def _send(self, transport: Any, request: Any) -> Any:
        return await transport.handle_async_request(request)

    def _response(self, response: Any, raw: bool) -> _Response:
        chunks = response.aiter_raw() if raw else response.aiter_bytes()
        return _AsyncResponse(self._lib, response, chunks)


class _ThreadedResponse(_Response):
    def __init__(self, lib: ModuleType, response: Any, chunks: Iterator[bytes], run: Any) -> None:
        super().__init__(lib, response, chunks)
        self._run = run

    async def next_chunk(self) -> bytes:
        try:
            return await self._run(next, self._chunks, b"")
        except self._lib.HTTPError as err:
            raise _failure(self._lib, err, before_response=False) from err

    async def aclose(self) -> None:
        await self._run(self.response.close)


class ThreadedUpstream(_Upstream):
    """Requests through a sync transport of the SDK's HTTP library, each blocking call in a
    worker thread so the event loop that drives the exchange never blocks."""

    def __init__(
        self,
        lib: ModuleType,
        transport_for: Callable[[Any], Any],
        extensions: Mapping[str, Any],
        executor: Executor,
    ) -> None:
        super().__init__(lib, transport_for, extensions)
        self._executor = executor

    async def _run(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    async def _send(self, transport: Any, request: Any) -> Any:
        return await self._run(transport.handle_request, request)

    def _response(self, response: Any, raw: bool) -> _Response:
        chunks = response.iter_raw() if raw else response.iter_bytes()
        return _ThreadedResponse(self._lib, response, chunks, self._run)
