"""The typed decoding of frames (``wire/frames.py``) decides as the general path does."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from looprescue.rescue.events import (
    BlockStarted,
    Opaque,
    ReasoningDelta,
    SignatureDelta,
    TextDelta,
    ToolArgsDelta,
)
from looprescue.wire import anthropic, openai
from looprescue.wire.anthropic import AnthropicDecoder
from looprescue.wire.frames import FrameMismatch, decode_anthropic_block_delta, decode_openai_chunk
from looprescue.wire.openai import OpenAIDecoder
from looprescue.wire.sse import SSEEvent

DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
    "citations_delta": "citation",
}
VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(-3, 3),
    st.integers(1 << 19, 1 << 70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["type", "text"]), st.text(max_size=3), max_size=2),
)


@st.composite
def block_delta_data(draw: st.DrawFn) -> str:
    """The data of a content_block_delta frame: mostly well formed, often not."""
    kind = draw(st.sampled_from(sorted(DELTA_FIELDS)))
    delta: dict = {"type": kind, DELTA_FIELDS[kind]: draw(st.text(max_size=8))}
    frame: dict = {"type": "content_block_delta", "index": draw(st.integers(0, 3)), "delta": delta}
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from([frame, delta]))
        key = draw(st.sampled_from(["type", "index", "delta", "text", "thinking", "extra"]))
        if draw(st.booleans()):
            target[key] = draw(VALUES)
        else:
            target.pop(key, None)
    data = json.dumps(frame, ensure_ascii=draw(st.booleans()))
    cut = draw(st.integers(0, len(data) + 5))
    return data[:cut] if cut < len(data) else data


def general(data: str) -> list:
    """The general path's answer: the same frame with the typed decoding switched off."""
    calls = []

    def mismatch(data: str) -> None:
        calls.append(data)
        raise FrameMismatch("switched off")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(anthropic, "decode_anthropic_block_delta", mismatch)
        events = AnthropicDecoder().decode(SSEEvent("content_block_delta", data, None, 7))
    assert calls == [data]  # the switch took
    return events


@settings(max_examples=400, deadline=None)
@given(block_delta_data())
@example('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\ud800"}}')
@example('{"type":"content_block_delta","index":1048576,"delta":{"type":"text_delta","text":"a"}}')
@example('{"type":"content_block_delta","index":true,"delta":{"type":"text_delta","text":"a"}}')
@example(
    '{"type":"content_block_delta","index":0,"index":2,"delta":{"type":"text_delta","text":"a"}}'
)
@example('{"type":"message_delta","delta":{"stop_reason":"end_turn"}}')
@example('{"index":0,"delta":{"type":"signature_delta","signature":""}}')  # no type of its own
def test_a_named_block_delta_decodes_as_the_general_path_decodes_it(data: str) -> None:
    typed = AnthropicDecoder().decode(SSEEvent("content_block_delta", data, None, 7))
    expected = general(data)
    assert typed == expected


def test_each_delta_type_becomes_its_event() -> None:
    def frame(delta: dict) -> str:
        return json.dumps({"type": "content_block_delta", "index": 2, "delta": delta})

    decode = AnthropicDecoder().decode
    cases = [
        ({"type": "text_delta", "text": "Hi"}, TextDelta(2, "Hi")),
        ({"type": "thinking_delta", "thinking": "Hm"}, ReasoningDelta(2, "Hm")),
        ({"type": "input_json_delta", "partial_json": '{"a'}, ToolArgsDelta(2, '{"a')),
        ({"type": "signature_delta", "signature": "c2ln"}, SignatureDelta(2, "c2ln")),
    ]
    for delta, event in cases:
        assert decode(SSEEvent("content_block_delta", frame(delta), None, 1)) == [event]
        typed = decode_anthropic_block_delta(frame(delta))  # the common shapes decode typed
        assert typed.index == 2 and typed.delta.__struct_config__.tag == delta["type"]
    unknown = frame({"type": "citations_delta", "citation": {}})
    # a delta type the engine does not model is passed on as it came
    passed = decode(SSEEvent("content_block_delta", unknown, None, 1))
    assert passed == [Opaque(2, {"type": "citations_delta", "citation": {}})]


