"""Whatever the installed SDKs can receive passes through the proxy: every stream event,
content block and delta type of the ``anthropic`` package, every field of an OpenAI chunk,
choice, delta and usage (their own types, introspected), in valid streams and whole answers.

``observe`` must pass a stream byte for byte; ``rescue`` (nothing to cut here) must give the
SDK's own accumulator (anthropic ``MessageStream``, openai ``ChatCompletionStreamState``) the
same answer it builds from the upstream directly. Real HTTP on 127.0.0.1, the real SDKs."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import ContentBlock, Message, RawContentBlockDelta, RawMessageDeltaEvent
from anthropic.types.beta import (
    BetaContentBlock,
    BetaMessage,
    BetaRawContentBlockDelta,
    BetaRawMessageDeltaEvent,
)
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream
from tests.support.sdk_types import fields_of, members, sample, type_tag
from tests.test_proxy_server import NativeProxy

MODEL = "deepseek-flash"
PROMPT = [{"role": "user", "content": "Look it up."}]
MODES = ("observe", "rescue")


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxies(upstream: ScriptedUpstream) -> Iterator[dict[str, NativeProxy]]:
    with (
        NativeProxy(upstream.base_url, mode="observe") as observing,
        NativeProxy(upstream.base_url, mode="rescue") as rescuing,
    ):
        yield {"observe": observing, "rescue": rescuing}


# --------------------------------------------------------------------------- Anthropic

# per API surface: its content blocks, its deltas, its end-of-message event, its message
ANTHROPIC_APIS = {
    "messages": (ContentBlock, RawContentBlockDelta, RawMessageDeltaEvent, Message),
    "beta": (BetaContentBlock, BetaRawContentBlockDelta, BetaRawMessageDeltaEvent, BetaMessage),
}
# the block each delta type streams into (a type not listed goes into a text block)
DELTA_BLOCK = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
    "compaction_delta": "compaction",
}
# a delta whose sampled text would not be valid in its place (a JSON fragment)
DELTA_FIELDS = {"input_json_delta": {"partial_json": '{"q": 1}'}}


def sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def message_start(message_model: Any) -> dict[str, Any]:
    message = sample(message_model)
    message.update(id="msg_conformance", model=MODEL, content=[], stop_reason=None)
    message.update(stop_sequence=None)
    return {"type": "message_start", "message": message}


def anthropic_frames(api: str, blocks: list[tuple[dict, list[dict]]]) -> list[bytes]:
    _, _, end_model, message_model = ANTHROPIC_APIS[api]
    frames = [sse(message_start(message_model)), sse({"type": "ping"})]
    for index, (block, deltas) in enumerate(blocks):
        frames.append(sse({"type": "content_block_start", "index": index, "content_block": block}))
        for delta in deltas:
            frames.append(sse({"type": "content_block_delta", "index": index, "delta": delta}))
        frames.append(sse({"type": "content_block_stop", "index": index}))
    end = sample(end_model)
    end["delta"]["stop_reason"] = "end_turn"
    return [*frames, sse(end), sse({"type": "message_stop"})]


def closing_text() -> tuple[dict, list[dict]]:
    return {"type": "text", "text": ""}, [{"type": "text_delta", "text": "Found it."}]


def anthropic_cases() -> list[Any]:
    cases = []
    for api, (block_union, delta_union, _, _) in ANTHROPIC_APIS.items():
        blocks = {type_tag(model): model for model in members(block_union)}
        for tag, model in blocks.items():
            deltas = []
            if "input" in fields_of(model):
                deltas = [{"type": "input_json_delta", "partial_json": '{"q": "loops"}'}]
            frames = anthropic_frames(api, [(sample(model), deltas), closing_text()])
            cases.append(pytest.param(api, frames, id=f"{api}-block-{tag}"))
        for delta_model in members(delta_union):
            tag = type_tag(delta_model)
            block = sample(blocks[DELTA_BLOCK.get(tag, "text")])
            delta = {**sample(delta_model), **DELTA_FIELDS.get(tag, {})}
            frames = anthropic_frames(api, [(block, [delta]), closing_text()])
            cases.append(pytest.param(api, frames, id=f"{api}-delta-{tag}"))
    return cases


def anthropic_final(base_url: str, api: str) -> dict[str, Any]:
    """The SDK's own accumulation of the stream (``MessageStream.get_final_message``)."""
    client = anthropic.Anthropic(base_url=base_url, api_key="k", max_retries=0)
    messages = client.beta.messages if api == "beta" else client.messages
    with messages.stream(model=MODEL, max_tokens=100, messages=PROMPT) as stream:
        return stream.get_final_message().model_dump(mode="json")


