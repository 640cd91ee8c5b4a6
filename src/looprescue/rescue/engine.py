"""The rescue engine: one sans-IO state machine per client response.

It owns every request-level decision: :meth:`RescueEngine.start` says what to send upstream
first (the client's body, with a stall nudge or the retry overrides when due), and
:meth:`RescueEngine.feed` turns each upstream event into what to do, in order: client items go
to the client, ``CloseUpstream`` closes the current upstream response (feed nothing more from
it), ``SendRequest`` sends a continuation and feeds its response, ``SaveConversation`` stores
the conversation's new state, ``AuditRecord`` goes to the audit log.

What the client sees:

* Text the detector cannot be part of a future loop (``StreamDetector.safe_offset``) is
  released at once; only the suspicious tail of a channel is held back (``release.py``). When a
  block ends, its held text is released (the loop did not confirm before the model moved on).
  Held text waits at most ``holdMaxMs`` on the clock the adapter tells (``tick``) and lags the
  newest char by at most ``holdMaxChars``; what passes a bound and then turns out loop is
  counted as leaked.
* On a confirmed loop (``cut.py`` decides what follows) the held loop text is dropped, the kept
  prefix is released, an optional one-line marker follows, and then (``rescue``) the
  continuation streams into the same response with client block indices continuing where they
  stopped (``blocks.py``), and one finish at the end.
* A loop confirmed while a tool call is streaming is not cut: the rest of the looping block is
  dropped and the marker added when the block ends, so the tool call arrives intact.
* A pruned block's signature is dropped: it covered text the client never received.
* An upstream stream that breaks the protocol's order (content before the message start, a
  delta for a block of another kind or one already stopped) ends with an in-band error.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..config import LoopRescueConfig
from ..detect.asked import asked_ranges
from ..detect.hits import Hit
from . import marker as notes
from .blocks import ClientBlocks
from .budget import MIN_RESUME_TOKENS, estimate_tokens, tokens_left
from .continuation import (
    KeptWork,
    RequestEditor,
    build_continuation,
    correction_inputs,
    has_retry_overrides,
    summarize_loop,
)
from .conversation import ConversationState, latest_prompt
from .cut import CutAction, cut_action, cut_point
from .events import (
    AuditRecord,
    BlockKind,
    BlockStarted,
    BlockStopped,
    Channel,
    CloseUpstream,
    EmitDelta,
    EmitError,
    EmitFinish,
    EmitMarker,
    EmitMessageStart,
    EmitOpaque,
    EmitPing,
    EmitSignature,
    EngineOutput,
    FinishReported,
    MessageEnded,
    MessageStarted,
    Opaque,
    Ping,
    ReasoningDelta,
    ResumeTimedOut,
    SaveConversation,
    SendRequest,
    SignatureDelta,
    TextDelta,
    ToolArgsDelta,
    UpstreamEvent,
    UpstreamFailed,
    Usage,
    UsageReported,
)
from .ladder import CUT, FAILED, FINISHED, rung_for, with_rung
from .marker import Lang
from .release import Released, ReleaseQueue
from .sanitize import HistoryCache, HistoryCut, sanitize_history

_UNLIMITED = 1 << 62
_CHANNEL_DELTAS = (ReasoningDelta, TextDelta)
_UNCUT_KINDS = frozenset({"tool_call", "opaque"})
# rules after whose cut the response finishes instead of resuming: the answer is whole
# (overrun), or the continuation copies its correction (parrot) or the answer shown before it
# (restate), which a new one, sent the same, would repeat
FINISHING_RULES = frozenset({"overrun", "parrot", "restate"})
# finish reasons with which an inference engine says it stopped a looping answer itself
# (vLLM's repetition detection: "repetition"; others: "loop")
LOOP_FINISHES = frozenset({"repetition", "loop"})
# where a sentence ends: after its mark and the space that follows, or at a line break
_SENTENCE_END = re.compile(r"[.!?;:](?:\s+|$)|[。！？；：]|\n")
_WATCHED: dict[str, frozenset[str]] = {
    "both": frozenset({"reasoning", "text"}),
    "reasoning": frozenset({"reasoning"}),
    "text": frozenset({"text"}),
}


class EngineState(str, Enum):
    AWAITING_START = "awaiting_start"  # before the upstream's message start
    STREAMING = "streaming"
    RESUMING = "resuming"  # a continuation was requested; waiting for its message start
    DONE = "done"  # the client response is complete (finish or error sent)


def applies_to(config: LoopRescueConfig, model: str | None) -> bool:
    """True when the request's model matches one of the configured glob patterns."""
    name = model or ""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in config.models)


