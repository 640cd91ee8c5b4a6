"""The closing events DSH appends when it reopens a log whose last turn is open (FORMAT.md §9).

Pure: feed the records of a log in order to ``OpenTurnTracker.observe``; ``closers()`` then
returns what DSH itself would append (interrupted tool results, ``step/end``,
``turn/end {interrupted}``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from looprescue.dsh.records import Record

UNKNOWN_OUTCOME_TEXT = "The tool call was interrupted after it was started; its outcome is unknown."
NOT_STARTED_TEXT = "The tool call was interrupted before it was started."


@dataclass
class OpenTurnTracker:
    """Follows turn/step/tool-call state through a log."""

    turn: int | None = None
    step: int | None = None
    last_seq: int = -1
    last_time: float = 0
    # call id -> seq of its tool/call event (started, no result yet)
    started_calls: dict[str, int] = field(default_factory=dict)
    # call id -> True for tool-call blocks of this step's assistant messages with no tool/call
    unstarted_calls: dict[str, bool] = field(default_factory=dict)

    def observe(self, record: Record) -> None:
        """Follow one record (its typed view says what it changes)."""
        event, view = record.event, record.view
        self.last_seq = event["seq"]
        self.last_time = event["time"]
        kind = event["type"]
        if kind == "turn/start":
            self.turn, self.step = view.turn, None
            self._reset_calls()
        elif kind == "turn/end":
            self.turn = self.step = None
            self._reset_calls()
        elif kind == "step/start":
            self.step = view.step
            self._reset_calls()
        elif kind == "step/end":
            self.step = None
            self._reset_calls()
        elif kind == "assistant/message":
            for block in view.blocks:
                if block.type == "tool-call":
                    self.unstarted_calls.setdefault(block.id, True)  # type: ignore[arg-type]
        elif kind == "tool/call":
            self.unstarted_calls.pop(view.callId, None)
            self.started_calls[view.callId] = event["seq"]
        elif kind == "tool/result":
            call_id = view.call_id
            self.started_calls.pop(call_id, None)  # type: ignore[arg-type]
            self.unstarted_calls.pop(call_id, None)  # type: ignore[arg-type]

    def _reset_calls(self) -> None:
        self.started_calls = {}
        self.unstarted_calls = {}

    @property
    def turn_open(self) -> bool:
        return self.turn is not None

    def closers(self) -> list[dict]:
        """Events that close the open turn, seqs continuing the log; [] when none is open."""
        if not self.turn_open:
            return []
        events: list[dict] = []
        seq = self.last_seq + 1
        if self.step is not None:
            for call_id, call_seq in sorted(self.started_calls.items(), key=lambda kv: kv[1]):
                events.append(self._tool_result(call_id, seq, call_seq))
                seq += 1
            for call_id in self.unstarted_calls:
                events.append(self._tool_result(call_id, seq, None))
                seq += 1
            events.append(self._event("step/end", seq, {"turn": self.turn, "step": self.step}))
            seq += 1
        reason = {"kind": "interrupted"}
        events.append(self._event("turn/end", seq, {"turn": self.turn, "reason": reason}))
        return events

    def _event(self, kind: str, seq: int, data: dict) -> dict:
        return {"type": kind, "seq": seq, "time": self.last_time, "data": data}

    def _tool_result(self, call_id: str, seq: int, call_seq: int | None) -> dict:
        if call_seq is None:
            error = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
            text = NOT_STARTED_TEXT
        else:
            error = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
            text = UNKNOWN_OUTCOME_TEXT
        message = {
            "id": f"interrupted-tool-result-{call_id}-{seq}",
            "role": "tool",
            "toolCallId": call_id,
            "isError": True,
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "text", "text": text}],
        }
        event = self._event(
            "tool/result",
            seq,
            {"turn": self.turn, "step": self.step, "message": message, "error": error},
        )
        event["surfaceOp"] = "append"
        if call_seq is not None:
            event["sourceEventSeqs"] = [call_seq]
        return event
