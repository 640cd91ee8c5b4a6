"""The upstream client on real networks, all on 127.0.0.1: through a forward proxy from the
environment (a CONNECT tunnel to a TLS upstream, absolute-form requests to a plain one,
NO_PROXY), trusting CAs from REQUESTS_CA_BUNDLE or ``proxy.caFile``, showing a client
certificate, an IPv6 upstream's Host header, and the pool's bound."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_response
from tests.test_proxy_faults import assert_pool_idle, reasoning_loop
from tests.test_proxy_http import CONTINUATION, ProxyServer, stream_anthropic
from tests.test_proxy_tls import certificate  # noqa: F401 - a fixture

from looprescue.config import LoopRescueConfig, load_config
from looprescue.exchange.upstream import UpstreamError
from looprescue.proxy.http1 import Http1Transport

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)


class ForwardProxy:
    """A forward proxy on 127.0.0.1: CONNECT tunnels, and absolute-form plain requests
    (one per connection). It records each request line and its head."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://user:p%40ss@127.0.0.1:{self.port}"

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._handle, sock=self.sock)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        self.heads.append(head)
        line = head.split(b"\r\n", 1)[0].decode()
        method, target, _ = line.split(" ")
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            url = urlsplit(target)
            up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port)
            origin_form = f"{method} {url.path}{'?' + url.query if url.query else ''} HTTP/1.1"
            up_writer.write(origin_form.encode() + head[len(line) :])
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    def __enter__(self) -> ForwardProxy:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def forward_proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy() as proxy:
        yield proxy


def proxy_authorization(head: bytes) -> str:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"proxy-authorization":
            return base64.b64decode(value.strip().split(b" ")[1]).decode()
    return ""