@dataclass
class RescueStats:
    """What happened in one client response (the adapter can aggregate these)."""

    upstream_attempts: int = 1
    detections: int = 0
    rescues: int = 0
    cuts: int = 0
    deferred_prunes: int = 0
    cap_stops: int = 0
    resume_failures: int = 0
    pruned_chars: int = 0
    # Counted from the loop's onset when the loop is confirmed: chars of the one copy a periodic
    # loop may keep that had reached the client, and chars past the prune point that had (the
    # design target is zero).
    kept_loop_chars: int = 0
    leaked_loop_chars: int = 0
    released_chars: int = 0
    marker_chars: int = 0
    max_held_chars: int = 0
    hits: list[dict[str, Any]] = field(default_factory=list)
    # loops cut out of the request's history before it went upstream (``sanitize.py``)
    history_removed_chars: int = 0
    history_cuts: list[HistoryCut] = field(default_factory=list)
    # each upstream failure the engine saw: the HTTP status, else the failure's kind
    upstream_errors: list[str] = field(default_factory=list)
    # the recovery ladder's rung of the last continuation, and how the response ended on it
    rung: str = ""
    rung_outcome: str = ""


class _Attempt:
    """State of one upstream request within the response."""

    def __init__(self, number: int, detector: Any, visible_base: Mapping[str, int]) -> None:
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
        self.visible_base = dict(visible_base)
        self.channel_text: dict[str, list[str]] = {"reasoning": [], "text": []}
        self.deltas = 0  # reasoning and text deltas received (see _attempt_tokens)
        self.queue = ReleaseQueue()
        self.usage = Usage()  # everything the upstream reported, message start included
        self.reported = Usage()  # what its end-of-message usage said (passed on at the finish)
        self.finish: FinishReported | None = None
        # a continuation after text reached the client: its reasoning is watched, not shown
        # (a reasoning block after text makes clients that show the text after the last one
        # drop the answer kept before the loop)
        self.hide_reasoning = False

    def text_of(self, channel: str) -> str:
        joined = "".join(self.channel_text[channel])
        self.channel_text[channel] = [joined]
        return joined


Handler = Callable[["RescueEngine", Any], list[EngineOutput]]


