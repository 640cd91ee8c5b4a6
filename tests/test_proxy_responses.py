"""The OpenAI Responses API through the proxy over real HTTP on 127.0.0.1, with the real
``openai`` SDK (``responses.create`` and ``responses.stream``) and through ``wrap()``: loops in
reasoning summaries and output text are cut and resumed, function calls and items the engine
does not model pass unchanged, healthy answers arrive as they were sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    ToolCall,
    corpus_response,
)
from tests.test_litellm_callback import REASONING_LOOP, TEXT_LOOP, kept
from tests.test_proxy_http import ProxyServer, serve

import looprescue
from looprescue.wire.responses import ResponsesWire, response_events
from looprescue.wire.sse import SSEParser

CONTINUATION = ScriptedResponse(reasoning="Resuming without repeating.", text="Final answer.")


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def client_for(proxy: ProxyServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="test-key", max_retries=0)


def reasoning_of(response: Any) -> str:
    return "".join(
        part.text for item in response.output if item.type == "reasoning" for part in item.summary
    )


def sent(upstream: ScriptedUpstream) -> list[Any]:
    return [r for r in upstream.agent_requests() if r.path.endswith("/responses")]


def ask(client: openai.OpenAI, stream: bool, **extra: Any) -> Any:
    request = {"model": "gpt-scripted", "input": "Explain the loader.", **extra}
    if not stream:
        return client.responses.create(**request)
    with client.responses.stream(**request) as events:
        return events.get_final_response()


@pytest.mark.parametrize("stream", [True, False])
def test_a_text_loop_is_cut_and_resumed(upstream: ScriptedUpstream, stream: bool) -> None:
    upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    with serve(upstream) as proxy:
        response = ask(client_for(proxy), stream)
    text = response.output_text
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)
    assert TEXT_LOOP["text"][len(kept(TEXT_LOOP)) :][:200] not in text
    first, continuation = sent(upstream)
    # the continuation resends the input with the kept answer and the correction after it
    inputs = continuation.body["input"]
    assert inputs[0] == {"type": "message", "role": "user", "content": "Explain the loader."}
    assert inputs[1]["role"] == "assistant"
    assert inputs[1]["content"][0]["text"] == kept(TEXT_LOOP)
    assert "[looprescue]" in json.dumps(inputs[2]) and "[looprescue]" not in first.text()
    # one response id, as the SDK checks: the continuation's own never reaches the client
    assert response.id == "resp_scripted_0"
    assert response.usage.output_tokens > CONTINUATION.output_tokens  # both attempts count


@pytest.mark.parametrize("stream", [True, False])
def test_a_reasoning_summary_loop_is_cut(upstream: ScriptedUpstream, stream: bool) -> None:
    upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    with serve(upstream) as proxy:
        response = ask(client_for(proxy), stream, reasoning={"summary": "auto"})
    reasoning = reasoning_of(response)
    assert reasoning.startswith(kept(REASONING_LOOP))
    assert REASONING_LOOP["text"][len(kept(REASONING_LOOP)) :][:200] not in reasoning
    assert reasoning.endswith(CONTINUATION.reasoning)
    assert response.output_text.endswith(CONTINUATION.text)


@pytest.mark.parametrize("stream", [True, False])
def test_cut_mode_ends_with_a_whole_message_item(upstream: ScriptedUpstream, stream: bool) -> None:
    """``cut`` ends a reasoning loop with a visible note in a message the proxy opens itself:
    it must be a whole item (type, id, role), as clients such as Codex refuse one without."""
    upstream.enqueue(corpus_response(REASONING_LOOP))
    with serve(upstream, mode="cut") as proxy:
        response = ask(client_for(proxy), stream, reasoning={"summary": "auto"})
    assert len(sent(upstream)) == 1  # cut, not resumed
    assert all(item.type and item.id for item in response.output), response.output
    messages = [item for item in response.output if item.type == "message"]
    assert messages and messages[-1].role == "assistant"
    assert "cut here" in response.output_text
    assert len({item.id for item in response.output}) == len(response.output)


def test_previous_response_id_is_kept_on_the_continuation(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    with serve(upstream) as proxy:
        ask(client_for(proxy), True, previous_response_id="resp_earlier", store=True)
    _, continuation = sent(upstream)
    assert continuation.body["previous_response_id"] == "resp_earlier"
    assert continuation.body["store"] is True


@pytest.mark.parametrize("stream", [True, False])
def test_healthy_answers_and_function_calls_pass(upstream: ScriptedUpstream, stream: bool) -> None:
    call = ToolCall("read_file", {"path": "src/loader.py"})
    healthy = ScriptedResponse(
        reasoning="Read the loader first.", text="Reading it now.", tool_calls=[call]
    )
    upstream.enqueue(healthy, healthy)
    with serve(upstream) as proxy:
        through = ask(client_for(proxy), stream)
    direct_client = openai.OpenAI(base_url=upstream.base_url + "/v1", api_key="k", max_retries=0)
    direct = ask(direct_client, stream)
    assert through.output_text == direct.output_text == "Reading it now."
    assert reasoning_of(through) == reasoning_of(direct)
    calls = [
        (i.name, i.call_id, json.loads(i.arguments))
        for i in through.output
        if i.type == "function_call"
    ]
    direct_calls = [
        (i.name, i.call_id, json.loads(i.arguments))
        for i in direct.output
        if i.type == "function_call"
    ]
    # the same call; each answer's ids are the scripted upstream's, numbered per request
    assert [(name, args) for name, _, args in calls] == [("read_file", {"path": "src/loader.py"})]
    assert [(name, args) for name, _, args in direct_calls] == [(n, a) for n, _, a in calls]
    assert calls[0][1] == direct_calls[0][1].replace("_01_", "_00_")
    assert len(sent(upstream)) == 2


def test_observe_passes_the_stream_byte_for_byte(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(corpus_response(TEXT_LOOP), corpus_response(TEXT_LOOP))
    with serve(upstream, mode="observe") as proxy:
        body = {"model": "gpt-scripted", "input": "Go.", "stream": True}
        through = httpx.post(proxy.base_url + "/v1/responses", json=body, timeout=60).content
        direct = httpx.post(upstream.base_url + "/v1/responses", json=body, timeout=60).content
    # the two answers differ only in their own ids and times
    normal = lambda raw: raw.replace(b"resp_scripted_1", b"resp_scripted_0")  # noqa: E731
    assert _strip_times(normal(through)) == _strip_times(
        direct.replace(b"scripted_1", b"scripted_0")
    )


def _strip_times(raw: bytes) -> list[Any]:
    events = []
    for event in SSEParser().feed(raw):
        data = json.loads(event.data)
        if isinstance(data.get("response"), dict):
            data["response"].pop("created_at", None)
        events.append(data)
    return events


def test_items_the_engine_does_not_model_pass_in_rescue() -> None:
    """A web search call and a reasoning item with only its encrypted payload go through the
    encoder unchanged, between the items the engine watches."""
    body = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": "completed",
        "output": [
            {"id": "rs_0", "type": "reasoning", "summary": [], "encrypted_content": "opaque=="},
            {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"q": "x"}},
            {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Found it.", "annotations": []}],
            },
        ],
        "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
    }
    wire = ResponsesWire(body)
    from looprescue.config import LoopRescueConfig
    from looprescue.rescue.conversation import ConversationState
    from looprescue.rescue.engine import RescueEngine

    engine = RescueEngine(
        LoopRescueConfig(), wire, {"model": "m", "input": "x"}, ConversationState(), "en"
    )
    collector = wire.collector()
    for output in engine.start():
        collector.add(output)
    for event in response_events(body):
        for output in engine.feed(event):
            collector.add(output)
    result = collector.result()
    assert [item["id"] for item in result["output"]] == ["rs_0", "ws_1", "msg_2"]
    assert result["output"][0]["encrypted_content"] == "opaque=="
    assert result["output"][1] == body["output"][1]
    assert result["output"][2]["content"][0]["text"] == "Found it."


def test_wrap_rescues_responses(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    client = looprescue.wrap(
        openai.OpenAI(base_url=upstream.base_url + "/v1", api_key="k", max_retries=0)
    )
    with client.responses.stream(model="gpt-scripted", input="Explain the loader.") as events:
        text = events.get_final_response().output_text
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)


def test_the_conversation_is_read_from_instructions_and_input() -> None:
    from looprescue.rescue.conversation import conversation_key, conversation_language

    wire = ResponsesWire()
    zh = {"model": "m", "instructions": "You code.", "input": "请把这个函数改成异步的。"}
    other = {**zh, "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]}
    assert conversation_language(wire.conversation_view(zh)) == "zh"
    assert conversation_language(wire.conversation_view(other)) == "en"
    # a conversation is known by its first answer, or by the client's own key
    answered = {
        **zh,
        "input": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
            {"role": "user", "content": "Go on."},
        ],
    }
    key = conversation_key({}, wire.conversation_view(answered), wire.name)
    assert key is not None and key.startswith("responses/hash:")
    assert conversation_key({}, wire.conversation_view(zh), wire.name) is None
    keyed = {**zh, "prompt_cache_key": "codex-session-7"}
    assert "codex-session-7" in (conversation_key({}, wire.conversation_view(keyed)) or "")


def tool_turns(count: int, output: str = "a.txt\nb.txt") -> list[dict[str, Any]]:
    """``count`` identical calls of one tool, each answered with the same output."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    for number in range(count):
        call = {"type": "function_call", "call_id": f"call_{number}", "name": "shell"}
        items.append({**call, "arguments": '{"command":"ls"}'})
        items.append(
            {"type": "function_call_output", "call_id": f"call_{number}", "output": output}
        )
    return items