def test_an_https_upstream_through_a_connect_tunnel(
    certificate: tuple[str, str],  # noqa: F811
    forward_proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", forward_proxy.url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certificate[0])
    with ScriptedUpstream(tls=certificate) as upstream:
        upstream.enqueue(corpus_response(reasoning_loop()), CONTINUATION)
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            rescued = stream_anthropic(proxy)
            assert_pool_idle(proxy)
        requests = upstream.agent_requests()
    assert rescued["text"] == CONTINUATION.text and len(requests) == 2
    port = urlsplit(upstream.base_url).port
    connects = [h for h in forward_proxy.heads if h.startswith(b"CONNECT ")]
    assert connects and all(
        h.startswith(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n" % port) for h in connects
    )
    assert proxy_authorization(connects[0]) == "user:p@ss"


def test_a_plain_upstream_through_a_forward_proxy_and_no_proxy(
    forward_proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALL_PROXY", forward_proxy.url)  # no HTTP_PROXY: ALL_PROXY applies
    with ScriptedUpstream() as upstream:
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            proxied = direct_client().get(proxy.base_url + "/v1/models?limit=2")
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            direct = direct_client().get(proxy.base_url + "/v1/models")
        seen = upstream.requests
    assert proxied.status_code == 200 and direct.status_code == 200
    (head,) = forward_proxy.heads  # the second went direct
    assert head.startswith(b"GET %s/v1/models?limit=2 HTTP/1.1\r\n" % upstream.base_url.encode())
    assert proxy_authorization(head) == "user:p@ss"
    assert [r.query for r in seen] == ["limit=2", ""]


def test_a_proxy_that_refuses_the_tunnel_is_a_502(
    certificate: tuple[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusing = socket.socket()
    refusing.bind(("127.0.0.1", 0))
    refusing.listen(1)

    def refuse() -> None:
        conn, _ = refusing.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    monkeypatch.setenv("https_proxy", f"127.0.0.1:{refusing.getsockname()[1]}")
    with (
        ScriptedUpstream(tls=certificate) as upstream,
        ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy,
    ):
        response = direct_client().get(proxy.base_url + "/v1/models")
    thread.join(10)
    refusing.close()
    assert response.status_code == 502
    assert upstream.requests == []


def test_ca_file_and_client_certificate(tmp_path: Path) -> None:
    """``proxy.caFile`` trusts the upstream's certificate; an upstream that asks for a client
    certificate gets ``proxy.clientCert`` (mutual TLS), and without it refuses."""
    server_cert, server_key = make_certificate(tmp_path, "server", "IP:127.0.0.1")
    client_cert, client_key = make_certificate(tmp_path, "client", "DNS:client")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_cert)
    context.load_cert_chain(server_cert, server_key)
    context.verify_mode = ssl.CERT_REQUIRED

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            await reader.readuntil(b"\r\n\r\n")
            peer = writer.get_extra_info("peercert")
            subject = dict(item[0] for item in peer["subject"])["commonName"]
            body = f"hello {subject}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    async def scenario() -> tuple[bytes, str]:
        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        with_cert = load_config(
            None,
            {
                "proxy.caFile": server_cert,
                "proxy.clientCert": client_cert,
                "proxy.clientKey": client_key,
            },
        )
        transport = Http1Transport(with_cert.proxy)
        response = await transport.open("GET", url, [], b"", raw=True)
        body = await response.read()
        await response.aclose()
        await transport.aclose()
        without = Http1Transport(load_config(None, {"proxy.caFile": server_cert}).proxy)
        try:
            response = await without.open("GET", url, [], b"", raw=True)
            await response.read()
            failure = ""
        except UpstreamError as err:
            failure = err.message
        await without.aclose()
        server.close()
        return body, failure

    body, failure = asyncio.run(scenario())
    assert body == b"hello client"
    assert "upstream" in failure


def make_certificate(folder: Path, name: str, san: str) -> tuple[str, str]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-subj", f"/CN={name}", "-addext", f"subjectAltName={san}"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


async def recording_server(host: str, heads: list[bytes], gate: asyncio.Event | None = None):
    """Answers each request with a small sized body, keeping the connection; records heads."""
    accepted: list[int] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        # the handler ends quietly when the test's loop closes under it
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError
        ):
            while True:
                heads.append(await reader.readuntil(b"\r\n\r\n"))
                if gate is not None and len(heads) == 1:
                    await gate.wait()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, host, 0)
    return server, accepted


def test_an_ipv6_upstream_gets_a_bracketed_host() -> None:
    async def scenario() -> bytes:
        heads: list[bytes] = []
        server, _ = await recording_server("::1", heads)
        port = server.sockets[0].getsockname()[1]
        transport = Http1Transport(LoopRescueConfig().proxy)
        response = await transport.open("GET", f"http://[::1]:{port}/x", [], b"", raw=True)
        assert await response.read() == b"ok"
        await response.aclose()
        await transport.aclose()
        server.close()
        return heads[0]

    head = asyncio.run(scenario())
    assert b"\r\nhost: [::1]:" in head and head.startswith(b"GET /x HTTP/1.1\r\n")


def test_the_pool_holds_at_most_its_bound() -> None:
    """With one connection allowed, a second request waits for the first to end, then
    reuses its connection."""

    async def scenario() -> tuple[list[bytes], int, list[str]]:
        heads: list[bytes] = []
        gate = asyncio.Event()
        server, accepted = await recording_server("127.0.0.1", heads, gate)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        transport = Http1Transport(load_config(None, {"proxy.maxUpstreamConnections": 1}).proxy)
        order: list[str] = []

        async def get(path: str) -> None:
            response = await transport.open("GET", url + path, [], b"", raw=True)
            order.append(f"{path} head")
            await response.read()
            await response.aclose()

        first = asyncio.ensure_future(get("/first"))
        while not heads:
            await asyncio.sleep(0.01)
        second = asyncio.ensure_future(get("/second"))
        for _ in range(20):  # the second gets nowhere while the first holds the only place
            await asyncio.sleep(0.01)
        order.append("gate")
        gate.set()
        await asyncio.gather(first, second)
        await transport.aclose()
        server.close()
        return heads, len(accepted), order

    heads, connections, order = asyncio.run(scenario())
    assert [h.split(b" ")[1] for h in heads] == [b"/first", b"/second"]
    assert connections == 1
    assert order == ["gate", "/first head", "/second head"]


def test_a_full_pool_answers_504_after_the_connect_timeout() -> None:
    async def scenario() -> str:
        heads: list[bytes] = []
        gate = asyncio.Event()
        server, _ = await recording_server("127.0.0.1", heads, gate)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        config = load_config(
            None, {"proxy.maxUpstreamConnections": 1, "proxy.connectTimeoutMs": 100}
        )
        transport = Http1Transport(config.proxy)
        first = asyncio.ensure_future(transport.open("GET", url, [], b"", raw=True))
        while not heads:
            await asyncio.sleep(0.01)
        try:
            await transport.open("GET", url, [], b"", raw=True)
            kind = "opened"
        except UpstreamError as err:
            kind = err.kind
        gate.set()
        response = await first
        await response.aclose()
        await transport.aclose()
        server.close()
        return kind

    assert asyncio.run(scenario()) == "connect_timeout"


def test_a_rescued_request_keeps_its_body_through_a_forward_proxy(
    forward_proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", forward_proxy.url)
    body = {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
    }
    with ScriptedUpstream() as upstream:
        upstream.enqueue(ScriptedResponse(text="Through the proxy."))
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            response = direct_client().post(proxy.base_url + "/v1/messages", json=body)
        (seen,) = upstream.requests
    assert response.status_code == 200 and "Through the proxy." in response.text
    (head,) = forward_proxy.heads
    assert head.startswith(b"POST %s/v1/messages HTTP/1.1\r\n" % upstream.base_url.encode())
    assert seen.body == body


def direct_client() -> httpx.Client:
    """The test's own client, which ignores the proxy variables set for the proxy under test."""
    return httpx.Client(trust_env=False, timeout=30)
