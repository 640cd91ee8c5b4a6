"""The LiteLLM callback inside the real LiteLLM proxy (``litellm --config …`` on 127.0.0.1, a
subprocess), in front of the scripted upstream, with a real ``openai`` client talking to it: a
loop is cut and resumed, streamed and whole, and a loop in the history is cut out on the way in.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from tests.support.litellm_gateway import MASTER_KEY, LiteLLMProxy
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    load_corpus,
)

from looprescue.config import LoopRescueConfig
from looprescue.pruning import cut_text, first_hit

CONTINUATION = ScriptedResponse(reasoning="Resuming without repeating.", text="Final answer.")
CONFIG = LoopRescueConfig()


def loop_record(channel: str) -> dict[str, Any]:
    for record in load_corpus():
        if record["label"] == "loop" and record["channel"] == channel:
            hit = first_hit(record["text"], channel, CONFIG)
            if hit is not None and 0 < hit.prune_offset < len(record["text"]) - 200:
                return record
    raise AssertionError(f"no {channel} loop in the corpus is found by the detector")


REASONING_LOOP = loop_record("reasoning")
TEXT_LOOP = loop_record("text")


def kept(record: dict[str, Any]) -> str:
    hit = first_hit(record["text"], record["channel"], CONFIG)
    assert hit is not None
    return record["text"][: hit.prune_offset]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiteLLMProxy, Any]]:
    with ScriptedUpstream() as upstream:
        settings = {"litellm_settings": {"callbacks": "looprescue.integrations.litellm.rescue"}}
        proxy = LiteLLMProxy(upstream, tmp_path_factory.mktemp("litellm"), settings)
        try:
            proxy.wait()
            yield proxy, upstream
        finally:
            proxy.stop()


@pytest.fixture
def setup(gateway: tuple[LiteLLMProxy, ScriptedUpstream]) -> tuple[openai.OpenAI, Any]:
    proxy, upstream = gateway
    upstream.clear_requests()
    client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=MASTER_KEY, max_retries=0)
    return client, upstream


def agent_requests(upstream: ScriptedUpstream) -> list[Any]:
    return [r for r in upstream.agent_requests() if r.path.endswith("/chat/completions")]


def test_a_streamed_loop_is_cut_and_resumed(setup: tuple[openai.OpenAI, Any]) -> None:
    client, upstream = setup
    upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    stream = client.chat.completions.create(
        model="deepseek-chat", messages=[{"role": "user", "content": "Go."}], stream=True
    )
    reasoning, text = [], []
    for chunk in stream:
        for choice in chunk.choices:
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
            text.append(choice.delta.content or "")
    got = "".join(reasoning)
    assert got.startswith(kept(REASONING_LOOP))
    after = got[len(kept(REASONING_LOOP)) :].lstrip("\n")
    assert after.startswith("〔") and after.endswith(CONTINUATION.reasoning), after[:120]
    assert "".join(text) == CONTINUATION.text
    first, continuation = agent_requests(upstream)
    assert "[looprescue]" in continuation.text() and "[looprescue]" not in first.text()


def test_a_whole_loop_is_cut_and_resumed(setup: tuple[openai.OpenAI, Any]) -> None:
    client, upstream = setup
    upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    completion = client.chat.completions.create(
        model="deepseek-chat", messages=[{"role": "user", "content": "Go."}]
    )
    text = completion.choices[0].message.content or ""
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)
    assert "〔" in text and TEXT_LOOP["text"][len(kept(TEXT_LOOP)) :][:200] not in text
    assert len(agent_requests(upstream)) == 2


def test_the_history_is_sanitized_on_the_way_in(setup: tuple[openai.OpenAI, Any]) -> None:
    client, upstream = setup
    upstream.enqueue(ScriptedResponse(text="Done."))
    history = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": TEXT_LOOP["text"]},
        {"role": "user", "content": "Go on."},
    ]
    stream = client.chat.completions.create(model="deepseek-chat", messages=history, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Done."
    (request,) = agent_requests(upstream)
    hit = first_hit(TEXT_LOOP["text"], "text", CONFIG)
    assert hit is not None
    cut = cut_text(TEXT_LOOP["text"], hit.prune_offset, "text")
    assert cut is not None
    assert request.body["messages"][1]["content"] == cut.text
    assert request.body["messages"][2] == history[2]


def claude(gateway: tuple[LiteLLMProxy, ScriptedUpstream]) -> anthropic.Anthropic:
    proxy, upstream = gateway
    upstream.clear_requests()
    return anthropic.Anthropic(base_url=proxy.base_url, api_key=MASTER_KEY, max_retries=0)


def message_requests(upstream: ScriptedUpstream) -> list[Any]:
    return [r for r in upstream.agent_requests() if r.path.endswith("/v1/messages")]


@pytest.mark.parametrize("stream", [True, False])
def test_messages_through_litellm_are_rescued(
    gateway: tuple[LiteLLMProxy, ScriptedUpstream], stream: bool
) -> None:
    """``/v1/messages`` (LiteLLM's Anthropic route) is rescued as chat completions are."""
    _, upstream = gateway
    client = claude(gateway)
    upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    request = {
        "model": "claude-scripted",
        "max_tokens": 4000,
        "messages": [{"role": "user", "content": "Go."}],
    }
    if stream:
        with client.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**request)
    thinking = "".join(b.thinking for b in message.content if b.type == "thinking")
    text = "".join(b.text for b in message.content if b.type == "text")
    assert thinking.startswith(kept(REASONING_LOOP))
    assert REASONING_LOOP["text"][len(kept(REASONING_LOOP)) :][:200] not in thinking
    assert thinking.endswith(CONTINUATION.reasoning) and text.endswith(CONTINUATION.text)
    first, continuation = message_requests(upstream)
    assert "[looprescue]" in continuation.text() and "[looprescue]" not in first.text()


def test_responses_through_litellm_are_rescued(setup: tuple[openai.OpenAI, Any]) -> None:
    """``/v1/responses`` is rescued too, and a continuation of a chained response names the
    same previous response upstream as the request it continues."""
    client, upstream = setup
    upstream.enqueue(ScriptedResponse(text="Hello."), corpus_response(TEXT_LOOP), CONTINUATION)
    earlier = client.responses.create(model="deepseek-chat", input="Hi.")
    with client.responses.stream(
        model="deepseek-chat", input="Go.", previous_response_id=earlier.id
    ) as events:
        text = events.get_final_response().output_text
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)
    assert TEXT_LOOP["text"][len(kept(TEXT_LOOP)) :][:200] not in text
    sent = [r for r in upstream.agent_requests() if r.path.endswith("/responses")]
    _, looping, continuation = sent
    assert "[looprescue]" in continuation.text() and "[looprescue]" not in looping.text()
    chained = looping.body["previous_response_id"]
    assert (
        chained.startswith("resp_scripted_")
        and continuation.body["previous_response_id"] == chained
    )
