"""History sanitization through the real proxy on 127.0.0.1: a request whose earlier assistant
messages carry a dev-corpus loop reaches the scripted upstream pruned, with the marker, and
everything else in it (tool calls, tool results, the last user message) exactly as sent; a
request with nothing to prune is forwarded byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from tests.support.scripted_upstream import (
    CORPUS_PATHS,
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    load_corpus,
)
from tests.test_proxy_http import CONTINUATION, ProxyServer, serve

from looprescue.config import LoopRescueConfig
from looprescue.pruning import cut_text, first_hit
from looprescue.rescue.sanitize import HistoryCache, sanitize_history
from looprescue.wire import jsonfast
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire

CONFIG = LoopRescueConfig()


@pytest.fixture
def upstream(scripted_upstream: ScriptedUpstream) -> ScriptedUpstream:
    return scripted_upstream


def corpus_loop(channel: str, preferred: str) -> dict[str, Any]:
    """A corpus loop of ``channel`` the detector finds, with text kept before it."""
    both = load_corpus(CORPUS_PATHS)
    records = [r for r in both if r["label"] == "loop" and r["channel"] == channel]
    records.sort(key=lambda r: r["id"] != preferred)
    for record in records:
        hit = first_hit(record["text"], channel, CONFIG)
        if hit is not None and 0 < hit.prune_offset < len(record["text"]):
            return record
    raise AssertionError(f"no {channel} loop in the corpus is found by the detector")


TEXT_LOOP = corpus_loop("text", "smollm2-en-explain-tcp-t0")
REASONING_LOOP = corpus_loop("reasoning", "mrwei-bleed-27953")


def pruned(record: dict[str, Any]) -> str:
    """What ``clean`` leaves of the record's text: the kept part and the marker line."""
    hit = first_hit(record["text"], record["channel"], CONFIG)
    assert hit is not None
    cut = cut_text(record["text"], hit.prune_offset, record["channel"])
    assert cut is not None and cut.marker is not None and cut.marker in cut.text
    return cut.text


def compact(value: Any) -> bytes:
    return jsonfast.dumps(value)


def assert_carried_exactly(raw_body: bytes, sent: Any, received: Any) -> None:
    """``received`` is ``sent``, and its bytes in the upstream's request are the compact JSON
    of what the client sent."""
    assert received == sent
    assert compact(received) == compact(sent)
    assert compact(sent) in raw_body


# --------------------------------------------------------------------------- OpenAI


def openai_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the build."},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": REASONING_LOOP["text"],
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "make"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "error: missing ; at line 3"},
        {"role": "assistant", "content": TEXT_LOOP["text"], "reasoning_content": "Short."},
        {"role": "user", "content": "Now do it again, without repeating yourself."},
    ]


def test_openai_history_loops_reach_the_upstream_pruned(upstream: ScriptedUpstream) -> None:
    messages = openai_history()
    upstream.enqueue(ScriptedResponse(reasoning="Fine.", text="Done."))
    with serve(upstream) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
        stream = client.chat.completions.create(
            model="deepseek-chat", messages=messages, stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        totals = proxy.totals
    assert text == "Done."
    (request,) = upstream.agent_requests()
    got = request.body["messages"]
    assert got[2]["reasoning_content"] == pruned(REASONING_LOOP)
    assert got[4]["content"] == pruned(TEXT_LOOP)
    assert got[4]["reasoning_content"] == "Short."
    assert_carried_exactly(request.raw_body, messages[2]["tool_calls"], got[2]["tool_calls"])
    assert_carried_exactly(request.raw_body, messages[3], got[3])  # the tool result
    assert_carried_exactly(request.raw_body, messages[5], got[5])  # the last user message
    assert [m["role"] for m in got] == [m["role"] for m in messages]
    removed = len(REASONING_LOOP["text"]) + len(TEXT_LOOP["text"])
    removed -= sum(
        first_hit(r["text"], r["channel"], CONFIG).prune_offset  # type: ignore[union-attr]
        for r in (REASONING_LOOP, TEXT_LOOP)
    )
    assert totals.history_removed_chars == removed


def test_a_reasoning_field_keeps_its_key_when_nothing_of_it_is_kept(
    upstream: ScriptedUpstream,
) -> None:
    """DeepSeek wants reasoning_content on assistant messages of tool-call turns: a loop from
    the first char with markers off leaves it empty, never absent."""
    text = "Checking the build. " * 60
    assert first_hit(text, "reasoning", CONFIG) is not None
    messages = openai_history()
    messages[2]["reasoning_content"] = text
    upstream.enqueue(ScriptedResponse(text="Done."))
    with serve(upstream, marker=False) as proxy:
        httpx.post(
            proxy.base_url + "/v1/chat/completions",
            json={"model": "deepseek-chat", "messages": messages},
        ).raise_for_status()
    got = upstream.agent_requests()[0].body["messages"][2]
    hit = first_hit(text, "reasoning", CONFIG)
    assert hit is not None
    assert got["reasoning_content"] == text[: hit.prune_offset]
    assert "reasoning_content" in got and got["tool_calls"] == messages[2]["tool_calls"]


# --------------------------------------------------------------------------- Anthropic


def anthropic_history(signature: str | None) -> list[dict[str, Any]]:
    thinking: dict[str, Any] = {"type": "thinking", "thinking": REASONING_LOOP["text"]}
    if signature is not None:
        thinking["signature"] = signature
    return [
        {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]},
        {
            "role": "assistant",
            "content": [
                thinking,
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "make"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "error: missing ;"}],
                    "is_error": True,
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": TEXT_LOOP["text"]}]},
        {"role": "user", "content": [{"type": "text", "text": "Again, without repeating."}]},
    ]


