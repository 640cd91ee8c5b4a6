"""The server's limits over real sockets on 127.0.0.1: each resource a client can hold is
bounded, and going past a bound gets the protocol's answer and a closed connection, never a
500, a traceback or a connection left open."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    parse_sse,
)
from tests.test_proxy_faults import assert_pool_idle, reasoning_loop
from tests.test_proxy_server import MESSAGES, NativeProxy, healthy_text

from looprescue.config import load_config
from looprescue.proxy.http1 import Http1Transport
from looprescue.proxy.server import Limits


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def connect(proxy: NativeProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=10)


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while piece := sock.recv(65536):
        received += piece
    return received


def status(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed the connection (EOF or a reset), within the socket's timeout."""
    try:
        return read_to_close(sock) is not None
    except ConnectionResetError:
        return True


def test_a_head_trickled_byte_by_byte_gets_a_408(upstream: ScriptedUpstream) -> None:
    head = b"GET /v1/models HTTP/1.1\r\nhost: x\r\n" + b"x-slow: " + b"a" * 400
    with (
        NativeProxy(upstream.base_url, limits=Limits(header_timeout=0.3)) as proxy,
        connect(proxy) as sock,
    ):
        answered = b""
        for byte in head:  # one byte every 10 ms: the whole head would take 4 s
            sock.sendall(bytes([byte]))
            if select.select([sock], [], [], 0.01)[0]:
                answered = read_to_close(sock)
                break
    assert status(answered) == 408 and b"connection: close" in answered
    assert not upstream.requests


def test_a_request_line_and_nothing_more_is_closed(upstream: ScriptedUpstream) -> None:
    with (
        NativeProxy(upstream.base_url, limits=Limits(header_timeout=0.2)) as proxy,
        connect(proxy) as sock,
    ):
        sock.sendall(b"GET / ")
        answered = read_to_close(sock)
    assert status(answered) == 408


@pytest.mark.parametrize("slices", [1, 64])  # in one write, and spread over many reads
def test_headers_over_the_byte_limit_get_a_431(upstream: ScriptedUpstream, slices: int) -> None:
    head = b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 8192 + b"\r\n\r\n"
    step = len(head) // slices + 1
    with (
        NativeProxy(upstream.base_url, limits=Limits(max_header_bytes=4096)) as proxy,
        connect(proxy) as sock,
    ):
        try:
            for start in range(0, len(head), step):
                sock.sendall(head[start : start + step])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the rest was sent
        answered = read_to_close(sock)
    assert status(answered) == 431
    assert not upstream.requests


def test_more_header_fields_than_the_limit_get_a_431(upstream: ScriptedUpstream) -> None:
    fields = b"".join(b"x-f%d: v\r\n" % n for n in range(9))
    with NativeProxy(upstream.base_url, limits=Limits(max_headers=8)) as proxy:
        with connect(proxy) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\n" + fields + b"\r\n")
            answered = read_to_close(sock)
        with connect(proxy) as sock:  # as many as the limit are served
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            served = read_to_close(sock)
    assert status(answered) == 431 and status(served) == 200


def test_a_one_mib_url_is_a_414_with_a_short_log_line(
    upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="looprescue")
    with NativeProxy(upstream.base_url) as proxy, connect(proxy) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\nhost: x\r\n\r\n")
        answered = read_to_close(sock)
    assert status(answered) == 414
    (line,) = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert "414" in line and len(line) < 300
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_connect_is_a_405_and_a_bad_target_a_400(
    upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="looprescue")
    with NativeProxy(upstream.base_url) as proxy:
        with connect(proxy) as sock:
            sock.sendall(b"CONNECT api.example:443 HTTP/1.1\r\nhost: api.example:443\r\n\r\n")
            connect_answer = read_to_close(sock)
        with connect(proxy) as sock:
            sock.sendall(b"GET models HTTP/1.1\r\nhost: x\r\n\r\n")
            target_answer = read_to_close(sock)
        with connect(proxy) as sock:
            sock.sendall(b"G\x01T / HTTP/1.1\r\nhost: x\r\n\r\n")
            method_answer = read_to_close(sock)
    assert status(connect_answer) == 405 and b"allow: GET, POST" in connect_answer
    assert status(target_answer) == 400 and status(method_answer) == 400
    assert not upstream.requests
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_a_declared_body_over_the_limit_is_a_413_before_it_is_sent(
    upstream: ScriptedUpstream,
) -> None:
    head = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"expect: 100-continue\r\ncontent-length: %d\r\n\r\n"
    )
    with (
        NativeProxy(upstream.base_url, limits=Limits(max_body_bytes=4096)) as proxy,
        connect(proxy) as sock,
    ):
        sock.sendall(head % (200 << 20))  # 200 MiB announced, none sent
        answered = read_to_close(sock)
    assert status(answered) == 413 and b"100 Continue" not in answered
    assert not upstream.requests


