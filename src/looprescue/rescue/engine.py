"""The rescue engine: one sans-IO state machine per client response.

:meth:`RescueEngine.start` says what to send upstream first, and :meth:`RescueEngine.feed`
turns each upstream event into what to do, in order: client items go to the client,
``CloseUpstream`` closes the current upstream response (feed nothing more from it),
``SendRequest`` sends a continuation and feeds its response, ``SaveConversation`` stores the
conversation's new state, ``AuditRecord`` goes to the audit log.

The engine is the policy that joins its pieces, and the protocol's order of events; each
piece does one job and is read alone:

* ``request.py``: the request-level policy, what the client's request becomes before it goes
  upstream (history sanitized, stall nudge, retry settings);
* ``attempt.py``: one upstream attempt's stream (feed the detector, hold, settle, release);
* ``cut.py``: the cut plan for a confirmed loop (where to cut, what the client keeps, what
  follows, the note);
* ``resume.py``: the continuation, what a response carries from one attempt to the next
  (with ``continuation.py`` for the request and ``ladder.py`` for what each resume changes).

What the client sees:

* Text the detector cannot be part of a future loop (``StreamDetector.safe_offset``) is
  released at once; only the suspicious tail of a channel is held back (the attempt's queue,
  ``release.py``). When a block ends, its held text is released (the loop did not confirm
  before the model moved on).
  Held text waits at most ``holdMaxMs`` on the clock the adapter tells (``tick``) and lags the
  newest char by at most ``holdMaxChars``; what passes a bound and then turns out loop is
  counted as leaked.
* On a confirmed loop (the cut plan says what follows) the held loop text is dropped, the kept
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

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from ..config import LoopRescueConfig
from ..detect.asked import asked_ranges, asked_sections, largest_count
from ..detect.hits import Hit
from . import marker as notes
from .attempt import UNLIMITED, Attempt, ClientSide, HoldRules, LoopDetector
from .budget import MIN_RESUME_TOKENS, tokens_left
from .continuation import (
    KeptWork,
    LoopSummary,
    RequestEditor,
    summarize_loop,
)
from .conversation import ConversationState, human_texts, latest_prompt
from .cut import CutAction, CutPlan, plan_cut
from .events import (
    AuditRecord,
    BlockKind,
    BlockStarted,
    BlockStopped,
    Channel,
    CloseUpstream,
    EmitError,
    EmitFinish,
    EmitMessageStart,
    EmitOpaque,
    EmitPing,
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
    StopReason,
    TextDelta,
    ToolArgsDelta,
    UpstreamEvent,
    UpstreamFailed,
    UsageReported,
)
from .ladder import CUT, FAILED, FINISHED
from .marker import Lang
from .request import applies_to as applies_to
from .request import first_request
from .resume import DetectorInputs, Resumes
from .sanitize import HistoryCache
from .stats import RescueStats

_CHANNEL_DELTAS = (ReasoningDelta, TextDelta)
# finish reasons with which an inference engine says it stopped a looping answer itself
# (vLLM's repetition detection: "repetition"; others: "loop")
LOOP_FINISHES = frozenset({"repetition", "loop"})
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


# Each handler takes the event type its table entry pairs it with; a Callable type cannot say
# that per entry, so the event is typed loosely here and precisely in each handler.
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
        detector_factory: Callable[[], LoopDetector] | None = None,
        *,
        history_cache: HistoryCache | None = None,
        conversation_key: str = "",
    ) -> None:
        self.config = config
        self.editor = editor
        # the request continuations are built on: the client's, its history sanitized
        self.request_body = request_body
        self._history_cache = history_cache
        self._conversation_key = conversation_key
        self.conversation = conversation if conversation is not None else ConversationState()
        self.lang = lang
        self.stats = RescueStats()
        self._acting = config.mode != "observe"
        self._hold = HoldRules(
            watched=_WATCHED[config.watch],
            acting=self._acting,
            # held text never lags the newest char by more than this (config.holdMaxChars)
            max_chars=UNLIMITED if config.holdMaxChars is None else config.holdMaxChars,
            # nor waits longer than this (config.holdMaxMs), on the clock the adapter tells
            # (``tick``); -1: no bound
            max_ms=-1.0 if config.holdMaxMs is None else float(config.holdMaxMs),
            marker=config.marker,
            lang=lang,
        )
        self._client = ClientSide(self.stats)
        self._visible_chars = self._client.visible_chars
        self._blocks = self._client.blocks
        prompt = latest_prompt(request_body)
        self._resumes = Resumes(
            config,
            editor,
            lang,
            self._client,
            editor.output_budget(request_body),
            DetectorInputs(
                asked=asked_ranges(prompt),
                sections=asked_sections(prompt),
                # an agent's answer often follows a tool result: any count the human named
                # in the conversation bounds a template (the prompt's own ranges bound lists)
                asked_up_to=largest_count("\n".join(human_texts(request_body))),
            ),
            detector_factory,
        )
        self._attempt = Attempt(0, self._resumes.new_detector(), self._hold, self._client)
        self._loops_acted_on = 0
        self.state = EngineState.AWAITING_START

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
        tweaked when due (``request.py``)."""
        self.request_body, out = first_request(
            self.config,
            self.editor,
            self.request_body,
            self.conversation,
            self.lang,
            self.stats,
            self._history_cache,
            self._conversation_key,
        )
        return out

    def feed(self, event: UpstreamEvent, *, more: bool = False) -> list[EngineOutput]:
        """Process one upstream event; return what to do, in order.

        ``more``: further events of the same network read follow at once. Channel text is
        then judged (``safe_offset``) once for the whole run of deltas, after its last one,
        instead of after each: what goes out is the same, in one piece, as early as the
        client could have had it (in the same write), and the detector is asked less."""
        handler = self._table.get(type(event)) or self._fallback
        attempt = self._attempt
        if not attempt.release_due:
            attempt.more = more
            out = handler(self, event)
        else:
            # anything but more channel text first lets out what the run before it cleared
            out = [] if type(event) in _CHANNEL_DELTAS else self._settle()
            attempt.more = more
            out += handler(self, event)
        # (a continuation begun by the handler starts with nothing to settle)
        if self._attempt.release_due and not more:
            out += self._settle()
        return out

    def tick(self, now_ms: float) -> list[EngineOutput]:
        """The adapter's clock (ms, never going back): held text that came in
        ``holdMaxMs`` or more before goes out now, whatever the watermark says. The adapter
        ticks before it feeds each read; an engine never ticked has no time bound."""
        attempt = self._attempt
        attempt.clock(now_ms)
        if self._state is not EngineState.STREAMING:
            return []
        return attempt.release_overdue()

    def _settle(self) -> list[EngineOutput]:
        """Release what the deferred run of channel text cleared."""
        attempt = self._attempt
        if self._state is not EngineState.STREAMING:
            attempt.release_due = False
            return []
        return attempt.settle()

    def kept_work(self) -> KeptWork:
        """What may go back upstream: the visible reasoning up to where a loop began, and the
        visible text exactly as the client received it (markers excluded)."""
        return self._resumes.kept_work()

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
        streaming (``Attempt.upstream_loop``), cut as any other."""
        found = self._attempt.upstream_loop(word)
        if found is None:
            return []
        hit, up_index = found
        return self._on_hit(hit, up_index)

    def _on_block_started(self, event: BlockStarted) -> list[EngineOutput]:
        attempt = self._attempt
        problem = attempt.start_block(event)
        if problem is not None:
            return self._malformed(problem)
        if event.kind == "reasoning" or event.kind == "text":
            return []  # opened on the client with its first released character
        return attempt.enqueue(event)

    def _on_queued_event(self, event: ToolArgsDelta | SignatureDelta) -> list[EngineOutput]:
        kind: BlockKind = "tool_call" if isinstance(event, ToolArgsDelta) else "reasoning"
        attempt = self._attempt
        problem = attempt.block_problem(event.index, kind)
        if problem is not None:
            return self._malformed(problem)
        return attempt.enqueue(event)

    def _on_opaque(self, event: Opaque) -> list[EngineOutput]:
        """What the engine does not model goes on as it came, in its place behind held text."""
        index = event.index
        attempt = self._attempt
        if index is not None:
            if index not in attempt.blocks:
                return self._malformed(f"content for block {index} before it started")
            if index in attempt.stopped or index in attempt.suppressed:
                return []  # its block is over, or its text was cut away
        return attempt.enqueue(event)

    def _on_opaque_first(self, event: Opaque) -> list[EngineOutput]:
        # before the message began nothing is held: a message-level value goes on at once
        if event.index is not None:
            return self._on_out_of_order(event)
        return [EmitOpaque(None, event.payload)]

    def _on_channel_delta(self, event: ReasoningDelta | TextDelta) -> list[EngineOutput]:
        attempt = self._attempt
        channel: Channel = "reasoning" if type(event) is ReasoningDelta else "text"
        index = event.index
        if index not in attempt.open or attempt.blocks[index].kind != channel:
            problem = attempt.block_problem(index, channel)
            if problem is not None:
                return self._malformed(problem)
        out = attempt.feed_text(index, channel, event.text, event.parts)
        hit = attempt.hit
        if hit is None:
            return out
        attempt.hit = None
        return self._on_hit(hit, index)

    def _on_block_stopped(self, event: BlockStopped) -> list[EngineOutput]:
        attempt = self._attempt
        block = attempt.blocks.get(event.index)
        if block is None or event.index in attempt.stopped:
            return []
        out: list[EngineOutput] = []
        if attempt.watches(block, event.index):
            # The channel's text is complete: let the detector judge its last chars too.
            hit = attempt.detector.flush(block.kind)  # type: ignore[arg-type]
            if hit is not None:
                out = self._on_hit(hit, event.index)
                if self.state is not EngineState.STREAMING:
                    return out
        return out + attempt.stop_block(event)

    def _on_message_ended(self, event: MessageEnded) -> list[EngineOutput]:
        attempt = self._attempt
        out = attempt.release(None)
        for index in sorted(attempt.open):
            out += attempt.emit_event(BlockStopped(index))
        attempt.open.clear()
        out += self._blocks.close_all()
        finish = attempt.finish
        if finish is None:
            return out + self._finish("stop", None)
        return out + self._finish(finish.reason, finish.raw, finish.extra)

    def _on_failure(self, event: UpstreamFailed) -> list[EngineOutput]:
        # Held text is suspicious and the response fails anyway: it is not released.
        return self._end_with_error(event)

    # ------------------------------------------------------------------ loop confirmed

    def _on_hit(self, hit: Hit, up_index: int) -> list[EngineOutput]:
        attempt = self._attempt
        attempt.release_due = False  # the queue is settled below, whatever the action
        channel: Channel = hit.channel
        stats = self.stats
        resumes = self._resumes
        # output tokens of the response so far, this attempt included (only a cut needs them)
        spent = resumes.spent(attempt if self._acting else None)
        config = self.config
        plan = plan_cut(
            hit,
            text=attempt.text_of(channel),
            fed=attempt.fed[channel],
            released=attempt.released[channel],
            mode=config.mode,
            tool_call_open=attempt.tool_call_open(),
            tool_calls_sent=self._blocks.tool_calls_sent,
            rescues_in_a_row=self.conversation.consecutive_rescues + stats.rescues,
            max_rescues=config.maxConsecutiveRescues,
            budget=resumes.budget,
            tokens_left=tokens_left(resumes.budget, spent),
            min_resume_tokens=MIN_RESUME_TOKENS,
            marker=config.marker,
            lang=self.lang,
        )
        point = plan.point
        stats.detections += 1
        stats.kept_loop_chars += point.kept_loop_chars
        stats.leaked_loop_chars += point.leaked_loop_chars
        record = plan.record(attempt.number, attempt.queue.held_chars)
        stats.hits.append({k: v for k, v in record.items() if k != "loop_text"})
        out: list[EngineOutput] = [AuditRecord("detection", {**record, "mode": config.mode})]
        if plan.action is CutAction.OBSERVE:
            return out + attempt.release(None)
        return out + self._cut(plan, up_index, spent)

    def _cut(self, plan: CutPlan, up_index: int, spent: int) -> list[EngineOutput]:
        """Carry out ``plan``: drop the loop's text, then defer, finish or resume."""
        attempt = self._attempt
        stats = self.stats
        channel, rule, action = plan.channel, plan.hit.rule, plan.action
        pruned = len(plan.loop_text)
        keep_to = plan.point.keep_to
        self._loops_acted_on += 1
        stats.pruned_chars += pruned
        attempt.pruned[up_index] = attempt.pruned.get(up_index, 0) + pruned
        out = attempt.release_keeping(channel, keep_to)
        self._resumes.note_cut(plan, attempt)

        if action is CutAction.DEFER:
            attempt.suppressed.add(up_index)
            stats.deferred_prunes += 1
            out.append(AuditRecord("deferred_prune", {"channel": channel, "rule": rule}))
            return out

        out += attempt.marker_for(up_index, pruned)
        attempt.suppressed.update(attempt.open)
        attempt.open.clear()
        out += self._blocks.close_all()
        out.append(CloseUpstream(f"loop confirmed by rule {rule} in {channel}"))
        stats.cuts += 1
        out.append(AuditRecord("cut", {"channel": channel, "rule": rule, "action": action.value}))
        if action is CutAction.RESUME:
            summary = summarize_loop(
                channel=channel,
                channel_text=attempt.text_of(channel),
                loop_start=plan.hit.loop_start,
            )
            return out + self._resume(summary, spent)
        if action is CutAction.CAP:
            stats.cap_stops += 1
        if plan.note:
            out += self._note(plan.note)
        return out + self._finish(plan.reason, None, cut=True)

    def _note(self, text: str) -> list[EngineOutput]:
        prefix = "\n" if self._visible_chars["text"] else ""
        self.stats.marker_chars += len(prefix + text)
        return self._blocks.note(prefix + text)

    # ------------------------------------------------------------------ resume

    def _resume(self, summary: LoopSummary, spent: int) -> list[EngineOutput]:
        stats = self.stats
        stats.rescues += 1
        cut = self._attempt
        conversation = self.conversation
        body, rung, kept = self._resumes.request(
            self.request_body, summary, cut, spent, conversation, stats.rescues
        )
        stats.rung = rung
        number = cut.number + 1
        hide_reasoning = self._visible_chars["text"] > 0 and not getattr(
            self.editor, "reasoning_after_text", False
        )
        self._attempt = Attempt(
            number,
            self._resumes.new_detector(),
            self._hold,
            self._client,
            now=cut.now,
            hide_reasoning=hide_reasoning,
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

    # ------------------------------------------------------------------ endings

    def _finish(
        self,
        reason: StopReason,
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
        finish = EmitFinish(reason, raw, self._resumes.final_usage(self._attempt, cut), extra or {})
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
