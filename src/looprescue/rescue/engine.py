"""The rescue engine: one sans-IO state machine per client response.

The adapter feeds upstream events (``events.py``) to :meth:`RescueEngine.feed` and carries out
what comes back, in order: client items go to the client, ``CloseUpstream`` closes the current
upstream stream (feed nothing more from it), ``StartResume`` sends the continuation request and
feeds its stream, ``AuditRecord`` goes to the audit log.

What the client sees:

* Text the detector cannot be part of a future loop (``StreamDetector.safe_offset``) is
  released at once; only the suspicious tail of a channel is held back. When a block ends, its
  held text is released (the loop did not confirm before the model moved on).
* On a confirmed loop the held loop text is dropped, the kept prefix is released, an optional
  one-line marker follows, and then (``rescue``) the continuation streams into the same response
  with client block indices continuing where they stopped, and one finish at the end.
* Reasoning/text blocks open on the client lazily, with their first released character, so a
  block that turns out to be all loop never appears as an empty block.
* A loop confirmed while a tool call is streaming is not cut: the rest of the looping block is
  dropped and the marker added when the block ends, so the tool call arrives intact.
* A pruned block's signature is dropped: it covered text the client never received.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import LoopRescueConfig
from . import marker as notes
from .continuation import (
    KeptWork,
    LoopSummary,
    Protocol,
    apply_retry_overrides,
    build_continuation,
)
from .conversation import ConversationState
from .events import (
    AuditRecord,
    BlockKind,
    BlockStarted,
    BlockStopped,
    Channel,
    CloseUpstream,
    EmitBlockStart,
    EmitBlockStop,
    EmitDelta,
    EmitError,
    EmitFinish,
    EmitMarker,
    EmitMessageStart,
    EmitPing,
    EmitSignature,
    EngineOutput,
    FinishReported,
    MessageEnded,
    MessageStarted,
    Ping,
    ReasoningDelta,
    ResumeTimedOut,
    SignatureDelta,
    StartResume,
    TextDelta,
    ToolArgsDelta,
    UpstreamEvent,
    UpstreamFailed,
    Usage,
    UsageReported,
)
from .marker import Lang

_UNLIMITED = 1 << 62
_WATCHED: dict[str, frozenset[str]] = {
    "both": frozenset({"reasoning", "text"}),
    "reasoning": frozenset({"reasoning"}),
    "text": frozenset({"text"}),
}


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
    # chars past a confirmed loop's prune point that had already been released to the client
    # before the loop was confirmed; the design target is zero
    leaked_loop_chars: int = 0
    released_chars: int = 0
    marker_chars: int = 0
    max_held_chars: int = 0
    hits: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Held:
    """Channel text waiting in the release queue; ``start`` is its channel offset."""

    up_index: int
    channel: Channel
    start: int
    text: str

    @property
    def end(self) -> int:
        return self.start + len(self.text)


class _Attempt:
    """State of one upstream request within the response."""

    def __init__(self, number: int, detector: Any) -> None:
        self.number = number
        self.detector = detector
        self.blocks: dict[int, BlockStarted] = {}
        self.open: set[int] = set()
        self.client_index: dict[int, int] = {}
        self.pruned: dict[int, int] = {}  # up index -> chars dropped from that block
        self.suppressed: set[int] = set()
        self.fed = {"reasoning": 0, "text": 0}
        self.released = {"reasoning": 0, "text": 0}
        self.channel_text: dict[str, list[str]] = {"reasoning": [], "text": []}
        self.queue: deque[_Held | UpstreamEvent] = deque()
        self.held_chars = 0
        self.usage = Usage()  # everything the upstream reported, message start included
        self.reported = Usage()  # what its end-of-message usage said (passed on at the finish)
        self.finish: FinishReported | None = None

    def text_of(self, channel: str) -> str:
        joined = "".join(self.channel_text[channel])
        self.channel_text[channel] = [joined]
        return joined


Handler = Callable[[Any], list[EngineOutput]]


class RescueEngine:
    """Cut, prune and resume one streaming (or complete) model response."""

    def __init__(
        self,
        config: LoopRescueConfig,
        protocol: Protocol,
        request_body: Mapping[str, Any],
        conversation: ConversationState | None = None,
        lang: Lang = "en",
        detector_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.config = config
        self.protocol = protocol
        self.request_body = request_body
        self.conversation = conversation if conversation is not None else ConversationState()
        self.lang = lang
        self.stats = RescueStats()
        self._detector_factory = detector_factory or self._default_detector
        self._watched = _WATCHED[config.watch]
        self._holding = config.mode != "observe"
        self.state = "awaiting_start"
        self._attempt = _Attempt(0, self._detector_factory())
        self._next_client_index = 0
        self._client_open: dict[int, BlockKind] = {}
        self._block_tail: dict[int, str] = {}  # last character sent in each client block
        self._visible: dict[str, list[str]] = {"reasoning": [], "text": []}
        self._tool_calls_emitted = 0
        self._earlier_output_tokens = 0
        self._loops_acted_on = 0
        self._handlers: dict[str, dict[type, Handler]] = {
            "awaiting_start": {
                MessageStarted: self._on_message_started,
                Ping: self._ignore,
                UpstreamFailed: self._on_failure,
                ResumeTimedOut: self._ignore,
            },
            "streaming": {
                BlockStarted: self._on_block_started,
                ReasoningDelta: self._on_channel_delta,
                TextDelta: self._on_channel_delta,
                ToolArgsDelta: self._on_queued_event,
                SignatureDelta: self._on_queued_event,
                BlockStopped: self._on_block_stopped,
                UsageReported: self._on_usage,
                FinishReported: self._on_finish_reported,
                MessageEnded: self._on_message_ended,
                Ping: self._on_ping,
                UpstreamFailed: self._on_failure,
                ResumeTimedOut: self._ignore,
            },
            "resuming": {
                MessageStarted: self._on_resume_started,
                Ping: self._on_ping,
                UpstreamFailed: self._on_resume_failed,
                ResumeTimedOut: self._on_resume_failed,
            },
            "done": {},
        }
        # What an event the table does not list means in each state.
        self._fallbacks: dict[str, Handler] = {
            "awaiting_start": self._on_out_of_order,
            "streaming": self._on_out_of_order,
            "resuming": self._ignore,  # leftovers of the stream that was just closed
            "done": self._ignore,
        }

    def _default_detector(self) -> Any:
        from ..detect import StreamDetector

        return StreamDetector(self.config, watch=self.config.watch)

    # ------------------------------------------------------------------ public API

    @property
    def done(self) -> bool:
        return self.state == "done"

    def feed(self, event: UpstreamEvent) -> list[EngineOutput]:
        """Process one upstream event; return what to do, in order."""
        handler = self._handlers[self.state].get(type(event)) or self._fallbacks[self.state]
        return handler(event)

    def kept_work(self) -> KeptWork:
        """Client-visible reasoning and text so far (markers excluded)."""
        return KeptWork("".join(self._visible["reasoning"]), "".join(self._visible["text"]))

    # ------------------------------------------------------------------ awaiting_start

    def _on_message_started(self, event: MessageStarted) -> list[EngineOutput]:
        self._attempt.usage = self._attempt.usage.merged(event.usage)
        self.state = "streaming"
        return [EmitMessageStart(event.message_id, event.model, event.usage, event.meta)]

    def _on_out_of_order(self, event: UpstreamEvent) -> list[EngineOutput]:
        message = f"unexpected {type(event).__name__} in state {self.state}"
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
        return []

    def _on_block_started(self, event: BlockStarted) -> list[EngineOutput]:
        attempt = self._attempt
        attempt.blocks[event.index] = event
        attempt.open.add(event.index)
        if event.kind != "tool_call":
            return []  # opened on the client with its first released character
        return self._enqueue(event)

    def _on_queued_event(self, event: ToolArgsDelta | SignatureDelta) -> list[EngineOutput]:
        if event.index not in self._attempt.blocks:
            kind: BlockKind = "tool_call" if isinstance(event, ToolArgsDelta) else "reasoning"
            self._on_block_started(BlockStarted(event.index, kind))
        return self._enqueue(event)

    def _enqueue(self, event: UpstreamEvent) -> list[EngineOutput]:
        queue = self._attempt.queue
        if queue:
            queue.append(event)
            return []
        return self._emit_event(event)

    def _on_channel_delta(self, event: ReasoningDelta | TextDelta) -> list[EngineOutput]:
        attempt = self._attempt
        channel: Channel = "reasoning" if isinstance(event, ReasoningDelta) else "text"
        if event.index not in attempt.blocks:
            self._on_block_started(BlockStarted(event.index, channel))
        if not event.text:
            return []
        if event.index in attempt.suppressed:
            attempt.pruned[event.index] = attempt.pruned.get(event.index, 0) + len(event.text)
            self.stats.pruned_chars += len(event.text)
            return []
        start = attempt.fed[channel]
        attempt.fed[channel] = start + len(event.text)
        attempt.channel_text[channel].append(event.text)
        attempt.queue.append(_Held(event.index, channel, start, event.text))
        attempt.held_chars += len(event.text)
        hit = attempt.detector.feed(channel, event.text) if channel in self._watched else None
        if hit is not None:
            return self._on_hit(hit, event.index)
        out = self._release(force=False)
        self.stats.max_held_chars = max(self.stats.max_held_chars, attempt.held_chars)
        return out

    def _on_block_stopped(self, event: BlockStopped) -> list[EngineOutput]:
        attempt = self._attempt
        block = attempt.blocks.get(event.index)
        if block is None:
            return []
        out: list[EngineOutput] = []
        if block.kind in self._watched and event.index not in attempt.suppressed:
            # The channel's text is complete: let the detector judge its last chars too.
            hit = attempt.detector.flush(block.kind)
            if hit is not None:
                out = self._on_hit(hit, event.index)
                if self.state != "streaming":
                    return out
        attempt.open.discard(event.index)
        attempt.queue.append(event)
        # The block is final: whatever of it was still suspicious did not become a loop.
        return out + self._release(force=True)

    def _on_message_ended(self, event: MessageEnded) -> list[EngineOutput]:
        attempt = self._attempt
        out = self._release(force=True)
        for index in sorted(attempt.open):
            out += self._emit_event(BlockStopped(index))
        attempt.open.clear()
        out += self._close_client_blocks()
        finish = attempt.finish
        reason = finish.reason if finish else "stop"
        raw = finish.raw if finish else None
        return out + self._finish(reason, raw)

    def _on_failure(self, event: UpstreamFailed) -> list[EngineOutput]:
        # Held text is suspicious and the response fails anyway: it is not released.
        return self._end_with_error(event)

    # ------------------------------------------------------------------ release queue

    def _safe_offset(self, channel: Channel) -> int:
        if not self._holding or channel not in self._watched:
            return _UNLIMITED
        return self._attempt.detector.safe_offset(channel)

    def _release(self, force: bool) -> list[EngineOutput]:
        """Emit queued items up to the safe offsets (everything when ``force``). Consecutive
        released pieces of one block go out as one delta: a held tail and the next delta's
        head make one client frame, not two."""
        attempt = self._attempt
        queue = attempt.queue
        out: list[EngineOutput] = []
        safe: dict[str, int] = {}
        run: list[str] = []
        run_key: tuple[int, Channel] | None = None

        def flush_run() -> None:
            nonlocal run_key
            if run_key is not None:
                out.extend(self._emit_text(run_key[0], run_key[1], "".join(run)))
                run.clear()
                run_key = None

        while queue:
            entry = queue[0]
            if not isinstance(entry, _Held):
                flush_run()
                queue.popleft()
                out += self._emit_event(entry)
                continue
            if force:
                limit = entry.end
            else:
                if entry.channel not in safe:
                    safe[entry.channel] = self._safe_offset(entry.channel)
                limit = safe[entry.channel]
            if limit <= entry.start:
                break
            key = (entry.up_index, entry.channel)
            if key != run_key:
                flush_run()
                run_key = key
            if limit >= entry.end:
                queue.popleft()
                run.append(entry.text)
                continue
            cut = limit - entry.start
            run.append(entry.text[:cut])
            queue[0] = _Held(entry.up_index, entry.channel, limit, entry.text[cut:])
            break
        flush_run()
        return out

    def _client_block(self, up_index: int) -> tuple[int, list[EngineOutput]]:
        """The client index of upstream block ``up_index``, opening it on first use."""
        attempt = self._attempt
        if up_index in attempt.client_index:
            return attempt.client_index[up_index], []
        start = attempt.blocks[up_index]
        index = self._next_client_index
        self._next_client_index += 1
        attempt.client_index[up_index] = index
        self._client_open[index] = start.kind
        return index, [EmitBlockStart(index, start.kind, start.tool_id, start.tool_name)]

    def _emit_text(self, up_index: int, channel: Channel, text: str) -> list[EngineOutput]:
        attempt = self._attempt
        index, out = self._client_block(up_index)
        attempt.released[channel] += len(text)
        attempt.held_chars -= len(text)
        self.stats.released_chars += len(text)
        self._visible[channel].append(text)
        if text:
            self._block_tail[index] = text[-1]
        out.append(EmitDelta(index, channel, text))
        return out

    def _emit_event(self, event: UpstreamEvent) -> list[EngineOutput]:
        attempt = self._attempt
        if isinstance(event, BlockStarted):
            _, out = self._client_block(event.index)
            return out
        if isinstance(event, ToolArgsDelta):
            index, out = self._client_block(event.index)
            return [*out, EmitDelta(index, "tool_call", event.fragment)]
        if isinstance(event, SignatureDelta):
            if event.index in attempt.pruned:
                return []  # it signs text the client never received
            index, out = self._client_block(event.index)
            return [*out, EmitSignature(index, event.signature)]
        if isinstance(event, BlockStopped):
            out: list[EngineOutput] = []
            if event.index in attempt.suppressed:
                out += self._marker_for(event.index, attempt.pruned.get(event.index, 0))
            index = attempt.client_index.get(event.index)
            if index is None or index not in self._client_open:
                return out  # never opened on the client (nothing of it was released)
            kind = self._client_open.pop(index)
            if kind == "tool_call":
                self._tool_calls_emitted += 1
            return [*out, EmitBlockStop(index)]
        raise TypeError(f"not a queued event: {event!r}")  # pragma: no cover - internal misuse

    def _close_client_blocks(self) -> list[EngineOutput]:
        out: list[EngineOutput] = []
        for index in sorted(self._client_open):
            if self._client_open[index] == "tool_call":
                self._tool_calls_emitted += 1
            out.append(EmitBlockStop(index))
        self._client_open.clear()
        return out

    # ------------------------------------------------------------------ loop confirmed

    def _on_hit(self, hit: Any, up_index: int) -> list[EngineOutput]:
        attempt = self._attempt
        channel: Channel = hit.channel
        fed = attempt.fed[channel]
        keep_to = min(max(hit.prune_offset, attempt.released[channel]), fed)
        leaked = max(0, attempt.released[channel] - hit.prune_offset)
        text = attempt.text_of(channel)
        loop_text = text[keep_to:fed]
        self.stats.detections += 1
        self.stats.leaked_loop_chars += leaked
        record = {
            **hit.to_dict(),
            "attempt": attempt.number,
            "kept_chars": keep_to,
            "chars_pruned": len(loop_text),
            "held_chars": attempt.held_chars,
            "released_chars": attempt.released[channel],
            "leaked_chars": leaked,
            "loop_text": loop_text,
        }
        self.stats.hits.append({k: v for k, v in record.items() if k != "loop_text"})
        out: list[EngineOutput] = [AuditRecord("detection", {**record, "mode": self.config.mode})]
        if self.config.mode == "observe":
            return out + self._release(force=False)

        self._loops_acted_on += 1
        self.stats.pruned_chars += len(loop_text)
        attempt.pruned[up_index] = attempt.pruned.get(up_index, 0) + len(loop_text)
        out += self._flush_keeping(channel, keep_to)

        if any(attempt.blocks[i].kind == "tool_call" for i in attempt.open):
            # Never cut an open tool call: drop the rest of this block and finish normally.
            attempt.suppressed.add(up_index)
            self.stats.deferred_prunes += 1
            out.append(AuditRecord("deferred_prune", {"channel": channel, "rule": hit.rule}))
            return out

        out += self._marker_for(up_index, len(loop_text))
        for index in sorted(attempt.open):
            attempt.suppressed.add(index)
        attempt.open.clear()
        out += self._close_client_blocks()
        out.append(CloseUpstream(f"loop confirmed by rule {hit.rule} in {channel}"))
        self.stats.cuts += 1
        reason = self._cut_reason()
        out.append(AuditRecord("cut", {"channel": channel, "rule": hit.rule, "action": reason}))
        if reason == "tool_calls_done":
            return out + self._finish("tool_calls", None)
        if reason == "cut":
            return out + self._finish("stop", None)
        if reason == "cap":
            self.stats.cap_stops += 1
            done = self.conversation.consecutive_rescues + self.stats.rescues
            note = notes.cap_note(done, self.lang)
            return out + self._note_block(note) + self._finish("stop", None)
        summary = LoopSummary(
            channel=channel,
            repeated=text[hit.loop_start : max(hit.prune_offset, hit.loop_start)] or loop_text,
            repeats=float(hit.repeats),
            chars_removed=len(loop_text),
        )
        return out + self._start_resume(summary)

    def _cut_reason(self) -> str:
        if self._tool_calls_emitted:
            # Tool calls already reached the client; a continuation would need their results.
            return "tool_calls_done"
        if self.config.mode == "cut":
            return "cut"
        done = self.conversation.consecutive_rescues + self.stats.rescues
        if done >= self.config.maxConsecutiveRescues:
            return "cap"
        return "resume"

    def _flush_keeping(self, channel: Channel, keep_to: int) -> list[EngineOutput]:
        """Empty the queue: release ``channel`` text up to ``keep_to``, drop the rest of it."""
        attempt = self._attempt
        out: list[EngineOutput] = []
        while attempt.queue:
            entry = attempt.queue.popleft()
            if not isinstance(entry, _Held):
                out += self._emit_event(entry)
                continue
            if entry.channel != channel or entry.end <= keep_to:
                out += self._emit_text(entry.up_index, entry.channel, entry.text)
                continue
            if entry.start < keep_to:
                out += self._emit_text(entry.up_index, channel, entry.text[: keep_to - entry.start])
            attempt.held_chars -= max(0, entry.end - max(entry.start, keep_to))
        return out

    def _marker_for(self, up_index: int, chars: int) -> list[EngineOutput]:
        if not self.config.marker or chars <= 0:
            return []
        block = self._attempt.blocks[up_index]
        channel = "reasoning" if block.kind == "reasoning" else "text"
        index, out = self._client_block(up_index)
        # on a line of its own: after a newline, or first in its block
        prefix = "\n" if self._block_tail.get(index, "\n") != "\n" else ""
        text = f"{prefix}{notes.marker(channel, chars, self.lang)}\n"
        self.stats.marker_chars += len(text)
        return [*out, EmitMarker(index, block.kind, text)]

    def _note_block(self, text: str) -> list[EngineOutput]:
        index = self._next_client_index
        self._next_client_index += 1
        prefix = "\n" if any(self._visible["text"]) else ""
        self.stats.marker_chars += len(prefix + text)
        return [
            EmitBlockStart(index, "text"),
            EmitMarker(index, "text", prefix + text),
            EmitBlockStop(index),
        ]

    # ------------------------------------------------------------------ resume

    def _start_resume(self, summary: LoopSummary) -> list[EngineOutput]:
        self.stats.rescues += 1
        self._earlier_output_tokens += self._attempt.usage.output_tokens or 0
        body = build_continuation(
            self.protocol, self.request_body, self.kept_work(), summary, self.lang
        )
        self.conversation.retry_requests_left = self.config.retryRequests
        if self.conversation.take_retry_request():
            body = apply_retry_overrides(body, self.protocol, self.config)
        number = self._attempt.number + 1
        self._attempt = _Attempt(number, self._detector_factory())
        self.stats.upstream_attempts += 1
        self.state = "resuming"
        record = {
            "attempt": number,
            "channel": summary.channel,
            "repeated": summary.repeated,
            "kept_reasoning_chars": len("".join(self._visible["reasoning"])),
            "kept_text_chars": len("".join(self._visible["text"])),
            "messages": len(body.get("messages") or ()),
        }
        return [AuditRecord("resume", record), StartResume(body, number)]

    def _on_resume_started(self, event: MessageStarted) -> list[EngineOutput]:
        self._attempt.usage = self._attempt.usage.merged(event.usage)
        self.state = "streaming"
        return []

    def _on_resume_failed(self, event: UpstreamFailed | ResumeTimedOut) -> list[EngineOutput]:
        if isinstance(event, ResumeTimedOut):
            reason = f"no response within {event.waited_ms} ms"
        else:
            status = f"HTTP {event.status}: " if event.status else ""
            reason = f"{status}{notes.shorten(event.message, 120)}"
        self.stats.resume_failures += 1
        out: list[EngineOutput] = [
            CloseUpstream("resume failed"),
            AuditRecord("resume_failed", {"attempt": self._attempt.number, "reason": reason}),
        ]
        return (
            out
            + self._note_block(notes.resume_failed_note(reason, self.lang))
            + self._finish("stop", None)
        )

    # ------------------------------------------------------------------ endings

    def _final_usage(self) -> Usage:
        # Output tokens of every upstream attempt were generated for this response.
        return self._attempt.reported.with_output_added(self._earlier_output_tokens)

    def _finish(self, reason: Any, raw: str | None) -> list[EngineOutput]:
        self.state = "done"
        self.conversation.record_response(
            rescues=self.stats.rescues,
            had_loop=self._loops_acted_on > 0,
            reasoning_chars=len("".join(self._visible["reasoning"])),
            had_text=any(self._visible["text"]),
            had_tool_call=self._tool_calls_emitted > 0,
            stall_min=self.config.stallMinReasoningChars,
        )
        return [EmitFinish(reason, raw, self._final_usage())]

    def _end_with_error(self, failure: UpstreamFailed) -> list[EngineOutput]:
        self.state = "done"
        return [EmitError(failure.kind, failure.message, failure.error_type, failure.status)]
