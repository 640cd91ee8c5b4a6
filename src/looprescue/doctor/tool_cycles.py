"""tool-cycle: a short sequence of different tool calls (A,B,A,B,…) repeated within a turn.

Such a loop never trips the consecutive-identical rule because no two neighbours are equal.
Identity is the result-aware call identity, so alternating polls whose output changes are
not a cycle. The stretches are the fold's (``fold.Stretch``); this rule reports them.
"""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.fold import MIN_WIDTH, FoldStep, Stretch, has_smaller_period
from looprescue.doctor.signals import TOOL_CYCLE, DetourSignal

__all__ = ["MIN_WIDTH", "ToolCycleRule", "has_smaller_period"]


class ToolCycleRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._min_repeats = config.toolCycleMinRepeats
        self._max_cycles = config.maxTrackedTools
        self._best: dict[str, tuple[int, int, tuple[int, ...]]] = {}

    def on_step(self, step: FoldStep) -> None:
        for stretch in step.closed_stretches:
            self._on_stretch(stretch)

    def _on_stretch(self, stretch: Stretch) -> None:
        repeats = stretch.repeats
        if repeats < self._min_repeats or not stretch.primitive:
            return
        sub = "cycle:" + ">".join(stretch.names)
        best = self._best.get(sub)
        if best is None and len(self._best) >= self._max_cycles:
            return
        if best is None or (repeats, stretch.length) > best[:2]:
            self._best[sub] = (repeats, stretch.length, stretch.evidence.freeze())

    @property
    def tracked(self) -> int:
        return len(self._best)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        """The turn's signals; the fold's ``close_turn`` step must have been fed first."""
        best, self._best = self._best, {}
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
