"""Protocol codecs: wire -> engine events -> wire keeps content, ids and usage."""

from __future__ import annotations

import json

from tests.support.scripted_upstream import (
    ScriptedResponse,
    ToolCall,
    anthropic_message,
    anthropic_stream_frames,
    openai_completion,
    openai_stream_frames,
    parse_sse,
)

from looprescue.config import LoopRescueConfig
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import (
    BlockStarted,
    EmitError,
    MessageStarted,
    Opaque,
    Ping,
    ReasoningDelta,
    UpstreamFailed,
)
from looprescue.wire.anthropic import (
    AnthropicCollector,
    AnthropicDecoder,
    AnthropicEncoder,
    AnthropicWire,
    message_events,
)
from looprescue.wire.openai import (
    OpenAICollector,
    OpenAIDecoder,
    OpenAIEncoder,
    OpenAIWire,
    completion_events,
)
from looprescue.wire.sse import SSEParser

RESPONSE = ScriptedResponse(
    reasoning="Let me check the file first. 先看文件。",
    text="It says: hello.",
    tool_calls=(ToolCall("read", {"file_path": "a.txt", "limit": 5}),),
    delta_chars=(1, 4),
)


def sse_events(payload: bytes) -> list:
    parser = SSEParser()
    return parser.feed(payload)


def through_engine(events: list, encode) -> bytes:
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), {"messages": []})
    out = b""
    for event in events:
        for item in engine.feed(event):
            if hasattr(item, "index") or type(item).__name__.startswith("Emit"):
                out += encode(item)
    assert engine.done
    return out


def test_anthropic_stream_round_trip() -> None:
    frames = b"".join(f.data for f in anthropic_stream_frames(RESPONSE, "deepseek-flash", 3))
    decoder = AnthropicDecoder()
    events = [e for sse in sse_events(frames) for e in decoder.decode(sse)]
    out = through_engine(events, AnthropicEncoder().encode)
    original, proxied = parse_sse(frames), parse_sse(out)
    # every frame keeps its event name = data.type (DSH fails the attempt otherwise)
    assert all(name == data["type"] for name, data in proxied)
    assert anthropic_shape(proxied) == anthropic_shape(original)


def anthropic_shape(frames: list) -> tuple[list, dict]:
    """Non-delta frames in order, and the concatenated content per (block, delta type):
    held-back text may be released in different pieces, the content must not differ."""
    others, content = [], {}
    for _, data in frames:
        if data["type"] == "content_block_delta":
            delta = dict(data["delta"])
            kind = delta.pop("type")
            (value,) = delta.values()
            content[(data["index"], kind)] = content.get((data["index"], kind), "") + value
        else:
            others.append(data)
    return others, content


def openai_shape(frames: list) -> tuple[list, dict]:
    others, content = [], {}
    for _, data in frames:
        delta = data["choices"][0]["delta"] if isinstance(data, dict) and data["choices"] else {}
        keys = [k for k in ("reasoning_content", "content") if delta.get(k)]
        if keys and len(delta) == 1:
            content[keys[0]] = content.get(keys[0], "") + delta[keys[0]]
        else:
            others.append(data)
    return others, content


def test_anthropic_decoder_rejects_mismatched_event_names_and_bad_json() -> None:
    decoder = AnthropicDecoder()
    (mismatch,) = decoder.decode(sse_events(b'event: ping\ndata: {"type":"message_stop"}\n\n')[0])
    assert isinstance(mismatch, UpstreamFailed) and mismatch.kind == "malformed"
    assert "SSE event #1 (ping)" in mismatch.message
    (garbage,) = decoder.decode(sse_events(b"data: {nope\n\n")[0])
    assert garbage.kind == "malformed" and "invalid JSON" in garbage.message
    # an event type the engine does not know is passed on as it came
    future = decoder.decode(sse_events(b'data: {"type":"future_event"}\n\n')[0])
    assert future == [Opaque(None, {"type": "future_event"})]
    assert decoder.decode(sse_events(b'data: {"type":"ping"}\n\n')[0]) == [Ping()]
    (error,) = decoder.decode(
        sse_events(
            b'data: {"type":"error","error":{"type":"overloaded_error","message":"busy"}}\n\n'
        )[0]
    )
    assert (error.kind, error.error_type, error.message) == ("in_band", "overloaded_error", "busy")


def test_openai_stream_round_trip_with_usage() -> None:
    frames = b"".join(f.data for f in openai_stream_frames(RESPONSE, "deepseek-chat", 4, True))
    decoder = OpenAIDecoder()
    events = [e for sse in sse_events(frames) for e in decoder.decode(sse)]
    kinds = [(e.index, e.kind) for e in events if isinstance(e, BlockStarted)]
    assert kinds == [(0, "reasoning"), (1, "text"), (2, "tool_call")]
    encoder = OpenAIEncoder(include_usage=True, reasoning_field=decoder.reasoning_field)
    out = through_engine(events, encoder.encode)
    assert openai_shape(parse_sse(out)) == openai_shape(parse_sse(frames))


def test_openai_reasoning_field_name_is_mirrored() -> None:
    chunk = {
        "id": "c1",
        "created": 5,
        "model": "m",
        "choices": [{"index": 0, "delta": {"reasoning": "think"}, "finish_reason": None}],
    }
    decoder = OpenAIDecoder()
    events = decoder.decode(sse_events(f"data: {json.dumps(chunk)}\n\n".encode())[0])
    assert isinstance(events[0], MessageStarted)
    assert events[-1] == ReasoningDelta(0, "think")
    encoder = OpenAIEncoder(False, decoder.reasoning_field)
    assert encoder.reasoning_key == "reasoning"


def test_in_band_errors_are_rendered_per_protocol() -> None:
    error = EmitError("stall", "upstream sent nothing for 5 ms")
    ((name, data),) = parse_sse(AnthropicEncoder().encode(error))
    assert name == "error" and data["error"]["type"] == "api_error"
    ((_, data),) = parse_sse(OpenAIEncoder(False).encode(error))
    assert data["error"] == {
        "message": "upstream sent nothing for 5 ms",
        "type": "server_error",
        "param": None,
        "code": None,
    }


def test_non_streaming_round_trips() -> None:
    message = anthropic_message(RESPONSE, "deepseek-flash", 1)
    collector = AnthropicCollector()
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), {"messages": []})
    for event in message_events(message):
        for item in engine.feed(event):
            collector.add(item)
    assert collector.result() == message

    completion = openai_completion(RESPONSE, "deepseek-chat", 2)
    events, fields = completion_events(completion)
    collector_oai = OpenAICollector(fields)
    engine = RescueEngine(LoopRescueConfig(), OpenAIWire(), {"messages": []})
    for event in events:
        for item in engine.feed(event):
            collector_oai.add(item)
    assert collector_oai.result() == completion
