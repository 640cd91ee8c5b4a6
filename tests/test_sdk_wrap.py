"""``looprescue.wrap()`` with the real openai and anthropic SDKs against the scripted upstream on
127.0.0.1: loops are rescued in both protocols, sync and async, streaming and not, and the SDKs
hand back their own types and raise their own exceptions."""

from __future__ import annotations

import asyncio
import typing
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message, MessageStreamEvent, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from prometheus_client import CollectorRegistry
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    load_corpus,
)

import looprescue
from looprescue.config import ConfigError
from looprescue.proxy.service import RescueService
from looprescue.proxy.state import LocalStates
from looprescue.pruning import cut_text, first_hit

CONTINUATION = ScriptedResponse(reasoning="Resuming without repeating.", text="Final answer.")
PROMPT = [{"role": "user", "content": "Explain the loader."}]


def loop_record(channel: str) -> dict[str, Any]:
    for record in load_corpus():
        if record["label"] == "loop" and record["channel"] == channel:
            hit = first_hit(record["text"], channel, RescueService(looprescue_config()).config)
            if hit is not None and 0 < hit.prune_offset < len(record["text"]) - 200:
                return record
    raise AssertionError(f"no {channel} loop in the corpus is found by the detector")


def looprescue_config() -> Any:
    from looprescue.config import LoopRescueConfig

    return LoopRescueConfig()


REASONING_LOOP = loop_record("reasoning")
TEXT_LOOP = loop_record("text")


def kept_part(record: dict[str, Any]) -> str:
    hit = first_hit(record["text"], record["channel"], looprescue_config())
    assert hit is not None
    return record["text"][: hit.prune_offset]


def members(union: Any) -> tuple[type, ...]:
    """The classes of an SDK union type (``Annotated[Union[...], ...]``)."""
    inner = typing.get_args(union)[0] if typing.get_origin(union) is typing.Annotated else union
    return typing.get_args(inner)


def assert_rescued(record: dict[str, Any], received: str, continuation: str) -> None:
    kept = kept_part(record)
    assert received.startswith(kept)
    after = received[len(kept) :].lstrip("\n")
    assert (after.startswith("〔") and "removed〕" in after) or "已删除" in after, after[:80]
    assert after[after.index("〕") + 1 :].lstrip("\n") == continuation
    assert record["text"][len(kept) :][:200] not in received


# --------------------------------------------------------------------------- clients


def openai_client(upstream: ScriptedUpstream, asynchronous: bool = False) -> Any:
    make = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return make(base_url=upstream.base_url + "/v1", api_key="test-key", max_retries=0)


def anthropic_client(upstream: ScriptedUpstream, asynchronous: bool = False) -> Any:
    make = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
    return make(base_url=upstream.base_url, api_key="test-key", max_retries=0)


def wrapped(make: Any, upstream: ScriptedUpstream, asynchronous: bool) -> Any:
    """A wrapped client (an async one as a function making it, in the loop that uses it)."""
    if asynchronous:
        return lambda: looprescue.wrap(make(upstream, True))
    return looprescue.wrap(make(upstream))


