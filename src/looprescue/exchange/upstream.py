"""The upstream side of the proxy's I/O: a small transport interface and its implementation.

Everything above this module only needs :class:`Transport` (open a request, get a response
with status, headers and body chunks); the proxy's implementation is ``http1.Http1Transport``.
A failure is always an :class:`UpstreamError` with a kind the exchange understands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

# RFC 9110 §7.6.1 connection-specific headers, plus ones the HTTP stacks set themselves, and
# Expect: the proxy answered the client's 100-continue itself and sends the body at once.
HOP_BY_HOP = frozenset(
    {
        "expect",
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
