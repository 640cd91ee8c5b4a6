"""The tool-loop guard: the same tool call with the same result, request after request.

Every request a rescue adapter (the proxy, ``wrap()``, the LiteLLM callback) takes is judged
before it goes upstream (:meth:`ToolGuard.judge`): its history's calls, paired with their
results (``history.py``), go through the doctor's tool-call fold (``judge.py``). A loop is
steered (a note goes upstream with the request, ``notes.py``), then stopped (the guard answers
with an assistant message of the request's protocol, ``answer.py``, and the upstream is not
called). No I/O (only a bounded cache of digests): the adapters' ``RescueService`` does the
I/O, the audit and the metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import LoopRescueConfig
from ..rescue.marker import Lang
from .answer import stop_body
from .cost import LoopCost, loop_cost
from .judge import DigestCache, Rung, ToolLoop, find_loop, rung_for
from .notes import steer_note, stop_message

# the response header that tells a client what the guard did
OUTCOME_HEADER = "looprescue-outcome"
OUTCOMES: dict[Rung, str] = {
    "steer": "tool-loop-steered",
    "stop": "tool-loop-stopped",
    "watch": "tool-loop-observed",
}

__all__ = ["OUTCOMES", "OUTCOME_HEADER", "GuardVerdict", "LoopCost", "ToolGuard", "ToolLoop"]


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """A request whose history ends in a tool loop: the loop, the rung, what it cost."""

    loop: ToolLoop
    rung: Rung
    cost: LoopCost

    @property
    def outcome(self) -> str:
        return OUTCOMES[self.rung]

    def tokens(self) -> tuple[int, int]:
        """(spent, saved) input tokens to count for this request, each loop request once:
        the loop's earlier requests when it is first judged one, this request when it goes
        upstream (spent) or is stopped (saved)."""
        earlier = self.cost.earlier_tokens if self.loop.excess == 0 else 0
        if self.rung == "stop":
            return earlier, self.cost.request_tokens
        return earlier + self.cost.request_tokens, 0

    def audit(self) -> dict[str, Any]:
        cost = self.cost
        record: dict[str, Any] = {
            "outcome": self.outcome,
            **self.loop.audit(),
            "request_tokens": cost.request_tokens,
            "loop_tokens": cost.earlier_tokens + cost.request_tokens,
            "saved_tokens": cost.request_tokens if self.rung == "stop" else 0,
        }
        if cost.price is not None:
            record["loop_dollars"] = cost.dollars(record["loop_tokens"])
            record["saved_dollars"] = cost.dollars(record["saved_tokens"])
        return record


class ToolGuard:
    """Judges requests against ``config.toolGuard``."""

    def __init__(self, config: LoopRescueConfig) -> None:
        self.config = config.toolGuard
        self._acting = config.mode != "observe"
        self._cache = DigestCache()

    def judge(self, wire: Any, body: Mapping[str, Any]) -> GuardVerdict | None:
        """The loop the request's history ends in and what to do about it (None: no loop)."""
        if not self.config.enabled:
            return None
        loop = find_loop(wire.tool_history(body), self.config, self._cache)
        if loop is None:
            return None
        cost = loop_cost(body, loop, self.config.inputPrices)
        return GuardVerdict(loop, rung_for(loop, self.config, self._acting), cost)

    def steered(
        self, wire: Any, body: Mapping[str, Any], verdict: GuardVerdict, lang: Lang
    ) -> dict[str, Any]:
        """The request with the note added as the last user text (the upstream's copy only)."""
        return wire.with_user_text(body, steer_note(verdict.loop, lang))  # type: ignore[no-any-return]

    def stop_answer(
        self, wire: Any, streaming: bool, model: str, verdict: GuardVerdict, lang: Lang
    ) -> bytes:
        """The answer of a stopped request, as the client's protocol spells it."""
        return stop_body(wire, streaming, model, self.stop_text(verdict, lang))

    def stop_text(self, verdict: GuardVerdict, lang: Lang) -> str:
        """What a stopped request answers, as plain text."""
        return stop_message(verdict.loop, lang, steered=self.config.steer)