# --------------------------------------------------------------------------- OpenAI chunks

FIRST_CHUNK = '{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}'
CHOICE_KEYS = ["index", "delta", "finish_reason", "logprobs"]
DELTA_KEYS = ["content", "reasoning_content", "reasoning", "tool_calls", "role"]


@st.composite
def openai_chunk_data(draw: st.DrawFn) -> str:
    """The data of a Chat Completions chunk after the first: mostly one choice's text."""
    delta: dict = {
        draw(st.sampled_from(["content", "reasoning_content"])): draw(st.text(max_size=6))
    }
    choice: dict = {"index": 0, "delta": delta, "finish_reason": None}
    chunk: dict = {"id": "c1", "object": "chat.completion.chunk", "choices": [choice]}
    for _ in range(draw(st.integers(0, 3))):
        target, keys = draw(
            st.sampled_from(
                [
                    (chunk, ["choices", "usage", "error", "id"]),
                    (choice, CHOICE_KEYS),
                    (delta, DELTA_KEYS),
                ]
            )
        )
        key = draw(st.sampled_from(keys))
        if draw(st.booleans()):
            target[key] = draw(
                st.one_of(VALUES, st.just([{"index": 0, "delta": {"content": "x"}}]))
            )
        else:
            target.pop(key, None)
    data = json.dumps(chunk, ensure_ascii=draw(st.booleans()))
    cut = draw(st.integers(0, len(data) + 5))
    return data[:cut] if cut < len(data) else data


def openai_events(chunks: list[str], typed: bool) -> tuple[list, list]:
    """Every chunk's events from one decoder, with the typed decoding on or off, and the
    reasoning field the decoder settled on."""
    calls: list[str] = []

    def mismatch(data: str) -> None:
        calls.append(data)
        raise FrameMismatch("switched off")

    decoder = OpenAIDecoder()
    with pytest.MonkeyPatch.context() as patch:
        if not typed:
            patch.setattr(openai, "decode_openai_chunk", mismatch)
        events = [decoder.decode(SSEEvent(None, data, None, n)) for n, data in enumerate(chunks)]
    # the switch took, for every chunk but the first and the end of the stream
    assert typed or calls == [data for data in chunks[1:] if data.strip() != "[DONE]"]
    return events, decoder.reasoning_field


@settings(max_examples=400, deadline=None)
@given(openai_chunk_data(), openai_chunk_data())
@example('{"choices":[{"delta":{"content":"\\ud800"}}]}', '{"choices":[]}')
@example('{"choices":[{"index":0,"index":1,"delta":{"content":"a"}}]}', "[DONE]")
@example('{"choices":[{"index":true,"delta":{"content":"a"}}]}', "{}")
@example('{"choices":[{"delta":{"reasoning":"a","content":"b"}}]}', '{"choices":[{"delta":{}}]}')
@example('{"choices":[{"delta":{"content":"a"}}],"error":{"message":"x"}}', '{"choices":null}')
@example('{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}],"usage":{}}', "[DONE]")
def test_an_openai_stream_decodes_as_the_general_path_decodes_it(one: str, two: str) -> None:
    chunks = [FIRST_CHUNK, one, two]
    assert openai_events(chunks, typed=True) == openai_events(chunks, typed=False)


def test_after_its_first_chunk_a_stream_decodes_typed() -> None:
    text = '{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}'
    typed = decode_openai_chunk(text)  # the common shape decodes typed
    assert typed.choices[0].delta.content == "Hi"
    events, _ = openai_events([FIRST_CHUNK, text, text], typed=True)
    assert events[1] == [BlockStarted(0, "text"), TextDelta(0, "Hi")]
    assert events[2] == [TextDelta(0, "Hi")]
    for other in ('{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}', '{"x":1}'):
        with pytest.raises(FrameMismatch):
            decode_openai_chunk(other)  # a finish, or no choices: the general way
