"""effect-churn: in one turn a tool failed and the model request was retried as well: the
agent is fighting both its tools and its provider."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall
from looprescue.doctor.signals import EFFECT_CHURN, DetourSignal, Evidence


class EffectChurnRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._cap = config.maxEvidence
        self._reset()

    def _reset(self) -> None:
        self._failures = 0
        self._retries = 0
        self._evidence = Evidence(self._cap)

    def on_call(self, call: CompletedCall) -> None:
        if call.failed and not call.interrupted:
            self._failures += 1
            self._evidence.add(call.result_seq)

    def on_retry(self, seq: int | None) -> None:
        self._retries += 1
        self._evidence.add(seq)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        failures, retries = self._failures, self._retries
        evidence = tuple(sorted(self._evidence.freeze()))
        self._reset()
        if not failures or not retries:
            return []
        return [
            DetourSignal(
                kind=EFFECT_CHURN,
                sub=None,
                turn=turn,
                metric=failures + retries,
                explanation=f"{failures} failed tool result(s) and {retries} model retry(ies) "
                "in the same turn",
                evidence=evidence,
            )
        ]
