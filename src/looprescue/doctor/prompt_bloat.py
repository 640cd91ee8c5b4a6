"""prompt-bloat: the request prompt (system prompt + request header) keeps growing.

DSH 0.2 logs the system prompt (`system/message`) and the request header (`request/header`:
config and tool definitions) only when they are new or changed. Each model request after such
a change is one observation of the prompt's size; `promptBloatSteps` strictly growing
observations in a row are a signal, attributed to the turn the run grew in.
"""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.signals import PROMPT_BLOAT, DetourSignal, Evidence


class PromptBloatRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._steps = config.promptBloatSteps
        self._cap = config.maxEvidence
        self._system_size = 0
        self._header_size = 0
        self._changed: list[int] = []  # seqs of prompt parts logged since the last request
        self._dirty = False
        self._last_size: int | None = None
        self._growths = 0
        self._first_size = 0
        self._evidence = Evidence(self._cap)
        self._grew_this_turn = False

    def on_system_prompt(self, seq: int | None, size: int) -> None:
        self._system_size = size
        self._note_change(seq)

    def on_request_header(self, seq: int | None, size: int) -> None:
        self._header_size = size
        self._note_change(seq)

    def _note_change(self, seq: int | None) -> None:
        self._dirty = True
        if seq is not None and len(self._changed) < self._cap:
            self._changed.append(seq)

    def on_request(self) -> None:
        """A model request went out with the prompt as currently logged."""
        if not self._dirty:
            return
        size = self._system_size + self._header_size
        if self._last_size is not None and size > self._last_size:
            self._growths += 1
            self._grew_this_turn = True
        else:
            self._growths = 0
            self._first_size = size
            self._evidence = Evidence(self._cap)
        self._evidence.extend(self._changed)
        self._last_size = size
        self._changed = []
        self._dirty = False

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        grew, self._grew_this_turn = self._grew_this_turn, False
        if not grew or self._growths < self._steps:
            return []
        return [
            DetourSignal(
                kind=PROMPT_BLOAT,
                sub=None,
                turn=turn,
                metric=self._growths,
                explanation=f"the request prompt grew {self._growths} times in a row, from "
                f"{self._first_size} to {self._last_size} bytes (promptBloatSteps {self._steps})",
                evidence=self._evidence.freeze(),
            )
        ]
