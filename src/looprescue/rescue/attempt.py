"""One upstream attempt's stream: feed the detector, hold, settle, release.

A response is one or more upstream attempts: the client's own request, then a continuation
after each cut. An :class:`Attempt` owns what one of them streams: its blocks, the text of its
channels, its detector and its release queue (``release.py``). Each watched delta goes to the
detector; what the detector cannot yet clear (``safe_offset``) waits in the queue, and the rest
goes to the client at once. Held text is let out when the watermark passes it, when a bound
says it waited long enough (``holdMaxMs`` on the adapter's clock, told through ``tick``) or
lags too far behind (``holdMaxChars``), or when its block ends.

It is apart from the engine because it is the per-delta path and it decides nothing about
loops: a confirmed loop is left in :attr:`Attempt.hit` for the engine, whose cut plan says what
follows. What outlives an attempt (the client's block numbering, what the client was shown,
the response's counts) is a :class:`ClientSide` that every attempt of the response shares.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..detect.hits import Hit
from . import marker as notes
from .blocks import ClientBlocks
from .budget import estimate_tokens
from .events import (
    BlockKind,
    BlockStarted,
    BlockStopped,
    Channel,
    EmitDelta,
    EmitMarker,
    EmitOpaque,
    EmitSignature,
    EngineOutput,
    FinishReported,
    Opaque,
    SignatureDelta,
    ToolArgsDelta,
    UpstreamEvent,
    Usage,
)
from .marker import Lang
from .release import Released, ReleaseQueue
from .stats import RescueStats

# a safe offset no channel reaches: the channel may go out whole
UNLIMITED = 1 << 62
# blocks a cut never goes into: a tool call, or a block of a kind the engine does not know
_UNCUT_KINDS = frozenset({"tool_call", "opaque"})
# where a sentence ends: after its mark and the space that follows, or at a line break
_SENTENCE_END = re.compile(r"[.!?;:](?:\s+|$)|[。！？；：]|\n")


class LoopDetector(Protocol):
    """What the engine asks of a detector (``detect.StreamDetector``, or one an embedding or a
    test supplies through ``detector_factory``)."""

    def feed(self, channel: Channel, delta: str) -> Hit | None:
        """The loop ``delta`` completed in ``channel``, if any."""
        ...

    def flush(self, channel: Channel) -> Hit | None:
        """The loop the channel's last chars complete, now that it ended."""
        ...

    def safe_offset(self, channel: Channel) -> int:
        """How much of ``channel`` no later hit can prune."""
        ...


@dataclass(frozen=True, slots=True)
class HoldRules:
    """How an attempt holds text, the same for every attempt of a response (from the config)."""

    watched: frozenset[str]  # the channels the detector judges; others are never held
    acting: bool  # False in observe: hits are recorded, nothing is held for them
    max_chars: int  # held text never lags the newest char more (holdMaxChars; UNLIMITED)
    max_ms: float  # nor waits longer on the adapter's clock (holdMaxMs; -1: no bound)
    marker: bool  # a one-line marker where loop text was removed
    lang: Lang


class ClientSide:
    """What the client has of the response, over all its attempts: its block numbering, the
    reasoning and text it received (markers excluded), and the response's counts."""

    __slots__ = ("blocks", "stats", "visible", "visible_chars")

    def __init__(self, stats: RescueStats) -> None:
        self.blocks = ClientBlocks()
        self.stats = stats
        self.visible: dict[str, list[str]] = {"reasoning": [], "text": []}
        self.visible_chars = {"reasoning": 0, "text": 0}


