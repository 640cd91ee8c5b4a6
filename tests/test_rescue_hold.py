"""The hold-back's bounds (holdMaxMs on the adapter's clock, holdMaxChars), in any chunking.

Corpus texts from corpus/ (real model answers): healthy ones must come out whole, and loop text
that a bound let out before the loop was confirmed must be counted as leaked.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.paths import REPO_ROOT, SMOLLM2

from looprescue.config import LoopRescueConfig
from looprescue.detect import scan_text
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import (
    AuditRecord,
    BlockStarted,
    BlockStopped,
    EmitDelta,
    MessageStarted,
    TextDelta,
)
from looprescue.wire.anthropic import AnthropicWire

HEALTHY = REPO_ROOT / "corpus" / "healthy.jsonl"
REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Go on."}]}


@cache
def records(path: str) -> tuple[dict[str, Any], ...]:
    with open(path, encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def healthy_texts() -> list[str]:
    return [r["text"] for r in records(str(HEALTHY)) if r["label"] == "normal"]


def loop_texts() -> list[str]:
    """SmolLM2 loops the detector confirms on the whole text (one hit: a cut)."""
    return [
        r["text"]
        for r in records(str(SMOLLM2))
        if r["label"] == "loop" and scan_text(r["text"], "text")
    ]


def split(text: str, sizes: list[int]) -> list[str]:
    pieces, position, turn = [], 0, 0
    while position < len(text):
        size = sizes[turn % len(sizes)]
        pieces.append(text[position : position + size])
        position += size
        turn += 1
    return pieces


class Stream:
    """One text block fed to a fresh engine in cut mode, the clock told before each delta."""

    def __init__(self, config: LoopRescueConfig) -> None:
        self.engine = RescueEngine(config, AnthropicWire(), REQUEST)
        self.engine.feed(MessageStarted("m", "m"))
        self.engine.feed(BlockStarted(0, "text"))
        self.fed = 0
        self.released = 0
        self.arrivals: list[float] = []  # per char fed
        self.audit: list[AuditRecord] = []
        self.released_at_hit: int | None = None

    def take(self, out: list[Any]) -> None:
        for item in out:
            if isinstance(item, EmitDelta):
                self.released += len(item.text)
            elif isinstance(item, AuditRecord):
                self.audit.append(item)
                if item.kind == "detection":
                    self.released_at_hit = item.data["released_chars"]

    def feed(self, piece: str, now: float | None) -> None:
        if now is not None:
            self.take(self.engine.tick(now))
        self.arrivals += [now if now is not None else 0.0] * len(piece)
        self.fed += len(piece)
        self.take(self.engine.feed(TextDelta(0, piece)))


chunk_sizes = st.lists(st.integers(1, 40), min_size=1, max_size=12)
gaps = st.lists(st.sampled_from([0.0, 5.0, 25.0, 100.0, 400.0, 1500.0]), min_size=1, max_size=8)
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    text=st.sampled_from(healthy_texts()),
    sizes=chunk_sizes,
    steps=gaps,
    hold_ms=st.sampled_from([0, 100, 800, 3000]),
)
def test_no_char_waits_past_hold_max_ms(
    text: str, sizes: list[int], steps: list[float], hold_ms: int
) -> None:
    stream = Stream(LoopRescueConfig(mode="cut", holdMaxMs=hold_ms))
    now = 1000.0
    old = 0  # chars that came in hold_ms or more before now (arrivals only grow)
    for turn, piece in enumerate(split(text, sizes)):
        now += steps[turn % len(steps)]
        stream.feed(piece, now)
        assert not stream.engine.done  # healthy text is never cut
        while old < len(stream.arrivals) and stream.arrivals[old] <= now - hold_ms:
            old += 1
        # every one of them is out
        assert stream.released >= old
    stream.take(stream.engine.feed(BlockStopped(0)))
    assert stream.released == len(text)


@SETTINGS
@given(
    text=st.sampled_from(healthy_texts() + loop_texts()),
    sizes=chunk_sizes,
    hold=st.sampled_from([0, 1, 30, 120, 500]),
)
def test_held_text_never_lags_more_than_hold_max_chars(
    text: str, sizes: list[int], hold: int
) -> None:
    stream = Stream(LoopRescueConfig(mode="cut", holdMaxChars=hold, holdMaxMs=None))
    for piece in split(text, sizes):
        stream.feed(piece, None)
        if stream.engine.done:
            break  # cut: what was held is dropped, not released
        assert stream.fed - stream.released <= hold


@SETTINGS
@given(
    text=st.sampled_from(loop_texts()),
    sizes=chunk_sizes,
    hold=st.sampled_from([0, 10, 60, 120]),
)
def test_loop_text_past_the_bound_is_counted_as_leaked(
    text: str, sizes: list[int], hold: int
) -> None:
    stream = Stream(LoopRescueConfig(mode="cut", holdMaxChars=hold, holdMaxMs=None))
    for piece in split(text, sizes):
        stream.feed(piece, None)
        if stream.engine.done:
            break
    assert stream.engine.done, "the loop was not cut"
    (detection,) = [a for a in stream.audit if a.kind == "detection"]
    prune = detection.data["prune_offset"]
    released = stream.released_at_hit
    assert released is not None
    stats = stream.engine.stats
    # what had gone out past the prune point when the loop was confirmed, no more, no less
    assert stats.leaked_loop_chars == max(0, released - prune)
    assert detection.data["leaked_loop_chars"] == stats.leaked_loop_chars
    # the client keeps what it has: the cut moves past it, and nothing more is sent
    assert stream.released == max(released, prune)


def test_a_bound_of_zero_lets_everything_out_and_counts_the_whole_loop() -> None:
    text = loop_texts()[0]
    stream = Stream(LoopRescueConfig(mode="cut", holdMaxChars=0, holdMaxMs=None))
    for piece in split(text, [3]):
        stream.feed(piece, None)
        if stream.engine.done:
            break
    (detection,) = [a for a in stream.audit if a.kind == "detection"]
    # nothing was held but the delta the loop was confirmed on
    assert stream.released_at_hit == stream.fed - 3
    leaked = stream.released_at_hit - detection.data["prune_offset"]
    assert stream.engine.stats.leaked_loop_chars == leaked
    assert stream.engine.stats.leaked_loop_chars > 0


def test_an_engine_never_told_the_time_holds_as_the_watermark_asks() -> None:
    """The default config's time bound needs the adapter's clock: without it, nothing of a
    loop leaks (as the engine and exchange tests, which tell no time, rely on)."""
    for text in loop_texts()[:5]:
        stream = Stream(LoopRescueConfig(mode="cut"))
        for piece in split(text, [3]):
            stream.feed(piece, None)
            if stream.engine.done:
                break
        assert stream.engine.done
        assert stream.engine.stats.leaked_loop_chars == 0


def test_a_slow_stream_lets_held_loop_text_out_and_counts_it() -> None:
    """At one delta a second, an 800 ms bound lets every held char out at the next read:
    the loop is still cut, and what got out past the prune point is counted."""
    text = loop_texts()[0]
    stream = Stream(LoopRescueConfig(mode="cut"))
    now = 0.0
    for piece in split(text, [3]):
        now += 1000.0
        stream.feed(piece, now)
        if stream.engine.done:
            break
        assert stream.released >= stream.fed - 3  # only the newest delta may wait
    (detection,) = [a for a in stream.audit if a.kind == "detection"]
    leaked = max(0, stream.fed - 3 - detection.data["prune_offset"])
    assert stream.engine.stats.leaked_loop_chars >= leaked > 0