async def collect_async(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def in_loop(make: Any, work: Any) -> Any:
    """``work(client)`` with an async client made (by ``make()``) and closed in this loop."""
    client = make()
    try:
        return await work(client)
    finally:
        await client.close()


def openai_call(client: Any, stream: bool, asynchronous: bool) -> tuple[str, str, list[Any]]:
    """(reasoning, text, objects returned) of one chat completion (``client``: a function
    making the client when ``asynchronous``)."""

    async def go(client: Any) -> Any:
        result = await client.chat.completions.create(
            model="deepseek-chat", messages=PROMPT, stream=stream
        )
        return await collect_async(result) if stream else [result]

    def go_sync() -> Any:
        result = client.chat.completions.create(
            model="deepseek-chat", messages=PROMPT, stream=stream
        )
        return list(result) if stream else [result]

    objects = asyncio.run(in_loop(client, go)) if asynchronous else go_sync()
    reasoning, text = [], []
    for item in objects:
        if stream:
            for choice in item.choices:
                reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
                text.append(choice.delta.content or "")
        else:
            message = item.choices[0].message
            reasoning.append((message.model_extra or {}).get("reasoning_content") or "")
            text.append(message.content or "")
    return "".join(reasoning), "".join(text), objects


def anthropic_call(client: Any, stream: bool, asynchronous: bool) -> tuple[str, str, list[Any]]:
    """(thinking, text, objects returned) of one message (``messages.stream`` when streaming,
    whose final message comes last; ``client``: a function making it when ``asynchronous``)."""
    options: dict[str, Any] = {"model": "deepseek-flash", "max_tokens": 4096, "messages": PROMPT}

    async def go(client: Any) -> Any:
        if not stream:
            return [await client.messages.create(**options)]
        async with client.messages.stream(**options) as events:
            got = [event async for event in events]
            return [*got, await events.get_final_message()]

    def go_sync() -> Any:
        if not stream:
            return [client.messages.create(**options)]
        with client.messages.stream(**options) as events:
            got = list(events)
            return [*got, events.get_final_message()]

    objects = asyncio.run(in_loop(client, go)) if asynchronous else go_sync()
    final = objects[-1]
    thinking = "".join(b.thinking for b in final.content if b.type == "thinking")
    text = "".join(b.text for b in final.content if b.type == "text")
    return thinking, text, objects


# --------------------------------------------------------------------------- rescue


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_openai_loops_are_rescued(
    scripted_upstream: ScriptedUpstream, stream: bool, asynchronous: bool
) -> None:
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    client = wrapped(openai_client, scripted_upstream, asynchronous)
    reasoning, text, objects = openai_call(client, stream, asynchronous)
    assert_rescued(REASONING_LOOP, reasoning, CONTINUATION.reasoning)
    assert text == CONTINUATION.text
    kind = ChatCompletionChunk if stream else ChatCompletion
    assert objects and all(isinstance(item, kind) for item in objects)
    assert len(scripted_upstream.agent_requests()) == 2


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_anthropic_loops_are_rescued(
    scripted_upstream: ScriptedUpstream, stream: bool, asynchronous: bool
) -> None:
    scripted_upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    client = wrapped(anthropic_client, scripted_upstream, asynchronous)
    thinking, text, objects = anthropic_call(client, stream, asynchronous)
    assert_rescued(TEXT_LOOP, text, CONTINUATION.text)
    # text had reached the client: the continuation's reasoning is watched, not sent, so the
    # answer stays after the last reasoning block
    assert CONTINUATION.reasoning not in thinking
    assert isinstance(objects[-1], Message)
    if stream:
        helper_events = members(anthropic.lib.streaming.MessageStreamEvent)  # type: ignore[attr-defined]
        raw_events = members(RawMessageStreamEvent) + members(MessageStreamEvent)
        assert all(isinstance(e, helper_events + raw_events) for e in objects[:-1])
    assert len(scripted_upstream.agent_requests()) == 2


def test_text_stream_and_final_message_of_the_stream_helper(
    scripted_upstream: ScriptedUpstream,
) -> None:
    scripted_upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    client = looprescue.wrap(anthropic_client(scripted_upstream))
    with client.messages.stream(model="deepseek-flash", max_tokens=4096, messages=PROMPT) as events:
        streamed = "".join(events.text_stream)
        final = events.get_final_message()
    assert isinstance(final, Message)
    assert streamed == "".join(b.text for b in final.content if b.type == "text")
    assert_rescued(TEXT_LOOP, streamed, CONTINUATION.text)
    assert final.stop_reason == "end_turn"


# --------------------------------------------------------------------------- unchanged


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_healthy_stream_is_what_the_unwrapped_client_gets(
    scripted_upstream: ScriptedUpstream, protocol: str
) -> None:
    record = next(r for r in load_corpus() if r["label"] == "normal" and r["channel"] == "text")
    healthy = corpus_response(record, thinking="Plan the answer.", delta_chars=(4, 24))
    scripted_upstream.enqueue(healthy, healthy)
    make, call = (
        (openai_client, openai_call) if protocol == "openai" else (anthropic_client, anthropic_call)
    )
    plain = call(make(scripted_upstream), True, False)
    rescued = call(looprescue.wrap(make(scripted_upstream)), True, False)
    assert rescued[:2] == plain[:2] == (healthy.reasoning, healthy.text)
    # held text goes out with the next delta, so the chunks may be fewer, never other types
    assert {type(item) for item in rescued[2]} == {type(item) for item in plain[2]}

    first, second = scripted_upstream.agent_requests()
    assert first.raw_body == second.raw_body  # the request went upstream as the SDK wrote it


def test_other_routes_pass_through(scripted_upstream: ScriptedUpstream) -> None:
    client = looprescue.wrap(openai_client(scripted_upstream))
    models = client.models.list()
    assert [m.id for m in models.data] == ["deepseek-flash"]
    assert scripted_upstream.requests[-1].path == "/v1/models"


def test_the_original_client_is_left_unwrapped(scripted_upstream: ScriptedUpstream) -> None:
    original = openai_client(scripted_upstream)
    wrapped = looprescue.wrap(original)
    assert wrapped is not original and looprescue.wrap(wrapped) is wrapped
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP))
    reasoning, _, _ = openai_call(original, True, False)
    assert reasoning == REASONING_LOOP["text"]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_upstream_errors_are_the_sdks_own(
    scripted_upstream: ScriptedUpstream, asynchronous: bool
) -> None:
    scripted_upstream.enqueue(
        ScriptedResponse(status=429, retry_after=1), ScriptedResponse(status=400)
    )
    with pytest.raises(openai.RateLimitError) as limited:
        openai_call(wrapped(openai_client, scripted_upstream, asynchronous), True, asynchronous)
    assert limited.value.response.headers["retry-after"] == "1"
    with pytest.raises(anthropic.BadRequestError):
        client = wrapped(anthropic_client, scripted_upstream, asynchronous)
        anthropic_call(client, False, asynchronous)


