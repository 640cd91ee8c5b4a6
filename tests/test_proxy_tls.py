"""An HTTPS upstream: the proxy's own HTTP/1.1 client verifies it, streams through it and
reuses its connections; an upstream whose certificate it does not trust is a 502."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_response
from tests.test_proxy_faults import assert_pool_idle, reasoning_loop
from tests.test_proxy_http import CONTINUATION, ProxyServer, stream_anthropic

from looprescue.config import LoopRescueConfig
from looprescue.proxy.http1 import Http1Transport


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (openssl, from the Debian base system)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture
def tls_upstream(certificate: tuple[str, str]) -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(tls=certificate) as upstream:
        yield upstream


def trusting(cert: str) -> Http1Transport:
    context = ssl.create_default_context(cafile=cert)
    return Http1Transport(LoopRescueConfig().proxy, ssl_context=context)


def test_loop_rescued_over_https_with_connection_reuse(
    tls_upstream: ScriptedUpstream, certificate: tuple[str, str]
) -> None:
    assert tls_upstream.base_url.startswith("https://")
    # paced, so that the proxy hangs up while the loop is still being written
    tls_upstream.enqueue(corpus_response(reasoning_loop(), delay=0.002), CONTINUATION)
    tls_upstream.enqueue(ScriptedResponse(text="Second turn."))
    transport = trusting(certificate[0])
    with ProxyServer(LoopRescueConfig(), tls_upstream.base_url, transport=transport) as proxy:
        first = stream_anthropic(proxy)
        second = stream_anthropic(proxy)
        assert_pool_idle(proxy)
    assert "〔" in first["reasoning"] and first["text"] == CONTINUATION.text
    assert second["text"] == "Second turn."
    cut, resumed, again = tls_upstream.agent_requests()
    # the looping response was cut, so its connection was closed (the upstream saw the hang-up;
    # its port may be handed out again, so the peers need not differ); the continuation's
    # finished and the next turn reused it
    assert cut.client_disconnected, cut.outcome
    assert resumed.peer == again.peer


def test_untrusted_certificate_is_a_502(tls_upstream: ScriptedUpstream, tmp_path: Path) -> None:
    import httpx

    with ProxyServer(LoopRescueConfig(), tls_upstream.base_url) as proxy:  # system CAs only
        response = httpx.post(
            proxy.base_url + "/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        )
    assert response.status_code == 502
    assert "upstream unreachable" in response.json()["error"]["message"]
    assert tls_upstream.requests == []
