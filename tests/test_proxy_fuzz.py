"""Fuzz: malformed SSE and JSON through both protocol decoders and the exchange.

Streams are built from the protocol's own event shapes, then fields are swapped for values of
the wrong type (strings for objects, ``Infinity``, lists, nulls...), frames are garbled, and
the bytes are split anywhere. Whatever comes in, the client gets a well-formed stream of the
protocol that ends exactly once (a finish or the protocol's in-band error), and nothing
raises. Non-streaming bodies get a JSON answer (200 or a protocol-shaped 502).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looprescue.config import LoopRescueConfig
from looprescue.exchange.core import Exchange
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import ResumeTimedOut
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire
from looprescue.wire.sse import SSEParser

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}

words = st.sampled_from(["Now. ", "OK. ", "the layer ", "好的。", "", "x" * 30, "\n"])


def anthropic_events(draw: Any) -> list[dict[str, Any]]:
    """A well-formed Messages stream (1-3 blocks), then maybe one stray event inserted."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"id": "m1", "model": "m", "usage": {"input_tokens": 3}},
        },
        {"type": "ping"},
    ]
    starts = {
        "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        "text": {"type": "text", "text": ""},
        "tool_use": {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
    }
    for index, kind in enumerate(
        draw(st.lists(st.sampled_from(sorted(starts)), min_size=1, max_size=3))
    ):
        events.append(
            {"type": "content_block_start", "index": index, "content_block": dict(starts[kind])}
        )
        for _ in range(draw(st.integers(0, 4))):
            if kind == "thinking":
                delta = {"type": "thinking_delta", "thinking": draw(words)}
            elif kind == "text":
                delta = {"type": "text_delta", "text": draw(words)}
            else:
                delta = {"type": "input_json_delta", "partial_json": '{"a": 1}'}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        if kind == "thinking":
            delta = {"type": "signature_delta", "signature": "sig"}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": draw(st.sampled_from(["end_turn", "tool_use", None]))},
            "usage": {"output_tokens": 5},
        }
    )
    events.append({"type": "message_stop"})
    stray = draw(
        st.sampled_from(
            [
                None,
                {"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "image"}},
                {"type": "content_block_stop", "index": 5},
                {"type": "message_stop"},
                {"type": "future_event", "x": 1},
            ]
        )
    )
    if stray is not None:
        events.insert(draw(st.integers(1, len(events))), stray)
    return events


def openai_events(draw: Any) -> list[Any]:
    """A well-formed Chat Completions stream, then maybe one stray chunk inserted."""

    def chunk(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
        return {
            "id": "c1",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    for kind in draw(
        st.lists(st.sampled_from(["reasoning", "text", "tool"]), min_size=1, max_size=6)
    ):
        if kind == "reasoning":
            events.append(chunk({"reasoning_content": draw(words)}))
        elif kind == "text":
            events.append(chunk({"content": draw(words)}))
        else:
            call = {
                "index": draw(st.integers(0, 1)),
                "id": "call_1",
                "function": {"name": "read", "arguments": '{"a": 1}'},
            }
            events.append(chunk({"tool_calls": [call]}))
    events.append(chunk({}, draw(st.sampled_from(["stop", "tool_calls", "length"]))))
    events.append({"id": "c1", "choices": [], "usage": {"completion_tokens": 4}})
    events.append("[DONE]")
    stray = draw(
        st.sampled_from(
            [None, {"error": {"message": "busy", "type": "server_error"}}, "[DONE]", [1], 5]
        )
    )
    if stray is not None:
        events.insert(draw(st.integers(1, len(events))), stray)
    return events


JUNK: list[Any] = [None, True, 0, -1, 1 << 70, 1.5, "x", "", [1], [], {"type": 1}, {}]


def mutate_some(draw: Any, events: list[Any]) -> list[Any]:
    """One or two events get one field of the wrong type (chosen evenly, so every field of
    every event kind gets its turn; hypothesis' own choices favour the first ones)."""
    rng = draw(st.randoms(use_true_random=False))
    for _ in range(rng.choice([1, 1, 2])):
        mutate(rng, events[rng.randrange(len(events))])
    return events


def mutate(rng: Any, event: Any) -> None:
    """Replace one field somewhere inside ``event`` by a value of the wrong type."""
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                paths.append((node, key))
                walk(value)
        elif isinstance(node, list):
            for position, value in enumerate(node):
                paths.append((node, position))
                walk(value)

    walk(event)
    if paths:
        container, key = rng.choice(paths)
        # a fresh copy: a junk list shared between two places could end up inside itself
        container[key] = copy.deepcopy(rng.choice([*JUNK, float("inf"), float("nan")]))


def frame(draw: Any, event: Any, named: bool) -> bytes:
    if draw(st.integers(0, 40)) == 0:
        return draw(
            st.sampled_from([b"data: {\n\n", b"data: \xff\xfe\n\n", b"event: x\n", b"::\n"])
        )
    data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
    if not isinstance(event, dict | str):
        data = json.dumps(event)
    if not named:
        return f"data: {data}\n\n".encode()
    name = event.get("type") if isinstance(event, dict) else "x"
    if not isinstance(name, str) or draw(st.integers(0, 40)) == 0:
        name = "wrong"
    return f"event: {name}\ndata: {data}\n\n".encode()


def split(draw: Any, payload: bytes) -> list[bytes]:
    cuts = sorted(set(draw(st.lists(st.integers(0, len(payload)), max_size=8))))
    return [payload[a:b] for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True)]


def drive(wire: Any, chunks: list[bytes]) -> bytes:
    """Feed ``chunks`` the way the driver does; a continuation gets no answer in time."""
    engine = RescueEngine(LoopRescueConfig(), wire, REQUEST)
    exchange = Exchange(engine, wire, streaming=True)
    exchange.start()
    exchange.response_started(0)
    out = b""
    for chunk in chunks:
        if not exchange.reading:
            break
        step = exchange.feed_bytes(chunk)
        out += step.client
    if exchange.reading:
        out += exchange.upstream_ended().client
    if not exchange.done:
        out += exchange.fail(ResumeTimedOut(1)).client
    assert exchange.done
    return out


def client_events(payload: bytes) -> list[tuple[str | None, str]]:
    parser = SSEParser()
    events = [(e.event, e.data) for e in parser.feed(payload)]
    parser.close()
    assert not parser.has_partial_frame
    return events


@FUZZ
@given(st.data())
def test_anthropic_stream_always_ends_cleanly(data: st.DataObject) -> None:
    draw = data.draw
    events = mutate_some(draw, anthropic_events(draw))
    payload = b"".join(frame(draw, e, named=True) for e in events)
    out = client_events(drive(AnthropicWire(), split(draw, payload)))
    decoded = [(name, json.loads(body)) for name, body in out]
    assert all(isinstance(d, dict) and name == d["type"] for name, d in decoded)
    terminal = [i for i, (name, _) in enumerate(decoded) if name in ("message_stop", "error")]
    assert terminal == [len(decoded) - 1]
    if decoded[-1][0] == "error":
        assert isinstance(decoded[-1][1]["error"]["message"], str)
    else:
        assert decoded[0][0] == "message_start"


@FUZZ
@given(st.data())
def test_openai_stream_always_ends_cleanly(data: st.DataObject) -> None:
    draw = data.draw
    events = mutate_some(draw, openai_events(draw))
    payload = b"".join(frame(draw, e, named=False) for e in events)
    out = client_events(drive(OpenAIWire(REQUEST), split(draw, payload)))
    assert out, "the client got nothing"
    bodies = [body for _, body in out]
    if bodies[-1] == "[DONE]":
        assert bodies.count("[DONE]") == 1
        chunks = [json.loads(b) for b in bodies[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        # a choice's fields the engine does not model pass as the upstream sent them, so a
        # junk choice without a finish_reason stays without one
        finishes = [c for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
        assert len(finishes) == 1
    else:
        last = json.loads(bodies[-1])
        assert isinstance(last["error"]["message"], str)
        assert "[DONE]" not in bodies


@FUZZ
@given(st.data(), st.sampled_from(["anthropic", "openai"]))
def test_whole_bodies_always_get_a_json_answer(data: st.DataObject, protocol: str) -> None:
    draw = data.draw
    if protocol == "anthropic":
        wire: Any = AnthropicWire()
        body: Any = {
            "id": "m",
            "model": "x",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": draw(words)},
                {"type": "tool_use", "id": "t", "name": "n", "input": {"a": 1}},
            ],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 2},
        }
    else:
        wire = OpenAIWire()
        body = {
            "id": "c",
            "model": "x",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": draw(words),
                        "tool_calls": [
                            {"id": "t", "function": {"name": "n", "arguments": draw(words)}}
                        ],
                    },
                    "finish_reason": "stop",
                }
            ],
        }
    body = mutate_some(draw, [body])[0]
    payload = json.dumps(body).encode() if draw(st.integers(0, 9)) else b'{"id": '
    engine = RescueEngine(LoopRescueConfig(), wire, {**REQUEST, "stream": False})
    exchange = Exchange(engine, wire, streaming=False)
    exchange.start()
    exchange.response_started(0)
    exchange.feed_whole(payload)
    if not exchange.done:
        exchange.fail(ResumeTimedOut(1))
    status, answer = exchange.whole_response()
    decoded = json.loads(answer)
    assert status in (200, 502)
    if status == 502:
        assert isinstance(decoded["error"]["message"], str)
