"""retry-storm: llm/retry count per turn."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.retry_storm import RetryStormRule


def test_two_retries_in_a_turn_is_a_storm_with_attempts_as_evidence() -> None:
    rule = RetryStormRule(DoctorConfig())
    rule.on_attempt(14)
    rule.on_retry(15)
    rule.on_attempt(19)
    rule.on_retry(20)
    (signal,) = rule.close_turn(1)
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("retry-storm", None, 1, 2)
    assert signal.evidence == (14, 15, 19, 20)
    assert "retryStormMin 2" in signal.explanation


def test_one_retry_is_not_a_storm_and_turns_do_not_add_up() -> None:
    rule = RetryStormRule(DoctorConfig())
    rule.on_attempt(3)
    rule.on_retry(4)
    assert rule.close_turn(1) == []
    rule.on_retry(9)
    assert rule.close_turn(2) == []


def test_threshold_is_configurable_and_retry_without_attempt_is_counted() -> None:
    rule = RetryStormRule(DoctorConfig(retryStormMin=3))
    for seq in (5, 6):
        rule.on_retry(seq)
    assert rule.close_turn(1) == []
    for seq in (7, 8, 9):
        rule.on_retry(seq)
    (signal,) = rule.close_turn(2)
    assert signal.metric == 3 and signal.evidence == (7, 8, 9)


def test_evidence_is_capped_but_the_metric_is_not() -> None:
    rule = RetryStormRule(DoctorConfig(maxEvidence=4))
    for seq in range(100, 120):
        rule.on_retry(seq)
    (signal,) = rule.close_turn(1)
    assert signal.metric == 20
    assert signal.evidence == (100, 101, 102, 103)