class RescueEngine:
    """Cut, prune and resume one streaming (or complete) model response.

    ``editor`` is the protocol's request editor (its wire object): the engine decides what
    goes into a request, the editor knows how a protocol spells it.
    """

    def __init__(
        self,
        config: LoopRescueConfig,
        editor: RequestEditor,
        request_body: Mapping[str, Any],
        conversation: ConversationState | None = None,
        lang: Lang = "en",
        detector_factory: Callable[[], Any] | None = None,
        *,
        history_cache: HistoryCache | None = None,
        conversation_key: str = "",
    ) -> None:
        self.config = config
        self.editor = editor
        self.request_body = request_body
        self._client_body = request_body
        self._history_cache = history_cache
        self._conversation_key = conversation_key
        self.conversation = conversation if conversation is not None else ConversationState()
        self.lang = lang
        self.stats = RescueStats()
        # the numbered ranges the client's latest message asks for bound the answer's lists
        self._asked = asked_ranges(latest_prompt(request_body))
        self._correction: tuple[str, ...] = ()  # the last continuation's (rules.parrot)
        # what a continuation's answer must not write again (rules.restate): the answer the
        # client has, and the kept copy of the last loop cut out of it
        self._shown = ""
        self._shown_loop = ""
        self._loop_copy = ""
        self._detector_factory = detector_factory  # None: the default StreamDetector
        self._watched = _WATCHED[config.watch]
        # held text never lags the newest char by more than this (config.holdMaxChars)
        self._hold_max = _UNLIMITED if config.holdMaxChars is None else config.holdMaxChars
        # nor waits longer than this (config.holdMaxMs), on the clock the adapter tells
        # (``tick``); -1: no time told yet, or no bound
        self._hold_ms = -1.0 if config.holdMaxMs is None else float(config.holdMaxMs)
        self._now = -1.0
        self._acting = config.mode != "observe"
        # True while channel text waits for the end of a batch of events to be judged
        self._release_due = False
        self._more = False
        self._visible: dict[str, list[str]] = {"reasoning": [], "text": []}
        self._visible_chars = {"reasoning": 0, "text": 0}
        self._attempt = _Attempt(0, self._new_detector(), self._visible_chars)
        self._blocks = ClientBlocks()
        # what the attempts cut before this one cost (their output estimated where the cut
        # left it unreported): the client's usage adds up every attempt
        self._earlier_usage = Usage()
        self._spent_tokens = 0  # earlier attempts' output, estimated where unreported
        self._budget = editor.output_budget(request_body)
        self._loops_acted_on = 0
        # spans of the visible reasoning that belong to a loop (its kept copy): never sent back
        self._loop_spans: list[tuple[int, int]] = []
        self.state = EngineState.AWAITING_START

    def _new_detector(self) -> Any:
        factory = self._detector_factory
        if factory is not None:
            return factory()
        from ..detect import StreamDetector

        return StreamDetector(
            self.config,
            watch=self.config.watch,
            asked=self._asked,
            correction=self._correction,
            shown=self._shown,
            shown_loop=self._shown_loop,
        )

    # ------------------------------------------------------------------ public API

    @property
    def state(self) -> EngineState:
        return self._state

    @state.setter
    def state(self, state: EngineState) -> None:
        # the state's handler table, looked up once per change instead of once per event
        self._state = state
        self._table = _HANDLERS[state]
        self._fallback = _FALLBACKS[state]

    @property
    def done(self) -> bool:
        return self._state is EngineState.DONE

    @property
    def started(self) -> bool:
        """True once an upstream message started (the response has content)."""
        return self.state is not EngineState.AWAITING_START

    def start(self) -> list[EngineOutput]:
        """The first upstream request: the client's body, its history sanitized, nudged or
        tweaked when due."""
        out: list[EngineOutput] = []
        if self.config.sanitizeHistory:
            out += self._sanitize_history()
        body = self.request_body
        conversation = self.conversation
        changed = False
        if self._acting and conversation.take_stall_nudge(self.config.stallCalls):
            body = self.editor.with_user_text(body, notes.stall_nudge(self.lang))
            changed = True
        if self._acting and conversation.take_retry_request():
            changed = True
            if has_retry_overrides(self.config):
                body = self.editor.with_retry_overrides(body, self.config)
        if changed:
            out.append(SaveConversation(conversation.copy()))
        out.append(SendRequest(body, 0, changed=body is not self._client_body))
        return out

    def _sanitize_history(self) -> list[EngineOutput]:
        """Old loops out of the request's history (continuations are built on the result)."""
        result = sanitize_history(
            self.editor,
            self.request_body,
            self.config,
            self._history_cache,
            self._conversation_key,
        )
        if not result.changed:
            return []
        if self._acting:
            self.request_body = result.body
            self.stats.history_removed_chars += result.removed_chars
            self.stats.history_cuts += result.cuts
        return [AuditRecord("history", {**result.audit(), "mode": self.config.mode})]

    def feed(self, event: UpstreamEvent, *, more: bool = False) -> list[EngineOutput]:
        """Process one upstream event; return what to do, in order.

        ``more``: further events of the same network read follow at once. Channel text is
        then judged (``safe_offset``) once for the whole run of deltas, after its last one,
        instead of after each: what goes out is the same, in one piece, as early as the
        client could have had it (in the same write), and the detector is asked less."""
        handler = self._table.get(type(event)) or self._fallback
        if not self._release_due:
            self._more = more
            out = handler(self, event)
        else:
            # anything but more channel text first lets out what the run before it cleared
            out = [] if type(event) in _CHANNEL_DELTAS else self._settle()
            self._more = more
            out += handler(self, event)
        if self._release_due and not more:
            out += self._settle()
        return out

    def tick(self, now_ms: float) -> list[EngineOutput]:
        """The adapter's clock (ms, never going back): held text that came in
        ``holdMaxMs`` or more before goes out now, whatever the watermark says. The adapter
        ticks before it feeds each read; an engine never ticked has no time bound."""
        queue = self._attempt.queue
        if self._now < 0:
            queue.restamp(now_ms)  # pieces from before the clock started wait from now
        self._now = now_ms
        if self._hold_ms < 0 or self._state is not EngineState.STREAMING or self._release_due:
            return []
        oldest = queue.oldest_at()
        if oldest is None or oldest > now_ms - self._hold_ms:
            return []
        out = self._release(self._safe_offset)
        self._note_held()
        return out

    def _settle(self) -> list[EngineOutput]:
        """Release what the deferred run of channel text cleared."""
        self._release_due = False
        if self._state is not EngineState.STREAMING:
            return []
        out = self._release(self._safe_offset)
        self._note_held()
        return out

    def kept_work(self) -> KeptWork:
        """What may go back upstream: the visible reasoning up to where a loop began, and the
        visible text exactly as the client received it (markers excluded)."""
        reasoning = "".join(self._visible["reasoning"])
        if self._loop_spans:
            pieces, position = [], 0
            for start, end in self._loop_spans:
                pieces.append(reasoning[position:start])
                position = end
            reasoning = "".join(pieces) + reasoning[position:]
        return KeptWork(reasoning, "".join(self._visible["text"]))

    # ------------------------------------------------------------------ awaiting_start

    def _on_message_started(self, event: MessageStarted) -> list[EngineOutput]:
        self._attempt.usage = self._attempt.usage.merged(event.usage)
        self.state = EngineState.STREAMING
        return [EmitMessageStart(event.message_id, event.model, event.usage, event.meta)]

    def _on_out_of_order(self, event: UpstreamEvent) -> list[EngineOutput]:
        message = f"unexpected {type(event).__name__} in state {self.state.value}"
        return self._malformed(message)

    def _malformed(self, message: str) -> list[EngineOutput]:
        return self._end_with_error(UpstreamFailed("malformed", message))

    def _ignore(self, event: UpstreamEvent) -> list[EngineOutput]:
        return []

    # ------------------------------------------------------------------ streaming

    def _on_ping(self, event: Ping) -> list[EngineOutput]:
        return [EmitPing()]

    def _on_usage(self, event: UsageReported) -> list[EngineOutput]:
        self._attempt.usage = self._attempt.usage.merged(event.usage)
        self._attempt.reported = self._attempt.reported.merged(event.usage)
        return []

    def _on_finish_reported(self, event: FinishReported) -> list[EngineOutput]:
        self._attempt.finish = event
        if event.raw in LOOP_FINISHES:
            return self._on_upstream_loop(event.raw or "")
        return []

    def _on_upstream_loop(self, word: str) -> list[EngineOutput]:
        """The upstream stopped the answer as a loop: a detected loop in the channel that was
        streaming, pruned at the onset the detector finds (its own hit, else where its
        suspicion begins) or at the last sentence end, whichever comes first."""
        attempt = self._attempt
        watched = [
            index
            for index, block in attempt.blocks.items()
            if block.kind in self._watched and index not in attempt.suppressed
        ]
        if not watched:
            return []
        up_index = max(watched, key=lambda i: (i in attempt.open, i))
        channel: Channel = attempt.blocks[up_index].kind  # type: ignore[assignment]
        hit = attempt.detector.flush(channel)
        if hit is None:
            text = attempt.text_of(channel)
            fed = attempt.fed[channel]
            sentence_end = 0
            for found in _SENTENCE_END.finditer(text):
                sentence_end = found.end()
            prune = min(attempt.detector.safe_offset(channel), sentence_end)
            evidence = f"the upstream finished with {word!r}"
            hit = Hit("upstream", channel, prune, prune, fed, 0.0, None, evidence)
        return self._on_hit(hit, up_index)

    def _on_block_started(self, event: BlockStarted) -> list[EngineOutput]:
        attempt = self._attempt
        if event.index in attempt.blocks:
            return self._malformed(f"block {event.index} started twice")
        attempt.blocks[event.index] = event
        attempt.open.add(event.index)
        if event.kind == "reasoning" or event.kind == "text":
            return []  # opened on the client with its first released character
        return self._enqueue(event)

    def _block_for(self, index: int, kind: BlockKind) -> str | None:
        """Why a piece of ``kind`` cannot go into upstream block ``index`` (None: it can; a
        block first seen through its content is started implicitly)."""
        attempt = self._attempt
        block = attempt.blocks.get(index)
        if block is None:
            attempt.blocks[index] = BlockStarted(index, kind)
            attempt.open.add(index)
            return None
        if index in attempt.stopped:
            return f"content for block {index} after it stopped"
        if block.kind != kind:
            return f"{kind} content for {block.kind} block {index}"
        return None

    def _on_queued_event(self, event: ToolArgsDelta | SignatureDelta) -> list[EngineOutput]:
        kind: BlockKind = "tool_call" if isinstance(event, ToolArgsDelta) else "reasoning"
        problem = self._block_for(event.index, kind)
        if problem is not None:
            return self._malformed(problem)
        return self._enqueue(event)

    def _on_opaque(self, event: Opaque) -> list[EngineOutput]:
        """What the engine does not model goes on as it came, in its place behind held text."""
        index = event.index
        if index is not None:
            attempt = self._attempt
            if index not in attempt.blocks:
                return self._malformed(f"content for block {index} before it started")
            if index in attempt.stopped or index in attempt.suppressed:
                return []  # its block is over, or its text was cut away
        return self._enqueue(event)

    def _on_opaque_first(self, event: Opaque) -> list[EngineOutput]:
        # before the message began nothing is held: a message-level value goes on at once
        if event.index is not None:
            return self._on_out_of_order(event)
        return [EmitOpaque(None, event.payload)]

    def _enqueue(self, event: UpstreamEvent) -> list[EngineOutput]:
        queue = self._attempt.queue
        if queue:
            queue.push_event(event)
            return []
        return self._emit_event(event)

    def _on_channel_delta(self, event: ReasoningDelta | TextDelta) -> list[EngineOutput]:
        attempt = self._attempt
        channel: Channel = "reasoning" if type(event) is ReasoningDelta else "text"
        index = event.index
        if index not in attempt.open or attempt.blocks[index].kind != channel:
            problem = self._block_for(index, channel)
            if problem is not None:
                return self._malformed(problem)
        text = event.text
        if not text:
            return []
        if index in attempt.suppressed:
            attempt.pruned[index] = attempt.pruned.get(index, 0) + len(text)
            self.stats.pruned_chars += len(text)
            return []
        watched = channel in self._watched
        hit = None
        deltas = 1
        parts = event.parts
        if parts is None:
            if watched:
                hit = attempt.detector.feed(channel, text)
        elif watched:
            # the deltas one by one, as they came: none after the one the detector fired on
            # is taken (nor was it read, had it come alone)
            detector = attempt.detector
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
        fed = attempt.fed
        start = fed[channel]
        end = fed[channel] = start + len(text)
        attempt.channel_text[channel].append(text)
        attempt.deltas += deltas
        queue = attempt.queue
        if watched:
            if hit is not None:
                queue.push_text(index, channel, start, text, self._now)
                return self._on_hit(hit, index)
            if self._acting:
                if self._more:
                    # more deltas of this read follow: judge them together after the last one
                    queue.push_text(index, channel, start, text, self._now)
                    self._release_due = True
                    return []
                safe = self._safe_offset(channel)
                # this judges the whole run of the read so far: nothing is left to settle
                self._release_due = False
                if not queue and safe >= end:
                    # nothing held before it and nothing of it suspicious: straight out
                    return self._emit_text(index, channel, text)
                queue.push_text(index, channel, start, text, self._now)
                out = self._release(self._safe_offset, {channel: safe})
                self._note_held()
                return out
        if not queue:
            return self._emit_text(index, channel, text)  # nothing to hold it back
        queue.push_text(index, channel, start, text, self._now)
        if not self._acting:
            return self._release(None)
        out = self._release(self._safe_offset)
        self._note_held()
        return out

    def _note_held(self) -> None:
        held = self._attempt.queue.held_chars
        if held > self.stats.max_held_chars:
            self.stats.max_held_chars = held

    def _on_block_stopped(self, event: BlockStopped) -> list[EngineOutput]:
        attempt = self._attempt
        block = attempt.blocks.get(event.index)
        if block is None or event.index in attempt.stopped:
            return []
        out: list[EngineOutput] = []
        if block.kind in self._watched and event.index not in attempt.suppressed:
            # The channel's text is complete: let the detector judge its last chars too.
            hit = attempt.detector.flush(block.kind)
            if hit is not None:
                out = self._on_hit(hit, event.index)
                if self.state is not EngineState.STREAMING:
                    return out
        attempt.open.discard(event.index)
        attempt.stopped.add(event.index)
        attempt.queue.push_event(event)
        # The block is final: whatever of it was still suspicious did not become a loop.
        return out + self._release(None)

    def _on_message_ended(self, event: MessageEnded) -> list[EngineOutput]:
        attempt = self._attempt
        out = self._release(None)
        for index in sorted(attempt.open):
            out += self._emit_event(BlockStopped(index))
        attempt.open.clear()
        out += self._blocks.close_all()
        finish = attempt.finish
        if finish is None:
            return out + self._finish("stop", None)
        return out + self._finish(finish.reason, finish.raw, finish.extra)

    def _on_failure(self, event: UpstreamFailed) -> list[EngineOutput]:
        # Held text is suspicious and the response fails anyway: it is not released.
        return self._end_with_error(event)

    # ------------------------------------------------------------------ release

    def _safe_offset(self, channel: Channel) -> int:
        """How far ``channel`` may go out: the detector's watermark, or the hold bounds when
        they reach further (what passes a bound and then turns out loop counts as leaked)."""
        if channel not in self._watched:
            return _UNLIMITED
        attempt = self._attempt
        safe: int = attempt.detector.safe_offset(channel)
        bound = attempt.fed[channel] - self._hold_max
        now = self._now
        if now >= 0 and self._hold_ms >= 0:
            due = now - self._hold_ms
            # text coming in now is due at once only when nothing may wait (holdMaxMs 0)
            due_end = attempt.fed[channel] if due >= now else attempt.queue.due_end(channel, due)
            bound = max(bound, due_end)
        return max(safe, bound)

    def _release(
        self, safe_offset: Callable[[Channel], int] | None, known: dict[str, int] | None = None
    ) -> list[EngineOutput]:
        """Queued items up to the safe offsets (everything when ``safe_offset`` is None);
        ``known``: safe offsets just asked for, not to be asked again."""
        out: list[EngineOutput] = []
        for item in self._attempt.queue.release(safe_offset, known):
            if type(item) is Released:
                out += self._emit_text(item.up_index, item.channel, item.text)
            else:
                out += self._emit_event(item)  # type: ignore[arg-type]
        return out

    def _emit_text(self, up_index: int, channel: Channel, text: str) -> list[EngineOutput]:
        attempt = self._attempt
        size = len(text)
        if attempt.hide_reasoning and channel == "reasoning":
            attempt.released[channel] += size
            return []
        index, out = self._blocks.opened(attempt.blocks[up_index])
        attempt.released[channel] += size
        self.stats.released_chars += size
        self._visible[channel].append(text)
        self._visible_chars[channel] += size
        self._blocks.sent(index, text)
        out.append(EmitDelta(index, channel, text))
        return out

    def _emit_event(self, event: UpstreamEvent) -> list[EngineOutput]:
        attempt = self._attempt
        if isinstance(event, BlockStarted):
            return self._blocks.opened(event)[1]
        if isinstance(event, ToolArgsDelta):
            index, out = self._blocks.opened(attempt.blocks[event.index])
            return [*out, EmitDelta(index, "tool_call", event.fragment)]
        if isinstance(event, SignatureDelta):
            if event.index in attempt.pruned or attempt.hide_reasoning:
                return []  # it signs text the client never received
            index, out = self._blocks.opened(attempt.blocks[event.index])
            return [*out, EmitSignature(index, event.signature)]
        if isinstance(event, Opaque):
            if event.index is None:
                return [EmitOpaque(None, event.payload)]
            if event.index in attempt.suppressed:
                return []  # it belongs to text that was cut away
            index, out = self._blocks.opened(attempt.blocks[event.index])
            return [*out, EmitOpaque(index, event.payload)]
        if isinstance(event, BlockStopped):
            out = []
            if event.index in attempt.suppressed:
                out += self._marker_for(event.index, attempt.pruned.get(event.index, 0))
            return out + self._blocks.stopped(event.index)
        raise TypeError(f"not a queued event: {event!r}")  # pragma: no cover - internal misuse

    # ------------------------------------------------------------------ loop confirmed

    def _on_hit(self, hit: Any, up_index: int) -> list[EngineOutput]:
        attempt = self._attempt
        self._release_due = False  # the queue is settled below, whatever the action
        channel: Channel = hit.channel
        fed = attempt.fed[channel]
        released = attempt.released[channel]
        point = cut_point(
            loop_start=hit.loop_start, prune_offset=hit.prune_offset, released=released, fed=fed
        )
        text = attempt.text_of(channel)
        loop_text = text[point.keep_to : fed]
        stats = self.stats
        stats.detections += 1
        stats.kept_loop_chars += point.kept_loop_chars
        stats.leaked_loop_chars += point.leaked_loop_chars
        record = {
            **hit.to_dict(),
            "attempt": attempt.number,
            "kept_chars": point.keep_to,
            "chars_pruned": len(loop_text),
            "held_chars": attempt.queue.held_chars,
            "released_chars": released,
            "kept_loop_chars": point.kept_loop_chars,
            "leaked_chars": point.leaked_loop_chars,
            "leaked_loop_chars": point.leaked_loop_chars,
            "loop_text": loop_text,
        }
        stats.hits.append({k: v for k, v in record.items() if k != "loop_text"})
        out: list[EngineOutput] = [AuditRecord("detection", {**record, "mode": self.config.mode})]
        # output tokens of the response so far, this attempt included (only a cut needs them)
        spent = self._spent_tokens + (self._attempt_tokens() if self._acting else 0)
        action = cut_action(
            mode=self.config.mode,
            # a tool call, or a block of a kind the engine does not know, is never cut into
            tool_call_open=any(attempt.blocks[i].kind in _UNCUT_KINDS for i in attempt.open),
            tool_calls_sent=self._blocks.tool_calls_sent,
            rescues_in_a_row=self.conversation.consecutive_rescues + stats.rescues,
            max_rescues=self.config.maxConsecutiveRescues,
            tokens_left=tokens_left(self._budget, spent),
            min_resume_tokens=MIN_RESUME_TOKENS,
            finishes=hit.rule in FINISHING_RULES,
        )
        if action is CutAction.OBSERVE:
            return out + self._release(None)

        self._loops_acted_on += 1
        stats.pruned_chars += len(loop_text)
        attempt.pruned[up_index] = attempt.pruned.get(up_index, 0) + len(loop_text)
        for item in attempt.queue.drain_keeping(channel, point.keep_to):
            if type(item) is Released:
                out += self._emit_text(item.up_index, item.channel, item.text)
            else:
                out += self._emit_event(item)  # type: ignore[arg-type]
        onset = min(hit.loop_start, point.keep_to)
        if channel == "reasoning":
            # the continuation carries the reasoning from before the loop, none of the loop
            if not attempt.hide_reasoning:
                base = attempt.visible_base["reasoning"]
                self._loop_spans.append((base + onset, base + point.keep_to))
            self._loop_copy = ""
        else:
            self._loop_copy = text[onset : point.keep_to]

        if action is CutAction.DEFER:
            attempt.suppressed.add(up_index)
            stats.deferred_prunes += 1
            out.append(AuditRecord("deferred_prune", {"channel": channel, "rule": hit.rule}))
            return out

        out += self._marker_for(up_index, len(loop_text))
        attempt.suppressed.update(attempt.open)
        attempt.open.clear()
        out += self._blocks.close_all()
        out.append(CloseUpstream(f"loop confirmed by rule {hit.rule} in {channel}"))
        stats.cuts += 1
        out.append(
            AuditRecord("cut", {"channel": channel, "rule": hit.rule, "action": action.value})
        )
        if action is CutAction.TOOL_CALLS_DONE:
            return out + self._finish("tool_calls", None, cut=True)
        if action is CutAction.CUT:
            # the response ends with visible text saying what happened: the text's own marker,
            # else a note (a reasoning loop may leave no text at all)
            if not (channel == "text" and self.config.marker and loop_text):
                out += self._note(notes.cut_note(channel, self.lang))
            return out + self._finish("stop", None, cut=True)
        if action is CutAction.FINISH:
            return out + self._finish("stop", None, cut=True)
        if action is CutAction.CAP:
            stats.cap_stops += 1
            done = self.conversation.consecutive_rescues + stats.rescues
            note = self._note(notes.cap_note(done, self.lang))
            return out + note + self._finish("stop", None, cut=True)
        if action is CutAction.BUDGET:
            note = self._note(notes.budget_note(self._budget or 0, self.lang))
            return out + note + self._finish("max_tokens", None, cut=True)
        summary = summarize_loop(channel=channel, channel_text=text, loop_start=hit.loop_start)
        return out + self._resume(summary, spent)

    def _marker_for(self, up_index: int, chars: int) -> list[EngineOutput]:
        if not self.config.marker or chars <= 0:
            return []
        block = self._attempt.blocks[up_index]
        channel = "reasoning" if block.kind == "reasoning" else "text"
        if channel == "reasoning" and self._attempt.hide_reasoning:
            return []  # in reasoning the client is not shown
        index, out = self._blocks.opened(block)
        # on a line of its own: after a newline, or first in its block
        prefix = "" if self._blocks.ends_line(index) else "\n"
        text = f"{prefix}{notes.marker(channel, chars, self.lang)}\n"
        self.stats.marker_chars += len(text)
        return [*out, EmitMarker(index, block.kind, text)]

    def _note(self, text: str) -> list[EngineOutput]:
        prefix = "\n" if self._visible_chars["text"] else ""
        self.stats.marker_chars += len(prefix + text)
        return self._blocks.note(prefix + text)

    # ------------------------------------------------------------------ resume

    def _resume(self, summary: Any, spent: int) -> list[EngineOutput]:
        self.stats.rescues += 1
        cut_attempt = self._attempt.usage.with_output(self._attempt_tokens())
        self._earlier_usage = self._earlier_usage.added(cut_attempt)
        self._spent_tokens = spent
        kept = self.kept_work()
        body: Mapping[str, Any] = build_continuation(
            self.editor, self.request_body, kept, summary, self.lang
        )
        conversation = self.conversation
        conversation.retry_requests_left = self.config.retryRequests
        if conversation.take_retry_request() and has_retry_overrides(self.config):
            body = self.editor.with_retry_overrides(body, self.config)
        rung = self.stats.rung = rung_for(self.config, self.stats.rescues)
        body = with_rung(self.editor, body, rung, self.config)
        left = tokens_left(self._budget, self._spent_tokens)
        if left is not None:
            body = self.editor.with_output_budget(body, left)
        number = self._attempt.number + 1
        # the continuation's answer must not copy the correction it is sent
        kept_text, tools = correction_inputs(self.request_body, kept)
        self._correction = notes.correction_sentences(summary, kept_text, self.lang, tools)
        self._shown, self._shown_loop = kept.text, self._loop_copy
        self._attempt = _Attempt(number, self._new_detector(), self._visible_chars)
        self._attempt.hide_reasoning = self._visible_chars["text"] > 0 and not getattr(
            self.editor, "reasoning_after_text", False
        )
        self._blocks.new_attempt()
        self.stats.upstream_attempts += 1
        self.state = EngineState.RESUMING
        record = {
            "attempt": number,
            "rung": rung,
            "channel": summary.channel,
            "phrase": summary.phrase,
            "kept_reasoning_chars": len(kept.reasoning),
            "kept_text_chars": len(kept.text),
            "messages": len(body.get("messages") or ()),
        }
        return [
            AuditRecord("resume", record),
            SaveConversation(conversation.copy()),
            SendRequest(body, number),
        ]

    def _on_resume_started(self, event: MessageStarted) -> list[EngineOutput]:
        self._attempt.usage = self._attempt.usage.merged(event.usage)
        self.state = EngineState.STREAMING
        return []

    def _on_resume_failed(self, event: UpstreamFailed | ResumeTimedOut) -> list[EngineOutput]:
        """The continuation failed: the response ends with the upstream's error (its status
        and type kept), never as a finished answer, so the client's retry policy sees it."""
        if isinstance(event, ResumeTimedOut):
            reason = f"no response within {event.waited_ms} ms"
            failure = UpstreamFailed("stall", f"the continuation after a cut loop gave {reason}")
            label = "timeout"
        else:
            status = f"HTTP {event.status}: " if event.status else ""
            reason = f"{status}{notes.shorten(event.message, 120)}"
            failure, label = event, _error_label(event)
        self.stats.resume_failures += 1
        self.stats.upstream_errors.append(label)
        self.state = EngineState.DONE
        return [
            CloseUpstream("resume failed"),
            AuditRecord("resume_failed", {"attempt": self._attempt.number, "reason": reason}),
            *self._rung_ended(FAILED),
            EmitError(failure.kind, failure.message, failure.error_type, failure.status),
        ]

    def _attempt_tokens(self) -> int:
        """Output tokens of the current attempt: reported, or estimated from what it streamed
        (a cut attempt never gets to its final usage). OpenAI-compatible servers stream about
        one token per delta; Anthropic's deltas hold several, where the text estimate is
        higher."""
        attempt = self._attempt
        streamed = sum(estimate_tokens(attempt.text_of(c)) for c in ("reasoning", "text"))
        return max(attempt.usage.output_tokens or 0, streamed, attempt.deltas)

    # ------------------------------------------------------------------ endings

    def _final_usage(self, cut: bool) -> Usage:
        """What the response cost: every upstream attempt's tokens added up. An attempt that
        ended on its own reports its usage (passed on as it is when it was the only one); one
        cut here never does, its output is estimated from what it streamed."""
        attempt = self._attempt
        if cut:
            usage = attempt.usage.with_output(self._attempt_tokens())
        elif attempt.number:
            usage = attempt.usage.merged(attempt.reported)
        else:
            return attempt.reported
        return self._earlier_usage.added(usage) if attempt.number else usage

    def _finish(
        self,
        reason: Any,
        raw: str | None,
        extra: Mapping[str, Any] | None = None,
        *,
        cut: bool = False,
    ) -> list[EngineOutput]:
        self.state = EngineState.DONE
        conversation = self.conversation
        conversation.record_response(
            rescues=self.stats.rescues,
            had_loop=self._loops_acted_on > 0,
            reasoning_chars=self._visible_chars["reasoning"],
            had_text=self._visible_chars["text"] > 0,
            had_tool_call=self._blocks.tool_calls_sent > 0,
            stall_min=self.config.stallMinReasoningChars,
        )
        finish = EmitFinish(reason, raw, self._final_usage(cut), extra or {})
        ended = self._rung_ended(CUT if cut else FINISHED)
        return [*ended, SaveConversation(conversation.copy()), finish]

    def _end_with_error(self, failure: UpstreamFailed) -> list[EngineOutput]:
        self.state = EngineState.DONE
        self.stats.upstream_errors.append(_error_label(failure))
        error = EmitError(failure.kind, failure.message, failure.error_type, failure.status)
        return [*self._rung_ended(FAILED), error]

    def _rung_ended(self, outcome: str) -> list[EngineOutput]:
        """Which rung of the ladder the response ended on, and how (nothing without a resume)."""
        stats = self.stats
        if not stats.rescues:
            return []
        stats.rung_outcome = outcome
        record = {"rung": stats.rung, "resumes": stats.rescues, "outcome": outcome}
        return [AuditRecord("rung", record)]


