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
from tests.support.scripted_upstream import ScriptedUpstream, corpus_response
from tests.test_litellm_callback import CONTINUATION, REASONING_LOOP, TEXT_LOOP, kept

from looprescue.integrations.litellm import LoopRescueGuardrail, request_settings

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
