"""A misbehaving upstream or client through the proxy over real HTTP: malformed events after the
headers end with the protocol's in-band error, bad bodies get a protocol-shaped 400, a huge
body is served, and a client leaving mid-body is not an application error."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, parse_sse
from tests.test_proxy_faults import ANTHROPIC_HEADERS, anthropic_body, assert_pool_idle, openai_body
from tests.test_proxy_http import serve

from looprescue.rescue.conversation import conversation_language, text_language


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def anthropic_frame(payload: str, event: str) -> bytes:
    return f"event: {event}\ndata: {payload}\n\n".encode()


# Each case: raw bytes the upstream sends after a few good events (the 200 headers are out).
ANTHROPIC_MALFORMED = {
    "message_delta.delta as a string": anthropic_frame(
        '{"type":"message_delta","delta":"x"}', "message_delta"
    ),
    "content_block_delta.delta as a string": anthropic_frame(
        '{"type":"content_block_delta","index":0,"delta":"x"}', "content_block_delta"
    ),
    "error.error as a string": anthropic_frame('{"type":"error","error":"x"}', "error"),
    "index Infinity": anthropic_frame(
        '{"type":"content_block_delta","index":Infinity,"delta":{"type":"text_delta","text":"a"}}',
        "content_block_delta",
    ),
    "index as a string": anthropic_frame(
        '{"type":"content_block_stop","index":"0"}', "content_block_stop"
    ),
    "index 1e400": anthropic_frame(
        '{"type":"content_block_stop","index":1e400}', "content_block_stop"
    ),
    "text as a number": anthropic_frame(
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}',
        "content_block_delta",
    ),
    "content_block as a list": anthropic_frame(
        '{"type":"content_block_start","index":7,"content_block":[1]}', "content_block_start"
    ),
    "usage as a string": anthropic_frame(
        '{"type":"message_delta","delta":{},"usage":"many"}', "message_delta"
    ),
    "thinking delta into the text block": anthropic_frame(
        '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a"}}',
        "content_block_delta",
    ),
    "block started twice": anthropic_frame(
        '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        "content_block_start",
    ),
}

OPENAI_MALFORMED = {
    "choices as a string": b'data: {"id":"c","choices":"x"}\n\n',
    "choice as a string": b'data: {"id":"c","choices":["x"]}\n\n',
    "delta as a string": b'data: {"id":"c","choices":[{"index":0,"delta":"x"}]}\n\n',
    "tool_calls as a string": b'data: {"choices":[{"index":0,"delta":{"tool_calls":"x"}}]}\n\n',
    "tool call index Infinity": (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":Infinity}]}}]}\n\n'
    ),
    "choice index NaN": b'data: {"choices":[{"index":NaN,"delta":{}}]}\n\n',
    "function as a list": (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":[]}]}}]}\n\n'
    ),
    "error as a string": b'data: {"error":"x"}\n\n',
}


def assert_anthropic_error_end(payload: str) -> None:
    frames = parse_sse(payload)
    assert all(isinstance(data, dict) and name == data["type"] for name, data in frames)
    name, data = frames[-1]
    assert name == "error" and isinstance(data["error"]["message"], str)
    assert sum(1 for n, _ in frames if n in ("error", "message_stop")) == 1


@pytest.mark.parametrize("case", sorted(ANTHROPIC_MALFORMED))
def test_malformed_anthropic_event_is_an_in_band_error(
    upstream: ScriptedUpstream, case: str
) -> None:
    # events: message_start, ping, text block 0 start, a text delta, then the injected one
    upstream.enqueue(
        ScriptedResponse(
            text="The answer is right here.", inject_after=4, inject=ANTHROPIC_MALFORMED[case]
        )
    )
    with serve(upstream) as proxy:
        response = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        assert_pool_idle(proxy)
    assert response.status_code == 200
    assert_anthropic_error_end(response.text)


@pytest.mark.parametrize("case", sorted(OPENAI_MALFORMED))
def test_malformed_openai_chunk_is_an_in_band_error(upstream: ScriptedUpstream, case: str) -> None:
    upstream.enqueue(
        ScriptedResponse(
            reasoning="Let me look.",
            text="The answer.",
            inject_after=3,
            inject=OPENAI_MALFORMED[case],
        )
    )
    with serve(upstream) as proxy:
        response = httpx.post(proxy.base_url + "/v1/chat/completions", json=openai_body())
        assert_pool_idle(proxy)
    assert response.status_code == 200
    frames = parse_sse(response.text)
    _, last = frames[-1]
    assert isinstance(last, dict) and isinstance(last["error"]["message"], str)
    assert "[DONE]" not in response.text


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b'{"content":"x"}',
        b'{"content":[5]}',
        b'{"content":[{"type":"tool_use","id":5,"name":"n"}]}',
        b'{"content":[{"type":"text","text":5}],"choices":"x"}',
    ],
)
@pytest.mark.parametrize("route", ["/v1/messages", "/v1/chat/completions"])
def test_malformed_non_streaming_body_is_a_502_error(
    upstream: ScriptedUpstream, payload: bytes, route: str
) -> None:
    upstream.enqueue(ScriptedResponse(text="unused", raw_body=payload))
    with serve(upstream) as proxy:
        response = httpx.post(
            proxy.base_url + route, json=anthropic_body(stream=False), headers=ANTHROPIC_HEADERS
        )
    assert response.status_code == 502
    assert "upstream response body" in response.json()["error"]["message"]


# --------------------------------------------------------------------------- client bodies

BAD_BODIES: dict[str, Any] = {
    "messages is a number": {"messages": 5},
    "messages is true": {"messages": True},
    "messages is a string": {"messages": "hi"},
    "a message is a number": {"messages": [5]},
    "role is a list": {"messages": [{"role": ["user"], "content": "hi"}]},
    "content is a number": {"messages": [{"role": "user", "content": 5}]},
    "model is a number": {"model": 5, "messages": []},
    "stream is a string": {"stream": "yes", "messages": []},
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
@pytest.mark.parametrize("route", ["/v1/messages", "/v1/chat/completions"])
def test_bad_client_body_is_a_protocol_shaped_400(
    upstream: ScriptedUpstream, case: str, route: str
) -> None:
    body = {"model": "deepseek-flash", "max_tokens": 10, **BAD_BODIES[case]}
    with serve(upstream) as proxy:
        response = httpx.post(proxy.base_url + route, json=body, headers=ANTHROPIC_HEADERS)
        whole = httpx.post(proxy.base_url + route, json=True, headers=ANTHROPIC_HEADERS)
    for answer in (response, whole):
        assert answer.status_code == 400, answer.text
        error = answer.json()
        if route == "/v1/messages":
            assert error["type"] == "error"
            assert error["error"]["type"] == "invalid_request_error"
        else:
            assert error["error"]["type"] == "invalid_request_error"
            assert error["error"]["param"] is None
    assert "invalid request body" in response.json()["error"]["message"]
    assert upstream.requests == []  # nothing was sent on


def test_anthropic_system_of_the_wrong_type_is_a_400(upstream: ScriptedUpstream) -> None:
    with serve(upstream) as proxy:
        response = httpx.post(
            proxy.base_url + "/v1/messages",
            json=anthropic_body(system=5),
            headers=ANTHROPIC_HEADERS,
        )
    assert response.status_code == 400 and "system" in response.json()["error"]["message"]


# --------------------------------------------------------------------------- large bodies


def test_language_is_judged_on_a_bounded_sample() -> None:
    english_then_chinese = "word " * 100_000 + "中文" * 100_000
    assert text_language(english_then_chinese) == "en"  # only the start is looked at
    assert text_language("中文" * 100_000 + "word " * 100_000) == "zh"
    many = {"messages": [{"role": "user", "content": "hello"}] * 50_000}
    many["messages"][-1] = {"role": "user", "content": "请解释一下"}
    assert conversation_language(many) == "zh"  # the latest message is always looked at


def test_a_50_mb_request_is_served(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(ScriptedResponse(text="Read it all."))
    prompt = "The log line says nothing new. " * (50 * 1024 * 1024 // 31)
    with serve(upstream) as proxy:
        response = httpx.post(
            proxy.base_url + "/v1/messages",
            json=anthropic_body(messages=[{"role": "user", "content": prompt}]),
            headers=ANTHROPIC_HEADERS,
            timeout=120,
        )
    assert response.status_code == 200
    text = "".join(
        data["delta"]["text"]
        for name, data in parse_sse(response.text)
        if name == "content_block_delta" and data["delta"]["type"] == "text_delta"
    )
    assert text == "Read it all."
    (recorded,) = upstream.requests
    assert len(recorded.raw_body) > 50_000_000


# --------------------------------------------------------------------------- client leaves


def test_client_leaving_mid_body_is_not_an_application_error(
    upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    with serve(upstream) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            head = (
                "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                "content-length: 100000\r\n\r\n"
            )
            sock.sendall(head.encode() + json.dumps(anthropic_body()).encode()[:40])
        time.sleep(0.5)  # let the server notice the disconnect
        still_serving = httpx.get(proxy.base_url + "/v1/models", headers={"x-api-key": "k"})
    assert still_serving.status_code == 200
    assert not [r for r in caplog.records if "Exception in ASGI application" in r.getMessage()]
    assert upstream.requests[0].path == "/v1/models"  # the torn request never went upstream