def test_an_unreachable_upstream_is_the_sdks_connection_error() -> None:
    for make, call, error in (
        (openai.OpenAI, openai_call, openai.APIConnectionError),
        (anthropic.Anthropic, anthropic_call, anthropic.APIConnectionError),
    ):
        base = "http://127.0.0.1:9/v1" if make is openai.OpenAI else "http://127.0.0.1:9"
        client = looprescue.wrap(make(base_url=base, api_key="k", max_retries=0))
        with pytest.raises(error):
            call(client, True, False)


def test_a_stream_broken_mid_way_is_the_sdks_error(scripted_upstream: ScriptedUpstream) -> None:
    broken = ScriptedResponse(text="Partial answer that stops.", cut_after=5)
    scripted_upstream.enqueue(broken, broken)
    with pytest.raises(openai.APIError, match="upstream"):
        openai_call(looprescue.wrap(openai_client(scripted_upstream)), True, False)
    with pytest.raises(anthropic.APIError, match="upstream"):
        anthropic_call(looprescue.wrap(anthropic_client(scripted_upstream)), True, False)


def test_conversation_state_lives_in_the_given_store(scripted_upstream: ScriptedUpstream) -> None:
    """The cap counts resumes per conversation in the store the wrapper is given: with
    maxConsecutiveRescues 1, the second looping answer in a row is cut, not resumed (one
    conversation: the client names its session)."""
    store = LocalStates(16)
    session = openai_client(scripted_upstream).with_options(
        default_headers={"x-looprescue-session": "chat-1"}
    )
    client = looprescue.wrap(session, {"maxConsecutiveRescues": 1}, store=store)
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP))
    first, _, _ = openai_call(client, True, False)
    second, text, _ = openai_call(client, True, False)
    assert first.endswith(CONTINUATION.reasoning)
    assert second.startswith(kept_part(REASONING_LOOP)) and "〔" in second
    assert "not resumed again" in text and len(scripted_upstream.agent_requests()) == 3

    assert len(store.lru) == 1


def test_a_bad_config_fails_naming_the_key(scripted_upstream: ScriptedUpstream) -> None:
    with pytest.raises(ConfigError, match="maxConsecutiveRescue: unknown key"):
        looprescue.wrap(openai_client(scripted_upstream), {"maxConsecutiveRescue": 2})
    with pytest.raises(TypeError, match=r"openai\.OpenAI"):
        looprescue.wrap(object())


# --------------------------------------------------------------------------- config


def test_the_config_is_the_proxys(scripted_upstream: ScriptedUpstream, tmp_path: Any) -> None:
    """mode: cut from a YAML file: the loop is cut, not resumed; history is sanitized too."""
    config = tmp_path / "looprescue.yml"
    config.write_text("mode: cut\n")
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP, answer="never sent"))
    client = looprescue.wrap(openai_client(scripted_upstream), config)
    reasoning, text, _ = openai_call(client, True, False)
    assert reasoning.startswith(kept_part(REASONING_LOOP)) and "〔" in reasoning
    # cut ends with visible text saying what happened, so no client shows an empty answer
    assert text.startswith("〔") and "cut" in text
    assert "never sent" not in text and len(scripted_upstream.agent_requests()) == 1
    scripted_upstream.enqueue(ScriptedResponse(text="Done."))
    history = [
        *PROMPT,
        {"role": "assistant", "content": TEXT_LOOP["text"]},
        {"role": "user", "content": "Go on."},
    ]
    client.chat.completions.create(model="deepseek-chat", messages=history)
    sent = scripted_upstream.agent_requests()[-1].body["messages"][1]["content"]
    hit = first_hit(TEXT_LOOP["text"], "text", looprescue_config())
    assert hit is not None
    cut = cut_text(TEXT_LOOP["text"], hit.prune_offset, "text")
    assert cut is not None and sent == cut.text


def test_counters_go_to_the_given_registry(scripted_upstream: ScriptedUpstream) -> None:
    registry = CollectorRegistry()
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    client = looprescue.wrap(openai_client(scripted_upstream), registry=registry)
    openai_call(client, True, False)
    value = registry.get_sample_value
    labels = {"protocol": "openai"}
    assert value("looprescue_responses_total", {**labels, "adapter": "sdk"}) == 1
    assert value("looprescue_rescues_total", labels) == 1
    assert value("looprescue_request_duration_seconds_count", labels) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_cut_mode_answers_with_text_saying_what_happened(
    scripted_upstream: ScriptedUpstream, stream: bool
) -> None:
    """A reasoning loop cut in cut mode leaves no text of the model's: the answer still
    says, in its text, what happened (it used to be empty)."""
    scripted_upstream.enqueue(corpus_response(REASONING_LOOP, answer="never reached"))
    client = looprescue.wrap(anthropic_client(scripted_upstream), {"mode": "cut"})
    _, text, _ = anthropic_call(client, stream, False)
    assert "repeating itself" in text and "never reached" not in text
