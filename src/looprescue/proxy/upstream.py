"""The upstream side of the proxy's I/O: a small transport interface and its implementation.

Everything above this module only needs :class:`Transport` (open a request, get a response
with status, headers and body chunks); the implementation here is a pooled ``httpx`` client.
A failure is always an :class:`UpstreamError` with a kind the exchange understands.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import httpx

from ..config import ProxyConfig

# RFC 9110 §7.6.1 connection-specific headers, plus ones the HTTP stacks set themselves.
HOP_BY_HOP = frozenset(
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

ErrorKind = Literal["connect", "connect_timeout", "stall", "broken"]


class UpstreamError(Exception):
    """The upstream could not be reached, stalled, or broke the connection."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class UpstreamResponse(Protocol):
    status: int
    headers: Sequence[tuple[str, str]]

    async def next_chunk(self) -> bytes:
        """The next piece of the body (``b""`` at its end); raises :class:`UpstreamError`."""

    async def read(self) -> bytes:
        """The rest of the body; raises :class:`UpstreamError`."""

    async def aclose(self) -> None:
        """Give the connection back (when the body was read to its end) or close it."""


class Transport(Protocol):
    async def open(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        *,
        raw: bool,
    ) -> UpstreamResponse:
        """Send a request and wait for the response head. ``raw``: body bytes as they came
        (no content decoding), for a response relayed unchanged."""

    def busy_connections(self) -> int:
        """Upstream connections serving a response now (0 when idle: nothing leaked)."""

    async def aclose(self) -> None: ...


def forward_headers(
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
) -> list[tuple[str, str]]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return [(k, v) for k, v in pairs if k.lower() not in HOP_BY_HOP]


def response_headers(headers: Sequence[tuple[str, str]], *, decoded: bool) -> dict[str, str]:
    """Upstream response headers for the client; ``decoded`` when the body was re-encoded."""
    drop = HOP_BY_HOP | {"content-encoding"} if decoded else HOP_BY_HOP - {"content-length"}
    return {k: v for k, v in headers if k.lower() not in drop}


# --------------------------------------------------------------------------- httpx


@dataclass
class _HttpxResponse:
    response: httpx.Response
    chunks: AsyncIterator[bytes]
    idle_ms: int

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def headers(self) -> Sequence[tuple[str, str]]:
        return self.response.headers.multi_items()

    async def next_chunk(self) -> bytes:
        try:
            return await self.chunks.__anext__()
        except StopAsyncIteration:
            return b""
        except httpx.TimeoutException:
            raise UpstreamError("stall", f"upstream sent nothing for {self.idle_ms} ms") from None
        except httpx.HTTPError as err:
            message = f"upstream connection broke: {type(err).__name__}"
            raise UpstreamError("broken", message) from None

    async def read(self) -> bytes:
        pieces = []
        while chunk := await self.next_chunk():
            pieces.append(chunk)
        return b"".join(pieces)

    async def aclose(self) -> None:
        await self.response.aclose()


class HttpxTransport:
    """A pooled ``httpx.AsyncClient``."""

    def __init__(self, config: ProxyConfig) -> None:
        self._idle_ms = config.upstreamIdleTimeoutMs
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=config.connectTimeoutMs / 1000,
                read=config.upstreamIdleTimeoutMs / 1000,
                write=config.upstreamIdleTimeoutMs / 1000,
                pool=config.connectTimeoutMs / 1000,
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

    async def open(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        *,
        raw: bool,
    ) -> _HttpxResponse:
        request = self._client.build_request(method, url, headers=list(headers), content=content)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.ConnectTimeout as err:
            raise UpstreamError(
                "connect_timeout", f"upstream unreachable: {_describe(err)}"
            ) from None
        except httpx.TimeoutException as err:
            raise UpstreamError("stall", f"upstream unreachable: {_describe(err)}") from None
        except httpx.HTTPError as err:
            raise UpstreamError("connect", f"upstream unreachable: {_describe(err)}") from None
        chunks = response.aiter_raw() if raw else response.aiter_bytes()
        return _HttpxResponse(response, chunks, self._idle_ms)

    def busy_connections(self) -> int:
        pool = self._client._transport._pool  # type: ignore[attr-defined]
        return sum(1 for conn in pool.connections if not (conn.is_idle() or conn.is_closed()))

    async def aclose(self) -> None:
        await self._client.aclose()


def _describe(err: Exception) -> str:
    return f"{type(err).__name__}: {err}"
