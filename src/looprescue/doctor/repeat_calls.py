"""retry-storm `repeat:<tool>`: the same tool call, with the same result, back to back."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall
from looprescue.doctor.signals import RETRY_STORM, DetourSignal, Evidence


class RepeatedCallRule:
    """Finds runs of consecutive calls with one identity (tool, canonical arguments, masked
    result) within a turn. Per tool the longest run of the turn is reported."""

    def __init__(self, config: DoctorConfig) -> None:
        self._min = config.repeatToolMin
        self._cap = config.maxEvidence
        self._max_tools = config.maxTrackedTools
        self._reset()

    def _reset(self) -> None:
        self._identity: tuple | None = None
        self._name = ""
        self._length = 0
        self._evidence = Evidence(self._cap)
        self._best: dict[str, tuple[int, tuple[int, ...]]] = {}

    def on_call(self, call: CompletedCall) -> None:
        if call.identity == self._identity:
            self._length += 1
            self._evidence.add(call.call_seq)
            return
        self._close_run()
        self._identity = call.identity
        self._name = call.name
        self._length = 1
        self._evidence = Evidence(self._cap)
        self._evidence.add(call.call_seq)

    def _close_run(self) -> None:
        if self._length < self._min:
            return
        best = self._best.get(self._name)
        if best is None and len(self._best) >= self._max_tools:
            return  # table full: bounded memory wins over completeness
        if best is None or self._length > best[0]:
            self._best[self._name] = (self._length, self._evidence.freeze())

    @property
    def tracked(self) -> int:
        return len(self._best)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        self._close_run()
        best = self._best
        self._reset()
        return [
            DetourSignal(
                kind=RETRY_STORM,
                sub=f"repeat:{name}",
                turn=turn,
                metric=length,
                explanation=f"{name} was called {length} times in a row with identical arguments "
                f"and identical results (repeatToolMin {self._min})",
                evidence=evidence,
            )
            for name, (length, evidence) in sorted(best.items())
        ]
