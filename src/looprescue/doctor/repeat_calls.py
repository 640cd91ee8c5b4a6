"""retry-storm `repeat:<tool>`: the same tool call, with the same result, back to back."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.fold import FoldStep, Run
from looprescue.doctor.signals import RETRY_STORM, DetourSignal


class RepeatedCallRule:
    """Reports the runs the fold closes (``fold.Run``: consecutive calls with one identity)
    within a turn. Per tool the longest run of the turn is reported."""

    def __init__(self, config: DoctorConfig) -> None:
        self._min = config.repeatToolMin
        self._max_tools = config.maxTrackedTools
        self._best: dict[str, tuple[int, tuple[int, ...]]] = {}

    def on_step(self, step: FoldStep) -> None:
        if step.closed_run is not None:
            self._on_run(step.closed_run)

    def _on_run(self, run: Run) -> None:
        if run.length < self._min:
            return
        best = self._best.get(run.name)
        if best is None and len(self._best) >= self._max_tools:
            return  # table full: bounded memory wins over completeness
        if best is None or run.length > best[0]:
            self._best[run.name] = (run.length, run.evidence.freeze())

    @property
    def tracked(self) -> int:
        return len(self._best)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        """The turn's signals; the fold's ``close_turn`` step must have been fed first."""
        best, self._best = self._best, {}
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