def raw_post(base_url: str, path: str, body: dict[str, Any]) -> bytes:
    response = httpx.post(base_url + path, json=body, headers={"x-api-key": "k"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("api", "frames"), anthropic_cases())
def test_anthropic_stream_passes_through(
    upstream: ScriptedUpstream,
    proxies: dict[str, NativeProxy],
    mode: str,
    api: str,
    frames: list[bytes],
) -> None:
    proxy = proxies[mode]
    upstream.enqueue(*[ScriptedResponse(raw_frames=frames) for _ in range(3)])
    body = {"model": MODEL, "max_tokens": 100, "stream": True, "messages": PROMPT}
    passed = raw_post(proxy.base_url, "/v1/messages", body)
    if mode == "observe":
        assert passed == b"".join(frames)
    assert b"event: error" not in passed
    assert anthropic_final(proxy.base_url, api) == anthropic_final(upstream.base_url, api)


def anthropic_whole_cases() -> list[Any]:
    cases = []
    for api, (block_union, _, _, message_model) in ANTHROPIC_APIS.items():
        message = sample(message_model)
        message.update(id="msg_whole", model=MODEL, stop_reason="end_turn")
        message["content"] = [sample(model) for model in members(block_union)]
        cases.append(pytest.param(api, message, id=api))
    return cases


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("api", "message"), anthropic_whole_cases())
def test_anthropic_whole_answer_passes_through(
    upstream: ScriptedUpstream,
    proxies: dict[str, NativeProxy],
    mode: str,
    api: str,
    message: dict[str, Any],
) -> None:
    raw = json.dumps(message).encode()
    upstream.enqueue(*[ScriptedResponse(raw_body=raw) for _ in range(2)])

    def create(base_url: str) -> dict[str, Any]:
        client = anthropic.Anthropic(base_url=base_url, api_key="k", max_retries=0)
        messages = client.beta.messages if api == "beta" else client.messages
        answer = messages.create(model=MODEL, max_tokens=100, messages=PROMPT)
        return answer.model_dump(mode="json")

    assert create(proxies[mode].base_url) == create(upstream.base_url)
    if mode == "observe":
        upstream.enqueue(ScriptedResponse(raw_body=raw))
        body = {"model": MODEL, "max_tokens": 100, "messages": PROMPT}
        assert raw_post(proxies[mode].base_url, "/v1/messages", body) == raw


# --------------------------------------------------------------------------- OpenAI

# what the engine itself reads and writes of a chunk; every other field is passed on
CHUNK_MODELED = {"id", "object", "created", "model", "choices", "usage"}
CHOICE_MODELED = {"index", "delta", "finish_reason"}
DELTA_MODELED = {"role", "content", "tool_calls"}


