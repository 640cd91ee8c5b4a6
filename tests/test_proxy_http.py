"""The proxy over real HTTP on 127.0.0.1: real anthropic/openai clients -> proxy -> scripted
upstream. Loops from the corpus must be pruned and resumed without any loop text reaching the
client; healthy streams must arrive with identical content."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import uvicorn
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    ToolCall,
    corpus_response,
    load_corpus,
)

from looprescue.config import LoopRescueConfig, load_config
from looprescue.detect import scan_text
from looprescue.proxy.app import create_app


class ProxyServer:
    """``create_app`` served by uvicorn in a thread on an ephemeral loopback port."""

    def __init__(self, config: LoopRescueConfig, upstream_url: str, **app_options: Any) -> None:
        self.app = create_app(config, upstream_url, **app_options)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                log_config=None,
                log_level=None,
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=2,
            )
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def totals(self) -> Any:
        return self.app.state.totals

    def __enter__(self) -> ProxyServer:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "proxy did not start"
            time.sleep(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
        assert not self._thread.is_alive(), "proxy did not stop"


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def serve(upstream: ScriptedUpstream, **overrides: Any) -> ProxyServer:
    return ProxyServer(load_config(None, overrides), upstream.base_url)


def loop_records() -> list[dict[str, Any]]:
    return [r for r in load_corpus() if r["label"] == "loop" and scan_text(r["text"], r["channel"])]


def healthy_records() -> list[dict[str, Any]]:
    return [r for r in load_corpus() if r["label"] == "normal"]


CONTINUATION = ScriptedResponse(reasoning="Resuming without repeating.", text="Final answer.")


def anthropic_client(proxy: ProxyServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.base_url, api_key="test-key", max_retries=0)


def openai_client(proxy: ProxyServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="test-key", max_retries=0)


def stream_anthropic(proxy: ProxyServer, prompt: str = "Explain the loader.") -> dict[str, Any]:
    """Stream through the proxy with the anthropic SDK; return the assembled content."""
    client = anthropic_client(proxy)
    reasoning, text, tools, signatures = [], [], [], []
    with client.messages.stream(
        model="deepseek-flash",
        max_tokens=4096,
        messages=[{"role": "user", "content": prompt}],
        thinking={"type": "enabled", "budget_tokens": 2048},
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                if event.delta.type == "thinking_delta":
                    reasoning.append(event.delta.thinking)
                elif event.delta.type == "text_delta":
                    text.append(event.delta.text)
                elif event.delta.type == "signature_delta":
                    signatures.append(event.delta.signature)
        final = stream.get_final_message()
    for block in final.content:
        if block.type == "tool_use":
            tools.append((block.name, block.input))
    return {
        "reasoning": "".join(reasoning),
        "text": "".join(text),
        "tools": tools,
        "signatures": signatures,
        "final": final,
    }


def stream_openai(proxy: ProxyServer, prompt: str = "Explain the loader.") -> dict[str, Any]:
    client = openai_client(proxy)
    reasoning, text, finish, usage = [], [], [], []
    tool_args: dict[int, list[str]] = {}
    tool_names: dict[int, str] = {}
    stream = client.chat.completions.create(
        model="deepseek-chat",
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage.append(chunk.usage)
        for choice in chunk.choices:
            delta = choice.delta
            extra = getattr(delta, "model_extra", None) or {}
            if extra.get("reasoning_content"):
                reasoning.append(extra["reasoning_content"])
            if delta.content:
                text.append(delta.content)
            for call in delta.tool_calls or ():
                if call.function and call.function.name:
                    tool_names[call.index] = call.function.name
                if call.function and call.function.arguments:
                    tool_args.setdefault(call.index, []).append(call.function.arguments)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    tools = [(tool_names[i], json.loads("".join(tool_args.get(i, [])))) for i in sorted(tool_names)]
    return {
        "reasoning": "".join(reasoning),
        "text": "".join(text),
        "tools": tools,
        "finish": finish,
        "usage": usage,
    }


# --------------------------------------------------------------------------- loops


@pytest.mark.parametrize("record", loop_records(), ids=lambda r: r["id"])
def test_anthropic_loop_is_pruned_and_resumed(upstream: ScriptedUpstream, record: dict) -> None:
    upstream.enqueue(corpus_response(record), CONTINUATION)
    with serve(upstream) as proxy:
        got = stream_anthropic(proxy)
        totals = proxy.totals
    channel = record["channel"]
    (hit,) = scan_text(record["text"], channel)
    kept = record["text"][: hit.prune_offset]
    received = got[channel]
    assert received.startswith(kept)
    after = received[len(kept) :]
    assert after.startswith("\n〔") or after.startswith("〔"), after[:80]
    marker_end = after.index("〕") + 1
    continuation_part = after[marker_end:].lstrip("\n")
    expected_next = CONTINUATION.reasoning if channel == "reasoning" else CONTINUATION.text
    assert continuation_part == expected_next
    assert totals.leaked_loop_chars == 0 and totals.rescues == 1
    agent = upstream.agent_requests()
    assert len(agent) == 2
    # the continuation is the proxy's own request: no DSH once-only payloads, a correction
    correction = agent[1].body["messages"][-1]
    assert "without repeating" in json.dumps(correction)
    assert got["final"].stop_reason == "end_turn"
    # the pruned block is unsigned; only the continuation's thinking block is signed, and
    # after a text loop that block is not shown (no reasoning block follows text)
    assert len(got["signatures"]) == (1 if channel == "reasoning" else 0)


@pytest.mark.parametrize("record", loop_records(), ids=lambda r: r["id"])
def test_openai_loop_is_pruned_and_resumed(upstream: ScriptedUpstream, record: dict) -> None:
    upstream.enqueue(corpus_response(record), CONTINUATION)
    with serve(upstream) as proxy:
        got = stream_openai(proxy)
        totals = proxy.totals
    channel = record["channel"]
    (hit,) = scan_text(record["text"], channel)
    kept = record["text"][: hit.prune_offset]
    received = got[channel]
    assert received.startswith(kept)
    after = received[len(kept) :]
    assert after.lstrip("\n").startswith("〔"), after[:80]
    tail = after[after.index("〕") + 1 :].lstrip("\n")
    if channel == "reasoning":
        assert tail == CONTINUATION.reasoning and got["text"] == CONTINUATION.text
    else:
        assert tail == CONTINUATION.text
    assert got["finish"] == ["stop"] and len(got["usage"]) == 1
    assert totals.leaked_loop_chars == 0 and totals.rescues == 1
    assert len(upstream.agent_requests()) == 2


def test_a_continuation_that_loops_at_once_is_resumed_again(upstream: ScriptedUpstream) -> None:
    """A short loop in a fast continuation arrives whole in its first read: the next
    continuation must follow from there, and the response still end with its finish."""
    record = next(r for r in loop_records() if r["channel"] == "reasoning")
    upstream.enqueue(corpus_response(record), corpus_response(record, seed=1), CONTINUATION)
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "Go."}]}
    with serve(upstream) as proxy:
        # read whole: the proxy writes each step as it comes, the client takes them later
        response = httpx.post(
            proxy.base_url + "/v1/chat/completions", json={**body, "stream": True}, timeout=30
        )
        totals = proxy.totals
    chunks = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert chunks[-1] == "[DONE]"
    deltas = [json.loads(c)["choices"][0] for c in chunks[:-1]]
    reasoning = "".join(d["delta"].get("reasoning_content") or "" for d in deltas)
    text = "".join(d["delta"].get("content") or "" for d in deltas)
    assert reasoning.count("〔") == 2 and text == CONTINUATION.text
    assert [d["finish_reason"] for d in deltas if d["finish_reason"]] == ["stop"]
    assert totals.rescues == 2 and len(upstream.agent_requests()) == 3


# --------------------------------------------------------------------------- healthy


@pytest.mark.parametrize("record", healthy_records(), ids=lambda r: r["id"])
def test_healthy_streams_pass_with_identical_content(
    upstream: ScriptedUpstream, record: dict
) -> None:
    calls = (ToolCall("read", {"file_path": "notes/a.txt"}),)
    # coarser deltas than the default keep the long texts quick; content is what is compared
    for _ in range(2):
        upstream.enqueue(corpus_response(record, tool_calls=calls, delta_chars=(4, 24)))
    with serve(upstream) as proxy:
        via_anthropic = stream_anthropic(proxy)
        via_openai = stream_openai(proxy)
        totals = proxy.totals
    for got in (via_anthropic, via_openai):
        assert got[record["channel"]] == record["text"]
        assert got["tools"] == [("read", {"file_path": "notes/a.txt"})]
        assert "〔" not in got["reasoning"] + got["text"]
    assert via_anthropic["final"].stop_reason == "tool_use"
    assert via_openai["finish"] == ["tool_calls"]
    assert totals.detections == 0 and len(upstream.agent_requests()) == 2


def test_unchanged_request_bodies_are_forwarded_byte_for_byte(upstream: ScriptedUpstream) -> None:
    body = (
        b'{"model":"deepseek-flash","stream":true,"max_tokens":4096,'
        b'"messages":[{"role":"user","content":"hi"}],"dsh_session_log":{"version":1},'
        b'"dsh_plugin_packages":{"version":1,"packages":[]}}'
    )
    upstream.enqueue(ScriptedResponse(text="Hello."))
    with serve(upstream) as proxy:
        response = httpx.post(
            proxy.base_url + "/v1/messages",
            content=body,
            headers={
                "x-api-key": "secret-key",
                "anthropic-version": "2023-06-01",
                "x-deepseek-harness-session-id": "session-1",
                "content-type": "application/json",
            },
        )
    assert response.status_code == 200
    (recorded,) = upstream.agent_requests()
    assert recorded.raw_body == body
    assert recorded.headers["x-api-key"] == "secret-key"
    assert recorded.headers["x-deepseek-harness-session-id"] == "session-1"


# --------------------------------------------------------------------------- non-streaming


def test_non_streaming_anthropic_loop_is_rescued(upstream: ScriptedUpstream) -> None:
    record = next(r for r in loop_records() if r["channel"] == "text")
    (hit,) = scan_text(record["text"], "text")
    upstream.enqueue(corpus_response(record), CONTINUATION)
    with serve(upstream) as proxy:
        message = anthropic_client(proxy).messages.create(
            model="deepseek-flash", max_tokens=4096, messages=[{"role": "user", "content": "go"}]
        )
    texts = "".join(b.text for b in message.content if b.type == "text")
    assert texts.startswith(record["text"][: hit.prune_offset])
    assert record["text"][hit.prune_offset :] not in texts
    assert texts.endswith(CONTINUATION.text)
    assert [r.stream for r in upstream.agent_requests()] == [False, False]


def test_non_streaming_openai_cut_mode_returns_the_pruned_message(
    upstream: ScriptedUpstream,
) -> None:
    record = next(r for r in loop_records() if r["channel"] == "reasoning")
    (hit,) = scan_text(record["text"], "reasoning")
    upstream.enqueue(corpus_response(record, answer="lost"))
    with serve(upstream, mode="cut") as proxy:
        completion = openai_client(proxy).chat.completions.create(
            model="deepseek-chat", messages=[{"role": "user", "content": "go"}]
        )
    message = completion.choices[0].message
    reasoning = (message.model_extra or {})["reasoning_content"]
    assert reasoning.startswith(record["text"][: hit.prune_offset])
    assert len(reasoning) < hit.prune_offset + 80  # kept prefix + the one-line marker
    # the answer says what happened (the loop left no text of the model's)
    assert "repeating itself in its reasoning" in (message.content or "")
    assert completion.choices[0].finish_reason == "stop"
    assert len(upstream.agent_requests()) == 1


# --------------------------------------------------------------------------- audit


def test_audit_log_records_detection_cut_and_resume(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    record = next(r for r in loop_records() if r["channel"] == "reasoning")
    (hit,) = scan_text(record["text"], "reasoning")
    audit = tmp_path / "audit" / "rescue.jsonl"
    upstream.enqueue(corpus_response(record), CONTINUATION)
    with serve(upstream, **{"proxy.auditLog": str(audit)}) as proxy:
        stream_anthropic(proxy)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["detection", "cut", "resume", "rung"]
    assert lines[2]["rung"] == "sampling" and lines[3]["outcome"] == "finished"
    detection = lines[0]
    assert detection["rule"] == hit.rule and detection["prune_offset"] == hit.prune_offset
    assert detection["loop_text"] and record["text"].startswith(
        record["text"][: hit.prune_offset] + detection["loop_text"][:20]
    )
    assert detection["chars_pruned"] == len(detection["loop_text"])
    assert isinstance(detection["elapsed_ms"], int)
    assert "test-key" not in audit.read_text()
    assert audit.stat().st_mode & 0o777 == 0o600


def test_concurrent_streams_are_rescued_independently(upstream: ScriptedUpstream) -> None:
    """Several conversations at once, half of them looping: each gets its own right answer."""
    loops = [r for r in loop_records() if r["channel"] == "reasoning"]
    cases = range(8)

    def mine(case: int, continuation: bool) -> Any:
        def match(request: Any) -> bool:
            text = request.text(include_dsh_extensions=False)
            return f"case-{case}." in text and ("[looprescue]" in text) == continuation

        return match

    for case in cases:
        if case % 2 == 0:
            record = loops[case // 2 % len(loops)]
            upstream.enqueue(corpus_response(record, match=mine(case, False), seed=case))
            upstream.enqueue(ScriptedResponse(text=f"Answer {case}.", match=mine(case, True)))
        else:
            upstream.enqueue(
                ScriptedResponse(
                    reasoning=f"Plain thinking {case}.",
                    text=f"Answer {case}.",
                    match=mine(case, False),
                )
            )
    with serve(upstream) as proxy, ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: stream_openai(proxy, f"Question case-{c}."), cases))
        totals = proxy.totals
    for case, got in zip(cases, results, strict=True):
        assert got["text"] == f"Answer {case}."
        if case % 2:
            assert got["reasoning"] == f"Plain thinking {case}."
        else:
            assert "〔" in got["reasoning"]
    assert totals.rescues == 4 and totals.leaked_loop_chars == 0 and totals.responses == 8
    assert upstream.remaining == 0


def test_observe_mode_passes_the_loop_and_audits_it(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    record = next(r for r in loop_records() if r["channel"] == "text")
    audit = tmp_path / "observe.jsonl"
    upstream.enqueue(corpus_response(record))
    with serve(upstream, mode="observe", **{"proxy.auditLog": str(audit)}) as proxy:
        got = stream_openai(proxy)
        totals = proxy.totals
    assert got["text"] == record["text"]
    assert totals.detections == 1 and totals.rescues == 0 and totals.cuts == 0
    (line,) = [json.loads(x) for x in audit.read_text().splitlines()]
    assert line["kind"] == "detection" and line["mode"] == "observe"
    assert len(upstream.agent_requests()) == 1


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_list_past_the_asked_range_ends_at_its_end_over_http(
    upstream: ScriptedUpstream, protocol: str
) -> None:
    count = ", ".join(str(n) for n in range(1, 121))
    upstream.enqueue(ScriptedResponse(reasoning="Counting.", text=count))
    prompt = "Print the numbers from 1 to 50."
    with serve(upstream, marker=False) as proxy:
        if protocol == "openai":
            got = stream_openai(proxy, prompt)
            assert got["finish"] == ["stop"]
        else:
            got = stream_anthropic(proxy, prompt)
        totals = proxy.totals
    assert got["text"] == count[: count.index("51, ")]  # everything asked for, nothing past it
    assert totals.cuts == 1 and totals.rescues == 0 and totals.leaked_loop_chars == 0
    assert len(upstream.agent_requests()) == 1  # finished, not resumed


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_finished_cut_closes_the_upstream_instead_of_reading_it_to_the_end(
    upstream: ScriptedUpstream, protocol: str
) -> None:
    # the answer is finished at the asked range's end: what the model would write after it is
    # paid for by the token, so the proxy must hang up, not read on so as to reuse the
    # connection
    count = ", ".join(str(n) for n in range(1, 401))
    upstream.enqueue(ScriptedResponse(text=count, delay=0.005))
    prompt = "Print the numbers from 1 to 50."
    with serve(upstream, marker=False) as proxy:
        got = (
            stream_openai(proxy, prompt)
            if protocol == "openai"
            else stream_anthropic(proxy, prompt)
        )
    assert got["text"] == count[: count.index("51, ")]
    (request,) = upstream.agent_requests()
    assert request.client_disconnected, request.outcome
    # the cut comes about 60 deltas in, the whole count takes about 470
    assert request.events_sent < 150, request.events_sent


def test_cut_mode_hangs_up_on_the_loop_it_cut(upstream: ScriptedUpstream) -> None:
    # paced, so that the rest of the answer is still to come when the loop is cut: read on
    # (to reuse the connection), up to 64 KB more of it would arrive and be paid for
    record = next(r for r in loop_records() if r["channel"] == "reasoning")
    upstream.enqueue(corpus_response(record, answer="never sent", delay=0.002))
    with serve(upstream, mode="cut") as proxy:
        got = stream_openai(proxy, "go")
    assert got["finish"] == ["stop"] and "never sent" not in got["text"]
    (request,) = upstream.agent_requests()
    assert request.client_disconnected, request.outcome
    # deltas carry 2-6 chars: up to the loop's confirmation there are at most half as many
    # as its chars, plus a few frames in flight when the hang-up arrives
    (hit,) = scan_text(record["text"], "reasoning")
    assert request.events_sent < hit.fired_at // 2 + 60, request.events_sent
