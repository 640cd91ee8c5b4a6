"""tool-misuse: a tool keeps failing turn after turn, and no success ever followed.

Reported once per tool at the end of the log, attributed to the last turn it failed in;
evidence = the failed reuse attempts (every failing call after the first, with its result).
A success of the tool forgets its failures: the agent has learnt to use it.
"""

from __future__ import annotations

from collections import OrderedDict

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall
from looprescue.doctor.signals import TOOL_MISUSE, DetourSignal, Evidence


class _Failures:
    __slots__ = ("count", "evidence", "last_turn", "turns")

    def __init__(self, cap: int) -> None:
        self.count = 0
        self.turns = 0
        self.last_turn: int | None = None
        self.evidence = Evidence(cap)


class ToolMisuseRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._min = config.toolErrorMin
        self._cap = config.maxEvidence
        self._max_tools = config.maxTrackedTools
        # least recently failing tool first, so eviction drops the stalest
        self._tools: OrderedDict[str, _Failures] = OrderedDict()

    def on_call(self, call: CompletedCall) -> None:
        if call.interrupted or call.result_key is None:
            return  # the harness stopped, or no outcome was logged: neither failure nor success
        if not call.failed:
            self._tools.pop(call.name, None)
            return
        record = self._tools.get(call.name)
        if record is None:
            if len(self._tools) >= self._max_tools:
                self._tools.popitem(last=False)
            record = self._tools[call.name] = _Failures(self._cap)
        else:
            self._tools.move_to_end(call.name)
        if record.count:
            record.evidence.add(call.call_seq)
            record.evidence.add(call.result_seq)
        record.count += 1
        if record.turns == 0 or call.turn != record.last_turn:
            record.turns += 1
        record.last_turn = call.turn

    @property
    def tracked(self) -> int:
        return len(self._tools)

    def finish(self) -> list[DetourSignal]:
        found = [
            (record.last_turn if record.last_turn is not None else -1, name, record)
            for name, record in self._tools.items()
            if record.count >= self._min and record.turns >= 2
        ]
        found.sort(key=lambda item: (item[0], item[1]))
        return [
            DetourSignal(
                kind=TOOL_MISUSE,
                sub=name,
                turn=record.last_turn,
                metric=record.count,
                explanation=f"{name} failed {record.count} times across {record.turns} turns "
                f"and never succeeded afterwards (toolErrorMin {self._min})",
                evidence=record.evidence.freeze(),
            )
            for _, name, record in found
        ]
