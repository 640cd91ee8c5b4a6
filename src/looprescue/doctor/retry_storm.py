"""retry-storm: the model request of one turn had to be retried again and again."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.signals import RETRY_STORM, DetourSignal, Evidence


class RetryStormRule:
    """Counts ``llm/retry`` events per turn; evidence = each retry and the failed attempt
    that caused it."""

    def __init__(self, config: DoctorConfig) -> None:
        self._min = config.retryStormMin
        self._cap = config.maxEvidence
        self._reset()

    def _reset(self) -> None:
        self._retries = 0
        self._evidence = Evidence(self._cap)
        self._failed_attempt: int | None = None

    def on_attempt(self, seq: int | None) -> None:
        self._failed_attempt = seq

    def on_retry(self, seq: int | None) -> None:
        self._retries += 1
        self._evidence.add(self._failed_attempt)
        self._failed_attempt = None
        self._evidence.add(seq)

    def close_turn(self, turn: int | None) -> list[DetourSignal]:
        retries, evidence = self._retries, self._evidence.freeze()
        self._reset()
        if retries < self._min:
            return []
        return [
            DetourSignal(
                kind=RETRY_STORM,
                sub=None,
                turn=turn,
                metric=retries,
                explanation=f"the model request was retried {retries} times in this turn "
                f"(retryStormMin {self._min})",
                evidence=evidence,
            )
        ]
