"""The typed decoding of block deltas (``proxy/frames.py``) decides as the general path does."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from looprescue.proxy import anthropic
from looprescue.proxy.anthropic import AnthropicDecoder
from looprescue.proxy.frames import FrameMismatch, decode_anthropic_block_delta
from looprescue.proxy.sse import SSEEvent
from looprescue.rescue.events import (
    ReasoningDelta,
    SignatureDelta,
    TextDelta,
    ToolArgsDelta,
)

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
    assert decode(SSEEvent("content_block_delta", unknown, None, 1)) == []