# The engine's transitions: per state, what each upstream event means (unbound methods, so
# an engine holds no reference to itself and is freed as soon as its response is done).
_HANDLERS: dict[EngineState, dict[type, Handler]] = {
    EngineState.AWAITING_START: {
        MessageStarted: RescueEngine._on_message_started,
        Opaque: RescueEngine._on_opaque_first,
        Ping: RescueEngine._ignore,
        UpstreamFailed: RescueEngine._on_failure,
        ResumeTimedOut: RescueEngine._ignore,
    },
    EngineState.STREAMING: {
        BlockStarted: RescueEngine._on_block_started,
        ReasoningDelta: RescueEngine._on_channel_delta,
        TextDelta: RescueEngine._on_channel_delta,
        ToolArgsDelta: RescueEngine._on_queued_event,
        SignatureDelta: RescueEngine._on_queued_event,
        Opaque: RescueEngine._on_opaque,
        BlockStopped: RescueEngine._on_block_stopped,
        UsageReported: RescueEngine._on_usage,
        FinishReported: RescueEngine._on_finish_reported,
        MessageEnded: RescueEngine._on_message_ended,
        Ping: RescueEngine._on_ping,
        UpstreamFailed: RescueEngine._on_failure,
        ResumeTimedOut: RescueEngine._ignore,
    },
    EngineState.RESUMING: {
        MessageStarted: RescueEngine._on_resume_started,
        Ping: RescueEngine._on_ping,
        UpstreamFailed: RescueEngine._on_resume_failed,
        ResumeTimedOut: RescueEngine._on_resume_failed,
    },
    EngineState.DONE: {},
}
# What an event the table does not list means in each state.
_FALLBACKS: dict[EngineState, Handler] = {
    EngineState.AWAITING_START: RescueEngine._on_out_of_order,
    EngineState.STREAMING: RescueEngine._on_out_of_order,
    EngineState.RESUMING: RescueEngine._ignore,  # leftovers of the stream that was just closed
    EngineState.DONE: RescueEngine._ignore,
}


def _error_label(failure: UpstreamFailed) -> str:
    """An upstream failure in a word: its HTTP status, else its kind."""
    return str(failure.status) if failure.status else failure.kind
