"""The doctor's output: one detour signal, and the bounded evidence list rules build it from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RETRY_STORM = "retry-storm"
TOOL_CYCLE = "tool-cycle"
TOOL_MISUSE = "tool-misuse"
CONTEXT_THRASH = "context-thrash"
PROMPT_BLOAT = "prompt-bloat"
EFFECT_CHURN = "effect-churn"
NARRATION_LOOP = "narration-loop"

KINDS = (
    RETRY_STORM,
    TOOL_CYCLE,
    TOOL_MISUSE,
    CONTEXT_THRASH,
    PROMPT_BLOAT,
    EFFECT_CHURN,
    NARRATION_LOOP,
)


@dataclass(frozen=True, slots=True)
class DetourSignal:
    """One detour: which kind, where (``turn`` None = the whole session), how strong, and the
    seqs of the events that prove it."""

    kind: str
    sub: str | None
    turn: int | None
    metric: int
    explanation: str
    evidence: tuple[int, ...] = ()
    session: str = ""

    @property
    def key(self) -> tuple[str, int | None, str | None]:
        """A signal is emitted at most once per key."""
        return (self.kind, self.turn, self.sub)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "kind": self.kind,
            "sub": self.sub,
            "turn": self.turn,
            "metric": self.metric,
            "explanation": self.explanation,
            "evidence": list(self.evidence),
        }


@dataclass(slots=True)
class Evidence:
    """Seqs proving a signal, in the order seen, keeping at most ``cap`` of them so a
    pathological log cannot grow one signal without bound (``total`` still counts all)."""

    cap: int
    seqs: list[int] = field(default_factory=list)
    total: int = 0

    def add(self, seq: int | None) -> None:
        if seq is None:
            return
        self.total += 1
        if len(self.seqs) < self.cap:
            self.seqs.append(seq)

    def extend(self, seqs: list[int] | tuple[int, ...]) -> None:
        for seq in seqs:
            self.add(seq)

    def freeze(self) -> tuple[int, ...]:
        return tuple(self.seqs)