def openai_frames(
    *,
    top: dict[str, Any] | None = None,
    choice: dict[str, Any] | None = None,
    delta: dict[str, Any] | None = None,
    second_choice: bool = False,
    usage: dict[str, Any] | None = None,
) -> list[bytes]:
    base = {"id": "chatcmpl-conf", "object": "chat.completion.chunk", "created": 1}
    base = {**base, "model": MODEL, **(top or {})}

    def chunk(index: int, fields: dict[str, Any], finish: str | None = None, **more: Any) -> dict:
        return {**base, "choices": [{"index": index, "delta": fields, "finish_reason": finish}]}

    chunks = [chunk(0, {"role": "assistant", "content": ""})]
    said = chunk(0, {"content": "Hello there.", **(delta or {})})
    said["choices"][0].update(choice or {})
    chunks.append(said)
    if second_choice:
        chunks.append(chunk(1, {"role": "assistant", "content": "Another answer."}))
    chunks.append(chunk(0, {}, "stop"))
    if second_choice:
        chunks.append(chunk(1, {}, "stop"))
    usage = usage or {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    chunks.append({**base, "choices": [], "usage": usage})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


def openai_cases() -> list[Any]:
    cases = []
    for name in fields_of(ChatCompletionChunk):
        if name not in CHUNK_MODELED:
            value = sample(ChatCompletionChunk.model_fields[name].annotation)
            cases.append(pytest.param(openai_frames(top={name: value}), id=f"chunk-{name}"))
    for name in fields_of(Choice):
        if name not in CHOICE_MODELED:
            value = sample(Choice.model_fields[name].annotation)
            cases.append(pytest.param(openai_frames(choice={name: value}), id=f"choice-{name}"))
    for name in fields_of(ChoiceDelta):
        if name not in DELTA_MODELED:
            value = sample(ChoiceDelta.model_fields[name].annotation)
            cases.append(pytest.param(openai_frames(delta={name: value}), id=f"delta-{name}"))
    cases.append(pytest.param(openai_frames(second_choice=True), id="second-choice"))
    usage = sample(CompletionUsage)
    cases.append(pytest.param(openai_frames(usage=usage), id="usage-details"))
    return cases


def openai_final(base_url: str) -> dict[str, Any]:
    """The SDK's own accumulation of the stream (``ChatCompletionStreamState``)."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL, messages=PROMPT, stream=True, stream_options={"include_usage": True}
    )
    state = ChatCompletionStreamState()
    for chunk in stream:
        state.handle_chunk(chunk)
    return state.get_final_completion().model_dump(mode="json")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("frames", openai_cases())
def test_openai_stream_passes_through(
    upstream: ScriptedUpstream, proxies: dict[str, NativeProxy], mode: str, frames: list[bytes]
) -> None:
    proxy = proxies[mode]
    upstream.enqueue(*[ScriptedResponse(raw_frames=frames) for _ in range(3)])
    body = {
        "model": MODEL,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": PROMPT,
    }
    passed = raw_post(proxy.base_url, "/v1/chat/completions", body)
    if mode == "observe":
        assert passed == b"".join(frames)
    assert openai_final(proxy.base_url) == openai_final(upstream.base_url)


@pytest.mark.parametrize("mode", MODES)
def test_openai_whole_answer_passes_through(
    upstream: ScriptedUpstream, proxies: dict[str, NativeProxy], mode: str
) -> None:
    completion = sample(ChatCompletion)
    completion.update(id="chatcmpl-whole", object="chat.completion", model=MODEL)
    first = completion["choices"][0]
    first.update(index=0, finish_reason="stop", message=sample(ChatCompletionMessage))
    first["message"].update(role="assistant", content="Hello there.")
    second = copy.deepcopy(first)
    second.update(index=1, finish_reason="length")
    completion["choices"] = [first, second]
    raw = json.dumps(completion).encode()
    upstream.enqueue(*[ScriptedResponse(raw_body=raw) for _ in range(2)])

    def create(base_url: str) -> dict[str, Any]:
        client = openai.OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
        answer = client.chat.completions.create(model=MODEL, messages=PROMPT)
        return answer.model_dump(mode="json")

    assert create(proxies[mode].base_url) == create(upstream.base_url)
    if mode == "observe":
        upstream.enqueue(ScriptedResponse(raw_body=raw))
        body = {"model": MODEL, "messages": PROMPT}
        assert raw_post(proxies[mode].base_url, "/v1/chat/completions", body) == raw
