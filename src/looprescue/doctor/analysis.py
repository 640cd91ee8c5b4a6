"""The doctor's fold over one session's events.

`SessionAnalysis.feed(event)` routes each event to the signal rules and returns the signals a
closing turn produced; `finish()` closes whatever is still open and adds the session-level
signals. Everything is pure: no files, no clocks. Memory stays bounded whatever the log's
length: rules keep digests, counters and capped evidence, never the events themselves.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from pydantic import ValidationError

from looprescue.config import ConfigError, DoctorConfig, LoopRescueConfig
from looprescue.doctor import events as ev
from looprescue.doctor.context_thrash import DELEGATION_EVENTS, ContextThrashRule
from looprescue.doctor.effect_churn import EffectChurnRule
from looprescue.doctor.fold import ToolCallFold
from looprescue.doctor.identity import (
    CompletedCall,
    arguments_key,
    result_digest,
    tool_name,
)
from looprescue.doctor.narration import NarrationLoopRule
from looprescue.doctor.prompt_bloat import PromptBloatRule
from looprescue.doctor.repeat_calls import RepeatedCallRule
from looprescue.doctor.retry_storm import RetryStormRule
from looprescue.doctor.signals import DetourSignal
from looprescue.doctor.tool_cycles import ToolCycleRule
from looprescue.doctor.tool_misuse import ToolMisuseRule

DoctorOptions = DoctorConfig | LoopRescueConfig | Mapping[str, Any] | None


def doctor_config(options: DoctorOptions) -> DoctorConfig:
    """Accept the doctor block, the whole config, a plain mapping of doctor keys, or None."""
    if options is None:
        return DoctorConfig()
    if isinstance(options, DoctorConfig):
        return options
    if isinstance(options, LoopRescueConfig):
        return options.doctor
    try:
        return DoctorConfig.model_validate(dict(options))
    except ValidationError as err:
        problems = "; ".join(
            f"doctor.{'.'.join(str(p) for p in item['loc'])}: "
            + ("unknown key" if item["type"] == "extra_forbidden" else item["msg"])
            for item in err.errors()
        )
        raise ConfigError(problems) from None


class _PendingCall:
    """A `tool/call` waiting for its `tool/result` (calls are released in call order)."""

    __slots__ = ("args_digest", "job_failed", "name", "result", "seq", "turn")

    def __init__(self, seq: int | None, turn: int | None, name: str, args_digest: bytes) -> None:
        self.seq = seq
        self.turn = turn
        self.name = name
        self.args_digest = args_digest
        self.job_failed = False
        self.result: tuple[int | None, ev.ToolResultFacts] | None = None

    def complete(self) -> CompletedCall:
        if self.result is None:
            return CompletedCall(self.seq, self.turn, self.name, self.args_digest)
        result_seq, facts = self.result
        failed = facts.failed or self.job_failed
        return CompletedCall(
            call_seq=self.seq,
            turn=self.turn,
            name=self.name,
            args_digest=self.args_digest,
            result_seq=result_seq,
            result_key=result_digest(failed, facts.error_code, facts.text),
            failed=failed,
            interrupted=facts.interrupted,
            error_code=facts.error_code if failed else None,
        )


class SessionAnalysis:
    """Fold a session's events into detour signals, one event at a time."""

    def __init__(
        self,
        session_id: str = "",
        options: DoctorOptions = None,
        *,
        header: Mapping[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.config = config = doctor_config(options)
        # In a subagent child the `user` prompt is the parent agent's, not a human's (§7).
        self._delegated = bool(header) and header.get("origin") == "subagent"
        self._turn: int | None = None
        self._turn_open = False
        self._finished = False
        self._emitted: set[tuple[str, int | None, str | None]] = set()
        self._pending: OrderedDict[str, _PendingCall] = OrderedDict()
        self._anonymous_calls = 0
        self.retry_storm = RetryStormRule(config)
        # runs, cycles and standing failures: the fold the proxy's guard uses too
        self.fold = ToolCallFold(
            config.toolCycleMaxWidth, config.maxTrackedTools, config.maxEvidence
        )
        self.repeats = RepeatedCallRule(config)
        self.cycles = ToolCycleRule(config)
        self.misuse = ToolMisuseRule(config, self.fold.failures)
        self.thrash = ContextThrashRule(config)
        self.bloat = PromptBloatRule(config)
        self.churn = EffectChurnRule(config)
        self.narration = NarrationLoopRule(config)

    # -- public fold --------------------------------------------------------------------------

    def feed(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        if self._finished:
            raise RuntimeError("SessionAnalysis.feed() after finish()")
        # the reader yields plain dicts: test that first, the Mapping ABC check is slow
        if type(event) is not dict and not isinstance(event, Mapping):
            return []
        kind = event.get("type")
        if not isinstance(kind, str):
            return []
        handler = self._HANDLERS.get(kind)
        if handler is not None:
            return handler(self, event)
        if kind in DELEGATION_EVENTS:
            self.thrash.on_delegation_marker(ev.seq_of(event))
        return []

    def finish(self) -> list[DetourSignal]:
        """Close the open turn (a log may end mid-turn) and add the session-level signals."""
        if self._finished:
            return []
        out = self._close_turn(self._turn)
        self._finished = True
        out += self._emit(self.misuse.finish() + self.thrash.finish())
        return out

    def table_sizes(self) -> dict[str, int]:
        """Entries in each bounded table (each at most ``maxTrackedTools``)."""
        return {
            "pendingCalls": len(self._pending),
            "repeatRuns": self.repeats.tracked,
            "cycles": self.cycles.tracked,
            "failingCalls": self.misuse.tracked,
        }

    # -- event handlers -----------------------------------------------------------------------

    def _on_turn_start(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        out = self._close_turn(self._turn)  # an unclosed previous turn, or out-of-turn events
        self._turn = ev.int_field(ev.data_of(event), "turn")
        self._turn_open = True
        return out

    def _on_turn_end(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        turn = ev.int_field(ev.data_of(event), "turn")
        out = self._close_turn(turn if turn is not None else self._turn)
        self._turn = None
        self._turn_open = False
        return out

    def _on_tool_call(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        data = ev.data_of(event)
        name = tool_name(data.get("name"))
        call_id = data.get("callId")
        if not isinstance(call_id, str) or call_id in self._pending:
            self._anonymous_calls += 1
            call_id = f"\x00anonymous-{self._anonymous_calls}"
        args = arguments_key(data.get("arguments"))
        turn = ev.int_field(data, "turn")
        self._pending[call_id] = _PendingCall(
            ev.seq_of(event), turn if turn is not None else self._turn, name, args
        )
        while len(self._pending) > self.config.maxTrackedTools:
            # bounded table: the oldest unanswered call is taken as having no result
            _, oldest = self._pending.popitem(last=False)
            self._dispatch_call(oldest.complete())
        return []

    def _on_tool_result(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        facts = ev.tool_result_facts(event)
        pending = self._pending.get(facts.call_id) if facts.call_id else None
        if pending is None and facts.source_call_seq is not None:
            pending = next(
                (p for p in self._pending.values() if p.seq == facts.source_call_seq), None
            )
        if pending is None or pending.result is not None:
            return []  # a result for no known call (e.g. a call that never started)
        pending.result = (ev.seq_of(event), facts)
        self._release_answered()
        return []

    def _on_job_settled(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        data = ev.data_of(event)
        call_id = ev.job_call_id(data)
        if call_id in self._pending and ev.job_failed(data):
            self._pending[call_id].job_failed = True
        return []

    def _on_retry(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        seq = ev.seq_of(event)
        self.retry_storm.on_retry(seq)
        self.churn.on_retry(seq)
        return []

    def _on_attempt(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        self.bloat.on_request()
        self.retry_storm.on_attempt(ev.seq_of(event))
        return []

    def _on_assistant_message(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        self.bloat.on_request()
        self.narration.on_assistant_text(ev.seq_of(event), ev.assistant_text(ev.data_of(event)))
        return []

    def _on_user_message(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        if ev.user_source_kind(ev.data_of(event)) == "user" and not self._delegated:
            self.narration.on_break()
        else:
            self.thrash.on_injected_message(ev.seq_of(event))
        return []

    def _on_system_message(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        self.bloat.on_system_prompt(ev.seq_of(event), ev.system_prompt_size(ev.data_of(event)))
        return []

    def _on_request_header(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        self.bloat.on_request_header(ev.seq_of(event), ev.request_header_size(ev.data_of(event)))
        return []

    def _on_compaction_start(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        self.thrash.on_compaction_start(ev.seq_of(event))
        return []

    def _on_subagent_descriptor(self, event: Mapping[str, Any]) -> list[DetourSignal]:
        self._delegated = True  # the first event of a child session, whatever the header says
        self.thrash.on_delegation_marker(ev.seq_of(event))
        return []

    _HANDLERS: ClassVar[
        dict[str, Callable[[SessionAnalysis, Mapping[str, Any]], list[DetourSignal]]]
    ] = {
        "turn/start": _on_turn_start,
        "turn/end": _on_turn_end,
        "tool/call": _on_tool_call,
        "tool/result": _on_tool_result,
        "job/settled": _on_job_settled,
        "llm/retry": _on_retry,
        "assistant/attempt": _on_attempt,
        "assistant/message": _on_assistant_message,
        "user/message": _on_user_message,
        "system/message": _on_system_message,
        "request/header": _on_request_header,
        "compaction/start": _on_compaction_start,
        "subagent/descriptor": _on_subagent_descriptor,
    }

    # -- plumbing -----------------------------------------------------------------------------

    def _release_answered(self) -> None:
        while self._pending:
            first = next(iter(self._pending.values()))
            if first.result is None:
                return
            self._pending.popitem(last=False)
            self._dispatch_call(first.complete())

    def _dispatch_call(self, call: CompletedCall) -> None:
        step = self.fold.on_call(call)
        self.repeats.on_step(step)
        self.cycles.on_step(step)
        self.churn.on_call(call)

    def _close_turn(self, turn: int | None) -> list[DetourSignal]:
        while self._pending:
            _, call = self._pending.popitem(last=False)
            self._dispatch_call(call.complete())
        closing = self.fold.close_turn()
        self.repeats.on_step(closing)
        self.cycles.on_step(closing)
        return self._emit(
            self.retry_storm.close_turn(turn)
            + self.repeats.close_turn(turn)
            + self.cycles.close_turn(turn)
            + self.churn.close_turn(turn)
            + self.bloat.close_turn(turn)
            + self.narration.close_turn(turn)
        )

    def _emit(self, signals: list[DetourSignal]) -> list[DetourSignal]:
        out = []
        for signal in signals:
            if signal.key in self._emitted:
                continue
            self._emitted.add(signal.key)
            out.append(dataclasses.replace(signal, session=self.session_id))
        return out


def analyze_log(
    events: Iterable[Mapping[str, Any]],
    session_id: str = "",
    options: DoctorOptions = None,
    *,
    header: Mapping[str, Any] | None = None,
) -> list[DetourSignal]:
    """One-shot analysis: exactly what folding the same events through SessionAnalysis gives."""
    analysis = SessionAnalysis(session_id, options, header=header)
    signals: list[DetourSignal] = []
    for event in events:
        signals.extend(analysis.feed(event))
    signals.extend(analysis.finish())
    return signals
