"""The proxy's own HTTP/1.1 server (what ``looprescue proxy`` runs), over real sockets on
127.0.0.1: the real SDKs through it, loops rescued; keep-alive, pipelining, chunked request
bodies, ``Expect: 100-continue``, HEAD, a bad request, a client that leaves mid-stream, an
upstream that breaks mid-relay, and the app's other routes served through the same app."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    parse_sse,
)
from tests.test_metrics import samples, value
from tests.test_proxy_http import (
    CONTINUATION,
    ProxyServer,
    loop_records,
    stream_anthropic,
    stream_openai,
)

from looprescue.config import load_config
from looprescue.detect import scan_text
from looprescue.proxy.app import create_app
from looprescue.proxy.server import HttpServer, Limits


class NativeProxy(ProxyServer):
    """``create_app`` served by :class:`HttpServer` on its own event loop in a thread (the
    addresses and totals as :class:`ProxyServer` has them)."""

    def __init__(
        self,
        upstream_url: str,
        send_buffer: int = 0,
        app_options: dict[str, Any] | None = None,
        limits: Limits | None = None,
        **overrides: Any,
    ) -> None:
        """``send_buffer``: the kernel's send buffer of every client connection, in bytes;
        ``app_options`` go to ``create_app``; ``limits`` to the server (default: the
        config's, with 1 s of keep-alive and of grace)."""
        self.app = create_app(load_config(None, overrides), upstream_url, **(app_options or {}))
        if limits is None:
            limits = Limits(keepalive=1.0, graceful=1.0)
        self.server = HttpServer(self.app, limits)
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if send_buffer:  # accepted connections inherit it
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self._loop.run_until_complete(self.server.serve([self._sock], signals=False))

    def __enter__(self) -> NativeProxy:
        self._thread.start()
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self.server.stop)
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the server did not stop"
        self._loop.close()
        self._sock.close()


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def raw_exchange(port: int, data: bytes, until: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data`` on one connection; read until ``until`` has been seen (or EOF)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while until not in received:
            piece = sock.recv(65536)
            if not piece:
                break
            received += piece
        return received


MESSAGES = {
    "model": "deepseek-flash",
    "stream": True,
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "go"}],
}


