"""The exchange hands a read's consecutive deltas of one block to the engine as one delta:
the client's bytes, the audit and the continuation are the same as when the engine takes the
deltas one by one, for any split of the upstream bytes, and every upstream delta is counted."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.scripted_upstream import (
    ScriptedResponse,
    corpus_response,
    load_corpus,
    openai_stream_frames,
    parse_sse,
)
from tests.test_proxy_faults import openai_body
from tests.test_proxy_http import loop_records

from looprescue.config import LoopRescueConfig
from looprescue.exchange.core import Exchange, Step, _join_deltas
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import BlockStopped, ReasoningDelta, TextDelta
from looprescue.wire.openai import OpenAIWire

LOOP = next(r for r in loop_records() if r["channel"] == "text")
REQUEST = openai_body(max_tokens=4000)


def test_a_run_of_deltas_of_one_block_becomes_one_delta_that_keeps_its_parts() -> None:
    events = [
        ReasoningDelta(0, "a"),
        ReasoningDelta(0, "b"),
        TextDelta(1, "c"),
        TextDelta(2, "d"),
        TextDelta(2, "e"),
        TextDelta(2, "f"),
        TextDelta(2, ""),  # counted as no delta: left alone
        BlockStopped(2),
        TextDelta(2, "g"),
    ]
    assert _join_deltas(events, keep_parts=True) == [
        ReasoningDelta(0, "ab", ("a", "b")),
        TextDelta(1, "c"),
        TextDelta(2, "def", ("d", "e", "f")),
        TextDelta(2, ""),
        BlockStopped(2),
        TextDelta(2, "g"),
    ]


def upstream_bytes(response: ScriptedResponse) -> bytes:
    frames = openai_stream_frames(response, "deepseek-chat", 1, include_usage=False)
    return b"".join(frame.data for frame in frames)


LOOPING = upstream_bytes(corpus_response(LOOP))
NORMAL = next(r for r in load_corpus() if r["label"] == "normal")
HEALTHY = upstream_bytes(corpus_response(NORMAL))


def start(raw_request: dict) -> tuple[RescueEngine, Exchange]:
    wire = OpenAIWire(raw_request)
    engine = RescueEngine(LoopRescueConfig(), wire, raw_request)
    exchange = Exchange(engine, wire, streaming=True)
    exchange.start()
    exchange.response_started(0)
    return engine, exchange


def reads(raw: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(cuts)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(edges) if a < b]


def through(
    raw: bytes, cuts: list[int], feed_read: Callable[[Exchange, RescueEngine, bytes], Step]
) -> tuple[bytes, list, Any, RescueEngine]:
    """Client bytes, audit records and the continuation request when ``feed_read`` hands each
    read of ``raw`` (split at ``cuts``) to a new exchange."""
    engine, exchange = start(REQUEST)
    client, audit, request = b"", [], None
    for chunk in reads(raw, cuts):
        if not exchange.reading:
            break
        step = feed_read(exchange, engine, chunk)
        client += step.client
        audit += [(r.kind, r.data) for r in step.audit]
        request = request or step.request
    return client, audit, request, engine


def joined(raw: bytes, cuts: list[int]) -> tuple[bytes, list, Any, RescueEngine]:
    """Through the exchange, which joins a read's deltas."""
    return through(raw, cuts, lambda exchange, _, chunk: exchange.feed_bytes(chunk))


def one_read_by_deltas(exchange: Exchange, engine: RescueEngine, chunk: bytes) -> Step:
    step = Step()
    events = [e for sse in exchange._parser.feed(chunk) for e in exchange._decoder.decode(sse)]
    for number, event in enumerate(events):
        exchange._route(engine.feed(event, more=number < len(events) - 1), step)
        if not exchange.reading:
            break
    return step


def one_by_one(raw: bytes, cuts: list[int]) -> tuple[bytes, list, Any, RescueEngine]:
    """The same, each delta of a read fed to the engine on its own."""
    return through(raw, cuts, one_read_by_deltas)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, len(LOOPING) - 1), max_size=60))
def test_any_split_of_the_reads_cuts_the_loop_as_one_delta_at_a_time_does(
    cuts: list[int],
) -> None:
    client, audit, request, _ = joined(LOOPING, cuts)
    assert any(kind == "detection" for kind, _ in audit) and request is not None
    assert (client, audit, request) == one_by_one(LOOPING, cuts)[:3]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, len(HEALTHY) - 1), max_size=60))
def test_every_upstream_delta_is_counted_however_the_reads_join_them(cuts: list[int]) -> None:
    deltas = sum(
        bool(choice["delta"].get("content") or choice["delta"].get("reasoning_content"))
        for _, data in parse_sse(HEALTHY)
        if isinstance(data, dict)
        for choice in data["choices"]
        if choice.get("delta")
    )
    client, audit, _, engine = joined(HEALTHY, cuts)
    assert b"Here is the answer." in client and not any(k == "detection" for k, _ in audit)
    # (the engine estimates an OpenAI attempt's tokens as one per delta at least)
    assert engine._attempt.deltas == deltas > 300
    assert client == one_by_one(HEALTHY, cuts)[0]
