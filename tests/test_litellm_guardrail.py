"""looprescue as a LiteLLM guardrail, inside the real LiteLLM proxy: LiteLLM's own controls
say which requests it runs on, and ``looprescue`` settings in metadata change its config per
request (and per key and team, which a LiteLLM with a database stores; their merge is tested
in process here)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from litellm.proxy._types import UserAPIKeyAuth
from tests.support.litellm_gateway import MASTER_KEY, LiteLLMProxy
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    ToolCall,
    corpus_response,
)
from tests.test_litellm_callback import CONFIG, CONTINUATION, REASONING_LOOP, TEXT_LOOP, kept

from looprescue.integrations.litellm import LoopRescueGuardrail, request_settings
from looprescue.pruning import cut_text, first_hit

GUARDRAIL = {
    "guardrail_name": "looprescue",
    "litellm_params": {
        "guardrail": "looprescue.integrations.litellm.LoopRescueGuardrail",
        "mode": ["pre_call", "post_call"],
        "default_on": False,  # each request opts in, as a key or team would
    },
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiteLLMProxy, Any]]:
    with ScriptedUpstream() as upstream:
        proxy = LiteLLMProxy(
            upstream, tmp_path_factory.mktemp("litellm"), {"guardrails": [GUARDRAIL]}
        )
        try:
            proxy.wait()
            yield proxy, upstream
        finally:
            proxy.stop()


def chat(gateway: Any, *script: Any, **extra: Any) -> tuple[str, list[Any]]:
    """A streamed chat completion through the gateway, ``script`` what the upstream answers."""
    proxy, upstream = gateway
    upstream.clear_requests()
    upstream.enqueue(*script)
    client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=MASTER_KEY, max_retries=0)
    stream = client.chat.completions.create(
        model="deepseek-chat",
        messages=[{"role": "user", "content": "Go."}],
        stream=True,
        extra_body=extra,
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    sent = [r for r in upstream.agent_requests() if r.path.endswith("/chat/completions")]
    return text, sent


def test_off_unless_asked_for(gateway):
    text, sent = chat(gateway, corpus_response(TEXT_LOOP))
    assert text.startswith(TEXT_LOOP["text"][:2000])  # the loop went through untouched
    assert len(sent) == 1


def test_a_request_that_asks_for_it_is_rescued(gateway):
    text, sent = chat(gateway, corpus_response(TEXT_LOOP), CONTINUATION, guardrails=["looprescue"])
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)
    assert TEXT_LOOP["text"][len(kept(TEXT_LOOP)) :][:200] not in text
    assert len(sent) == 2 and "[looprescue]" in sent[1].text()


def test_request_settings_change_the_config(gateway):
    text, sent = chat(
        gateway,
        corpus_response(TEXT_LOOP),
        guardrails=["looprescue"],
        metadata={"looprescue": {"mode": "observe"}},
    )
    assert text.startswith(TEXT_LOOP["text"][:2000])  # observed, not cut
    assert len(sent) == 1


def test_bad_settings_are_a_400_naming_the_key(gateway):
    with pytest.raises(openai.BadRequestError) as caught:
        chat(gateway, guardrails=["looprescue"], metadata={"looprescue": {"mode": "sometimes"}})
    assert "mode" in str(caught.value)


def test_messages_are_rescued_too(gateway):
    proxy, upstream = gateway
    upstream.clear_requests()
    upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    client = anthropic.Anthropic(base_url=proxy.base_url, api_key=MASTER_KEY, max_retries=0)
    with client.messages.stream(
        model="claude-scripted",
        max_tokens=4000,
        messages=[{"role": "user", "content": "Go."}],
        extra_body={"guardrails": ["looprescue"]},
    ) as events:
        message = events.get_final_message()
    thinking = "".join(b.thinking for b in message.content if b.type == "thinking")
    assert thinking.startswith(kept(REASONING_LOOP)) and thinking.endswith(CONTINUATION.reasoning)


def test_team_then_key_then_request_settings():
    key = UserAPIKeyAuth(
        metadata={"looprescue": {"mode": "cut", "detector": {"poolWindow": 40}}},
        team_metadata={"looprescue": {"mode": "observe", "marker": False}},
    )
    data = {"metadata": {"looprescue": {"detector": {"poolWindow": 50}}}}
    assert request_settings(key, data) == {
        "mode": "cut",
        "marker": False,
        "detector": {"poolWindow": 50},
    }
    assert request_settings(UserAPIKeyAuth(), {}) == {}


def test_a_key_can_turn_it_off():
    asyncio.run(_key_turns_it_off())


async def _key_turns_it_off() -> None:
    guardrail = LoopRescueGuardrail(default_on=True)
    key = UserAPIKeyAuth(metadata={"looprescue": {"enabled": False}})
    data = {
        "litellm_call_id": "call-1",
        "model": "deepseek-chat",
        "messages": [{"role": "user", "content": "Go."}],
        "stream": True,
    }
    assert await guardrail.async_pre_call_hook(key, None, dict(data), "acompletion") == data
    assert not guardrail.core._pending
    await guardrail.async_pre_call_hook(UserAPIKeyAuth(), None, dict(data), "acompletion")
    assert "call-1" in guardrail.core._pending  # on by default for a key that says nothing


def responses(gateway: Any, stream: bool, *script: Any, **extra: Any) -> tuple[Any, list[Any]]:
    """A Responses API call through the gateway (``responses.stream`` or ``responses.create``),
    ``script`` what the upstream answers; the final response and the requests sent upstream."""
    proxy, upstream = gateway
    upstream.clear_requests()
    upstream.enqueue(*script)
    client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=MASTER_KEY, max_retries=0)
    request = {"model": "deepseek-chat", "input": extra.pop("input", "Go."), "extra_body": extra}
    if stream:
        with client.responses.stream(**request) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**request)
    sent = [r for r in upstream.agent_requests() if r.path.endswith("/responses")]
    return response, sent


@pytest.mark.parametrize("stream", [True, False])
def test_responses_are_rescued(gateway, stream):
    response, sent = responses(
        gateway, stream, corpus_response(TEXT_LOOP), CONTINUATION, guardrails=["looprescue"]
    )
    text = response.output_text
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)
    assert TEXT_LOOP["text"][len(kept(TEXT_LOOP)) :][:200] not in text
    first, continuation = sent
    assert continuation.body["input"][1]["content"][0]["text"] == kept(TEXT_LOOP)
    assert "[looprescue]" in continuation.text() and "[looprescue]" not in first.text()


def test_responses_are_rescued_only_when_asked_for(gateway):
    response, sent = responses(gateway, True, corpus_response(TEXT_LOOP))
    assert response.output_text == TEXT_LOOP["text"]  # the loop went through untouched
    assert len(sent) == 1
    script = (corpus_response(TEXT_LOOP), CONTINUATION)
    response, sent = responses(gateway, True, *script, guardrails=["looprescue"])
    assert response.output_text.endswith(CONTINUATION.text) and len(sent) == 2


@pytest.mark.parametrize("stream", [True, False])
def test_healthy_responses_and_their_calls_pass(gateway, stream):
    """A healthy answer arrives as the upstream sent it, with its function call whole even when
    the call's arguments repeat themselves, while the loop in the history (which shows the hook
    ran) is cut out on the way in."""
    call = ToolCall("write_file", {"path": "notes.md", "content": TEXT_LOOP["text"]})
    healthy = ScriptedResponse(text="Writing it now.", tool_calls=[call])
    history = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": [{"type": "output_text", "text": TEXT_LOOP["text"]}]},
        {"role": "user", "content": "Go on."},
    ]
    response, sent = responses(gateway, stream, healthy, guardrails=["looprescue"], input=history)
    assert response.output_text == "Writing it now."
    calls = [(i.name, i.arguments) for i in response.output if i.type == "function_call"]
    assert calls == [("write_file", call.arguments_json())]
    (request,) = sent
    hit = first_hit(TEXT_LOOP["text"], "text", CONFIG)
    assert hit is not None
    cut = cut_text(TEXT_LOOP["text"], hit.prune_offset, "text")
    assert cut is not None
    assert request.body["input"][1]["content"][0]["text"] == cut.text
    assert request.body["input"][2] == history[2]


def litellm_headers(raw: Any) -> set[str]:
    """The response headers LiteLLM's proxy writes from the answer's hidden params."""
    names = {name.lower() for name in raw.headers}
    wanted = ("x-litellm-model-id", "x-litellm-model-api-base", "x-litellm-response-cost")
    return {name for name in names if name in wanted or name.startswith("llm_provider-")}


@pytest.mark.parametrize("route", ["chat", "responses"])
def test_a_rescued_whole_answer_keeps_litellm_headers(gateway, route):
    proxy, upstream = gateway
    client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=MASTER_KEY, max_retries=0)

    def call(*script: Any, **extra: Any) -> Any:
        upstream.clear_requests()
        upstream.enqueue(*script)
        if route == "chat":
            messages = [{"role": "user", "content": "Go."}]
            return client.chat.completions.with_raw_response.create(
                model="deepseek-chat", messages=messages, extra_body=extra
            )
        return client.responses.with_raw_response.create(
            model="deepseek-chat", input="Go.", extra_body=extra
        )

    plain = litellm_headers(call(ScriptedResponse(text="Hello.")))
    assert "x-litellm-model-id" in plain
    raw = call(corpus_response(TEXT_LOOP), CONTINUATION, guardrails=["looprescue"])
    answer = raw.parse()
    text = answer.choices[0].message.content if route == "chat" else answer.output_text
    assert text.endswith(CONTINUATION.text)  # rescued, and yet
    assert litellm_headers(raw) >= plain