def test_tool_history_pairs_calls_with_their_outputs() -> None:
    from looprescue.guard.history import HUMAN_TURN, responses_tool_history

    steps = responses_tool_history({"input": tool_turns(2)})
    assert steps[0] is HUMAN_TURN
    assert [(s.name, s.arguments, s.result, s.failed) for s in steps[1:]] == [
        ("shell", '{"command":"ls"}', "a.txt\nb.txt", False)
    ] * 2
    failed = responses_tool_history({"input": tool_turns(1, "Error: no such file")})
    assert failed[1].failed


def test_a_request_after_tool_calls_goes_through(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(ScriptedResponse(text="Two files."))
    with serve(upstream) as proxy:
        response = ask(client_for(proxy), True, input=tool_turns(2))
    assert response.output_text == "Two files."
    assert sent(upstream)[0].body["input"] == tool_turns(2)  # unchanged


def test_a_tool_loop_on_responses_is_stopped(upstream: ScriptedUpstream) -> None:
    with serve(upstream) as proxy:
        body = {"model": "gpt-scripted", "input": tool_turns(8), "stream": True}
        reply = httpx.post(proxy.base_url + "/v1/responses", json=body, timeout=60)
    assert reply.status_code == 200
    assert reply.headers["looprescue-outcome"] == "tool-loop-stopped"
    assert sent(upstream) == []  # answered by the guard, the upstream never called
    assert b"response.completed" in reply.content
