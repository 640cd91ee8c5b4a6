"""Mirrored streams (``observe``): the client gets the upstream's own bytes, whole frames at a
time, in any split of the reads, while the engine watches them and records the same loops as
an exchange that decodes and re-encodes every read."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.scripted_upstream import (
    anthropic_stream_frames,
    corpus_response,
    openai_stream_frames,
    parse_sse,
)
from tests.test_proxy_faults import anthropic_body, openai_body
from tests.test_proxy_http import loop_records

from looprescue.config import load_config
from looprescue.exchange.core import WATCH_BATCH_BYTES, Exchange, Step
from looprescue.exchange.feed import DirectFeed
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import UpstreamFailed
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire

OBSERVE = load_config(None, {"mode": "observe"})
ANTHROPIC_REQUEST = anthropic_body()
OPENAI_REQUEST = openai_body()
LOOP = next(r for r in loop_records() if r["channel"] == "text")


def upstream_bytes(protocol: str, **fields: Any) -> bytes:
    response = corpus_response(LOOP, **fields)
    if protocol == "anthropic":
        frames = anthropic_stream_frames(response, "deepseek-flash", 1)
    else:
        frames = openai_stream_frames(response, "deepseek-chat", 1, include_usage=False)
    return b"".join(frame.data for frame in frames)


def exchange(protocol: str, mirror: bool) -> Exchange:
    wire_class = AnthropicWire if protocol == "anthropic" else OpenAIWire
    body = ANTHROPIC_REQUEST if protocol == "anthropic" else OPENAI_REQUEST
    wire = wire_class(body)
    ex = Exchange(RescueEngine(OBSERVE, wire, body), wire, streaming=True, mirror=mirror)
    assert ex.start().request is not None
    ex.response_started(0)
    return ex


def run(ex: Exchange, data: bytes, cuts: list[int], end: bool = False) -> list[Step]:
    """Feed ``data`` split at ``cuts``; with ``end``, the body ends after it."""
    steps = []
    edges = [0, *sorted(set(cuts)), len(data)]
    for start, stop in itertools.pairwise(edges):
        if start < stop:
            steps.append(ex.feed_bytes(data[start:stop]))
    if end:
        steps.append(ex.upstream_ended())
    return steps


def detections(steps: list[Step]) -> list[dict[str, Any]]:
    keys = ("rule", "loop_start", "prune_offset", "channel")
    return [
        {k: record.data[k] for k in keys}
        for step in steps
        for record in step.audit
        if record.kind == "detection"
    ]


def splits(data_size: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(1, data_size - 1), max_size=40)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["anthropic", "openai"]), st.data())
def test_the_client_gets_the_upstream_bytes_whole_frames_at_a_time(
    protocol: str, data: st.DataObject
) -> None:
    raw = upstream_bytes(protocol)
    cuts = data.draw(splits(len(raw)))
    mirrored = exchange(protocol, mirror=True)
    steps = run(mirrored, raw, cuts)
    pieces = [step.client for step in steps if step.client]
    assert b"".join(pieces) == raw
    assert all(piece.endswith(b"\n\n") for piece in pieces)
    assert mirrored.done and mirrored.engine.stats.detections == 1
    # the same loop as the exchange that decodes and re-encodes every read
    decoded = exchange(protocol, mirror=False)
    reference = run(decoded, raw, cuts)
    assert detections(steps) == detections(reference) != []


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["anthropic", "openai"]), st.data())
def test_reads_written_straight_from_the_feed_are_the_same_bytes_and_loops(
    protocol: str, data: st.DataObject
) -> None:
    """Observe's usual read (a whole frame or more, nothing to parse yet) is written from the
    feed without a step; the client's bytes, in order, and the loops recorded are those of
    feeding every read through ``feed_bytes``, with a client that lags now and then."""
    raw = upstream_bytes(protocol)
    cuts = data.draw(splits(len(raw)))
    keeps_up = data.draw(st.lists(st.booleans(), min_size=41, max_size=41))
    written: list[bytes] = []
    written_directly = []
    lagging = iter(keeps_up)

    def direct(piece: bytes) -> bool:
        if next(lagging, True):
            written.append(piece)
            written_directly.append(piece)
            return True
        return False

    mirrored = exchange(protocol, mirror=True)
    feed = DirectFeed(mirrored, direct, lambda: 0.0)
    steps = []
    edges = [0, *sorted(set(cuts)), len(raw)]
    for start, stop in itertools.pairwise(edges):
        step = feed(raw[start:stop])
        if step is not None:
            steps.append(step)
            if step.client:
                written.append(step.client)  # what the driver writes once the client is back
    assert b"".join(written) == raw
    assert all(piece.endswith(b"\n\n") for piece in written)
    assert mirrored.done
    assert feed.first_write_at == (0.0 if written_directly else None)
    reference = run(exchange(protocol, mirror=True), raw, cuts)
    assert detections(steps) == detections(reference) != []


def test_reads_are_parsed_a_batch_at_a_time_and_the_end_at_once() -> None:
    raw = upstream_bytes("anthropic")
    frames = raw.split(b"\n\n")[:-1]
    ex = exchange("anthropic", mirror=True)
    fed = 0
    for frame in frames:
        ex.feed_bytes(frame + b"\n\n")
        fed += len(frame) + 2
        if b"message_stop" not in frame:
            # nothing waits longer than a batch; the engine has seen everything before it
            assert len(b"".join(ex._unparsed)) < WATCH_BATCH_BYTES
    assert ex.done and not ex.reading and fed == len(raw)


def test_a_frame_cut_off_by_the_upstream_never_reaches_the_client() -> None:
    raw = upstream_bytes("anthropic")
    middle = raw.index(b"content_block_delta", len(raw) // 2) + 5
    steps = run(exchange("anthropic", mirror=True), raw[:middle], [middle // 3], end=True)
    client = b"".join(step.client for step in steps)
    sent, error = client.rsplit(b"event: error", 1)
    assert raw.startswith(sent) and sent.endswith(b"\n\n")
    assert b"ended before its end-of-message event" in error
    ((name, _),) = parse_sse(b"event: error" + error)
    assert name == "error"


def test_invalid_utf8_mid_stream_ends_in_an_error_after_whole_frames() -> None:
    raw = upstream_bytes("openai")
    middle = raw.index(b"data:", len(raw) // 2)
    bad = raw[:middle] + b'data: {"x": "\xff"}\n\n' + raw[middle:]
    ex = exchange("openai", mirror=True)
    steps = run(ex, bad, [middle // 2, middle + 3])
    client = b"".join(step.client for step in steps)
    sent, error = client.rsplit(b"data: ", 1)
    assert raw.startswith(sent) and sent.endswith(b"\n\n")
    assert b"invalid UTF-8" in error and ex.done
    assert b"[DONE]" not in client


def test_an_upstream_error_frame_goes_to_the_client_as_it_came() -> None:
    whole = upstream_bytes("anthropic")
    middle = whole.index(b"event: content_block_delta", len(whole) // 3)
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    raw = whole[:middle] + b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
    ex = exchange("anthropic", mirror=True)
    steps = run(ex, raw, list(range(0, len(raw), 97)), end=True)  # the upstream hangs up
    client = b"".join(step.client for step in steps)
    assert client == raw  # the upstream's own error frame, nothing added
    assert ex.done and ex.engine.stats.upstream_errors == ["in_band"]
    assert parse_sse(client)[-1] == ("error", error)


def test_a_transport_failure_is_judged_after_the_text_read_before_it() -> None:
    raw = upstream_bytes("anthropic")
    stop = raw.index(b"message_delta")  # all the text, not the end
    ex = exchange("anthropic", mirror=True)
    steps = run(ex, raw[:stop], [])
    steps.append(ex.fail(UpstreamFailed("stall", "upstream stalled")))
    assert detections(steps) and ex.done
    assert steps[-1].client.startswith(b"event: error")