def send_anthropic(proxy: ProxyServer, messages: list[dict[str, Any]]) -> str:
    client = anthropic.Anthropic(base_url=proxy.base_url, api_key="k", max_retries=0)
    with client.messages.stream(
        model="deepseek-flash", max_tokens=512, messages=messages
    ) as stream:
        return "".join(stream.text_stream)


def test_anthropic_history_loops_reach_the_upstream_pruned(upstream: ScriptedUpstream) -> None:
    """An upstream that does not sign thinking: the thinking block stays, pruned like clean
    prunes it."""
    messages = anthropic_history(signature=None)
    upstream.enqueue(ScriptedResponse(text="Done."))
    with serve(upstream) as proxy:
        assert send_anthropic(proxy, messages) == "Done."
    (request,) = upstream.agent_requests()
    got = request.body["messages"]
    thinking, tool_use = got[1]["content"]
    assert thinking == {"type": "thinking", "thinking": pruned(REASONING_LOOP)}
    assert got[3]["content"] == [{"type": "text", "text": pruned(TEXT_LOOP)}]
    assert_carried_exactly(request.raw_body, messages[1]["content"][1], tool_use)
    assert_carried_exactly(request.raw_body, messages[2], got[2])  # the tool result
    assert_carried_exactly(request.raw_body, messages[4], got[4])  # the last user message


def test_a_signing_upstream_gets_no_unsigned_thinking(upstream: ScriptedUpstream) -> None:
    """The upstream signs thinking: a signed thinking block with a loop is dropped (its
    signature would no longer match), and so is an unsigned one the proxy pruned earlier;
    signed thinking without a loop goes as it came."""
    messages = anthropic_history(signature="sig-of-the-loop")
    earlier = {"type": "thinking", "thinking": "Plan.\n〔812 chars of repeated reasoning removed〕"}
    signed = {"type": "thinking", "thinking": "Resuming.", "signature": "sig-of-resume"}
    messages[3]["content"] = [earlier, signed, *messages[3]["content"]]
    upstream.enqueue(ScriptedResponse(text="Done."))
    with serve(upstream) as proxy:
        assert send_anthropic(proxy, messages) == "Done."
    (request,) = upstream.agent_requests()
    got = request.body["messages"]
    assert got[1]["content"] == [messages[1]["content"][1]]  # only the tool call is left
    assert got[3]["content"] == [signed, {"type": "text", "text": pruned(TEXT_LOOP)}]
    assert_carried_exactly(request.raw_body, signed, got[3]["content"][0])


def test_an_assistant_message_left_empty_is_dropped(upstream: ScriptedUpstream) -> None:
    messages = [
        {"role": "user", "content": "Think about it."},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": REASONING_LOOP["text"], "signature": "s"}],
        },
        {"role": "user", "content": "And now?"},
    ]
    upstream.enqueue(ScriptedResponse(text="Done."))
    with serve(upstream) as proxy:
        assert send_anthropic(proxy, messages) == "Done."
    got = upstream.agent_requests()[0].body["messages"]
    assert got == [messages[0], messages[2]]