def test_a_chunked_body_over_the_limit_is_a_413(upstream: ScriptedUpstream) -> None:
    head = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    chunk = b"400\r\n" + b"a" * 1024 + b"\r\n"
    with (
        NativeProxy(upstream.base_url, limits=Limits(max_body_bytes=4096)) as proxy,
        connect(proxy) as sock,
    ):
        sock.sendall(head)
        try:
            for _ in range(64):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answered = read_to_close(sock)
    assert status(answered) == 413
    assert not upstream.requests


def test_a_body_that_stops_coming_gets_a_408(upstream: ScriptedUpstream) -> None:
    head = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n"
    with (
        NativeProxy(upstream.base_url, limits=Limits(body_timeout=0.2)) as proxy,
        connect(proxy) as sock,
    ):
        sock.sendall(head + b"{")
        answered = read_to_close(sock)
    assert status(answered) == 408
    assert not upstream.requests


def test_an_idle_keep_alive_connection_is_closed(upstream: ScriptedUpstream) -> None:
    with NativeProxy(upstream.base_url, limits=Limits(keepalive=0.2)) as proxy:
        with connect(proxy) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
            answered = read_to_close(sock)  # the answer, then the close
        with connect(proxy) as silent:  # a connection that never sends a byte
            assert closed_by_server(silent)
    assert status(answered) == 200 and b"connection: close" not in answered.split(b"\r\n\r\n")[0]


def test_at_the_connection_limit_an_idle_one_makes_room_else_503(
    upstream: ScriptedUpstream,
) -> None:
    limits = Limits(max_connections=2, header_timeout=30)
    with NativeProxy(upstream.base_url, limits=limits) as proxy:
        idle, busy = connect(proxy), connect(proxy)
        busy.sendall(b"GET /v1/mod")  # a head under way: not idle
        time.sleep(0.05)  # both accepted before the next
        with connect(proxy) as newcomer:
            newcomer.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            served = read_to_close(newcomer)
        assert closed_by_server(idle)  # the idle one made room
        blocker = connect(proxy)
        blocker.sendall(b"GET /v1/mod")
        time.sleep(0.05)
        with connect(proxy) as turned_away:  # both slots busy now
            refused = read_to_close(turned_away)
        for sock in (idle, busy, blocker):
            sock.close()
    assert status(served) == 200
    assert status(refused) == 503 and b"retry-after: 1" in refused
    assert proxy.server.refused == 1


