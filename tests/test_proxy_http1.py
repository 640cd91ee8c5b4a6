"""The proxy's upstream HTTP/1.1 client against loopback servers: interim responses, and how a
pumped body's reads are coalesced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from looprescue.config import LoopRescueConfig
from looprescue.proxy.http1 import Http1Transport

BODY = b'{"ok": true}'
INTERIM = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n"
FINAL = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)


@asynccontextmanager
async def _upstream(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    proxy: dict | None = None,
) -> AsyncIterator[tuple[Http1Transport, str]]:
    """A loopback server answering with ``serve``, and the upstream client (its ``proxy.*``
    settings) with the URL to send to; both closed afterwards."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = LoopRescueConfig.model_validate({"proxy": proxy or {}}).proxy
    transport = Http1Transport(config)
    try:
        yield transport, f"http://127.0.0.1:{port}/v1/messages"
    finally:
        await transport.aclose()
        server.close()


async def _exchange(split: int) -> tuple[list[tuple[int, bytes]], int]:
    """Two requests over one connection to a server that answers each with 100 and 103 before
    its 200, the answer's bytes written in two parts at ``split``."""
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            answer = INTERIM + FINAL
            writer.write(answer[:split])
            await writer.drain()
            await asyncio.sleep(0.01)
            writer.write(answer[split:])
            await writer.drain()

    got = []
    async with _upstream(serve) as (transport, url):
        for _ in range(2):
            response = await transport.open("POST", url, [], b"{}", raw=False)
            got.append((response.status, await response.read()))
            await response.aclose()
    return got, connections


def test_interim_responses_are_skipped_and_the_connection_reused() -> None:
    for split in (5, len(INTERIM) - 3, len(INTERIM) + 10):  # inside, between and after them
        got, connections = asyncio.run(_exchange(split))
        assert got == [(200, BODY), (200, BODY)], split
        assert connections == 1, split


PIECES = [b"data: piece %d\n\n" % number for number in range(8)]


async def _pumped(coalesce_ms: int, end: str) -> tuple[list[bytes | str], float]:
    """What ``pump`` hands on, and the seconds it took, for a chunked body whose pieces come
    30 ms apart and which then ends (``end="clean"``) or breaks (``"cut"``)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        writer.write(b"transfer-encoding: chunked\r\n\r\n")
        for piece in PIECES:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.03)
        if end == "clean":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        writer.close()

    handed: list[bytes | str] = []

    def feed(item: object) -> str | None:
        if isinstance(item, bytes) and item:
            handed.append(item)
            return None
        handed.append("end" if item == b"" else "failed")
        return "done"

    async with _upstream(serve, {"coalesceMs": coalesce_ms}) as (transport, url):
        started = time.monotonic()
        response = await transport.open("POST", url, [], b"{}", raw=False)
        await response.pump(feed)
        elapsed = time.monotonic() - started
        await response.aclose()
    return handed, elapsed


def test_a_pumped_body_goes_on_read_by_read_without_coalescing() -> None:
    handed, _ = asyncio.run(_pumped(0, "clean"))
    assert b"".join(piece for piece in handed if isinstance(piece, bytes)) == b"".join(PIECES)
    assert handed[-1] == "end"
    assert len(handed) >= 6  # pieces 30 ms apart: nearly each its own read


def test_coalesced_reads_wait_but_the_first_read_and_the_end_do_not() -> None:
    # longer than the body takes: whatever comes after the first read waits for the end
    handed, elapsed = asyncio.run(_pumped(1_000, "clean"))
    assert handed == [PIECES[0], b"".join(PIECES[1:]), "end"]
    assert elapsed < 0.9  # the end went on when it came (0.24 s), not when the interval ran out


def test_a_coalesced_body_that_breaks_hands_on_its_bytes_and_the_failure_at_once() -> None:
    handed, elapsed = asyncio.run(_pumped(1_000, "cut"))
    assert handed == [PIECES[0], b"".join(PIECES[1:]), "failed"]
    assert elapsed < 0.9
