"""narration-loop: the assistant says the same thing message after message.

Compares the visible text of consecutive assistant messages within a turn (whitespace
collapsed, volatile tokens masked); messages without text (pure tool calls) neither extend
nor break a run, a human prompt breaks it. Reasoning is left to the text-loop detector.
"""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import digest, mask_volatile
from looprescue.doctor.signals import NARRATION_LOOP, DetourSignal, Evidence


def normalise_narration(text: str) -> str:
    return mask_volatile(" ".join(text.split()))


class NarrationLoopRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._min_repeats = config.narrationMinRepeats
        self._min_chars = config.narrationMinChars
        self._cap = config.maxEvidence
        self._reset()

    def _reset(self) -> None:
        self._key: bytes | None = None
        self._length = 0
        self._chars = 0
        self._evidence = Evidence(self._cap)
        self._best: tuple[int, int, tuple[int, ...]] | None = None

    def on_assistant_text(self, seq: int | None, text: str) -> None:
        normalised = normalise_narration(text)
        if not normalised:
            return
        if len(normalised) < self._min_chars:
            self.on_break()
            return
        key = digest(normalised)
        if key == self._key:
            self._length += 1
            self._evidence.add(seq)
            return
        self.on_break()
        self._key, self._length, self._chars = key, 1, len(normalised)
        self._evidence.add(seq)

    def on_break(self) -> None:
        if self._length >= self._min_repeats and (
            self._best is None or self._length > self._best[0]
        ):
            self._best = (self._length, self._chars, self._evidence.freeze())
        self._key, self._length, self._chars = None, 0, 0
        self._evidence = Evidence(self._cap)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        self.on_break()
        best = self._best
        self._reset()
        if best is None:
            return []
        length, chars, evidence = best
        return [
            DetourSignal(
                kind=NARRATION_LOOP,
                sub=None,
                turn=turn,
                metric=length,
                explanation=f"the same {chars}-char assistant text was repeated in {length} "
                f"consecutive messages (narrationMinRepeats {self._min_repeats})",
                evidence=evidence,
            )
        ]
