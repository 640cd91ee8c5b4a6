"""The proxy's upstream HTTP/1.1 client against a server that sends interim responses."""

from __future__ import annotations

import asyncio

from looprescue.config import LoopRescueConfig
from looprescue.proxy.http1 import Http1Transport

BODY = b'{"ok": true}'
INTERIM = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n"
FINAL = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)


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

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = Http1Transport(LoopRescueConfig().proxy)
    got = []
    try:
        for _ in range(2):
            response = await transport.open(
                "POST", f"http://127.0.0.1:{port}/v1/messages", [], b"{}", raw=False
            )
            got.append((response.status, await response.read()))
            await response.aclose()
    finally:
        await transport.aclose()
        server.close()
    return got, connections


def test_interim_responses_are_skipped_and_the_connection_reused() -> None:
    for split in (5, len(INTERIM) - 3, len(INTERIM) + 10):  # inside, between and after them
        got, connections = asyncio.run(_exchange(split))
        assert got == [(200, BODY), (200, BODY)], split
        assert connections == 1, split
