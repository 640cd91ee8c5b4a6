"""The exchange hands a read's consecutive deltas of one block to the engine as one delta:
what reaches the client, what is detected and what a continuation asks for stay the same for
any split of the upstream bytes, and the engine still counts every upstream delta."""

from __future__ import annotations

import itertools
import re

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
from looprescue.proxy.exchange import Exchange, _join_deltas
from looprescue.proxy.openai import OpenAIWire
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import BlockStopped, ReasoningDelta, TextDelta

LOOP = next(r for r in loop_records() if r["channel"] == "text")
REQUEST = openai_body(max_tokens=4000)


def test_a_run_of_deltas_of_one_block_becomes_one_delta_that_counts_them() -> None:
    events = [
        ReasoningDelta(0, "a"),
        ReasoningDelta(0, "b"),
        TextDelta(1, "c"),
        TextDelta(2, "d"),
        TextDelta(2, "e"),
        TextDelta(2, "f"),
        BlockStopped(2),
        TextDelta(2, "g"),
    ]
    assert _join_deltas(events) == [
        ReasoningDelta(0, "ab", 2),
        TextDelta(1, "c"),
        TextDelta(2, "def", 3),
        BlockStopped(2),
        TextDelta(2, "g"),
    ]


def upstream_bytes(response: ScriptedResponse) -> bytes:
    frames = openai_stream_frames(response, "deepseek-chat", 1, include_usage=False)
    return b"".join(frame.data for frame in frames)


LOOPING = upstream_bytes(corpus_response(LOOP))
NORMAL = next(r for r in load_corpus() if r["label"] == "normal")
HEALTHY = upstream_bytes(corpus_response(NORMAL))


def client_text(client: bytes) -> str:
    """The client's text, the count in the proxy's marker left out (it counts what was read
    when the loop was cut, which a bigger read makes more)."""
    text = "".join(
        choice["delta"].get("content") or ""
        for _, data in parse_sse(client)
        if isinstance(data, dict)
        for choice in data.get("choices") or []
        if choice.get("delta")
    )
    return re.sub(r"〔\d+ chars", "〔N chars", text)


def feed(raw: bytes, cuts: list[int]) -> tuple[str, list[dict], list | None, RescueEngine]:
    """The client's text, the detections, the continuation's messages and the engine when
    ``raw`` arrives split at ``cuts``."""
    wire = OpenAIWire(REQUEST)
    engine = RescueEngine(LoopRescueConfig(), wire, REQUEST)
    exchange = Exchange(engine, wire, streaming=True)
    exchange.start()
    exchange.response_started(0)
    client, found, messages = b"", [], None
    for start, stop in itertools.pairwise([0, *sorted(set(cuts)), len(raw)]):
        if start == stop or not exchange.reading:
            continue
        step = exchange.feed_bytes(raw[start:stop])
        client += step.client
        found += [
            {k: r.data[k] for k in ("rule", "loop_start", "prune_offset")}
            for r in step.audit
            if r.kind == "detection"
        ]
        if step.request is not None and messages is None:
            messages = list(step.request.body["messages"])
    return client_text(client), found, messages, engine


def frame_ends(raw: bytes) -> list[int]:
    return [i + 2 for i in range(len(raw)) if raw.startswith(b"\n\n", i)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, len(LOOPING) - 1), max_size=60))
def test_any_split_of_the_reads_cuts_the_loop_as_frame_by_frame_does(cuts: list[int]) -> None:
    by_frame = feed(LOOPING, frame_ends(LOOPING))[:3]
    assert by_frame[1] and by_frame[2] is not None  # the loop is cut and a continuation asked
    assert feed(LOOPING, cuts)[:3] == by_frame


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
    text, found, _, engine = feed(HEALTHY, cuts)
    assert found == [] and text == "Here is the answer."
    # (the engine estimates an OpenAI attempt's tokens as one per delta at least)
    assert engine._attempt.deltas == deltas > 300