def test_sdks_stream_through_it_and_a_loop_is_rescued(upstream: ScriptedUpstream) -> None:
    record = next(r for r in loop_records() if r["channel"] == "reasoning")
    upstream.enqueue(corpus_response(record), CONTINUATION)
    # paced, so its first byte comes well before its end
    upstream.enqueue(ScriptedResponse(reasoning="Short.", text="A healthy answer.", delay=0.03))
    registry = CollectorRegistry()
    with NativeProxy(upstream.base_url, app_options={"metrics_registry": registry}) as proxy:
        rescued = stream_anthropic(proxy)
        healthy = stream_openai(proxy)
        totals = proxy.totals
        found = samples(proxy)  # the proxy's own endpoints, served by the same app
        health = httpx.get(proxy.base_url + "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    for protocol in ("anthropic", "openai"):
        assert value(found, "looprescue_time_to_first_byte_seconds_count", protocol=protocol) == 1
    first_byte = value(found, "looprescue_time_to_first_byte_seconds_sum", protocol="openai")
    duration = value(found, "looprescue_request_duration_seconds_sum", protocol="openai")
    assert 0 < first_byte < duration / 2
    assert all(r.path not in ("/metrics", "/healthz") for r in upstream.requests)
    (hit,) = scan_text(record["text"], "reasoning")
    assert rescued["reasoning"].startswith(record["text"][: hit.prune_offset])
    assert rescued["reasoning"].endswith(CONTINUATION.reasoning)
    assert rescued["text"] == CONTINUATION.text
    assert healthy["text"] == "A healthy answer." and healthy["finish"] == ["stop"]
    assert totals.rescues == 1 and totals.leaked_loop_chars == 0


def test_keep_alive_and_pipelined_requests_are_answered_in_order(
    upstream: ScriptedUpstream,
) -> None:
    request = b"GET /v1/models?n=%d HTTP/1.1\r\nhost: x\r\n\r\n"
    with NativeProxy(upstream.base_url) as proxy:
        data = raw_exchange(proxy.port, request % 1 + request % 2 + request % 3, b"n=3")
        with httpx.Client(base_url=proxy.base_url) as client:  # one connection, three turns
            statuses = [client.get("/v1/models", headers={"x-api-key": "k"}).status_code]
            statuses += [client.get("/v1/models", headers={"x-api-key": "k"}).status_code]
    assert data.count(b"HTTP/1.1 200 OK") == 3
    assert [r.path for r in upstream.requests[:3]] == ["/v1/models"] * 3
    assert [r.query for r in upstream.requests[:3]] == ["n=1", "n=2", "n=3"]
    assert statuses == [200, 200]
    assert len({r.peer for r in upstream.requests}) == 1  # and one upstream connection


def test_chunked_request_body_with_expect_continue(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(ScriptedResponse(text="Chunked in."))
    body = json.dumps(MESSAGES).encode()
    head = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\nexpect: 100-continue\r\n"
        b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    with (
        NativeProxy(upstream.base_url) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock,
    ):
        sock.sendall(head)
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        half = len(body) // 2
        for piece in (body[:half], body[half:]):
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
        received = b""
        while b"0\r\n\r\n" not in received:
            received += sock.recv(65536)
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    head_bytes, _, chunked = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked\r\n" in head_bytes + b"\r\n"
    # the answer's text may come in several deltas (however the reads fell)
    text = "".join(
        data["delta"].get("text", "")
        for name, data in parse_sse(dechunked(chunked))
        if name == "content_block_delta"
    )
    assert text == "Chunked in."
    assert upstream.requests[0].raw_body == body
    # the proxy answered the expectation and sends the whole body: none goes upstream (an
    # upstream that honoured it could answer 100 first)
    assert "expect" not in upstream.requests[0].headers


def dechunked(data: bytes) -> bytes:
    """A chunked HTTP/1.1 body's content."""
    out, position = [], 0
    while True:
        line_end = data.index(b"\r\n", position)
        size = int(data[position:line_end], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[line_end + 2 : line_end + 2 + size])
        position = line_end + 2 + size + 2


def test_head_is_answered_without_a_body(upstream: ScriptedUpstream) -> None:
    with NativeProxy(upstream.base_url) as proxy:
        head_then_get = b"%s /v1/models HTTP/1.1\r\nhost: x\r\n\r\n"
        data = raw_exchange(proxy.port, head_then_get % b"HEAD" + head_then_get % b"GET", b'"data"')
    first, _, rest = data.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 OK") and b"content-length" in first
    assert rest.startswith(b"HTTP/1.1 200 OK")  # the next answer follows the head at once


def test_invalid_http_is_a_400_and_the_connection_closes(upstream: ScriptedUpstream) -> None:
    with NativeProxy(upstream.base_url) as proxy:
        data = raw_exchange(proxy.port, b"NOT HTTP AT ALL\r\n\r\n", b"never")
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"connection: close" in data
    assert not upstream.requests


def test_bad_request_body_is_the_protocols_400(upstream: ScriptedUpstream) -> None:
    with NativeProxy(upstream.base_url) as proxy:
        response = httpx.post(
            proxy.base_url + "/v1/messages", json={**MESSAGES, "messages": "nope"}
        )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert not upstream.requests


def test_client_leaving_mid_stream_cancels_the_upstream_at_once(
    upstream: ScriptedUpstream,
) -> None:
    upstream.enqueue(ScriptedResponse(text="word " * 400, delay=0.02, delta_chars=(5, 5)))
    with NativeProxy(upstream.base_url) as proxy:
        with httpx.stream(
            "POST", proxy.base_url + "/v1/messages", json=MESSAGES, headers={"x-api-key": "k"}
        ) as response:
            lines = response.iter_lines()
            seen = [next(lines) for _ in range(12)]
        assert upstream.wait_for(lambda u: u.requests[0].outcome != "pending")
        cancelled = proxy.totals.upstream_cancelled
    assert any("text_delta" in line for line in seen)
    assert upstream.requests[0].client_disconnected
    assert upstream.requests[0].events_sent < 100
    assert cancelled == 1


def test_upstream_breaking_mid_relay_breaks_the_client_connection(
    upstream: ScriptedUpstream,
) -> None:
    # an unwatched model is relayed untouched: a cut stream must not look complete
    upstream.enqueue(ScriptedResponse(text="word " * 50, cut_after=10))
    with (
        NativeProxy(upstream.base_url, models=["none"]) as proxy,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        httpx.post(proxy.base_url + "/v1/messages", json=MESSAGES, headers={"x-api-key": "k"})


def test_other_routes_of_the_app_are_served_by_the_app(upstream: ScriptedUpstream) -> None:
    """Requests are dispatched by the app's router: a route placed before the proxy's
    catch-all answers itself (its method only); everything else still reaches the proxy."""
    with NativeProxy(upstream.base_url) as proxy:

        async def health(request: Request) -> PlainTextResponse:
            return PlainTextResponse("fine")

        proxy.app.router.routes.insert(0, Route("/own", health, methods=["GET"]))
        own = httpx.get(proxy.base_url + "/own")
        httpx.post(proxy.base_url + "/own", content=b"x")
    assert own.status_code == 200 and own.text == "fine"
    assert [(r.method, r.path) for r in upstream.requests] == [("POST", "/own")]


def healthy_text(chars: int) -> str:
    """Prose-like pseudo-words that repeat nothing (checked below)."""
    rng = random.Random(11)
    words = ["".join(rng.choices("etaoinshrdlucmfwyp", k=rng.randint(2, 9))) for _ in range(chars)]
    text = " ".join(words)[:chars]
    assert not scan_text(text, "text")
    return text


def read_chunked(sock: socket.socket) -> bytes:
    """Everything up to the terminal chunk of a chunked response, its head included."""
    received = b""
    while not received.endswith(b"\r\n0\r\n\r\n"):
        piece = sock.recv(65536)
        assert piece, "the connection closed before the response ended"
        received += piece
    return received


def text_deltas(raw: bytes) -> str:
    _, _, body = raw.partition(b"\r\n\r\n")
    pieces, position = [], 0
    while True:
        size_end = body.index(b"\r\n", position)
        size = int(body[position:size_end], 16)
        if size == 0:
            break
        pieces.append(body[size_end + 2 : size_end + 2 + size])
        position = size_end + 4 + size
    events = parse_sse(b"".join(pieces))
    return "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")


@pytest.mark.parametrize("models", [["*"], ["none"]], ids=["rescued", "relayed"])
def test_a_client_that_lags_gets_every_byte(upstream: ScriptedUpstream, models: list) -> None:
    """A client that stops reading fills its socket: the proxy stops writing from the upstream
    read, waits for the client, and goes on; nothing is lost or reordered."""
    text = healthy_text(300_000)
    upstream.enqueue(ScriptedResponse(text=text, delta_chars=(2000, 3000)))
    body = json.dumps({**MESSAGES, "max_tokens": 100_000}).encode()
    request = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    with NativeProxy(upstream.base_url, send_buffer=8192, models=models) as proxy:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        with sock:
            sock.settimeout(10)
            sock.connect(("127.0.0.1", proxy.port))
            sock.sendall(request)
            deadline = time.monotonic() + 5
            while not any(c.paused for c in list(proxy.server.connections)):
                assert time.monotonic() < deadline, "the client's socket never filled up"
                time.sleep(0.02)
            raw = read_chunked(sock)
    assert text_deltas(raw) == text


def test_stall_and_cut_mid_stream_end_in_band(upstream: ScriptedUpstream) -> None:
    # the idle limit leaves a loaded machine time to send the head and the first frames
    upstream.enqueue(ScriptedResponse(text="word " * 40, stall_after=6, stall_seconds=4))
    upstream.enqueue(ScriptedResponse(text="word " * 40, cut_after=6))
    with NativeProxy(upstream.base_url, **{"proxy.upstreamIdleTimeoutMs": 1000}) as proxy:
        stalled = httpx.post(proxy.base_url + "/v1/messages", json=MESSAGES)
        cut = httpx.post(proxy.base_url + "/v1/messages", json=MESSAGES)
    assert stalled.status_code == 200, stalled.text
    name, data = parse_sse(stalled.text)[-1]
    assert name == "error" and "1000 ms" in data["error"]["message"]
    name, data = parse_sse(cut.text)[-1]
    assert name == "error" and "upstream" in data["error"]["message"]


def _head_names(response: bytes) -> list[str]:
    head = response.partition(b"\r\n\r\n")[0].decode("latin-1")
    return [line.split(":", 1)[0].strip().lower() for line in head.split("\r\n")[1:]]


@pytest.mark.parametrize(
    "request_bytes",
    [
        # relayed: the upstream's own answer carries a content-length
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        # rescued, not streamed: the proxy writes the body it built
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
        % (
            len(json.dumps({**MESSAGES, "stream": False})),
            json.dumps({**MESSAGES, "stream": False}).encode(),
        ),
    ],
    ids=["relayed", "rescued"],
)
def test_every_header_is_written_once(upstream: ScriptedUpstream, request_bytes: bytes) -> None:
    # Node's HTTP parser rejects a response with two content-length lines
    with NativeProxy(upstream.base_url) as proxy:
        received = raw_exchange(proxy.port, request_bytes, b"\0never")
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    names = _head_names(received)
    assert names.count("content-length") == 1
    assert len(names) == len(set(names)), names


def test_a_gateway_error_has_one_content_length() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once it is closed
    with NativeProxy(f"http://127.0.0.1:{port}") as proxy:
        received = raw_exchange(
            proxy.port, b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n", b"\0"
        )
    assert received.startswith(b"HTTP/1.1 502")
    assert _head_names(received).count("content-length") == 1
