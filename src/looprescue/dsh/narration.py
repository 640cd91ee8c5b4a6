"""Cross-message narration loops: the same assistant text in consecutive messages or turns.

Pure: ``observe`` each assistant message's visible text in log order; a run of identical texts
(whitespace-insensitive, at least ``min_chars`` long) reaching ``min_repeats`` messages is
returned when it ends. Messages without text (pure tool calls) neither extend nor break a run;
unlike the doctor's per-turn rule, a new turn does not break it either, because a model that
answers every prompt with the same text is stuck too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class NarrationRun:
    seqs: tuple[int, ...]
    turns: tuple[int | None, ...]
    chars: int
    text: str

    @property
    def repeats(self) -> int:
        return len(self.seqs)


def normalise(text: str) -> str:
    return " ".join(text.split())


@dataclass
class NarrationTracker:
    min_repeats: int = 3
    min_chars: int = 40
    _key: bytes | None = None
    _text: str = ""
    _seqs: list[int] = field(default_factory=list)
    _turns: list[int | None] = field(default_factory=list)

    def observe(self, seq: int, turn: int | None, text: str) -> NarrationRun | None:
        """Feed one assistant message's text; returns a run that just ended, if it counts."""
        normalised = normalise(text)
        if not normalised:
            return None
        key = hashlib.blake2b(normalised.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key == self._key:
            self._seqs.append(seq)
            self._turns.append(turn)
            return None
        ended = self.finish()
        if len(normalised) >= self.min_chars:
            self._key, self._text, self._seqs, self._turns = key, normalised, [seq], [turn]
        return ended

    def finish(self) -> NarrationRun | None:
        """End the current run (end of log); returns it if it reached ``min_repeats``."""
        run = None
        if self._key is not None and len(self._seqs) >= self.min_repeats:
            run = NarrationRun(tuple(self._seqs), tuple(self._turns), len(self._text), self._text)
        self._key, self._text, self._seqs, self._turns = None, "", [], []
        return run
