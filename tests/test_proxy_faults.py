"""Faults through the proxy over real HTTP: upstream errors, cuts, stalls, in-band errors,
client disconnects, failed resumes; plus pass-through, filters and per-conversation state."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    parse_sse,
)
from tests.test_proxy_http import (
    CONTINUATION,
    ProxyServer,
    loop_records,
    openai_client,
    serve,
    stream_anthropic,
    stream_openai,
)

from looprescue.config import LoopRescueConfig


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


# the rescued stream, and the mirrored one (observe: the upstream's own frames pass)
MODES = ["rescue", "observe"]
ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def anthropic_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "deepseek-flash",
        "stream": True,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "go"}],
        **extra,
    }


def openai_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
        **extra,
    }


def reasoning_loop() -> dict[str, Any]:
    return next(r for r in loop_records() if r["channel"] == "reasoning")


def assert_pool_idle(proxy: Any) -> None:
    """No upstream connection of the proxy is still busy (nothing leaked) once the responses
    that just ended have handed their connections back (which they do after the client's
    last byte)."""
    transport = proxy.app.state.proxy.transport
    deadline = time.monotonic() + 5
    while transport.busy_connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert transport.busy_connections() == 0


# --------------------------------------------------------------------------- HTTP errors


@pytest.mark.parametrize("status", [429, 500, 503, 401])
def test_upstream_http_errors_pass_through(upstream: ScriptedUpstream, status: int) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": f"nope {status}"}}
    upstream.enqueue(ScriptedResponse(status=status, error_body=error, retry_after=1))
    upstream.enqueue(ScriptedResponse(status=status, retry_after=2))
    with serve(upstream) as proxy:
        native = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        compat = httpx.post(proxy.base_url + "/v1/chat/completions", json=openai_body())
        assert_pool_idle(proxy)
    assert native.status_code == status and native.json() == error
    assert native.headers["retry-after"] == "1"
    assert native.headers["request-id"].startswith("scripted-req-")
    assert compat.status_code == status and "error" in compat.json()
    assert compat.headers["retry-after"] == "2"


@pytest.mark.parametrize("mode", MODES)
def test_streamed_responses_reuse_their_upstream_connection(
    upstream: ScriptedUpstream, mode: str
) -> None:
    for _ in range(3):
        upstream.enqueue(ScriptedResponse(reasoning="Thinking.", text="An answer."))
    with serve(upstream, mode=mode) as proxy:
        for _ in range(3):
            got = stream_anthropic(proxy)
            assert got["text"] == "An answer."
        assert_pool_idle(proxy)
    peers = {r.peer for r in upstream.agent_requests()}
    assert len(upstream.agent_requests()) == 3 and len(peers) == 1, peers


def test_sdk_sees_rate_limit_from_upstream(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(ScriptedResponse(status=429))
    with serve(upstream) as proxy, pytest.raises(anthropic.RateLimitError):
        stream_anthropic(proxy)


def test_unreachable_upstream_is_a_502() -> None:
    with ProxyServer(LoopRescueConfig(), "http://127.0.0.1:9") as proxy:
        response = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "api_error"


# --------------------------------------------------------------------------- mid-stream faults


@pytest.mark.parametrize("mode", MODES)
def test_connection_cut_mid_stream_is_an_in_band_error(
    upstream: ScriptedUpstream, mode: str
) -> None:
    upstream.enqueue(ScriptedResponse(reasoning="Thinking about it " * 20, text="x", cut_after=12))
    upstream.enqueue(ScriptedResponse(reasoning="Thinking about it " * 20, text="x", cut_after=12))
    with serve(upstream, mode=mode) as proxy:
        native = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        compat = httpx.post(proxy.base_url + "/v1/chat/completions", json=openai_body())
        assert_pool_idle(proxy)
    name, data = parse_sse(native.text)[-1]
    assert name == "error" and data["error"]["type"] == "api_error"
    assert "connection" in data["error"]["message"] or "ended" in data["error"]["message"]
    _, last = parse_sse(compat.text)[-1]
    assert last["error"]["type"] == "server_error"
    assert "[DONE]" not in compat.text


@pytest.mark.parametrize("mode", MODES)
def test_openai_sdk_raises_on_a_cut_stream(upstream: ScriptedUpstream, mode: str) -> None:
    upstream.enqueue(ScriptedResponse(text="partial answer " * 10, cut_after=6))
    with serve(upstream, mode=mode) as proxy:
        stream = openai_client(proxy).chat.completions.create(
            model="deepseek-chat", messages=[{"role": "user", "content": "go"}], stream=True
        )
        with pytest.raises(openai.APIError):
            for _ in stream:
                pass


@pytest.mark.parametrize("mode", MODES)
def test_in_band_upstream_error_keeps_its_type(upstream: ScriptedUpstream, mode: str) -> None:
    upstream.enqueue(ScriptedResponse(text="some text here", error_event_after=5))
    with serve(upstream, mode=mode) as proxy:
        native = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
    name, data = parse_sse(native.text)[-1]
    assert name == "error" and data["error"] == {
        "type": "overloaded_error",
        "message": "Overloaded",
    }


@pytest.mark.parametrize("mode", MODES)
def test_stalled_upstream_is_reported_and_closed(upstream: ScriptedUpstream, mode: str) -> None:
    upstream.enqueue(ScriptedResponse(text="slow answer", stall_after=4, stall_seconds=30))
    # the idle limit leaves a loaded machine time to send the head and the first frames
    with serve(upstream, mode=mode, **{"proxy.upstreamIdleTimeoutMs": 1000}) as proxy:
        native = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        assert upstream.wait_for(lambda u: u.requests[0].outcome != "pending")
        assert_pool_idle(proxy)
    name, data = parse_sse(native.text)[-1]
    assert name == "error" and "1000 ms" in data["error"]["message"]
    assert upstream.requests[0].client_disconnected


def test_a_stalled_upstream_is_not_read_on_once_the_stall_is_reported(
    upstream: ScriptedUpstream,
) -> None:
    # the upstream goes on 1.6 s later, after the proxy's 1 s idle limit and within the 1 s a
    # drain waits for a chunk: none of the rest may be read (every token of it is paid for)
    text = "word " * 60
    upstream.enqueue(ScriptedResponse(text=text, stall_after=4, stall_seconds=1.6))
    with serve(upstream, **{"proxy.upstreamIdleTimeoutMs": 1000}) as proxy:
        native = httpx.post(
            proxy.base_url + "/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        assert upstream.wait_for(lambda u: u.requests[0].outcome != "pending")
    name, data = parse_sse(native.text)[-1]
    assert name == "error" and "1000 ms" in data["error"]["message"], native.text
    assert upstream.requests[0].client_disconnected, upstream.requests[0].outcome
    assert upstream.requests[0].events_sent == 4


def test_client_disconnect_cancels_the_upstream_request(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(ScriptedResponse(text="word " * 400, delay=0.02, delta_chars=(5, 5)))
    with serve(upstream) as proxy:
        with httpx.stream(
            "POST",
            proxy.base_url + "/v1/messages",
            json=anthropic_body(),
            headers=ANTHROPIC_HEADERS,
        ) as response:
            lines = response.iter_lines()
            seen = [next(lines) for _ in range(12)]
        assert any("text_delta" in line for line in seen)
        assert upstream.wait_for(lambda u: u.requests[0].outcome != "pending")
        assert upstream.requests[0].client_disconnected
        assert proxy.app.state.totals.upstream_cancelled == 1
        assert upstream.requests[0].events_sent < 100
        assert_pool_idle(proxy)


# --------------------------------------------------------------------------- resume faults


def test_resume_that_never_answers_ends_with_an_error(upstream: ScriptedUpstream) -> None:
    record = reasoning_loop()
    upstream.enqueue(
        corpus_response(record),
        ScriptedResponse(text="too late", stall_after=0, stall_seconds=30),
    )
    with serve(upstream, resumeTimeoutMs=300) as proxy:
        with pytest.raises(anthropic.APIStatusError, match="no response within 300 ms"):
            stream_anthropic(proxy)
        assert upstream.wait_for(lambda u: all(r.outcome != "pending" for r in u.requests))
        assert_pool_idle(proxy)


@pytest.mark.parametrize(
    ("status", "error_type", "sdk_error"),
    [
        (429, "rate_limit_error", anthropic.RateLimitError),
        (529, "overloaded_error", anthropic.OverloadedError),
        (500, "api_error", anthropic.InternalServerError),
    ],
)
def test_a_failed_resume_reaches_the_client_as_that_error(
    upstream: ScriptedUpstream, status: int, error_type: str, sdk_error: type
) -> None:
    failing = ScriptedResponse(status=status, retry_after=7)
    upstream.enqueue(corpus_response(reasoning_loop()), failing)
    upstream.enqueue(corpus_response(reasoning_loop()), failing)
    with serve(upstream) as proxy:
        # streamed: the protocol's error event, with the upstream's error type
        with pytest.raises(anthropic.APIStatusError) as raised:
            stream_anthropic(proxy)
        assert error_type in str(raised.value)
        # whole: nothing was sent yet, so the client gets the status and its Retry-After
        answer = httpx.post(
            proxy.base_url + "/v1/messages",
            json={**anthropic_body(), "stream": False, "max_tokens": 32000},
            headers=ANTHROPIC_HEADERS,
        )
    assert answer.status_code == status, answer.text[:300]
    assert answer.headers["retry-after"] == "7"
    assert answer.json()["error"]["type"] == error_type
    client = anthropic.Anthropic(base_url="http://x", api_key="k", max_retries=0)
    # the SDK's own mapping of that answer is its error for the status
    assert isinstance(client._make_status_error_from_response(answer), sdk_error)


def test_consecutive_rescue_cap_over_http(upstream: ScriptedUpstream) -> None:
    record = reasoning_loop()
    upstream.enqueue(corpus_response(record), CONTINUATION, corpus_response(record))
    headers = {"x-looprescue-session": "conv-7"}
    with serve(upstream, maxConsecutiveRescues=1) as proxy:
        client = anthropic.Anthropic(
            base_url=proxy.base_url, api_key="k", max_retries=0, default_headers=headers
        )
        for expected_requests in (2, 3):
            with client.messages.stream(
                model="deepseek-flash",
                max_tokens=4096,
                messages=[{"role": "user", "content": "go"}],
            ) as stream:
                final = stream.get_final_message()
            assert len(upstream.agent_requests()) == expected_requests
    notes = "".join(b.text for b in final.content if b.type == "text")
    assert "automatic resumes in a row" in notes


def test_independent_requests_share_no_rescue_count(upstream: ScriptedUpstream) -> None:
    # the same prompt four times, on both routes, no session identifier: four conversations
    record = reasoning_loop()
    for _ in range(4):
        upstream.enqueue(corpus_response(record), CONTINUATION)
    with serve(upstream, maxConsecutiveRescues=3) as proxy:
        answers = [stream_anthropic(proxy) for _ in range(2)]
        answers += [stream_openai(proxy) for _ in range(2)]
    for got in answers:
        assert "automatic resumes in a row" not in got["text"]
        assert got["text"] == CONTINUATION.text
    assert len(upstream.agent_requests()) == 8


# --------------------------------------------------------------------------- pass-through


def test_other_paths_pass_through(upstream: ScriptedUpstream) -> None:
    with serve(upstream) as proxy:
        models = httpx.get(proxy.base_url + "/v1/models?limit=5", headers={"x-api-key": "k"})
        missing = httpx.post(proxy.base_url + "/v1/embeddings", content=b"not json")
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "deepseek-flash"
    first, second = upstream.requests
    assert first.path == "/v1/models" and first.query == "limit=5"
    assert missing.status_code == 404 and second.raw_body == b"not json"


def test_unwatched_model_passes_a_loop_through(upstream: ScriptedUpstream) -> None:
    record = reasoning_loop()
    upstream.enqueue(corpus_response(record))
    with serve(upstream, models=["qwen-*"]) as proxy:
        got = stream_anthropic(proxy)
        assert proxy.app.state.totals.responses == 0
    assert got["reasoning"] == record["text"]


def test_stall_nudge_is_added_after_reasoning_only_responses(upstream: ScriptedUpstream) -> None:
    thinking = "I should consider the layers of the configuration loader carefully. " * 3
    for _ in range(2):
        upstream.enqueue(ScriptedResponse(reasoning=thinking))
    upstream.enqueue(ScriptedResponse(text="Answer."))
    with serve(upstream, stallCalls=2, stallMinReasoningChars=100) as proxy:
        # one conversation: the client names its session
        client = openai_client(proxy).with_options(default_headers={"session_id": "s-1"})
        for _ in range(3):
            stream = client.chat.completions.create(
                model="deepseek-chat",
                messages=[{"role": "user", "content": "Explain the loader."}],
                stream=True,
            )
            for _ in stream:
                pass
    bodies = [r.body for r in upstream.agent_requests()]
    assert [len(b["messages"]) for b in bodies] == [1, 1, 2]
    assert "only reasoning" in bodies[2]["messages"][-1]["content"]


@pytest.mark.parametrize("mode", MODES)
def test_bad_json_from_upstream_is_a_malformed_error(upstream: ScriptedUpstream, mode: str) -> None:
    garbage: Any = "not json"
    upstream.enqueue(ScriptedResponse(text="x", error_event_after=3, error_event=garbage))
    with serve(upstream, mode=mode) as proxy:
        compat = httpx.post(proxy.base_url + "/v1/chat/completions", json=openai_body())
    _, last = parse_sse(compat.text)[-1]
    assert "invalid JSON" in json.dumps(last)


def test_disconnect_before_upstream_headers_cancels_the_upstream(
    upstream: ScriptedUpstream,
) -> None:
    """The upstream has not even answered yet (non-streaming stall) when the client leaves."""
    upstream.enqueue(ScriptedResponse(text="late", stall_after=0, stall_seconds=60))
    with serve(upstream) as proxy:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                proxy.base_url + "/v1/messages",
                json=anthropic_body(stream=False),
                headers=ANTHROPIC_HEADERS,
                timeout=httpx.Timeout(5, read=0.5),
            )
        assert upstream.wait_for(lambda u: u.requests and u.requests[0].outcome != "pending")
        assert upstream.requests[0].client_disconnected
        assert proxy.app.state.totals.upstream_cancelled == 1
        assert_pool_idle(proxy)