def test_an_http_1_0_client_gets_a_body_ended_by_the_close(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(ScriptedResponse(text="Old client."))
    body = json.dumps(MESSAGES).encode()
    request = (
        b"POST /v1/messages HTTP/1.0\r\nx-api-key: k\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    with NativeProxy(upstream.base_url) as proxy, connect(proxy) as sock:
        sock.sendall(request)
        answered = read_to_close(sock)
    head, _, content = answered.partition(b"\r\n\r\n")
    assert status(head) == 200
    assert b"transfer-encoding" not in head and b"connection: close" in head
    assert b"event: message_stop" in content and b"Old client." in content


def test_shutdown_lets_a_stream_in_flight_finish(upstream: ScriptedUpstream) -> None:
    answer = healthy_text(300)
    upstream.enqueue(ScriptedResponse(text=answer, delay=0.01, delta_chars=(5, 5)))
    proxy = NativeProxy(upstream.base_url, limits=Limits(graceful=30))
    with proxy:
        with httpx.stream(
            "POST", proxy.base_url + "/v1/messages", json=MESSAGES, headers={"x-api-key": "k"}
        ) as response:
            pieces = response.iter_bytes()
            received = next(pieces)
            proxy._loop.call_soon_threadsafe(proxy.server.stop)
            received += b"".join(pieces)
        with pytest.raises(httpx.TransportError):  # no longer accepting
            httpx.get(proxy.base_url + "/healthz", timeout=2)
    text = "".join(d["delta"]["text"] for n, d in parse_sse(received) if n == "content_block_delta")
    assert text == answer and b"message_stop" in received


def test_a_client_leaving_during_a_continuation_leaks_no_upstream_connection(
    upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # the continuation sends its head, then nothing for a while: the client leaves meanwhile
    upstream.enqueue(
        corpus_response(reasoning_loop()),
        ScriptedResponse(reasoning="Resumed.", stall_after=0, stall_seconds=2.0),
    )
    with NativeProxy(upstream.base_url) as proxy:
        with httpx.stream(
            "POST",
            proxy.base_url + "/v1/messages",
            json={**MESSAGES, "max_tokens": 4096},
            headers={"x-api-key": "k"},
        ) as response:
            seen = b""
            pieces = response.iter_bytes()  # held: a dropped iterator closes the response
            for piece in pieces:
                seen += piece
                if "〔".encode() in seen:  # the loop was cut: the continuation is on its way
                    break
            deadline = time.monotonic() + 5
            while len(upstream.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            # the client leaves while the continuation has sent its head and nothing more
        assert_pool_idle(proxy)
        assert not proxy.app.state.proxy.transport._all  # every connection closed, none kept
    assert len(upstream.requests) == 2
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_bytes_arriving_after_the_pumps_caller_left_are_not_an_error() -> None:
    """The client leaves while a stream is pumped: its task is cancelled, and a read that
    comes in before the task runs its cleanup stays buffered (no InvalidStateError from the
    read), and the connection is closed, not pooled."""

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"a" * 10)
        with contextlib.suppress(asyncio.CancelledError):  # the loop may close under it
            await reader.read()  # until the client closes

    async def scenario() -> None:
        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = Http1Transport(load_config(None).proxy, coalesce_ms=0)
        response = await transport.open("GET", f"http://127.0.0.1:{port}/", [], b"", raw=True)
        fed: list[bytes] = []
        pumping = asyncio.ensure_future(response.pump(lambda piece: fed.append(piece)))
        while not fed:
            await asyncio.sleep(0.01)
        pumping.cancel()  # the pump's future is cancelled now, the task's cleanup runs later
        response.received(b"b" * 10)  # a read that comes in before it does
        with pytest.raises(asyncio.CancelledError):
            await pumping
        await response.aclose()
        assert fed == [b"a" * 10] and transport.busy_connections() == 0
        await transport.aclose()
        server.close()

    asyncio.run(scenario())


def test_the_cli_serves_on_a_unix_socket(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    path = tmp_path / "proxy.sock"
    command = [sys.executable, "-m", "looprescue", "proxy", "--upstream", upstream.base_url]
    process = subprocess.Popen([*command, "--uds", str(path)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not path.exists():
            assert process.poll() is None and time.monotonic() < deadline, "it did not start"
            time.sleep(0.05)
        transport = httpx.HTTPTransport(uds=str(path))
        with httpx.Client(transport=transport, base_url="http://proxy") as client:
            health = client.get("/healthz")
            models = client.get("/v1/models", headers={"x-api-key": "k"})
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert health.status_code == 200 and models.status_code == 200
    assert process.returncode == 0, stderr
    assert f"unix:{path}".encode() in stderr


def test_a_client_that_reads_nothing_is_dropped(upstream: ScriptedUpstream) -> None:
    """Its socket fills, the proxy waits for it for the send timeout, then disconnects it:
    the response it never read stays incomplete."""
    upstream.enqueue(ScriptedResponse(text=healthy_text(100_000), delta_chars=(2000, 2000)))
    body = json.dumps(MESSAGES).encode()
    request = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    limits = Limits(send_timeout=0.3)
    with NativeProxy(upstream.base_url, send_buffer=4096, limits=limits) as proxy:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", proxy.port))
        sock.sendall(request)  # and no read until the proxy gave up
        deadline = time.monotonic() + 20
        while not proxy.server.connections and time.monotonic() < deadline:
            time.sleep(0.01)  # accepted
        while proxy.server.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        dropped = not proxy.server.connections
        received = b""
        with contextlib.suppress(ConnectionResetError):
            received = read_to_close(sock)
        sock.close()
    assert dropped
    assert b"message_stop" not in received  # whatever of the response it still had


def test_an_http_1_0_client_keeps_its_connection_only_when_it_asks(
    upstream: ScriptedUpstream,
) -> None:
    with NativeProxy(upstream.base_url) as proxy, connect(proxy) as sock:
        sock.sendall(b"GET /healthz HTTP/1.0\r\nconnection: keep-alive\r\n\r\n")
        first = b""
        while b"}" not in first:  # the JSON body, sized
            first += sock.recv(65536)
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")  # no Host: HTTP/1.0 needs none
        second = read_to_close(sock)
    assert status(first) == 200 and b"connection: keep-alive" in first
    assert status(second) == 200 and b"connection: close" in second