# --------------------------------------------------------------------------- untouched


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/messages",
            b'{ "model": "deepseek-flash", "max_tokens": 64, "stream": true,\n'
            b'  "messages": [ {"role": "user", "content": "hi"},\n'
            b'    {"role": "assistant", "content": [{"type": "thinking", "thinking": "Let me see.",'
            b' "signature": "sig"}, {"type": "text", "text": "Hello \\u00e9!"}]},\n'
            b'    {"role": "user", "content": "again"} ] }',
        ),
        (
            "/v1/chat/completions",
            b'{"model": "deepseek-chat", "stream": true, "messages": [\n'
            b' {"role": "user", "content": "hi"},\n'
            b' {"role": "assistant", "content": "Hello.", "reasoning_content": "Let me see.",'
            b' "tool_calls": [{"id": "c", "type": "function",'
            b' "function": {"name": "f", "arguments": "{}"}}]},\n'
            b' {"role": "tool", "tool_call_id": "c", "content": "ok"},'
            b' {"role": "user", "content": "again"}]}',
        ),
    ],
    ids=["anthropic", "openai"],
)
def test_a_history_without_loops_is_forwarded_byte_for_byte(
    upstream: ScriptedUpstream, path: str, body: bytes
) -> None:
    upstream.enqueue(ScriptedResponse(text="Hello again."))
    with serve(upstream) as proxy:
        response = httpx.post(
            proxy.base_url + path, content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 200
    (request,) = upstream.agent_requests()
    assert request.raw_body == body


def test_sanitize_history_false_forwards_the_loop(upstream: ScriptedUpstream) -> None:
    messages = openai_history()
    body = json.dumps({"model": "deepseek-chat", "messages": messages}).encode()
    upstream.enqueue(ScriptedResponse(text="Done."))
    with serve(upstream, sanitizeHistory=False) as proxy:
        httpx.post(proxy.base_url + "/v1/chat/completions", content=body).raise_for_status()
    assert upstream.agent_requests()[0].raw_body == body


def test_a_final_assistant_message_is_a_prefill_and_left_alone(
    upstream: ScriptedUpstream,
) -> None:
    messages = [
        {"role": "user", "content": "Write it."},
        {"role": "assistant", "content": TEXT_LOOP["text"]},
    ]
    body = json.dumps({"model": "deepseek-flash", "max_tokens": 64, "messages": messages})
    upstream.enqueue(ScriptedResponse(text="More."))
    with serve(upstream) as proxy:
        httpx.post(proxy.base_url + "/v1/messages", content=body).raise_for_status()
    assert upstream.agent_requests()[0].raw_body == body.encode()


# --------------------------------------------------------------------------- accounting


def test_removed_chars_are_audited_and_observe_mode_only_records_them(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    messages = openai_history()
    body = json.dumps({"model": "deepseek-chat", "messages": messages}).encode()
    for mode in ("rescue", "observe"):
        audit = tmp_path / f"{mode}.jsonl"
        upstream.enqueue(ScriptedResponse(text="Done."))
        with serve(upstream, mode=mode, **{"proxy.auditLog": str(audit)}) as proxy:
            httpx.post(proxy.base_url + "/v1/chat/completions", content=body).raise_for_status()
        (line,) = [json.loads(x) for x in audit.read_text().splitlines()]
        assert line["kind"] == "history" and line["mode"] == mode
        assert {(c["message"], c["field"], c["action"]) for c in line["cuts"]} == {
            (2, "reasoning_content", "pruned"),
            (4, "content", "pruned"),
        }
        assert line["removed_chars"] == sum(c["removed_chars"] for c in line["cuts"]) > 0
        assert line["conversation"].startswith("openai/hash:")
        sent = upstream.agent_requests()[-1].raw_body
        assert (sent == body) is (mode == "observe")


def test_the_continuation_carries_the_sanitized_history(upstream: ScriptedUpstream) -> None:
    messages = openai_history()
    loop = corpus_loop("text", "smollm2-zh-explain-ai-t0")
    upstream.enqueue(corpus_response(loop), CONTINUATION)
    with serve(upstream) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
        stream = client.chat.completions.create(
            model="deepseek-chat", messages=messages, stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.endswith(CONTINUATION.text)
    first, continuation = upstream.agent_requests()
    for request in (first, continuation):
        assert request.body["messages"][4]["content"] == pruned(TEXT_LOOP)
        assert request.body["messages"][2]["reasoning_content"] == pruned(REASONING_LOOP)


# --------------------------------------------------------------------------- the cache


@pytest.mark.parametrize("wire", [OpenAIWire(), AnthropicWire()], ids=lambda w: w.name)
def test_a_conversation_scans_each_text_once(wire: Any) -> None:
    history = openai_history() if wire.name == "openai" else anthropic_history(None)
    cache = HistoryCache()
    body = {"model": "m", "messages": history}
    first = sanitize_history(wire, body, CONFIG, cache, "conversation-1")
    assert first.changed and first.scanned_chars >= len(TEXT_LOOP["text"])
    # the next turn: the same history plus one more exchange
    more = [*history, {"role": "assistant", "content": "Short answer."}, history[-1]]
    second = sanitize_history(
        wire, {"model": "m", "messages": more}, CONFIG, cache, "conversation-1"
    )
    assert second.scanned_chars == len("Short answer.")
    assert second.scanned_texts == 1
    assert second.cached_texts == first.cached_texts + first.scanned_texts
    assert [c.to_dict() for c in second.cuts] == [c.to_dict() for c in first.cuts]
    # another conversation has a cache of its own
    other = sanitize_history(wire, body, CONFIG, cache, "conversation-2")
    assert other.scanned_chars == first.scanned_chars


def test_the_cache_is_bounded() -> None:
    cache = HistoryCache(capacity=3)
    for number in range(10):
        cache.put("c", bytes([number]), ("", -1))
    assert len(cache) == 3
    assert cache.get("c", bytes([0])) is None and cache.get("c", bytes([9])) == ("", -1)