class Attempt:
    """State of one upstream request within the response, and its stream's handling."""

    def __init__(
        self,
        number: int,
        detector: LoopDetector,
        rules: HoldRules,
        client: ClientSide,
        *,
        now: float = -1.0,
        hide_reasoning: bool = False,
    ) -> None:
        self.number = number
        self.detector = detector
        self.blocks: dict[int, BlockStarted] = {}
        self.open: set[int] = set()
        self.stopped: set[int] = set()
        self.pruned: dict[int, int] = {}  # up index -> chars dropped from that block
        self.suppressed: set[int] = set()
        self.fed = {"reasoning": 0, "text": 0}
        self.released = {"reasoning": 0, "text": 0}
        # chars of each channel the client had from earlier attempts when this one began
        self.visible_base = dict(client.visible_chars)
        self.channel_text: dict[str, list[str]] = {"reasoning": [], "text": []}
        self.deltas = 0  # reasoning and text deltas received (see ``tokens``)
        self.queue = ReleaseQueue()
        self.usage = Usage()  # everything the upstream reported, message start included
        self.reported = Usage()  # what its end-of-message usage said (passed on at the finish)
        self.finish: FinishReported | None = None
        # a continuation after text reached the client: its reasoning is watched, not shown
        # (a reasoning block after text makes clients that show the text after the last one
        # drop the answer kept before the loop)
        self.hide_reasoning = hide_reasoning
        # the loop a delta just confirmed, for the engine to act on (None: none)
        self.hit: Hit | None = None
        # True while channel text waits for the end of a batch of events to be judged
        self.release_due = False
        self.more = False  # further events of the same read follow this one
        # the adapter's clock (ms); -1: no time told yet
        self.now = now
        # the rules and the shared client side, unpacked: the per-delta path reads them
        self._watched = rules.watched
        self._acting = rules.acting
        self._hold_max = rules.max_chars
        self._hold_ms = rules.max_ms
        self._marker = rules.marker
        self._lang = rules.lang
        self._blocks = client.blocks
        self._stats = client.stats
        self._visible = client.visible
        self._visible_chars = client.visible_chars

    # ------------------------------------------------------------------ what it streamed

    def text_of(self, channel: str) -> str:
        joined = "".join(self.channel_text[channel])
        self.channel_text[channel] = [joined]
        return joined

    def tokens(self) -> int:
        """Output tokens of this attempt: reported, or estimated from what it streamed (a cut
        attempt never gets to its final usage). OpenAI-compatible servers stream about one
        token per delta; Anthropic's deltas hold several, where the text estimate is
        higher."""
        streamed = sum(estimate_tokens(self.text_of(c)) for c in ("reasoning", "text"))
        return max(self.usage.output_tokens or 0, streamed, self.deltas)

    def tool_call_open(self) -> bool:
        """True while a block a cut never goes into streams."""
        return any(self.blocks[i].kind in _UNCUT_KINDS for i in self.open)

    def upstream_loop(self, word: str) -> tuple[Hit, int] | None:
        """The loop the upstream stopped the answer on (it finished with ``word``), and its
        block: in the watched channel that was streaming, the detector's own hit when the last
        chars confirm one, else a cut where its suspicion begins or at the last sentence end,
        whichever comes first (None: no watched text to cut)."""
        watched = [index for index, block in self.blocks.items() if self.watches(block, index)]
        if not watched:
            return None
        up_index = max(watched, key=lambda i: (i in self.open, i))
        channel: Channel = self.blocks[up_index].kind  # type: ignore[assignment]
        hit = self.detector.flush(channel)
        if hit is None:
            text = self.text_of(channel)
            sentence_end = 0
            for found in _SENTENCE_END.finditer(text):
                sentence_end = found.end()
            prune = min(self.detector.safe_offset(channel), sentence_end)
            evidence = f"the upstream finished with {word!r}"
            hit = Hit("upstream", channel, prune, prune, self.fed[channel], 0.0, None, evidence)
        return hit, up_index

    # ------------------------------------------------------------------ blocks

    def start_block(self, event: BlockStarted) -> str | None:
        """Book an upstream block's start; why it cannot start (None: it can)."""
        if event.index in self.blocks:
            return f"block {event.index} started twice"
        self.blocks[event.index] = event
        self.open.add(event.index)
        return None

    def block_problem(self, index: int, kind: BlockKind) -> str | None:
        """Why a piece of ``kind`` cannot go into upstream block ``index`` (None: it can; a
        block first seen through its content is started implicitly)."""
        block = self.blocks.get(index)
        if block is None:
            self.blocks[index] = BlockStarted(index, kind)
            self.open.add(index)
            return None
        if index in self.stopped:
            return f"content for block {index} after it stopped"
        if block.kind != kind:
            return f"{kind} content for {block.kind} block {index}"
        return None

    def stop_block(self, event: BlockStopped) -> list[EngineOutput]:
        """The block is final: whatever of it was still suspicious did not become a loop."""
        self.open.discard(event.index)
        self.stopped.add(event.index)
        self.queue.push_event(event)
        return self.release(None)

    def watches(self, block: BlockStarted, up_index: int) -> bool:
        """True when the detector judges ``block`` and none of it was cut away."""
        return block.kind in self._watched and up_index not in self.suppressed

    # ------------------------------------------------------------------ feed

    def enqueue(self, event: UpstreamEvent) -> list[EngineOutput]:
        """An event that keeps its place behind held text (out at once when none is held)."""
        queue = self.queue
        if queue:
            queue.push_event(event)
            return []
        return self.emit_event(event)

    def feed_text(
        self, index: int, channel: Channel, text: str, parts: tuple[str, ...] | None
    ) -> list[EngineOutput]:
        """A channel delta of block ``index`` (checked by the caller): fed to the detector when
        its channel is watched, then out, held or settled later. A loop it confirms is left in
        :attr:`hit`, its text queued, and nothing goes out."""
        if not text:
            return []
        if index in self.suppressed:
            self.pruned[index] = self.pruned.get(index, 0) + len(text)
            self._stats.pruned_chars += len(text)
            return []
        watched = channel in self._watched
        hit = None
        deltas = 1
        if parts is None:
            if watched:
                hit = self.detector.feed(channel, text)
        elif watched:
            # the deltas one by one, as they came: none after the one the detector fired on
            # is taken (nor was it read, had it come alone)
            detector = self.detector
            taken = 0
            deltas = len(parts)
            for number, part in enumerate(parts):
                hit = detector.feed(channel, part)
                taken += len(part)
                if hit is not None:
                    text, deltas = text[:taken], number + 1
                    break
        else:
            deltas = len(parts)
        fed = self.fed
        start = fed[channel]
        end = fed[channel] = start + len(text)
        self.channel_text[channel].append(text)
        self.deltas += deltas
        queue = self.queue
        if watched:
            if hit is not None:
                queue.push_text(index, channel, start, text, self.now)
                self.hit = hit
                return []
            if self._acting:
                if self.more:
                    # more deltas of this read follow: judge them together after the last one
                    queue.push_text(index, channel, start, text, self.now)
                    self.release_due = True
                    return []
                safe = self.safe_offset(channel)
                # this judges the whole run of the read so far: nothing is left to settle
                self.release_due = False
                if not queue and safe >= end:
                    # nothing held before it and nothing of it suspicious: straight out
                    return self.emit_text(index, channel, text)
                queue.push_text(index, channel, start, text, self.now)
                out = self.release(self.safe_offset, {channel: safe})
                self.note_held()
                return out
        if not queue:
            return self.emit_text(index, channel, text)  # nothing to hold it back
        queue.push_text(index, channel, start, text, self.now)
        if not self._acting:
            return self.release(None)
        out = self.release(self.safe_offset)
        self.note_held()
        return out

    # ------------------------------------------------------------------ settle

    def settle(self) -> list[EngineOutput]:
        """Release what the deferred run of channel text cleared."""
        self.release_due = False
        out = self.release(self.safe_offset)
        self.note_held()
        return out

    def clock(self, now_ms: float) -> None:
        """The adapter's time (ms, never going back)."""
        if self.now < 0:
            self.queue.restamp(now_ms)  # pieces from before the clock started wait from now
        self.now = now_ms

    def release_overdue(self) -> list[EngineOutput]:
        """Held text that came in ``holdMaxMs`` or more before goes out now, whatever the
        watermark says (nothing while a run of text waits to be settled)."""
        if self._hold_ms < 0 or self.release_due:
            return []
        oldest = self.queue.oldest_at()
        if oldest is None or oldest > self.now - self._hold_ms:
            return []
        out = self.release(self.safe_offset)
        self.note_held()
        return out

    def note_held(self) -> None:
        held = self.queue.held_chars
        if held > self._stats.max_held_chars:
            self._stats.max_held_chars = held

    # ------------------------------------------------------------------ release

    def safe_offset(self, channel: Channel) -> int:
        """How far ``channel`` may go out: the detector's watermark, or the hold bounds when
        they reach further (what passes a bound and then turns out loop counts as leaked)."""
        if channel not in self._watched:
            return UNLIMITED
        safe: int = self.detector.safe_offset(channel)
        bound = self.fed[channel] - self._hold_max
        now = self.now
        if now >= 0 and self._hold_ms >= 0:
            due = now - self._hold_ms
            # text coming in now is due at once only when nothing may wait (holdMaxMs 0)
            due_end = self.fed[channel] if due >= now else self.queue.due_end(channel, due)
            bound = max(bound, due_end)
        return max(safe, bound)

    def release(
        self, safe_offset: Callable[[Channel], int] | None, known: dict[str, int] | None = None
    ) -> list[EngineOutput]:
        """Queued items up to the safe offsets (everything when ``safe_offset`` is None);
        ``known``: safe offsets just asked for, not to be asked again."""
        out: list[EngineOutput] = []
        for item in self.queue.release(safe_offset, known):
            if type(item) is Released:
                out += self.emit_text(item.up_index, item.channel, item.text)
            else:
                out += self.emit_event(item)  # type: ignore[arg-type]
        return out

    def release_keeping(self, channel: Channel, keep_to: int) -> list[EngineOutput]:
        """Empty the queue for a cut: ``channel`` text up to ``keep_to`` and everything else
        goes out, ``channel`` text from ``keep_to`` on is dropped."""
        out: list[EngineOutput] = []
        for item in self.queue.drain_keeping(channel, keep_to):
            if type(item) is Released:
                out += self.emit_text(item.up_index, item.channel, item.text)
            else:
                out += self.emit_event(item)  # type: ignore[arg-type]
        return out

    def emit_text(self, up_index: int, channel: Channel, text: str) -> list[EngineOutput]:
        size = len(text)
        if self.hide_reasoning and channel == "reasoning":
            self.released[channel] += size
            return []
        index, out = self._blocks.opened(self.blocks[up_index])
        self.released[channel] += size
        self._stats.released_chars += size
        self._visible[channel].append(text)
        self._visible_chars[channel] += size
        self._blocks.sent(index, text)
        out.append(EmitDelta(index, channel, text))
        return out

    def emit_event(self, event: UpstreamEvent) -> list[EngineOutput]:
        blocks = self._blocks
        if isinstance(event, BlockStarted):
            return blocks.opened(event)[1]
        if isinstance(event, ToolArgsDelta):
            index, out = blocks.opened(self.blocks[event.index])
            return [*out, EmitDelta(index, "tool_call", event.fragment)]
        if isinstance(event, SignatureDelta):
            if event.index in self.pruned or self.hide_reasoning:
                return []  # it signs text the client never received
            index, out = blocks.opened(self.blocks[event.index])
            return [*out, EmitSignature(index, event.signature)]
        if isinstance(event, Opaque):
            if event.index is None:
                return [EmitOpaque(None, event.payload)]
            if event.index in self.suppressed:
                return []  # it belongs to text that was cut away
            index, out = blocks.opened(self.blocks[event.index])
            return [*out, EmitOpaque(index, event.payload)]
        if isinstance(event, BlockStopped):
            out = []
            if event.index in self.suppressed:
                out += self.marker_for(event.index, self.pruned.get(event.index, 0))
            return out + blocks.stopped(event.index)
        raise TypeError(f"not a queued event: {event!r}")  # pragma: no cover - internal misuse

    def marker_for(self, up_index: int, chars: int) -> list[EngineOutput]:
        """The one-line marker where ``chars`` of block ``up_index`` were removed."""
        if not self._marker or chars <= 0:
            return []
        block = self.blocks[up_index]
        channel = "reasoning" if block.kind == "reasoning" else "text"
        if channel == "reasoning" and self.hide_reasoning:
            return []  # in reasoning the client is not shown
        index, out = self._blocks.opened(block)
        # on a line of its own: after a newline, or first in its block
        prefix = "" if self._blocks.ends_line(index) else "\n"
        text = f"{prefix}{notes.marker(channel, chars, self._lang)}\n"
        self._stats.marker_chars += len(text)
        return [*out, EmitMarker(index, block.kind, text)]
