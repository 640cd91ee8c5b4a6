"""tool-cycle: a short sequence of different tool calls (A,B,A,B,…) repeated within a turn.

Such a loop never trips the consecutive-identical rule because no two neighbours are equal.
Identity is the result-aware call identity, so alternating polls whose output changes are
not a cycle.
"""

from __future__ import annotations

from collections import deque

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall
from looprescue.doctor.signals import TOOL_CYCLE, DetourSignal, Evidence

MIN_WIDTH = 2


def has_smaller_period(unit: tuple) -> bool:
    """True when ``unit`` is itself a repetition of a shorter unit (then the shorter width,
    or the consecutive-identical rule for width 1, owns the finding)."""
    width = len(unit)
    return any(
        width % d == 0 and all(unit[i] == unit[i % d] for i in range(width))
        for d in range(1, width)
    )


class _Stretch:
    """The current periodic stretch for one width: calls where call[i] == call[i - width]."""

    __slots__ = ("evidence", "matches", "names", "unit")

    def __init__(self, cap: int, window: list[CompletedCall]) -> None:
        self.matches = 0
        self.unit = tuple(call.identity for call in window)
        self.names = tuple(call.name for call in window)
        self.evidence = Evidence(cap)
        self.evidence.extend([c.call_seq for c in window if c.call_seq is not None])


class ToolCycleRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._max_width = config.toolCycleMaxWidth
        self._min_repeats = config.toolCycleMinRepeats
        self._cap = config.maxEvidence
        self._max_cycles = config.maxTrackedTools
        self._reset()

    def _reset(self) -> None:
        self._recent: deque[CompletedCall] = deque(maxlen=self._max_width)
        self._stretches: dict[int, _Stretch] = {}
        self._best: dict[str, tuple[int, int, tuple[int, ...]]] = {}

    def on_call(self, call: CompletedCall) -> None:
        recent = self._recent
        for width in range(MIN_WIDTH, self._max_width + 1):
            if len(recent) >= width and recent[-width].identity == call.identity:
                stretch = self._stretches.get(width)
                if stretch is None:
                    stretch = _Stretch(self._cap, list(recent)[-width:])
                    self._stretches[width] = stretch
                stretch.matches += 1
                stretch.evidence.add(call.call_seq)
            else:
                self._close_stretch(width)
        recent.append(call)

    def _close_stretch(self, width: int) -> None:
        stretch = self._stretches.pop(width, None)
        if stretch is None:
            return
        length = stretch.matches + width
        repeats = length // width
        if repeats < self._min_repeats or has_smaller_period(stretch.unit):
            return
        sub = "cycle:" + ">".join(stretch.names)
        best = self._best.get(sub)
        if best is None and len(self._best) >= self._max_cycles:
            return
        if best is None or (repeats, length) > best[:2]:
            self._best[sub] = (repeats, length, stretch.evidence.freeze())

    @property
    def tracked(self) -> int:
        return len(self._best)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        for width in range(MIN_WIDTH, self._max_width + 1):
            self._close_stretch(width)
        best = self._best
        self._reset()
        return [
            DetourSignal(
                kind=TOOL_CYCLE,
                sub=sub,
                turn=turn,
                metric=repeats,
                explanation=f"the call sequence {sub.removeprefix('cycle:')} repeated "
                f"{repeats} times with identical arguments and results "
                f"(toolCycleMinRepeats {self._min_repeats})",
                evidence=evidence,
            )
            for sub, (repeats, _length, evidence) in sorted(best.items())
        ]
